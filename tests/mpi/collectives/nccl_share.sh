#!/bin/sh
# nccl_share.sh MPIEXEC NP GPUS GROUPING EXE [ARGS...]: NP ranks on the fake GPUs GPUS (GRDBL_GPUS of
# the NCCL test double), GPURUN_LOG=info. Passes when EXE exits 0 AND rank 0 said the grouping it
# had to find, e.g. "ranks 0,1 share GPU 0000:1b:00.0; ranks 2,3 share GPU 0000:3d:00.0; NCCL runs
# among 2 leader(s)" (written with "|" for ";"): the exact results then came through the
# shared-GPU path, not around it.
set -u
mpiexec=$1 np=$2 gpus=$3 grouping=$(printf %s "$4" | tr "|" ";") # CMake lists cannot hold ";"
shift 4
out=$(GRDBL_GPUS=$gpus GPURUN_LOG=info "$mpiexec" -np "$np" --oversubscribe "$@" 2>&1)
rc=$?
echo "$out"
[ $rc = 0 ] || { echo "FAIL: exit $rc"; exit 1; }
echo "$out" | grep -F "gpurun[0] info: collectives on world[0.1]: $grouping" >/dev/null ||
  { echo "FAIL: rank 0 did not log 'collectives on world[0.1]: $grouping'"; exit 1; }
echo PASS
