#!/bin/sh
# On a machine with a GPU: build with CUDA and NCCL forced on, run the gpu-labelled tests and the
# collective benchmark on the NCCL backend, and keep the outputs in ${OUT:-./gpu-out}.
#   tests/gpu/run-on-device.sh            (from the repository root; ~3-5 min on one GPU)
set -eu
cd "$(dirname "$0")/../.."
out=${OUT:-./gpu-out}
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
jobs=$(nproc 2>/dev/null || echo 4)
nvidia-smi -L > "$out/gpus.txt" 2>&1 || true
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DGPURUN_WITH_CUDA=ON -DGPURUN_WITH_NCCL=ON \
  > "$out/configure.log" 2>&1
cmake --build build-gpu -j "$jobs" > "$out/build.log" 2>&1
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
[ -n "$ngpu" ] || ngpu=0
status=0
ctest --test-dir build-gpu -L gpu --output-on-failure > "$out/ctest-gpu.log" 2>&1 || status=1
ctest --test-dir build-gpu -L collectives -LE gpu -j "$jobs" > "$out/ctest-collectives.log" 2>&1 || status=1
# One rank per GPU; with a single GPU the NCCL numbers are one-rank latencies (no wire).
np=$ngpu
[ "$np" -lt 1 ] && np=1
for op in allreduce broadcast allgather reduce_scatter alltoall; do
  mpirun -np "$np" build-gpu/bench/coll/gpurun-bench-coll --backend nccl -o "$op" -b 8 -e 256M -f 4 \
    -n 20 -w 5 -R 3 -c 1 --compare --json "$out/bench-nccl-$op.json" > "$out/bench-nccl-$op.txt" 2>&1 || status=1
done
mpirun -np 2 build-gpu/bench/coll/gpurun-bench-coll --backend mpi -b 8 -e 64M -f 8 --compare \
  > "$out/bench-mpi-allreduce.txt" 2>&1 || status=1
tail -n 3 "$out/ctest-gpu.log" "$out/ctest-collectives.log"
exit $status
