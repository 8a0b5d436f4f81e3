#!/bin/bash
# UTS stealing vs static split on three "hosts": network namespaces n0, n1, n2 joined by a bridge,
# ranks talking over TCP on 198.18.0.0/24 (the range reserved for test networks; no traffic
# leaves the namespaces). Needs root and iproute2. Everything it creates is removed on exit.
#   bench/dpool/netns.sh [build-dir] [TREE ...]     default: build, T1 T3
# Environment: NPS (default "1 3 6": ranks are placed round robin over the hosts), REPS.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../../build}
[ $# -gt 0 ] && shift
build=$(cd "$build" && pwd)
bench=$build/bench/dpool/uts_bench.sh
[ -x "$bench" ] || { echo "netns.sh: $bench not found (build first)" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "netns.sh: needs root (ip netns)" >&2; exit 2; }

P=grdp$$                       # unique prefix for this run
tmp=$(mktemp -d /tmp/$P.XXXXXX)
cleanup() {
  set +e
  for i in 0 1 2; do
    pids=$(ip netns pids "$P-n$i" 2>/dev/null)
    [ -n "$pids" ] && kill $pids 2>/dev/null
  done
  sleep 0.2
  for ns in "$P-n0" "$P-n1" "$P-n2" "$P-sw"; do ip netns del "$ns" 2>/dev/null; done
  rm -rf /etc/netns/"$P"-n0 /etc/netns/"$P"-n1 /etc/netns/"$P"-n2 "$tmp"
}
trap cleanup EXIT INT TERM

ip netns add "$P-sw"
ip -n "$P-sw" link add br0 type bridge
ip -n "$P-sw" link set br0 up
for i in 0 1 2; do
  ip netns add "$P-n$i"
  ip -n "$P-sw" link add vn$i type veth peer name eth0 netns "$P-n$i"
  ip -n "$P-sw" link set vn$i master br0 up
  ip -n "$P-n$i" addr add 198.18.0.$((i + 1))/24 dev eth0
  ip -n "$P-n$i" link set eth0 up
  ip -n "$P-n$i" link set lo up
  mkdir -p /etc/netns/"$P-n$i"
  printf '127.0.0.1 localhost\n198.18.0.1 n0\n198.18.0.2 n1\n198.18.0.3 n2\n' \
    >/etc/netns/"$P-n$i"/hosts
done

# rsh agent: drop ssh-style options, run the command in the named host's namespace.
cat >"$tmp/agent" <<AGENT
#!/bin/sh
while [ \$# -gt 0 ]; do case "\$1" in -*) shift ;; *) break ;; esac; done
host=\$1; shift
exec ip netns exec "$P-\$host" unshare --uts sh -c "hostname \$host; \$*"
AGENT
# mpirun itself runs on n0.
cat >"$tmp/mpirun" <<RUN
#!/bin/sh
exec ip netns exec "$P-n0" unshare --uts sh -c 'hostname n0; exec "\$0" "\$@"' mpirun "\$@"
RUN
chmod +x "$tmp/agent" "$tmp/mpirun"

echo "netns.sh: hosts n0 n1 n2 (namespaces $P-*), TCP over a bridge"
[ $# -eq 0 ] && set -- T1 T3
MPIRUN=$tmp/mpirun NPS=${NPS:-"1 3 6"} \
MPIRUN_ARGS="--mca plm_rsh_agent $tmp/agent --host n0:2,n1:2,n2:2 --map-by node \
 --mca btl tcp,self --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0" \
  "$bench" "$@"
