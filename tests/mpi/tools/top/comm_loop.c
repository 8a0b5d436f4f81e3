/* A job for gpurun-top's fault trials: every rank calls gr_allreduce in a loop (a short sleep
 * between steps, like a training step) on communicators the mode makes, until the file named by
 * argv[2] exists or 120 s pass. The trial stops or kills one rank meanwhile.
 *   split   gr_comm_split(world, rank % 2): each half loops on its own communicator, so with one
 *           rank stopped only its half waits (both halves have the same name, split-1:C, with
 *           colours 0 and 1, and different ids)
 *   world2  two communicators over MPI_COMM_WORLD besides gr_world (all named world): the loop
 *           runs on the last one
 * usage: comm_loop split|world2 STOPFILE */
#include <gpurun/gpurun.h>

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int fail(const char *what) {
  fprintf(stderr, "comm_loop: %s: %s\n", what, gr_last_error());
  return 1;
}

int main(int argc, char **argv) {
  if (argc < 3 || (strcmp(argv[1], "split") && strcmp(argv[1], "world2"))) {
    fprintf(stderr, "usage: comm_loop split|world2 STOPFILE\n");
    return 2;
  }
  if (gr_init(&argc, &argv) != GR_OK) return fail("gr_init");
  gr_comm *w = gr_world(), *c = NULL, *extra = NULL;
  int me = gr_comm_rank(w);
  if (!strcmp(argv[1], "split")) {
    if (gr_comm_split(w, me % 2, me, &c) != GR_OK) return fail("gr_comm_split");
  } else {
    if (gr_comm_create(MPI_COMM_WORLD, NULL, &extra) != GR_OK) return fail("gr_comm_create");
    if (gr_comm_create(MPI_COMM_WORLD, NULL, &c) != GR_OK) return fail("gr_comm_create");
  }
  int p = gr_comm_size(c);
  time_t t0 = time(NULL);
  for (long step = 0;; step++) {
    /* the communicator's rank 0 decides when to stop, so that its ranks make the same calls */
    int done = gr_comm_rank(c) == 0 && (access(argv[2], F_OK) == 0 || time(NULL) - t0 > 120);
    if (gr_allreduce(&done, &done, 1, GR_INT32, GR_MAX, c, NULL) != GR_OK) return fail("allreduce");
    if (done) break;
    double x = 1;
    if (gr_allreduce(&x, &x, 1, GR_FLOAT64, GR_SUM, c, NULL) != GR_OK) return fail("allreduce");
    if (x != p) {
      fprintf(stderr, "comm_loop: sum %g, expected %d\n", x, p);
      return 1;
    }
    usleep(20000);
  }
  gr_comm_destroy(c);
  gr_comm_destroy(extra);
  return gr_finalize() == GR_OK ? 0 : 1;
}
