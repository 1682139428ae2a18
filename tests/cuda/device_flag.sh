#!/bin/sh
# mnist_mlp_cuda with flags that insist on the GPU (--device cuda, --dist nccl): trains on the GPU
# where one is usable; elsewhere exits 2 with a message naming the reason (never a crash, never a
# silent CPU run).
#   device_flag.sh PATH_TO_mnist_mlp_cuda FLAGS...
program=$1
shift
out=$("$program" "$@" --epochs 0 --limit 100 2>&1)
rc=$?
echo "$out"
case $rc in
  0) echo "$out" | grep -q "on cuda" ;;
  2) echo "$out" | grep -q "the CUDA device was requested but" ;;
  *) exit 1 ;;
esac
