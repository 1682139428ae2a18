#!/usr/bin/env bash
# etnn beside the strongest CPU peers: LibTorch (C++), PyTorch 2.x eager and torch.compile'd, and
# JAX (jit), all on the same models, batches and training step (forward, cross-entropy, backward,
# SGD lr 0.01 on synthetic in-memory data, PyTorch-default initialization, warm-up and compilation
# excluded) on this machine, in the same run; then README's first command end to end.
#
#   bash scripts/compare.sh [--quick] [--preset release|portable|o2] [--rounds N] [--seconds S] [--e2e|--no-e2e]
#
# Builds bench_train, gemm_rate, mnist_mlp (for the end-to-end part) and, when CMake finds LibTorch,
# libtorch_train at the preset (default release: the project's programs are built for this
# machine's CPU; portable is a consumer's build without -march, o2 the release build at -O2). PyTorch 2.x and JAX come from PyPI into a virtual
# environment, PEERS_VENV (default ~/.cache/etnn/peers-venv), made on first use (python3 -m venv,
# pip install torch jax jaxlib numpy; torch from PyTorch's CPU-only index when it answers, which
# is PyPI's CPU code without the CUDA libraries); without it (no network) those peers are skipped
# with a message, as is a missing LibTorch (libtorch-dev).
#
# Before each 2-thread etnn run, the cache-line round trip between the two CPUs (core_round_trip:
# about 55 ns where a VM's two vCPUs share a last-level cache, 330 ns where its host has put them
# on different CCDs, which slows every 2-thread run), printed with the tables.
# Per round: the float GEMM rates (gemm_rate's libraries and torch_gemm.py's MKL, on wide's shapes
# and a 1024 square), then per configuration and thread count (1, 2) etnn, LibTorch, PyTorch eager,
# PyTorch compile and JAX one after the other for S seconds each (default 3 rounds of 2 s; --quick:
# 1 round of 0.5 s, only mnist_mlp's compile time and no end-to-end part). Threads: OMP_NUM_THREADS
# and MKL_NUM_THREADS (PyPI torch's GEMM is MKL) set to the count for every program, and
# torch/at::set_num_threads; OPENBLAS_NUM_THREADS=1 always, since Debian's LibTorch calls a pthread
# OpenBLAS whose own threads would fight ATen's OpenMP ones (oversubscription); XLA takes no thread
# count, so JAX's 1-thread runs are pinned to one CPU (taskset -c 0) and its 2-thread runs are not.
# The 2-thread GEMM rates are measured again just before and just after etnn's wide/256 run (the
# wide target is a share of them). With --e2e (default in full runs) each round then trains
# mnist_mlp and benchmarks/peers/pytorch_mnist.py for 10 epochs of Fashion-MNIST (README's first command), one after the
# other, each at its default thread count. Then it times g++ -O2 -c on each example and on the
# single-header smoke program, and prints markdown tables of the medians, also written to
# docs/benchmarks.md with the chart docs/benchmarks.png and into README.md's tables
# (scripts/plot_compare.py; another preset to docs/benchmarks-PRESET.* only, --quick to
# build/PRESET/compare/ instead).
# JOBS (default 2) sets the build's parallelism. About 20 minutes on a 2-core machine once built
# (quick: 5; torch.compile's first compilations add a few minutes once, Inductor caches them).
set -euo pipefail
cd "$(dirname "$0")/.."

preset=release rounds=3 seconds=2 quick=0 e2e=
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 rounds=1 seconds=0.5 ;;
    --preset) preset=$2; shift ;;
    --rounds) rounds=$2; shift ;;
    --seconds) seconds=$2; shift ;;
    --e2e) e2e=1 ;;
    --no-e2e) e2e=0 ;;
    *) echo "usage: $0 [--quick] [--preset release|portable|o2] [--rounds N] [--seconds S] [--e2e|--no-e2e]" >&2; exit 2 ;;
  esac
  shift
done
[ -n "$e2e" ] || e2e=$((1 - quick))
python=/usr/bin/python3  # Debian's, with python3-matplotlib: the tables, the chart, etnn's JSON
build=build/$preset
start=$(date +%s)
data=/usr/share/datasets/fashion-mnist  # mnist_mlp's and pytorch_mnist.py's default
e2e_epochs=10  # README's first command: mnist_mlp's default, which reaches the >= 0.85 accuracy class

