/* A call that one rank refuses locally (issue 18): the refusing rank still takes part, and every
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

/* The communicator still works, with fresh data on every rank. */
static int round_no;
static void still_works(gr_comm *c, const char *after) {
  round_no++;
  int32_t v[5];
  for (int i = 0; i < 5; i++)
    v[i] = (rank + 1) * (i + round_no);
  gr_status st = gr_allreduce(v, v, 5, GR_INT32, GR_SUM, c, NULL);
  int32_t s = size * (size + 1) / 2;
  for (int i = 0; i < 5; i++)
    if (st != GR_OK || v[i] != s * (i + round_no)) {
      FAIL("allreduce after %s: %s, v[%d] = %d, expected %d (%s)", after, gr_status_name(st), i,
           v[i], s * (i + round_no), gr_last_error());
      break;
    }
  /* a broadcast from the last rank: the others' next call sees its new data */
  int32_t b[3] = {-1, -1, -1};
  if (rank == size - 1) b[0] = 7 * round_no, b[1] = 8 * round_no, b[2] = 9 * round_no;
  st = gr_broadcast(b, b, 3, GR_INT32, size - 1, c, NULL);
  if (st != GR_OK || b[0] != 7 * round_no || b[1] != 8 * round_no || b[2] != 9 * round_no)
    FAIL("broadcast after %s: %s, %d %d %d (%s)", after, gr_status_name(st), b[0], b[1], b[2],
         gr_last_error());
}

