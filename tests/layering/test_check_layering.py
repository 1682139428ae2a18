#!/usr/bin/env python3
"""The layering check catches what it is for: on a copy of include/etnn, each planted violation
(an upward include, a sideways include, a layer including a kernel header past backend/, a
__CUDACC__ test outside backend/, a kernel outside cuda/, a CUDA runtime or cuBLASLt call or a
kernel launch that bypasses cuda/'s runtime layer, a foreign folder's namespace, a private
header that does not say so or that no face reaches, a folder without its face) must
make check_layering.py fail and name the file; the untouched copy must pass."""
import pathlib
import shutil
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
CHECK = HERE / "check_layering.py"
SOURCE = HERE.parents[1] / "include" / "etnn"

PLANTS = [
    ("core/config.hpp", '#include "../train/trainer.hpp"\n', "includes ../train/trainer.hpp"),
    ("tensor/buffer.hpp", '#include "../cpu/executor.hpp"\n', "includes ../cpu/executor.hpp"),
    ("loss/mse.hpp", '#include "../optim/sgd.hpp"\n', "includes ../optim/sgd.hpp"),
    ("nn/layer.hpp", "template <int = 0> __global__ void planted_kernel() {}\n", "outside cuda/"),
    ("cuda/runtime.hpp", "namespace etnn::optim::detail { inline int planted = 0; }\n",
     "opens namespace etnn::optim::detail"),
    ("data/sampler.hpp", "namespace etnn { namespace detail { inline int planted = 0; } }\n",
     "opens namespace etnn::detail"),
    ("nn/layer.hpp", '#include "../cpu/executor.hpp"\n', "reach the kernels through a backend/ dispatch header"),
    ("loss/mse.hpp", "#if defined(__CUDACC__)\n#endif\n", "tests __CUDACC__"),
    ("cuda/memory.hpp", "inline void planted() { cudaStreamSynchronize(nullptr); }\n",
     "calls cudaStreamSynchronize directly"),
    ("cuda/blas.hpp", "inline void planted(cublasLtHandle_t* h) { ::cublasLtCreate(h); }\n",
     "calls cublasLtCreate directly"),
    ("cuda/reduce.hpp", "inline void planted() { etnn::cuda::detail::fill_kernel<<<1, 1>>>((int*)0, 0, 0); }\n",
     "launches a kernel with <<<...>>>"),
]
# New headers in nn/: one without the private marker, one that no face includes.
NEW_HEADERS = [
    ("nn/planted.hpp", "#pragma once\n// A layer of its own.\n", "does not say so"),
    ("nn/orphan.hpp", "#pragma once\n// Private to nn/: include <etnn/nn/nn.hpp> or <etnn/etnn.hpp>.\n",
     "neither nn/nn.hpp nor a header included on request"),
]


def run(root):
    return subprocess.run([sys.executable, str(CHECK), str(root)], capture_output=True, text=True)


def main():
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        copy = pathlib.Path(tmp) / "etnn"
        shutil.copytree(SOURCE, copy)
        clean = run(copy)
        if clean.returncode != 0:
            failures.append("the unmodified tree fails:\n" + clean.stdout)
        for rel, line, expected in PLANTS:
            target = copy / rel
            original = target.read_text()
            target.write_text(original + line)
            result = run(copy)
            target.write_text(original)
            if result.returncode == 0 or expected not in result.stdout or rel not in result.stdout:
                failures.append(f"planting {line.strip()!r} in {rel} was not reported as '{expected}':\n"
                                + result.stdout)
        for rel, text, expected in NEW_HEADERS:
            (copy / rel).write_text(text)
            result = run(copy)
            (copy / rel).unlink()
            if result.returncode == 0 or expected not in result.stdout or rel not in result.stdout:
                failures.append(f"a new header {rel} was not reported as '{expected}':\n" + result.stdout)
        face = copy / "optim" / "optim.hpp"
        kept = face.read_text()
        face.unlink()
        result = run(copy)
        face.write_text(kept)
        if result.returncode == 0 or "optim/: no face header optim/optim.hpp" not in result.stdout:
            failures.append("a folder without its face header was not reported:\n" + result.stdout)
    for f in failures:
        print(f)
    cases = len(PLANTS) + len(NEW_HEADERS) + 2  # and the clean tree, and the missing face
    print(f"{cases - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
