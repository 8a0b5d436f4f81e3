#!/bin/bash
# A stopped rank under the real benchmark: uts T1XL (far too big to finish) at 3 ranks with GPURUN_TIMEOUT=T; after
# 2 s rank 1 is SIGSTOPped. Ranks 0 and 2 must report "rank 1 did not answer within T s" and the
# job end (uts calls MPI_Abort on an error, which also takes the stopped rank down) within
# T x 1.25 plus a generous margin, not hang.
#   uts_stop.sh MPIEXEC UTS [T]
set -u
MPIEXEC=$1 UTS=$2 T=${3:-3}
out=$(mktemp) || exit 1
trap 'rm -f "$out"' EXIT
GPURUN_TIMEOUT=$T "$MPIEXEC" -np 3 --oversubscribe "$UTS" T1XL >"$out" 2>&1 &
mp=$!
# Only this job's processes: the launcher's descendants (Open MPI's mpirun starts the ranks itself,
# Hydra's mpiexec through a hydra_pmi_proxy), told apart by their world rank.
r1=
for _ in $(seq 1 100); do
  sleep 0.1
  # field 4 of /proc/PID/stat is the parent (after the command name in parentheses)
  for p in $(for st in /proc/[0-9]*/stat; do
               read -r line <"$st" 2>/dev/null || continue
               rest=${line##*) }
               set -- $rest
               p=${st#/proc/}
               echo "${p%/stat} $2"
             done | awk -v top="$mp" '{ par[$1] = $2 }
               END { d[top] = 1
                     for (k = 0; k < 4; k++) for (p in par) if (par[p] in d) d[p] = 1
                     for (p in d) if (p != top) print p }'); do
    r=$(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | sed -n 's/^OMPI_COMM_WORLD_RANK=//p; s/^PMI_RANK=//p' | head -n1)
    [ "$r" = 1 ] && r1=$p
  done
  [ -n "$r1" ] && break
done
if [ -z "$r1" ]; then echo "FAIL: rank 1 of uts not found among the launcher's descendants"; kill "$mp"; exit 1; fi
sleep 2
kill -STOP "$r1"
t0=$(date +%s.%N)
# Watchdog: the old code never returns; then kill the job (SIGKILL works on the stopped rank).
end=$((SECONDS + T * 4 + 30))
while kill -0 "$mp" 2>/dev/null && [ "$SECONDS" -lt "$end" ]; do sleep 0.1; done
t1=$(date +%s.%N)
if kill -0 "$mp" 2>/dev/null; then
  echo "HANG: the job still runs $((T * 4 + 30)) s after the stop"
  kill -KILL "$r1" 2>/dev/null
  kill "$mp" 2>/dev/null
fi
wait "$mp"
rc=$?
dt=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
cat "$out"
echo "the launcher exited with $rc, $dt s after rank 1 was stopped (timeout $T s)"
grep -q "rank 1 did not answer within $T s" "$out" || { echo "FAIL: no rank named rank 1"; exit 1; }
[ "$rc" -ne 0 ] || { echo "FAIL: the job succeeded?"; exit 1; }
if ! awk -v d="$dt" -v t="$T" 'BEGIN { exit !(d >= t && d <= t * 1.25 + 20) }'; then
  echo "FAIL: ended $dt s after the stop, outside [$T, $T x 1.25 + 20]"
  exit 1
fi
echo "PASS"
