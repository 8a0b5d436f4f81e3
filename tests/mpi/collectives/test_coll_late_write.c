/* The lifetime of a timed-out call's buffers (issue 40). Rank 0 starts a request and times out
 * alone (1 s), then destroys the communicator, which returns GR_OK; rank 1 is 2.5 s late. From
 * the destroy on, rank 0's receive buffer belongs to the program again, so nothing may write into
 * it; rank 0 watches it for 3 s while it keeps calling MPI (as any program does), then both ranks
 * call MPI_Finalize (gr_comm_destroy(3), NOTES).
 *
 *   test_coll_late_write [alltoall|allreduce] [late|started]
 *
 * late (the default): rank 1 starts its request 2.5 s late. started: rank 1 starts it at once and
 * computes for 2.5 s before it waits, so that rank 0's data call (whose verdict rank 1's start
 * sent) is running when rank 0 gives up on it: the MPI library's call writes into its receive
 * buffer when rank 1's part arrives, after the destroy.
 *
 * Seen before the fix (2 ranks): allreduce on the default path, the late peer's single-copy write
 * into rank 0's receive buffer 1.50 s after the destroy; GPURUN_COLL_ALGO=mpi, SIGSEGV in
 * mca_pml_ob1_isend from libnbc's progress (the abandoned verdict's MPI_Iallreduce ran on the MPI
 * communicator the destroy had freed); alltoall started, rank 0's MPI_Ialltoall writing its
 * receive buffer after the destroy. (The hangs seen then were this test's: rank 1's blocking
 * MPI_Barrier against rank 0's MPI_Ibarrier, which never match.) */
#include <gpurun/coll.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int rank, size, failures;
static float *kept_r;

#include "gr_test_clock.h"
#include "expect.h"

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int alltoall = argc < 2 || strcmp(argv[1], "allreduce") != 0;
  int started = argc > 2 && strcmp(argv[2], "started") == 0;
  size_t n = alltoall ? 100000 : 1u << 20, nr = alltoall ? n * (size_t)size : n;
  float *s = malloc(nr * sizeof *s), *r = malloc(nr * sizeof *r), *copy = malloc(nr * sizeof *r);
  if (!s || !r || !copy) abort();
  for (size_t i = 0; i < nr; i++)
    s[i] = (float)(rank + 1), r[i] = -7.0f;
  gr_comm_config cfg;
  gr_comm_config_init(&cfg);
  cfg.timeout_s = 1.0;
  gr_comm *c = NULL;
  if (gr_comm_create(MPI_COMM_WORLD, &cfg, &c) != GR_OK) {
    fprintf(stderr, "[rank %d] gr_comm_create: %s\n", rank, gr_last_error());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank != 0 && !started) gr_test_spin(2.5);
  gr_request *q = NULL;
  gr_status st = alltoall ? gr_ialltoall(s, r, n, GR_FLOAT32, c, NULL, &q)
                          : gr_iallreduce(s, r, n, GR_FLOAT32, GR_SUM, c, NULL, &q);
  if (rank != 0 && started) gr_test_spin(2.5);
  if (st == GR_OK) st = gr_wait(&q);
  /* started: a path that moves rank 1's request on its own (the shared-memory engine) may finish
   * it in time */
  if (rank == 0 && st != GR_ERR_TIMEOUT && !(started && st == GR_OK))
    FAIL("rank 0's request returned %s, expected GR_ERR_TIMEOUT", gr_status_name(st));
  if (rank == 0 && started) printf("late_write: rank 0's request: %s\n", gr_status_name(st));
  EXPECT_OK(gr_comm_destroy(c));
  if (rank == 0) {
    memcpy(copy, r, nr * sizeof *r);
    /* 3 s of a program that goes on calling MPI with the buffer its own again */
    MPI_Request b = MPI_REQUEST_NULL;
    MPI_Ibarrier(MPI_COMM_WORLD, &b);
    double t0 = gr_test_now();
    int flag = 0;
    while (gr_test_now() < t0 + 3.0) {
      if (!flag) MPI_Test(&b, &flag, MPI_STATUS_IGNORE);
      if (memcmp(copy, r, nr * sizeof *r) != 0) {
        size_t i = 0;
        while (copy[i] == r[i])
          i++;
        FAIL("the receive buffer was written %.2f s after gr_comm_destroy returned GR_OK: "
             "[%zu] %g -> %g",
             gr_test_now() - t0, i, copy[i], r[i]);
        break;
      }
    }
    if (!flag) MPI_Wait(&b, MPI_STATUS_IGNORE);
  } else {
    /* rank 0's Ibarrier: a blocking barrier does not match a non-blocking one (MPI-3.1, 5.12) */
    MPI_Request b = MPI_REQUEST_NULL;
    MPI_Ibarrier(MPI_COMM_WORLD, &b);
    MPI_Wait(&b, MPI_STATUS_IGNORE);
  }
  free(s), free(copy);
  /* r is not freed: were it written after all, that must not corrupt the heap (kept reachable,
   * so that LeakSanitizer does not report it) */
  kept_r = r;
  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) printf("late_write %s: %d failures\n", alltoall ? "alltoall" : "allreduce", total);
  MPI_Finalize();
  return total ? 1 : 0;
}
