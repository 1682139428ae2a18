#!/usr/bin/env bash
# Data-parallel benchmark: builds bench_dist (release preset), runs it on 2 ranks with one thread
# each, and prints as markdown tables the allreduce bandwidth and the weak-scaling efficiency of
# training: 2-rank throughput / (2 x 1-rank throughput), both measured interleaved in short rounds
# (see benchmarks/bench_dist.cpp), with the quartiles of the rounds' own ratios. The job runs once
# more with MPI's own allreduce (ETNN_DIST_SHARED_MEMORY=0 ETNN_DIST_ALLREDUCE=mpi) for comparison,
# and PyTorch 2.x DDP (gloo, benchmarks/peers/pytorch_ddp.py, from PyPI in PEERS_VENV) trains the
# same job beside it.
#
# Then, across hosts (scripts/multihost.sh: 2 and 3 hosts of network namespaces, one rank each,
# every host's link a 1 Gbit/s token bucket): the time of one float sum with each of dist::Mpi's
# algorithms (MpiOptions::allreduce), at 1 MiB and at mlp784's and wide's gradient sizes.
# --hosts-only runs that part alone.
set -euo pipefail
cd "$(dirname "$0")/.."
hosts_only=0
[ "${1:-}" != --hosts-only ] || hosts_only=1
bash scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target bench_dist >/dev/null
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1

# PyTorch 2.x DDP over gloo on the same job (benchmarks/peers/pytorch_ddp.py), in the same run.
source scripts/peers_venv.sh
ddp_ok=0
"$peers_python" -c 'import torch' 2>/dev/null && ddp_ok=1
ddp() {  # RANKS [mpirun options...]: PyTorch DDP's samples/s
  local ranks=$1; shift
  mpirun --oversubscribe -np "$ranks" "$@" "$peers_python" benchmarks/peers/pytorch_ddp.py | awk '$1 == "ddp" { print $3 }'
}

# The across-hosts table. Bytes: 1 MiB; mlp784's gradients (407,050 floats); wide's (5,824,522).
across_hosts() {
  local sizes="1048576 1628200 23298088" rate=1gbit
  echo "| hosts | message | MPI's allreduce (ms) | etnn's ring (ms) | parameter server (ms) | ring: sent per rank | parameter server: sent by the server |"
  echo "|---:|---|---:|---:|---:|---:|---:|"
  for hosts in 2 3; do
    declare -A time=()
    for algorithm in mpi ring parameter_server; do
      local out code=0
      out=$(bash scripts/multihost.sh --hosts "$hosts" --rate "$rate" -- mpirun -np "$hosts" -x OMP_NUM_THREADS=1 \
              -x ETNN_DIST_ALLREDUCE="$algorithm" build/release/benchmarks/bench_dist --allreduce-bytes $sizes) || code=$?
      if [ "$code" -eq 77 ]; then echo "(skipped: scripts/multihost.sh needs root and network namespaces)"; return; fi
      [ "$code" -eq 0 ] || { echo "bench_dist failed on $hosts hosts with $algorithm" >&2; exit 1; }
      while read -r _ bytes us _; do time[$algorithm.$bytes]=$us; done < <(echo "$out" | awk '$1 == "allreduce"')
    done
    for bytes in $sizes; do
      case $bytes in 1048576) label="1 MiB" ;; 1628200) label="1.6 MB (mlp784)" ;; *) label="23.3 MB (wide)" ;; esac
      awk -v h="$hosts" -v l="$label" -v b="$bytes" -v m="${time[mpi.$bytes]}" -v r="${time[ring.$bytes]}" \
          -v p="${time[parameter_server.$bytes]}" 'BEGIN {
        printf "| %d | %s | %.1f | %.1f | %.1f | %.2f n | %d n |\n", h, l, m / 1e3, r / 1e3, p / 1e3, 2 * (h - 1) / h, h - 1 }'
    done
  done
  echo
  echo "(1 Gbit/s = 125 MB/s: n = 1.6 MB crosses one link in 13 ms.)"
  echo
  # Training on 2 hosts over the same link, with overlap on and off: etnn (its default, the ring
  # for these sizes; mlp784 in 10 rounds, wide in 1) beside PyTorch DDP.
  echo "| 2 hosts, $rate link, 1 thread per rank | 2 ranks (samples/s) | step (ms) | step with no communication (ms) | step / no communication |"
  echo "|---|---:|---:|---:|---:|"
  local model rounds batch weak
  for model in mlp784 wide; do
    rounds=10 batch=64
    [ "$model" = mlp784 ] || rounds=1 batch=256
    weak=$(bash scripts/multihost.sh --hosts 2 --rate "$rate" -- mpirun -np 2 -x OMP_NUM_THREADS=1 \
             build/release/benchmarks/bench_dist --weak-rounds $rounds $model)
    # "weak SETTING RANKS ALONE TOGETHER EFFICIENCY Q1 Q3 NO-COMMUNICATION-EFFICIENCY buckets N"
    echo "$weak" | awk -v m="$model" -v b="$batch" '$1 == "weak" && $2 != "lockstep-only" {
      step = 1000 * b * $3 / $5; quiet = 1000 * b / ($9 / 100 * $4)
      printf "| %s/%d, etnn %s | %.0f | %.1f | %.1f | %.2fx |\n", m, b, $2, $5, step, quiet, step / quiet }'
    [ "$ddp_ok" -eq 1 ] || continue
    bash scripts/multihost.sh --hosts 2 --rate "$rate" -- mpirun -np 2 -x OMP_NUM_THREADS=1 \
      -x MASTER_ADDR=10.87.0.1 -x MASTER_PORT=29500 -x GLOO_SOCKET_IFNAME=eth0 \
      "$peers_python" benchmarks/peers/pytorch_ddp.py --model $model --rounds $rounds 2>/dev/null |
      awk -v m="$model" -v b="$batch" '$1 == "ddp" {
        printf "| %s/%d, PyTorch 2.x DDP (gloo) | %.0f | %.1f | | |\n", m, b, $3, 1000 * b * 2 / $3 }'
  done
}

