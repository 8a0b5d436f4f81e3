/* The shared wait-for analysis (tools/waitfor) on hand-made descriptions: send/receive chains,
 * cycles, the members behind in a collective, ranks without data, the blockers along every target
 * (held up, deadlocked), hostile descriptions, and 4096 ranks in bounded time and memory. Each
 * case states its answer from the description it builds. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gr_test_clock.h"
#include "gr_waitfor.h"

/* A description under construction: rows by rank, communicators, lines. */
typedef struct {
  gr__wf_rank r[64];
  gr__wf_comm c[4];
  gr__wf_member m[256];
  int peers[64][4];
  int nr, nc, nm;
} desc;

static int row(desc *d, int rank) {
  d->r[d->nr] = (gr__wf_rank){.rank = rank, .have = 1, .comm = -1};
  return d->nr++;
}

static void p2p(desc *d, int row_, int comm, int npeers, const int *peers) {
  if (npeers) memcpy(d->peers[row_], peers, (size_t)npeers * sizeof *peers);
  d->r[row_].comm = comm;
  d->r[row_].p2p = 1;
  d->r[row_].peers = d->peers[row_];
  d->r[row_].npeers = npeers;
}

static void coll(desc *d, int row_, int comm, double pos) {
  d->r[row_].comm = comm;
  d->r[row_].p2p = 0;
  d->r[row_].pos = pos;
}

static void line(desc *d, int row_, int comm, double entered) {
  d->m[d->nm++] = (gr__wf_member){row_, comm, entered};
}

static gr__wf *analyse(const desc *d) {
  gr__wf_input in = {d->r, d->nr, d->c, d->nc, d->m, d->nm};
  gr__wf *w = NULL;
  assert_int_equal(gr__wf_analyse(&in, &w), GR_OK);
  assert_non_null(w);
  return w;
}

static void assert_targets(const gr__wf *w, int row_, int n, const int *want) {
  int nt;
  const int *t = gr__wf_targets(w, row_, &nt);
  assert_int_equal(nt, n);
  for (int k = 0; k < n; k++)
    assert_int_equal(t[k], want[k]);
}

static void assert_end(const gr__wf *w, int row_, int rank, int kind) {
  int ne;
  const gr__wf_end *e = gr__wf_ends(w, &ne);
  int k = gr__wf_end_of(w, row_);
  assert_true(k >= 0 && k < ne);
  assert_int_equal(e[k].rank, rank);
  assert_int_equal(e[k].kind, kind);
}

/* 0 receives from 1, 1 from 2, 2 left no data (no row): the chain ends at 2, which the blockers
 * cannot flag; with a row for 2 without data, they flag it. */
static void test_p2p_chain(void **state) {
  (void)state;
  desc d = {.nc = 1, .c = {{3, 1}}};
  int r0 = row(&d, 0), r1 = row(&d, 1);
  p2p(&d, r0, 0, 1, (int[]){1});
  p2p(&d, r1, 0, 1, (int[]){2});
  gr__wf *w = analyse(&d);
  assert_true(gr__wf_waiting(w, r0) && gr__wf_waiting(w, r1));
  assert_targets(w, r0, 1, (int[]){1});
  assert_end(w, r0, 2, GR__WF_END_NO_DATA);
  assert_int_equal(gr__wf_end_of(w, r0), gr__wf_end_of(w, r1));
  int ne;
  gr__wf_ends(w, &ne);
  assert_int_equal(ne, 1);
  unsigned char start[3] = {1, 0, 0}, block[3];
  assert_int_equal(gr__wf_blockers(w, start, block), 0);
  gr__wf_free(w);

  int r2 = row(&d, 2);
  d.r[r2].have = 0;
  w = analyse(&d);
  assert_false(gr__wf_waiting(w, r2));
  assert_end(w, r0, 2, GR__WF_END_NO_DATA);
  assert_int_equal(gr__wf_blockers(w, start, block), 1);
  assert_int_equal(block[r2], GR__WF_BLOCKS);
  assert_int_equal(block[r1], 0); /* held up by 2 */
  gr__wf_free(w);
}

/* 0 -> 1 -> 2 -> 0 in receives: the chain closes where it started; every rank is deadlocked. A
 * rank in no call at the end of a chain ends it instead. */
