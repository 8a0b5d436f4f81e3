/* The shared-memory path's choice for private buffers, by kind and size: single copy
 * (process_vm_readv) from 16 KiB up to the crossover, copy in, reduce, copy out through the
 * segment's slots beyond it. At 2 ranks the allreduce crosses over at 16 MiB and the
 * reduce-scatter at 4 MiB of input; at more ranks both at 8 MiB (shm_coll.c, CMA_*_MAX). Every
 * call on either side of a crossover is exact (float32 sums of small integers), and the
 * process's single-copy count grows by one exactly for the calls below it.
 *   test_coll_shm_rule */
#include <gpurun/coll.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int world_rank;
#define GR_TEST_RANK world_rank
#include "gr_check.h"
#include "gr_shm.h" /* gr__shm_single_copy_calls */
#include "world_comm.h"

static int P;

/* One call of `kind` moving `bytes` of float32 input per rank (a reduce-scatter's n = bytes / P per
 * block): element i of rank r's input is (r + 1) * (i % 7 + 1), so element i of the sum is
 * P (P + 1) / 2 * (i % 7 + 1) at its place in the whole input. Exact, and single copy taken
 * exactly when `single` says. */
static void call_at(gr_comm *c, int reduce_scatter, size_t bytes, int single) {
  const char *what = reduce_scatter ? "reduce-scatter" : "allreduce";
  size_t total = bytes / sizeof(float), n = reduce_scatter ? total / (size_t)P : total;
  size_t first = reduce_scatter ? (size_t)world_rank * n : 0; /* this rank's part of the input */
  float *s = malloc(total * sizeof(float)), *r = malloc(n * sizeof(float));
  REQUIRE(s && r);
  for (size_t i = 0; i < total; i++)
    s[i] = (float)((world_rank + 1) * (int)(i % 7 + 1));
  uint64_t before = gr__shm_single_copy_calls();
  if (reduce_scatter)
    EXPECT_OK(gr_reduce_scatter(s, r, n, GR_FLOAT32, GR_SUM, c, NULL));
  else
    EXPECT_OK(gr_allreduce(s, r, n, GR_FLOAT32, GR_SUM, c, NULL));
  uint64_t took = gr__shm_single_copy_calls() - before;
  float ranks = (float)(P * (P + 1) / 2);
  size_t bad = 0;
  for (size_t i = 0; i < n; i++)
    bad += r[i] != ranks * (float)((first + i) % 7 + 1);
  if (bad) FAIL("%s of %zu bytes: %zu elements wrong", what, bytes, bad);
  if (took != (uint64_t)single)
    FAIL("%s of %zu bytes: single copy %s, expected %s", what, bytes, took ? "taken" : "not taken",
         single ? "taken" : "not");
  free(s);
  free(r);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  gr_comm *c = world_comm(NULL, 60, 0);
  REQUIRE(c != NULL);
  size_t ar = P == 2 ? 16u << 20 : 8u << 20, rs = P == 2 ? 4u << 20 : 8u << 20;
  size_t blk = (size_t)P * sizeof(float);    /* a reduce-scatter's input is whole blocks of P */
  size_t rs_at = (rs + blk - 1) / blk * blk; /* the first such size at the limit */

  call_at(c, 0, 1u << 20, 1);
  call_at(c, 0, ar - 4096, 1);
  call_at(c, 0, ar, 0);
  call_at(c, 0, ar + (1u << 20), 0);
  call_at(c, 1, (1u << 18) / blk * blk, 1);
  call_at(c, 1, rs_at - blk, 1);
  call_at(c, 1, rs_at, 0);
  call_at(c, 1, 2 * rs_at, 0);

  EXPECT_OK(gr_comm_destroy(c));
  int total = 0;
  MPI_Allreduce(&gr_test_failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (!world_rank)
    printf("shared-memory rule for private buffers at %d ranks: %d failures\n", P, total);
  MPI_Finalize();
  return total ? 1 : 0;
}
