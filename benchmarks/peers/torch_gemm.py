#!/usr/bin/env python3
"""PyTorch's own float GEMM rate (MKL in PyPI's wheels), beside gemm_rate's, on wide's shapes.

Usage: torch_gemm.py [SECONDS] [THREADS ...]     (default 1 s, threads 1 2)

Per thread count (torch.set_num_threads) it times two products, each for SECONDS after a warm-up:
  256x2048x2048: wide/256's forward product of the second layer, X (256x2048) @ W^T (W 2048x2048)
  1024x1024x1024: a square product, gemm_rate's default
and prints the median rate of each (2 m k n flops per product) as
  result library=torch-gemm n=MxKxN threads=T gflops=G version=V
(n=1024 for the square one, as gemm_rate writes it).
"""
import sys
import time

import torch


def rate(a, b, seconds):
    out = torch.empty(a.shape[0], b.shape[1])
    torch.mm(a, b, out=out)  # warm-up
    flops = 2.0 * a.shape[0] * a.shape[1] * b.shape[1]
    rates = []
    start = time.perf_counter()
    while len(rates) < 3 or time.perf_counter() - start < seconds:
        t0 = time.perf_counter()
        torch.mm(a, b, out=out)
        rates.append(flops / (time.perf_counter() - t0) / 1e9)
    rates.sort()
    return rates[len(rates) // 2]


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0
    thread_counts = [int(t) for t in sys.argv[2:]] or [1, 2]
    torch.manual_seed(0)
    x = torch.rand(256, 2048) * 2 - 1
    w = torch.rand(2048, 2048) * 2 - 1
    a = torch.rand(1024, 1024) * 2 - 1
    b = torch.rand(1024, 1024) * 2 - 1
    version = torch.__version__
    for threads in thread_counts:
        torch.set_num_threads(threads)
        for label, (p, q) in (("256x2048x2048", (x, w.t())), ("1024", (a, b))):
            print(f"result library=torch-gemm n={label} threads={torch.get_num_threads()} "
                  f"gflops={rate(p, q, seconds):.1f} version={version}", flush=True)


if __name__ == "__main__":
    main()
