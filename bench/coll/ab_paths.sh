#!/bin/sh
# Two builds of gpurun-bench-coll against each other on 2 ranks, interleaved run by run with the
# order flipped every repeat (each run itself alternates gpurun and raw MPI rounds): the 8-byte
# allreduce on the shared-memory path without and with a timeout, and the MPI algorithms
# (GPURUN_COLL_ALGO=mpi) with a timeout at 16-256 B. Summarise with bench/coll/ab_summary.py OUT
# (files shm8, shm8t, mpit).
#   bench/coll/ab_paths.sh OLD_BENCH NEW_BENCH OUT [REPEATS]
set -eu
if [ $# -lt 3 ]; then
  echo "usage: bench/coll/ab_paths.sh OLD_BENCH NEW_BENCH OUT [REPEATS]" >&2
  exit 2
fi
old=$1 new=$2 out=$3
reps=${4:-6}
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1}
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}
mkdir -p "$out"
r=1
while [ "$r" -le "$reps" ]; do
  if [ $((r % 2)) = 1 ]; then order="old new"; else order="new old"; fi
  for b in $order; do
    if [ "$b" = old ]; then bin=$old; else bin=$new; fi
    mpirun -np 2 "$bin" -o allreduce -b 8 -e 8 -R 9 -w 5 -n 5000 --compare \
      >"$out/shm8.$b.rep$r.txt" 2>&1
    mpirun -np 2 "$bin" -o allreduce -b 8 -e 8 -R 9 -w 5 -n 5000 --compare --timeout 60 \
      >"$out/shm8t.$b.rep$r.txt" 2>&1
    mpirun -np 2 -x GPURUN_COLL_ALGO=mpi "$bin" -o allreduce -b 16 -e 256 -f 2 -R 9 -w 5 -n 5000 \
      --compare --timeout 60 >"$out/mpit.$b.rep$r.txt" 2>&1
  done
  r=$((r + 1))
done
