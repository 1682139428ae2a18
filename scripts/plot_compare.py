#!/usr/bin/env python3
"""Tables and chart of scripts/compare.sh's raw results (etnn beside LibTorch, PyTorch and JAX).

Usage: plot_compare.py RESULTS [--markdown FILE.md] [--png FILE.png] [--readme README.md]
                       [--preset P] [--rounds N] [--seconds S]

RESULTS holds one record a line, `KIND key=value ...` (values may be double-quoted):
  result library=etnn|libtorch|pytorch|pytorch-compile|jax model=M batch=B threads=T samples_per_s=X
         [gflops=G] peak_rss_mb=R [version=V] [round=N]
  result library=NAME-gemm n=N threads=T gflops=G [version=V] [adjacent=wide round=N]
         (any library ending in -gemm is a float GEMM rate: gemm_rate's, torch_gemm.py's)
  result library=etnn-e2e|pytorch-e2e samples_per_s=X test_accuracy=A epochs=E threads=T [version=V]
  probe round_trip_ns=NS cpus=A,B model=M batch=B round=N   (core_round_trip, before each 2-thread etnn run)
  compile source=PATH seconds=S
  machine key="value" ...
Medians over the rounds are printed as markdown (and written to --markdown), the chart to --png;
--readme replaces what lies between README's `<!-- compare.sh: begin -->` and
`<!-- compare.sh: end -->` markers with the tables (compile times left out).
"""
import argparse
import collections
import shlex
import statistics
import sys

CONFIGS = [("mlp784", 8), ("mlp784", 64), ("mlp784", 256), ("tiny", 32), ("wide", 256), ("lenet", 64), ("gpt", 16)]
WIDTHS = {"mlp784": "784-512-10", "tiny": "32-64-64-10", "wide": "784-2048-2048-10", "lenet": "LeNet-5",
          "gpt": "char_lm: 4 causal blocks, T 128, D 128"}
# The acceptance target: etnn (best thread setting) / the best peer (best library and thread setting).
TARGET = 1.2
TARGETS = {config: TARGET for config in CONFIGS}
WIDE_GEMM_TARGET = 0.9  # wide/256 on 2 threads: >= 90% of the best 2-thread sgemm rate of its round
E2E_TARGET = 2.0  # mnist_mlp / pytorch_mnist.py, training samples/s
PEERS = [("libtorch", "LibTorch"), ("pytorch", "PyTorch"), ("pytorch-compile", "PyTorch compile"), ("jax", "JAX")]
LIBRARIES = [("etnn", "etnn")] + PEERS
NAMES = dict(LIBRARIES)
THREADS = (1, 2)
COLORS = {"etnn": "tab:blue", "libtorch": "tab:orange", "pytorch": "tab:green", "pytorch-compile": "tab:olive",
          "jax": "tab:purple"}


def parse(path):
    records = []
    with open(path) as f:
        for line in f:
            fields = shlex.split(line)
            if fields:
                records.append((fields[0], dict(field.split("=", 1) for field in fields[1:] if "=" in field)))
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


def ratio(a, b):
    return a / b if a is not None and b else None


