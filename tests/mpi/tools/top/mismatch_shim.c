/* A fault for gpurun-top's trials (fault_trials.sh, kind lmp-mismatch): preloaded before the MPI
 * layer (LD_PRELOAD="mismatch_shim.so:libgpurun-mpi.so"), it passes every MPI_Allreduce on until
 * the file <GR_MISMATCH_DIR>/mismatch.<world rank> appears; from then on the rank calls
 * MPI_Barrier instead, on the same communicator: a collective its peers never enter at that
 * number, which hangs them all. The barrier goes through the layer (the next MPI_Barrier), which
 * records it as the program's call. Looked for at most every 0.1 s: a file test per call would
 * slow a program that makes many. */
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

typedef int (*allreduce_fn)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm);
typedef int (*barrier_fn)(MPI_Comm);

int MPI_Allreduce(const void *s, void *r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c) {
  static allreduce_fn next;
  static barrier_fn barrier;
  static double next_look;
  static int fired;
  static char trigger[4096];
  if (!next) {
    next = (allreduce_fn)dlsym(RTLD_NEXT, "MPI_Allreduce");
    barrier = (barrier_fn)dlsym(RTLD_NEXT, "MPI_Barrier");
    const char *dir = getenv("GR_MISMATCH_DIR"), *rank = getenv("OMPI_COMM_WORLD_RANK");
    if (!rank) rank = getenv("PMI_RANK");
    if (dir && rank) snprintf(trigger, sizeof trigger, "%s/mismatch.%s", dir, rank);
    if (!next || !barrier) {
      fprintf(stderr, "mismatch_shim: no next MPI_Allreduce or MPI_Barrier\n");
      abort();
    }
  }
  if (!fired && trigger[0]) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    double now = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
    if (now >= next_look) {
      next_look = now + 0.1;
      fired = access(trigger, F_OK) == 0;
    }
  }
  return fired ? barrier(c) : next(s, r, n, t, op, c);
}
