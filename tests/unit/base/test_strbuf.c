/* gr__strbuf (base/strbuf.c): exact contents, the cut at every capacity boundary of a fixed
 * buffer (0, 1, an exact fit, one byte short), UTF-8 sequences kept whole at a cut, heap growth
 * past the first allocation, the heap limit, a formatted argument far larger than the buffer,
 * and release/free. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "gr_strbuf.h"

static void test_fixed_exact(void **state) {
  (void)state;
  char buf[64];
  gr__strbuf sb;
  gr__strbuf_init_fixed(&sb, buf, sizeof buf);
  assert_string_equal(gr__strbuf_str(&sb), "");
  gr__strbuf_appendf(&sb, "%s=%d", "rank", 7);
  gr__strbuf_append(&sb, ", ", 2);
  gr__strbuf_putc(&sb, 'x');
  gr__strbuf_appendf(&sb, "%s", "");
  assert_string_equal(gr__strbuf_str(&sb), "rank=7, x");
  assert_ptr_equal(gr__strbuf_str(&sb), buf);
  assert_int_equal(gr__strbuf_len(&sb), 9);
  assert_false(sb.truncated);
  assert_null(gr__strbuf_release(&sb, NULL)); /* a fixed buffer is the caller's */
}

static void test_fixed_cap0(void **state) {
  (void)state;
  gr__strbuf sb;
  gr__strbuf_init_fixed(&sb, NULL, 0);
  gr__strbuf_appendf(&sb, "%s", "");
  assert_false(sb.truncated); /* nothing was lost */
  gr__strbuf_appendf(&sb, "a");
  assert_true(sb.truncated);
  assert_string_equal(gr__strbuf_str(&sb), "");
  assert_int_equal(gr__strbuf_len(&sb), 0);
  char one = 'Z';
  gr__strbuf_init_fixed(&sb, &one, 0);
  gr__strbuf_append(&sb, "abc", 3);
  assert_true(sb.truncated);
  assert_int_equal(one, 'Z'); /* a zero capacity is never written */
}

static void test_fixed_cap1(void **state) {
  (void)state;
  char buf[1] = {'Z'};
  gr__strbuf sb;
  gr__strbuf_init_fixed(&sb, buf, 1);
  assert_int_equal(buf[0], '\0');
  gr__strbuf_appendf(&sb, "%d", 5);
  assert_true(sb.truncated);
  assert_int_equal(buf[0], '\0');
  assert_int_equal(gr__strbuf_len(&sb), 0);
}

/* cap = length + 1 fits exactly; cap = length cuts the last byte; nothing after a cut lands. */
static void test_fixed_boundaries(void **state) {
  (void)state;
  char buf[8];
  memset(buf, 'Z', sizeof buf);
  gr__strbuf sb;
  gr__strbuf_init_fixed(&sb, buf, 8);
  gr__strbuf_appendf(&sb, "%s", "abc");
  gr__strbuf_appendf(&sb, "%s", "defg"); /* 7 bytes and the NUL: an exact fit */
  assert_false(sb.truncated);
  assert_string_equal(buf, "abcdefg");
  gr__strbuf_appendf(&sb, "%s", "");
  assert_false(sb.truncated);
  gr__strbuf_putc(&sb, 'h');
  assert_true(sb.truncated);
  assert_string_equal(buf, "abcdefg");

  gr__strbuf_init_fixed(&sb, buf, 8);
  gr__strbuf_appendf(&sb, "%s", "abcdefgh"); /* one byte over */
  assert_true(sb.truncated);
  assert_string_equal(buf, "abcdefg");
  assert_int_equal(gr__strbuf_len(&sb), 7);

  gr__strbuf_init_fixed(&sb, buf, 8);
  gr__strbuf_append(&sb, "abcdefgh", 8);
  assert_true(sb.truncated);
  assert_string_equal(buf, "abcdefg");

  /* after a cut, text that would fit is still refused: the buffer holds a prefix */
  gr__strbuf_init_fixed(&sb, buf, 8);
  gr__strbuf_appendf(&sb, "%s", "abcdé"); /* é is 2 bytes: 6 bytes, fits */
  gr__strbuf_appendf(&sb, "%s", "xyz");
  assert_true(sb.truncated);
  assert_string_equal(buf, "abcdéx");
  gr__strbuf_putc(&sb, 'q');
  assert_string_equal(buf, "abcdéx");
}

static void test_fixed_utf8_cut(void **state) {
  (void)state;
  char buf[6];
  gr__strbuf sb;
  /* "ab€" is a b E2 82 AC: 5 bytes; cap 5 keeps 4, which would split the euro sign */
  gr__strbuf_init_fixed(&sb, buf, 5);
  gr__strbuf_appendf(&sb, "ab\xe2\x82\xac");
  assert_true(sb.truncated);
  assert_string_equal(buf, "ab");
  gr__strbuf_init_fixed(&sb, buf, 4);
  gr__strbuf_append(&sb, "ab\xe2\x82\xac", 5);
  assert_string_equal(buf, "ab");
  gr__strbuf_init_fixed(&sb, buf, 6); /* exact fit keeps it whole */
  gr__strbuf_appendf(&sb, "ab\xe2\x82\xac");
  assert_false(sb.truncated);
  assert_string_equal(buf, "ab\xe2\x82\xac");
  /* a complete sequence at the cut stays */
  gr__strbuf_init_fixed(&sb, buf, 6);
  gr__strbuf_appendf(&sb, "a\xe2\x82\xac"
                          "bc");
  assert_true(sb.truncated);
  assert_string_equal(buf, "a\xe2\x82\xac"
                           "b");
  /* bytes that are no UTF-8 at all are cut where they fall */
  gr__strbuf_init_fixed(&sb, buf, 4);
  gr__strbuf_appendf(&sb, "ab\x80\x80\x80");
  assert_int_equal(gr__strbuf_len(&sb), 3);
}

