/* Fault behaviour: one rank fails to take part in an allreduce.
 * usage: test_fault hang|die
 *   hang  the last rank never calls the allreduce (it sleeps); the others must get GR_ERR_TIMEOUT
 *         (GPURUN_TIMEOUT), then GR_ERR_ABORTED on the aborted communicator, and exit 3 after their
 *         flight-recorder dumps are all on disk (so that gpurun-report can read every one).
 *   die   the last rank is killed by SIGALRM inside the allreduce, before the others arrive; they
 *         either time out or are ended by mpirun. Either way the job ends non-zero, no hang.
 *   chain rank r waits in a recv from rank r+1; the last rank stops itself (SIGSTOP)
 *         before sending. Ranks 0..n-2 time out, dump, and exit 3 once all their dumps are on
 *         disk; gpurun-report must follow 0 -> 1 -> ... -> n-1 and name the last rank.
 * The driving script (test_fault.sh) checks the exit status and the messages. */
#include <gpurun/runtime.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void nap(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "hang";
  if (gr_init(&argc, &argv) != GR_OK) {
    fprintf(stderr, "gr_init: %s\n", gr_last_error());
    return 2;
  }
  gr_rank_info_t ri;
  gr_rank_info(&ri);
  gr_comm *w = gr_world();
  double x = 1, y = 0;
  /* One good call first, so the flight recorder shows a completed #1 on every rank. */
  if (gr_allreduce(&x, &y, 1, GR_FLOAT64, GR_SUM, w, NULL) != GR_OK || y != ri.size) {
    fprintf(stderr, "rank %d: first allreduce failed: %s\n", ri.rank, gr_last_error());
    return 2;
  }
  if (!strcmp(mode, "chain")) {
    if (ri.rank == ri.size - 1) {
      raise(SIGSTOP); /* mpirun's SIGKILL ends it once the others have failed */
      return 0;
    }
    int v = 0;
    gr_status st = gr_recv(&v, 1, GR_INT32, ri.rank + 1, w, NULL);
    fprintf(stderr, "rank %d: recv from rank %d returned %s\n", ri.rank, ri.rank + 1,
            gr_status_name(st));
    const char *dir = getenv("GPURUN_MONITOR_DIR"), *job = getenv("GPURUN_JOB_ID");
    for (int r = 0; dir && job && r < ri.size - 1; r++) {
      char path[1024];
      snprintf(path, sizeof path, "%s/%s/flight.%d.json", dir, job, r);
      for (int i = 0; i < 200 && access(path, F_OK) != 0; i++)
        nap(50);
    }
    return st == GR_ERR_TIMEOUT ? 3 : 5;
  }
  if (!strcmp(mode, "die")) {
    if (ri.rank == ri.size - 1) {
      /* Die inside the call: SIGALRM's default action ends the process 1 s into the allreduce,
       * while the others have not even arrived (they start at 2 s). */
      signal(SIGALRM, SIG_DFL);
      alarm(1);
    } else {
      nap(2000);
    }
  }
  if (ri.rank == ri.size - 1 && strcmp(mode, "die") != 0) {
    /* Bounded: mpirun ends this rank once the others have failed. */
    for (int i = 0; i < 600; i++)
      nap(100);
    return 0;
  }
  gr_status st = gr_allreduce(&x, &y, 1, GR_FLOAT64, GR_SUM, w, NULL);
  fprintf(stderr, "rank %d: allreduce #2 returned %s: %s\n", ri.rank, gr_status_name(st),
          gr_last_error());
  if (st == GR_OK) return 4; /* impossible: a rank is missing */
  gr_status again = gr_barrier(w);
  fprintf(stderr, "rank %d: barrier afterwards returned %s\n", ri.rank, gr_status_name(again));
  if (!strcmp(mode, "hang")) {
    /* Wait (bounded) for the other waiting ranks' dumps, so the job directory is complete. */
    const char *dir = getenv("GPURUN_MONITOR_DIR"), *job = getenv("GPURUN_JOB_ID");
    for (int r = 0; dir && job && r < ri.size - 1; r++) {
      char path[1024];
      snprintf(path, sizeof path, "%s/%s/flight.%d.json", dir, job, r);
      for (int i = 0; i < 200 && access(path, F_OK) != 0; i++)
        nap(50);
    }
  }
  return st == GR_ERR_TIMEOUT && again == GR_ERR_ABORTED ? 3 : 5;
}
