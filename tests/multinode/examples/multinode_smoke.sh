#!/bin/bash
# Three hosts as network namespaces; mpirun on n0 starts 2 ranks per host through gpurun, over the
# given transport. Checks: 6 ranks reported, 2 on each of n0, n1, n2, in Open MPI's by-slot order.
#   multinode_smoke.sh tcp|ucx GPURUN SMOKE
set -eu
TRANSPORT=$1 GPURUN=$2 SMOKE=$3
. "$(dirname "$0")/../lib/netns.sh"
case $TRANSPORT in
  tcp) MCA=(--mca pml ob1 --mca btl tcp,vader,self) ;;
  ucx) MCA=(--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any) ;;
  *) echo "unknown transport $TRANSPORT"; exit 2 ;;
esac
netns_start 3
out=$NETNS_DIR/out
NETNS_TIMEOUT=60 netns_mpirun --host n0:2,n1:2,n2:2 -np 6 "${MCA[@]}" "$GPURUN" "$SMOKE" >"$out" 2>&1 || {
  cat "$out"; echo "FAIL: mpirun over $TRANSPORT failed"; exit 1; }
cat "$out"
for r in 0 1 2 3 4 5; do
  grep -q "^rank $r/6 on n$((r / 2)):" "$out" || { echo "FAIL: rank $r not on n$((r / 2))"; exit 1; }
done
echo "PASS: 6 ranks on 3 hosts over $TRANSPORT"
