#!/bin/sh
# mpi_family_test.sh BUILD_DIR SOURCE_DIR FAMILY: one build serves one MPI family, and says so.
# - gpurun.pc's mpi_family and the CMake package's GPURUN_MPI_FAMILY name FAMILY (openmpi, mpich);
# - a program built with the other family's compiler wrapper against this build's libgpurun gets
#   GR_ERR_UNSUPPORTED from gr_init with a sentence naming both MPIs, and does not crash (without
#   the check MPICH aborted it with "Invalid communicator"). Skips (77) when the other family's
#   compiler is not installed.
set -eu
build=$1 src=$2 family=$3
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
grep -qx "mpi_family=$family" "$build/gpurun.pc" || fail "gpurun.pc does not say mpi_family=$family"
grep -q "set(GPURUN_MPI_FAMILY $family)" "$build/gpurunConfig.cmake" ||
  fail "gpurunConfig.cmake does not set GPURUN_MPI_FAMILY $family"
case "$family" in
  openmpi) other_cc=mpicc.mpich other="MPICH" mine="Open MPI" ;;
  mpich) other_cc=mpicc.openmpi other="Open MPI" mine="MPICH" ;;
  *) fail "unknown family '$family'" ;;
esac
if ! command -v "$other_cc" > /dev/null; then
  echo "SKIP: $other_cc is not installed (the other MPI family's compiler)"
  exit 77
fi
work=$(mktemp -d /tmp/gpurun-family.XXXXXX)
trap 'rm -rf "$work"' EXIT
"$other_cc" -I"$src/include" -I"$build/include" "$src/docs/guide/files/family.c" -L"$build" \
  -lgpurun -o "$work/family"
# A singleton: no launcher, so that nothing but the program decides
out=$(LD_LIBRARY_PATH="$build${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$work/family" 2>&1) ||
  fail "the $other program exited $?: $out"
echo "$out"
# (under Open MPI the sentence starts with "rank 0: ": a singleton has a world rank)
echo "$out" | grep -q "gr_init: GR_ERR_UNSUPPORTED: .*gr_init: this libgpurun is built for $mine, but the program runs with $other" ||
  fail "gr_init did not refuse the other family with the sentence"
echo "PASS: the $family build says so and refuses a program of $other"
