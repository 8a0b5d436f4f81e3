/* A rank SIGKILLed while the others wait for a non-blocking collective (run under mpirun
 * --enable-recovery, which keeps the other ranks alive, by shm_kill.sh): every survivor's request
 * must end with GR_ERR_TIMEOUT within the timeout plus a margin, with a sentence naming the killed
 * rank as gone and the call, and then the communicator is aborted and destroys cleanly.
 *   test_coll_nonblock_kill VICTIM ireduce|ialltoall|ibarrier
 * The victim dies after the warm-up requests, before it starts the kind named; the survivors start
 * it and wait, the first rank by gr_test alone. */
#include <gpurun/coll.h>
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gr_test_clock.h"
#include "world_comm.h"

static gr_status start(const char *kind, float *x, float *y, size_t n, gr_comm *c, gr_request **q) {
  if (strcmp(kind, "ireduce") == 0) return gr_ireduce(x, y, n, GR_FLOAT32, GR_SUM, 0, c, NULL, q);
  if (strcmp(kind, "ialltoall") == 0) return gr_ialltoall(x, y, n, GR_FLOAT32, c, NULL, q);
  return gr_ibarrier(c, q);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size, victim = argc > 1 ? atoi(argv[1]) : 1;
  const char *kind = argc > 2 ? argv[2] : "ireduce";
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const double timeout_s = 3;
  gr_comm *c = world_comm(NULL, timeout_s, 0); /* the MPI backend */
  if (!c) return 1;
  size_t n = 1024;
  float *x = malloc(n * (size_t)size * sizeof *x), *y = malloc(n * (size_t)size * sizeof *y);
  if (!x || !y) return 1;
  for (int it = 0; it < 2; it++) { /* the path works, with every rank */
    for (size_t i = 0; i < n * (size_t)size; i++)
      x[i] = (float)rank;
    gr_request *q = NULL;
    gr_status st = start(kind, x, y, n, c, &q);
    if (st == GR_OK) st = gr_wait(&q);
    if (st != GR_OK) {
      fprintf(stderr, "rank %d: warm-up %s failed: %s\n", rank, kind, gr_last_error());
      return 1;
    }
  }
  if (rank == victim) raise(SIGKILL);
  double t0 = gr_test_now();
  gr_request *q = NULL;
  gr_status st = start(kind, x, y, n, c, &q);
  if (st == GR_OK) {
    int done = 0;
    if (rank == 0)
      while (!done && st == GR_OK)
        st = gr_test(&q, &done);
    else
      st = gr_wait(&q);
  }
  double dt = gr_test_now() - t0;
  const char *e = gr_last_error();
  char want[64], fn[32];
  snprintf(want, sizeof want, "rank %d (process ", victim);
  snprintf(fn, sizeof fn, "gr_%s", kind);
  int ok = st == GR_ERR_TIMEOUT && q == NULL && dt < timeout_s + 10 && strstr(e, want) &&
           strstr(e, "no longer exists") && strstr(e, fn);
  fprintf(stderr, "rank %d: %s after %.1f s: %s\n", rank, ok ? "SURVIVOR OK" : "FAIL", dt, e);
  if (start(kind, x, y, n, c, &q) != GR_ERR_ABORTED || q) ok = 0;
  if (gr_comm_destroy(c) != GR_OK) ok = 0;
  free(x), free(y);
  MPI_Finalize();
  return ok ? 0 : 1;
}
