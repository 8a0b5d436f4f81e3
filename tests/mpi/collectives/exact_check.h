/* Failure reporting and allocation for the exact-by-construction collective tests
 * (test_coll_exact.c, test_coll_rabenseifner.c, tests/multinode/collectives/test_coll_hier.c).
 * The checks are tests/lib/gr_check.h's: a failure is counted and the test carries on (every rank
 * reports); the first 20 are printed with the world rank, file and line. The including file defines
 * `static int world_rank, failures;` (and `checks`, where it uses EXPECT_ALL). */
#ifndef EXACT_CHECK_H
#define EXACT_CHECK_H

#include <gpurun/coll.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define GR_TEST_RANK world_rank
#define GR_TEST_FAILURES failures
#include "gr_check.h"

#include "exact_values.h"

/* Every element i < n of buf (type t) equals expr, an expression of i (exact_values.h's
 * expectations): each element compared counts in checks; the first that differs is reported and
 * ends the comparison. */
#define EXPECT_ALL(what, t, buf, n, expr)                                                          \
  do {                                                                                             \
    for (size_t i = 0; i < (n); i++) {                                                             \
      double got_ = ev_get(t, buf, i), want_ = (expr);                                             \
      checks++;                                                                                    \
      if (!(got_ == want_)) {                                                                      \
        FAIL("%s: element %zu is %g, expected %g", what, i, got_, want_);                          \
        break;                                                                                     \
      }                                                                                            \
    }                                                                                              \
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
