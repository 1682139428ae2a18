#!/usr/bin/env bash
# Sanitizer builds of the test suite (CI runs this after scripts/test.sh), each in its own build
# directory, with line tables (-g1, which the reports' stack traces need: a third less compile
# time than -g) and without examples and benchmarks (CMake presets asan and tsan). ASan's is at
# -Og, which compiled it in 546 s instead of -O1's 887 s (2-core Zen 4 VM), its tests then taking
# 142 s instead of 140; TSan's at -O1:
#   asan  AddressSanitizer + UndefinedBehaviorSanitizer (-fno-sanitize-recover=all): every CPU test
#         except the compile-only ones (compile_fail.*, package.*, single_include.fresh) and the
#         multi-host ones (ctest -L multihost: the same etnn code as the one-machine MPI tests
#         without shared memory, over TCP; they passed under ASan, but take 100 s of CI's 30 min)
#   tsan  ThreadSanitizer: the data loader tests (test_data), the CPU thread pool and GEMM tests
#         (test_cpu) and the MPI tests on 1, 2 and 4 ranks,
#         built without OpenMP: libgomp is not built with TSan, so TSan cannot see its barriers
#         and would report every parallel region as a race; the threads under test are the data
#         loader's prefetch thread and, in the MPI tests, Open MPI's own threads beside etnn's
#         overlapped all-reduces, none of which need OpenMP.
# Any report fails the run. Suppressions (scripts/sanitizers/*.supp) cover only code outside etnn.
# Usage: bash scripts/sanitize.sh [asan] [tsan]   (default: both)
set -euo pipefail
cd "$(dirname "$0")/.."
builds=("$@")
[ ${#builds[@]} -gt 0 ] || builds=(asan tsan)
bash scripts/install-deps.sh
supp=$PWD/scripts/sanitizers

# Open MPI keeps some allocations until exit on purpose; the LSan suppressions name its libraries.
# They match only with full stacks (fast_unwind_on_malloc=0: the frame-pointer unwinder stops in
# uninstrumented code) from components still loaded at exit (Open MPI dlcloses them otherwise).
export ASAN_OPTIONS="detect_leaks=1:fast_unwind_on_malloc=0:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1"
export OMPI_MCA_mca_base_component_disable_dlclose=1
export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$supp/tsan.supp:exitcode=66"

for build in "${builds[@]}"; do
  case $build in
    asan | tsan) ;;
    *) echo "scripts/sanitize.sh: unknown build '$build' (asan or tsan)" >&2; exit 2 ;;
  esac
  start=$SECONDS
  echo "== $build: configure and build"
  cmake --preset "$build" >/dev/null
  cmake --build --preset "$build" ${ETNN_JOBS:+-j "$ETNN_JOBS"}  # ETNN_JOBS: fewer jobs on a shared machine
  echo "== $build: test"
  # TSan's memory layout needs at most 28 random mmap bits; newer kernels may default to more.
  prefix=()
  if [ "$build" = tsan ] && [ "$(cat /proc/sys/vm/mmap_rnd_bits 2>/dev/null || echo 28)" -gt 28 ]; then
    prefix=(setarch "$(uname -m)" -R)
  fi
  "${prefix[@]}" ctest --preset "$build" -j2
  echo "== $build: $((SECONDS - start)) s"
done
