/* What the agreement-round tests (test_coll_agree_round.c, test_coll_agree_all.c) share: their
 * communicator, and the check that a round a rank gave up on never writes its buffers later while
 * the late ranks complete it against the abandoned requests. Include it after expect.h (FAIL,
 * REQUIRE_OK); the including file defines `static int rank, failures;`. */
#ifndef AGREE_LATE_H
#define AGREE_LATE_H

#include <gpurun/coll.h>
#include <mpi.h>
#include <string.h>

#include "gr_test_clock.h"

/* MPI_COMM_WORLD on the MPI backend with the given timeout (check mode as the environment says);
 * a failed creation ends the job. */
static inline gr_comm *agree_comm(double timeout_s) {
  gr_comm_config cfg;
  gr_comm_config_init(&cfg);
  cfg.backend = GR_BACKEND_MPI;
  cfg.timeout_s = timeout_s;
  gr_comm *c = NULL;
  REQUIRE_OK(gr_comm_create(MPI_COMM_WORLD, &cfg, &c));
  return c;
}

/* The side of the ranks that gave up, from `gone` (when they destroyed the communicator) on: a
 * program that goes on calling MPI with its buffers its own again, past the late ranks' arrival
 * (agree_late_arrive) and a second more. Each buffer buf[i] must hold want[i] (len[i] bytes)
 * throughout: MPI writes heap copies the lost list owns, never the caller's. */
static inline void agree_late_watch(int n, const void *const buf[], const void *const want[],
                                    const size_t len[], double gone) {
  MPI_Request q = MPI_REQUEST_NULL; /* the late ranks' Ibarrier */
  MPI_Ibarrier(MPI_COMM_WORLD, &q);
  int flag = 0;
  double until = 0;
  while (!until || gr_test_now() < until) {
    if (!flag && MPI_Test(&q, &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS && flag)
      until = gr_test_now() + 1.0;
    int written = -1;
    for (int i = 0; i < n && written < 0; i++)
      if (memcmp(buf[i], want[i], len[i]) != 0) written = i;
    if (written >= 0) {
      FAIL("buffer %d of the timed-out round was written %.2f s after gr_comm_destroy returned",
           written, gr_test_now() - gone);
      break;
    }
    if (gr_test_now() > gone + 60) {
      FAIL("the late ranks did not arrive within 60 s");
      break;
    }
  }
  if (!flag) MPI_Wait(&q, MPI_STATUS_IGNORE);
}

/* The late ranks' side, once they are done: the Ibarrier the others test (a blocking barrier does
 * not match a non-blocking one, MPI-3.1 5.12). */
static inline void agree_late_arrive(void) {
  MPI_Request q = MPI_REQUEST_NULL;
  MPI_Ibarrier(MPI_COMM_WORLD, &q);
  MPI_Wait(&q, MPI_STATUS_IGNORE);
}

#endif
