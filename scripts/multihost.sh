#!/usr/bin/env bash
# multihost.sh [--hosts N] [--slots S] [--rate RATE] [--delay DELAY --loss LOSS] -- COMMAND [ARGS...]
#
# Several hosts on one machine, for testing what crosses a network: N network namespaces (each
# with its own UTS namespace, so its own hostname), joined by veth pairs to a bridge in a switch
# namespace of their own: 10.87.0.1 .. 10.87.0.N on each host's eth0. Nothing is added to the
# machine's own network namespace, and two runs at once never see each other (each has its own
# switch). COMMAND runs on host 0, with
#   mpirun            first on PATH: Open MPI's mpirun, launching across the hosts over TCP with a
#                     hostfile of S slots per host and a launch agent (plm_rsh_agent) that enters a
#                     host's namespaces where mpirun would use ssh. Open MPI sees N nodes, so ranks
#                     on different hosts share no memory and their sums cross the links.
#   MULTIHOST_CTL     faults and limits, from COMMAND or anything it starts:
#                       $MULTIHOST_CTL down I | up I   cut or restore host I's link (its switch port)
#                       $MULTIHOST_CTL pids I          the processes running on host I
#                       $MULTIHOST_CTL rate RATE       a token bucket on every host's eth0
#                                                      (tc tbf, e.g. 100mbit, 1gbit; "none" removes it)
#                       $MULTIHOST_CTL impair DELAY LOSS [RATE]   delay and random loss on every
#                                                      host's eth0 (tc netem, e.g. 50ms 1%), at RATE
#   MULTIHOST_HOSTS   N
# --rate RATE sets the token bucket before COMMAND starts; --delay and --loss the delay and loss
# (netem) where the kernel has netem (elsewhere the script says so and exits with 77). Everything
# is removed when COMMAND ends (or this script is interrupted); processes still running on the
# hosts are killed first. Root and network namespaces are required: where they are not available,
# the script says why and exits with 77 (ctest's SKIP_RETURN_CODE).
set -euo pipefail

hosts=2 slots=1 rate=none delay="" loss=0%
while [ $# -gt 0 ]; do
  case $1 in
    --hosts) hosts=$2; shift 2 ;;
    --slots) slots=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --delay) delay=$2; shift 2 ;;
    --loss) loss=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "multihost.sh: unknown option '$1' (usage: multihost.sh [--hosts N] [--slots S] [--rate RATE] [--delay D --loss L] -- COMMAND)" >&2
       exit 2 ;;
  esac
done
[ $# -gt 0 ] || { echo "multihost.sh: no COMMAND given" >&2; exit 2; }
case $hosts in ''|*[!0-9]*) echo "multihost.sh: --hosts '$hosts' is not a number" >&2; exit 2 ;; esac
[ "$hosts" -ge 1 ] && [ "$hosts" -le 200 ] || { echo "multihost.sh: --hosts must be 1..200" >&2; exit 2; }

skip() { echo "SKIP: multihost.sh: $1" >&2; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "needs root (network namespaces)"
for tool in ip nsenter unshare tc mpirun; do
  command -v "$tool" >/dev/null || skip "'$tool' is not installed"
done

prefix="etnn$$"
dir=$(mktemp -d "/run/etnn-multihost.$$.XXXX" 2>/dev/null || mktemp -d)
switch="${prefix}sw"
netns() { echo "${prefix}h$1"; }

cleanup() {
  set +e
  for ((i = 0; i < hosts; i++)); do
    pids=$(ip netns pids "$(netns "$i")" 2>/dev/null)
    [ -z "$pids" ] || kill -KILL $pids 2>/dev/null
  done
  for ((i = 0; i < hosts; i++)); do
    ip netns delete "$(netns "$i")" 2>/dev/null
    umount "$dir/uts$i" 2>/dev/null
  done
  ip netns delete "$switch" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ip netns add "$switch" 2>/dev/null || skip "'ip netns add' is not permitted here"
ip -n "$switch" link add br0 type bridge
ip -n "$switch" link set br0 up
for ((i = 0; i < hosts; i++)); do
  ns=$(netns "$i")
  ip netns add "$ns"
  ip link add "h$i" netns "$switch" type veth peer name eth0 netns "$ns"
  ip -n "$switch" link set "h$i" master br0 up
  ip -n "$ns" addr add "10.87.0.$((i + 1))/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
  # How soon a host notices that a peer went away, as a cluster's hosts are tuned: TCP gives up
  # on a connection whose data goes unacknowledged after 6 s (4 retries; Linux's default, 15,
  # takes 15 minutes), and mpirun's keepalives below find an idle daemon connection dead in 8 s.
  ip netns exec "$ns" sysctl -q -w net.ipv4.tcp_retries2=4
  touch "$dir/uts$i"
  unshare --uts="$dir/uts$i" hostname "host$i"
  echo "10.87.0.$((i + 1)) slots=$slots" >>"$dir/hostfile"
done

# The launch agent: Open MPI calls it as "AGENT HOST COMMAND..." where it would call ssh.
cat >"$dir/agent" <<EOF
#!/bin/sh
host=\$1; shift
i=\$((\${host##*.} - 1))
exec nsenter --net=/run/netns/${prefix}h\$i --uts=$dir/uts\$i /bin/sh -c "\$*"
EOF
mkdir "$dir/bin"
cat >"$dir/bin/mpirun" <<EOF
#!/bin/sh
exec $(command -v mpirun) --hostfile $dir/hostfile --mca plm_rsh_agent $dir/agent --mca plm_rsh_no_tree_spawn 1 \\
  --mca oob_tcp_if_include eth0 --mca btl_tcp_if_include eth0 \\
  --mca oob_tcp_keepalive_time 5 --mca oob_tcp_keepalive_intvl 1 --mca oob_tcp_keepalive_probes 3 "\$@"
EOF
cat >"$dir/ctl" <<EOF
#!/bin/sh
# multihost control: down I | up I | pids I | rate RATE
case \$1 in
  down|up) exec ip -n $switch link set h\$2 \$1 ;;
  pids) exec ip netns pids ${prefix}h\$2 ;;
  rate)
    for i in \$(seq 0 $((hosts - 1))); do
      tc -n ${prefix}h\$i qdisc del dev eth0 root 2>/dev/null
      [ "\$2" = none ] || tc -n ${prefix}h\$i qdisc add dev eth0 root tbf rate \$2 burst 64kb latency 50ms || exit 1
    done ;;
  impair)
    for i in \$(seq 0 $((hosts - 1))); do
      tc -n ${prefix}h\$i qdisc replace dev eth0 root netem delay \$2 loss \$3 \${4:+rate \$4} || exit 1
    done ;;
  *) echo "multihost ctl: down I | up I | pids I | rate RATE | impair DELAY LOSS [RATE]" >&2; exit 2 ;;
esac
EOF
chmod +x "$dir/agent" "$dir/bin/mpirun" "$dir/ctl"
if [ -n "$delay" ]; then
  "$dir/ctl" impair "$delay" "$loss" "${rate#none}" 2>/dev/null || skip "this kernel has no netem (tc qdisc netem) for --delay and --loss"
else
  "$dir/ctl" rate "$rate"
fi

export PATH="$dir/bin:$PATH" MULTIHOST_CTL="$dir/ctl" MULTIHOST_HOSTS="$hosts"
set +e
nsenter --net="/run/netns/$(netns 0)" --uts="$dir/uts0" -- "$@"
code=$?
exit "$code"
