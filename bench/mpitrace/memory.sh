#!/bin/sh
# The MPI layer's memory per rank, side by side in one run: mem_probe (COMMS communicators, CALLS
# rounds of calls on each, 2 ranks) under gpurun --monitor --trace=none and under gpurun
# --monitor (which preloads the layer and records into the flight recorder and live state),
# alternating, ROUNDS times each. Each rank prints its anonymous memory and heap in use before
# MPI_Finalize; the layer's share is traced minus untraced, per rank. Prints one line per run and
# the medians with their range; bench/README.md, "MPI layer", quotes them.
# usage: bench/mpitrace/memory.sh [BUILD [ROUNDS [COMMS [CALLS]]]]
set -u
b=${1:-build} rounds=${2:-5} comms=${3:-8} calls=${4:-3000}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tmp=$(mktemp -d /tmp/gr_layer_mem.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
echo "== mem_probe, 2 ranks, $comms communicators, $calls rounds each, $rounds runs per mode (KiB per rank)"
i=0
while [ $i -lt "$rounds" ]; do
  for mode in untraced traced; do
    t=--trace=mpi
    [ $mode = untraced ] && t=--trace=none
    GPURUN_MONITOR_DIR=$tmp/mon mpirun -np 2 --oversubscribe -x GPURUN_MONITOR_DIR \
      "$b/launcher/gpurun" --monitor $t "$b/bench/mpitrace/mem_probe" "$comms" "$calls" \
      > "$tmp/out" 2>&1 || { cat "$tmp/out"; exit 1; }
    awk -v m=$mode '$1 == "mem" { printf "%s rank %s anon %s heap %s\n", m, $2, $3, $4 }' \
      "$tmp/out" | tee -a "$tmp/all"
  done
  i=$((i + 1))
done
# per rank: the median of each mode's runs, and traced minus untraced
for r in 0 1; do
  awk -v r=$r '$3 == r { n[$1]++; a[$1, n[$1]] = $5; h[$1, n[$1]] = $7 }
    function med(arr, m, k,   i, j, t, v) { for (i = 1; i <= k; i++) v[i] = arr[m, i]
      for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
      return sprintf("%d (%d-%d)", v[int((k + 1) / 2)], v[1], v[k]) }
    END { printf "rank %d, median (range) of %d runs: untraced anon %s heap %s; traced anon %s heap %s; ", r, n["traced"],
            med(a, "untraced", n["untraced"]), med(h, "untraced", n["untraced"]), med(a, "traced", n["traced"]), med(h, "traced", n["traced"])
          split(med(a, "traced", n["traced"]), x, " "); split(med(a, "untraced", n["untraced"]), y, " ")
          split(med(h, "traced", n["traced"]), p, " "); split(med(h, "untraced", n["untraced"]), q, " ")
          printf "the layer: anon %+d KiB, heap %+d KiB\n", x[1] - y[1], p[1] - q[1] }' "$tmp/all"
done
