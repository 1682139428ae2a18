#!/usr/bin/env python3
"""etnn's NumPy and CSV loaders against numpy itself: arrays written by np.save (float32 and float64
features, int64 labels), np.savez, np.savez_compressed and a CSV written by np.savetxt load into etnn
with every value equal (float64 features rounded to float32, as etnn stores them), and a small MLP
trained on each through DataLoader + Trainer ends with a lower loss than it starts with.
Usage: interop_numpy.py PATH_TO_INTEROP_NUMPY_BINARY"""
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError as e:  # reported as skipped by ctest (SKIP_RETURN_CODE 77)
    print(f"skipped: {e}; scripts/install-deps.sh installs numpy")
    sys.exit(77)

N = 64  # samples: 4 batches of 16


def run(binary, *args):
    out = subprocess.run([binary, *args], check=True, capture_output=True, text=True).stdout
    lines = {"x": [], "y": [], "loss": []}
    for line in out.splitlines():
        key, value = line.split()
        lines[key].append(float(value))
    return {key: np.array(values) for key, values in lines.items()}


def check(name, loaded, features, targets):
    assert np.array_equal(loaded["x"].astype(np.float32), features.astype(np.float32).ravel()), name
    assert np.array_equal(loaded["y"].astype(np.float32), targets.astype(np.float32).ravel()), name
    losses = loaded["loss"]
    assert len(losses) == 20 * N // 16 and np.all(np.isfinite(losses)), (name, len(losses))
    first, last = losses[: N // 16].mean(), losses[-(N // 16):].mean()
    assert last < first, (name, first, last)
    print(f"{name}: {features.size} features and {targets.size} targets equal; loss {first:.4f} -> {last:.4f}")


def main():
    binary = sys.argv[1]
    rng = np.random.default_rng(0)
    x = rng.standard_normal((N, 4)).astype(np.float32)
    labels = (x[:, 0] > 0).astype(np.int64) + (x[:, 1] > 0.5).astype(np.int64)  # classes 0, 1, 2
    price = (x @ np.array([1.0, -2.0, 0.5, 0.0], dtype=np.float32) + 0.25).astype(np.float32)
    with tempfile.TemporaryDirectory() as tmp:

        def path(name):
            return os.path.join(tmp, name)

        np.save(path("x32.npy"), x)
        x64 = x.astype(np.float64) * 1.1  # values float32 cannot hold exactly
        np.save(path("x64.npy"), x64)
        np.save(path("y.npy"), labels)
        check("np.save float32", run(binary, "npy", path("x32.npy"), path("y.npy")), x, labels)
        check("np.save float64", run(binary, "npy", path("x64.npy"), path("y.npy")), x64, labels)
        np.savez(path("stored.npz"), x=x, y=labels)
        check("np.savez", run(binary, "npz", path("stored.npz")), x, labels)
        np.savez_compressed(path("compressed.npz"), x=x64, y=labels)
        check("np.savez_compressed", run(binary, "npz", path("compressed.npz")), x64, labels)
        table = np.column_stack([x, price])
        np.savetxt(path("table.csv"), table, fmt="%.9g", delimiter=",", header="f0,f1,f2,f3,price", comments="")
        check("np.savetxt CSV", run(binary, "csv", path("table.csv")), x, price)


if __name__ == "__main__":
    main()
