#!/usr/bin/env python3
"""Checks that include/etnn/ keeps its architecture (README, "Layers"):

  * a header includes only headers of its own folder and of folders below it, in the order
    core < expr < tensor < cpu < cuda < backend < dist < nn < loss < optim < data < io < train
    (the umbrella etnn.hpp may include any); above backend/, no header includes cpu/ or cuda/
    (layers reach the kernels through backend/'s dispatch headers), but dist/nccl.hpp, which is
    CUDA code;
  * `__global__` (a CUDA kernel) appears only under cuda/, and `__CUDACC__` (the choice of the CUDA
    backend) only in backend/, core/config.hpp, core/device.hpp, dist/nccl.hpp and etnn.hpp;
  * every call into the CUDA runtime or cuBLASLt goes through cuda::runtime() (cuda/runtime_api.hpp,
    the one header that calls them) and every kernel launch through cuda::launch (cuda/runtime.hpp,
    the one `<<<`), so that a test can watch or answer them all (tests/cuda/test_step_calls.cu);
    the error-describing cudaGetErrorName, cudaGetErrorString and cublasLtGetStatusString excepted;
  * a header opens no namespace of another folder: etnn::<folder> (and etnn::detail, etnn::check,
    which are core's) belong to that folder's headers;
  * every folder has a face header, <folder>/<folder>.hpp, and every other header but the ones
    included on request (dist/mpi.hpp, dist/nccl.hpp) says on the line after `#pragma once` that
    it is private ("// Private to ..."), and is reached from its folder's face or from a header
    included on request.

Usage: check_layering.py [ROOT]   (ROOT defaults to include/etnn next to this repository's tests/)
Prints one line per violation and exits 1 if there is any, 0 otherwise.
"""
import pathlib
import re
import sys

ORDER = ["core", "expr", "tensor", "cpu", "cuda", "backend", "dist", "nn", "loss", "optim", "data", "io", "train"]
RANK = {folder: i for i, folder in enumerate(ORDER)}
# Namespaces directly under etnn that belong to a folder other than their name.
OWNER = {"detail": "core", "check": "core"}
# Public headers besides etnn.hpp and the faces: the data-parallel policies, included on request.
ON_REQUEST = {"dist/mpi.hpp", "dist/nccl.hpp"}
# The only headers above backend/ that may include cpu/ or cuda/ headers.
BACKEND_USERS = {"dist/nccl.hpp"}
# The only headers that may test __CUDACC__, besides those of backend/.
CUDACC_USERS = {"core/config.hpp", "core/device.hpp", "dist/nccl.hpp", "etnn.hpp"}
# A call of a CUDA runtime or cuBLASLt function by its own name (not a method of cuda::runtime()),
# the header that may make them, and the calls that only describe an error code.
RUNTIME_CALL = re.compile(r"(?<![\w.])(?:::)?((?:cuda|cublasLt)[A-Z]\w*)\s*\(")
RUNTIME_CALLER = "cuda/runtime_api.hpp"
DESCRIBE_ERROR = {"cudaGetErrorName", "cudaGetErrorString", "cublasLtGetStatusString"}
LAUNCHER = "cuda/runtime.hpp"

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def strip_comments_and_strings(text):
    """The code without comments, string literals and character literals (kept as blanks)."""
    pattern = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
    return pattern.sub(lambda m: "".join("\n" if c == "\n" else " " for c in m.group(0)), text)


def opened_namespaces(code):
    """Yields (line, 'a::b::c') for every namespace the code opens, with its enclosing path."""
    stack = []  # one entry per open brace: the namespace path it opened, or None
    token = re.compile(r'\bnamespace\s+([A-Za-z_][\w:]*)\s*\{|\bnamespace\s*\{|[{}]')
    for m in token.finditer(code):
        text = m.group(0)
        if text == "{":
            stack.append(None)
        elif text == "}":
            if stack:
                stack.pop()
        else:
            name = m.group(1) or "(anonymous)"
            enclosing = next((s for s in reversed(stack) if s is not None), "")
            path = f"{enclosing}::{name}" if enclosing else name
            stack.append(path)
            yield code.count("\n", 0, m.start()) + 1, path


def folder_of(root, path):
    parts = path.relative_to(root).parts
    return parts[0] if len(parts) > 1 else None


def includes_of(path):
    """The headers path includes by a quoted #include, resolved."""
    return [(path.parent / m.group(1)).resolve() for m in INCLUDE.finditer(path.read_text())]


def reached_from(starts):
    """Every header reached from the given ones through quoted includes (them included)."""
    seen, todo = set(), [p.resolve() for p in starts if p.exists()]
    while todo:
        path = todo.pop()
        if path in seen or not path.exists():
            continue
        seen.add(path)
        todo.extend(includes_of(path))
    return seen