class Summary:
    """The medians over the rounds of everything in a results file."""

    def __init__(self, records):
        samples = collections.defaultdict(list)  # (library, model, batch, threads) -> samples/s
        gflops = collections.defaultdict(list)  # etnn's, same key
        rss = collections.defaultdict(list)  # (library, model, batch) -> peak RSS MiB, all thread counts
        gemm = collections.defaultdict(list)  # (library, n, threads) -> GFLOP/s
        # round -> (library, n) -> the 2-thread GEMM rates just before and after etnn's wide/256/2 run,
        # and that run's GFLOP/s
        adjacent = collections.defaultdict(lambda: {"gemm": collections.defaultdict(list), "wide": None})
        e2e = collections.defaultdict(lambda: collections.defaultdict(list))  # library -> key -> values
        self.versions, self.compile_times, self.machine = {}, [], {}
        self.round_trips = []  # ns, the cache-line round trip between the two CPUs before each 2-thread etnn run
        for kind, r in records:
            if kind == "machine":
                self.machine.update(r)
            elif kind == "probe":
                self.round_trips.append(float(r["round_trip_ns"]))
            elif kind == "compile":
                self.compile_times.append((r["source"], float(r["seconds"])))
            elif kind != "result":
                continue
            elif r["library"].endswith("-gemm"):
                if "threads" not in r or "gflops" not in r:
                    continue
                if "adjacent" in r:
                    if r["threads"] == "2":
                        adjacent[r.get("round", "1")]["gemm"][(r["library"], r.get("n", "?"))].append(float(r["gflops"]))
                else:
                    gemm[(r["library"], r.get("n", "?"), int(r["threads"]))].append(float(r["gflops"]))
            elif r["library"].endswith("-e2e"):
                lib = r["library"][: -len("-e2e")]
                for key in ("samples_per_s", "test_accuracy", "epochs", "threads"):
                    if key in r:
                        e2e[lib][key].append(float(r[key]))
                if "version" in r:
                    self.versions.setdefault(lib, r["version"])
            else:
                key = (r["library"], r["model"], int(r["batch"]), int(r["threads"]))
                samples[key].append(float(r["samples_per_s"]))
                if "gflops" in r:
                    gflops[key].append(float(r["gflops"]))
                if "peak_rss_mb" in r:
                    rss[key[:3]].append(float(r["peak_rss_mb"]))
                if "version" in r:
                    self.versions.setdefault(r["library"], r["version"])
                if r["library"] == "etnn" and "round" in r and "gflops" in r:
                    adjacent[r["round"]]["wide"] = float(r["gflops"])
        self.samples = {k: median(v) for k, v in samples.items()}
        self.gflops = {k: median(v) for k, v in gflops.items()}
        self.rss = {k: median(v) for k, v in rss.items()}
        self.gemm = {k: median(v) for k, v in gemm.items()}
        self.e2e = {lib: {k: median(v) for k, v in values.items()} for lib, values in e2e.items()}
        # wide/256 on 2 threads over the best GEMM rate (mean of before and after) of its round.
        self.wide_shares = []
        for a in adjacent.values():
            rates = [statistics.mean(v) for v in a["gemm"].values() if v]
            if a["wide"] and rates:
                self.wide_shares.append(a["wide"] / max(rates))
        self.wide_share = median(self.wide_shares)

    def best_gemm(self, threads):
        """The fastest GEMM measured on `threads` threads: (GFLOP/s, 'library n') or (None, None)."""
        rates = [(g, f"{lib} {n}") for (lib, n, t), g in self.gemm.items() if t == threads]
        return max(rates) if rates else (None, None)

    def best(self, library, model, batch):
        """The library's best thread setting: (samples/s, threads) or (None, None)."""
        values = [(self.samples[(library, model, batch, t)], t) for t in THREADS if (library, model, batch, t) in self.samples]
        return max(values) if values else (None, None)

    def best_peer(self, model, batch):
        """The fastest peer over every library and thread setting: (samples/s, 'library@threads')."""
        values = [(v, f"{lib}@{t}") for lib, _ in PEERS for v, t in [self.best(lib, model, batch)] if v is not None]
        return max(values) if values else (None, None)


