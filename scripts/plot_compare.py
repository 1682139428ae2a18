#!/usr/bin/env python3
"""Tables and chart of scripts/compare.sh's raw results (etnn beside LibTorch and PyTorch).

Usage: plot_compare.py RESULTS [--markdown FILE.md] [--png FILE.png] [--preset P] [--rounds N] [--seconds S]

RESULTS holds one record a line, `KIND key=value ...` (values may be double-quoted):
  result library=etnn|libtorch|pytorch model=M batch=B threads=T samples_per_s=X [gflops=G] peak_rss_mb=R
  result library=eigen-gemm n=N threads=T gflops=G
  compile source=PATH seconds=S
  machine key="value" ...
Medians over the rounds are printed as markdown (and written to --markdown), the chart to --png.
"""
import argparse
import sys
import collections
import shlex
import statistics

CONFIGS = [("mlp784", 8), ("mlp784", 64), ("mlp784", 256), ("tiny", 32), ("wide", 256), ("lenet", 64)]
WIDTHS = {"mlp784": "784-512-10", "tiny": "32-64-64-10", "wide": "784-2048-2048-10", "lenet": "LeNet-5"}
# The targets: etnn (best thread setting) / LibTorch (best thread setting).
TARGETS = {("mlp784", 8): 3.0, ("mlp784", 64): 1.5, ("mlp784", 256): 1.3, ("tiny", 32): 8.0,
           ("wide", 256): 1.1, ("lenet", 64): 1.5}
WIDE_GEMM_TARGET = 0.8  # wide/256 also: >= 80% of the 2-thread GEMM rate
PEERS = [("libtorch", "LibTorch"), ("pytorch", "PyTorch")]
LIBRARIES = [("etnn", "etnn")] + PEERS
THREADS = (1, 2)


def parse(path):
    records = []
    with open(path) as f:
        for line in f:
            fields = shlex.split(line)
            if fields:
                records.append((fields[0], dict(field.split("=", 1) for field in fields[1:])))
    return records


def median(values):
    return statistics.median(values) if values else None


def rate(x):
    if x is None:
        return "—"
    if x >= 1e6:
        return f"{x / 1e6:.2f}M"
    if x >= 1e3:
        return f"{x / 1e3:.1f}k"
    return f"{x:.0f}"


def number(x, fmt="{:.1f}"):
    return "—" if x is None else fmt.format(x)


def summarize(records):
    samples = collections.defaultdict(list)  # (library, model, batch, threads) -> samples/s
    gflops = collections.defaultdict(list)  # etnn's, same key
    rss = collections.defaultdict(list)  # (library, model, batch) -> peak RSS MiB, all thread counts
    gemm = collections.defaultdict(list)  # threads -> GFLOP/s
    adjacent = collections.defaultdict(lambda: {"gemm": [], "wide": None})  # round -> around etnn's wide/256/2
    compile_times, machine = [], {}
    for kind, r in records:
        if kind == "machine":
            machine.update(r)
        elif kind == "compile":
            compile_times.append((r["source"], float(r["seconds"])))
        elif kind == "result" and r["library"] == "eigen-gemm" and "adjacent" in r:
            if r["threads"] == "2":
                adjacent[r["round"]]["gemm"].append(float(r["gflops"]))
        elif kind == "result" and r["library"] == "eigen-gemm":
            gemm[int(r["threads"])].append(float(r["gflops"]))
            machine["gemm_n"] = r["n"]
        elif kind == "result":
            key = (r["library"], r["model"], int(r["batch"]), int(r["threads"]))
            samples[key].append(float(r["samples_per_s"]))
            if "gflops" in r:
                gflops[key].append(float(r["gflops"]))
            rss[key[:3]].append(float(r["peak_rss_mb"]))
            if "round" in r:
                adjacent[r["round"]]["wide"] = float(r["gflops"])
    # wide/256 on 2 threads over the mean GEMM rate measured just before and after it, per round.
    shares = [a["wide"] / statistics.mean(a["gemm"]) for a in adjacent.values() if a["wide"] and a["gemm"]]
    machine["wide_share"] = median(shares)
    machine["wide_shares"] = shares
    return ({k: median(v) for k, v in samples.items()}, {k: median(v) for k, v in gflops.items()},
            {k: median(v) for k, v in rss.items()}, {k: median(v) for k, v in gemm.items()}, compile_times, machine)


