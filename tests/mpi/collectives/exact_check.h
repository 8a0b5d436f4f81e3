/* Failure reporting and allocation for the exact-by-construction collective tests
 * (test_coll_exact.c, test_coll_rabenseifner.c, tests/multinode/collectives/test_coll_hier.c).
 * A failure is counted and the test carries on (every rank reports); the first 20 are printed
 * with the world rank, file and line. The including file defines
 * `static int world_rank, failures;`. */
#ifndef EXACT_CHECK_H
#define EXACT_CHECK_H

#include <gpurun/coll.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define FAIL(...)                                                                                  \
  do {                                                                                             \
    if (failures++ < 20) {                                                                         \
      fprintf(stderr, "[rank %d] FAIL %s:%d: ", world_rank, __FILE__, __LINE__);                   \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fputc('\n', stderr);                                                                         \
    }                                                                                              \
  } while (0)

#define CHECK_OK(call, what)                                                                       \
  do {                                                                                             \
    gr_status st_ = (call);                                                                        \
    if (st_ != GR_OK) FAIL("%s: %s (%s)", what, gr_status_name(st_), gr_last_error());             \
  } while (0)

/* p itself; out of memory (p NULL) stops the whole job: a test cannot go on without its buffers. */
static inline void *ec_must(void *p) {
  if (!p) {
    fprintf(stderr, "out of memory\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  return p;
}

/* Host memory for a buffer of `bytes` (at least one byte, so that 0 still gives a pointer). */
static inline void *ec_alloc(size_t bytes) { return ec_must(malloc(bytes ? bytes : 1)); }

#endif
