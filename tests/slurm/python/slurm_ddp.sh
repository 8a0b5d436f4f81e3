#!/bin/bash
# examples/torch/ddp.sbatch on a private Slurm cluster: 2 tasks start through gpurun, which gives
# torch.distributed its env:// contract from Slurm's variables. Checks: the job completed (the
# example's own checks passed: loss, identical weights, (a) vs (b)); MASTER_ADDR is the first host
# of the step's node list ("localhost" here) and MASTER_PORT is 10000 + FNV-1a("JOBID.0") mod 20000,
# computed here independently; gpurun run by the batch script itself exports WORLD_SIZE=1.
#   slurm_ddp.sh SOURCE_DIR GPURUN PYTHON PYTHONPATH
set -eu
SRC=$1 GPURUN=$2 PY=$3 PYPATH=$4
. "$(dirname "$0")/../lib/slurm-cluster.sh"
slurm_cluster_start 2 4
out=$SLURM_DIR/ddp.out
job=$(GPURUN="$GPURUN" PYTHON="$PY" DDP="$SRC/examples/torch/ddp.py" DDP_ARGS="--steps 25" \
      PYTHONPATH="$PYPATH" slurm_submit "$SRC/examples/torch/ddp.sbatch" -n 2 -o "$out")
ok=1
slurm_wait "$job" 150 || ok=0
cat "$out" || true
[ $ok = 1 ] || { slurm_dump_logs; exit 1; }
port=$("$PY" -c "
h = 2166136261
for c in b'$job.0': h = ((h ^ c) * 16777619) & 0xffffffff
print(10000 + h % 20000)")
grep -q "WORLD_SIZE=2 MASTER_ADDR=localhost MASTER_PORT=$port " "$out" ||
  { echo "FAIL: expected WORLD_SIZE=2 MASTER_ADDR=localhost MASTER_PORT=$port"; exit 1; }
grep -q "ok: (a) and (b) agree" "$out" || { echo "FAIL: no (a)/(b) agreement line"; exit 1; }
# gpurun run by the batch script itself (no srun): one process, whatever SLURM_NTASKS says
out2=$SLURM_DIR/batch.out
job2=$(sbatch --parsable -n 2 -o "$out2" --wrap \
  "'$GPURUN' sh -c 'echo batch WORLD_SIZE=\$WORLD_SIZE RANK=\$RANK LOCAL_WORLD_SIZE=\$LOCAL_WORLD_SIZE'")
slurm_wait "$job2" 60 || { cat "$out2"; slurm_dump_logs; exit 1; }
cat "$out2"
grep -qx "batch WORLD_SIZE=1 RANK=0 LOCAL_WORLD_SIZE=1" "$out2" ||
  { echo "FAIL: the batch step is one process"; exit 1; }
echo "PASS: DDP under srun, MASTER_PORT $port from job $job; batch step WORLD_SIZE=1"