bash scripts/install-deps.sh
targets=(bench_train gemm_rate core_round_trip)
if [ "$e2e" = 1 ]; then
  if ls "$data"/train-images-idx3-ubyte* >/dev/null 2>&1; then
    targets+=(mnist_mlp)
  else
    echo "compare.sh: no Fashion-MNIST in $data (Debian: apt-get install dataset-fashion-mnist); skipping the end-to-end part" >&2
    e2e=0
  fi
fi
echo "building ${targets[*]} and libtorch_train ($preset preset)..." >&2
cmake --preset "$preset" >/dev/null
cmake --build "$build" -j "${JOBS:-2}" --target "${targets[@]}" >/dev/null
libtorch=0  # benchmarks/CMakeLists.txt defines libtorch_train when find_package(Torch) succeeds
torch_dir=$(sed -n 's/^Torch_DIR:PATH=//p' "$build/CMakeCache.txt")
if grep -q '^ETNN_BUILD_LIBTORCH_PEER:BOOL=ON' "$build/CMakeCache.txt" && [ -n "$torch_dir" ] &&
   [[ $torch_dir != *NOTFOUND ]]; then
  cmake --build "$build" -j "${JOBS:-2}" --target libtorch_train >/dev/null
  libtorch=1
else
  echo "compare.sh: LibTorch not found by CMake (Debian: apt-get install libtorch-dev); skipping LibTorch" >&2
fi

source scripts/peers_venv.sh
pytorch=0 jax=0
if "$peers_python" -c 'import torch, numpy' 2>/dev/null; then
  pytorch=1
else
  echo "compare.sh: $peers_python cannot import torch (pip install torch numpy failed: no network?); skipping PyTorch" >&2
fi
if "$peers_python" -c 'import jax' 2>/dev/null; then
  jax=1
else
  echo "compare.sh: $peers_python cannot import jax (pip install jax jaxlib failed: no network?); skipping JAX" >&2
fi
export TORCHINDUCTOR_COMPILE_THREADS=1  # torch.compile's Inductor: no pool of compiler processes

work=$build/compare
mkdir -p "$work"
results=$work/results.txt
echo "machine load_before=\"$(cut -d' ' -f1-3 /proc/loadavg)\"" >"$results"
if [ $libtorch = 1 ]; then
  echo "machine libtorch_version=\"$(dpkg-query -W -f='${Version}' libtorch-dev 2>/dev/null | sed 's/+.*//')\"" >>"$results"
fi
configs=("mlp784 8" "mlp784 64" "mlp784 256" "tiny 32" "wide 256" "lenet 64" "gpt 16")  # gpt: examples/char_lm

# A peer that fails is reported and left out; the run goes on.
failed() { echo "compare.sh: $* failed; no result from it" >&2; }
# PyPI torch's wheel built with CUDA warns that there is no CUDA runtime on a CPU-only machine.
quiet() { grep -v 'No CUDA runtime is found' || true; }

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

