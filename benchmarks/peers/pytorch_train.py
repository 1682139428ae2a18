#!/usr/bin/env python3
"""The PyTorch peer of bench_train: one configuration, trained for a fixed time, one result line.

Usage: pytorch_train.py MODEL BATCH SECONDS THREADS [eager|compile]
  MODEL: mlp784 (784-512-10), tiny (32-64-64-10), wide (784-2048-2048-10), lenet (LeNet-5),
         gpt (examples/char_lm's model: 4 causal transformer blocks, T = 128, D = 128, 4 heads,
         V = 128, cross-entropy at every position; torch_gpt.py)
  eager (default): the model as written; compile: torch.compile of the model with the loss, so that
  forward, cross-entropy and (through AOTAutograd) backward run as Inductor's compiled kernels; the
  SGD update stays torch.optim.SGD. --compile (anywhere on the line) is the same as compile.

One step is forward, cross-entropy, backward and an SGD update (lr 0.01) on synthetic inputs held
in memory (uniform in [-1, 1], labels uniform in 0..9; gpt: ids and labels uniform in 0..127), with
PyTorch's default initialization (the one etnn reproduces). Warm-up (at least 3 steps and 0.25 s, after the first step, which is where
torch.compile compiles) is excluded. Prints
  result library=pytorch|pytorch-compile model=M batch=B threads=T samples_per_s=S steps=N peak_rss_mb=R version=V
When compilation fails (Inductor needs a C++ compiler and Python's headers) it says so on stderr,
prints no result line and exits 0, so that compare.sh goes on without it.
"""
import os
import resource
import sys
import time

# Inductor compiles in a pool of worker processes by default; one process keeps the warm-up from
# competing with anything else on a small machine (compilation is excluded from the timing anyway).
os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")

import torch  # noqa: E402
from torch import nn  # noqa: E402

from torch_gpt import transformer  # noqa: E402

GPT = {"length": 128, "vocabulary": 128, "width": 128, "heads": 4, "layers": 4}


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
    if name == "gpt":
        return nn.Sequential(*transformer(**GPT), nn.Linear(GPT["width"], GPT["vocabulary"]))
    sys.exit(f"pytorch_train.py: unknown model '{name}' (mlp784, tiny, wide, lenet, gpt)")


class WithLoss(nn.Module):
    """The model followed by the mean cross-entropy: what torch.compile turns into one graph."""

    def __init__(self, model):
        super().__init__()
        self.model = model
        self.loss = nn.CrossEntropyLoss()

    def forward(self, x, y):
        scores = self.model(x)
        return self.loss(scores.reshape(-1, scores.shape[-1]), y.reshape(-1))  # every position of a sequence


def main():
    flags = [a[2:] for a in sys.argv[1:] if a in ("--compile", "--eager")]  # anywhere on the line
    args = [a for a in sys.argv[1:] if a not in ("--compile", "--eager")] + flags
    if len(args) not in (4, 5) or (len(args) == 5 and args[4] not in ("eager", "compile")):
        sys.exit(__doc__)
    name, batch, seconds, threads = args[0], int(args[1]), float(args[2]), int(args[3])
    mode = args[4] if len(args) == 5 else "eager"
    library = "pytorch" if mode == "eager" else "pytorch-compile"
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = make_model(name)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_of = WithLoss(model)
    if mode == "compile":
        loss_of = torch.compile(loss_of)
    if name == "gpt":
        x = torch.randint(0, GPT["vocabulary"], (batch, GPT["length"])).float()
        y = torch.randint(0, GPT["vocabulary"], (batch, GPT["length"]))
    else:
        shape = {"tiny": (batch, 32), "lenet": (batch, 1, 28, 28)}.get(name, (batch, 784))
        x = torch.rand(shape) * 2 - 1
        y = torch.randint(0, 10, (batch,))

    def step():
        opt.zero_grad(set_to_none=True)
        loss_of(x, y).backward()
        opt.step()

    try:
        step()  # torch.compile compiles the forward and the backward graphs here
    except Exception as e:  # Inductor's failures come as several exception types
        if mode != "compile":
            raise
        first = (str(e).strip().splitlines() or [""])[0][:300]
        print(f"pytorch_train.py: torch.compile failed ({type(e).__name__}: {first}); "
              f"no {library} result for {name}/{batch}", file=sys.stderr)
        return
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
    version = torch.__version__
    print(f"result library={library} model={name} batch={batch} threads={torch.get_num_threads()} "
          f"samples_per_s={steps * batch / t:.1f} steps={steps} peak_rss_mb={peak_kib / 1024:.1f} version={version}")


if __name__ == "__main__":
    main()
