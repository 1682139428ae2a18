#!/usr/bin/env bash
# Builds the libFuzzer targets in fuzz/ with clang (-fsanitize=fuzzer,address,undefined) and runs
# each for SECONDS (default 60), starting from seed corpora written by etnn's own writers
# (fuzz/make_seeds.cpp). Corpora grow in build/fuzz/corpus/<target>; a crashing input is saved in
# build/fuzz/artifacts/ and the script fails.   Usage: bash scripts/fuzz.sh [SECONDS] [TARGET...]
# Each fuzzer is one process on one core: FUZZ_JOBS of them (default: the CPU count) build and run
# at once, each into build/fuzz/<target>.log, printed when it ends.
set -euo pipefail
cd "$(dirname "$0")/.."
fail() { echo "scripts/fuzz.sh: $*" >&2; exit 2; }
((BASH_VERSINFO[0] > 5 || (BASH_VERSINFO[0] == 5 && BASH_VERSINFO[1] >= 1))) || fail "needs bash 5.1 or later (wait -n -p)"
seconds=${1:-60}
shift || true
declare -A seeds=([fuzz_idx]=idx [fuzz_safetensors]=safetensors [fuzz_npy]=npy [fuzz_csv]=csv)
declare -A options=([fuzz_idx]="" [fuzz_safetensors]="-dict=fuzz/safetensors.dict" [fuzz_npy]="-dict=fuzz/npy.dict"
                   [fuzz_csv]="-dict=fuzz/csv.dict")
requested=("$@")
[ ${#requested[@]} -gt 0 ] || requested=(fuzz_idx fuzz_safetensors fuzz_npy fuzz_csv)
targets=()
for name in "${requested[@]}"; do
  [ -n "${seeds[$name]:-}" ] || fail "unknown target '$name' (${!seeds[*]})"
  [[ " ${targets[*]} " == *" $name "* ]] || targets+=("$name")  # each once: one process per target
done
jobs=${FUZZ_JOBS:-$(nproc)}
[[ $jobs =~ ^[1-9][0-9]*$ ]] || fail "FUZZ_JOBS must be a positive count, got '$jobs'"

bash scripts/install-deps.sh  # clang-14 and libclang-rt-14-dev (libFuzzer) among them
cxx=$(command -v clang++-14 || command -v clang++ || true)
[ -n "$cxx" ] || { echo "scripts/fuzz.sh: clang++ not found; run scripts/install-deps.sh" >&2; exit 1; }
out=build/fuzz
mkdir -p "$out/artifacts"
launcher=()
command -v ccache >/dev/null && launcher=(ccache)
flags=(-std=c++20 -O1 -g -fno-omit-frame-pointer -Wall -Wextra -Wpedantic -Iinclude -isystem /usr/include/eigen3
       -DETNN_WITH_ZLIB=1 -pthread)
sanitize=(-fsanitize=address,undefined -fno-sanitize-recover=all)

# The seed writer (no libFuzzer main), then fresh seeds merged into each target's corpus.
"${launcher[@]}" "$cxx" "${flags[@]}" "${sanitize[@]}" fuzz/make_seeds.cpp -o "$out/make_seeds" -lz
rm -rf "$out/seeds"
"$out/make_seeds" "$out/seeds"

# Builds and runs one target, its output into $out/<target>.log; its exit status is the fuzzer's.
fuzz_one() {
  local t=$1
  {
    echo "== $t: building"
    "${launcher[@]}" "$cxx" "${flags[@]}" "${sanitize[@]}" -fsanitize=fuzzer "fuzz/$t.cpp" -o "$out/$t" -lz
    mkdir -p "$out/corpus/$t"
    cp -n "$out/seeds/${seeds[$t]}"/* "$out/corpus/$t/"
    echo "== $t: fuzzing for $seconds s"
    # -rss_limit_mb: an input that makes a reader allocate far beyond its size is a finding too.
    set +e
    # shellcheck disable=SC2086
    "$out/$t" ${options[$t]} -max_total_time="$seconds" -rss_limit_mb=2048 -max_len=65536 -timeout=20 \
              -print_final_stats=1 -artifact_prefix="$out/artifacts/$t-" "$out/corpus/$t" 2>&1 |
      grep -v -E '^#[0-9]+\s+(NEW|REDUCE|pulse)|^\s+NEW_FUNC|^"|Recommended dictionary'
    return "${PIPESTATUS[0]}"
  } > "$out/$t.log" 2>&1
}

declare -A running=()  # target -> pid
failed=0
# Fuzzers still running when the script ends early (an error, Ctrl-C) end with it: each job's
# processes (its build, fuzzer and filter), then the job.
# (set +e: a job that has just ended makes pkill or kill fail, which must not end the loop.)
trap 'set +e; for pid in "${running[@]}"; do pkill -P "$pid"; kill "$pid"; done 2>/dev/null; true' EXIT
# Waits for one running fuzzer, prints its log, and keeps a failure's status.
reap() {
  local done_pid status=0 t
  wait -n -p done_pid "${running[@]}" || status=$?
  for t in "${!running[@]}"; do
    [ "${running[$t]}" = "$done_pid" ] || continue
    unset "running[$t]"
    cat "$out/$t.log"
    if [ "$status" -ne 0 ]; then
      echo "scripts/fuzz.sh: $t failed (exit $status); a crash's input is in $out/artifacts/" >&2
      failed=$status
    fi
  done
}
for t in "${targets[@]}"; do
  while [ ${#running[@]} -ge "$jobs" ]; do reap; done
  fuzz_one "$t" &
  running[$t]=$!
done
while [ ${#running[@]} -gt 0 ]; do reap; done
exit "$failed"
