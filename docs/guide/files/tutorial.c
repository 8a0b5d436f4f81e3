/* The library tutorial of docs/guide/library.md: init, communicators, a collective, a request,
 * a timeout, errors and the task pool, in one program. Build and run:
 *   mpicc tutorial.c $(pkg-config --cflags --libs gpurun) -o tutorial
 *   mpirun -np 4 gpurun ./tutorial */
#include <gpurun/gpurun.h>
#include <stdio.h>
#include <stdlib.h>

/* One step: print the failing call's sentence and stop every rank. */
#define CHECK(call)                                                                                \
  do {                                                                                             \
    gr_status st_ = (call);                                                                        \
    if (st_ != GR_OK) {                                                                            \
      fprintf(stderr, "tutorial: %s: %s\n", gr_strerror(st_), gr_last_error());                    \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

/* The task pool: each task squares a slice of the vector. */
struct slice {
  double *x;
  size_t n;
};
static void square_range(size_t lo, size_t hi, void *arg) {
  struct slice *s = arg;
  for (size_t i = lo; i < hi; i++)
    s->x[i] = s->x[i] * s->x[i];
}

int main(int argc, char **argv) {
  /* 1. init: MPI, gpurun's plan (this rank's GPU, cores, NIC), the world communicator. */
  CHECK(gr_init(&argc, &argv));
  gr_comm *world = gr_world();
  int rank = gr_comm_rank(world), size = gr_comm_size(world);

  /* 2. a collective: the sum over all ranks, in place. */
  double v[3] = {1.0, (double)rank, 0.5};
  CHECK(gr_allreduce(v, v, 3, GR_FLOAT64, GR_SUM, world, NULL));
  if (rank == 0) printf("allreduce over %d ranks: %g %g %g\n", size, v[0], v[1], v[2]);

  /* 3. communicators: even and odd ranks, each its own communicator. */
  gr_comm *half = NULL;
  CHECK(gr_comm_split(world, rank % 2, rank, &half));
  int r = rank;
  CHECK(gr_allreduce(&r, &r, 1, GR_INT32, GR_MAX, half, NULL));
  printf("rank %d: highest rank among the %s ranks: %d\n", rank, rank % 2 ? "odd" : "even", r);

  /* 4. a request: start an allreduce, do other work, then wait for it. */
  long long one = 1, count = 0;
  gr_request *req = NULL;
  CHECK(gr_iallreduce(&one, &count, 1, GR_INT64, GR_SUM, world, NULL, &req));
  int done = 0;
  CHECK(gr_test(&req, &done)); /* not necessarily done yet: work can go here */
  if (!done) CHECK(gr_wait(&req));
  if (rank == 0) printf("iallreduce counted %lld ranks\n", count);

  /* 5. the task pool: the default pool (the rank's cores) runs a parallel loop. */
  double x[1000];
  for (int i = 0; i < 1000; i++)
    x[i] = i;
  struct slice s = {x, 1000};
  CHECK(gr_parallel_for(gr_default_pool(), 0, 1000, 100, square_range, &s));
  if (rank == 0)
    printf("task pool of %d threads: x[999] = %g\n", gr_pool_nthreads(gr_default_pool()), x[999]);

  /* 6. a timeout and an error: rank 0 enters an allreduce nobody else joins. With a timeout on
   * the communicator the call returns GR_ERR_TIMEOUT and a sentence naming it. */
  gr_comm_config cfg;
  gr_comm_config_init(&cfg);
  cfg.timeout_s = 1.0;
  gr_comm *timed = NULL;
  CHECK(gr_comm_create(MPI_COMM_WORLD, &cfg, &timed));
  if (rank == 0) {
    double b = 0;
    gr_status st = gr_allreduce(&b, &b, 1, GR_FLOAT64, GR_SUM, timed, NULL);
    printf("rank 0: allreduce alone: %s: %s\n", gr_status_name(st), gr_last_error());
  }
  CHECK(gr_barrier(world));
  gr_comm_abort(timed); /* an aborted communicator can only be destroyed */
  gr_comm_destroy(timed);

  CHECK(gr_comm_destroy(half));
  return gr_finalize() == GR_OK ? 0 : 1;
}
