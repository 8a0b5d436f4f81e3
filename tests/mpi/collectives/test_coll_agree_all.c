/* Agreement rounds over several communicators, posted before any is waited for
 * (gr__agree_post, gr__agree_wait: collectives/gr_agree.h), one mode per run:
 *   values  three communicators, each rank posting their rounds in its own order (rank r starts at
 *           communicator r mod 3): MIN, MAX and MIN-and-MAX of values that differ per rank, plus
 *           a round every rank refuses itself at its post (no values): that one reports
 *           GR_ERR_INTERNAL, the others their results, and the wait returns the refusal
 *   late    A (timeout 1 s) and B (timeout 30 s); the last rank joins A, then computes 5 s before
 *           it joins B. The others post both and wait: A passes, B gives up after A's 1 s (the
 *           earliest deadline of the rounds waited for together, not B's 30 s), its sentence
 *           naming B, the round and A's timeout; B's out is untouched, then and while the last
 *           rank completes B against their abandoned requests (its result includes their values)
 *   group   the same through gr_group_end (GPURUN_COLL_ALGO=mpi: the verdict rounds of
 *           ROUTE_AGREE): A and B with a 1 s timeout; rank 0 groups an allreduce on each, rank 1
 *           only A's, rank 2 only B's. Every rank's gr_group_end returns GR_ERR_TIMEOUT within its
 *           bound naming the agreement before the grouped allreduce on the communicator some rank
 *           never joined (A on rank 1, B on rank 2, B last on rank 0, both aborted there), nothing
 *           is sent (the buffers keep their values) and nothing hangs. */
#include <gpurun/coll.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gr_test_clock.h"
#include "gr_agree.h"

static int rank, size, failures;

#include "expect.h"
#include "agree_late.h"

/* s holds sub */
#define EXPECT_HAS(s, sub)                                                                         \
  do {                                                                                             \
    if (!strstr((s), (sub))) FAIL("the sentence \"%s\" does not contain \"%s\"", (s), (sub));      \
  } while (0)

/* rank r's value i on communicator j: distinct per rank and per communicator, negatives too */
static int64_t value(int r, int j, int i) {
  return (int64_t)(r * 7 + 3) * (i + 1) * (r % 2 ? -1 : 1) + 1000 * j;
}

static void values(void) {
  enum { NC = 3, N = 3 };
  gr_comm *c[NC];
  for (int j = 0; j < NC; j++)
    c[j] = agree_comm(60);
  const gr__agree_op op[NC] = {GR__AGREE_MIN, GR__AGREE_MAX, GR__AGREE_MINMAX};
  int64_t in[NC][N], out[NC][2 * N], refused_out = -7;
  for (int j = 0; j < NC; j++) {
    for (int i = 0; i < N; i++)
      in[j][i] = value(rank, j, i);
    for (int i = 0; i < 2 * N; i++)
      out[j][i] = -4242;
  }
  /* rounds in this rank's own order; slot NC is the refused round, between the others */
  gr__agree_round r[NC + 1];
  int order[NC + 1];
  for (int k = 0, j = rank % NC; k < NC; k++, j = (j + 1) % NC)
    order[k < 1 ? k : k + 1] = j;
  order[1] = -1;
  for (int k = 0; k < NC + 1; k++) {
    int j = order[k];
    if (j < 0) {
      EXPECT_ST(gr__agree_post(&r[k], c[0], "nothing", GR__AGREE_MAX, in[0], &refused_out, 0),
                GR_ERR_INTERNAL);
      EXPECT_HAS(c[0]->err, "the agreement on nothing over communicator");
      continue;
    }
    char *what = j == 0 ? "the lowest" : j == 1 ? "the highest" : "both";
    EXPECT_OK(gr__agree_post(&r[k], c[j], what, op[j], in[j], out[j], N));
  }
  EXPECT_ST(gr__agree_wait(r, NC + 1), GR_ERR_INTERNAL);
  EXPECT_EQ(refused_out, -7);
  for (int k = 0; k < NC + 1; k++) {
    int j = order[k];
    EXPECT_ST(r[k].st, j < 0 ? GR_ERR_INTERNAL : GR_OK);
    if (j < 0) continue;
    for (int i = 0; i < N; i++) {
      int64_t lo = value(0, j, i), hi = lo;
      for (int p = 1; p < size; p++) {
        int64_t v = value(p, j, i);
        if (v < lo) lo = v;
        if (v > hi) hi = v;
      }
      if (op[j] == GR__AGREE_MIN) EXPECT_EQ(out[j][i], lo);
      if (op[j] == GR__AGREE_MAX) EXPECT_EQ(out[j][i], hi);
      if (op[j] == GR__AGREE_MINMAX) {
        EXPECT_EQ(out[j][i], lo);
        EXPECT_EQ(out[j][N + i], hi);
      }
    }
    if (op[j] != GR__AGREE_MINMAX) /* nothing past the n values */
      for (int i = N; i < 2 * N; i++)
        EXPECT_EQ(out[j][i], -4242);
  }
  /* each communicator's next round still works */
  for (int j = 0; j < NC; j++) {
    int64_t one = rank, got = -1;
    EXPECT_OK(gr__agree(c[j], "after the rounds", GR__AGREE_MAX, &one, &got, 1));
    EXPECT_EQ(got, size - 1);
    EXPECT_OK(gr_comm_destroy(c[j]));
  }
}

