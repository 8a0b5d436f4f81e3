#!/bin/bash
# configs/slurm/sim.sbatch and train.sbatch, submitted unchanged (sizes through their documented
# variables) to a private Slurm cluster with 4 GPUs. Checks for each job: it completed with exit
# 0:0; its 4 tasks, started by srun --mpi=pmix through gpurun, saw 4 distinct GPU indexes 0-3 in
# CUDA_VISIBLE_DEVICES and ran with the plan gpurun exported; the program's self-check passed; and sim's checksum equals that of a
# 1-rank run under mpirun (the field does not depend on the decomposition).
#   slurm_examples.sh SRCDIR MPIRUN GPURUN SIM TRAIN
set -eu
SRC=$1 MPIRUN=$2
export GPURUN=$3 SIM=$4 TRAIN=$5
export SIM_ARGS="--cpu --nx 64 --ny 48 --steps 40" TRAIN_ARGS="--steps 60 --batch 256"
export GPURUN_TIMEOUT=60
# 4 tasks on this machine's 2 cores: ranks must yield when idle (srun does not tell Open MPI).
export OMPI_MCA_mpi_yield_when_idle=1
# srun's PMI for the build's MPI: PMIx for Open MPI, PMI-2 for MPICH (sbatch passes it on)
if [ "${GPURUN_TEST_MPI_FAMILY:-openmpi}" = mpich ]; then export SRUN_MPI=pmi2; fi
. "$(dirname "$0")/../lib/slurm-cluster.sh"
fail() { echo "FAIL: $*"; exit 1; }

ref=$("$MPIRUN" -np 1 "$GPURUN" "$SIM" $SIM_ARGS --quiet | sed -n 's/^sim: checksum //p')
[ -n "$ref" ] || fail "reference sim run under mpirun printed no checksum"

slurm_cluster_start 4 8
cd "$SLURM_DIR"
declare -A job
for ex in sim train; do
  job[$ex]=$(slurm_submit "$SRC/configs/slurm/$ex.sbatch" -o "$SLURM_DIR/$ex.out")
  echo "submitted $ex.sbatch as job ${job[$ex]}"
done
for ex in sim train; do
  ok=1
  slurm_wait "${job[$ex]}" 120 || ok=0
  out=$SLURM_DIR/$ex.out
  cat "$out" 2>/dev/null || true
  [ $ok = 1 ] || { slurm_dump_logs; fail "$ex job did not complete cleanly"; }
  grep -q "^$ex: self-check PASS" "$out" || fail "$ex: self-check did not pass"
  gpus=$(sed -n "s/^$ex: rank [0-9]*\/4 .*CUDA_VISIBLE_DEVICES=\([^ ]*\).*/\1/p" "$out" | sort | tr '\n' ' ')
  [ "$gpus" = "0 1 2 3 " ] || fail "$ex: tasks saw CUDA_VISIBLE_DEVICES '$gpus', expected 0 1 2 3 once each"
  [ "$(grep -Ec "^$ex: rank [0-9]/4 .*plan gpurun$" "$out")" = 4 ] ||
    fail "$ex: not every task ran with gpurun's plan"
done
sum=$(sed -n 's/^sim: checksum //p' "$SLURM_DIR/sim.out")
[ "$sum" = "$ref" ] || fail "sim under Slurm: checksum $sum, 1-rank mpirun run gave $ref"
echo "PASS: sim.sbatch and train.sbatch, 4 tasks on GPUs 0-3, self-checks passed, sim checksum $sum"
