#!/bin/sh
# gpurun --monitor / --time-limit end to end: a 2-rank job through the real launcher, its CSVs and
# counters, gpurun-report over them, and the time limit's exit status.
# usage: test_gpurun_monitor.sh MPIRUN GPURUN TEST_INIT GPURUN_REPORT
set -u
mpirun=$1 gpurun=$2 prog=$3 report=$4
tmp=$(mktemp -d /tmp/gr_gpurun_monitor.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

GPURUN_MONITOR_DIR="$tmp/mon" timeout -k 5 60 "$mpirun" -np 2 --oversubscribe \
  "$gpurun" --monitor=0.05 --priority low "$prog" monitored || fail "monitored job exited $?"
set -- "$tmp"/mon/*
[ $# -eq 1 ] && [ -d "$1" ] || fail "expected one job directory under $tmp/mon, got: $*"
job=$1
ls -l "$job"
host=$(hostname)
for r in 0 1; do
  test -s "$job/$host.$r.csv" || fail "no CSV for local rank $r"
  test -s "$job/$host.$r.counters.json" || fail "no counters for local rank $r"
done
"$report" "$tmp/mon" > "$tmp/report.txt" || fail "gpurun-report exited $?"
cat "$tmp/report.txt"
n=$(grep -cE "^ +[01] +$host:[01] .* [0-9]+\.[0-9]{3}( |$)" "$tmp/report.txt" || true)
[ "$n" = 2 ] || fail "expected 2 rows with collective times, got $n"
grep -q '^slowest rank: ' "$tmp/report.txt" || fail "no slowest rank"
# --priority low reached each rank's counters (test_init checks the field) and the report
grep -qE '^priority low: ranks (0,1|1,0)$' "$tmp/report.txt" || fail "report shows no priority line"

timeout -k 5 60 "$gpurun" --time-limit 0.5 sleep 30 2> "$tmp/limit.err"
rc=$?
# the supervisor runs beside the program and says how it ended once it has seen it go: a moment
# after the program's status is back here (later under a sanitizer)
i=0
while [ $i -lt 100 ] && ! grep -q 'ended by the time limit' "$tmp/limit.err"; do
  i=$((i + 1))
  sleep 0.1
done
cat "$tmp/limit.err"
# the program's own status: sleep killed by the limit's SIGTERM (124 while the supervisor was its
# parent; now the program keeps gpurun's pid and the supervisor runs beside it)
[ $rc -eq 143 ] || fail "--time-limit: exit $rc, expected 143 (killed by SIGTERM)"
grep -q 'time limit of 0.5 s reached' "$tmp/limit.err" || fail "--time-limit: no message"
grep -q 'sleep (pid [0-9]*) ended by the time limit of 0.5 s' "$tmp/limit.err" || fail "--time-limit: no end line"
"$gpurun" --time-limit 30 sh -c 'exit 9'
rc=$?
[ $rc -eq 9 ] || fail "--time-limit: the program's own status 9 came back as $rc"
echo PASS