static void test_cycle(void **state) {
  (void)state;
  desc d = {.nc = 1, .c = {{3, 1}}};
  for (int r = 0; r < 3; r++)
    p2p(&d, row(&d, r), 0, 1, (int[]){(r + 1) % 3});
  gr__wf *w = analyse(&d);
  assert_end(w, 0, 0, GR__WF_END_CYCLE);
  assert_end(w, 2, 0, GR__WF_END_CYCLE);
  unsigned char start[3] = {1, 0, 0}, block[3];
  assert_int_equal(gr__wf_blockers(w, start, block), 3);
  for (int r = 0; r < 3; r++)
    assert_int_equal(block[r], GR__WF_DEADLOCK);
  gr__wf_free(w);

  d.r[2].comm = -1; /* 2 computes */
  w = analyse(&d);
  assert_end(w, 0, 2, GR__WF_END_NOT_WAITING);
  assert_int_equal(gr__wf_blockers(w, start, block), 1);
  assert_int_equal(block[2], GR__WF_BLOCKS);
  gr__wf_free(w);

  /* a rank that waits for itself (a receive from itself) is a cycle of one */
  desc s = {.nc = 1, .c = {{1, 1}}};
  p2p(&s, row(&s, 0), 0, 1, (int[]){0});
  w = analyse(&s);
  assert_end(w, 0, 0, GR__WF_END_CYCLE);
  unsigned char one = 1, b1;
  assert_int_equal(gr__wf_blockers(w, &one, &b1), 1);
  assert_int_equal(b1, GR__WF_DEADLOCK);
  gr__wf_free(w);
}

/* World of 4: 0, 1, 3 in allreduce #10; 2 entered #9 and computes. They wait for 2, all three by
 * one list; the blockers of the three are 2. */
static void test_collective_laggard(void **state) {
  (void)state;
  desc d = {.nc = 1, .c = {{4, 1}}};
  for (int r = 0; r < 4; r++) {
    row(&d, r);
    line(&d, r, 0, r == 2 ? 9 : 10);
    if (r != 2) coll(&d, r, 0, 10);
  }
  gr__wf *w = analyse(&d);
  assert_targets(w, 0, 1, (int[]){2});
  int n0, n3;
  assert_ptr_equal(gr__wf_targets(w, 0, &n0), gr__wf_targets(w, 3, &n3)); /* shared */
  assert_end(w, 1, 2, GR__WF_END_NOT_WAITING);
  unsigned char start[4] = {1, 1, 0, 1}, block[4];
  assert_int_equal(gr__wf_blockers(w, start, block), 1);
  assert_int_equal(block[2], GR__WF_BLOCKS);
  gr__wf_free(w);

  /* everyone entered: nobody behind; the waiters themselves are not named */
  d.m[2].entered = 10;
  w = analyse(&d);
  assert_targets(w, 0, 0, NULL);
  assert_end(w, 0, 0, GR__WF_END_ALL_IN);
  assert_int_equal(gr__wf_blockers(w, start, block), 0);
  gr__wf_free(w);
}

/* World of 3: 0 in a collective at #5; 1 and 2 behind (#4); 1 receives from 2, 2 computes: 1 is
 * held up by 2, so 2 alone blocks. When 2 receives from 1 as well, they deadlock: both named. */
static void test_held_up_and_deadlock(void **state) {
  (void)state;
  desc d = {.nc = 1, .c = {{3, 1}}};
  for (int r = 0; r < 3; r++) {
    row(&d, r);
    line(&d, r, 0, r ? 4 : 5);
  }
  coll(&d, 0, 0, 5);
  p2p(&d, 1, 0, 1, (int[]){2});
  gr__wf *w = analyse(&d);
  assert_targets(w, 0, 2, (int[]){1, 2});
  assert_end(w, 0, 2, GR__WF_END_NOT_WAITING); /* 0 -> 1 -> 2 */
  unsigned char start[3] = {1, 0, 0}, block[3];
  assert_int_equal(gr__wf_blockers(w, start, block), 1);
  assert_int_equal(block[1], 0);
  assert_int_equal(block[2], GR__WF_BLOCKS);
  gr__wf_free(w);

  p2p(&d, 2, 0, 1, (int[]){1});
  w = analyse(&d);
  assert_end(w, 0, 1, GR__WF_END_CYCLE);
  assert_int_equal(gr__wf_blockers(w, start, block), 2);
  assert_int_equal(block[0], 0);
  assert_int_equal(block[1], GR__WF_DEADLOCK);
  assert_int_equal(block[2], GR__WF_DEADLOCK);
  gr__wf_free(w);

  /* 1 receives from 0, which waits in the collective for 1: a deadlock of 0 and 1, and 2 behind */
  p2p(&d, 1, 0, 1, (int[]){0});
  d.r[2].comm = -1;
  w = analyse(&d);
  assert_int_equal(gr__wf_blockers(w, start, block), 3);
  assert_int_equal(block[0], GR__WF_DEADLOCK);
  assert_int_equal(block[1], GR__WF_DEADLOCK);
  assert_int_equal(block[2], GR__WF_BLOCKS);
  gr__wf_free(w);
}

