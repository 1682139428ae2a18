#!/usr/bin/env bash
# Data-parallel benchmark: builds bench_dist (release preset), runs it on 1 and 2 ranks with one
# thread each, alternately, 3 times, and prints the allreduce bandwidth and the weak-scaling
# efficiency of training (median throughput on 2 ranks / (2 x median throughput on 1 rank)) as
# markdown tables; the 2-rank runs once more with MPI's own allreduce (ETNN_DIST_SHARED_MEMORY=0)
# for comparison.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target bench_dist >/dev/null
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
# two: etnn's default (large sums through shared memory on one machine); two_mpi: MPI's own allreduce.
one=""; two=""; two_mpi=""
for round in 1 2 3; do
  one+=$(mpirun --oversubscribe -np 1 build/release/benchmarks/bench_dist)$'\n'
  two+=$(mpirun --oversubscribe -np 2 build/release/benchmarks/bench_dist)$'\n'
  two_mpi+=$(mpirun --oversubscribe -np 2 -x ETNN_DIST_SHARED_MEMORY=0 build/release/benchmarks/bench_dist)$'\n'
done
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# The median line of `allreduce BYTES` in a run's output: "time algbw busbw".
allreduce_median() {  # OUTPUT BYTES
  echo "$1" | awk -v b="$2" '$1 == "allreduce" && $2 == b' | sort -k3 -n |
    awk '{ r[NR] = $0 } END { split(r[int((NR + 1) / 2)], f, " "); print f[3], f[4], f[5] }'
}
echo "| message | 2 ranks: time (us) | algbw (GB/s) | busbw (GB/s) | MPI's allreduce: time (us) | algbw (GB/s) |"
echo "|--------:|-------------------:|-------------:|-------------:|---------------------------:|-------------:|"
for bytes in $(echo "$two" | awk '$1 == "allreduce" { print $2 }' | sort -nu); do
  read -r t a b <<<"$(allreduce_median "$two" "$bytes")"
  read -r tm am _ <<<"$(allreduce_median "$two_mpi" "$bytes")"
  echo "| $((bytes / 1024)) KiB | $t | $a | $b | $tm | $am |"
done
echo

echo "| mlp784, batch 64 per rank, 1 thread per rank | buckets | 1 rank (samples/s) | 2 ranks (samples/s) | efficiency |"
echo "|---|---:|---:|---:|---:|"
row() {  # LABEL SETTING TWO-RANK-OUTPUT
  local n a b
  n=$(echo "$3" | awk -v s="$2" '$1 == "train" && $2 == s { print $6; exit }')
  a=$(echo "$one" | awk -v s="$2" '$1 == "train" && $2 == s { print $4 }' | median)
  b=$(echo "$3" | awk -v s="$2" '$1 == "train" && $2 == s { print $4 }' | median)
  echo "| $1 | $n | $a | $b | $(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.1f%%", 100 * b / (2 * a) }') |"
}
for setting in overlap-25MiB overlap-1MiB no-overlap; do
  row "$setting" "$setting" "$two"
done
for setting in overlap-25MiB no-overlap; do
  row "$setting, MPI's allreduce" "$setting" "$two_mpi"
done
