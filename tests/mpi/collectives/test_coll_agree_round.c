/* The one agreement round of the collectives (collectives/gr_agree.h), driven directly on a
 * communicator of every rank, one mode per run:
 *   values   MIN, MAX and MIN-and-MAX of values that differ per rank (the most a round carries,
 *            negatives, the extremes), a pass-or-fail round where one rank says no (every rank
 *            sees it) and where all pass, a refusing rank's particulars to every rank
 *            (gr__agree_bcast), and the rounds a rank refuses itself (bad n, INT64_MIN under
 *            MIN-and-MAX): GR_ERR_INTERNAL with a sentence and no MPI call, so the next round
 *            still works
 *   late     a 1 s timeout; the ranks but 0 compute for 6 s before they join a round and then a
 *            gr__agree_bcast. Rank 0 gives up on each within its bound (GR_ERR_TIMEOUT after 1
 *            to 3 s on a loaded machine, a sentence naming the round, the communicator and the
 *            timeout) and destroys the communicator (GR_OK). The late ranks then complete both
 *            rounds against rank 0's abandoned requests (their results include rank 0's values);
 *            meanwhile rank 0 keeps calling MPI and watches the out buffers it passed: nothing may
 *            write them after the calls returned (MPI writes heap copies the lost list owns), nor
 *            crash afterwards or at MPI_Finalize (the ASan build runs this mode too). */
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

/* c's sentence holds sub */
#define EXPECT_ERR(c, sub)                                                                         \
  do {                                                                                             \
    if (!strstr((c)->err, (sub)))                                                                  \
      FAIL("the round's sentence \"%s\" does not contain \"%s\"", (c)->err, (sub));                \
  } while (0)

/* rank r's value i: distinct per rank, negatives and the extremes among them */
static int64_t value(int r, int i) {
  if (i == 0) return r == 1 ? INT64_MAX : r;
  if (i == 1) return r == size - 1 ? INT64_MIN + 1 : -r;
  return (int64_t)(i * 1000003) * (r % 2 ? -1 : 1) + r * i;
}

static void values(void) {
  gr_comm *c = agree_comm(60);
  enum { N = GR__AGREE_MAX_N };
  int64_t in[N], out[2 * N], lo[N], hi[N];
  for (int i = 0; i < N; i++) {
    in[i] = value(rank, i);
    lo[i] = hi[i] = value(0, i);
    for (int r = 1; r < size; r++) {
      int64_t v = value(r, i);
      if (v < lo[i]) lo[i] = v;
      if (v > hi[i]) hi[i] = v;
    }
  }
  EXPECT_OK(gr__agree(c, "the test's values", GR__AGREE_MIN, in, out, N));
  for (int i = 0; i < N; i++)
    EXPECT_EQ(out[i], lo[i]);
  EXPECT_OK(gr__agree(c, "the test's values", GR__AGREE_MAX, in, out, N));
  for (int i = 0; i < N; i++)
    EXPECT_EQ(out[i], hi[i]);
  for (int i = 0; i < 2 * N; i++)
    out[i] = 7;
  EXPECT_OK(gr__agree(c, "the test's values", GR__AGREE_MINMAX, in, out, N));
  for (int i = 0; i < N; i++) {
    EXPECT_EQ(out[i], lo[i]);
    EXPECT_EQ(out[N + i], hi[i]);
  }
  /* one value, in place of the caller's array: in and out may be one */
  int64_t one = rank + 5;
  EXPECT_OK(gr__agree(c, "one value", GR__AGREE_MAX, &one, &one, 1));
  EXPECT_EQ(one, size + 4);

  /* pass or fail: the last rank says no, every rank sees it; then all pass */
  int all = -1;
  EXPECT_OK(gr__agree_ok(c, "the test's verdict", rank != size - 1, &all));
  EXPECT_EQ(all, 0);
  EXPECT_EQ(gr__agree_all(c, "the test's verdict", 1), 1);
  EXPECT_EQ(gr__agree_all(c, "the test's verdict", rank == 0 ? 0 : 5), 0);

  /* the last rank's particulars to every rank */
  char said[64];
  snprintf(said, sizeof said, "rank %d's own words", rank);
  EXPECT_OK(gr__agree_bcast(c, "the test's words", said, sizeof said, size - 1));
  char want[64];
  snprintf(want, sizeof want, "rank %d's own words", size - 1);
  if (strcmp(said, want) != 0) FAIL("gr__agree_bcast gave \"%s\", expected \"%s\"", said, want);

  /* rounds this rank refuses itself: a sentence, no MPI call (every rank refuses alike here) */
  EXPECT_ST(gr__agree(c, "too many values", GR__AGREE_MIN, in, out, N + 1), GR_ERR_INTERNAL);
  EXPECT_ERR(c, "too many values over communicator");
  EXPECT_ST(gr__agree(c, "no values", GR__AGREE_MAX, in, out, 0), GR_ERR_INTERNAL);
  int64_t bad[2] = {1, INT64_MIN};
  EXPECT_ST(gr__agree(c, "INT64_MIN", GR__AGREE_MINMAX, bad, out, 2), GR_ERR_INTERNAL);
  EXPECT_ERR(c, "value 1 is INT64_MIN");
  EXPECT_ST(gr__agree_bcast(c, "a rank out of range", said, sizeof said, size), GR_ERR_INTERNAL);
  /* ... and the next round works */
  one = rank;
  EXPECT_OK(gr__agree(c, "after the refusals", GR__AGREE_MINMAX, &one, out, 1));
  EXPECT_EQ(out[0], 0);
  EXPECT_EQ(out[1], size - 1);
  EXPECT_OK(gr_comm_destroy(c));
}

