#!/bin/sh
# The NCCL profiler plugin (libgpurun-nccl-profiler.so) under the NCCL test double, which loads and
# calls it as NCCL 2.28 does (NCCL_PROFILER_PLUGIN, ncclProfiler_v5 else _v4):
#   records   a plain NCCL program's collectives and sends/receives, per communicator, in the flight
#             dumps and the live files, all finished; the same through the v4 table
#   none      NCCL_PROFILER_PLUGIN=none: nothing loaded, nothing written
#   stopped   a rank stopped before an allreduce: the others' live files show them inside it,
#             gpurun-top names the stopped rank, SIGUSR1 dumps a waiting rank's recorder
#   timeout   the same stop under GPURUN_TIMEOUT=2 and GPURUN_ON_HANG=abort: a waiting rank's
#             watchdog names rank 1 missing in ncclAllReduce and the job ends with status 125
#   aside     a libgpurun program on the NCCL backend (the double): the plugin stands aside
# usage: test_ncclprof.sh MPI_LAUNCH NCCL_PROG PLUGIN GPURUN_TOP LIBGPURUN_NCCL_PROGRAM
set -u
launch=$1 prog=$2 plugin=$3 top=$4 grprog=$5
tmp=$(mktemp -d /tmp/gr_ncclprof.XXXXXX)
pids=""
trap 'for p in $pids; do kill -CONT $p 2>/dev/null; kill -KILL $p 2>/dev/null; done; [ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export GPURUN_MONITOR_DIR="$tmp/mon" NCCL_PROFILER_PLUGIN="$plugin"
fail=0
bad() {
  echo "FAIL: $*" >&2
  fail=1
}
ok() { echo "ok: $*"; }
X="-x GPURUN_MONITOR_DIR -x GPURUN_JOB_ID -x NCCL_PROFILER_PLUGIN -x GPURUN_LOG -x GPURUN_FLIGHT -x GRDBL_PROFILER_V4 -x GPURUN_TIMEOUT -x GPURUN_ON_HANG"

# ---- records ------------------------------------------------------------------------------------
for v in 5 4; do
  job=ok$v
  [ $v = 4 ] && v4=1 || v4=0
  GPURUN_JOB_ID=$job GPURUN_LOG=debug GPURUN_FLIGHT=0 GRDBL_PROFILER_V4=$v4 timeout -k 5 60 \
    "$launch" -n 3 --oversubscribe $X "$prog" ok > "$tmp/$job.out" 2>&1
  grep -q "ok: 9 checks, 0 failed" "$tmp/$job.out" || bad "v$v: the program: $(cat "$tmp/$job.out")"
  f=$tmp/mon/$job/flight.0.json
  for want in '"backend": "nccl"' '"op": "ncclAllReduce", "count": 256, "dtype": "float32"' \
      '"seq": 5, "op": "ncclAllReduce"' '"op": "ncclBroadcast", "count": 1024, "dtype": "int8", "root": 2' \
      '"op": "ncclSend", "count": 256, "dtype": "float32", "root": -1, "peer": 1' \
      '"op": "ncclRecv", "count": 256, "dtype": "float32", "root": -1, "peer": 2' '"cseq": 7, "state": "done"' \
      '"rank": 0, "size": 2, "backend": "nccl"'; do
    grep -qF "$want" "$f" 2>/dev/null || bad "v$v: $f lacks $want: $(cat "$f" 2>&1)"
  done
  if grep -q '"running"' "$f" 2>/dev/null; then bad "v$v: a record still running in $f"; fi
  # every member names the world communicator by one id (NCCL's commHash)
  ids=$(for r in 0 1 2; do sed -n 's/.*"id": "\(n[0-9a-f]*\)".*"size": 3.*/\1/p' "$tmp/mon/$job/flight.$r.json"; done | sort -u | wc -l)
  [ "$ids" = 1 ] || bad "v$v: the ranks' ids of the world communicator differ"
  grep -q "^comm n[0-9a-f]* 2 3 nccl 9 ncclRecv 256 done" "$tmp/mon/$job/live.2" 2>/dev/null ||
    bad "v$v: live.2: $(cat "$tmp/mon/$job/live.2" 2>&1)"
  [ $fail = 0 ] && ok "v$v: 9 records on the world, 2 on the split, in the flight dumps and live files"
done

# ---- none ---------------------------------------------------------------------------------------
GPURUN_JOB_ID=none NCCL_PROFILER_PLUGIN=none GPURUN_LOG=debug timeout -k 5 60 \
  "$launch" -n 2 --oversubscribe $X "$prog" ok > "$tmp/none.out" 2>&1
if grep -q "0 failed" "$tmp/none.out" && [ ! -e "$tmp/mon/none" ]; then ok "NCCL_PROFILER_PLUGIN=none: nothing written"
else bad "none: $(cat "$tmp/none.out"; ls "$tmp/mon/none" 2>&1)"; fi

# ---- stopped ------------------------------------------------------------------------------------
GPURUN_JOB_ID=stop GPURUN_FLIGHT=1 timeout -k 5 120 "$launch" -n 3 --oversubscribe $X "$prog" stop 1 3 \
  > "$tmp/stop.out" 2>&1 &
