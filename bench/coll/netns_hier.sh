#!/bin/bash
# Hierarchical vs flat collectives on three "hosts" (network namespaces on a bridge, TCP between
# them: tests/multinode/lib/netns.sh), 2 ranks per host, interleaved in one run: every round
# times GPURUN_COLL_ALGO=hier on one communicator and GPURUN_COLL_ALGO=flat on another, order
# flipped each round (gpurun-bench-coll --vs flat). Needs root and iproute2; everything it creates
# is removed on exit. The load average is printed before and after (the machine is shared).
#   bench/coll/netns_hier.sh [build-dir] [gpurun-bench-coll options...]
# default options: -o allreduce -b 1K -e 16M -f 4 -R 7 -n 10 -w 2 --timeout 60
# ALGO and VS (environment, default hier and flat): the two settings compared, e.g. ALGO=hier-ml
# VS=hier for the multi-leader allreduce against the hierarchical one
# (-o broadcast|reduce|allgather|reduce_scatter for the other kinds on the hierarchical path;
# --root N for the rooted ones: rank 5 is not its node's leader)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../../build}
[ $# -gt 0 ] && shift
bench=$(cd "$build" && pwd)/bench/coll/gpurun-bench-coll
[ -x "$bench" ] || { echo "netns_hier.sh: $bench not found (build first)" >&2; exit 2; }
[ $# -gt 0 ] || set -- -o allreduce -b 1K -e 16M -f 4 -R 7 -n 10 -w 2 --timeout 60
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
. "$here/../../tests/multinode/lib/netns.sh"
netns_start 3 >&2
export GPURUN_COLL_ALGO=${ALGO:-hier}
echo "# load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
rc=0
NETNS_TIMEOUT=${NETNS_TIMEOUT:-900} netns_mpirun --host n0:2,n1:2,n2:2 -np 6 --mca pml ob1 \
  --mca btl tcp,vader,self -x GPURUN_COLL_ALGO "$bench" "$@" --vs "${VS:-flat}" || rc=$?
echo "# load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
exit $rc
