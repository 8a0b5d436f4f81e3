#!/bin/sh
# gpurun-top's late line for a halo-exchange code: LAMMPS (the 3d Lennard-Jones melt, run long)
# at 3 ranks under gpurun --monitor (the MPI layer preloaded), one rank throttled by stop/continue
# (stopped 45 ms of every 50 ms). bench/mpitrace/stragglers.sh SLOW=throttle stops 20 of 50, which
# on the 2-core machines of CI hardly slows a rank: 3 ranks on 2 cores, two of them share one,
# and while one is stopped its partner gets the whole core, so the lone rank, whose core other
# work on the machine shares, stays as slow (seen: 0 of 3 trials named the throttled rank 0, its
# waiters then waited as long for rank 2). Every rank's time in MPI is alike; the per-peer waits
# (the live files' mpi_waited lines) tell who the others wait for. After 3 s of throttling,
# gpurun-top --count 3 --interval 4 prints three frames; the second and third compare with the
# frames before them (the window): one of them must say "late: rank R: ..." with R the throttled
# rank, and none may name another rank (a frame with no late line is allowed: on a machine that
# other work stalls, a window can hold too little progress to tell). Two trials with different
# ranks throttled (1, then 0: a view that names one rank whatever happens fails one of them).
# usage: test_top_late_lmp.sh MPIRUN GPURUN GPURUN_TOP LMP
set -u
mpirun=$1 gpurun=$2 top=$3 lmp=$4
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d /tmp/gr_top_late.XXXXXX)
job_pid= thr=
cleanup() {
  [ -n "$thr" ] && { kill "$thr" 2>/dev/null; wait "$thr" 2>/dev/null; }
  [ -n "$job_pid" ] && { kill "$job_pid" 2>/dev/null; wait "$job_pid" 2>/dev/null; }
  rm -rf "$tmp" 2>/dev/null
}
trap cleanup EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
family=$("$mpirun" --family 2>/dev/null)
if [ "$family" != openmpi ]; then
  # Debian's lmp is Open MPI's: another family's launcher starts it as singletons, and a layer
  # built for MPICH cannot carry Open MPI's 64-bit handles
  echo "test_top_late_lmp: skipped: lmp is Open MPI's, this build's MPI is $family's"
  exit 77
fi
fail=0
for slow in 1 0; do
  id=late$slow
  jobdir=$tmp/mon/$id
  GPURUN_MONITOR_DIR="$tmp/mon" GPURUN_JOB_ID=$id timeout -k 5 120 "$mpirun" -np 3 --oversubscribe \
    "$gpurun" --monitor "$lmp" -in "$here/../../../../docs/guide/files/in.melt" \
    -var steps 100000000 -log none -screen none > "$tmp/job.out" 2>&1 &
  job_pid=$!
  # every rank in its loop: each live file has per-peer waits
  i=0 ready=0
  while [ $i -lt 600 ] && [ $ready = 0 ]; do
    ready=1
    for r in 0 1 2; do
      grep -q '^mpi_waited ' "$jobdir/live.$r" 2>/dev/null || ready=0
    done
    i=$((i + 1))
    sleep 0.1
  done
  if [ $ready != 1 ]; then
    echo "test_top_late_lmp: the ranks never waited point to point: $(cat "$tmp/job.out")" >&2
    exit 1
  fi
  pid=$(awk '$1 == "pid" { print $2 }' "$jobdir/live.$slow")
  (while kill -STOP "$pid" 2>/dev/null; do sleep 0.045; kill -CONT "$pid" 2>/dev/null; sleep 0.005; done) &
  thr=$!
  sleep 3
  "$top" --count 3 --interval 4 "$jobdir" > "$tmp/top.out" 2>&1
  waited=$(grep -H '^mpi_waited' "$jobdir"/live.*)
  kill "$thr" 2>/dev/null
  wait "$thr" 2>/dev/null
  thr=
  kill -CONT "$pid" 2>/dev/null
  kill "$job_pid" 2>/dev/null
  wait "$job_pid" 2>/dev/null
  job_pid=
  # the frames after the first (each after a blank line): their late lines
  late=$(awk 'f && /late:/ { print } /^$/ { f = 1 }' "$tmp/top.out")
  echo "throttled rank $slow: ${late:-no late line}"
  right=$(printf '%s\n' "$late" | grep -c "late: rank $slow: ranks .* in point-to-point in the last ")
  wrong=$(printf '%s\n' "$late" | sed -n 's/.*late: rank \([0-9][0-9]*\).*/\1/p' | grep -vcx "$slow")
  case "$right:$wrong" in
    0:* | *:[1-9]*)
      echo "test_top_late_lmp: rank $slow throttled, no later frame names it alone:" >&2
      cat "$tmp/top.out" >&2
      echo "the per-peer waits at the end: $waited" >&2
      fail=1
      ;;
  esac
done
exit $fail
