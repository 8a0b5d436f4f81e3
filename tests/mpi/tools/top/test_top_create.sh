#!/bin/sh
# gpurun-top on a real 3-rank job that hangs in communicator creation, which no collective call
# shows. The test decides who is behind (the independent answer):
#  1. gr_comm_create over the world, rank 2 late (it waits for a file the test writes): the view
#     must name rank 2 as the rank that ranks 0-1 wait for inside gr_comm_create (step dup: the
#     MPI duplicate cannot finish without rank 2), and rank 2 as not having entered it;
#  2. gr_comm_split of the world, rank 1 first: the test stops rank 1 (SIGSTOP) once its live
#     file says it is inside gr_comm_split, then lets ranks 0 and 2 in; the view must name rank 1
#     as STOPPED inside gr_comm_split.
#  3. gr_init's own creation of the world communicator (the first of all), rank 0 late into
#     gr_init: ranks 1-2 must already publish that they wait in gr_comm_create, and the view
#     must name rank 0, which has published nothing yet.
# Each time the job must then finish well and leave no creation in the live files.
# usage: test_top_create.sh MPIRUN GPURUN CREATE_WAIT GPURUN_TOP
set -u
mpirun=$1 gpurun=$2 prog=$3 top=$4
tmp=$(mktemp -d /tmp/gr_topc.XXXXXX)
job_pid=
stopped=
cleanup() {
  [ -n "$stopped" ] && kill -CONT "$stopped" 2>/dev/null
  touch "$tmp/go"
  [ -n "$job_pid" ] && { sleep 2; kill "$job_pid" 2>/dev/null; wait "$job_pid" 2>/dev/null; }
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; [ -f "$tmp/once" ] && cat "$tmp/once" >&2; exit 1; }

# wait_for WHAT CONDITION...: up to 90 s (a loaded 2-core machine, a sanitizer build)
wait_for() {
  what=$1
  shift
  i=0
  until "$@"; do
    i=$((i + 1)); [ $i -lt 900 ] || fail "$what (after 90 s): $(cat "$tmp/job.out")"
    sleep 0.1
  done
}
# creating R CALL: rank R's live file says it is inside CALL
creating() { awk -v c="$2" '$1 == "creating" && $2 == c { ok = 1 } END { exit !ok }' "$jobdir/live.$1" 2>/dev/null; }
# creating_again R: rank R's live file says it is inside gr_comm_create after a call on the world
# ended: the test's creation, not gr_init's (a file is written every 0.5 s, so one written before
# gr_init's creation ended still shows that one while the rank already waits for the go file)
creating_again() {
  awk '$1 == "comm" && $12 >= 1 { called = 1 } $1 == "creating" && $2 == "gr_comm_create" { c = 1 }
       END { exit !(called && c) }' "$jobdir/live.$1" 2>/dev/null
}
# view_says REGEX: one frame of gpurun-top --once (hang threshold 1 s) matches
view_says() {
  "$top" --once --hang 1 "$jobdir" > "$tmp/once" 2>&1 || return 1
  tr '\n' ' ' < "$tmp/once" | grep -qE "$1"
}
start_job() { # JOBID ARGS...
  id=$1
  shift
  rm -f "$tmp/go"
  jobdir="$tmp/mon/$id"
  GPURUN_MONITOR_DIR="$tmp/mon" GPURUN_JOB_ID=$id timeout -k 5 150 "$mpirun" -np 3 --oversubscribe \
    "$gpurun" --monitor=0.5 "$prog" "$@" "$tmp/go" > "$tmp/job.out" 2>&1 &
  job_pid=$!
}
end_job() { # NAME
  touch "$tmp/go"
  wait "$job_pid"
  rc=$?
  job_pid=
  cat "$tmp/job.out"
  [ $rc -eq 0 ] || fail "$1: the job exited $rc"
  grep -q "create_wait: $1 on 3 ranks" "$tmp/job.out" || fail "$1: the job did not finish"
  for r in 0 1 2; do
    grep -q '^state exited' "$jobdir/live.$r" || fail "$1: live.$r does not say the rank exited"
    ! grep -q '^creating' "$jobdir/live.$r" || fail "$1: live.$r still shows a creation"
  done
}

