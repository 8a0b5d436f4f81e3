/* A rank SIGKILLed in the middle of node-local shared-memory allreduces (run under mpirun
 * --enable-recovery, which keeps the other ranks alive): every survivor must return GR_ERR_TIMEOUT
 * within the timeout plus a margin, with a sentence naming the killed rank as gone, and then
 * destroy the communicator and exit cleanly. The script around it checks that /dev/shm holds no
 * segment afterwards (with GPURUN_SHM_SEGMENT=posix too, the named fallback).
 *   test_coll_shm_kill VICTIM [recv|mem]
 * recv: the victim dies between calls instead, and the survivors then wait in gr_recv from it (an
 * MPI step, not the segment's): their timeout must still name it as gone on their node.
 * mem: the buffer is gr_mem_alloc memory, so the allreduces run direct in the window, the victim's
 * region read and written by the survivors while it dies; the window goes with gr_comm_destroy. */
#include <gpurun/coll.h>
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gr_test_clock.h"
#include "world_comm.h"

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size, victim = argc > 1 ? atoi(argv[1]) : 1;
  int recv_mode = argc > 2 && strcmp(argv[2], "recv") == 0;
  int mem_mode = argc > 2 && strcmp(argv[2], "mem") == 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const double timeout_s = 3;
  gr_comm *c = world_comm(NULL, timeout_s, 0); /* the MPI backend */
  if (!c) return 1;
  size_t n = 4u << 20; /* 16 MiB of float: many rounds (or a long single-copy call) */
  float *x = NULL;
  if (mem_mode && gr_mem_alloc(c, n * sizeof *x, (void **)&x) != GR_OK) {
    fprintf(stderr, "rank %d: gr_mem_alloc failed: %s\n", rank, gr_last_error());
    return 1;
  }
  if (!mem_mode) x = malloc(n * sizeof *x);
  if (!x) return 1;
  for (int it = 0; it < 2; it++) { /* the path works, and every rank is inside the protocol */
    for (size_t i = 0; i < n; i++)
      x[i] = (float)rank;
    if (gr_allreduce(x, x, n, GR_FLOAT32, GR_SUM, c, NULL) != GR_OK ||
        x[n - 1] != (float)(size * (size - 1) / 2)) {
      fprintf(stderr, "rank %d: warm-up allreduce failed: %s\n", rank, gr_last_error());
      return 1;
    }
  }
  /* The victim arms a timer that SIGKILLs it 20 ms into the loop of 16 MiB allreduces, each of
   * which takes milliseconds: it dies inside one (the survivors' result is the same if it died
   * between two). Everyone loops until a call fails; no call may succeed for ever. */
  if (rank == victim && recv_mode) raise(SIGKILL);
  if (rank == victim) {
    timer_t tm;
    struct sigevent ev = {.sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGKILL};
    struct itimerspec at = {.it_value = {0, 20 * 1000 * 1000}};
    if (timer_create(CLOCK_MONOTONIC, &ev, &tm) != 0 || timer_settime(tm, 0, &at, NULL) != 0) {
      perror("timer_create");
      raise(SIGKILL);
    }
  }
  double t0 = gr_test_now();
  gr_status st = GR_OK;
  for (int it = 0; it < 100000 && st == GR_OK; it++) {
    t0 = gr_test_now();
    st = recv_mode ? gr_recv(x, 1, GR_FLOAT32, victim, c, NULL)
                   : gr_allreduce(x, x, n, GR_FLOAT32, GR_SUM, c, NULL);
  }
  double dt = gr_test_now() - t0;
  const char *e = gr_last_error();
  char want[64];
  snprintf(want, sizeof want, "rank %d (process ", victim);
  int ok = st == GR_ERR_TIMEOUT && dt < timeout_s + 10 && strstr(e, want) &&
           strstr(e, "no longer exists") && strstr(e, recv_mode ? "gr_recv" : "gr_allreduce");
  fprintf(stderr, "rank %d: %s after %.1f s: %s\n", rank, ok ? "SURVIVOR OK" : "FAIL", dt, e);
  if (gr_allreduce(x, x, 1, GR_FLOAT32, GR_SUM, c, NULL) != GR_ERR_ABORTED) ok = 0;
  if (gr_comm_destroy(c) != GR_OK) ok = 0; /* unmaps the window (mem) */
  if (!mem_mode) free(x);
  MPI_Finalize();
  return ok ? 0 : 1;
}
