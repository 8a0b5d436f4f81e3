#!/bin/bash
# A private Slurm cluster with 4 GPUs comes up, runs a 4-task job whose tasks start through gpurun
# with one GPU each, and goes away. Checks: the job completed; all 4 ranks ran the MPI program;
# the 4 tasks saw 4 distinct CUDA_VISIBLE_DEVICES values from {0,1,2,3}.
#   slurm_smoke.sh GPURUN SMOKE
set -eu
GPURUN=$1 SMOKE=$2
. "$(dirname "$0")/../lib/slurm-cluster.sh"
slurm_cluster_start 4 8
out=$SLURM_DIR/smoke.out
# srun's PMI for the build's MPI: PMIx for Open MPI, PMI-2 for MPICH
mpi=pmix
[ "${GPURUN_TEST_MPI_FAMILY:-openmpi}" = mpich ] && mpi=pmi2
job=$(sbatch --parsable -n 4 --gpus-per-task=1 -t 2 -o "$out" --wrap \
  "srun --mpi=$mpi '$GPURUN' sh -c 'echo \"task \$SLURM_PROCID CUDA_VISIBLE_DEVICES=\$CUDA_VISIBLE_DEVICES\"; exec \"\$0\"' '$SMOKE'")
ok=1
slurm_wait "$job" 60 || ok=0
cat "$out" || true
[ $ok = 1 ] || { slurm_dump_logs; exit 1; }
for r in 0 1 2 3; do
  grep -q "^rank $r/4 on " "$out" || { echo "FAIL: rank $r/4 did not report"; exit 1; }
done
devs=$(sed -n 's/^task [0-9]* CUDA_VISIBLE_DEVICES=//p' "$out" | sort | tr '\n' ' ')
[ "$devs" = "0 1 2 3 " ] || { echo "FAIL: GPUs per task '$devs', expected one each of 0 1 2 3"; exit 1; }
echo "PASS: 4 tasks, GPUs $devs"
