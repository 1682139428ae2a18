#!/usr/bin/env bash
# The GPU check, for a machine with an NVIDIA GPU, nvcc and PyTorch but none of Debian's packages:
# builds the CUDA tests and the GPU benchmark with nvcc directly (no CMake: Eigen's and doctest's
# headers come from a folder carried along, see below), runs the tests, runs compute-sanitizer's
# memcheck on the test program, runs the benchmark and the PyTorch peers on the same GPU, and
# prints one table. Finishes in about 5 minutes on an H200 (each step has a time limit).
#   bash scripts/gpu-check.sh [OUT_DIR]          (logs go to OUT_DIR, default build/gpu-check)
# Headers: ETNN_GPU_DEPS (default build/gpu-deps) holds eigen3/ and doctest/, which
# `bash scripts/gpu-check.sh --prepare` copies from this machine's /usr/include.
set -uo pipefail
cd "$(dirname "$0")/.."
deps=${ETNN_GPU_DEPS:-build/gpu-deps}

if [[ "${1:-}" == "--prepare" ]]; then
  mkdir -p "$deps"
  rm -rf "$deps/eigen3" "$deps/doctest"
  cp -r /usr/include/eigen3 "$deps/eigen3"
  cp -r /usr/include/doctest "$deps/doctest"
  du -sh "$deps"
  exit 0
fi

out=${1:-build/gpu-check}
mkdir -p "$out"
bin=build/gpu-check-bin
mkdir -p "$bin"
[[ -d "$deps/eigen3" && -d "$deps/doctest" ]] || { echo "gpu-check: $deps lacks eigen3/ or doctest/ (run --prepare)"; exit 2; }
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
PYTHON=${PYTHON:-python3}
status=0
note() { echo "== $*" | tee -a "$out/summary.txt"; }

note "$(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1)"
note "nvcc: $($NVCC --version | tail -1); python: $($PYTHON -c 'import torch; print("torch", torch.__version__)' 2>&1)"

# Build: one nvcc per program, in parallel, for the GPU present (-arch=native; ETNN_CUDA_ARCH=sm_90
# sets another).
flags=(-std=c++20 -O3 -arch="${ETNN_CUDA_ARCH:-native}" --expt-relaxed-constexpr -diag-suppress=20011,20012,20014,20015
       -Xcompiler=-fopenmp -Iinclude -Itests -I"$deps/eigen3" -I"$deps" -lcublasLt -lgomp)
t0=$(date +%s)
"$NVCC" "${flags[@]}" tests/cuda/test_cuda.cu tests/cuda/test_cuda_training.cu tests/cuda/test_cuda_mixed.cu -x cu tests/main.cpp -o "$bin/test_cuda" > "$out/build_test_cuda.log" 2>&1 &
p1=$!
"$NVCC" "${flags[@]}" benchmarks/bench_cuda.cu -o "$bin/bench_cuda" > "$out/build_bench_cuda.log" 2>&1 &
p2=$!
"$NVCC" "${flags[@]}" tests/cuda/fused_mlp_check.cu -o "$bin/fused_mlp_check" > "$out/build_fused_mlp.log" 2>&1 &
p3=$!
# NCCL: from the toolkit, the system, or the pip package PyTorch brings (nvidia-nccl).
nccl_flags=()
for dir in "$(dirname "$NVCC")/.." /usr /usr/local \
           $("$PYTHON" -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null); do
  lib=$(ls "$dir"/lib*/libnccl.so* "$dir"/lib/x86_64-linux-gnu/libnccl.so* 2>/dev/null | head -1)
  if [[ -f "$dir/include/nccl.h" && -n "$lib" ]]; then
    nccl_flags=(-I"$dir/include" -L"$(dirname "$lib")" -l:"$(basename "$lib")" -Xlinker -rpath -Xlinker "$(dirname "$lib")")
    break
  fi
done
p4=
if [[ "${ETNN_GPU_CHECK_NCCL:-1}" == 0 ]]; then
  note "test_nccl skipped (ETNN_GPU_CHECK_NCCL=0)"
elif (( ${#nccl_flags[@]} )); then
  timeout 180 "$NVCC" "${flags[@]}" "${nccl_flags[@]}" tests/cuda/test_nccl.cu -x cu tests/main.cpp \
    -o "$bin/test_nccl" > "$out/build_test_nccl.log" 2>&1 &
  p4=$!
else
  note "NCCL not found (no nccl.h with libnccl): test_nccl not built"
fi
for p in $p1 $p2 $p3 $p4; do wait "$p" || status=1; done
note "build: $(( $(date +%s) - t0 )) s, status $status"
tail -n 20 "$out"/build_*.log | grep -E "error" | head -20

run() {  # run NAME TIMEOUT COMMAND...: output to $out/NAME.log, one summary line
  local name=$1 limit=$2; shift 2
  local t=$(date +%s)
  timeout "$limit" "$@" > "$out/$name.log" 2>&1
  local rc=$?
  note "$name: exit $rc in $(( $(date +%s) - t )) s; $(grep -E 'test cases:|PASS|FAIL|skipped' "$out/$name.log" | tail -2 | tr '\n' ' ')"
  return $rc
}

[[ -x "$bin/test_cuda" ]] && { run test_cuda 120 "$bin/test_cuda" || status=1; }
[[ -x "$bin/fused_mlp_check" ]] && { run fused_mlp_check 60 "$bin/fused_mlp_check" || status=1; }
[[ -x "$bin/test_nccl" ]] && { run test_nccl 60 "$bin/test_nccl" || status=1; }
SANITIZER=$(command -v compute-sanitizer || echo "$(dirname "$NVCC")/compute-sanitizer")
if [[ -x "$bin/test_cuda" && -x "$SANITIZER" ]]; then
  # The device cases only (the host-side ones launch nothing).
  run memcheck 180 "$SANITIZER" --tool memcheck --error-exitcode 3 "$bin/test_cuda" || status=1
  note "memcheck: $(grep -E 'ERROR SUMMARY' "$out/memcheck.log" | tail -1)"
fi
[[ -x "$bin/bench_cuda" ]] && { run bench_cuda 120 "$bin/bench_cuda" --seconds 0.5 || status=1; }
run pytorch_gpu 180 "$PYTHON" benchmarks/peers/pytorch_gpu.py --seconds 0.5 || true
cat "$out/bench_cuda.log" "$out/pytorch_gpu.log" 2>/dev/null | "$PYTHON" scripts/gpu_table.py | tee "$out/table.md"
note "done, status $status"
exit $status