# The float GEMM rates: gemm_rate's (each library it prints a *-gemm line for; Eigen's at least) at 1
# and 2 threads, and PyPI torch's (MKL) on wide's shapes; THREADS limits torch_gemm.py's counts.
gemm_rates() {  # [THREADS...]
  [ $# -gt 0 ] || set -- 1 2
  env -u MKL_NUM_THREADS -u OPENBLAS_NUM_THREADS OMP_NUM_THREADS=2 "$build/benchmarks/gemm_rate" 1024 "$seconds"
  if [ $pytorch = 1 ]; then
    env -u OPENBLAS_NUM_THREADS OMP_NUM_THREADS=2 MKL_NUM_THREADS=2 \
      "$peers_python" benchmarks/peers/torch_gemm.py "$seconds" "$@" 2> >(quiet >&2) || failed torch_gemm.py
  fi
}

# README's first command end to end: mnist_mlp's per-epoch lines ("epoch  1/2  train loss ...
# test accuracy ...  N samples/s  S s", after "data DIR: 60000 train, ... with T threads") as a
# result line like pytorch_mnist.py's, samples/s over all epochs' training loops.
run_etnn_e2e() {
  "$build/examples/mnist_mlp" --epochs "$e2e_epochs" --data "$data" 2>"$work/e2e-etnn-round$round.err" |
    tee "$work/e2e-etnn-round$round.log" |
    "$python" -c '
import re, sys
text = sys.stdin.read()
train = int(re.search(r"^data .*?: (\d+) train", text, re.M).group(1))
threads = re.search(r"with (\d+) threads", text)
rates = [float(r) for r in re.findall(r"^epoch +\d+/\d+ .*?([\d.]+) samples/s", text, re.M)]
accuracy = re.search(r"final test accuracy ([\d.]+)", text).group(1)
seconds = sum(train / r for r in rates)
print(f"result library=etnn-e2e samples_per_s={len(rates) * train / seconds:.1f} test_accuracy={accuracy}",
      f"epochs={len(rates)} threads={threads.group(1) if threads else 0}")'
}

for round in $(seq "$rounds"); do
  echo "round $round of $rounds..." >&2
  gemm_rates >>"$results"
  for config in "${configs[@]}"; do
    read -r model batch <<<"$config"
    for threads in 1 2; do
      export OMP_NUM_THREADS=$threads MKL_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=1
      pin=()  # XLA sizes its thread pool from the CPUs it may use
      [ "$threads" = 1 ] && command -v taskset >/dev/null && pin=(taskset -c 0)
      # How far apart the host has put the two CPUs just now (benchmarks/core_round_trip.cpp): a
      # VM's 2-thread rates swing with it.
      if [ "$threads" = 2 ]; then
        "$build/benchmarks/core_round_trip" | sed "s/\$/ model=$model batch=$batch round=$round/" >>"$results" ||
          failed core_round_trip
      fi
      if [ "$model/$batch/$threads" = wide/256/2 ]; then
        # The wide target is a share of the 2-thread GEMM rate, which drifts on a shared VM from
        # one minute to the next: measure the rates just before and just after etnn's wide run.
        gemm_rates 2 | sed "s/\$/ adjacent=wide round=$round/" >>"$results"
        run_etnn "$model" "$batch" "$threads" | sed "s/\$/ round=$round/" >>"$results"
        gemm_rates 2 | sed "s/\$/ adjacent=wide round=$round/" >>"$results"
      else
        run_etnn "$model" "$batch" "$threads" >>"$results"
      fi
      if [ $libtorch = 1 ] && [ "$model" != gpt ]; then  # the C++ peer spells no transformer; PyTorch's does
        "$build/benchmarks/libtorch_train" "$model" "$batch" "$seconds" "$threads" >>"$results" ||
          failed "libtorch_train $model $batch $seconds $threads"
      fi
      if [ $pytorch = 1 ]; then
        for mode in eager compile; do
          "$peers_python" benchmarks/peers/pytorch_train.py "$model" "$batch" "$seconds" "$threads" "$mode" \
            2> >(quiet >&2) >>"$results" || failed "pytorch_train.py $model $batch $seconds $threads $mode"
        done
      fi
      if [ $jax = 1 ]; then
        "${pin[@]}" "$peers_python" benchmarks/peers/jax_train.py "$model" "$batch" "$seconds" "$threads" \
          >>"$results" || failed "jax_train.py $model $batch $seconds $threads"
      fi
    done
  done
  unset OMP_NUM_THREADS MKL_NUM_THREADS OPENBLAS_NUM_THREADS
  if [ "$e2e" = 1 ]; then  # each at its default thread count
    echo "round $round: end to end, mnist_mlp and pytorch_mnist.py, $e2e_epochs epochs each..." >&2
    { run_etnn_e2e | sed "s/\$/ round=$round/" >>"$results"; } ||
      failed "mnist_mlp --epochs $e2e_epochs (see $work/e2e-etnn-round$round.err)"
    if [ $pytorch = 1 ]; then
      { "$peers_python" benchmarks/peers/pytorch_mnist.py --epochs "$e2e_epochs" --data "$data" 2> >(quiet >&2) |
          tee "$work/e2e-pytorch-round$round.log" | grep '^result ' | sed "s/\$/ round=$round/" >>"$results"; } ||
        failed "pytorch_mnist.py --epochs $e2e_epochs"
    fi
  fi
done

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
[ "$preset" = release ] || out+=-$preset
[ $quick = 1 ] && out=$work/benchmarks
mkdir -p "$(dirname "$out")"
readme=()  # the default preset's full run also rewrites README's tables
[ "$preset" = release ] && [ $quick = 0 ] && readme=(--readme README.md)
"$python" scripts/plot_compare.py "$results" --preset "$preset" --rounds "$rounds" --seconds "$seconds" \
  --markdown "$out.md" --png "$out.png" "${readme[@]}"
echo "compare.sh: $(($(date +%s) - start)) s in all; raw results in $results" >&2
