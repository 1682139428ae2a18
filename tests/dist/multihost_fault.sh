#!/bin/sh
# multihost_fault.sh FAULT TEXT DIST_FAILURE: run inside scripts/multihost.sh. Starts
# `DIST_FAILURE train` with one rank per host, waits until every rank trains, then hurts the
# last host:
#   link-down  its link is cut (its switch port goes down)
#   kill       its rank is killed (SIGKILL)
#   stop       its rank stalls (SIGSTOP): alive, holding its sockets, taking no part
# Passes when, within 60 s of the fault, mpirun has exited non-zero, a line of its output matches
# TEXT (an extended regular expression), no rank was killed by SIGPIPE, and no rank is left running
# on any host.
fault=$1 text=$2 binary=$3
limit=60
hosts=$MULTIHOST_HOSTS last=$((MULTIHOST_HOSTS - 1))
log=$(mktemp)
mpirun -np "$hosts" -x OMP_NUM_THREADS=1 -x ETNN_DIST_TIMEOUT=5 "$binary" train >"$log" 2>&1 &
job=$!

# The processes named like the binary on host I.
ranks_on() {
  for p in $("$MULTIHOST_CTL" pids "$1"); do
    [ "$(cat "/proc/$p/comm" 2>/dev/null)" = "$(basename "$binary" | cut -c1-15)" ] && echo "$p"
  done
}
fail() { echo "FAIL: $1"; tail -n 30 "$log"; kill -KILL "$job" 2>/dev/null; exit 1; }

waited=0
until [ "$(grep -c ' training$' "$log")" -eq "$hosts" ]; do
  sleep 0.2; waited=$((waited + 1))
  [ "$waited" -lt 300 ] || fail "the $hosts ranks did not all start training within 60 s"
done
victim=$(ranks_on "$last")
[ -n "$victim" ] || fail "no rank found on host $last"

start=$(date +%s)
case $fault in
  link-down) "$MULTIHOST_CTL" down "$last" ;;
  kill) kill -KILL $victim ;;
  stop) kill -STOP $victim ;;
  *) fail "unknown fault '$fault'" ;;
esac
echo "fault '$fault' on host $last (rank pid $victim)"

# mpirun must end by itself; past the limit it is a hang.
while kill -0 "$job" 2>/dev/null; do
  [ $(($(date +%s) - start)) -le "$limit" ] || fail "mpirun still running $limit s after the fault (a hang)"
  sleep 0.5
done
wait "$job"; code=$?
ended=$(($(date +%s) - start))
for i in $(seq 0 "$last"); do
  while [ -n "$(ranks_on "$i")" ]; do
    [ $(($(date +%s) - start)) -le "$limit" ] || fail "a rank is still running on host $i $limit s after the fault"
    sleep 0.5
  done
done
grep -v '^\[host[0-9]*:[0-9]*\]' "$log" | tail -n 20  # without Open MPI's stack dumps of killed ranks
echo "mpirun exit code $code after $ended s; every host clear after $(($(date +%s) - start)) s"
[ "$code" -ne 0 ] || fail "mpirun exited with 0"
! grep -q "exited on signal 13" "$log" || fail "a surviving rank was killed by SIGPIPE instead of reporting the error"
grep -qE -- "$text" "$log" || fail "no line of the output matches '$text'"
echo "ok"