def check(root):
    problems = []
    faces = [root / f / f"{f}.hpp" for f in ORDER] + [root / h for h in ON_REQUEST]
    reachable = {}
    for face in faces:
        for header in reached_from([face]):
            reachable.setdefault(header, set()).add(face)
    for path in sorted(root.rglob("*.hpp")):
        folder = folder_of(root, path)
        rel = path.relative_to(root)
        if folder is not None and folder not in RANK:
            problems.append(f"{rel}: folder '{folder}' is not in the documented order {' < '.join(ORDER)}")
            continue
        text = path.read_text()
        public = folder is None or rel.as_posix() in ON_REQUEST or rel.as_posix() == f"{folder}/{folder}.hpp"
        second_line = (text.split("\n") + ["", ""])[1]
        if not public and not second_line.startswith("// Private to "):
            problems.append(f"{rel}:2: a private header that does not say so on the line after #pragma once "
                            f"('// Private to {folder}/: include <etnn/{folder}/{folder}.hpp> ...')")
        if not public:
            owners = {f.relative_to(root).as_posix() for f in reachable.get(path.resolve(), set())}
            if not owners & ({f"{folder}/{folder}.hpp"} | ON_REQUEST):
                problems.append(f"{rel}: a private header that neither {folder}/{folder}.hpp nor a header "
                                f"included on request ({', '.join(sorted(ON_REQUEST))}) reaches")
        for m in INCLUDE.finditer(text):
            target = (path.parent / m.group(1)).resolve()
            try:
                target_folder = folder_of(root, target)
            except ValueError:
                continue  # outside include/etnn
            line = text.count("\n", 0, m.start()) + 1
            if folder is None or target_folder is None or target_folder == folder:
                continue
            if (RANK[folder] > RANK["backend"] and target_folder in ("cpu", "cuda")
                    and rel.as_posix() not in BACKEND_USERS):
                problems.append(f"{rel}:{line}: includes {m.group(1)}: above backend/, reach the kernels through "
                                f"a backend/ dispatch header")
            if RANK[target_folder] > RANK[folder]:
                problems.append(f"{rel}:{line}: includes {m.group(1)}: {folder}/ may include only folders "
                                f"below it ({' < '.join(ORDER[:RANK[folder]]) or 'none'}), not {target_folder}/")
        code = strip_comments_and_strings(text)
        if folder != "backend" and rel.as_posix() not in CUDACC_USERS:
            for m in re.finditer(r"\b__CUDACC__\b", code):
                problems.append(f"{rel}:{code.count(chr(10), 0, m.start()) + 1}: tests __CUDACC__: choose the "
                                f"backend in a backend/ dispatch header")
        if folder != "cuda":
            for m in re.finditer(r"\b__global__\b", code):
                problems.append(f"{rel}:{code.count(chr(10), 0, m.start()) + 1}: a CUDA kernel (__global__) "
                                f"outside cuda/")
        if rel.as_posix() != RUNTIME_CALLER:
            for m in RUNTIME_CALL.finditer(code):
                if m.group(1) not in DESCRIBE_ERROR and not m.group(1).endswith("_t"):
                    problems.append(f"{rel}:{code.count(chr(10), 0, m.start()) + 1}: calls {m.group(1)} directly: "
                                    f"call it through cuda::runtime() ({RUNTIME_CALLER})")
        if rel.as_posix() != LAUNCHER:
            for m in re.finditer(r"<<<", code):
                problems.append(f"{rel}:{code.count(chr(10), 0, m.start()) + 1}: launches a kernel with <<<...>>>: "
                                f"launch it through cuda::launch ({LAUNCHER})")
        for line, ns in opened_namespaces(code):
            parts = ns.split("::")
            if len(parts) < 2 or parts[0] != "etnn":
                continue
            owner = OWNER.get(parts[1], parts[1] if parts[1] in RANK else None)
            if owner is not None and owner != folder and folder is not None:
                problems.append(f"{rel}:{line}: opens namespace {ns}, which belongs to {owner}/")
    for folder in ORDER:
        if (root / folder).is_dir() and not (root / folder / f"{folder}.hpp").exists():
            problems.append(f"{folder}/: no face header {folder}/{folder}.hpp")
    return problems


def main():
    default = pathlib.Path(__file__).resolve().parents[2] / "include" / "etnn"
    root = pathlib.Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else default
    problems = check(root)
    for p in problems:
        print(p)
    headers = len(list(root.rglob("*.hpp")))
    print(f"check_layering: {headers} headers, {len(problems)} violation(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