static int64_t *kept_out;

static void late(void) {
  const double ta = 1.0, tb = 30.0, late_by = 5.0, slack = 3.0; /* slack: a loaded machine */
  gr_comm *a = agree_comm(ta), *b = agree_comm(tb);
  enum { N = 2 };
  int64_t ina[N], inb[N], outa[N];
  int64_t *outb = malloc(2 * N * sizeof *outb); /* kept reachable: a late write must not corrupt */
  REQUIRE(outb);
  for (int i = 0; i < N; i++)
    ina[i] = rank + i, inb[i] = (int64_t)(rank + 1) * (i + 1), outa[i] = -1;
  for (int i = 0; i < 2 * N; i++)
    outb[i] = -4242;
  MPI_Barrier(MPI_COMM_WORLD);
  gr__agree_round r[2];
  if (rank != size - 1) {
    double t0 = gr_test_now();
    EXPECT_OK(gr__agree_post(&r[0], a, "the first round", GR__AGREE_MAX, ina, outa, N));
    EXPECT_OK(gr__agree_post(&r[1], b, "the late round", GR__AGREE_MINMAX, inb, outb, N));
    EXPECT_ST(gr__agree_wait(r, 2), GR_ERR_TIMEOUT);
    double dt = gr_test_now() - t0;
    EXPECT_ST(r[0].st, GR_OK);
    EXPECT_ST(r[1].st, GR_ERR_TIMEOUT);
    for (int i = 0; i < N; i++)
      EXPECT_EQ(outa[i], size - 1 + i);
    if (dt < ta || dt > ta + slack)
      FAIL("the rounds gave up after %.2f s; the earliest deadline is %.1f s", dt, ta);
    EXPECT_HAS(b->err, "the agreement on the late round over communicator ");
    EXPECT_HAS(b->err, b->id);
    char bound[160];
    snprintf(bound, sizeof bound, "within 1 s (the timeout of communicator %s, the earliest",
             a->id);
    EXPECT_HAS(b->err, bound);
    for (int i = 0; i < 2 * N; i++)
      if (outb[i] != -4242) FAIL("out[%d] is %lld after a timed-out round", i, (long long)outb[i]);
    printf("agree_all late: rank %d gave up after %.2f s: %s\n", rank, dt, b->err);
    EXPECT_OK(gr_comm_destroy(b));
    double gone = gr_test_now();
    /* calling MPI past the last rank's arrival and a second more: nothing may write outb, which
     * the timed-out round was given */
    int64_t untouched[2 * N];
    for (int i = 0; i < 2 * N; i++)
      untouched[i] = -4242;
    agree_late_watch(1, (const void *[]){outb}, (const void *[]){untouched},
                     (size_t[]){sizeof untouched}, gone);
  } else {
    EXPECT_OK(gr__agree_post(&r[0], a, "the first round", GR__AGREE_MAX, ina, outa, N));
    EXPECT_OK(gr__agree_wait(r, 1));
    for (int i = 0; i < N; i++)
      EXPECT_EQ(outa[i], size - 1 + i);
    gr_test_spin(late_by);
    /* the others' requests are still in MPI: this round completes against them */
    EXPECT_OK(gr__agree_post(&r[1], b, "the late round", GR__AGREE_MINMAX, inb, outb, N));
    EXPECT_OK(gr__agree_wait(&r[1], 1));
    for (int i = 0; i < N; i++) {
      EXPECT_EQ(outb[i], i + 1);
      EXPECT_EQ(outb[N + i], (int64_t)size * (i + 1));
    }
    EXPECT_OK(gr_comm_destroy(b));
    agree_late_arrive();
  }
  EXPECT_OK(gr_comm_destroy(a));
  kept_out = outb;
}

