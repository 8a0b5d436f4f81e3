#!/bin/sh
# 30 fault trials of gpurun-top's verdict (tests/mpi/tools/top/fault_trials.sh: examples/sim,
# examples/train, split halves, several world communicators, LAMMPS and a plain MPI program
# through the MPI layer; SIGSTOP, SIGKILL, a receive nobody sends to and LAMMPS in a mismatched
# collective, at random moments), from
# a build directory. bench/README.md, "gpurun-top fault trials", quotes the result.
# usage: [FAULT_KINDS="lmp-stop lmp-kill lmp-mismatch"] bench/top/fault_trials.sh [BUILD [TRIALS [SEED]]]
set -u
b=${1:-build} n=${2:-30} seed=${3:-1}
here=$(dirname "$0")
exec sh "$here/../../tests/mpi/tools/top/fault_trials.sh" "$(command -v mpirun)" "$b/launcher/gpurun" \
  "$b/tools/top/gpurun-top" "$b/examples/sim/sim" "$b/examples/train/train" \
  "$b/tests/mpi/tools/top/comm_loop" "$n" 1 "$seed" "$(command -v lmp)" "$b/tests/mpi/mpitrace/mpi_cases" \
  "$b/tests/mpi/tools/top/libmismatch_shim.so" "$b/mpitrace/libgpurun-mpi.so"
