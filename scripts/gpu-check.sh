#!/usr/bin/env bash
# The GPU check, for a machine with an NVIDIA GPU, nvcc and PyTorch but none of Debian's packages:
# builds the CUDA tests and the GPU benchmark with nvcc directly (no CMake), one nvcc per
# translation unit, all at once; runs the tests, compute-sanitizer's memcheck on the test program,
# the benchmark and the PyTorch peers on the same GPU, and prints one table. Every step has a time
# limit, and the limits (below) add up to under 540 s, so the whole check fits one 600 s device call.
#
#   bash scripts/gpu-check.sh --prepare   on this machine, before the device call: copies Eigen's and
#                                         doctest's headers (the GPU machine has neither) into
#                                         build/gpu-deps (ETNN_GPU_DEPS), and prints the limits
#   bash scripts/gpu-check.sh --prebuild  the same, then builds the programs here, without a GPU, for
#                                         ETNN_CUDA_ARCH (default sm_90: the H100 and H200) into
#                                         build/gpu-check-bin, stamped with a hash of the sources and
#                                         flags, so that the device call spends none of its time
#                                         compiling (a device minute costs more than ten here)
#   bash scripts/gpu-check.sh [OUT_DIR]   on the GPU machine; OUT_DIR defaults to $OUT, else
#                                         build/gpu-check. Prebuilt programs are run only when their
#                                         stamp matches these sources and the GPU's architecture;
#                                         otherwise they are removed and everything is built there
#
# The one device call (the run tool), carrying the prepared headers (and the prebuilt programs):
#   command: bash scripts/gpu-check.sh "$OUT"   carry: ["build/gpu-deps", "build/gpu-check-bin"]
#   timeout_s: 600
#
# OUT_DIR then holds three files: summary.txt (a line per step; also printed), table.md (etnn
# against PyTorch) and gpu-check-logs.tar.gz (every build and run log).
# Settings: ETNN_CUDA_ARCH (default native: the GPU present), NVCC, PYTHON, ETNN_GPU_CHECK_NCCL=0
# (skip the NCCL test).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
deps=${ETNN_GPU_DEPS:-build/gpu-deps}

# Seconds per step. Steps run one after another (a step's parallel builds share its limit), so the
# check takes at most their sum.
limit_info=25       # nvidia-smi, nvcc's and torch's versions, where NCCL is
limit_compile=190   # every translation unit, each its own nvcc, in parallel
limit_link=30       # the programs, in parallel
limit_test_cuda=60
limit_fused_mlp=30
limit_test_nccl=30
limit_memcheck=75
limit_bench=45
limit_pytorch=35
limit_table=5
limit_pack=10
limits_total=$((limit_info + limit_compile + limit_link + limit_test_cuda + limit_fused_mlp + limit_test_nccl +
                limit_memcheck + limit_bench + limit_pytorch + limit_table + limit_pack))
if ((limits_total >= 540)); then
  echo "gpu-check: the step limits add up to $limits_total s; they must stay under 540 s" >&2
  exit 2
fi

if [[ "${1:-}" == "--prepare" || "${1:-}" == "--prebuild" ]]; then
  mkdir -p "$deps"
  rm -rf "${deps:?}/eigen3" "${deps:?}/doctest"
  cp -r /usr/include/eigen3 "$deps/eigen3" || exit 2
  cp -r /usr/include/doctest "$deps/doctest" || exit 2
  du -sh "$deps"
  echo "gpu-check: step limits add up to $limits_total s"
  if [[ "$1" == "--prepare" ]]; then
    echo "device call: command 'bash scripts/gpu-check.sh \"\$OUT\"', carry [\"$deps\"], timeout_s 600"
    exit 0
  fi
fi

prebuild=0
if [[ "${1:-}" == "--prebuild" ]]; then
  prebuild=1
  out=build/gpu-check-prebuild
  limit_compile=1500  # here the translation units share 2 cores, and no device time is spent
  limit_link=300
else
  out=${1:-${OUT:-build/gpu-check}}
fi
mkdir -p "$out"
logs=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check-logs.XXXXXX")
bin=build/gpu-check-bin
status=0
note() { echo "== $*" | tee -a "$logs/summary.txt"; }
# shellcheck disable=SC2317  # called by the EXIT trap
pack() {  # the logs into one archive, summary and table beside it
  cp "$logs/summary.txt" "$out/summary.txt" 2>/dev/null
  [[ -f "$logs/table.md" ]] && cp "$logs/table.md" "$out/table.md"
  timeout "$limit_pack" tar -czf "$out/gpu-check-logs.tar.gz" -C "$logs" . && rm -rf "$logs"
}
trap pack EXIT
trap 'note "interrupted"; exit 130' INT TERM
[[ -d "$deps/eigen3" && -d "$deps/doctest" ]] || {
  note "gpu-check: $deps lacks eigen3/ or doctest/ (run bash scripts/gpu-check.sh --prepare first)"
  exit 2
}
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
PYTHON=${PYTHON:-python3}
note "step limits: $limits_total s in all"

