#!/bin/sh
# gpurun-top in a real terminal (tmux, 80x24) against a real 4-rank job: while rank 2 is stopped
# with SIGSTOP and the job hangs, the view must name rank 2 as the rank the others wait for; q
# quits; --once prints the same; a short terminal scrolls. Then the job is resumed and must end
# well. The stopped rank is chosen here, which is the independent answer.
# usage: test_top_tmux.sh MPIRUN GPURUN LIVE_LOOP GPURUN_TOP
set -u
mpirun=$1 gpurun=$2 prog=$3 top=$4
tmp=$(mktemp -d /tmp/gr_top.XXXXXX)
sess=grtop$$
job_pid=
stopped=
cleanup() {
  [ -n "$stopped" ] && kill -CONT "$stopped" 2>/dev/null
  tmux kill-session -t "$sess" 2>/dev/null
  tmux kill-session -t "${sess}s" 2>/dev/null
  touch "$tmp/stop"
  [ -n "$job_pid" ] && { sleep 2; kill "$job_pid" 2>/dev/null; wait "$job_pid" 2>/dev/null; }
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; [ -f "$tmp/screen" ] && cat "$tmp/screen" >&2; exit 1; }

GPURUN_MONITOR_DIR="$tmp/mon" GPURUN_JOB_ID=topjob timeout -k 5 100 "$mpirun" -np 4 --oversubscribe \
  "$gpurun" --monitor=0.5 "$prog" "$tmp/stop" > "$tmp/job.out" 2>&1 &
job_pid=$!
jobdir="$tmp/mon/topjob"
i=0
until [ -f "$jobdir/live.0" ] && [ -f "$jobdir/live.1" ] && [ -f "$jobdir/live.2" ] && [ -f "$jobdir/live.3" ]; do
  i=$((i + 1)); [ $i -lt 300 ] || fail "no live files after 30 s: $(cat "$tmp/job.out")"
  sleep 0.1
done

screen() { tmux capture-pane -p -t "$1" > "$tmp/screen"; }
# --hang 3: on a loaded machine (the sanitizer build, 4 ranks on 2 cores) an allreduce of ranks
# that all run can take over a second; a stopped rank is still named within a few seconds.
tmux new-session -d -s "$sess" -x 80 -y 24 "$top --interval 0.5 --hang 3 '$tmp/mon'"
i=0
until screen "$sess" && grep -q '^ RANK HOST' "$tmp/screen" && [ "$(grep -cE '^[ !] +[0-3] ' "$tmp/screen")" = 4 ]; do
  i=$((i + 1)); [ $i -lt 100 ] || fail "the view never showed 4 ranks"
  sleep 0.1
done
grep -q 'job topjob  4 ranks (4 live)' "$tmp/screen" || fail "header does not say 4 live ranks of job topjob"
# Before any rank is stopped the view must (soon) show no hang; a slow moment may show one briefly.
i=0
while screen "$sess" && grep -q 'WAITING FOR' "$tmp/screen"; do
  i=$((i + 1)); [ $i -lt 50 ] || fail "names a rank for 5 s before any is stopped"
  sleep 0.1
done

# Stop rank 2 only once every rank is in its loop (each live file shows an allreduce): stopped
# inside gr_comm_create, the others would wait in the creation (test_top_create covers that).
in_loop() { awk '$1 == "comm" && $7 == "allreduce" { ok = 1 } END { exit !ok }' "$jobdir/live.$1"; }
i=0
until in_loop 0 && in_loop 1 && in_loop 2 && in_loop 3; do
  i=$((i + 1)); [ $i -lt 300 ] || fail "the ranks never reached their allreduce loop"
  sleep 0.1
done
pid=$(awk '$1 == "pid" { print $2 }' "$jobdir/live.2")
[ -n "$pid" ] && kill -0 "$pid" || fail "no pid in live.2"
kill -STOP "$pid" && stopped=$pid
i=0
until screen "$sess" && grep -q 'WAITING FOR rank 2: ranks 0-1,3 in allreduce #[0-9]* on world' "$tmp/screen"; do
  i=$((i + 1)); [ $i -lt 200 ] || fail "the view never named rank 2 while it was stopped"
  sleep 0.1
done
kill -0 "$job_pid" || fail "the job ended: the view must name the rank while it hangs"
cat "$tmp/screen"
tr '\n' ' ' < "$tmp/screen" | grep -q 'rank 2 (pid [0-9]*) is STOPPED' || fail "the stopped rank is not said to be stopped"
grep -qE '^! +2 ' "$tmp/screen" || fail "rank 2's row is not marked"
[ "$(grep -cE '^! ' "$tmp/screen")" = 1 ] || fail "more than one rank marked"
awk 'length($0) > 80 { bad = 1 } END { exit bad }' "$tmp/screen" || fail "a line is wider than 80 columns"

"$top" --once --hang 3 "$jobdir" > "$tmp/once" || fail "--once exited $?"
grep -q 'WAITING FOR rank 2: ' "$tmp/once" || { cat "$tmp/once"; fail "--once does not name rank 2"; }
awk 'length($0) > 80 { bad = 1 } END { exit bad }' "$tmp/once" || fail "--once: a line is wider than 80"

# A terminal of 8 lines shows 2 rows at a time and scrolls with j.
tmux new-session -d -s "${sess}s" -x 80 -y 8 "$top --interval 0.5 '$jobdir'"
i=0
until screen "${sess}s" && grep -q 'rows 1-2 of 4' "$tmp/screen"; do
  i=$((i + 1)); [ $i -lt 100 ] || fail "short terminal: no 'rows 1-2 of 4'"
  sleep 0.1
done
tmux send-keys -t "${sess}s" j
i=0
until screen "${sess}s" && grep -q 'rows 2-3 of 4' "$tmp/screen"; do
  i=$((i + 1)); [ $i -lt 100 ] || fail "short terminal: j did not scroll"
  sleep 0.1
done
tmux send-keys -t "${sess}s" q

tmux send-keys -t "$sess" q
i=0
while tmux has-session -t "$sess" 2>/dev/null; do
  i=$((i + 1)); [ $i -lt 50 ] || fail "q did not quit gpurun-top"
  sleep 0.1
done

kill -CONT "$pid"
stopped=
touch "$tmp/stop"
wait "$job_pid"
rc=$?
job_pid=
cat "$tmp/job.out"
[ $rc -eq 0 ] || fail "the job exited $rc after rank 2 was resumed"
grep -q 'live_loop: [0-9]* steps on 4 ranks' "$tmp/job.out" || fail "the job did not finish its loop"
grep -q '^state exited' "$jobdir/live.0" || fail "live.0 does not say the rank exited"
echo PASS
