/* Failure reporting and allocation for the exact-by-construction collective tests
 * (test_coll_exact.c, test_coll_rabenseifner.c, tests/multinode/collectives/test_coll_hier.c).
 * The checks are tests/lib/gr_check.h's: a failure is counted and the test carries on (every rank
 * reports); the first 20 are printed with the world rank, file and line. The including file defines
 * `static int world_rank, failures;`. */
#ifndef EXACT_CHECK_H
#define EXACT_CHECK_H

#include <gpurun/coll.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define GR_TEST_RANK world_rank
#define GR_TEST_FAILURES failures
#include "gr_check.h"

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