static void group(void) {
  const double T = 1.0, MARGIN = 10.0; /* a bound on a hang, not a performance threshold */
  if (size != 3) FATAL("the group mode needs three ranks");
  gr_comm *a = agree_comm(T), *b = agree_comm(T);
  int32_t x[4] = {1, 2, 3, 4}, ya[4] = {-1, -1, -1, -1}, yb[4] = {-2, -2, -2, -2};
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = gr_test_now();
  EXPECT_ST(gr_group_start(), GR_OK);
  if (rank != 2) EXPECT_OK(gr_allreduce(x, ya, 4, GR_INT32, GR_SUM, a, NULL));
  if (rank != 1) EXPECT_OK(gr_allreduce(x, yb, 4, GR_INT32, GR_SUM, b, NULL));
  EXPECT_ST(gr_group_end(), GR_ERR_TIMEOUT);
  double dt = gr_test_now() - t0;
  if (dt < T || dt > T + MARGIN) FAIL("gr_group_end gave up after %.2f s, timeout %.1f s", dt, T);
  const char *e = gr_last_error();
  const gr_comm *missed = rank == 1 ? a : b; /* the last failure's */
  char want[160];
  snprintf(want, sizeof want, "(count=4, dtype=int32) on communicator %s ", missed->id);
  EXPECT_HAS(e, "the agreement on the arguments before grouped allreduce #1");
  EXPECT_HAS(e, want);
  EXPECT_HAS(e, "did not complete within 1 s");
  EXPECT_HAS(e, "now aborted");
  printf("agree_all group: rank %d after %.2f s: %s\n", rank, dt, e);
  for (int i = 0; i < 4; i++) {
    EXPECT_EQ(ya[i], -1);
    EXPECT_EQ(yb[i], -2);
  }
  /* the communicators whose agreement this rank gave up on are aborted, the other is not */
  if (rank != 2) EXPECT_ST(gr_barrier(a), GR_ERR_ABORTED);
  if (rank != 1) EXPECT_ST(gr_barrier(b), GR_ERR_ABORTED);
  EXPECT_OK(gr_comm_destroy(b));
  EXPECT_OK(gr_comm_destroy(a));
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char *mode = argc > 1 ? argv[1] : "values";
  if (size < 2) FATAL("needs two ranks or more");
  if (strcmp(mode, "values") == 0)
    values();
  else if (strcmp(mode, "late") == 0)
    late();
  else if (strcmp(mode, "group") == 0)
    group();
  else
    FATAL("unknown mode '%s' (values, late, group)", mode);
  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) printf("agree_all %s: %d failures\n", mode, total);
  MPI_Finalize();
  return total ? 1 : 0;
}
