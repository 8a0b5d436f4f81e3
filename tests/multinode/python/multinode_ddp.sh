#!/bin/bash
# The torch.distributed contract and the DDP example across hosts (network namespaces n0..n2, one
# rank each, mpirun on n0 over TCP). Checks:
#  1. every rank got RANK, WORLD_SIZE=3, LOCAL_RANK=0, LOCAL_WORLD_SIZE=1, GROUP_RANK=its host's
#     index, MASTER_ADDR=198.18.0.1 (n0, mpirun's host, where rank 0 runs) and one MASTER_PORT;
#  2. examples/torch/ddp.py trains across the hosts (gloo over env:// and the gpurun hook) and
#     passes its own checks;
#  3. with rank 0 away from mpirun's host (--host n1,n2 from n0) gpurun refuses with one line naming
#     --master-addr, and --master-addr n1 makes it work.
#   multinode_ddp.sh GPURUN PYTHON PYTHONPATH SOURCE_DIR
set -eu
GPURUN=$1 PY=$2 PYPATH=$3 SRC=$4
. "$(dirname "$0")/../lib/netns.sh"
netns_start 3
out=$NETNS_DIR/out
MCA=(--mca pml ob1 --mca btl tcp,self -x PYTHONPATH="$PYPATH" -x GPURUN_CHECK=1)
show='echo "contract $RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $GROUP_RANK $MASTER_ADDR $MASTER_PORT on $(hostname)"'
NETNS_TIMEOUT=60 netns_mpirun --host n0:1,n1:1,n2:1 -np 3 "${MCA[@]}" "$GPURUN" sh -c "$show" >"$out" 2>&1 ||
  { cat "$out"; echo "FAIL: mpirun of the contract check failed"; exit 1; }
cat "$out"
port=$(sed -n 's/^contract 0 .* \([0-9]*\) on n0$/\1/p' "$out")
[ -n "$port" ] || { echo "FAIL: no rank 0 line on n0"; exit 1; }
for r in 0 1 2; do
  grep -qx "contract $r 3 0 1 $r 198.18.0.1 $port on n$r" "$out" ||
    { echo "FAIL: rank $r: expected 'contract $r 3 0 1 $r 198.18.0.1 $port on n$r'"; exit 1; }
done

NETNS_TIMEOUT=150 netns_mpirun --host n0:1,n1:1,n2:1 -np 3 "${MCA[@]}" "$GPURUN" "$PY" \
  "$SRC/examples/torch/ddp.py" --steps 20 >"$out" 2>&1 || { cat "$out"; echo "FAIL: DDP across hosts"; exit 1; }
cat "$out"
grep -q "ok: (a) and (b) agree" "$out" || { echo "FAIL: no (a)/(b) agreement"; exit 1; }
[ "$(grep -c "hold identical weights" "$out")" = 2 ] || { echo "FAIL: weights check missing"; exit 1; }

# Rank 0 away from mpirun's host: a Python program gets the one-line error naming --master-addr;
# any other program runs, without MASTER_ADDR/MASTER_PORT (only torch.distributed reads them).
if NETNS_TIMEOUT=60 netns_mpirun --host n1:1,n2:1 -np 2 "${MCA[@]}" "$GPURUN" "$PY" -c pass >"$out" 2>&1; then
  cat "$out"; echo "FAIL: rank 0 away from mpirun's host was accepted for a Python program"; exit 1
fi
cat "$out"
grep -q "rank 0: gpurun: cannot find MASTER_ADDR.*--master-addr" "$out" ||
  { echo "FAIL: no one-line error naming --master-addr"; exit 1; }
NETNS_TIMEOUT=60 netns_mpirun --host n1:1,n2:1 -np 2 "${MCA[@]}" "$GPURUN" sh -c 'echo "plain ${RANK}/${WORLD_SIZE} master=${MASTER_ADDR:-unset}"' \
  >"$out" 2>&1 || { cat "$out"; echo "FAIL: a non-Python program failed without MASTER_ADDR"; exit 1; }
cat "$out"
# (only rank 0 can tell that it is away from mpirun's node: rank 1 still gets mpirun's address)
grep -qx "plain 0/2 master=unset" "$out" && grep -q "^plain 1/2 master=" "$out" ||
  { echo "FAIL: a non-Python program did not get RANK/WORLD_SIZE without MASTER_ADDR"; exit 1; }
NETNS_TIMEOUT=60 netns_mpirun --host n1:1,n2:1 -np 2 "${MCA[@]}" "$GPURUN" --master-addr n1 sh -c "$show" \
  >"$out" 2>&1 || { cat "$out"; echo "FAIL: --master-addr n1 did not help"; exit 1; }
cat "$out"
grep -q "^contract 1 2 0 1 1 n1 [0-9]* on n2$" "$out" || { echo "FAIL: --master-addr not exported"; exit 1; }
echo "PASS: contract, DDP across 3 hosts, --master-addr"