if [ "$hosts_only" -eq 1 ]; then across_hosts; exit 0; fi
# shared: etnn's default (sums through shared memory on one machine; a data-parallel optimizer's
# gradients live there and are summed in place); mpi: MPI's own allreduce.
shared=$(mpirun --oversubscribe -np 2 build/release/benchmarks/bench_dist)
mpi=$(mpirun --oversubscribe -np 2 -x ETNN_DIST_SHARED_MEMORY=0 -x ETNN_DIST_ALLREDUCE=mpi build/release/benchmarks/bench_dist)

echo "| message | 2 ranks: time (us) | algbw (GB/s) | busbw (GB/s) | in place (SharedStorage): time (us) | MPI's allreduce: time (us) | algbw (GB/s) |"
echo "|--------:|-------------------:|-------------:|-------------:|------------------------------------:|---------------------------:|-------------:|"
for bytes in $(echo "$shared" | awk '$1 == "allreduce" { print $2 }'); do
  read -r t a b p <<<"$(echo "$shared" | awk -v n="$bytes" '$1 == "allreduce" && $2 == n { print $3, $4, $5, $6 }')"
  read -r tm am <<<"$(echo "$mpi" | awk -v n="$bytes" '$1 == "allreduce" && $2 == n { print $3, $4 }')"
  echo "| $((bytes / 1024)) KiB | $t | $a | $b | $p | $tm | $am |"
done
echo

echo "| mlp784, batch 64 per rank, 1 thread per rank | buckets | 1 rank alone (samples/s) | 2 ranks (samples/s) | efficiency (rounds' quartiles) | no communication |"
echo "|---|---:|---:|---:|---:|---:|"
# "weak SETTING RANKS ALONE TOGETHER EFFICIENCY Q1 Q3 CEILING buckets N"
rows() {  # LABEL-SUFFIX OUTPUT
  echo "$2" | awk -v suffix="$1" '$1 == "weak" {
    printf "| %s%s | %s | %s | %s | %.1f%% (%.1f-%.1f%%) | %.1f%% |\n", $2, suffix, $11, $4, $5, $6, $7, $8, $9 }'
}
rows "" "$shared"
rows ", MPI's allreduce" "$mpi" | sed "s/^| lockstep-only, MPI's allreduce/| lockstep-only, in the MPI's-allreduce job/"

if [ "$ddp_ok" -eq 1 ]; then
  ddp1=$(ddp 1) ddp2=$(ddp 2)  # right after etnn's jobs
  echo
  echo "| mlp784, batch 64 per rank, 1 thread per rank, one machine | 1 rank (samples/s) | 2 ranks (samples/s) | 2 ranks: etnn / PyTorch DDP | 2 ranks / lockstep-only bound |"
  echo "|---|---:|---:|---:|---:|"
  echo "$shared" | awk -v d1="$ddp1" -v d2="$ddp2" '
    $1 == "weak" && $2 == "lockstep-only" { bound = $5 }
    $1 == "weak" && $2 == "overlap-25MiB" { alone = $4; together = $5 }
    END {
      printf "| etnn (overlap, gradients in shared memory) | %.0f | %.0f | %.2fx | %.3f |\n", alone, together, together / d2, together / bound
      printf "| PyTorch 2.x DDP (gloo) | %.0f | %.0f | | |\n", d1, d2 }'
else
  echo "(PyTorch DDP skipped: $peers_python cannot import torch)"
fi

echo
across_hosts
