/* A job for gpurun-top's tests: every rank calls gr_allreduce in a loop (with a short sleep, like a
 * training step) until the file named by argv[1] exists or 120 s pass, then checks the sum.
 * The test stops one rank with SIGSTOP meanwhile: the others then wait in an allreduce. */
#include <gpurun/gpurun.h>

#include <stdio.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: live_loop STOPFILE\n");
    return 2;
  }
  if (gr_init(&argc, &argv) != GR_OK) {
    fprintf(stderr, "gr_init: %s\n", gr_last_error());
    return 1;
  }
  gr_comm *w = gr_world();
  int p = gr_comm_size(w);
  time_t t0 = time(NULL);
  long steps = 0;
  for (;;) {
    /* rank 0 decides when to stop, so that every rank makes the same number of calls */
    int done = gr_comm_rank(w) == 0 && (access(argv[1], F_OK) == 0 || time(NULL) - t0 > 120);
    if (gr_allreduce(&done, &done, 1, GR_INT32, GR_MAX, w, NULL) != GR_OK) {
      fprintf(stderr, "%s\n", gr_last_error());
      return 1;
    }
    if (done) break;
    double x = 1;
    if (gr_allreduce(&x, &x, 1, GR_FLOAT64, GR_SUM, w, NULL) != GR_OK || x != p) {
      fprintf(stderr, "allreduce: %s (sum %g, expected %d)\n", gr_last_error(), x, p);
      return 1;
    }
    steps++;
    usleep(20000);
  }
  if (gr_comm_rank(w) == 0) printf("live_loop: %ld steps on %d ranks\n", steps, p);
  return gr_finalize() == GR_OK ? 0 : 1;
}
