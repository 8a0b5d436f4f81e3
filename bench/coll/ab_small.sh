#!/bin/sh
# Two builds of gpurun-bench-coll against each other at small sizes on 2 ranks, interleaved run by
# run with the order flipped every repeat; each run itself alternates gpurun and raw MPI rounds.
# Before and after each repeat, gpurun-bench-line's one-way cache-line latency (the VM's placement
# of its two vCPUs moves, and with it every microsecond figure: bench/README.md). Summarise with
# bench/coll/ab_summary.py OUT.
#   bench/coll/ab_small.sh OLD_BENCH NEW_BENCH LINE_BENCH OUT [REPEATS] [OPS]
# OPS default "allreduce allgather broadcast reduce_scatter"; sizes 8 and 32 B, 9 rounds x 5000.
set -eu
if [ $# -lt 4 ]; then
  echo "usage: bench/coll/ab_small.sh OLD_BENCH NEW_BENCH LINE_BENCH OUT [REPEATS] [OPS]" >&2
  exit 2
fi
old=$1 new=$2 line=$3 out=$4
reps=${5:-12}
ops=${6:-allreduce allgather broadcast reduce_scatter}
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1}
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}
mkdir -p "$out"
latency() { "$line" 3 | awk '/^cache line/ {print $5}'; }
r=1
while [ "$r" -le "$reps" ]; do
  latency >"$out/line.rep$r"
  if [ $((r % 2)) = 1 ]; then order="old new"; else order="new old"; fi
  for op in $ops; do
    for b in $order; do
      if [ "$b" = old ]; then bin=$old; else bin=$new; fi
      mpirun -np 2 "$bin" -o "$op" -b 8 -e 32 -f 4 -R 9 -w 5 -n 5000 --compare --timeout 60 \
        >"$out/$op.$b.rep$r.txt" 2>&1
    done
  done
  latency >>"$out/line.rep$r"
  r=$((r + 1))
done
