/* The growable array (base/array.c): growth keeps the elements, a count whose bytes overflow
 * size_t is refused, a failed allocation leaves the array as it was. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "gr_array.h"

/* Under the sanitizers an impossible allocation returns NULL instead of aborting the test. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }
const char *__tsan_default_options(void);
const char *__tsan_default_options(void) { return "allocator_may_return_null=1"; }

typedef struct {
  int a;
  double b;
} pair;

static void growth(void **state) {
  (void)state;
  gr_array a = GR_ARRAY_INIT(pair);
  assert_int_equal(a.count, 0);
  assert_null(a.data);
  for (int i = 0; i < 1000; i++) {
    pair p = {i, i * 0.5};
    assert_int_equal(gr__array_push(&a, &p), GR_OK);
    assert_true(a.cap >= a.count);
  }
  assert_int_equal(a.count, 1000);
  for (int i = 0; i < 1000; i++) {
    assert_int_equal(GR_ARRAY_AT(&a, pair, i).a, i);
    assert_true(GR_ARRAY_AT(&a, pair, i).b == i * 0.5);
  }
  assert_int_equal(gr__array_push(&a, NULL), GR_OK); /* a zeroed element */
  assert_int_equal(GR_ARRAY_AT(&a, pair, 1000).a, 0);
  assert_true(GR_ARRAY_AT(&a, pair, 1000).b == 0.0);
  gr__array_free(&a);
  assert_null(a.data);
  assert_int_equal(a.count, 0);
  assert_int_equal(a.elem, sizeof(pair));
  /* usable again after free */
  assert_int_equal(gr__array_push(&a, NULL), GR_OK);
  assert_int_equal(a.count, 1);
  gr__array_free(&a);
}

static void reserve(void **state) {
  (void)state;
  gr_array a;
  gr__array_init(&a, sizeof(int));
  assert_int_equal(gr__array_reserve(&a, 0), GR_OK);
  assert_int_equal(gr__array_reserve(&a, 100), GR_OK);
  assert_true(a.cap >= 100);
  assert_int_equal(a.count, 0);
  void *d = a.data;
  size_t cap = a.cap;
  for (int i = 0; i < 100; i++)
    assert_int_equal(gr__array_push(&a, &i), GR_OK);
  assert_ptr_equal(a.data, d); /* reserved room: no reallocation */
  assert_int_equal(a.cap, cap);
  assert_int_equal(gr__array_reserve(&a, 50), GR_OK); /* never shrinks */
  assert_int_equal(a.cap, cap);
  assert_int_equal(a.count, 100);
  gr__array_free(&a);
}

static void overflow_refused(void **state) {
  (void)state;
  gr_array a = GR_ARRAY_INIT(pair);
  int one = 7;
  gr_array b;
  gr__array_init(&b, sizeof one);
  assert_int_equal(gr__array_push(&b, &one), GR_OK);
  /* count * size overflows size_t: refused before any allocation, the array unchanged */
  assert_int_equal(gr__array_reserve(&a, SIZE_MAX / sizeof(pair) + 1), GR_ERR_NOMEM);
  assert_int_equal(gr__array_reserve(&a, SIZE_MAX), GR_ERR_NOMEM);
  assert_null(a.data);
  assert_int_equal(a.cap, 0);
  assert_int_equal(gr__array_reserve(&b, SIZE_MAX / 2), GR_ERR_NOMEM);
  assert_int_equal(b.count, 1);
  assert_int_equal(GR_ARRAY_AT(&b, int, 0), 7);
  /* a zero element size cannot hold anything */
  gr_array z;
  gr__array_init(&z, 0);
  assert_int_equal(gr__array_reserve(&z, 1), GR_ERR_NOMEM);
  gr__array_free(&a);
  gr__array_free(&b);
}

static void nomem(void **state) {
  (void)state;
  gr_array a;
  gr__array_init(&a, 1);
  assert_int_equal(gr__array_push(&a, "x"), GR_OK);
  void *d = a.data;
  size_t cap = a.cap;
  /* fits size_t but no machine has it: realloc fails, the array keeps its storage */
  assert_int_equal(gr__array_reserve(&a, SIZE_MAX / 4), GR_ERR_NOMEM);
  assert_ptr_equal(a.data, d);
  assert_int_equal(a.cap, cap);
  assert_int_equal(a.count, 1);
  assert_int_equal(((char *)a.data)[0], 'x');
  gr__array_free(&a);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(growth), cmocka_unit_test(reserve),
                                     cmocka_unit_test(overflow_refused), cmocka_unit_test(nomem)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
