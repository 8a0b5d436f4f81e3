#!/bin/sh
# The supervised program keeps its place (issue 37): gpurun --monitor execs the program, so it has
# the pid of the gpurun its launcher started; under mpirun a rank that kills itself with SIGKILL is
# reported by mpirun as "signal 9" (it said "Exit code: 137" while the supervisor was the process
# mpirun started), its end record says so and gpurun-report names it as the rank that ended first.
# usage: test_keeps_place.sh MPI_LAUNCH GPURUN GPURUN_REPORT
set -u
mpirun=$1 gpurun=$2 report=$3
tmp=$(mktemp -d /tmp/gr_keeps_place.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
export GPURUN_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1
unset GPURUN_MONITOR GPURUN_TIME_LIMIT GPURUN_JOB_ID

# 1. The pid: the program's $$ is the pid of the gpurun this shell started.
GPURUN_MONITOR_DIR=$tmp/m1 "$gpurun" --monitor=0.1 -- sh -c 'echo $$' > "$tmp/pid.txt" &
gp=$!
wait $gp || fail "gpurun --monitor exited $?"
[ "$(cat "$tmp/pid.txt")" = "$gp" ] || fail "the program's pid $(cat "$tmp/pid.txt") is not gpurun's $gp"
echo "pid kept: $gp"

# 2. mpirun -np 2, rank 1 kills itself with SIGKILL.
body='if [ "${OMPI_COMM_WORLD_RANK:-$PMI_RANK}" = 1 ]; then sleep 0.3; kill -KILL $$; fi; sleep 3'
GPURUN_MONITOR_DIR=$tmp/m2 GPURUN_JOB_ID=kp timeout -k 5 60 "$mpirun" -np 2 --oversubscribe \
  "$gpurun" --monitor=0.1 sh -c "$body" > "$tmp/out.txt" 2>&1
rc=$?
cat "$tmp/out.txt"
echo "mpirun exit status: $rc"
[ $rc -ne 0 ] || fail "mpirun exited 0 though a rank was killed"
[ $rc -ne 124 ] || fail "the job hung (timeout(1) ended it)"  # (mpirun itself exits 137 here)
if grep -q "Open MPI\|ORTE\|mpirun" "$tmp/out.txt"; then
  grep -Eq "signal 9|Killed" "$tmp/out.txt" || fail "mpirun's output does not name signal 9"
  grep -q "Exit code: *137" "$tmp/out.txt" && fail "mpirun saw exit code 137, not the signal"
else
  grep -Eq "signal 9|KILLED BY SIGNAL: 9|Killed" "$tmp/out.txt" || fail "the launcher's output does not name signal 9"
fi
host=$(hostname | tr -c 'A-Za-z0-9._+@\n-' '_')
end=$tmp/m2/kp/$host.1.end.json
i=0
while [ ! -s "$end" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
[ -s "$end" ] || fail "no end record for local rank 1"
cat "$end"
# the launcher may reap the rank before its supervisor reads the status: then "unseen"
grep -Eq '"how": "(signal", "exit_code": null, "signal": 9,|unseen")' "$end" || fail "the end record says neither signal 9 nor unseen"
"$report" "$tmp/m2/kp" > "$tmp/report.txt" || fail "gpurun-report exited $?"
cat "$tmp/report.txt"
grep -q '^ended first: rank 1 ' "$tmp/report.txt" || fail "the report does not name rank 1 as the first to end"
if grep -q '"signal": 9' "$end"; then
  grep -q '^rank 1 (.*:1) killed by signal 9 (SIGKILL)' "$tmp/report.txt" || fail "the report has no line for rank 1's SIGKILL"
fi
echo PASS
