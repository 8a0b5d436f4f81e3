/* The MPI backend's own large allreduce at a power-of-two number of ranks (4, 8: Rabenseifner,
 * reduce-scatter by recursive halving then allgather by recursive doubling;
 * collectives/mpi_allreduce_rab.c) with SUM and PROD above its 32 KiB recursive-doubling limit,
 * against answers computed here.
 *
 * The backend runs its own algorithms only when the communicator has a timeout, and only when the
 * node-local shared-memory path does not take the call (all ranks of this test share a node), so
 * the test is registered with GPURUN_TIMEOUT set and GPURUN_COLL_ALGO=mpi, and refuses to run
 * without the timeout (the communicator takes it from gr_comm_config_init, i.e. from
 * GPURUN_TIMEOUT, as an application's would). Every call must be counted under Rabenseifner and
 * under nothing else (gr_algo_count.h): a correct answer from another algorithm is a failure.
 *
 * Inputs differ per element (not periodic over a few elements as exact_values.h's are; only its
 * element codecs are used here), so that a window sent to the wrong partner, or reduced at the
 * wrong offset, gives a wrong element; every value and every partial result is an integer below
 * 2^24, exact in float32 and in every order.
 * Usage: test_coll_rabenseifner (under mpirun -np 4 or 8) */
#include <gpurun/coll.h>

#include "exact_check.h"
#include "exact_values.h"
#include "gr_algo_count.h"

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int world_rank, failures;
static long checks;

/* SUM: (i mod 65521) * (r + 1) + r; at 8 ranks at most 65520 * 36 + 28 < 2^22. */
static double sum_input(int r, size_t i) { return (double)(i % 65521) * (r + 1) + r; }

/* PROD: one rank per element (r == i mod P) contributes i mod 1021 + 1, the others +1 or -1 by a
 * pattern of r and i / P; |product| <= 1021. */
static double prod_input(int r, size_t i, int P) {
  if ((size_t)r == i % (size_t)P) return (double)(i % 1021 + 1);
  return ((i / (size_t)P + (size_t)r) % 3 == 0) ? -1 : 1;
}

static double input(gr_op op, int r, size_t i, int P) {
  return op == GR_PROD ? prod_input(r, i, P) : sum_input(r, i);
}

static double expected(gr_op op, size_t i, int P) {
  double acc = input(op, 0, i, P);
  for (int r = 1; r < P; r++)
    acc = op == GR_PROD ? acc * input(op, r, i, P) : acc + input(op, r, i, P);
  return acc;
}

static void run(gr_comm *c, gr_dtype t, gr_op op, size_t count, int in_place) {
  int P = gr_comm_size(c), r = gr_comm_rank(c);
  size_t es = ev_size(t);
  char what[128];
  snprintf(what, sizeof what, "allreduce %s %s count %zu (%zu bytes) %s", ev_dtype_name(t),
           ev_op_name(op), count, count * es, in_place ? "in place" : "out of place");
  if (count * es <= 32768)
    FAIL("%s: not above the 32 KiB limit, the test chose a wrong size", what);
  void *s = ec_alloc(count * es), *d = ec_alloc(count * es);
  for (size_t i = 0; i < count; i++) {
    ev_set(t, s, i, input(op, r, i, P));
    ev_set(t, d, i, -7); /* sentinel: an element never written is caught */
  }
  uint64_t before[GR__ALGO_COUNT];
  for (int a = 0; a < GR__ALGO_COUNT; a++)
    before[a] = gr__algo_count((gr__algo)a);
  gr_status st = in_place ? gr_allreduce(s, s, count, t, op, c, NULL)
                          : gr_allreduce(s, d, count, t, op, c, NULL);
  for (int a = 0; a < GR__ALGO_COUNT; a++) {
    uint64_t ran = gr__algo_count((gr__algo)a) - before[a];
    uint64_t want = a == GR__ALGO_RABENSEIFNER ? 1 : 0;
    if (ran != want)
      FAIL("%s: algorithm %s ran %llu times, expected %llu (the call must be Rabenseifner's)", what,
           gr__algo_name((gr__algo)a), (unsigned long long)ran, (unsigned long long)want);
  }
  if (st != GR_OK) {
    FAIL("%s: %s (%s)", what, gr_status_name(st), gr_last_error());
  } else {
    const void *out = in_place ? s : d;
    for (size_t i = 0; i < count; i++) {
      double want = expected(op, i, P), got = ev_get(t, out, i);
      checks++;
      if (got != want) {
        FAIL("%s: element %zu is %g, expected %g", what, i, got, want);
        break;
      }
    }
  }
  free(s);
  free(d);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  int P;
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  gr_comm_config cfg;
  gr_comm_config_init(&cfg);
  if (!(cfg.timeout_s > 0)) {
    if (world_rank == 0)
      fprintf(stderr,
              "test_coll_rabenseifner: GPURUN_TIMEOUT must be set (> 0) so that the MPI "
              "backend runs its own allreduce; it is '%s'\n",
              getenv("GPURUN_TIMEOUT") ? getenv("GPURUN_TIMEOUT") : "(unset)");
    MPI_Finalize();
    return 1;
  }
  if (P < 4 || (P & (P - 1))) {
    if (world_rank == 0)
      fprintf(stderr, "test_coll_rabenseifner: needs 4, 8, ... ranks (a power of two), got %d\n",
              P);
    MPI_Finalize();
    return 1;
  }
  cfg.backend = GR_BACKEND_MPI;
  gr_comm *c = NULL;
  gr_status st = gr_comm_create(MPI_COMM_WORLD, &cfg, &c);
  if (st != GR_OK || !c) {
    fprintf(stderr, "[rank %d] gr_comm_create: %s\n", world_rank, gr_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  static const gr_dtype types[] = {GR_INT32, GR_INT64, GR_FLOAT32, GR_FLOAT64};
  static const gr_op ops[] = {GR_SUM, GR_PROD};
  for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
    size_t per = 32768 / ev_size(types[ti]);
    /* just above the limit; odd and not a multiple of P (uneven windows); several windows of
     * 64 KiB+ (the size the recursive-doubling path never takes) */
    size_t counts[] = {per + 1, per + 2 * (size_t)P + 3, 100003};
    for (size_t oi = 0; oi < 2; oi++)
      for (size_t ci = 0; ci < 3; ci++)
        run(c, types[ti], ops[oi], counts[ci], (int)(ci % 2));
  }
  if (gr_comm_destroy(c) != GR_OK) FAIL("gr_comm_destroy: %s", gr_last_error());
  int total = 0;
  long nchecks = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(&checks, &nchecks, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  if (world_rank == 0)
    printf("mpi backend allreduce above 32 KiB at %d ranks (timeout %g s): %ld element checks, %d "
           "failures\n",
           P, cfg.timeout_s, nchecks, total);
  MPI_Finalize();
  return total ? 1 : 0;
}
