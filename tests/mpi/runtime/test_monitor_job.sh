#!/bin/sh
# A monitored 2-rank job end to end: supervisor per rank (CSV), gr_init/gr_finalize (counters), then
# gpurun-report shows both ranks with their time in collectives, and renders.
# usage: test_monitor_job.sh MPIRUN MONITOR_WRAP TEST_INIT GPURUN_REPORT
set -eu
mpirun=$1 wrap=$2 prog=$3 report=$4
tmp=$(mktemp -d /tmp/gr_monitor_job.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
"$mpirun" -np 2 --oversubscribe "$wrap" "$tmp" job42 0.05 "$prog" monitored || fail "job exited $?"
host=$(hostname)
ls -l "$tmp/job42"
for r in 0 1; do
  test -s "$tmp/job42/$host.$r.csv" || fail "no CSV for local rank $r"
  test -s "$tmp/job42/$host.$r.counters.json" || fail "no counters for local rank $r"
done
"$report" "$tmp/job42" > "$tmp/out.txt" || fail "gpurun-report exited $?"
cat "$tmp/out.txt"
# Both ranks have a row with a number in the collective-time column (not "-").
n=$(grep -cE "^ +[01] +$host:[01] .* [0-9]+\.[0-9]{3}( |$)" "$tmp/out.txt" || true)
[ "$n" = 2 ] || fail "expected 2 rows with collective times, got $n"
grep -q '^slowest rank: ' "$tmp/out.txt" || fail "no slowest rank"
echo PASS
