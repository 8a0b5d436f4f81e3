#!/bin/sh
# OSU-style tables of the node-local shared-memory path against raw Open MPI:
# REPEATS runs of gpurun-bench-coll --compare for each case, the cases interleaved (repeat-major),
# each run itself alternating gpurun and raw MPI round by round. Per size: the median over the
# repeats of each run's median round (raw MPI, gpurun), the median of the runs' ratios, and their
# spread (min-max of the ratios). Every run's full output is kept in OUT.
#   bench/coll/shm_table.sh BENCH OUT [REPEATS]
# Cases: allreduce, allgather, reduce_scatter at 2 ranks; allreduce at 4 ranks (on a machine with
# fewer than 4 cores that is oversubscribed, and the table says so). All with a timeout (60 s), the
# production setting. MPIRUN (default mpirun) and EXTRA (more bench options) may be set.
set -eu
bench=$1
out=$2
reps=${3:-3}
mpirun=${MPIRUN:-mpirun}
mkdir -p "$out"
cases="allreduce:2 allgather:2 reduce_scatter:2 allreduce:4"
common="-b 8 -e 16M -f 4 -R 9 -w 5 --compare --timeout 60 ${EXTRA:-}"
r=1
while [ "$r" -le "$reps" ]; do
  for c in $cases; do
    op=${c%:*} np=${c#*:}
    iters=20
    [ "$np" -gt 2 ] && iters=10
    f="$out/$op.np$np.rep$r.txt"
    echo "== repeat $r: $op, $np ranks ($(uptime | sed 's/.*load/load/'))" >&2
    { echo "# $(uptime)"; echo "# $mpirun -np $np --oversubscribe $bench -o $op $common -n $iters";
      $mpirun -np "$np" --oversubscribe "$bench" -o "$op" $common -n "$iters"; } >"$f"
  done
  r=$((r + 1))
done
cores=$(nproc 2>/dev/null || echo '?')
for c in $cases; do
  op=${c%:*} np=${c#*:}
  over=""
  [ "$cores" != "?" ] && [ "$np" -gt "$cores" ] && over=" (oversubscribed: $np ranks on $cores cores)"
  echo "# $op, $np ranks$over, $reps repeats: median over repeats; ratio = gpurun / raw MPI"
  printf '%12s %12s %12s %8s %17s %6s\n' "size(B)" "raw MPI(us)" "gpurun(us)" "ratio" "spread" "wrong"
  # columns of gpurun-bench-coll: 1 size, 6 time(us), 9/13 #wrong, 17 mpi(us), 18 ratio
  cat "$out/$op.np$np".rep*.txt | awk '
    /^#/ { next }
    { n[$1]++; g[$1, n[$1]] = $6; m[$1, n[$1]] = $17; q[$1, n[$1]] = $18; w[$1] += $9 + $13
      if (!($1 in seen)) { seen[$1] = 1; order[++k] = $1 } }
    function med(a, s, c,   i, j, t, v) {
      for (i = 1; i <= c; i++) v[i] = a[s, i]
      for (i = 1; i <= c; i++) for (j = i + 1; j <= c; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
      return c % 2 ? v[(c + 1) / 2] : (v[c / 2] + v[c / 2 + 1]) / 2 }
    END {
      for (i = 1; i <= k; i++) {
        s = order[i]; c = n[s]; lo = hi = q[s, 1]
        for (j = 2; j <= c; j++) { if (q[s, j] < lo) lo = q[s, j]; if (q[s, j] > hi) hi = q[s, j] }
        printf "%12s %12.2f %12.2f %8.3f %8.3f-%-8.3f %6d\n", s, med(m, s, c), med(g, s, c), med(q, s, c), lo, hi, w[s]
      }
    }'
  echo
done
