#!/bin/bash
# sim and train on three hosts (network namespaces), 2 ranks per host, each through gpurun, over
# the given transport. Checks: ranks 2h and 2h+1 run on host nh and see local ranks 0 and 1 there,
# read from the plan gpurun exported (gr_rank_info's from_plan);
# both self-checks passed; both checksums equal those of the same runs on one host (plain mpirun).
#   multinode_examples.sh tcp|ucx MPIRUN GPURUN SIM TRAIN
set -eu
TRANSPORT=$1 MPIRUN=$2 GPURUN=$3 SIM=$4 TRAIN=$5
. "$(dirname "$0")/../lib/netns.sh"
case $TRANSPORT in
  tcp) MCA=(--mca pml ob1 --mca btl tcp,vader,self) ;;
  ucx) MCA=(--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any) ;;
  *) echo "unknown transport $TRANSPORT"; exit 2 ;;
esac
SIM_ARGS=(--cpu --nx 72 --ny 50 --steps 30 --quiet)
TRAIN_ARGS=(--steps 40 --batch 192 --quiet)
export GPURUN_TIMEOUT=60
fail() { echo "FAIL: $*"; exit 1; }

netns_start 3
declare -A ref
for ex in sim train; do
  if [ $ex = sim ]; then args=("${SIM_ARGS[@]}"); prog=$SIM; else args=("${TRAIN_ARGS[@]}"); prog=$TRAIN; fi
  # The same job on this one host.
  "$MPIRUN" -np 6 --oversubscribe "$GPURUN" "$prog" "${args[@]}" >"$NETNS_DIR/$ex.local" 2>&1 ||
    { cat "$NETNS_DIR/$ex.local"; fail "$ex on one host failed"; }
  ref[$ex]=$(sed -n "s/^$ex: .*checksum //p" "$NETNS_DIR/$ex.local")
  out=$NETNS_DIR/$ex.multi
  NETNS_TIMEOUT=90 netns_mpirun --host n0:2,n1:2,n2:2 -np 6 "${MCA[@]}" \
    -x GPURUN_TIMEOUT "$GPURUN" "$prog" "${args[@]}" >"$out" 2>&1 ||
    { cat "$out"; fail "$ex on 3 hosts over $TRANSPORT failed"; }
  cat "$out"
  for r in 0 1 2 3 4 5; do
    grep -Eq "^$ex: rank $r/6 host n$((r / 2)) local_rank $((r % 2))/2 .*plan gpurun$" "$out" ||
      fail "$ex: rank $r is not on n$((r / 2)) with local rank $((r % 2)) of 2 from gpurun's plan"
  done
  grep -q "^$ex: self-check PASS" "$out" || fail "$ex over $TRANSPORT: self-check did not pass"
  sum=$(sed -n "s/^$ex: .*checksum //p" "$out")
  [ -n "$sum" ] && [ "$sum" = "${ref[$ex]}" ] ||
    fail "$ex over $TRANSPORT: checksum '$sum', one host gave '${ref[$ex]}'"
  echo "ok: $ex on 3 hosts over $TRANSPORT, checksum $sum as on one host"
done
echo "PASS: sim and train on 3 hosts x 2 ranks over $TRANSPORT, bit-identical to one host"
