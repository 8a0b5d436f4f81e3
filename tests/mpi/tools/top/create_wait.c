/* A job for gpurun-top's test of communicator creation: after one allreduce on the world, every
 * rank creates a communicator over the world (gr_comm_create of MPI_COMM_WORLD, or gr_comm_split of
 * gr_world), uses it once and destroys it; or (init) the ranks start MPI themselves and gr_init
 * creates the world communicator, the first creation of all. One rank (late) or every rank but
 * one (early) first waits for the file GOFILE, so that the test decides who waits in the creation
 * for whom.
 * usage: create_wait create|split|init RANK late|early GOFILE */
#include <gpurun/gpurun.h>

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int wait_go(int me, const char *go) {
  time_t t0 = time(NULL);
  while (access(go, F_OK) != 0) {
    if (time(NULL) - t0 > 120) {
      fprintf(stderr, "create_wait: rank %d: no %s after 120 s\n", me, go);
      return -1;
    }
    usleep(20000);
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 5 ||
      (strcmp(argv[1], "create") && strcmp(argv[1], "split") && strcmp(argv[1], "init")) ||
      (strcmp(argv[3], "late") && strcmp(argv[3], "early"))) {
    fprintf(stderr, "usage: create_wait create|split|init RANK late|early GOFILE\n");
    return 2;
  }
  int odd = atoi(argv[2]), late = !strcmp(argv[3], "late"), init = !strcmp(argv[1], "init");
  int provided = 0, me = 0;
  if (init) { /* gr_init's own creation is the one to wait in */
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    if ((late ? me == odd : me != odd) && wait_go(me, argv[4]) != 0) return 3;
  }
  if (gr_init(&argc, &argv) != GR_OK) {
    fprintf(stderr, "gr_init: %s\n", gr_last_error());
    return 1;
  }
  gr_comm *w = gr_world();
  int p = gr_comm_size(w);
  me = gr_comm_rank(w);
  double x = 1;
  if (gr_allreduce(&x, &x, 1, GR_FLOAT64, GR_SUM, w, NULL) != GR_OK || x != p) {
    fprintf(stderr, "allreduce on the world: %s\n", gr_last_error());
    return 1;
  }
  if (init) {
    if (me == 0) printf("create_wait: init on %d ranks\n", p);
    int ok = gr_finalize() == GR_OK;
    MPI_Finalize();
    return ok ? 0 : 1;
  }
  if ((late ? me == odd : me != odd) && wait_go(me, argv[4]) != 0) return 3;
  gr_comm *c = NULL;
  gr_status st = !strcmp(argv[1], "create") ? gr_comm_create(MPI_COMM_WORLD, NULL, &c)
                                            : gr_comm_split(w, 0, me, &c);
  if (st != GR_OK) {
    fprintf(stderr, "%s\n", gr_last_error());
    return 1;
  }
  x = 1;
  if (gr_allreduce(&x, &x, 1, GR_FLOAT64, GR_SUM, c, NULL) != GR_OK || x != p) {
    fprintf(stderr, "allreduce on the new communicator: %s (sum %g, expected %d)\n",
            gr_last_error(), x, p);
    return 1;
  }
  if (gr_comm_destroy(c) != GR_OK) {
    fprintf(stderr, "%s\n", gr_last_error());
    return 1;
  }
  if (me == 0) printf("create_wait: %s on %d ranks\n", argv[1], p);
  return gr_finalize() == GR_OK ? 0 : 1;
}