/* init_tail goes on after the text already there, and cuts at the same capacity */
static void test_fixed_tail(void **state) {
  (void)state;
  char buf[8] = "abc";
  gr__strbuf sb;
  gr__strbuf_init_tail(&sb, buf, sizeof buf);
  assert_int_equal(gr__strbuf_len(&sb), 3);
  gr__strbuf_appendf(&sb, "%d", 12);
  assert_string_equal(buf, "abc12");
  gr__strbuf_init_tail(&sb, buf, sizeof buf);
  gr__strbuf_appendf(&sb, "%s", "xyz");
  assert_true(sb.truncated);
  assert_string_equal(buf, "abc12xy");
  memset(buf, 'Z', sizeof buf); /* no NUL at all: the last byte becomes one */
  gr__strbuf_init_tail(&sb, buf, sizeof buf);
  assert_int_equal(gr__strbuf_len(&sb), 7);
  assert_int_equal(buf[7], '\0');
}

static void test_fixed_huge_argument(void **state) {
  (void)state;
  size_t n = 1 << 20;
  char *big = malloc(n + 1);
  assert_non_null(big);
  memset(big, 'w', n);
  big[n] = '\0';
  char buf[16];
  gr__strbuf sb;
  gr__strbuf_init_fixed(&sb, buf, sizeof buf);
  gr__strbuf_appendf(&sb, "<%s>", big);
  assert_true(sb.truncated);
  assert_int_equal(gr__strbuf_len(&sb), 15);
  assert_string_equal(buf, "<wwwwwwwwwwwwww");
  free(big);
}

static void test_heap_growth(void **state) {
  (void)state;
  gr__strbuf sb;
  gr__strbuf_init_heap(&sb, 1 << 20);
  assert_string_equal(gr__strbuf_str(&sb), "");
  char want[5000];
  size_t wl = 0;
  for (int i = 0; i < 1000; i++) {
    gr__strbuf_appendf(&sb, "%d,", i % 10);
    want[wl++] = (char)('0' + i % 10);
    want[wl++] = ',';
  }
  gr__strbuf_append(&sb, "end", 3);
  memcpy(want + wl, "end", 4);
  wl += 3;
  assert_false(sb.truncated);
  assert_int_equal(gr__strbuf_len(&sb), wl);
  assert_string_equal(gr__strbuf_str(&sb), want);
  size_t len = 0;
  char *s = gr__strbuf_release(&sb, &len);
  assert_non_null(s);
  assert_int_equal(len, wl);
  assert_string_equal(s, want);
  free(s);
  assert_string_equal(gr__strbuf_str(&sb), ""); /* released: empty again, and reusable */
  gr__strbuf_appendf(&sb, "%s", "again");
  assert_string_equal(gr__strbuf_str(&sb), "again");
  gr__strbuf_free(&sb);
  assert_int_equal(gr__strbuf_len(&sb), 0);
}

static void test_heap_huge_argument(void **state) {
  (void)state;
  size_t n = 3 << 20;
  char *big = malloc(n + 1);
  assert_non_null(big);
  memset(big, 'w', n);
  big[n] = '\0';
  gr__strbuf sb;
  gr__strbuf_init_heap(&sb, 8 << 20);
  gr__strbuf_appendf(&sb, "<%s>", big);
  assert_false(sb.truncated);
  assert_int_equal(gr__strbuf_len(&sb), n + 2);
  assert_int_equal(gr__strbuf_str(&sb)[n + 1], '>');
  gr__strbuf_free(&sb);
  free(big);
}

static void test_heap_limit(void **state) {
  (void)state;
  gr__strbuf sb;
  gr__strbuf_init_heap(&sb, 10);
  gr__strbuf_appendf(&sb, "%s", "0123456789"); /* exactly the limit */
  assert_false(sb.truncated);
  gr__strbuf_putc(&sb, 'x');
  assert_true(sb.truncated);
  assert_string_equal(gr__strbuf_str(&sb), "0123456789");
  gr__strbuf_free(&sb);

  gr__strbuf_init_heap(&sb, 1000);
  for (int i = 0; i < 300; i++)
    gr__strbuf_appendf(&sb, "%03d|", i);
  assert_true(sb.truncated);
  assert_int_equal(gr__strbuf_len(&sb), 1000);
  assert_memory_equal(gr__strbuf_str(&sb), "000|001|", 8);
  assert_string_equal(gr__strbuf_str(&sb) + 996, "249|");
  gr__strbuf_free(&sb);

  gr__strbuf_init_heap(&sb, 4);
  gr__strbuf_append(&sb, "abcdef", 6);
  assert_true(sb.truncated);
  assert_string_equal(gr__strbuf_str(&sb), "abcd");
  gr__strbuf_free(&sb);

  gr__strbuf_init_heap(&sb, 0); /* no room for any text */
  gr__strbuf_appendf(&sb, "a");
  assert_true(sb.truncated);
  assert_string_equal(gr__strbuf_str(&sb), "");
  gr__strbuf_free(&sb);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fixed_exact),         cmocka_unit_test(test_fixed_cap0),
      cmocka_unit_test(test_fixed_cap1),          cmocka_unit_test(test_fixed_boundaries),
      cmocka_unit_test(test_fixed_utf8_cut),      cmocka_unit_test(test_fixed_tail),
      cmocka_unit_test(test_fixed_huge_argument), cmocka_unit_test(test_heap_growth),
      cmocka_unit_test(test_heap_huge_argument),  cmocka_unit_test(test_heap_limit),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