pids="$!"
inside() { # RANK: its live file shows it inside allreduce #3
  awk '$1 == "comm" && $6 == 3 && $7 == "ncclAllReduce" && $9 == "running" { ok = 1 } END { exit !ok }' \
    "$tmp/mon/stop/live.$1" 2>/dev/null
}
i=0
while [ $i -lt 300 ] && ! { inside 0 && inside 2; }; do
  i=$((i + 1)); sleep 0.1
done
inside 0 && inside 2 && ok "live: ranks 0 and 2 inside ncclAllReduce #3" ||
  bad "live: $(cat "$tmp/mon/stop/live.0" "$tmp/mon/stop/live.2" 2>&1)"
for r in 0 1 2; do pids="$pids $(sed -n 's/^pid //p' "$tmp/mon/stop/live.$r" 2>/dev/null)"; done
sleep 2
"$top" --once --hang 1 "$tmp/mon/stop" > "$tmp/top.out" 2>&1
verdict=$(sed -n '2,/^ RANK/p' "$tmp/top.out" | grep -v '^ RANK' | tr '\n' ' ')
case $verdict in
  *"rank 1"*STOPPED*ncclAllReduce*|*ncclAllReduce*"rank 1"*STOPPED*) ok "gpurun-top: $verdict" ;;
  *) bad "gpurun-top did not name rank 1 stopped: $(cat "$tmp/top.out")" ;;
esac
p0=$(sed -n 's/^pid //p' "$tmp/mon/stop/live.0" 2>/dev/null)
[ -n "$p0" ] && kill -USR1 "$p0"
i=0
while [ $i -lt 50 ] && [ ! -s "$tmp/mon/stop/flight.0.json" ]; do i=$((i + 1)); sleep 0.1; done
if grep -q '"op": "ncclAllReduce".*"cseq": 3, "state": "running"' "$tmp/mon/stop/flight.0.json" 2>/dev/null &&
   grep -q '"reason": "signal"' "$tmp/mon/stop/flight.0.json"; then
  ok "SIGUSR1: rank 0's flight dump shows ncclAllReduce #3 running"
else
  bad "SIGUSR1 dump: $(cat "$tmp/mon/stop/flight.0.json" 2>&1)"
fi
for p in $pids; do kill -CONT $p 2>/dev/null; kill -KILL $p 2>/dev/null; done
wait 2>/dev/null
pids=""

# ---- timeout ------------------------------------------------------------------------------------
GPURUN_JOB_ID=tmo GPURUN_TIMEOUT=2 GPURUN_ON_HANG=abort timeout -k 5 120 \
  "$launch" -n 3 --oversubscribe $X "$prog" stop 1 3 > "$tmp/tmo.out" 2>&1 &
job=$!
i=0
while [ $i -lt 300 ] && [ ! -s "$tmp/mon/tmo/live.1" ]; do i=$((i + 1)); sleep 0.1; done
pids="$(sed -n 's/^pid //p' "$tmp/mon/tmo/live.1" 2>/dev/null)"
wait $job
rc=$?
# The rank that speaks exits with 125. Open MPI's mpirun reports that status; MPICH's Hydra then
# kills the others and reports the signal that ended the stopped rank (9).
want=125
[ "${GPURUN_TEST_MPI_FAMILY:-}" = mpich ] && [ $rc = 9 ] && want=9
line=$(grep "hang: " "$tmp/tmo.out")
case $line in
  *"gpurun: rank "[02]": hang: ranks 0,2 waited "*" in ncclAllReduce #"*"missing: rank 1 (no answer"*)
    if [ $rc = $want ] && grep -q "GPURUN_ON_HANG=abort: ending the job (exit 125)" "$tmp/tmo.out" &&
       grep -q '"reason": "timeout"' "$tmp/mon/tmo/flight.0.json" "$tmp/mon/tmo/flight.2.json" 2>/dev/null; then
      ok "GPURUN_TIMEOUT: $line; exit $rc"
    else
      bad "timeout: exit $rc, $(cat "$tmp/tmo.out"; ls "$tmp/mon/tmo")"
    fi ;;
  *) bad "timeout: no verdict naming rank 1 (exit $rc): $(cat "$tmp/tmo.out")" ;;
esac
for p in $pids; do kill -CONT $p 2>/dev/null; kill -KILL $p 2>/dev/null; done
pids=""

# ---- aside --------------------------------------------------------------------------------------
GPURUN_JOB_ID=aside GPURUN_LOG=info timeout -k 5 120 "$launch" -n 2 --oversubscribe $X "$grprog" \
  > "$tmp/aside.out" 2>&1
rc=$?
if [ $rc = 0 ] && grep -q "the NCCL profiler plugin stands aside: the program links libgpurun" "$tmp/aside.out" &&
   ! grep -q '"backend": "nccl"' "$tmp/mon/aside/flight."*.json 2>/dev/null; then
  ok "a libgpurun program on the NCCL double: the plugin stands aside"
else
  bad "aside (rc $rc): $(tail -20 "$tmp/aside.out")"
fi
exit $fail
