/* The shared-memory path's choice for private buffers, by kind and size: single copy
 * (process_vm_readv) from 16 KiB up to a crossover per kind, copy in, reduce, copy out through the
 * segment's slots from it on; GPURUN_SHM_PRIVATE forces either side, auto measures the crossovers
 * at creation (shm_choice.c). Every call is exact (float32 sums of small integers, an allgather's
 * blocks, a broadcast's values), and the process's single-copy count grows by one exactly for the
 * calls the choice sends by single copy:
 * - GPURUN_SHM_PRIVATE=single: every kind at every size from 16 KiB (above a slot for a two-rank
 *   allreduce, which takes one round of whole copies up to it), beyond the fixed crossovers
 *   included;
 * - slots: none, below the fixed crossovers included;
 * - auto: every rank holds the same crossovers and two-rank pair limit (gathered and compared), each
 *   kind's calls just below its crossover go by single copy, those at it through the slots; at two
 *   ranks an allreduce at the measured pair limit takes the one exchange, one just above it the
 *   single copy;
 * - auto, past each finite crossover: a call every rank posts as a request (gr_i..., then gr_wait)
 *   goes by single copy (its peers can do a late rank's share), and so does one that only rank 0
 *   posts as a request while the others call the blocking form (any rank's request decides, the
 *   same on every rank); under slots a request does not.
 *   test_coll_shm_rule */
#include <gpurun/coll.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int world_rank;
#define GR_TEST_RANK world_rank
#include "gr_check.h"
#include "gr_shm.h" /* gr__shm_single_copy_calls, gr__shm_private_known */
#include "world_comm.h"

static int P;
static const char *kind_name[GR__SHM_PRIVATE_KINDS] = {"allreduce", "reduce-scatter", "allgather",
                                                       "broadcast"};

/* How the ranks call: the blocking form, a request on every rank, a request on rank 0 only. */
enum { BLOCKING, REQUEST, REQUEST_ON_0 };

/* One call of kind k (gr__shm_private_kind's order) moving `bytes` of float32 per rank (an
 * allreduce's or a broadcast's count, a reduce-scatter's or an allgather's block): element i of
 * rank r's input is (r + 1) * (i % 7 + 1) at its place in the whole input, so element i of a sum
 * is P (P + 1) / 2 * (i % 7 + 1), an allgather's block q holds rank q's input and a broadcast
 * rank 0's. Exact, and single copy taken exactly when `single` says (-1: either). */
static void call_as(gr_comm *c, const char *how, int k, size_t bytes, int single, int form) {
  size_t n = bytes / sizeof(float);
  size_t in = k == 1 ? n * (size_t)P : n, out = k == 2 ? n * (size_t)P : n;
  size_t first = k == 1 ? (size_t)world_rank * n : 0; /* this rank's block of the input */
  float *s = malloc(in * sizeof(float)), *r = malloc(out * sizeof(float));
  REQUIRE(s && r);
  for (size_t i = 0; i < in; i++)
    s[i] = (float)((world_rank + 1) * (int)(i % 7 + 1));
  memset(r, 0, out * sizeof(float));
  uint64_t before = gr__shm_single_copy_calls();
  gr_request *req = NULL;
  int as_request = form == REQUEST || (form == REQUEST_ON_0 && world_rank == 0);
  switch (k) {
  case 0:
    if (as_request)
      EXPECT_OK(gr_iallreduce(s, r, n, GR_FLOAT32, GR_SUM, c, NULL, &req));
    else
      EXPECT_OK(gr_allreduce(s, r, n, GR_FLOAT32, GR_SUM, c, NULL));
    break;
  case 1:
    if (as_request)
      EXPECT_OK(gr_ireduce_scatter(s, r, n, GR_FLOAT32, GR_SUM, c, NULL, &req));
    else
      EXPECT_OK(gr_reduce_scatter(s, r, n, GR_FLOAT32, GR_SUM, c, NULL));
    break;
  case 2:
    if (as_request)
      EXPECT_OK(gr_iallgather(s, r, n, GR_FLOAT32, c, NULL, &req));
    else
      EXPECT_OK(gr_allgather(s, r, n, GR_FLOAT32, c, NULL));
    break;
  default:
    if (as_request)
      EXPECT_OK(gr_ibroadcast(s, r, n, GR_FLOAT32, 0, c, NULL, &req));
    else
      EXPECT_OK(gr_broadcast(s, r, n, GR_FLOAT32, 0, c, NULL));
    break;
  }
  if (req) EXPECT_OK(gr_wait(&req));
  uint64_t took = gr__shm_single_copy_calls() - before;
  float ranks = (float)(P * (P + 1) / 2);
  size_t bad = 0;
  for (size_t i = 0; i < out; i++) {
    float want = k == 2   ? (float)((int)(i / n) + 1) * (float)(i % n % 7 + 1)
                 : k == 3 ? (float)(i % 7 + 1)
                          : ranks * (float)((first + i) % 7 + 1);
    bad += r[i] != want;
  }
  static const char *form_name[] = {"", " (requests)", " (a request on rank 0)"};
  if (bad)
    FAIL("%s: %s of %zu bytes%s: %zu elements wrong", how, kind_name[k], bytes, form_name[form],
         bad);
  if (single >= 0 && took != (uint64_t)single)
    FAIL("%s: %s of %zu bytes%s: single copy %s, expected %s", how, kind_name[k], bytes,
         form_name[form], took ? "taken" : "not taken", single ? "taken" : "not");
  free(s);
  free(r);
}

