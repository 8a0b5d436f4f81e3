#!/bin/sh
# MPI_Comm_spawn under the MPI layer (spawn_cases.c: 2 parent ranks spawn 2 children, both sides
# allreduce over the merged intercommunicator):
#   results   the same output traced as plain (4 processes, sum 10 on each)
#   apart     with the layer in the children too (LD_PRELOAD and GPURUN_* passed to every
#             process, as a user who exports them does), while all 4 run: gpurun-top on the
#             parents' job shows 2 ranks whose live files hold the parents' pids; the children
#             are a job of their own (<job>.spawn-<MPI's name for it>) with their own 2 live files,
#             or, where the MPI names no spawned job, the layer stands aside in them with a
#             sentence. After the run, the parents' flight recorders hold MPI_Comm_spawn on the
#             world and the merged communicator by the parents' ids; the children's hold no
#             spawn, and their communicators come from "parent"
# usage: test_spawn.sh MPI_LAUNCH GPURUN GPURUN_TOP SPAWN_CASES LIB
set -u
launch=$1 gpurun=$2 top=$3 cases=$4 lib=$5
tmp=$(mktemp -d /tmp/gr_spawn.XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fail=0
bad() {
  echo "FAIL: $*" >&2
  fail=1
}
ok() { echo "ok: $*"; }
family=$("$launch" --family 2> /dev/null)
if [ "$family" = srun ]; then
  echo "test_spawn: srun starts no processes for MPI_Comm_spawn; skipped"
  exit 77
fi
export GPURUN_MONITOR_DIR="$tmp/mon"

# ---- results -------------------------------------------------------------------------------------
# Without gpurun first: an MPI that cannot spawn here at all (Debian's MPICH 4.0 on one host:
# "Error in spawn call" from a two-line program too) has nothing for the layer to keep apart.
# Under load Hydra sometimes ends such a run before its ranks' error stack is printed (exit 15, no
# output): a failed run that printed nothing is the same verdict, gpurun took no part in it.
if ! timeout 60 "$launch" -np 2 --oversubscribe "$cases" > "$tmp/plain.out" 2>&1; then
  if grep -q 'spawn' "$tmp/plain.out" || ! [ -s "$tmp/plain.out" ]; then
    echo "test_spawn: this MPI ($family) cannot spawn here without gpurun either; skipped:"
    if [ -s "$tmp/plain.out" ]; then head -n 3 "$tmp/plain.out"; else echo "(it failed and printed nothing)"; fi
    exit 77
  fi
  bad "plain run: $(cat "$tmp/plain.out")"
fi
sort "$tmp/plain.out" > "$tmp/plain.sorted"
GPURUN_JOB_ID=sp1 timeout 60 "$launch" -np 2 --oversubscribe -x GPURUN_MONITOR_DIR -x GPURUN_JOB_ID \
  "$gpurun" --trace=mpi "$cases" > "$tmp/traced.out" 2> "$tmp/traced.err" ||
  bad "traced run: $(cat "$tmp/traced.out" "$tmp/traced.err")"
sort "$tmp/traced.out" > "$tmp/traced.sorted"
if [ "$(grep -c 'sum 10, 0 failed' "$tmp/plain.sorted")" = 4 ] &&
  cmp -s "$tmp/plain.sorted" "$tmp/traced.sorted"; then
  ok "results: the same output traced as plain ($(tr '\n' ';' < "$tmp/plain.sorted"))"
else
  bad "results: plain [$(cat "$tmp/plain.out")] traced [$(cat "$tmp/traced.out")]"
fi

# ---- apart: the layer in parents and children ------------------------------------------------------
mkdir "$tmp/hold"
GPURUN_JOB_ID=sp GPURUN_TRACE=mpi GPURUN_LOG=debug LD_PRELOAD=$lib timeout 60 "$launch" -np 2 \
  --oversubscribe -x GPURUN_MONITOR_DIR -x GPURUN_JOB_ID -x GPURUN_TRACE -x GPURUN_LOG -x LD_PRELOAD \
  "$cases" "$tmp/hold" > "$tmp/apart.out" 2> "$tmp/apart.err" &
job=$!
# wait until all four hold (each parent's live file names the merged communicator's allreduce)
i=0
while [ $i -lt 300 ]; do
  [ "$(grep -l 'MPI_Allreduce' "$tmp"/mon/sp/live.* 2> /dev/null | wc -l)" = 2 ] && break
  sleep 0.1
  i=$((i + 1))
done
sleep 0.5
"$top" --once "$tmp/mon/sp" > "$tmp/top.out" 2>&1
pids() { for f in "$@"; do sed -n 's/^pid //p' "$f"; done | sort | tr '\n' ' '; }
parents=$(pids "$tmp"/mon/sp/live.*)
kids=$(for p in $(pgrep -f "spawn_cases child $tmp/hold"); do echo "$p"; done | sort | tr '\n' ' ')
real_parents=$(for p in $(pgrep -f "spawn_cases $tmp/hold"); do
  tr '\0' ' ' < "/proc/$p/cmdline" 2> /dev/null | grep -q '^[^ ]*spawn_cases /' && echo "$p"
done | sort | tr '\n' ' ')
spawned=$(ls -d "$tmp"/mon/sp.spawn-* 2> /dev/null)
kid_files=$([ -n "$spawned" ] && pids "$spawned"/live.*)
touch "$tmp/hold/stop"
wait $job
rc=$?
[ $rc = 0 ] && [ "$(grep -c 'sum 10, 0 failed' "$tmp/apart.out")" = 4 ] ||
  bad "apart: the run (exit $rc): $(cat "$tmp/apart.out" "$tmp/apart.err")"
if grep -q '2 ranks (2 live)' "$tmp/top.out" && [ "$(ls "$tmp"/mon/sp/live.* | wc -l)" = 2 ] &&
  [ "$parents" = "$real_parents" ] && [ -n "$real_parents" ]; then
  ok "apart: gpurun-top shows the parents' job as 2 ranks, their live files hold the parents' pids ($parents)"
else
  bad "apart: parents' live files [$parents] parents [$real_parents] children [$kids]: $(cat "$tmp/top.out")"
fi
if [ -n "$spawned" ]; then
  if [ "$(echo "$spawned" | wc -l)" = 1 ] && [ "$kid_files" = "$kids" ] && [ -n "$kids" ]; then
    ok "apart: the children are job $(basename "$spawned"), their live files hold their pids ($kids)"
  else
    bad "apart: spawned jobs [$spawned] with pids [$kid_files], children [$kids]"
  fi
elif [ "$(grep -c 'the MPI layer stands aside: this process was started by MPI_Comm_spawn' "$tmp/apart.err")" = 2 ]; then
  ok "apart: the MPI names no spawned job: the layer stands aside in each child with a sentence"
else
  bad "apart: no job directory for the children and no sentence: $(ls "$tmp/mon"; cat "$tmp/apart.err")"
fi

# The records of a flight dump, one a line: communicator id, op, state.
records() {
  awk '/^ \{"id": / { match($0, /"id": "[^"]*"/); id = substr($0, RSTART + 7, RLENGTH - 8) }
       /^  \{"seq": / {
         match($0, /"op": "[^"]*"/); op = substr($0, RSTART + 7, RLENGTH - 8)
         match($0, /"state": "[a-z]*"/); st = substr($0, RSTART + 10, RLENGTH - 11)
         print id, op, st }' "$1" 2> /dev/null
}
for r in 0 1; do
  records "$tmp/mon/sp/flight.$r.json" > "$tmp/p.rec.$r"
  grep -q '^w MPI_Comm_spawn done$' "$tmp/p.rec.$r" &&
    grep -q '^w\.1:0 MPI_Intercomm_merge done$' "$tmp/p.rec.$r" &&
    grep -q '^w\.1:0\.1:0 MPI_Allreduce done$' "$tmp/p.rec.$r" ||
    bad "apart: parent $r's flight recorder: $(cat "$tmp/p.rec.$r")"
  [ -n "$spawned" ] || continue
  records "$spawned/flight.$r.json" > "$tmp/c.rec.$r"
  grep -q '^parent MPI_Intercomm_merge done$' "$tmp/c.rec.$r" &&
    grep -q '^parent\.1:0 MPI_Allreduce done$' "$tmp/c.rec.$r" &&
    ! grep -q 'MPI_Comm_spawn' "$tmp/c.rec.$r" ||
    bad "apart: child $r's flight recorder: $(cat "$tmp/c.rec.$r")"
done
[ $fail = 0 ] && ok "apart: the parents' flight recorders hold the spawn on w and the merge on w.1:0; the children's none, their merge on 'parent'"
exit $fail
