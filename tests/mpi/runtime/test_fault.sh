#!/bin/sh
# A rank missing from a collective ends the job with a clear message and a non-zero status, never a
# hang; for the hung-rank case gpurun-report names the rank from the flight-recorder dumps.
# usage: test_fault.sh MPI_LAUNCH TEST_FAULT GPURUN_REPORT (tests/lib/mpi-launch)
set -u
mpirun=$1 prog=$2 report=$3
tmp=$(mktemp -d /tmp/gr_fault.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
export GPURUN_MONITOR_DIR="$tmp" GPURUN_TIMEOUT=1 GPURUN_JOB_ID=fault

# Backstop against a hang inside this script: 60 s (ctest's TIMEOUT is the outer one).
timeout -k 5 60 "$mpirun" -np 3 --oversubscribe "$prog" hang > "$tmp/hang.out" 2>&1
rc=$?
hang_rc=$rc
cat "$tmp/hang.out"
[ $rc -ne 124 ] && [ $rc -ne 137 ] || fail "hang: the job hung (timeout(1) ended it)"
[ $rc -ne 0 ] || fail "hang: the job exited 0"
grep -q 'allreduce #2 returned GR_ERR_TIMEOUT' "$tmp/hang.out" || fail "hang: no GR_ERR_TIMEOUT reported"
grep -q 'did not complete within 1 s' "$tmp/hang.out" || fail "hang: the message does not say what timed out"
grep -q 'barrier afterwards returned GR_ERR_ABORTED' "$tmp/hang.out" || fail "hang: no GR_ERR_ABORTED afterwards"
ls "$tmp/fault"
test -s "$tmp/fault/flight.0.json" && test -s "$tmp/fault/flight.1.json" || fail "hang: flight dumps missing"
"$report" "$tmp/fault" > "$tmp/report.out" || fail "gpurun-report exited $?"
cat "$tmp/report.out"
# Ranks 0 and 1 wait in allreduce #2; rank 2 (hung, no dump) never entered it.
grep -q 'comm world\[0.1\] (mpi): rank(s) 0,1 wait in allreduce #2 (count 1 float64); no dump from rank(s) 2' "$tmp/report.out" \
  || fail "report does not name rank 2"

# A wait-for chain through point-to-point calls. Rank 0 waits on 1, 1 on 2, and rank 2
# is stopped (SIGSTOP) and leaves no dump; the report must follow the chain, not say rank 0 "never entered".
GPURUN_JOB_ID=chain timeout -k 5 60 "$mpirun" -np 3 --oversubscribe "$prog" chain > "$tmp/chain.out" 2>&1
rc=$?
cat "$tmp/chain.out"
[ $rc -ne 124 ] && [ $rc -ne 137 ] || fail "chain: the job hung (timeout(1) ended it)"
grep -q 'rank 0: recv from rank 1 returned GR_ERR_TIMEOUT' "$tmp/chain.out" || fail "chain: rank 0 did not time out"
test -s "$tmp/chain/flight.0.json" && test -s "$tmp/chain/flight.1.json" || fail "chain: flight dumps missing"
"$report" "$tmp/chain" > "$tmp/chain.report" || fail "gpurun-report (chain) exited $?"
cat "$tmp/chain.report"
grep -q 'chain: 0 -> 1 -> 2: rank 2 left no dump' "$tmp/chain.report" || fail "chain: the report does not follow 0 -> 1 -> 2"
grep -q 'NEVER ENTERED' "$tmp/chain.report" && fail "chain: the report still blames a waiting rank"

# The dying rank's own call must not time out before SIGALRM ends it at 1 s.
GPURUN_TIMEOUT=5 timeout -k 5 60 "$mpirun" -np 3 --oversubscribe "$prog" die > "$tmp/die.out" 2>&1
rc=$?
cat "$tmp/die.out"
[ $rc -ne 124 ] && [ $rc -ne 137 ] || fail "die: the job hung (timeout(1) ended it)"
[ $rc -ne 0 ] || fail "die: the job exited 0"
case ${GPURUN_TEST_MPI_FAMILY:-openmpi} in
  mpich)
    # Hydra ends the others (SIGKILL) as soon as rank 2 dies and its summary names the exit of
    # whichever process it reports ("Terminated (signal 15)", "EXIT CODE: 9"), not rank 2's SIGALRM:
    # the launcher's word here is only that a rank terminated badly.
    grep -q 'BAD TERMINATION' "$tmp/die.out" || fail "die: mpiexec does not report a bad termination" ;;
  *) grep -q 'signal 14' "$tmp/die.out" || fail "die: mpirun does not say rank 2 died of SIGALRM" ;;
esac
grep -q 'rank 2.*GR_ERR_TIMEOUT' "$tmp/die.out" && fail "die: rank 2's own call timed out before SIGALRM ended it"
echo "PASS (hang: exit $hang_rc, die: exit $rc)"
