#!/usr/bin/env python3
"""The GPU side-by-side as a markdown table, from the result lines of bench_cuda and
benchmarks/peers/pytorch_gpu.py on stdin (scripts/gpu-check.sh pipes both):

  result library=etnn device=cuda model=mlp784 batch=64 mode=graphs samples_per_s=... step_ms=...
  result library=pytorch device=cuda model=mlp784 batch=64 mode=eager samples_per_s=... step_ms=...

Prints samples/s for every library and mode, the ratio of etnn's best mode to PyTorch eager and to
PyTorch's best mode, then the optimizer-bandwidth lines (GB/s, and Adam as a fraction of a
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


def main():
    results = parse(sys.stdin)
    training = {}
    for r in results:
        if "samples_per_s" in r and r.get("status") is None:
            key = (r["model"], int(r["batch"]))
            training.setdefault(key, {})[(r["library"], r["mode"])] = float(r["samples_per_s"])
    modes = sorted({m for v in training.values() for m in v}, key=lambda m: (m[0] != "etnn", m[1]))
    print("| model | batch | " + " | ".join(f"{lib} {mode}" for lib, mode in modes) +
          " | etnn best / torch eager | etnn best / torch best |")
    print("|---|---:|" + "---:|" * len(modes) + "---:|---:|")
    for (model, batch), v in sorted(training.items()):
        cells = [f"{v[m]:,.0f}" if m in v else "" for m in modes]
        etnn = max((s for (lib, _), s in v.items() if lib == "etnn"), default=None)
        eager = v.get(("pytorch", "eager"))
        torch_best = max((s for (lib, _), s in v.items() if lib == "pytorch"), default=None)
        ratio = lambda a, b: f"{a / b:.2f}x" if a and b else ""
        print(f"| {model} | {batch} | " + " | ".join(cells) + f" | {ratio(etnn, eager)} | {ratio(etnn, torch_best)} |")
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
