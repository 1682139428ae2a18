#!/usr/bin/env python3
"""etnn checkpoints against the reference safetensors implementation (PyPI's safetensors):
(a) a file etnn saved is read by safetensors.numpy with the same names, shapes, dtypes and values;
(b) files safetensors wrote (F32, F64, F16) load into etnn with the values converted exactly.
Usage: interop_safetensors.py PATH_TO_INTEROP_BINARY"""
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    from safetensors.numpy import load_file, save_file
except ImportError as e:  # reported as skipped by ctest (SKIP_RETURN_CODE 77)
    print(f"skipped: {e}; scripts/install-deps.sh installs safetensors and numpy")
    sys.exit(77)

SHAPES = {"0.weight": (5, 6), "0.bias": (5,), "2.weight": (3, 5), "2.bias": (3,)}


def run(binary, mode, path):
    out = subprocess.run([binary, mode, path], check=True, capture_output=True, text=True).stdout
    values = {}
    for line in out.splitlines():
        name, value = line.split()
        values.setdefault(name, []).append(float(value))
    return {name: np.array(v).reshape(SHAPES[name]) for name, v in values.items()}


def main():
    binary = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        saved = os.path.join(tmp, "etnn.safetensors")
        printed = run(binary, "save", saved)
        tensors = load_file(saved)
        assert sorted(tensors) == sorted(SHAPES), sorted(tensors)
        for name, shape in SHAPES.items():
            assert tensors[name].dtype == np.float32 and tensors[name].shape == shape, (name, tensors[name].dtype)
            assert np.array_equal(tensors[name], printed[name].astype(np.float32)), name
        print("(a) safetensors reads etnn's file: names, shapes, F32 values equal")

        rng = np.random.default_rng(0)
        for dtype in (np.float32, np.float64, np.float16):
            written = {name: rng.standard_normal(shape).astype(dtype) for name, shape in SHAPES.items()}
            path = os.path.join(tmp, f"reference-{np.dtype(dtype).name}.safetensors")
            save_file(written, path, metadata={"format": "pt"})
            loaded = run(binary, "load", path)
            for name in SHAPES:
                assert np.array_equal(loaded[name].astype(np.float32), written[name].astype(np.float32)), (dtype, name)
            print(f"(b) etnn loads safetensors' {np.dtype(dtype).name} file: values equal after conversion to float32")


if __name__ == "__main__":
    main()
