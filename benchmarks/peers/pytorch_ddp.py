#!/usr/bin/env python3
"""PyTorch 2.x DistributedDataParallel over gloo: the peer of benchmarks/bench_dist.cpp's
data-parallel training, on the same job: mlp784 (784-512-10) at batch 64 per rank, or with
--model wide wide (784-2048-2048-10) at batch 256, cross-entropy,
SGD with lr 0.01, one thread per rank, a fixed random batch on each rank (as bench_dist trains),
gradients summed by DDP's buckets (25 MiB, started during backward as PyTorch does by default).
One process alone (size 1) trains the plain model, as a 1-process job would.

Launched by mpirun, one process per rank (rank and size from OMPI_COMM_WORLD_RANK and
OMPI_COMM_WORLD_SIZE); gloo meets at MASTER_ADDR:MASTER_PORT (default 127.0.0.1:29500; across
hosts rank 0's address, and GLOO_SOCKET_IFNAME the interface). Rank 0 prints
  ddp <ranks> <samples/s of all ranks together>
measured over 60 rounds (--rounds) of 20 steps with a barrier before each round, samples over
seconds summed over the rounds (as bench_dist pools its rounds).
"""
import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn

STEPS = 20
MODELS = {  # name: (widths, batch per rank), as bench_dist
    "mlp784": ((784, 512, 10), 64),
    "wide": ((784, 2048, 2048, 10), 256),
}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--model", choices=sorted(MODELS), default="mlp784")
    args = parser.parse_args()
    rounds = args.rounds
    widths, batch = MODELS[args.model]
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
    size = int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1"))
    torch.set_num_threads(1)
    torch.manual_seed(0)
    layers = []
    for fan_in, fan_out in zip(widths, widths[1:]):
        layers += [nn.Linear(fan_in, fan_out), nn.ReLU()]
    model = nn.Sequential(*layers[:-1])
    if size > 1:
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29500")
        dist.init_process_group("gloo", rank=rank, world_size=size)
        # As a PyTorch expert would: gradients as views into the buckets (no copy), and the graph
        # declared static (bucket order fixed after the first step).
        model = nn.parallel.DistributedDataParallel(model, gradient_as_bucket_view=True, static_graph=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    generator = torch.Generator().manual_seed(rank + 1)
    x = torch.rand(batch, 784, generator=generator) * 2 - 1
    y = torch.randint(0, 10, (batch,), generator=generator)

    def steps(count):
        for _ in range(count):
            opt.zero_grad(set_to_none=True)
            loss_fn(model(x), y).backward()
            opt.step()

    def barrier():
        if size > 1:
            dist.barrier()

    steps(STEPS)  # warm-up
    seconds = 0.0
    for _ in range(rounds):
        barrier()
        start = time.perf_counter()
        steps(STEPS)
        barrier()
        seconds += time.perf_counter() - start
    if rank == 0:
        print(f"ddp {size} {rounds * STEPS * batch * size / seconds:.0f}", flush=True)
    if size > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
