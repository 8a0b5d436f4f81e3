/* The table of algorithm choice (collectives/gr_path.h, path.c) checked without MPI:
 *   - the algorithms' names (GR__ALGO_LIST) are distinct and every row that counts an algorithm is
 *     named as gr__algo_name names it; the MPI backend's rows have distinct names, fit
 *     GR__PATHS_MAX and have post, test and forget;
 *   - the rows GPURUN_COLL_ALGO may name and the words base/param.c accepts for rows are the same
 *     set (a row added as selectable without its word, or a word left behind, fails here);
 *   - the own allreduces' numbers choose the documented row for calls around each bound: pair at
 *     two ranks up to 256 bytes, rd up to 32 KiB, rabenseifner above at 4, 8, ... ranks, ring
 *     above otherwise, the MPI library without a timeout or for an empty call;
 *   - a backend whose table is longer than GR__PATHS_MAX fails the creation with a sentence. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "gr_algo_count.h"
#include "gr_mpi_be.h"
#include "gr_param.h"
#include "gr_path.h"

static void algo_names(void **state) {
  (void)state;
  for (int a = 0; a < GR__ALGO_COUNT; a++) {
    const char *n = gr__algo_name((gr__algo)a);
    assert_string_not_equal(n, "?");
    for (int b = 0; b < a; b++)
      if (strcmp(n, gr__algo_name((gr__algo)b)) == 0) fail_msg("algorithms %d and %d: %s", a, b, n);
  }
  assert_string_equal(gr__algo_name(GR__ALGO_COUNT), "?");
  assert_string_equal(gr__algo_name(GR__ALGO_PAIR), "pair");
  assert_string_equal(gr__algo_name(GR__ALGO_RD), "rd");
}

static void mpi_rows(void **state) {
  (void)state;
  int n = gr__paths_count(gr__mpi_paths);
  assert_true(n > 0 && n <= GR__PATHS_MAX);
  for (int i = 0; i < n; i++) {
    const gr__path *p = gr__mpi_paths[i];
    if (!p->name || !p->post || !p->test || !p->forget || !p->kinds)
      fail_msg("row %d (%s) lacks a name, post, test, forget or kinds", i, p->name ? p->name : "");
    if (p->algo >= 0 && strcmp(p->name, gr__algo_name((gr__algo)p->algo)) != 0)
      fail_msg("row %s counts its allreduces as %s", p->name, gr__algo_name((gr__algo)p->algo));
    for (int j = 0; j < i; j++)
      if (strcmp(p->name, gr__mpi_paths[j]->name) == 0) fail_msg("two rows named %s", p->name);
  }
  /* the last row takes every call */
  const gr__path *last = gr__mpi_paths[n - 1];
  assert_int_equal(last->kinds, GR__KINDS_ALL);
  assert_string_equal(last->name, "mpi");
}

static void selectable_words(void **state) {
  (void)state;
  const gr_param_def *d = gr__param_def(GR_PARAM_COLL_ALGO);
  assert_non_null(d);
  assert_non_null(d->words);
  int rows = 0, words = 0;
  for (int i = 0; gr__mpi_paths[i]; i++) {
    const gr__path *p = gr__mpi_paths[i];
    if (!p->select) continue;
    rows++;
    int v = -1;
    if (gr__parse_word(p->name, d->words, &v) != 0 || v != GR_COLL_ALGO_ROW)
      fail_msg("row %s may be selected by name, but GPURUN_COLL_ALGO's words (base/param.c) "
               "lack it",
               p->name);
    assert_ptr_equal(gr__path_named(gr__mpi_paths, p->name), p);
  }
  for (const gr_param_word *w = d->words; w->word; w++) {
    if (w->value != GR_COLL_ALGO_ROW) continue;
    words++;
    if (!gr__path_named(gr__mpi_paths, w->word))
      fail_msg("GPURUN_COLL_ALGO=%s names no row of the MPI backend's table that may be selected",
               w->word);
  }
  assert_int_equal(rows, words);
  assert_true(rows >= 4); /* pair, rd, rabenseifner, ring */
  /* blanks and case as the registry accepts them; a mode or another row's name is no row */
  assert_non_null(gr__path_named(gr__mpi_paths, "  PAIR "));
  assert_null(gr__path_named(gr__mpi_paths, "mpi"));
  assert_null(gr__path_named(gr__mpi_paths, "shm"));
  assert_null(gr__path_named(gr__mpi_paths, "pai"));
  assert_null(gr__path_named(gr__mpi_paths, NULL));
}

/* The row the MPI backend's table gives an allreduce on a communicator of P ranks without the
 * shared-memory and hierarchical rows (as GPURUN_COLL_ALGO=mpi leaves it): its own allreduces and
 * the MPI library, in the table's order. */