def tables(args, s):
    machine = s.machine
    versions = ", ".join(f"{NAMES.get(lib, lib)} {v}" for lib, v in sorted(s.versions.items())
                         if lib != "etnn" and not (lib == "pytorch-compile" and s.versions.get("pytorch") == v))
    if machine.get("libtorch_version"):
        versions = f"LibTorch {machine['libtorch_version']}" + (", " + versions if versions else "")
    out = [f"Preset `{args.preset}`, {args.rounds} round(s) of {args.seconds} s per program and setting, medians; "
           f"{machine.get('cpu', '?')}, {machine.get('cores', '?')} cores, load average before/after "
           f"{machine.get('load_before', '?')} / {machine.get('load_after', '?')}"
           + (f"; peers: {versions}." if versions else "."), ""]
    head = ["model (widths)", "batch"] + [f"{name} {t}T" for _, name in LIBRARIES for t in THREADS]
    head += ["best peer", "etnn / best peer", "target"]
    if s.round_trips:  # 2-thread rates on a VM depend on it: see benchmarks/core_round_trip.cpp
        out += [f"Cache-line round trip between the two CPUs before each 2-thread etnn run: "
                f"{min(s.round_trips):.0f} to {max(s.round_trips):.0f} ns (median {median(s.round_trips):.0f}; "
                f"{sum(t > 150 for t in s.round_trips)} of {len(s.round_trips)} runs over 150 ns, which on the VMs "
                f"measured so far meant CPUs that share no last-level cache).", ""]
    out += ["Samples/s (training steps: forward, cross-entropy, backward, SGD update):", "",
            "| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for model, batch in CONFIGS:
        etnn, _ = s.best("etnn", model, batch)
        peer, peer_name = s.best_peer(model, batch)
        speedup = ratio(etnn, peer)
        target = TARGETS[(model, batch)]
        verdict = "—" if speedup is None else ("met" if speedup >= target else "not met")
        row = [f"{model} ({WIDTHS[model]})", str(batch)]
        row += [rate(s.samples.get((lib, model, batch, t))) for lib, _ in LIBRARIES for t in THREADS]
        row += [peer_name or "—", number(speedup, "{:.2f}x"), f">= {target}x: {verdict}"]
        out.append("| " + " | ".join(row) + " |")

    gemm1, name1 = s.best_gemm(1)
    gemm2, name2 = s.best_gemm(2)
    every = "; ".join(f"{lib} {n} {t}T {g:.1f}" for (lib, n, t), g in sorted(s.gemm.items()))
    out += ["", f"Best float GEMM rate measured in this run: {number(gemm1)} GFLOP/s on 1 thread ({name1 or '—'}), "
            f"{number(gemm2)} GFLOP/s on 2 threads ({name2 or '—'}); all of them (GFLOP/s): {every or '—'}. "
            "etnn's GEMM work rate against the best, and peak resident memory (MiB, median over runs and thread "
            "settings):", ""]
    head = ["model", "batch", "etnn GFLOP/s 1T", "% of best 1T GEMM", "etnn GFLOP/s 2T", "% of best 2T GEMM"]
    head += [f"peak RSS {name}" for _, name in LIBRARIES]
    out += ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for model, batch in CONFIGS:
        row = [model, str(batch)]
        for t, best in ((1, gemm1), (2, gemm2)):
            g = s.gflops.get(("etnn", model, batch, t))
            share = ratio(g, best)
            row += [number(g), number(share and 100 * share, "{:.0f}%")]
        row += [number(s.rss.get((lib, model, batch)), "{:.0f}") for lib, _ in LIBRARIES]
        out.append("| " + " | ".join(row) + " |")
    share = s.wide_share
    how = "the best 2-thread GEMM rate measured just before and after it"
    if share is not None:
        rounds = ", ".join(f"{100 * x:.0f}%" for x in s.wide_shares)
        how += f" (median of the rounds' {rounds})"
    else:  # no adjacent measurements: the run's best
        share = ratio(s.gflops.get(("etnn", "wide", 256, 2)), gemm2)
        how = "the best 2-thread GEMM rate of the run"
    if share is not None:
        verdict = "met" if share >= WIDE_GEMM_TARGET else "not met"
        out += ["", f"wide/256 on 2 threads: {100 * share:.0f}% of {how}; target >= {100 * WIDE_GEMM_TARGET:.0f}%: "
                f"{verdict}."]

    if s.e2e:
        etnn, torch = s.e2e.get("etnn", {}), s.e2e.get("pytorch", {})
        speedup = ratio(etnn.get("samples_per_s"), torch.get("samples_per_s"))
        verdict = "—" if speedup is None else ("met" if speedup >= E2E_TARGET else "not met")
        epochs = etnn.get("epochs") or torch.get("epochs")

        def threads(e):
            return number(e.get("threads"), "{:.0f}")

        head = ["epochs", "etnn threads", "etnn samples/s", "etnn test accuracy", "PyTorch threads",
                "PyTorch samples/s", "PyTorch test accuracy", "etnn / PyTorch", "target"]
        row = [number(epochs, "{:.0f}"), threads(etnn), rate(etnn.get("samples_per_s")),
               number(etnn.get("test_accuracy"), "{:.4f}"), threads(torch), rate(torch.get("samples_per_s")),
               number(torch.get("test_accuracy"), "{:.4f}"), number(speedup, "{:.2f}x"),
               f">= {E2E_TARGET}x: {verdict}"]
        out += ["", "End to end, README's first command: `examples/mnist_mlp` (784-512-10 ReLU MLP, SGD lr 0.01, "
                "batch 64, Fashion-MNIST) beside the same training in a standard PyTorch script "
                "(`benchmarks/peers/pytorch_mnist.py`: nn.Sequential, DataLoader over a TensorDataset, shuffled), "
                "each at its default thread count; samples/s of the training loops, test accuracy after the "
                "last epoch:", "", "| " + " | ".join(head) + " |", "|---:|" + "---:|" * (len(head) - 1),
                "| " + " | ".join(row) + " |"]

    if s.compile_times:
        out += ["", "Compile time, `g++ -std=c++20 -O2 -fopenmp -c` (no ccache; mnist_mlp without MPI):", "",
                "| source | seconds |", "|---|---:|"]
        out += [f"| {source} | {seconds:.1f} |" for source, seconds in s.compile_times]
    return "\n".join(out) + "\n"


def chart(s, target, preset):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{m}/{b}" for m, b in CONFIGS]
    figure, (rates, speedups) = plt.subplots(1, 2, figsize=(15, 5.5), gridspec_kw={"width_ratios": [3, 2]})
    bars = len(LIBRARIES) * len(THREADS)
    width = 0.8 / bars
    for i, (lib, name) in enumerate(LIBRARIES):
        for j, t in enumerate(THREADS):
            values = [s.samples.get((lib, m, b, t)) or 0 for m, b in CONFIGS]
            offset = (len(THREADS) * i + j - (bars - 1) / 2) * width
            rates.bar([k + offset for k in range(len(CONFIGS))], values, width, color=COLORS[lib],
                      alpha=1.0 if t == 2 else 0.55, hatch="" if t == 2 else "//",
                      label=f"{name} {t} thread{'s' * (t > 1)}")
    rates.set_yscale("log")
    rates.set_xticks(range(len(CONFIGS)), labels)
    rates.set_ylabel("samples/s (log scale)")
    rates.set_title(f"training throughput (etnn at preset {preset})", pad=64)
    rates.legend(fontsize=8, ncol=5, loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    rates.grid(axis="y", alpha=0.3)

    width = 0.8 / len(PEERS)
    for i, (lib, name) in enumerate(PEERS):
        values = [ratio(s.best("etnn", m, b)[0], s.best(lib, m, b)[0]) or 0 for m, b in CONFIGS]
        speedups.bar([k + (i - (len(PEERS) - 1) / 2) * width for k in range(len(CONFIGS))], values, width,
                     color=COLORS[lib], label=f"etnn / {name}")
    speedups.scatter(range(len(CONFIGS)), [TARGETS[c] for c in CONFIGS], marker="_", s=400, color="black",
                     zorder=3, label="target vs the best peer")
    speedups.axhline(1, color="gray", linewidth=0.8)
    speedups.set_xticks(range(len(CONFIGS)), labels, fontsize=8)
    speedups.set_ylabel("speed-up, best thread settings")
    speedups.set_title("etnn / peer", pad=64)
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
    summary = Summary(parse(args.results))
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
