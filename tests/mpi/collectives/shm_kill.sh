#!/bin/sh
# shm_kill.sh MPIEXEC EXE VICTIM [recv]: 3 ranks, VICTIM SIGKILLed inside a shared-memory allreduce
# (recv: between calls, the survivors then in gr_recv from it); both survivors must report
# SURVIVOR OK (GR_ERR_TIMEOUT naming the victim as gone), and /dev/shm must hold no gpurun segment
# afterwards.
set -u
mpiexec=$1 exe=$2 victim=$3 mode=${4:-}
before=$(ls /dev/shm | grep -c '^gpurun-coll-')
# mpirun's exit status is not the verdict (a rank was killed); the survivors' lines are. Bounded:
# with a dead rank, Open MPI's recovery mode has been seen to linger (in MPI_Finalize) after the survivors reported.
out=$(timeout -k 5 30 "$mpiexec" -np 3 --oversubscribe --enable-recovery "$exe" "$victim" $mode 2>&1)
echo "$out"
ok=$(echo "$out" | grep -c 'SURVIVOR OK')
after=$(ls /dev/shm | grep -c '^gpurun-coll-')
[ "$ok" = 2 ] || { echo "FAIL: $ok of 2 survivors reported the timeout correctly"; exit 1; }
[ "$after" -le "$before" ] || { echo "FAIL: /dev/shm gained a gpurun-coll segment: $(ls /dev/shm)"; exit 1; }
echo "PASS"
