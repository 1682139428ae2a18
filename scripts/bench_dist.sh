#!/usr/bin/env bash
# Data-parallel benchmark: builds bench_dist (release preset), runs it on 2 ranks with one thread
# each, and prints as markdown tables the allreduce bandwidth and the weak-scaling efficiency of
# training: 2-rank throughput / (2 x 1-rank throughput), both measured interleaved in short rounds
# (see benchmarks/bench_dist.cpp), with the quartiles of the rounds' own ratios. The job runs once
# more with MPI's own allreduce (ETNN_DIST_SHARED_MEMORY=0) for comparison.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target bench_dist >/dev/null
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
# shared: etnn's default (sums through shared memory on one machine; a data-parallel optimizer's
# gradients live there and are summed in place); mpi: MPI's own allreduce.
shared=$(mpirun --oversubscribe -np 2 build/release/benchmarks/bench_dist)
mpi=$(mpirun --oversubscribe -np 2 -x ETNN_DIST_SHARED_MEMORY=0 build/release/benchmarks/bench_dist)

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
