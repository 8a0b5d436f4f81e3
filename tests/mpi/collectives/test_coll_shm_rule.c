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

/* An allreduce of `bytes` of float32: element i of rank r is (r + 1) * (i % 7 + 1). */
static void allreduce_at(gr_comm *c, size_t bytes, int single) {
  size_t n = bytes / sizeof(float);
  float *s = malloc(bytes), *r = malloc(bytes);
  REQUIRE(s && r);
  for (size_t i = 0; i < n; i++)
    s[i] = (float)((world_rank + 1) * (int)(i % 7 + 1));
  uint64_t before = gr__shm_single_copy_calls();
  EXPECT_OK(gr_allreduce(s, r, n, GR_FLOAT32, GR_SUM, c, NULL));
  float ranks = (float)(P * (P + 1) / 2);
  size_t bad = 0;
  for (size_t i = 0; i < n; i++)
    bad += r[i] != ranks * (float)(i % 7 + 1);
  if (bad) FAIL("allreduce of %zu bytes: %zu elements wrong", bytes, bad);
  if (gr__shm_single_copy_calls() - before != (uint64_t)single)
    FAIL("allreduce of %zu bytes: single copy %s, expected %s", bytes,
         gr__shm_single_copy_calls() - before ? "taken" : "not taken", single ? "taken" : "not");
  free(s);
  free(r);
}

/* A reduce-scatter of n float32 per rank's block (n * P * 4 bytes of input); single copy below
 * `limit` bytes of input. */
static void reduce_scatter_at(gr_comm *c, size_t n, size_t limit) {
  size_t bytes = n * (size_t)P * sizeof(float);
  int single = bytes < limit;
  float *s = malloc(n * (size_t)P * sizeof(float)), *r = malloc(n * sizeof(float));
  REQUIRE(s && r);
  for (size_t i = 0; i < n * (size_t)P; i++)
    s[i] = (float)((world_rank + 1) * (int)(i % 5 + 1));
  uint64_t before = gr__shm_single_copy_calls();
  EXPECT_OK(gr_reduce_scatter(s, r, n, GR_FLOAT32, GR_SUM, c, NULL));
  float ranks = (float)(P * (P + 1) / 2);
  size_t bad = 0;
  for (size_t i = 0; i < n; i++)
    bad += r[i] != ranks * (float)(((size_t)world_rank * n + i) % 5 + 1);
  if (bad) FAIL("reduce-scatter of %zu bytes: %zu elements wrong", bytes, bad);
  if (gr__shm_single_copy_calls() - before != (uint64_t)single)
    FAIL("reduce-scatter of %zu bytes: single copy %s, expected %s", bytes,
         gr__shm_single_copy_calls() - before ? "taken" : "not taken", single ? "taken" : "not");
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
  size_t rs_n = (rs + (size_t)P * 4 - 1) / ((size_t)P * 4); /* the first block at the limit */

  allreduce_at(c, 1u << 20, 1);
  allreduce_at(c, ar - 4096, 1);
  allreduce_at(c, ar, 0);
  allreduce_at(c, ar + (1u << 20), 0);
  reduce_scatter_at(c, (1u << 18) / (size_t)P, rs);
  reduce_scatter_at(c, rs_n - 1, rs);
  reduce_scatter_at(c, rs_n, rs);
  reduce_scatter_at(c, 2 * rs_n, rs);

  EXPECT_OK(gr_comm_destroy(c));
  int total = 0;
  MPI_Allreduce(&gr_test_failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (!world_rank)
    printf("shared-memory rule for private buffers at %d ranks: %d failures\n", P, total);
  MPI_Finalize();
  return total ? 1 : 0;
}