static const char *chosen(int P, size_t count, gr_dtype t, int timeout) {
  static gr_comm c;
  memset(&c, 0, sizeof c);
  c.size = P;
  c.npaths = 0;
  for (int i = 0; gr__mpi_paths[i]; i++)
    if (gr__mpi_paths[i]->select || gr__mpi_paths[i]->algo == GR__ALGO_MPI_LIB)
      c.paths[c.npaths++] = gr__mpi_paths[i];
  gr__call k;
  memset(&k, 0, sizeof k);
  k.kind = GR__ALLREDUCE;
  k.count = count;
  k.dtype = t;
  k.op = GR_SUM;
  k.root = -1;
  k.comm = &c;
  k.blocking_ok = !timeout;
  const gr__path *p = gr__path_choose(&k);
  return p ? p->name : "none";
}

static void choice(void **state) {
  (void)state;
  assert_string_equal(chosen(2, 2, GR_FLOAT32, 1), "pair"); /* 8 bytes */
  assert_string_equal(chosen(2, 1, GR_INT8, 1), "pair");
  assert_string_equal(chosen(2, 64, GR_FLOAT32, 1), "pair"); /* 256 bytes: the bound */
  assert_string_equal(chosen(2, 65, GR_FLOAT32, 1), "rd");
  assert_string_equal(chosen(3, 2, GR_FLOAT32, 1), "rd");
  assert_string_equal(chosen(4, 2, GR_FLOAT32, 1), "rd");
  assert_string_equal(chosen(2, 8192, GR_FLOAT32, 1), "rd"); /* 32 KiB */
  assert_string_equal(chosen(2, 8193, GR_FLOAT32, 1), "ring");
  assert_string_equal(chosen(3, 8193, GR_FLOAT32, 1), "ring");
  assert_string_equal(chosen(4, 8193, GR_FLOAT32, 1), "rabenseifner");
  assert_string_equal(chosen(8, 8193, GR_FLOAT32, 1), "rabenseifner");
  assert_string_equal(chosen(6, 8193, GR_FLOAT32, 1), "ring");
  assert_string_equal(chosen(2, 2, GR_FLOAT32, 0), "mpi"); /* no timeout */
  assert_string_equal(chosen(2, 0, GR_FLOAT32, 1), "mpi"); /* nothing to exchange */
}

/* A backend whose table has GR__PATHS_MAX + 1 rows. */
static gr_status too_many_post(const gr__path *p, gr__call *k, const void *s, void *r, int *d) {
  (void)p, (void)k, (void)s, (void)r, (void)d;
  return GR_OK;
}
static gr_status too_many_test(gr__call *k, int *done) {
  (void)k;
  *done = 1;
  return GR_OK;
}
static int too_many_forget(gr__call *k) {
  (void)k;
  return 1;
}

static void overflow(void **state) {
  (void)state;
  static const gr__path row = {.name = "row",
                               .algo = -1,
                               .refusal = GR__REFUSAL_AGREED,
                               .kinds = GR__KINDS_ALL,
                               .post = too_many_post,
                               .test = too_many_test,
                               .forget = too_many_forget};
  const gr__path *list[GR__PATHS_MAX + 2];
  for (int i = 0; i < GR__PATHS_MAX + 1; i++)
    list[i] = &row;
  list[GR__PATHS_MAX + 1] = NULL;
  gr__coll_ops ops;
  memset(&ops, 0, sizeof ops);
  ops.name = "test";
  ops.paths = list;
  static gr_comm c;
  memset(&c, 0, sizeof c);
  c.size = 1;
  c.ops = &ops;
  assert_int_equal(gr__paths_create(&c), GR_ERR_INTERNAL);
  assert_int_equal(c.npaths, 0);
  char want[160];
  snprintf(want, sizeof want,
           "the test backend's table has %d rows and a communicator keeps at most %d "
           "(GR__PATHS_MAX, gr_coll.h): raise it",
           GR__PATHS_MAX + 1, GR__PATHS_MAX);
  if (!strstr(c.err, want)) fail_msg("the sentence is \"%s\"", c.err);
  /* GR__PATHS_MAX rows fit */
  list[GR__PATHS_MAX] = NULL;
  memset(&c, 0, sizeof c);
  c.size = 1;
  c.ops = &ops;
  assert_int_equal(gr__paths_create(&c), GR_OK);
  assert_int_equal(c.npaths, GR__PATHS_MAX);
  gr__paths_destroy(&c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(algo_names), cmocka_unit_test(mpi_rows), cmocka_unit_test(selectable_words),
      cmocka_unit_test(choice),     cmocka_unit_test(overflow),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