def best(samples, library, model, batch):
    values = [samples.get((library, model, batch, t)) for t in THREADS]
    values = [v for v in values if v is not None]
    return max(values) if values else None


def ratio(a, b):
    return a / b if a is not None and b else None


def tables(args, summary):
    samples, gflops, rss, gemm, compile_times, machine = summary
    out = [f"Preset `{args.preset}`, {args.rounds} round(s) of {args.seconds} s per program and setting, medians; "
           f"{machine.get('cpu', '?')}, {machine.get('cores', '?')} cores, load average before/after "
           f"{machine.get('load_before', '?')} / {machine.get('load_after', '?')}.", ""]
    head = ["model (widths)", "batch"] + [f"{name} {t}T" for _, name in LIBRARIES for t in THREADS]
    head += ["etnn / LibTorch", "etnn / best peer", "target (vs LibTorch)"]
    out += ["Samples/s (training steps: forward, cross-entropy, backward, SGD update):", "",
            "| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for model, batch in CONFIGS:
        etnn = best(samples, "etnn", model, batch)
        libtorch = best(samples, "libtorch", model, batch)
        peers = [v for v in (best(samples, p, model, batch) for p, _ in PEERS) if v is not None]
        vs_libtorch = ratio(etnn, libtorch)
        target = TARGETS[(model, batch)]
        verdict = "—" if vs_libtorch is None else ("met" if vs_libtorch >= target else "not met")
        row = [f"{model} ({WIDTHS[model]})", str(batch)]
        row += [rate(samples.get((lib, model, batch, t))) for lib, _ in LIBRARIES for t in THREADS]
        row += [number(vs_libtorch, "{:.2f}x"), number(ratio(etnn, max(peers) if peers else None), "{:.2f}x"),
                f">= {target}x: {verdict}"]
        out.append("| " + " | ".join(row) + " |")

    n = machine.get("gemm_n", "?")
    out += ["", f"Eigen float GEMM ({n}x{n}x{n}, same build): {number(gemm.get(1))} GFLOP/s on 1 thread, "
            f"{number(gemm.get(2))} GFLOP/s on 2 threads. etnn's GEMM work rate against it, and peak resident "
            "memory (MiB, median over runs and thread settings):", ""]
    head = ["model", "batch", "etnn GFLOP/s 1T", "% of 1T GEMM", "etnn GFLOP/s 2T", "% of 2T GEMM"]
    head += [f"peak RSS {name}" for _, name in LIBRARIES]
    out += ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for model, batch in CONFIGS:
        row = [model, str(batch)]
        for t in THREADS:
            g = gflops.get(("etnn", model, batch, t))
            row += [number(g), number(ratio(g, gemm.get(t)) and 100 * ratio(g, gemm.get(t)), "{:.0f}%")]
        row += [number(rss.get((lib, model, batch)), "{:.0f}") for lib, _ in LIBRARIES]
        out.append("| " + " | ".join(row) + " |")
    share = machine.get("wide_share")
    if share is not None:
        verdict = "met" if share >= WIDE_GEMM_TARGET else "not met"
        rounds = ", ".join(f"{100 * x:.0f}%" for x in machine["wide_shares"])
        out += ["", f"wide/256 on 2 threads: {100 * share:.0f}% of the 2-thread GEMM rate measured just before and "
                f"after it (median of the rounds' {rounds}; target >= {100 * WIDE_GEMM_TARGET:.0f}%: {verdict})."]

    if compile_times:
        out += ["", "Compile time, `g++ -std=c++20 -O2 -fopenmp -c` (no ccache; mnist_mlp without MPI):", "",
                "| source | seconds |", "|---|---:|"]
        out += [f"| {source} | {seconds:.1f} |" for source, seconds in compile_times]
    return "\n".join(out) + "\n"


def chart(summary, target, preset):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    samples = summary[0]
    labels = [f"{m}/{b}" for m, b in CONFIGS]
    figure, (rates, speedups) = plt.subplots(1, 2, figsize=(13, 5), gridspec_kw={"width_ratios": [3, 2]})
    colors = {"etnn": "tab:blue", "libtorch": "tab:orange", "pytorch": "tab:green"}
    width = 0.13
    for i, (lib, name) in enumerate(LIBRARIES):
        for j, t in enumerate(THREADS):
            values = [samples.get((lib, m, b, t)) or 0 for m, b in CONFIGS]
            offset = (2 * i + j - 2.5) * width
            rates.bar([k + offset for k in range(len(CONFIGS))], values, width, color=colors[lib],
                      alpha=1.0 if t == 2 else 0.55, hatch="" if t == 2 else "//", label=f"{name} {t} thread{'s' * (t > 1)}")
    rates.set_yscale("log")
    rates.set_xticks(range(len(CONFIGS)), labels)
    rates.set_ylabel("samples/s (log scale)")
    rates.set_title(f"training throughput (etnn at preset {preset})", pad=48)
    rates.legend(fontsize=8, ncol=3, loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    rates.grid(axis="y", alpha=0.3)

    for i, (lib, name) in enumerate(PEERS):
        values = [ratio(best(samples, "etnn", m, b), best(samples, lib, m, b)) or 0 for m, b in CONFIGS]
        speedups.bar([k + (i - 0.5) * 0.35 for k in range(len(CONFIGS))], values, 0.35, color=colors[lib],
                     label=f"etnn / {name} (best settings)")
    speedups.scatter(range(len(CONFIGS)), [TARGETS[c] for c in CONFIGS], marker="_", s=400, color="black",
                     zorder=3, label="target vs LibTorch")
    speedups.axhline(1, color="gray", linewidth=0.8)
    speedups.set_xticks(range(len(CONFIGS)), labels, fontsize=8)
    speedups.set_ylabel("speed-up")
    speedups.set_title("etnn / peer", pad=48)
    speedups.legend(fontsize=8, ncol=2, loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    speedups.grid(axis="y", alpha=0.3)
    figure.tight_layout()
    figure.savefig(target, dpi=100)


README_BEGIN = "<!-- compare.sh: begin -->"
README_END = "<!-- compare.sh: end -->"


def splice_into_readme(path, text):
    """Replaces what lies between README's markers with the tables (compile times left out)."""
    with open(path) as f:
        readme = f.read()
    begin, end = readme.find(README_BEGIN), readme.find(README_END)
    if begin < 0 or end < begin:
        sys.exit(f"plot_compare.py: {path} has no {README_BEGIN} ... {README_END} block")
    block = text.split("\nCompile time,")[0].rstrip("\n")
    readme = readme[: begin + len(README_BEGIN)] + "\n" + block + "\n" + readme[end:]
    with open(path, "w") as f:
        f.write(readme)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results")
    parser.add_argument("--markdown")
    parser.add_argument("--png")
    parser.add_argument("--preset", default="release")
    parser.add_argument("--rounds", default="?")
    parser.add_argument("--seconds", default="?")
    parser.add_argument("--readme", help="also replace the tables between README's compare.sh markers")
    args = parser.parse_args()
    summary = summarize(parse(args.results))
    text = tables(args, summary)
    print(text, end="")
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)
        print(f"wrote {args.markdown}")
    if args.readme:
        splice_into_readme(args.readme, text)
        print(f"updated {args.readme}")
    if args.png:
        chart(summary, args.png, args.preset)
        print(f"wrote {args.png}")


if __name__ == "__main__":
    main()
