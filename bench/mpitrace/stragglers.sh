#!/bin/sh
# Straggler trials: LAMMPS's melt under gpurun --monitor (the MPI layer records it) with one rank,
# chosen at random, slowed; then gpurun-report's "slowest rank:" line must name that rank (the
# rank the others waited for in MPI where it stands out, else the monitor's evidence joined with
# it; the "waited for:" line of the MPI statistics alone is printed beside it). RUNS runs at each
# rank count. How the rank is slowed (SLOW, the environment):
#   throttle  a stop/continue throttle: stopped 20 ms of every 50 ms (the default)
#   hog       a busy loop bound to the rank's core (its Cpus_allowed_list): the rank gets half of
#             it. Where ranks share cores (4 ranks on 2), the hog slows every rank on that core,
#             and naming any of them counts.
# Prints one line per run and "stragglers: NP ranks: N of M named" per rank count; exits 1 when
# one is missed. bench/README.md, "MPI layer", quotes it.
# usage: [SLOW=throttle|hog] [NPS="2 4"] bench/mpitrace/stragglers.sh [BUILD [RUNS [STEPS [SEED]]]]
set -u
b=${1:-build} runs=${2:-10} steps=${3:-3000} seed=${4:-$$}
here=$(cd "$(dirname "$0")" && pwd)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tmp=$(mktemp -d /tmp/gr_stragglers.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
export GPURUN_MONITOR_DIR=$tmp/mon
rnd() {
  seed=$(( (seed * 1103515245 + 12345) % 2147483648 ))
  R=$(( (seed / 65536) % $1 ))
}
missed=0
for np in ${NPS:-2 4}; do
  named=0 i=0
  while [ $i -lt "$runs" ]; do
    rnd $np; slow=$R
    id=s$np.$i
    mpirun -np $np --oversubscribe -x GPURUN_MONITOR_DIR -x GPURUN_JOB_ID=$id \
      "$b/launcher/gpurun" --monitor=0.5 lmp -in "$here/../../docs/guide/files/in.melt" \
      -var steps "$steps" -log none -screen none > "$tmp/out" 2>&1 &
    job=$!
    until [ -f "$tmp/mon/$id/live.$slow" ] && grep -q MPI_ "$tmp/mon/$id/live.$slow"; do sleep 0.05; done
    pid=$(awk '$1 == "pid" { print $2 }' "$tmp/mon/$id/live.$slow")
    ok=" $slow "
    if [ "${SLOW:-throttle}" = hog ]; then
      cpus=$(awk '/^Cpus_allowed_list/ { print $2 }' "/proc/$pid/status")
      # the ranks bound to the same cores are slowed too
      for r in $(seq 0 $((np - 1))); do
        p=$(awk '$1 == "pid" { print $2 }' "$tmp/mon/$id/live.$r" 2>/dev/null)
        [ -n "$p" ] && [ "$(awk '/^Cpus_allowed_list/ { print $2 }' "/proc/$p/status" 2>/dev/null)" = "$cpus" ] &&
          ok="$ok$r "
      done
      taskset -c "$cpus" sh -c 'while :; do :; done' &
    else
      (while kill -STOP "$pid" 2>/dev/null; do sleep 0.02; kill -CONT "$pid" 2>/dev/null; sleep 0.03; done) &
    fi
    thr=$!
    wait $job
    kill $thr 2>/dev/null
    wait $thr 2>/dev/null
    "$b/tools/report/gpurun-report" "$tmp/mon/$id" > "$tmp/report" 2>&1
    line="$(grep -m 1 "^slowest rank:" "$tmp/report") |$(grep -m 1 "waited for:" "$tmp/report")"
    got=$(sed -n 's/^slowest rank: \([0-9]*\) .*/\1/p' "$tmp/report" | head -1)
    if [ -n "$got" ] && echo "$ok" | grep -q " $got "; then named=$((named + 1)); mark=named
    else missed=$((missed + 1)); mark=MISSED; fi
    echo "np $np run $i slow rank $slow (slowed:$ok): $mark:$line"
    i=$((i + 1))
  done
  echo "stragglers: $np ranks: $named of $runs named"
done
[ $missed = 0 ]