static int64_t *kept_out;
static char *kept_said;

static void late(void) {
  const double timeout = 1.0, late_by = 6.0, slack = 2.0; /* slack: a loaded machine */
  gr_comm *c = agree_comm(timeout);
  enum { N = 4 };
  /* heap, kept reachable at the end: were they written after all, that must not corrupt memory */
  int64_t *in = malloc(N * sizeof *in), *out = malloc(2 * N * sizeof *out);
  char *said = malloc(256), copy_said[256];
  int64_t copy_out[2 * N];
  REQUIRE(in && out && said);
  for (int i = 0; i < N; i++)
    in[i] = (int64_t)(rank + 1) * (i + 1);
  for (int i = 0; i < 2 * N; i++)
    out[i] = -4242;
  snprintf(said, 256, "rank %d's words", rank);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) {
    double t0 = gr_test_now();
    gr_status st = gr__agree(c, "the late round", GR__AGREE_MINMAX, in, out, N);
    double t1 = gr_test_now();
    EXPECT_EQ(st, GR_ERR_TIMEOUT);
    EXPECT_ERR(c, "the agreement on the late round over communicator ");
    EXPECT_ERR(c, c->id);
    EXPECT_ERR(c, "did not complete within 1 s (the communicator's timeout)");
    if (t1 - t0 < timeout || t1 - t0 > timeout + slack)
      FAIL("the round gave up after %.2f s; its bound is %.1f s", t1 - t0, timeout);
    st = gr__agree_bcast(c, "the late words", said, 256, size - 1);
    double t2 = gr_test_now();
    EXPECT_EQ(st, GR_ERR_TIMEOUT);
    EXPECT_ERR(c, "the late words over communicator ");
    EXPECT_ERR(c, "did not reach every rank within 1 s");
    if (t2 - t1 < timeout || t2 - t1 > timeout + slack)
      FAIL("the words gave up after %.2f s; their bound is %.1f s", t2 - t1, timeout);
    for (int i = 0; i < 2 * N; i++)
      if (out[i] != -4242) FAIL("out[%d] is %lld after a timed-out round", i, (long long)out[i]);
    if (strcmp(said, "rank 0's words") != 0) FAIL("the words became \"%s\"", said);
    printf("agree_round late: rank 0 gave up after %.2f s and %.2f s: %s\n", t1 - t0, t2 - t1,
           c->err);
    EXPECT_OK(gr_comm_destroy(c));
    double gone = gr_test_now();
    memcpy(copy_out, out, sizeof copy_out);
    memcpy(copy_said, said, sizeof copy_said);
    /* out and said hold what they held at gr_comm_destroy while the late ranks complete both */
    agree_late_watch(2, (const void *[]){out, said}, (const void *[]){copy_out, copy_said},
                     (size_t[]){sizeof copy_out, sizeof copy_said}, gone);
  } else {
    gr_test_spin(late_by);
    /* rank 0's requests are still in MPI: the late ranks' rounds complete against them */
    EXPECT_OK(gr__agree(c, "the late round", GR__AGREE_MINMAX, in, out, N));
    for (int i = 0; i < N; i++) {
      EXPECT_EQ(out[i], i + 1);
      EXPECT_EQ(out[N + i], (int64_t)size * (i + 1));
    }
    EXPECT_OK(gr__agree_bcast(c, "the late words", said, 256, size - 1));
    char want[256];
    snprintf(want, sizeof want, "rank %d's words", size - 1);
    if (strcmp(said, want) != 0) FAIL("the words are \"%s\", expected \"%s\"", said, want);
    EXPECT_OK(gr_comm_destroy(c));
    agree_late_arrive();
  }
  free(in);
  kept_out = out;
  kept_said = said;
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
  else
    FATAL("unknown mode '%s' (values, late)", mode);
  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) printf("agree_round %s: %d failures\n", mode, total);
  MPI_Finalize();
  return total ? 1 : 0;
}