/* One group over three communicators (world, the pairs {0,1} {2,3} ..., world in reverse order),
 * listed in a different order on odd and even ranks; one failure on the first pair (rank 1: a
 * refused call; in check mode also a count that differs). Every communicator's calls run on all
 * of its ranks or on none: the pair {0,1} fails (both ranks), the others run theirs, and the
 * allreduces on world and its reverse are exact everywhere. Before, with check mode, the other
 * pairs posted their world allreduce while ranks 0 and 1 posted nothing, and the job hung. */
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
  gr_comm_config cfg;
  gr_comm_config_init(&cfg);
  cfg.backend = GR_BACKEND_MPI;
  cfg.timeout_s = opt_timeout ? 20 : 0;
  cfg.check = opt_check;
  gr_comm *c = NULL;
  if (gr_comm_create(MPI_COMM_WORLD, &cfg, &c) != GR_OK) {
    fprintf(stderr, "[rank %d] gr_comm_create: %s\n", rank, gr_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  const int R = size - 1; /* the refusing rank */
  int me = rank == R;
  int32_t *a = calloc((size_t)BIG * size, sizeof *a), *b = calloc((size_t)BIG * size, sizeof *b);
  for (int i = 0; i < BIG; i++)
    a[i] = i % 1000;
  gr_status st;

  st = gr_allreduce(a, me ? NULL : b, 4, GR_INT32, GR_SUM, c, NULL);
  refused("allreduce with a NULL recv", st, R, "recv is NULL", "recv");
  still_works(c, "allreduce with a NULL recv");

  st = gr_allreduce(me ? NULL : a, b, BIG, GR_INT32, GR_SUM, c, NULL);
  refused("a large allreduce with a NULL send", st, R, "send is NULL", "send");
  still_works(c, "a large allreduce with a NULL send");

  st = gr_allreduce(a, me ? a + 1 : b, 8, GR_FLOAT32, GR_MAX, c, NULL);
  refused("allreduce with overlapping buffers", st, R, "overlap", "overlap");
  still_works(c, "allreduce with overlapping buffers");

  /* a root out of range on one rank; then its next, correct broadcast gets the new data */
  for (int i = 0; i < 4; i++)
    b[i] = rank == 0 ? 100 + i : -1;
  st = gr_broadcast(b, b, 4, GR_INT32, me ? size : 0, c, NULL);
  refused("broadcast with a root out of range", st, R, "out of range", "root");
  for (int i = 0; i < 4; i++)
    b[i] = rank == 0 ? 200 + i : -1;
  EXPECT_ST(gr_broadcast(b, b, 4, GR_INT32, 0, c, NULL), GR_OK);
  for (int i = 0; i < 4; i++)
    if (b[i] != 200 + i)
      FAIL("broadcast after a refused one: b[%d] = %d, expected %d", i, b[i], 200 + i);
  still_works(c, "broadcast with a root out of range");

  st = gr_broadcast(a, me ? NULL : b, 16, GR_INT32, 0, c, NULL);
  refused("broadcast with a NULL recv off the root", st, R, "recv is NULL", "recv");
  still_works(c, "broadcast with a NULL recv");

  st = gr_reduce(me ? NULL : a, b, 6, GR_INT64, GR_SUM, 0, c, NULL);
  refused("reduce with a NULL send", st, R, "send is NULL", "send");
  still_works(c, "reduce with a NULL send");

  /* gr_allgather(v, v, n): in place on rank 0, overlapping elsewhere (refused by ranks 1..) */
  st = gr_allgather(b, b, 4, GR_INT32, c, NULL);
  if (size > 1) refused("allgather(v, v, n)", st, rank == 0 ? 1 : rank, "overlaps recv", "overlap");
  still_works(c, "allgather(v, v, n)");

  st = gr_allgather(a, me ? NULL : b, 3, GR_UINT8, c, NULL);
  refused("allgather with a NULL recv", st, R, "recv is NULL", "recv");
  still_works(c, "allgather with a NULL recv");

  st = gr_reduce_scatter(a, me ? NULL : b, 5, GR_INT32, GR_MIN, c, NULL);
  refused("reduce_scatter with a NULL recv", st, R, "recv is NULL", "recv");
  still_works(c, "reduce_scatter with a NULL recv");

  st = gr_alltoall(me ? NULL : a, b, 2, GR_INT32, c, NULL);
  refused("alltoall with a NULL send", st, R, "send is NULL", "send");
  still_works(c, "alltoall with a NULL send");

  /* non-blocking: on the shared-memory path and in check mode the refusing rank has no request
   * and the others fail at the start or the wait; on the MPI algorithms every rank gets a request
   * whose wait fails (test_coll_reqrefuse.c has the cases there). */
  gr_request *q = NULL;
  st = gr_iallreduce(a, me ? NULL : b, 4, GR_INT32, GR_SUM, c, NULL, &q);
  if (st == GR_OK && q)
    st = gr_wait(&q);
  else if (q)
    FAIL("a refused gr_iallreduce left a request");
  refused("gr_iallreduce with a NULL recv", st, R, "recv is NULL", "recv");
  still_works(c, "gr_iallreduce with a NULL recv");
  st = gr_ibroadcast(a, b, 4, GR_INT32, me ? -1 : 0, c, NULL, &q);
  if (st == GR_OK && q) st = gr_wait(&q);
  refused("gr_ibroadcast with a root out of range", st, R, "out of range", "root");
  still_works(c, "gr_ibroadcast with a root out of range");

  /* a group: the refusing rank's second call */
  EXPECT_ST(gr_group_start(), GR_OK);
  EXPECT_ST(gr_allreduce(a, b, 4, GR_INT32, GR_SUM, c, NULL), GR_OK);
  EXPECT_ST(gr_allreduce(me ? NULL : a, b + 4, 4, GR_INT32, GR_SUM, c, NULL),
            me ? GR_ERR_INVALID : GR_OK);
  st = gr_group_end();
  refused("a group with a refused call", st, R, "", "send");
  still_works(c, "a group with a refused call");

  /* gr_allreduce_multi with a NULL buffer on one rank */
  const void *s2[2] = {a, a + 8};
  void *r2[2] = {b, me ? NULL : b + 8};
  size_t n2[2] = {8, 8};
  st = gr_allreduce_multi(s2, r2, n2, 2, GR_INT32, GR_SUM, c, NULL);
  refused("gr_allreduce_multi with a NULL buffer", st, R, "recv is NULL", "recv");
  still_works(c, "gr_allreduce_multi with a NULL buffer");

  /* every rank refuses alike: the same status everywhere, and nothing hangs */
  EXPECT_ST(gr_allreduce(a, b, 4, GR_INT32, GR_AVG, c, NULL), GR_ERR_INVALID);
  EXPECT_ST(gr_broadcast(a, b, 4, GR_INT32, -3, c, NULL), GR_ERR_INVALID);
  still_works(c, "refusals on every rank");

  groups_over_communicators(c);
  EXPECT_ST(gr_comm_destroy(c), GR_OK);
  free(a);
  free(b);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  for (int i = 1; i < argc; i++) {
    opt_timeout |= strcmp(argv[i], "--timeout") == 0;
    opt_check |= strcmp(argv[i], "--check") == 0;
  }
  if (size > 1) run();
  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0)
    printf("refuse%s%s%s: %d failures\n", opt_timeout ? " --timeout" : "",
           opt_check ? " --check" : "", getenv("GPURUN_COLL_ALGO") ? " (GPURUN_COLL_ALGO set)" : "",
           total);
  MPI_Finalize();
  return total ? 1 : 0;
}
