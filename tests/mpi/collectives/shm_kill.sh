#!/bin/sh
# shm_kill.sh MPIEXEC EXE VICTIM [MODE]: 3 ranks, VICTIM SIGKILLed inside a shared-memory allreduce
# (MODE is passed on to EXE: test_coll_shm_kill's recv, the victim dies between calls and the
# survivors wait in gr_recv from it, or mem, the allreduce runs direct in gr_mem_alloc memory; the
# request tests' own modes); both survivors must report
# SURVIVOR OK (GR_ERR_TIMEOUT naming the victim as gone), and /dev/shm must hold no gpurun segment
# afterwards.
set -u
mpiexec=$1 exe=$2 victim=$3 mode=${4:-}
before=$(ls /dev/shm | grep '^gpurun-coll-')
out=$(mktemp /tmp/gr_shm_kill.XXXXXX)
trap 'rm -f "$out"' EXIT
# mpirun's exit status is not the verdict (a rank was killed); the survivors' lines are. With a dead
# rank, Open MPI's recovery mode has been seen to linger (in MPI_Finalize) after the survivors
# reported, now and then: mpirun normally ends well under a second after the second line, so it
# gets 5 s from there (the survivors destroy their communicator right after their line, so their
# segments are gone by then) and is then stopped; 30 s bound it all.
timeout -k 5 30 "$mpiexec" -np 3 --oversubscribe --enable-recovery "$exe" "$victim" $mode \
  > "$out" 2>&1 &
job=$!
grace=0
while kill -0 "$job" 2> /dev/null; do
  if [ "$(grep -c '^rank [0-9]*: \(SURVIVOR OK\|FAIL\) after' "$out")" -ge 2 ]; then
    grace=$((grace + 1))
    [ "$grace" -gt 50 ] && { kill -TERM "$job" 2> /dev/null; break; }
  fi
  sleep 0.1
done
wait "$job"
[ "$grace" -gt 50 ] && echo "(mpirun still running 5 s after both survivors reported: stopped)"
cat "$out"
ok=$(grep -c 'SURVIVOR OK' "$out")
# A segment left behind is one that appeared during the job and whose creator (rank 0 of its
# communicator: gpurun-coll-PID-NONCE) is gone; one of a live process belongs to a test running
# beside this one (ctest -j).
leaked=
for f in $(ls /dev/shm | grep '^gpurun-coll-'); do
  case "
$before
" in *"
$f
"*) continue ;; esac
  pid=$(echo "$f" | sed -n 's/^gpurun-coll-\([0-9]*\)-.*/\1/p')
  [ -n "$pid" ] && kill -0 "$pid" 2> /dev/null && continue
  leaked="$leaked $f"
done
[ "$ok" = 2 ] || { echo "FAIL: $ok of 2 survivors reported the timeout correctly"; exit 1; }
[ -z "$leaked" ] || { echo "FAIL: /dev/shm gained a gpurun-coll segment of a process that is gone:$leaked"; exit 1; }
echo "PASS"