static void call_at(gr_comm *c, const char *how, int k, size_t bytes, int single) {
  call_as(c, how, k, bytes, single, BLOCKING);
}

/* The communicator with GPURUN_SHM_PRIVATE=value (read at creation, rank 0's). */
static gr_comm *comm_with(const char *value) {
  setenv("GPURUN_SHM_PRIVATE", value, 1);
  gr_comm *c = world_comm(NULL, 60, 0);
  unsetenv("GPURUN_SHM_PRIVATE");
  REQUIRE(c != NULL);
  return c;
}

/* Bytes per rank a kind's call may move: whole elements, and a reduce-scatter's whole input in
 * blocks of P elements. */
static size_t fit(size_t bytes) { return bytes / sizeof(float) * sizeof(float); }

/* Two ranks: the largest allreduce that takes one round of whole copies (a slot unless auto
 * measured less). */
static size_t pair_limit = GR__SHM_SLOT;

/* The smallest call of kind k that may go by single copy: 16 KiB, above the pair limit for a
 * two-rank allreduce. */
static size_t least(int k) { return k == 0 && P == 2 ? fit(pair_limit + 4096) : 16384; }

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  size_t fixed[GR__SHM_PRIVATE_KINDS];
  gr__shm_private_defaults(P, fixed);

  /* forced: each side at 16 KiB, 1 MiB, and beyond the fixed crossover where there is one */
  for (int side = 0; side < 2; side++) {
    const char *how = side ? "slots" : "single";
    gr_comm *c = comm_with(how);
    for (int k = 0; k < GR__SHM_PRIVATE_KINDS; k++) {
      call_at(c, how, k, least(k), !side);
      call_at(c, how, k, 1u << 20, !side);
      if (fixed[k] != SIZE_MAX) {
        call_at(c, how, k, fit(fixed[k] - 4096), !side);
        call_at(c, how, k, fit(fixed[k] + 4095), !side);
        call_as(c, how, k, fit(fixed[k] + 4095), !side, REQUEST); /* forced: requests too */
      }
    }
    EXPECT_OK(gr_comm_destroy(c));
  }
  /* a bad word: the default (auto), and the calls still exact */
  {
    gr_comm *c = comm_with("sometimes");
    call_at(c, "bad value", 0, 1u << 20, -1);
    EXPECT_OK(gr_comm_destroy(c));
  }

  /* auto: the same crossovers on every rank, and the calls on either side of each */
  gr_comm *c = comm_with("auto");
  size_t cross[GR__SHM_PRIVATE_KINDS], pair = GR__SHM_SLOT;
  if (!gr__shm_private_known(P, cross, &pair)) {
    FAIL("auto: no crossovers agreed for %d ranks", P);
    memcpy(cross, fixed, sizeof cross);
  }
  enum { N = GR__SHM_PRIVATE_KINDS + 1 }; /* the crossovers, then the pair limit */
  uint64_t mine[N], *all = malloc(sizeof mine * (size_t)P);
  REQUIRE(all != NULL);
  for (int k = 0; k < GR__SHM_PRIVATE_KINDS; k++)
    mine[k] = cross[k];
  mine[GR__SHM_PRIVATE_KINDS] = pair;
  MPI_Allgather(mine, N, MPI_UINT64_T, all, N, MPI_UINT64_T, MPI_COMM_WORLD);
  for (int q = 0; q < P; q++)
    for (int k = 0; k < N; k++)
      if (all[(size_t)q * N + k] != mine[k])
        FAIL("auto: rank %d's %s is %llu bytes, this rank's %llu", q,
             k < GR__SHM_PRIVATE_KINDS ? kind_name[k] : "pair limit",
             (unsigned long long)all[(size_t)q * N + k], (unsigned long long)mine[k]);
  free(all);
  if (!world_rank)
    printf("auto at %d ranks: single copy below %zu (allreduce), %zu (reduce-scatter), %zu "
           "(allgather), %zu (broadcast) bytes per rank; pair limit %zu bytes\n",
           P, cross[0], cross[1], cross[2], cross[3], pair);
  if (P == 2) {
    if (pair < 16384 || pair > GR__SHM_SLOT)
      FAIL("auto: the pair limit %zu bytes lies outside 16 KiB..a slot", pair);
    pair_limit = pair;
    call_at(c, "auto", 0, fit(pair), 0); /* one exchange at the limit */
  }
  for (int k = 0; k < GR__SHM_PRIVATE_KINDS; k++) {
    call_at(c, "auto", k, least(k), cross[k] > least(k));
    if (cross[k] == SIZE_MAX) {
      call_at(c, "auto", k, 1u << 20, 1);
      continue;
    }
    size_t at = (cross[k] + sizeof(float) - 1) / sizeof(float) * sizeof(float);
    if (at - sizeof(float) >= least(k)) call_at(c, "auto", k, at - sizeof(float), 1);
    call_at(c, "auto", k, at, 0);
    call_as(c, "auto", k, at, 1, REQUEST);
    call_as(c, "auto", k, at, 1, REQUEST_ON_0);
    call_at(c, "auto", k, at, 0); /* and the blocking form after them: the slots again */
  }
  EXPECT_OK(gr_comm_destroy(c));

  int total = 0;
  MPI_Allreduce(&gr_test_failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (!world_rank)
    printf("shared-memory rule for private buffers at %d ranks: %d failures\n", P, total);
  MPI_Finalize();
  return total ? 1 : 0;
}
