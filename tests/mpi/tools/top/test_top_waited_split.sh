#!/bin/sh
# The live files' per-peer waits by world rank (waited_split.c): 4 ranks under gpurun --monitor;
# world 0 waits 1 s for world 2, world 1 for world 3, on halves whose ranks are reversed. After
# the job, live.0 must list 2 and live.1 list 3, each with 0.5 s or more, and no file may list a
# rank's wait of 0.5 s or more on anyone else.
# usage: test_top_waited_split.sh MPIRUN GPURUN WAITED_SPLIT
set -u
mpirun=$1 gpurun=$2 prog=$3
tmp=$(mktemp -d /tmp/gr_waited_split.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
if ! GPURUN_MONITOR_DIR="$tmp/mon" GPURUN_JOB_ID=split timeout -k 5 60 "$mpirun" -np 4 \
  --oversubscribe "$gpurun" --monitor "$prog" > "$tmp/out" 2>&1; then
  echo "test_top_waited_split: the job failed: $(cat "$tmp/out")" >&2
  exit 1
fi
fail=0
for r in 0 1 2 3; do
  line=$(grep '^mpi_waited ' "$tmp/mon/split/live.$r")
  echo "live.$r: ${line:-no mpi_waited line}"
  # the long waits (0.5 s or more) as "PEER" words
  long=$(echo "$line" | sed 's/^mpi_waited //' | tr ',' '\n' |
    awk -F: '$2 >= 0.5 { printf "%s%s", n++ ? " " : "", $1 }')
  case $r in 0) want=2 ;; 1) want=3 ;; *) want= ;; esac
  if [ "$long" != "$want" ]; then
    echo "test_top_waited_split: live.$r lists long waits on '$long', expected '$want'" >&2
    fail=1
  fi
done
exit $fail