/* World of 5: 0-2 in a collective at #3, rank 3 behind, rank 4 without data: the waiters wait for
 * both, the one behind first. A rank that exited without a line is not waited for; one with data
 * but no line for the world is. */
static void test_no_data(void **state) {
  (void)state;
  desc d = {.nc = 1, .c = {{5, 1}}};
  for (int r = 0; r < 4; r++) {
    row(&d, r);
    line(&d, r, 0, r == 3 ? 2 : 3);
    if (r < 3) coll(&d, r, 0, 3);
  }
  gr__wf *w = analyse(&d);
  assert_targets(w, 0, 2, (int[]){3, 4});
  assert_end(w, 0, 3, GR__WF_END_NOT_WAITING);
  gr__wf_free(w);

  d.m[3].entered = 3; /* rank 3 caught up: only 4 is missing */
  w = analyse(&d);
  assert_targets(w, 0, 1, (int[]){4});
  assert_end(w, 0, 4, GR__WF_END_NO_DATA);
  gr__wf_free(w);

  int r4 = row(&d, 4); /* rank 4 has data but no line for the world */
  w = analyse(&d);
  assert_targets(w, 0, 1, (int[]){4});
  assert_end(w, 0, 4, GR__WF_END_NOT_WAITING);
  gr__wf_free(w);

  d.r[r4].exited = 1;
  w = analyse(&d);
  assert_targets(w, 0, 0, NULL);
  assert_end(w, 0, 0, GR__WF_END_ALL_IN);
  gr__wf_free(w);
}

/* Another communicator of 3 with two known members, both in its collective: they wait for the
 * member no data names; a receive from any rank names no one and blocks when reached. */
static void test_unnamed(void **state) {
  (void)state;
  desc d = {.nc = 2, .c = {{3, 0}, {4, 1}}};
  for (int r = 0; r < 4; r++)
    row(&d, r);
  line(&d, 0, 0, 7);
  line(&d, 1, 0, 7);
  coll(&d, 0, 0, 7);
  coll(&d, 1, 0, 7);
  p2p(&d, 2, 1, 1, (int[]){3});
  p2p(&d, 3, 1, 0, NULL); /* from any source */
  gr__wf *w = analyse(&d);
  assert_targets(w, 0, 1, (int[]){-1});
  assert_end(w, 0, 0, GR__WF_END_UNNAMED);
  assert_end(w, 2, 3, GR__WF_END_ALL_IN);
  unsigned char start[4] = {1, 1, 1, 0}, block[4];
  assert_int_equal(gr__wf_blockers(w, start, block), 1);
  assert_int_equal(block[3], GR__WF_BLOCKS);
  gr__wf_free(w);
}

/* Descriptions the analysis refuses, and odd values it takes. */
static void test_hostile(void **state) {
  (void)state;
  gr__wf *w = NULL;
  gr__wf_rank r[2] = {{.rank = 3, .comm = -1}, {.rank = 1, .comm = -1}};
  gr__wf_input in = {r, 2, NULL, 0, NULL, 0};
  assert_int_equal(gr__wf_analyse(&in, &w), GR_ERR_INVALID); /* not in rank order */
  assert_null(w);
  r[1].rank = 3;
  assert_int_equal(gr__wf_analyse(&in, &w), GR_ERR_INVALID); /* twice */
  r[1] = (gr__wf_rank){.rank = 4, .have = 1, .comm = 2};
  assert_int_equal(gr__wf_analyse(&in, &w), GR_ERR_INVALID); /* no such communicator */
  gr__wf_comm c = {2, 1};
  gr__wf_member m = {5, 0, 1};
  gr__wf_input in2 = {r, 2, &c, 1, &m, 1};
  r[1].comm = 0;
  assert_int_equal(gr__wf_analyse(&in2, &w), GR_ERR_INVALID); /* a line of no row */
  /* positions that are not numbers, a line given twice, a negative size */
  desc d = {.nc = 1, .c = {{-5, 1}}};
  for (int k = 0; k < 3; k++) {
    row(&d, k);
    coll(&d, k, 0, k == 2 ? 1 : NAN);
    line(&d, k, 0, NAN);
    line(&d, k, 0, 0);
  }
  w = analyse(&d);
  for (int k = 0; k < 3; k++)
    assert_true(gr__wf_waiting(w, k));
  assert_targets(w, 2, 3, (int[]){0, 1, 2}); /* the furthest of each pair: 0 < 1 */
  unsigned char start[3] = {1, 1, 1}, block[3];
  assert_true(gr__wf_blockers(w, start, block) >= 0);
  assert_int_equal(gr__wf_row_of(w, 99), -1);
  assert_int_equal(gr__wf_end_of(w, 99), -1);
  assert_false(gr__wf_waiting(w, -1));
  gr__wf_free(w);
}