# 1. rank 2 late into gr_comm_create
start_job late create 2 late
wait_for "ranks 0 and 1 never showed gr_comm_create in their live files" \
  eval "creating_again 0 && creating_again 1"
creating_again 2 && fail "rank 2 shows gr_comm_create before the test let it in"
wait_for "the view never named rank 2 as the rank ranks 0-1 wait for in gr_comm_create" \
  view_says 'WAITING FOR rank 2: ranks 0-1 in gr_comm_create \(dup\) on world for [0-9.]+ s'
cat "$tmp/once"
tr '\n' ' ' < "$tmp/once" | grep -q 'rank 2 has not entered gr_comm_create on world' ||
  fail "rank 2 is not said to be outside gr_comm_create"
grep -qE '^! +2 ' "$tmp/once" || fail "rank 2's row is not marked"
[ "$(grep -cE '^! ' "$tmp/once")" = 1 ] || fail "more than one rank marked"
[ "$(grep -cE '^  +[01] .* create:dup +[0-9.]+$' "$tmp/once")" = 2 ] || fail "rows 0-1 do not show create:dup"
awk 'length($0) > 80 { bad = 1 } END { exit bad }' "$tmp/once" || fail "a line is wider than 80 columns"
kill -0 "$job_pid" || fail "the job ended while rank 2 was held back"
end_job create

# 2. rank 1 first into gr_comm_split, stopped there
start_job stopped split 1 early
wait_for "rank 1 never showed gr_comm_split in its live file" creating 1 gr_comm_split
pid=$(awk '$1 == "pid" { print $2 }' "$jobdir/live.1")
[ -n "$pid" ] && kill -0 "$pid" || fail "no pid in live.1"
kill -STOP "$pid" && stopped=$pid
touch "$tmp/go"
wait_for "ranks 0 and 2 never entered gr_comm_split" sh -c "
  for r in 0 2; do $(command -v awk) '\$1 == \"creating\" && \$2 == \"gr_comm_split\" { ok = 1 } END { exit !ok }' '$jobdir/live.'\$r || exit 1; done"
wait_for "the view never named rank 1 as stopped inside gr_comm_split" \
  view_says 'WAITING FOR rank 1: ranks 0,2 in gr_comm_split \(split\) on world\[0\.1\] for [0-9.]+ s; rank 1 \(pid [0-9]+\) is STOPPED, in gr_comm_split \(split\) on world\[0\.1\]'
cat "$tmp/once"
grep -qE '^! +1 ' "$tmp/once" || fail "rank 1's row is not marked"
[ "$(grep -cE '^! ' "$tmp/once")" = 1 ] || fail "more than one rank marked"
kill -CONT "$pid"
stopped=
end_job split

# 3. rank 0 late into gr_init: the live state starts before the first creation waits
start_job init init 0 late
wait_for "ranks 1 and 2 never showed gr_comm_create in their live files (inside gr_init)" \
  sh -c "$(command -v awk) '\$1 == \"creating\" && \$2 == \"gr_comm_create\" { n++ } END { exit n != 2 }' '$jobdir/live.1' '$jobdir/live.2' 2>/dev/null"
[ -f "$jobdir/live.0" ] && fail "rank 0 published before the test let it into gr_init"
wait_for "the view never named rank 0 as the rank ranks 1-2 wait for in gr_init's gr_comm_create" \
  view_says 'WAITING FOR rank 0: ranks 1-2 in gr_comm_create \(dup\) on world for [0-9.]+ s; rank 0 never published its state'
cat "$tmp/once"
end_job init
echo PASS
