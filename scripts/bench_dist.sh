#!/usr/bin/env bash
# Data-parallel benchmark: builds bench_dist (release preset), runs it on 1 and 2 ranks with one
# thread each, alternately, ROUNDS times (default 5), and prints as markdown tables the allreduce
# bandwidth and the weak-scaling efficiency of training: 2-rank throughput / (2 x 1-rank
# throughput) within each round, the median over rounds. The 2-rank runs once more with MPI's own
# allreduce (ETNN_DIST_SHARED_MEMORY=0) for comparison.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target bench_dist >/dev/null
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
# two: etnn's default (large sums through shared memory on one machine); two_mpi: MPI's own allreduce.
# Each round's lines carry the round number (field "round=R" appended), so that efficiency is
# computed from runs next to each other in time: this kind of VM drifts from minute to minute.
rounds=${ROUNDS:-5}
one=""; two=""; two_mpi=""
for round in $(seq "$rounds"); do
  one+=$(mpirun --oversubscribe -np 1 build/release/benchmarks/bench_dist | sed "s/\$/ round=$round/")$'\n'
  two+=$(mpirun --oversubscribe -np 2 build/release/benchmarks/bench_dist | sed "s/\$/ round=$round/")$'\n'
  two_mpi+=$(mpirun --oversubscribe -np 2 -x ETNN_DIST_SHARED_MEMORY=0 build/release/benchmarks/bench_dist |
             sed "s/\$/ round=$round/")$'\n'
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
# Throughputs are medians over the rounds; efficiency is the median over rounds of
# 2-rank / (2 x 1-rank) within each round.
row() {  # LABEL SETTING TWO-RANK-OUTPUT
  local n a b e
  n=$(echo "$3" | awk -v s="$2" '$1 == "train" && $2 == s { print $6; exit }')
  a=$(echo "$one" | awk -v s="$2" '$1 == "train" && $2 == s { print $4 }' | median)
  b=$(echo "$3" | awk -v s="$2" '$1 == "train" && $2 == s { print $4 }' | median)
  e=$(printf '%s\n%s\n' "$one" "$3" | awk -v s="$2" '
        $1 == "train" && $2 == s { split($NF, r, "="); if ($3 == 1) one[r[2]] = $4; else two[r[2]] = $4 }
        END { for (k in one) if (k in two) print 100 * two[k] / (2 * one[k]) }' | median)
  echo "| $1 | $n | $a | $b | $(printf '%.1f%%' "$e") |"
}
for setting in overlap-25MiB overlap-1MiB no-overlap; do
  row "$setting" "$setting" "$two"
done
for setting in overlap-25MiB no-overlap; do
  row "$setting, MPI's allreduce" "$setting" "$two_mpi"
done
