#!/usr/bin/env bash
# README's first command under load: examples/mnist_mlp on 1 and on 2 threads while another process
# keeps one core busy (a shell loop, unpinned: the kernel's scheduler places it, as it would a
# user's compile or browser), alternating the two settings for --rounds rounds of --epochs epochs.
# Prints the median samples/s of each setting and their ratio; the target (issue 18) is 2 threads
# >= 1 thread. Run it on an otherwise idle machine.
# Usage: bash scripts/under_load.sh [--rounds 3] [--epochs 3] [--preset release]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=3 epochs=3 preset=release
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --preset) preset=$2; shift 2 ;;
    *) echo "usage: bash scripts/under_load.sh [--rounds N] [--epochs N] [--preset NAME]" >&2; exit 2 ;;
  esac
done
data=/usr/share/datasets/fashion-mnist
[ -d "$data" ] || { echo "under_load.sh: no $data (apt-get install dataset-fashion-mnist)" >&2; exit 2; }
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" --target mnist_mlp >/dev/null

bash -c 'while :; do :; done' &
busy=$!
trap 'kill $busy 2>/dev/null' EXIT
sleep 1

# samples/s over the training loops of one run (mnist_mlp prints "... N samples/s" per epoch).
rate() {
  "build/$preset/examples/mnist_mlp" --epochs "$epochs" --threads "$1" --data "$data" 2>/dev/null |
    python3 -c '
import re, sys
rates = [float(r) for r in re.findall(r"^epoch +\d+/\d+ .*?([\d.]+) samples/s", sys.stdin.read(), re.M)]
print(f"{len(rates) / sum(1 / r for r in rates):.0f}")'
}

one=() two=()
for round in $(seq "$rounds"); do
  one+=("$(rate 1)")
  two+=("$(rate 2)")
  echo "round $round: 1 thread ${one[-1]} samples/s, 2 threads ${two[-1]} samples/s" >&2
done
python3 - "${one[*]}" "${two[*]}" <<'EOF'
import statistics, sys
one, two = (statistics.median(float(v) for v in arg.split()) for arg in sys.argv[1:3])
ratio = two / one
print("| with one core busy | samples/s (median) |")
print("|---|---:|")
print(f"| 1 thread | {one / 1e3:.1f}k |")
print(f"| 2 threads | {two / 1e3:.1f}k |")
print(f"\n2 threads / 1 thread: {ratio:.2f}x (target >= 1.0x: {'met' if ratio >= 1 else 'not met'})")
EOF
