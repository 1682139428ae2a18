#!/usr/bin/env bash
# etnn beside LibTorch (C++) and PyTorch (Python): the same models, batches and training step
# (forward, cross-entropy, backward, SGD lr 0.01 on synthetic in-memory data, PyTorch-default
# initialization, warm-up excluded) on this machine, in the same run.
#
#   bash scripts/compare.sh [--quick] [--preset native|release] [--rounds N] [--seconds S]
#
# Builds bench_train, gemm_rate and (when CMake finds LibTorch) libtorch_train at the preset
# (default native: -march=native, as a benchmark of this machine is built; release is the portable
# SSE2 build), then per round measures Eigen's GEMM rate and, per configuration and thread
# count (1, 2; OMP/MKL/OPENBLAS_NUM_THREADS set for every program, and torch/at::set_num_threads),
# runs etnn, LibTorch and PyTorch one after the other for S seconds each (default 3 rounds of 2 s;
# --quick: 1 round of 0.5 s and only mnist_mlp's compile time). Then it times g++ -O2 -c on each
# example and on the single-header smoke program, and prints markdown tables of the medians, also
# written to docs/benchmarks.md with the chart docs/benchmarks.png and into README.md's tables
# (scripts/plot_compare.py; another preset to docs/benchmarks-PRESET.* only, --quick to
# build/PRESET/compare/ instead).
# A missing LibTorch (libtorch-dev) or PyTorch (python3-torch) is skipped with a message.
# JOBS (default 2) sets the build's parallelism. About 9 minutes on a 2-core machine once built
# (quick: 2), plus the first build's few minutes.
set -euo pipefail
cd "$(dirname "$0")/.."

preset=native rounds=3 seconds=2 quick=0
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 rounds=1 seconds=0.5 ;;
    --preset) preset=$2; shift ;;
    --rounds) rounds=$2; shift ;;
    --seconds) seconds=$2; shift ;;
    *) echo "usage: $0 [--quick] [--preset native|release] [--rounds N] [--seconds S]" >&2; exit 2 ;;
  esac
  shift
done
python=/usr/bin/python3  # Debian's: python3-torch and python3-matplotlib live there
build=build/$preset
start=$(date +%s)

bash scripts/install-deps.sh
echo "building bench_train, gemm_rate and libtorch_train ($preset preset)..." >&2
cmake --preset "$preset" >/dev/null
cmake --build "$build" -j "${JOBS:-2}" --target bench_train gemm_rate >/dev/null
libtorch=0  # benchmarks/CMakeLists.txt defines libtorch_train when find_package(Torch) succeeds
torch_dir=$(sed -n 's/^Torch_DIR:PATH=//p' "$build/CMakeCache.txt")
if grep -q '^ETNN_BUILD_LIBTORCH_PEER:BOOL=ON' "$build/CMakeCache.txt" && [ -n "$torch_dir" ] &&
   [[ $torch_dir != *NOTFOUND ]]; then
  cmake --build "$build" -j "${JOBS:-2}" --target libtorch_train >/dev/null
  libtorch=1
else
  echo "compare.sh: LibTorch not found by CMake (Debian: apt-get install libtorch-dev); skipping LibTorch" >&2
fi
pytorch=0
if "$python" -c "import torch" 2>/dev/null; then
  pytorch=1
else
  echo "compare.sh: $python cannot import torch (Debian: apt-get install python3-torch); skipping PyTorch" >&2
fi

work=$build/compare
mkdir -p "$work"
results=$work/results.txt
echo "machine load_before=\"$(cut -d' ' -f1-3 /proc/loadavg)\"" >"$results"
configs=("mlp784 8" "mlp784 64" "mlp784 256" "tiny 32" "wide 256" "lenet 64")