#define BIG 4096

/* 4096 ranks: half in a world collective waiting for the other half; a chain of receives through
 * every rank; a cycle through every rank. Each analysis well under a second, the collective's
 * list once for all its waiters. */
static void test_large(void **state) {
  (void)state;
  gr__wf_rank *r = calloc(BIG, sizeof *r);
  gr__wf_member *m = calloc(BIG, sizeof *m);
  int *peer = calloc(BIG, sizeof *peer);
  unsigned char *start = calloc(BIG, 1), *block = calloc(BIG, 1);
  assert_true(r && m && peer && start && block);
  gr__wf_comm c = {BIG, 1};
  for (int i = 0; i < BIG; i++) {
    r[i] = (gr__wf_rank){.rank = i, .have = 1, .comm = i < BIG / 2 ? 0 : -1, .pos = 100};
    m[i] = (gr__wf_member){i, 0, i < BIG / 2 ? 100 : 99};
    start[i] = i < BIG / 2;
  }
  gr__wf_input in = {r, BIG, &c, 1, m, BIG};
  gr__wf *w = NULL;
  double t0 = gr_test_now();
  assert_int_equal(gr__wf_analyse(&in, &w), GR_OK);
  int nt, nt2;
  const int *t = gr__wf_targets(w, 0, &nt);
  assert_int_equal(nt, BIG / 2);
  assert_int_equal(t[0], BIG / 2);
  assert_ptr_equal(t, gr__wf_targets(w, BIG / 2 - 1, &nt2));
  assert_int_equal(gr__wf_blockers(w, start, block), BIG / 2);
  double t_coll = gr_test_now() - t0;
  gr__wf_free(w);

  /* a chain: i receives from i + 1, the last computes */
  for (int i = 0; i < BIG; i++) {
    peer[i] = i + 1;
    r[i] = (gr__wf_rank){.rank = i,
                         .have = 1,
                         .comm = i < BIG - 1 ? 0 : -1,
                         .p2p = 1,
                         .peers = &peer[i],
                         .npeers = 1};
    start[i] = i == 0;
  }
  t0 = gr_test_now();
  assert_int_equal(gr__wf_analyse(&in, &w), GR_OK);
  assert_end(w, 0, BIG - 1, GR__WF_END_NOT_WAITING);
  assert_end(w, BIG / 2, BIG - 1, GR__WF_END_NOT_WAITING);
  assert_int_equal(gr__wf_blockers(w, start, block), 1);
  assert_int_equal(block[BIG - 1], GR__WF_BLOCKS);
  double t_chain = gr_test_now() - t0;
  gr__wf_free(w);

  /* a cycle through every rank */
  peer[BIG - 1] = 0;
  r[BIG - 1].comm = 0;
  t0 = gr_test_now();
  assert_int_equal(gr__wf_analyse(&in, &w), GR_OK);
  assert_end(w, 0, 0, GR__WF_END_CYCLE);
  assert_int_equal(gr__wf_blockers(w, start, block), BIG);
  double t_cycle = gr_test_now() - t0;
  gr__wf_free(w);
  print_message("4096 ranks: collective %.4f s, chain %.4f s, cycle %.4f s\n", t_coll, t_chain,
                t_cycle);
  assert_true(t_coll < 2 && t_chain < 2 && t_cycle < 2);
  free(r);
  free(m);
  free(peer);
  free(start);
  free(block);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_p2p_chain),
      cmocka_unit_test(test_cycle),
      cmocka_unit_test(test_collective_laggard),
      cmocka_unit_test(test_held_up_and_deadlock),
      cmocka_unit_test(test_no_data),
      cmocka_unit_test(test_unnamed),
      cmocka_unit_test(test_hostile),
      cmocka_unit_test(test_large),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
