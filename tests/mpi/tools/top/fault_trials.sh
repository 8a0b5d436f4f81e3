#!/bin/sh
# Fault trials for gpurun-top's verdict: real jobs under mpirun through gpurun --monitor, one
# rank faulted at a random moment, then one frame of gpurun-top --once. The script chooses the
# faulted rank (the independent answer) and compares it with the ranks the verdict names
# ("WAITING FOR rank(s) R: ..." or "FAULT: rank(s) R"). Kinds, in turn:
#   sim-stop     examples/sim (the README's demo, point-to-point halo exchange), 3 ranks, SIGSTOP
#   train-stop   examples/train (one fused allreduce per step), 3 ranks, SIGSTOP
#   split-stop   comm_loop split: 4 ranks in two halves of gr_comm_split(world, rank % 2), SIGSTOP
#   world2-stop  comm_loop world2: 3 ranks, the loop on a third communicator over MPI_COMM_WORLD
#   sim-kill     examples/sim, 3 ranks, SIGKILL (mpirun told not to end the job for it)
#   train-kill   examples/train, 3 ranks, SIGKILL
# and, with LMP and MPI_CASES given, programs that never call gpurun's API, seen through the MPI
# layer that --monitor preloads:
#   lmp-stop     LAMMPS (the 3d Lennard-Jones melt, run long), 3 ranks, SIGSTOP
#   lmp-kill     LAMMPS, 3 ranks, SIGKILL
#   mpi-recv     mpi_cases loop (tests/mpi/mpitrace): 3 ranks; the faulted rank enters a receive
#                that nobody sends to, while its peers go on into the next allreduce
# and, with SHIM and LAYER given too:
#   lmp-mismatch LAMMPS, 3 ranks; the faulted rank calls MPI_Barrier where its peers call
#                MPI_Allreduce (mismatch_shim.c, preloaded before the layer LAYER)
# Each trial prints one line (kind, faulted rank, named ranks, verdict); the last line is
#   fault-trials: N trials, E named exactly the faulted rank, I named an innocent rank alone
# and the script exits 1 unless E >= N - ALLOWED and I = 0.
# usage: fault_trials.sh MPIRUN GPURUN GPURUN_TOP SIM TRAIN COMM_LOOP TRIALS [ALLOWED [SEED [LMP MPI_CASES
#        [SHIM LAYER]]]]
set -u
mpirun=$1 gpurun=$2 top=$3 sim=$4 train=$5 loop=$6 trials=$7 allowed=${8:-0} seed=${9:-$$}
lmp=${10:-} cases=${11:-} shim=${12:-} layer=${13:-}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d /tmp/gr_faults.XXXXXX)
job_pid=
victim=
cleanup() {
  [ -n "$victim" ] && kill -CONT "$victim" 2>/dev/null
  touch "$tmp/stop"
  [ -n "$job_pid" ] && { kill "$job_pid" 2>/dev/null; wait "$job_pid" 2>/dev/null; }
  rm -rf "$tmp" 2>/dev/null # a rank of the last job may still be exiting
}
trap cleanup EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# R = a pseudo-random number in [0, $1) from the seed (POSIX sh has no $RANDOM; not called in a
# subshell, so that the seed advances)
rnd() {
  seed=$(( (seed * 1103515245 + 12345) % 2147483648 ))
  R=$(( (seed / 65536) % $1 ))
}
# "0-2,4" -> "0 1 2 4"
expand() {
  echo "$1" | tr ',' '\n' | awk -F- 'NF == 2 { for (i = $1; i <= $2; i++) printf "%d ", i; next }
                                      NF == 1 && $1 != "" { printf "%d ", $1 }'
}
# The first three cover a stopped rank, a killed rank and a split communicator (a short run)
kinds="sim-stop train-kill split-stop sim-kill world2-stop train-stop"
nk=6
if [ -n "$lmp" ] && [ -n "$cases" ]; then
  # plain MPI programs interleaved, so that a short run has each of them too
  kinds="sim-stop lmp-stop train-kill mpi-recv split-stop lmp-kill sim-kill world2-stop train-stop"
  nk=9
  if [ -n "$shim" ] && [ -n "$layer" ]; then
    kinds="$kinds lmp-mismatch"
    nk=10
  fi
fi
# FAULT_KINDS (the environment) takes a list of the kinds above instead (bench/top: LAMMPS alone)
if [ -n "${FAULT_KINDS:-}" ]; then
  kinds=$FAULT_KINDS
  nk=$(echo $kinds | wc -w)
