#!/usr/bin/env python3
"""The PyTorch peer of bench_train: one configuration, trained for a fixed time, one result line.

Usage: pytorch_train.py MODEL BATCH SECONDS THREADS
  MODEL: mlp784 (784-512-10), tiny (32-64-64-10), wide (784-2048-2048-10), lenet (LeNet-5)

One step is forward, cross-entropy, backward and an SGD update (lr 0.01) on synthetic inputs held
in memory (uniform in [-1, 1], labels uniform in 0..9), with PyTorch's default initialization (the
one etnn reproduces). Warm-up (at least 3 steps and 0.25 s) is excluded. Prints
  result library=pytorch model=M batch=B threads=T samples_per_s=S steps=N peak_rss_mb=R
"""
import resource
import sys
import time

import torch
from torch import nn


def make_model(name):
    if name == "mlp784":
        return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 10))
    if name == "tiny":
        return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    if name == "wide":
        return nn.Sequential(nn.Linear(784, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(), nn.Linear(2048, 10))
    if name == "lenet":
        return nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                             nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))
    sys.exit(f"pytorch_train.py: unknown model '{name}' (mlp784, tiny, wide, lenet)")


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    name, batch, seconds, threads = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = make_model(name)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    shape = {"tiny": (batch, 32), "lenet": (batch, 1, 28, 28)}.get(name, (batch, 784))
    x = torch.rand(shape) * 2 - 1
    y = torch.randint(0, 10, (batch,))

    def step():
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        opt.step()

    t0 = time.perf_counter()
    i = 0
    while i < 3 or time.perf_counter() - t0 < 0.25:  # warm-up
        step()
        i += 1
    steps = 0
    t0 = time.perf_counter()
    while True:
        step()
        steps += 1
        t = time.perf_counter() - t0
        if t >= seconds:
            break
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    print(f"result library=pytorch model={name} batch={batch} threads={torch.get_num_threads()} "
          f"samples_per_s={steps * batch / t:.1f} steps={steps} peak_rss_mb={peak_kib / 1024:.1f}")


if __name__ == "__main__":
    main()
