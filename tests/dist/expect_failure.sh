#!/bin/sh
# expect_failure.sh SECONDS TEXT COMMAND...: passes when COMMAND exits non-zero within SECONDS and
# its output contains TEXT (empty TEXT: anything). A hang is killed at 4 x SECONDS and fails.
limit=$1; text=$2; shift 2
start=$(date +%s)
output=$(timeout $((limit * 4)) "$@" 2>&1); code=$?
elapsed=$(( $(date +%s) - start ))
printf '%s\n' "$output" | tail -n 20
echo "exit code $code after $elapsed s"
[ "$code" -ne 0 ] || { echo "FAIL: expected a non-zero exit"; exit 1; }
[ "$code" -ne 124 ] || { echo "FAIL: hung (killed by timeout)"; exit 1; }
[ "$elapsed" -le "$limit" ] || { echo "FAIL: took longer than $limit s"; exit 1; }
[ -z "$text" ] || printf '%s' "$output" | grep -qF -- "$text" || { echo "FAIL: output lacks '$text'"; exit 1; }
echo "ok"
