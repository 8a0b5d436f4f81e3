# Several "hosts" on one machine for tests: network namespaces PFX-n0..PFX-n(N-1), each with an
# eth0 on a bridge that lives in its own namespace PFX-sw (veth vnI on the bridge side), addresses
# 198.18.0.(I+1)/24 (the range reserved for test networks; nothing leaves these namespaces), host
# names n0..n(N-1) in /etc/netns/PFX-nI/hosts. Source this file, then:
#
#   netns_start [N]                 create the hosts (default 3); sets NETNS_PFX, NETNS_DIR, NETNS_RSH
#   netns_exec HOST CMD [ARGS...]   run CMD in HOST's namespace under HOST's own host name
#   netns_mpirun LAUNCH-WORDS...    tests/lib/mpi-launch started on n0, NETNS_RSH its rsh agent, ended
#                                   (TERM, then KILL 5 s later) after NETNS_TIMEOUT s (default 120)
#   netns_link HOST up|down         plug / cut HOST's cable (the bridge side of its veth)
#   netns_delay HOST MS             add MS ms of netem delay on HOST's cable (both directions);
#                                   returns 3 when the kernel has no netem
#   netns_slow HOST KBIT            limit HOST's cable to KBIT kbit/s each way (tbf)
#   netns_stop                      kill what runs in the namespaces (by PID), delete the
#                                   namespaces and /etc/netns entries (also runs on any exit,
#                                   including ctest's SIGKILL: see tests/lib/guard.sh)
#
# Needs root, iproute2 and unshare.

_gr_netns_lib_dir=$(cd "$(dirname "${BASH_SOURCE:-$0}")" 2>/dev/null && pwd)
. "$_gr_netns_lib_dir/../../lib/guard.sh"