# Info, and NCCL: from the toolkit, the system, or the pip package PyTorch brings (nvidia-nccl).
note "$(date -u +%FT%TZ) $(timeout 5 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1)"
python_info=$(timeout $((limit_info - 10)) "$PYTHON" -c '
import torch
print("torch", torch.__version__)
try:
    import nvidia.nccl as m
    print(list(m.__path__)[0])
except Exception:
    print("")' 2>&1)
note "nvcc: $(timeout 5 "$NVCC" --version | tail -1); python: $(head -1 <<< "$python_info")"
nccl_flags=()
for dir in "$(dirname "$NVCC")/.." /usr /usr/local "$(sed -n 2p <<< "$python_info")"; do
  lib=$({ compgen -G "$dir/lib*/libnccl.so*"; compgen -G "$dir/lib/x86_64-linux-gnu/libnccl.so*"; } | head -1)
  if [[ -f "$dir/include/nccl.h" && -n "$lib" ]]; then
    nccl_flags=(-I"$dir/include" -L"$(dirname "$lib")" -l:"$(basename "$lib")" -Xlinker -rpath -Xlinker "$(dirname "$lib")")
    break
  fi
done

# Build: one nvcc per translation unit, all in parallel, for the GPU present (its compute capability
# as nvidia-smi reports it, else -arch=native; a prebuild without a GPU: sm_90; ETNN_CUDA_ARCH sets
# another); then the links, in parallel.
if ((prebuild)); then
  arch=${ETNN_CUDA_ARCH:-sm_90}
else
  capability=$(timeout 5 nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1)
  arch=${ETNN_CUDA_ARCH:-$([[ $capability =~ ^[0-9]+\.[0-9]+$ ]] && echo "sm_${capability/./}" || echo native)}
fi
flags=(-std=c++20 -O3 -arch="$arch" --expt-relaxed-constexpr "-diag-suppress=20011,20012,20014,20015"
       -Xcompiler=-fopenmp -Iinclude -Itests -I"$deps/eigen3" -I"$deps")
link_flags=(-arch="$arch" -lcublasLt -lgomp)
units=(main:tests/main.cpp test_cuda:tests/cuda/test_cuda.cu test_cuda_training:tests/cuda/test_cuda_training.cu
       test_cuda_mixed:tests/cuda/test_cuda_mixed.cu fused_mlp_check:tests/cuda/fused_mlp_check.cu
       bench_cuda:benchmarks/bench_cuda.cu)
if [[ "${ETNN_GPU_CHECK_NCCL:-1}" == 0 ]]; then
  note "test_nccl skipped (ETNN_GPU_CHECK_NCCL=0)"
elif ((${#nccl_flags[@]})); then
  units+=(test_nccl:tests/cuda/test_nccl.cu)
else
  note "NCCL not found (no nccl.h with libnccl): test_nccl not built"
fi

# start NAME LIMIT PRODUCT COMMAND...: runs the command in the background under the time limit,
# output to $logs/NAME.log. finish: waits for every started command; a line per failure, whose
# PRODUCT (a file it may have left half written) is removed; 1 if any failed.
declare -A started=() limits=() products=()
start() {
  local name=$1 limit=$2
  products[$name]=$3
  shift 3
  timeout "$limit" "$@" > "$logs/$name.log" 2>&1 &
  started[$name]=$!
  limits[$name]=$limit
}
finish() {
  local name rc failed=0
  for name in "${!started[@]}"; do
    wait "${started[$name]}"
    rc=$?
    if ((rc != 0)); then
      failed=1
      rm -f "${products[$name]}"
      note "$name: exit $rc$( ((rc == 124)) && echo " (over its ${limits[$name]} s)")"
      grep -m 5 -E "error" "$logs/$name.log"
    fi
  done
  started=()
  return $failed
}

# The programs' stamp: the architecture, the flags, the units and every header and test source
# (NCCL's paths differ between machines and are left out: the run finds libnccl.so.2 through
# LD_LIBRARY_PATH, below).
stamp=$({ printf '%s\n' "$arch" "${flags[*]}" "${link_flags[*]}" "${units[*]}"
          find include tests benchmarks/bench_cuda.cu -type f -print0 | sort -z | xargs -0 sha256sum; } | sha256sum | cut -c1-16)

# link NAME OBJECT...: $bin/NAME from $bin/OBJECT.o..., if every object was built.
link() {
  local name=$1 object objects=()
  shift
  for object in "$@"; do
    [[ -f "$bin/$object.o" ]] || return 0
    objects+=("$bin/$object.o")
  done
  local extra=()
  [[ $name == test_nccl ]] && extra=("${nccl_flags[@]}")
  start "link_$name" "$limit_link" "$bin/$name" "$NVCC" "${objects[@]}" "${link_flags[@]}" "${extra[@]}" -o "$bin/$name"
}

# Builds every program into $bin, after removing what an earlier build left there (stale programs
# and objects never run: a failed build leaves nothing behind to be mistaken for one), and stamps
# them when all were built.
build_programs() {
  [[ -d "$bin" ]] && note "$bin is stale (stamp $(cat "$bin/stamp" 2>/dev/null || echo none), sources $stamp): rebuilt"
  rm -rf "$bin"
  mkdir -p "$bin"
  t0=$SECONDS
  for unit in "${units[@]}"; do
    name=${unit%%:*}
    extra=()
    [[ $name == test_nccl ]] && extra=("${nccl_flags[@]}")
    start "build_$name" "$limit_compile" "$bin/$name.o" "$NVCC" "${flags[@]}" "${extra[@]}" -x cu -c "${unit#*:}" -o "$bin/$name.o"
  done
  finish || status=1
  note "compile: $((SECONDS - t0)) s, ${#units[@]} translation units"

  t0=$SECONDS
  link test_cuda main test_cuda test_cuda_training test_cuda_mixed
  link fused_mlp_check fused_mlp_check
  link bench_cuda bench_cuda
  link test_nccl main test_nccl
  programs=${#started[@]}
  finish || status=1
  note "link: $((SECONDS - t0)) s, $programs programs"
  rm -f "$bin"/*.o  # only the programs are kept (and carried, after a prebuild)
  ((status == 0)) && echo "$stamp" > "$bin/stamp"
}

if ((!prebuild)) && [[ -f "$bin/stamp" && "$(cat "$bin/stamp")" == "$stamp" ]]; then
  note "prebuilt programs match these sources and $arch (stamp $stamp): not rebuilt"
else
  build_programs
fi
if ((prebuild)); then
  note "prebuilt for $arch in $bin (stamp $stamp, $(du -sh "$bin" | cut -f1)), status $status"
  ((status == 0)) && echo "device call: command 'bash scripts/gpu-check.sh \"\$OUT\"'," \
    "carry [\"$deps\", \"$bin\"], timeout_s 600"
  exit $status
fi
# The programs find the toolkit's cuBLASLt and the NCCL found above wherever they were linked.
program_libs="$(dirname "$NVCC")/../lib64${nccl_flags:+:${nccl_flags[1]#-L}}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

run() {  # run NAME LIMIT COMMAND...: output to $logs/NAME.log, one summary line
  local name=$1 limit=$2 t=$SECONDS
  shift 2
  timeout "$limit" "$@" > "$logs/$name.log" 2>&1
  local rc=$?
  note "$name: exit $rc$( ((rc == 124)) && echo " (over its $limit s)") in $((SECONDS - t)) s; $(grep -E 'test cases:|PASS|FAIL|skipped' "$logs/$name.log" | tail -2 | tr '\n' ' ')"
  return $rc
}

ours=(env LD_LIBRARY_PATH="$program_libs")
[[ -x "$bin/test_cuda" ]] && { run test_cuda "$limit_test_cuda" "${ours[@]}" "$bin/test_cuda" || status=1; }
[[ -x "$bin/fused_mlp_check" ]] && { run fused_mlp_check "$limit_fused_mlp" "${ours[@]}" "$bin/fused_mlp_check" || status=1; }
[[ -x "$bin/test_nccl" ]] && { run test_nccl "$limit_test_nccl" "${ours[@]}" "$bin/test_nccl" || status=1; }
SANITIZER=$(command -v compute-sanitizer || echo "$(dirname "$NVCC")/compute-sanitizer")
if [[ -x "$bin/test_cuda" && -x "$SANITIZER" ]]; then
  run memcheck "$limit_memcheck" "${ours[@]}" "$SANITIZER" --tool memcheck --error-exitcode 3 "$bin/test_cuda" || status=1
  note "memcheck: $(grep -E 'ERROR SUMMARY' "$logs/memcheck.log" | tail -1)"
fi
[[ -x "$bin/bench_cuda" ]] && { run bench_cuda "$limit_bench" "${ours[@]}" "$bin/bench_cuda" --seconds 0.5 || status=1; }
# The peer's modes that fit the limit: eager and the whole-step CUDA graphs, fp32 and bf16 (the
# compiled modes' compilation alone, max-autotune's above all, takes minutes: a device call of its
# own, pytorch_gpu.py --modes all).
run pytorch_gpu "$limit_pytorch" "$PYTHON" benchmarks/peers/pytorch_gpu.py --seconds 0.3 \
  --modes eager,bf16,graphs,graphs_bf16
cat "$logs/bench_cuda.log" "$logs/pytorch_gpu.log" 2>/dev/null |
  timeout "$limit_table" "$PYTHON" scripts/gpu_table.py | tee "$logs/table.md"
note "done in $SECONDS s, status $status"
exit $status