fi
exact=0 innocent=0 n=0
while [ $n -lt "$trials" ]; do
  kind=$(echo $kinds | cut -d' ' -f$(( n % nk + 1 )))
  prog=${kind%-*} how=${kind#*-}
  np=3
  [ "$prog" = split ] && np=4
  case $prog in
    sim) cmd="$sim --steps 100000000 --n 96 --quiet" ;;
    train) cmd="$train --steps 100000000 --samples 4096 --quiet" ;;
    split) cmd="$loop split $tmp/stop" ;;
    world2) cmd="$loop world2 $tmp/stop" ;;
    lmp) cmd="$lmp -in $here/../../../../docs/guide/files/in.melt -var steps 100000000 -log none -screen none" ;;
    mpi) cmd="$cases loop $tmp" ;;
  esac
  rm -f "$tmp/stop" # each trial has a job directory of its own
  id=trial$n
  jobdir=$tmp/mon/$id
  # the shim before the layer, named in LD_PRELOAD for the ranks only (gpurun keeps that order)
  pre=
  [ "$how" = mismatch ] &&
    pre="-x LD_PRELOAD=$shim:$layer -x GPURUN_TRACE_LIB=$layer -x GR_MISMATCH_DIR=$tmp"
  # shellcheck disable=SC2086
  GPURUN_MONITOR_DIR="$tmp/mon" GPURUN_JOB_ID=$id timeout -k 5 120 "$mpirun" -np $np --oversubscribe \
    --mca orte_abort_on_non_zero_status 0 $pre "$gpurun" --monitor $cmd > "$tmp/job.out" 2>&1 &
  job_pid=$!
  # every rank in its loop: each live file shows a call made
  i=0 ready=0
  while [ $i -lt 600 ]; do
    ready=1
    r=0
    while [ $r -lt $np ]; do
      awk '$1 == "comm" && $12 > 0 { ok = 1 } END { exit !ok }' "$jobdir/live.$r" 2>/dev/null || ready=0
      r=$((r + 1))
    done
    [ $ready = 1 ] && break
    i=$((i + 1))
    sleep 0.1
  done
  if [ $ready != 1 ]; then
    echo "fault-trials: $kind: the ranks never reached their loop: $(cat "$tmp/job.out")" >&2
    exit 1
  fi
  rnd 3; secs=$R; rnd 10
  sleep "$secs.$R"
  rnd $np; rank=$R
  pid=$(awk '$1 == "pid" { print $2 }' "$jobdir/live.$rank")
  if [ "$how" = stop ]; then
    kill -STOP "$pid" && victim=$pid
  elif [ "$how" = recv ]; then
    touch "$tmp/recv.$rank"
  elif [ "$how" = mismatch ]; then
    touch "$tmp/mismatch.$rank"
    # the fault's moment is the rank's next allreduce, which LAMMPS makes a few times a second
    i=0
    while [ $i -lt 200 ] && ! grep -q "MPI_Barrier .* running" "$jobdir/live.$rank" 2>/dev/null; do
      i=$((i + 1))
      sleep 0.1
    done
  else
    kill -KILL "$pid"
  fi
  sleep 4
  "$top" --once "$jobdir" > "$tmp/once" 2>&1
  verdict=$(sed -n '2,/^ RANK/p' "$tmp/once" | grep -v '^ RANK' | tr '\n' ' ')
  list=$(echo "$verdict" | sed -nE 's/^(WAITING FOR|FAULT:) ranks? ([0-9,-]+).*/\2/p')
  named=$(expand "$list")
  if [ "$named" = "$rank " ]; then
    exact=$((exact + 1))
    mark=exact
  elif [ -n "$named" ] && ! echo " $named" | grep -q " $rank "; then
    innocent=$((innocent + 1))
    mark=INNOCENT
  else
    mark=inexact
  fi
  echo "trial $n $kind rank $rank named [${named% }] $mark: $verdict"
  [ -n "$victim" ] && kill -CONT "$victim" 2>/dev/null
  victim=
  rm -f "$tmp/recv.$rank" "$tmp/mismatch.$rank"
  touch "$tmp/stop"
  kill "$job_pid" 2>/dev/null
  wait "$job_pid" 2>/dev/null
  job_pid=
  n=$((n + 1))
done
echo "fault-trials: $n trials, $exact named exactly the faulted rank, $innocent named an innocent rank alone"
[ $exact -ge $((n - allowed)) ] && [ $innocent -eq 0 ]
