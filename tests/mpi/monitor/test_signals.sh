#!/bin/sh
# SIGTERM to mpirun reaches the program on every rank (a supervised program is the process mpirun
# started: nothing is forwarded), and the monitor CSVs hold only whole lines afterwards.
# usage: test_signals.sh MPI_LAUNCH MONITOR_WRAP (the world rank: Open MPI's or Hydra's variable)
set -u
mpirun=$1 wrap=$2
tmp=$(mktemp -d /tmp/gr_signals.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
body='trap "echo term > '"$tmp"'/term.${OMPI_COMM_WORLD_RANK:-$PMI_RANK}; exit 0" TERM
touch '"$tmp"'/ready.${OMPI_COMM_WORLD_RANK:-$PMI_RANK}
while :; do sleep 0.05; done'
# Open MPI sends SIGKILL 1 s after SIGTERM by default; on a loaded CI machine a shell's trap can
# miss that, so the grace is widened (the forwarding itself is what is tested). mpirun waits
# the whole grace per rank even when the ranks are gone, so it stays short.
OMPI_MCA_odls_base_sigkill_timeout=3 "$mpirun" -np 2 --oversubscribe "$wrap" "$tmp" sig 0.05 sh -c "$body" > "$tmp/out.txt" 2>&1 &
mpid=$!
i=0
while [ ! -e "$tmp/ready.0" ] || [ ! -e "$tmp/ready.1" ]; do
  i=$((i + 1))
  [ $i -lt 600 ] || { kill -KILL $mpid; fail "the ranks never started"; }
  sleep 0.05
done
sleep 0.2   # let a few samples land
kill -TERM $mpid
wait $mpid
rc=$?
cat "$tmp/out.txt"
echo "mpirun exit status after SIGTERM: $rc"
for r in 0 1; do
  test -s "$tmp/term.$r" || fail "rank $r's program never saw SIGTERM"
done
for f in "$tmp"/sig/*.csv; do
  [ "$(tail -c 1 "$f" | od -An -c | tr -d ' ')" = '\n' ] || fail "$f ends mid-line"
  # every row has the header's columns (GR_MONITOR_CSV_FILE_HEADER: 23, cpu_steal the last)
  head -n 1 "$f" | grep -q ',cpu_steal$' || fail "$f: header $(head -n 1 "$f")"
  bad=$(awk -F, 'NR == 1 { n = NF } NF != n' "$f" | wc -l)
  [ "$bad" -eq 0 ] || fail "$f has $bad malformed lines"
  echo "$f: $(($(wc -l < "$f") - 1)) samples, all whole"
done
echo PASS