netns_start() {
  _n=${1:-3}
  if [ "$(id -u)" != 0 ]; then echo "SKIP: network namespaces need root"; exit 77; fi
  for _t in ip unshare tc; do
    command -v "$_t" >/dev/null 2>&1 || { echo "SKIP: $_t not installed"; exit 77; }
  done
  NETNS_DIR=$(mktemp -d /tmp/gr-netns.XXXXXX)
  # Unique per run: the mktemp suffix, so parallel runs (other worktrees) never collide.
  NETNS_PFX=gr${NETNS_DIR##*.}
  NETNS_HOSTS=
  _i=0
  while [ $_i -lt "$_n" ]; do NETNS_HOSTS="$NETNS_HOSTS n$_i"; _i=$((_i + 1)); done

  cat >"$NETNS_DIR.cleanup" <<CLEAN
for _ns in $(for _h in $NETNS_HOSTS; do printf '%s-%s ' "$NETNS_PFX" "$_h"; done) $NETNS_PFX-sw; do
  [ -e /run/netns/\$_ns ] || continue
  _pids=\$(ip netns pids \$_ns 2>/dev/null)
  if [ -n "\$_pids" ]; then
    kill -KILL \$_pids 2>/dev/null
    _i=0
    while [ -n "\$(ip netns pids \$_ns 2>/dev/null)" ] && [ \$_i -lt 50 ]; do sleep 0.1; _i=\$((_i + 1)); done
  fi
  ip netns del \$_ns 2>/dev/null
done
rm -rf /etc/netns/$NETNS_PFX-n*
[ "\${GR_KEEP_NETNS_DIR:-0}" = 1 ] || rm -rf '$NETNS_DIR'
CLEAN
  gr_guard_start "$NETNS_DIR.cleanup"

  _hosts_file=$NETNS_DIR/hosts
  printf '127.0.0.1 localhost\n' >"$_hosts_file"
  for _h in $NETNS_HOSTS; do printf '198.18.0.%d %s\n' $((${_h#n} + 1)) "$_h" >>"$_hosts_file"; done

  ip netns add "$NETNS_PFX-sw" || return 1
  ip -n "$NETNS_PFX-sw" link add br0 type bridge || return 1
  ip -n "$NETNS_PFX-sw" link set br0 up || return 1
  for _h in $NETNS_HOSTS; do
    _i=${_h#n}
    _ns=$NETNS_PFX-$_h
    ip netns add "$_ns" || return 1
    ip -n "$NETNS_PFX-sw" link add "vn$_i" type veth peer name eth0 netns "$_ns" || return 1
    ip -n "$NETNS_PFX-sw" link set "vn$_i" master br0 up || return 1
    ip -n "$_ns" addr add "198.18.0.$((_i + 1))/24" dev eth0 || return 1
    ip -n "$_ns" link set eth0 up || return 1
    ip -n "$_ns" link set lo up || return 1
    mkdir -p "/etc/netns/$_ns"
    cp "$_hosts_file" "/etc/netns/$_ns/hosts"
  done

  # The rsh agent mpirun uses: drop ssh-style options, run the command in the host's namespace
  # under the host's name (ORTE tells nodes apart by name; UCX and the vader BTL by it as well).
  NETNS_RSH=$NETNS_DIR/rsh
  cat >"$NETNS_RSH" <<AGENT
#!/bin/sh
while [ \$# -gt 0 ]; do
  case "\$1" in
    -l|-p|-o|-i|-F) shift 2 ;;
    -*) shift ;;
    *) break ;;
  esac
done
host=\$1; shift
exec ip netns exec "$NETNS_PFX-\$host" unshare --uts sh -c "hostname \$host; \$*"
AGENT
  chmod +x "$NETNS_RSH"
  echo "netns: hosts$NETNS_HOSTS up as $NETNS_PFX-* (scratch $NETNS_DIR)"
}

netns_exec() {
  _h=$1; shift
  ip netns exec "$NETNS_PFX-$_h" unshare --uts sh -c 'hostname "$0"; exec "$@"' "$_h" "$@"
}

# The ranks start through tests/lib/mpi-launch (the build's MPI launcher: GPURUN_TEST_MPIEXEC and
# GPURUN_TEST_MPI_FAMILY from ctest's environment), with NETNS_RSH as the rsh/ssh agent. The MPI
# picks the interface by itself; restrict it to eth0 (--iface) so no rank tries loopback for peers.
# Each host claims 2 slots, so Open MPI does not know that all the ranks share this machine's few
# cores: yield when idle, or spinning ranks starve the others (an Open MPI knob; other launchers
# drop it).
NETNS_LAUNCH=${NETNS_LAUNCH:-$_gr_netns_lib_dir/../../lib/mpi-launch}
netns_mpirun() {
  timeout -k 5 "${NETNS_TIMEOUT:-120}" ip netns exec "$NETNS_PFX-n0" unshare --uts \
    sh -c 'hostname n0; exec "$@"' n0 sh "$NETNS_LAUNCH" --rsh-agent "$NETNS_RSH" --iface eth0 \
    --mca mpi_yield_when_idle 1 "$@"
}

netns_link() {
  ip -n "$NETNS_PFX-sw" link set "vn${1#n}" "$2"
}

# netem on both veth ends of HOST's cable: each direction gets MS ms.
netns_delay() {
  if ! _e=$(tc -n "$NETNS_PFX-sw" qdisc add dev "vn${1#n}" root netem delay "${2}ms" 2>&1); then
    echo "$_e" >&2
    case $_e in *"qdisc kind is unknown"*) return 3 ;; esac
    return 1
  fi
  tc -n "$NETNS_PFX-$1" qdisc add dev eth0 root netem delay "${2}ms"
}

netns_slow() {
  tc -n "$NETNS_PFX-sw" qdisc add dev "vn${1#n}" root tbf rate "${2}kbit" burst 4kb latency 2s &&
    tc -n "$NETNS_PFX-$1" qdisc add dev eth0 root tbf rate "${2}kbit" burst 4kb latency 2s
}

netns_stop() {
  gr_guard_run
}
