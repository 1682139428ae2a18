#!/usr/bin/env python3
"""The GPU side-by-side as a markdown table, from the result lines of bench_cuda and
benchmarks/peers/pytorch_gpu.py on stdin (scripts/gpu-check.sh pipes both):

  result library=etnn device=cuda model=mlp784 batch=64 mode=graphs samples_per_s=... step_ms=...
  result library=pytorch device=cuda model=mlp784 batch=64 mode=eager samples_per_s=... step_ms=...

Prints samples/s for every library and mode, then etnn over PyTorch precision by precision: etnn's
best mode in fp32 against PyTorch's best fp32 mode, and likewise bf16 and fp16 (a ratio never
divides one precision by another), naming PyTorch's mode (graphs and compile_max are captured into
CUDA graphs, eager and compile are not); then the optimizer-bandwidth lines (GB/s, and Adam as a fraction of a
device-to-device copy in the same run)."""
import shlex
import sys


def parse(lines):
    results = []
    for line in lines:
        if not line.startswith("result "):
            continue
        fields = dict(f.split("=", 1) for f in shlex.split(line)[1:] if "=" in f)
        results.append(fields)
    return results


def precision(mode):
    """The precision of a mode's products: bf16 or fp16 where its name says so, else fp32."""
    return "bf16" if "bf16" in mode else "fp16" if "fp16" in mode else "fp32"


def main():
    results = parse(sys.stdin)
    training = {}
    for r in results:
        if "samples_per_s" in r and r.get("status") is None:
            key = (r["model"], int(r["batch"]))
            training.setdefault(key, {})[(r["library"], r["mode"])] = float(r["samples_per_s"])
    modes = sorted({m for v in training.values() for m in v}, key=lambda m: (m[0] != "etnn", m[1]))
    precisions = ("fp32", "bf16", "fp16")
    print("| model | batch | " + " | ".join(f"{lib} {mode}" for lib, mode in modes) + " | " +
          " | ".join(f"etnn {p} / best PyTorch {p}" for p in precisions) + " |")
    print("|---|---:|" + "---:|" * (len(modes) + len(precisions)))
    for (model, batch), v in sorted(training.items()):
        cells = [f"{v[m]:,.0f}" if m in v else "" for m in modes]
        for p in precisions:
            etnn = max((s for (lib, mode), s in v.items() if lib == "etnn" and precision(mode) == p), default=None)
            peer = max(((s, mode) for (lib, mode), s in v.items() if lib == "pytorch" and precision(mode) == p),
                       default=None)
            cells.append(f"{etnn / peer[0]:.2f}x ({peer[1]})" if etnn and peer else "")
        print(f"| {model} | {batch} | " + " | ".join(cells) + " |")
    print()
    print("| library | measurement | GB/s |")
    print("|---|---|---:|")
    for r in results:
        if "gbps" in r:
            print(f"| {r['library']} | {r['model']} | {float(r['gbps']):.1f} |")
        if "fraction" in r:
            print(f"| {r['library']} | {r['model']} | {float(r['fraction']) * 100:.1f}% of the copy |")


if __name__ == "__main__":
    main()
