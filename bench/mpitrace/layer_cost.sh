#!/bin/sh
# The MPI layer's cost, side by side in one run: bench_layer (an 8-byte MPI_Allreduce and a 0-byte
# ping-pong, 2 ranks) alternately plain and with libgpurun-mpi.so preloaded and recording (live
# state on, as under --monitor), ROUNDS times each; then LAMMPS's melt (4 ranks, STEPS steps)
# plain and under gpurun --monitor (which preloads the layer) against gpurun --monitor
# --trace=none, alternating, wall seconds as LAMMPS prints them ("Loop time"). Prints one line per
# run and the medians; bench/README.md, "MPI layer", quotes them.
# usage: bench/mpitrace/layer_cost.sh [BUILD [ROUNDS [STEPS]]]
set -u
b=${1:-build} rounds=${2:-5} steps=${3:-2000}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tmp=$(mktemp -d /tmp/gr_layer_cost.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
lib=$b/mpitrace/libgpurun-mpi.so
echo "== bench_layer, 2 ranks, $rounds rounds each, alternating (us per call: median of 21 blocks of 20000, min, max)"
i=0
while [ $i -lt "$rounds" ]; do
  for mode in plain layer; do
    if [ $mode = plain ]; then
      mpirun -np 2 --bind-to core "$b/bench/mpitrace/bench_layer" > "$tmp/out" 2>&1
    else
      mpirun -np 2 --bind-to core -x LD_PRELOAD="$lib" -x GPURUN_MONITOR_DIR="$tmp/mon" \
        -x GPURUN_JOB_ID=cost "$b/bench/mpitrace/bench_layer" > "$tmp/out" 2>&1
    fi
    echo "$mode $(tr '\n' ' ' < "$tmp/out")" | tee -a "$tmp/all"
  done
  i=$((i + 1))
done
# median of the runs' medians, per mode and column
med() { awk -v m="$1" -v c="$2" '$1 == m { print $c }' "$3" | sort -g | awk '{ v[NR] = $1 } END { printf "%.3f (min %.3f, max %.3f)", v[int((NR + 1) / 2)], v[1], v[NR] }'; }
for m in plain layer; do
  echo "median of $rounds runs: $m allreduce8 $(med $m 3 "$tmp/all") us, pingpong0 $(med $m 7 "$tmp/all") us"
done
command -v lmp > /dev/null || { echo "lmp not found: no LAMMPS rows"; exit 0; }
echo "== LAMMPS melt, 4 ranks, $steps steps, $rounds rounds each, alternating (Loop time, s)"
i=0
while [ $i -lt "$rounds" ]; do
  for mode in plain traced untraced; do
    case $mode in
      plain) set -- lmp ;;
      traced) set -- "$b/launcher/gpurun" --monitor lmp ;;
      untraced) set -- "$b/launcher/gpurun" --monitor --trace=none lmp ;;
    esac
    GPURUN_MONITOR_DIR=$tmp/mon mpirun -np 4 --oversubscribe -x GPURUN_MONITOR_DIR "$@" \
      -in "$(dirname "$0")/../../docs/guide/files/in.melt" -var steps "$steps" -log none > "$tmp/lmp" 2>&1
    echo "$mode $(awk '/^Loop time/ { print $4 }' "$tmp/lmp")" | tee -a "$tmp/lall"
  done
  i=$((i + 1))
done
for m in plain traced untraced; do
  echo "median of $rounds runs: $m $(med $m 2 "$tmp/lall") s"
done
