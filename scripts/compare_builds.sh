#!/usr/bin/env bash
# etnn's training step built the ways users build it, in one run: `release` (this project's
# programs, -O3 -march=native), `portable` (a consumer's Release build without -march) and `o2`
# (release at -O2, Debian's and many projects' default). Each configuration runs at 1 and 2
# threads in ROUNDS interleaved rounds (release, portable, o2, then again) of S seconds; the table
# gives the medians and portable / release and o2 / release at each thread count.
#
#   bash scripts/compare_builds.sh [--rounds N] [--seconds S]      (default 5 rounds of 1 s)
#
# Builds bench_train at the three presets first (JOBS, default 2, sets the parallelism). Nothing
# else should run meanwhile: the machine is the measurement.
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=5 seconds=1
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift ;;
    --seconds) seconds=$2; shift ;;
    *) echo "usage: $0 [--rounds N] [--seconds S]" >&2; exit 2 ;;
  esac
  shift
done
presets=(release portable o2)
configs=("mlp784 64" "mlp784 256" "tiny 32" "wide 256")

for preset in "${presets[@]}"; do
  echo "building bench_train ($preset preset)..." >&2
  cmake --preset "$preset" >/dev/null
  cmake --build "build/$preset" -j "${JOBS:-2}" --target bench_train >/dev/null
done

results=$(mktemp)
trap 'rm -f "$results"' EXIT
for round in $(seq "$rounds"); do
  echo "round $round of $rounds..." >&2
  for config in "${configs[@]}"; do
    read -r model batch <<<"$config"
    for preset in "${presets[@]}"; do
      for threads in 1 2; do
        OMP_NUM_THREADS=$threads "build/$preset/benchmarks/bench_train" --benchmark_filter="^$model/$batch/" \
          --benchmark_min_time="$seconds" --benchmark_format=json 2>/dev/null |
          python3 -c '
import json, sys
b = json.load(sys.stdin)["benchmarks"][0]
print(sys.argv[1], sys.argv[2], b["samples/s"])' "$preset $model/$batch" "$threads" >>"$results"
      done
    done
  done
done

python3 - "$results" "${presets[@]}" <<'PY'
import statistics, sys
from collections import defaultdict
path, presets = sys.argv[1], sys.argv[2:]
runs = defaultdict(list)
for line in open(path):
    preset, config, threads, rate = line.split()
    runs[(preset, config, int(threads))].append(float(rate))
median = {key: statistics.median(rates) for key, rates in runs.items()}
configs = list(dict.fromkeys(config for _, config, _ in runs))
def k(x): return f"{x / 1e3:.1f}k" if x < 1e6 else f"{x / 1e6:.2f}M"
print("| model/batch | " + " | ".join(f"{p} 1T / 2T" for p in presets) +
      " | portable / release 1T, 2T | o2 / release 1T, 2T |")
print("|---|" + "---:|" * (len(presets) + 2))
for config in configs:
    cells = [f"{k(median[(p, config, 1)])} / {k(median[(p, config, 2)])}" for p in presets]
    ratios = [", ".join(f"{median[(p, config, t)] / median[('release', config, t)]:.2f}x" for t in (1, 2))
              for p in ("portable", "o2")]
    print(f"| {config} | " + " | ".join(cells + ratios) + " |")
print(f"\nsamples/s, medians of {len(next(iter(runs.values())))} rounds; ratios at the same thread count")
PY
