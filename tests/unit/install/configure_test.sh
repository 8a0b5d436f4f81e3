#!/bin/sh
# configure_test.sh SOURCE_DIR: the CUDA/NCCL options behave as documented.
#  - GPURUN_WITH_NCCL=ON where NCCL cannot be found: configure fails with a sentence naming NCCL
#    and how to point at it (NCCL_ROOT / NCCL_HOME).
#  - GPURUN_WITH_NCCL=AUTO in the same situation: configure succeeds, NCCL off in the summary.
#  - GPURUN_WITH_NCCL=ON with GPURUN_WITH_CUDA=OFF: a sentence saying NCCL needs CUDA.
# "Cannot be found" is simulated by pointing NCCL's cache variables at a directory without NCCL,
# exactly what a user with a wrong NCCL_ROOT gets.
set -u
src=$1
work=$(mktemp -d /tmp/gpurun-configure.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
nonccl="-DNCCL_INCLUDE_DIR=$work/none/include -DNCCL_LIBRARY=$work/none/lib/libnccl.so"
common="-DBUILD_TESTING=OFF -DGPURUN_BUILD_BENCH=OFF -DGPURUN_BUILD_EXAMPLES=OFF"

# shellcheck disable=SC2086
if cmake -S "$src" -B "$work/on" $common -DGPURUN_WITH_NCCL=ON $nonccl >"$work/on.log" 2>&1; then
  fail "GPURUN_WITH_NCCL=ON without NCCL configured successfully"
fi
grep -q "GPURUN_WITH_NCCL=ON but" "$work/on.log" || { cat "$work/on.log"; fail "no sentence about NCCL"; }
grep -q "NCCL_ROOT" "$work/on.log" || fail "the sentence does not say how to point at NCCL"
echo "ON without NCCL: $(grep -A1 'GPURUN_WITH_NCCL=ON but' "$work/on.log" | tr -s ' ' | head -2 | tr '\n' ' ')"

# shellcheck disable=SC2086
cmake -S "$src" -B "$work/auto" $common -DGPURUN_WITH_NCCL=AUTO $nonccl >"$work/auto.log" 2>&1 \
  || { cat "$work/auto.log"; fail "AUTO without NCCL failed to configure"; }
grep -q "NCCL *: off" "$work/auto.log" || { cat "$work/auto.log"; fail "AUTO summary does not say NCCL off"; }
echo "AUTO without NCCL: $(grep 'NCCL *:' "$work/auto.log")"

# shellcheck disable=SC2086
if cmake -S "$src" -B "$work/nocuda" $common -DGPURUN_WITH_CUDA=OFF -DGPURUN_WITH_NCCL=ON >"$work/nocuda.log" 2>&1; then
  fail "NCCL=ON with CUDA=OFF configured successfully"
fi
grep -q "needs CUDA" "$work/nocuda.log" || { cat "$work/nocuda.log"; fail "no sentence about CUDA"; }
echo "configure options: all three cases behave as documented"
