/* A call that one rank refuses locally: the refusing rank still takes part, and every
 * rank returns GR_ERR_INVALID naming it and the argument; nobody is left inside the call, the
 * communicator stays usable and the refusing rank's next call does not return stale data.
 *
 * Each case below is refused by one rank only (the last, unless it says otherwise). Before this
 * was built the others waited in the call forever (or until the timeout, then GR_ERR_TIMEOUT), so
 * a hang here is the failure, and ctest's timeout catches it.
 *
 * Options: --timeout (a 20 s timeout: gpurun's own algorithms), --check (check mode). Run with and
 * without GPURUN_COLL_ALGO=mpi: the shared-memory path carries the refusal in its descriptor, the
 * MPI algorithms agree on a verdict first. */
#include <gpurun/coll.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size, failures, opt_timeout, opt_check;

#include "expect.h"
#include "expect_refused.h"
#include "refuse_cases.h"
#include "world_comm.h"

/* The communicator still works, with fresh data on every rank. */
static int round_no;
static void still_works(gr_comm *c, const char *after) {
  round_no++;
  int32_t v[5], b[3];
  fresh_inputs(v, 5, b, round_no);
  gr_status st = gr_allreduce(v, v, 5, GR_INT32, GR_SUM, c, NULL);
  expect_fresh_sum("allreduce", after, st, v, 5, round_no);
  /* a broadcast from the last rank: the others' next call sees its new data */
  st = gr_broadcast(b, b, 3, GR_INT32, size - 1, c, NULL);
  expect_fresh_broadcast(after, st, b, round_no);
}

/* One group over three communicators (world, the pairs {0,1} {2,3} ..., world in reverse order),
 * listed in a different order on odd and even ranks; one failure on the first pair (rank 1: a
 * refused call; in check mode also a count that differs). Every communicator's calls run on all
 * of its ranks or on none: the pair {0,1} fails (both ranks), the others run theirs, and the
 * allreduces on world and its reverse are exact everywhere. The hang this guards against: with
 * check mode, the other pairs post their world allreduce while ranks 0 and 1 post nothing. */
static void groups_over_communicators(gr_comm *world) {
  gr_comm *pair = NULL, *rev = NULL;
  EXPECT_ST(gr_comm_split(world, rank / 2, rank, &pair), GR_OK);
  EXPECT_ST(gr_comm_split(world, 0, size - rank, &rev), GR_OK);
  if (!pair || !rev) return;
  int in_first_pair = rank < 2;
  for (int variant = 0; variant < (opt_check ? 2 : 1); variant++) {
    int64_t w[3], r[3], p[4];
    for (int i = 0; i < 3; i++)
      w[i] = (rank + 1) * (i + 1), r[i] = (rank + 1) * 10 * (i + 1);
    for (int i = 0; i < 4; i++)
      p[i] = rank;
    size_t pcount = variant == 1 && rank == 1 ? 3 : 4; /* a count mismatch on the first pair */
    const void *psend = variant == 0 && rank == 1 ? NULL : p; /* a refusal there */
    gr_status want_p = variant == 0 && rank == 1 ? GR_ERR_INVALID : GR_OK;
    EXPECT_ST(gr_group_start(), GR_OK);
    if (rank % 2 == 0) {
      EXPECT_ST(gr_allreduce(w, w, 3, GR_INT64, GR_SUM, world, NULL), GR_OK);
      EXPECT_ST(gr_allreduce(psend, p, pcount, GR_INT64, GR_MAX, pair, NULL), want_p);
      EXPECT_ST(gr_allreduce(r, r, 3, GR_INT64, GR_SUM, rev, NULL), GR_OK);
    } else {
      EXPECT_ST(gr_allreduce(r, r, 3, GR_INT64, GR_SUM, rev, NULL), GR_OK);
      EXPECT_ST(gr_allreduce(psend, p, pcount, GR_INT64, GR_MAX, pair, NULL), want_p);
      EXPECT_ST(gr_allreduce(w, w, 3, GR_INT64, GR_SUM, world, NULL), GR_OK);
    }
    gr_status st = gr_group_end();
    gr_status want = !in_first_pair ? GR_OK : variant == 0 ? GR_ERR_INVALID : GR_ERR_MISMATCH;
    if (st != want)
      FAIL("group over three communicators (variant %d): %s, expected %s (%s)", variant,
           gr_status_name(st), gr_status_name(want), gr_last_error());
    int64_t s = (int64_t)size * (size + 1) / 2;
    for (int i = 0; i < 3; i++)
      if (w[i] != s * (i + 1) || r[i] != 10 * s * (i + 1))
        FAIL("group over three communicators (variant %d): world %lld, reverse %lld, expected "
             "%lld, %lld",
             variant, (long long)w[i], (long long)r[i], (long long)(s * (i + 1)),
             (long long)(10 * s * (i + 1)));
    int partner_max = rank % 2 == 0 && rank + 1 < size ? rank + 1 : rank;
    if (!in_first_pair)
      for (int i = 0; i < 4; i++)
        if (p[i] != partner_max)
          FAIL("pair allreduce: p[%d] = %lld, expected %d", i, (long long)p[i], partner_max);
  }
  still_works(world, "groups over three communicators");
  int64_t v = 1;
  EXPECT_ST(gr_allreduce(&v, &v, 1, GR_INT64, GR_SUM, pair, NULL), GR_OK);
  if (v != (rank / 2 * 2 + 1 < size ? 2 : 1))
    FAIL("pair allreduce after the groups: %lld", (long long)v);
  EXPECT_ST(gr_comm_destroy(pair), GR_OK);
  EXPECT_ST(gr_comm_destroy(rev), GR_OK);
}

#define BIG 70000 /* int32: several shared-memory rounds, single copy where it is on */

static void run(void) {
  gr_comm *c = world_comm(NULL, opt_timeout ? 20 : 0, opt_check); /* the MPI backend */
  if (!c) MPI_Abort(MPI_COMM_WORLD, 1);
  const int R = size - 1; /* the refusing rank */
  int me = rank == R;
  int32_t *a = calloc((size_t)BIG * size, sizeof *a), *b = calloc((size_t)BIG * size, sizeof *b);
  for (int i = 0; i < BIG; i++)
    a[i] = i % 1000;
  gr_status st;

  refuse_null_recv(c, a, b);

  st = gr_allreduce(me ? NULL : a, b, BIG, GR_INT32, GR_SUM, c, NULL);
  refused("a large allreduce with a NULL send", st, R, "send is NULL", "send");
  still_works(c, "a large allreduce with a NULL send");

  refuse_overlap_and_root(c, a, b);

  st = gr_broadcast(a, me ? NULL : b, 16, GR_INT32, 0, c, NULL);
  refused("broadcast with a NULL recv off the root", st, R, "recv is NULL", "recv");
  still_works(c, "broadcast with a NULL recv");

  refuse_reduce_and_allgather(c, a, b);

  st = gr_allgather(a, me ? NULL : b, 3, GR_UINT8, c, NULL);
  refused("allgather with a NULL recv", st, R, "recv is NULL", "recv");
  still_works(c, "allgather with a NULL recv");

  refuse_scatter_alltoall_requests(c, a, b);
  refuse_group_multi_everyone(c, a, b);

  groups_over_communicators(c);
  EXPECT_ST(gr_comm_destroy(c), GR_OK);
  free(a);
  free(b);
}

int main(int argc, char **argv) {
  return refuse_main(argc, argv, run, "refuse", "GPURUN_COLL_ALGO");
}
