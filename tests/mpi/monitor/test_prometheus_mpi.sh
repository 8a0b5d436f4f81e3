#!/bin/sh
# The MPI layer's Prometheus series (issue 37) on a plain MPI program that never calls gr_init
# (prom_mpi.c) under gpurun --monitor --prometheus, 2 ranks, rank 1 sleeping 20 ms before each
# step's MPI_Allreduce (a rank that comes late while rank 0 waits), each rank holding an MPI_Irecv
# open from its first step to its last. Read from the .prom files the supervisors write:
#  - gpurun_rank_mpi_seconds_total and gpurun_rank_mpi_collective_seconds_total are counters with
#    the labels job, host, rank, local_rank only; time inside MPI is never more than the time the
#    job has run, nor the collectives' more than MPI's, and gpurun_rank_collective_seconds_total
#    (the existing name) says the same as mpi_seconds_total;
#  - the lag PromQL derives (the job's highest rate of mpi_collective_seconds_total minus a rank's)
#    names rank 1, late for most of each second, and rank 0 not;
#  - gpurun_rank_collective_wait_seconds stays near 0 while the MPI_Irecv is seconds old (no call
#    the rank is in), and grows on rank 0 once rank 1's program is stopped (SIGSTOP);
#  - the job ends well once rank 1 goes on, and its files go with it.
# usage: test_prometheus_mpi.sh MPIRUN GPURUN PROM_MPI
set -u
mpirun=$1 gpurun=$2 prog=$3
tmp=$(mktemp -d /tmp/gr_prommpi.XXXXXX)
job_pid= stopped=
cleanup() {
  [ -n "$stopped" ] && kill -CONT "$stopped" 2>/dev/null
  touch "$tmp/stop"
  [ -n "$job_pid" ] && { sleep 2; kill "$job_pid" 2>/dev/null; wait "$job_pid" 2>/dev/null; }
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  for f in "$tmp"/prom/*.prom; do [ -f "$f" ] && { echo "== $f"; grep '^gpurun_rank_' "$f"; }; done >&2
  cat "$tmp/job.out" >&2
  exit 1
}
mkdir "$tmp/prom"
# awk does the arithmetic: ok EXPR [name=value ...] exits 0 when EXPR holds.
ok() { e=$1; shift; awk "$@" "BEGIN { exit !($e) }" < /dev/null; }

start=$(date +%s.%N)
GPURUN_MONITOR_DIR="$tmp/mon" GPURUN_JOB_ID=pm timeout -k 5 100 "$mpirun" -np 2 --oversubscribe \
  "$gpurun" --monitor=0.2 --prometheus "$tmp/prom" "$prog" "$tmp" 1 20 > "$tmp/job.out" 2>&1 &
job_pid=$!
# val FILE NAME RANK: the value of series NAME in FILE, which must carry exactly these labels.
val() {
  awk -v n="$2" -v r="$3" 'index($0, n "{job=\"pm\",host=\"") == 1 &&
    $0 ~ ("^" n "\\{job=\"pm\",host=\"[^\"]*\",rank=\"" r "\",local_rank=\"" r "\"\\} ") { print $NF }' "$1"
}
f0= f1=
i=0
until [ -n "$f0" ] && [ -n "$f1" ] && ok 'v > 2.5' -v v="$(val "$f0" gpurun_rank_mpi_collective_seconds_total 0)"; do
  i=$((i + 1)); [ $i -lt 300 ] || fail "rank 0 has not 2.5 s in collectives after 30 s"
  sleep 0.1
  f0=$(ls "$tmp"/prom/gpurun_pm_*_0.prom 2>/dev/null) f1=$(ls "$tmp"/prom/gpurun_pm_*_1.prom 2>/dev/null)
done
cp "$f0" "$tmp/a0"; cp "$f1" "$tmp/a1"
for m in gpurun_rank_mpi_seconds_total gpurun_rank_mpi_collective_seconds_total; do
  for r in 0 1; do
    grep -qx "# TYPE $m counter" "$tmp/a$r" || fail "rank $r: $m is not a counter"
  done
done
for r in 0 1; do
  a=$tmp/a$r
  mpi=$(val "$a" gpurun_rank_mpi_seconds_total $r) coll=$(val "$a" gpurun_rank_mpi_collective_seconds_total $r)
  cs=$(val "$a" gpurun_rank_collective_seconds_total $r) wait=$(val "$a" gpurun_rank_collective_wait_seconds $r)
  at=$(val "$a" gpurun_sample_time_seconds $r)
  echo "rank $r at +$(awk -v a="$at" -v s="$start" 'BEGIN { printf "%.2f", a - s }') s: mpi $mpi coll $coll collective $cs wait $wait"
  ok 'm > 0 && m <= a - s' -v m="$mpi" -v a="$at" -v s="$start" ||
    fail "rank $r: $mpi s inside MPI, $at - $start s after the start"
  ok 'c >= 0 && c <= m' -v c="$coll" -v m="$mpi" || fail "rank $r: $coll s in collectives of $mpi s in MPI"
  [ "$cs" = "$mpi" ] || fail "rank $r: collective_seconds_total $cs is not mpi_seconds_total $mpi"
  # the open MPI_Irecv is over 2.5 s old: the calls the rank is in are short
  ok 'w >= 0 && w < 1.5' -v w="$wait" || fail "rank $r: waits $wait s, in no call for that long"
done
# Two samples at least 2 s apart: the rates PromQL's rate() would take, and the lag from them.
i=0
until ok 'b0 - a0 >= 2 && b1 - a1 >= 2' -v a0="$(val "$tmp/a0" gpurun_sample_time_seconds 0)" \
    -v a1="$(val "$tmp/a1" gpurun_sample_time_seconds 1)" \
    -v b0="$(val "$f0" gpurun_sample_time_seconds 0)" -v b1="$(val "$f1" gpurun_sample_time_seconds 1)"; do
  i=$((i + 1)); [ $i -lt 100 ] || fail "the samples did not move on by 2 s in 10 s"
  sleep 0.1
done
cp "$f0" "$tmp/b0"; cp "$f1" "$tmp/b1"
rate() { # rate FAMILY RANK: per second of sample time between a and b
  awk -v a="$(val "$tmp/a$2" "$1" "$2")" -v b="$(val "$tmp/b$2" "$1" "$2")" \
    -v ta="$(val "$tmp/a$2" gpurun_sample_time_seconds "$2")" \
    -v tb="$(val "$tmp/b$2" gpurun_sample_time_seconds "$2")" 'BEGIN { printf "%.4f", (b - a) / (tb - ta) }'
}
c0=$(rate gpurun_rank_mpi_collective_seconds_total 0) c1=$(rate gpurun_rank_mpi_collective_seconds_total 1)
m0=$(rate gpurun_rank_mpi_seconds_total 0) m1=$(rate gpurun_rank_mpi_seconds_total 1)
lag1=$(awk -v a="$c0" -v b="$c1" 'BEGIN { m = a > b ? a : b; printf "%.4f", m - b }')
lag0=$(awk -v a="$c0" -v b="$c1" 'BEGIN { m = a > b ? a : b; printf "%.4f", m - a }')
echo "rates: collectives $c0 $c1, MPI $m0 $m1; lag (max - own): rank 0 $lag0, rank 1 $lag1"
# A sample carries the counters of the live file written up to 0.25 s before it (and a call's
# time counts when it ends): over 2 s a rate may pass 1 by an eighth.
ok 'm0 <= 1.15 && m1 <= 1.15 && c0 <= m0 + 0.01 && c1 <= m1 + 0.01' -v m0="$m0" -v m1="$m1" \
  -v c0="$c0" -v c1="$c1" || fail "a rate of time inside MPI well above 1 s per second"
ok 'l1 > 0.4 && l0 == 0' -v l0="$lag0" -v l1="$lag1" ||
  fail "the lag does not name rank 1 (sleeping 20 ms a step): rank 0 $lag0, rank 1 $lag1"

# rank 1's program stopped: rank 0 waits in a call that does not end, and its gauge says so
pid1=$(awk '$1 == "pid" { print $2 }' "$tmp/mon/pm/live.1")
[ -n "$pid1" ] || fail "no pid in rank 1's live file"
kill -STOP "$pid1"
stopped=$pid1
i=0
until ok 'w > 2' -v w="$(val "$f0" gpurun_rank_collective_wait_seconds 0)"; do
  i=$((i + 1)); [ $i -lt 150 ] || fail "rank 0's wait did not pass 2 s in 15 s with rank 1 stopped"
  sleep 0.1
done
echo "rank 1 stopped: rank 0 waits $(val "$f0" gpurun_rank_collective_wait_seconds 0) s"
kill -CONT "$pid1"
stopped=

touch "$tmp/stop"
wait "$job_pid"
rc=$?
job_pid=
[ $rc -eq 0 ] || fail "the job exited $rc"
[ "$(grep -c '^prom_mpi: rank [01]: [0-9]* steps$' "$tmp/job.out")" = 2 ] || fail "a rank did not finish"
set -- "$tmp"/prom/*.prom
[ -e "$1" ] && fail "the .prom files outlived the job: $*"
echo PASS