# One etnn configuration through Google Benchmark's JSON, as a result line like the peers'.
run_etnn() {  # MODEL BATCH THREADS
  "$build/benchmarks/bench_train" --benchmark_filter="^$1/$2/" --benchmark_min_time="$seconds" \
    --benchmark_format=json 2>/dev/null |
    "$python" -c '
import json, sys
b = json.load(sys.stdin)["benchmarks"][0]
model, batch = b["name"].split("/")[:2]
rate, gflops, steps, rss = b["samples/s"], b["GFLOP/s"], b["iterations"], b["peak_rss_MiB"]
print(f"result library=etnn model={model} batch={batch} threads={sys.argv[1]} samples_per_s={rate:.1f}",
      f"gflops={gflops:.2f} steps={steps} peak_rss_mb={rss:.1f}")' "$3"
}

for round in $(seq "$rounds"); do
  echo "round $round of $rounds..." >&2
  OMP_NUM_THREADS=2 "$build/benchmarks/gemm_rate" 1024 "$seconds" >>"$results"
  for config in "${configs[@]}"; do
    read -r model batch <<<"$config"
    for threads in 1 2; do
      export OMP_NUM_THREADS=$threads MKL_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads
      if [ "$model/$batch/$threads" = wide/256/2 ]; then
        # The wide target is a share of the 2-thread GEMM rate, which drifts on a shared VM from
        # one minute to the next: measure that rate just before and just after etnn's wide run.
        "$build/benchmarks/gemm_rate" 1024 "$seconds" | sed "s/\$/ adjacent=wide round=$round/" >>"$results"
        run_etnn "$model" "$batch" "$threads" | sed "s/\$/ round=$round/" >>"$results"
        "$build/benchmarks/gemm_rate" 1024 "$seconds" | sed "s/\$/ adjacent=wide round=$round/" >>"$results"
      else
        run_etnn "$model" "$batch" "$threads" >>"$results"
      fi
      if [ $libtorch = 1 ]; then
        "$build/benchmarks/libtorch_train" "$model" "$batch" "$seconds" "$threads" >>"$results"
      fi
      if [ $pytorch = 1 ]; then
        "$python" benchmarks/peers/pytorch_train.py "$model" "$batch" "$seconds" "$threads" >>"$results"
      fi
    done
  done
done
unset OMP_NUM_THREADS MKL_NUM_THREADS OPENBLAS_NUM_THREADS

# Compile time of each example and of the single-header smoke program: g++ -O2 -c, no ccache.
echo "timing compilation..." >&2
cxx=(${CXX:-g++} -std=c++20 -O2 -fopenmp -DETNN_WITH_ZLIB=1 -Iinclude -isystem /usr/include/eigen3)
sources=(examples/*.cpp)
[ $quick = 1 ] && sources=(examples/mnist_mlp.cpp)
for source in "${sources[@]}" tests/single_include/smoke.cpp; do
  include=(-Iexamples)
  [ "$source" = tests/single_include/smoke.cpp ] && include=(-Isingle_include)
  t0=$(date +%s.%N)
  "${cxx[@]}" "${include[@]}" -c "$source" -o "$work/compile.o"
  t1=$(date +%s.%N)
  echo "compile source=$source seconds=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')" >>"$results"
done
rm -f "$work/compile.o"

echo "machine cpu=\"$(lscpu | sed -n 's/^Model name: *//p')\" cores=$(nproc) load_after=\"$(cut -d' ' -f1-3 /proc/loadavg)\"" >>"$results"

out=docs/benchmarks  # README's; another preset's beside it; the quick version's beside the raw results
[ "$preset" = native ] || out+=-$preset
[ $quick = 1 ] && out=$work/benchmarks
mkdir -p "$(dirname "$out")"
readme=()  # the default preset's full run also rewrites README's tables
[ "$preset" = native ] && [ $quick = 0 ] && readme=(--readme README.md)
"$python" scripts/plot_compare.py "$results" --preset "$preset" --rounds "$rounds" --seconds "$seconds" \
  --markdown "$out.md" --png "$out.png" "${readme[@]}"
echo "compare.sh: $(($(date +%s) - start)) s in all; raw results in $results" >&2
