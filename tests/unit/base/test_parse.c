/* gr__parse_ll / gr__parse_int (base/parse.c): the one integer parser for text gpurun did not
 * write. Hostile cases: overflow at every width, signs, trailing junk, empty, whitespace; each
 * refusal leaves *out alone. The accepted values are checked against numbers written here. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>

#include "gr_parse.h"

static void refused_ll(const char *s, long long lo, long long hi) {
  long long v = 12345;
  if (gr__parse_ll(s, lo, hi, &v) != GR_ERR_INVALID)
    fail_msg("'%s' in [%lld, %lld] was accepted as %lld", s ? s : "(null)", lo, hi, v);
  assert_int_equal(v, 12345);
}

static void accepted_ll(const char *s, long long lo, long long hi, long long want) {
  long long v = 12345;
  if (gr__parse_ll(s, lo, hi, &v) != GR_OK) fail_msg("'%s' in [%lld, %lld] refused", s, lo, hi);
  assert_int_equal(v, want);
}

static void test_accepts(void **state) {
  (void)state;
  accepted_ll("0", LLONG_MIN, LLONG_MAX, 0);
  accepted_ll("7", 0, 10, 7);
  accepted_ll("-0", 0, 10, 0);
  accepted_ll("+42", 0, 100, 42);
  accepted_ll("-17", -100, 100, -17);
  accepted_ll("0000000000000000000000000000012", 0, 100, 12); /* leading zeros are not overflow */
  accepted_ll("9223372036854775807", LLONG_MIN, LLONG_MAX, LLONG_MAX);
  accepted_ll("-9223372036854775808", LLONG_MIN, LLONG_MAX, LLONG_MIN);
  accepted_ll("10", 10, 10, 10); /* both ends of the range are in it */
}

static void test_overflow(void **state) {
  (void)state;
  refused_ll("9223372036854775808", LLONG_MIN, LLONG_MAX);  /* LLONG_MAX + 1 */
  refused_ll("-9223372036854775809", LLONG_MIN, LLONG_MAX); /* LLONG_MIN - 1 */
  refused_ll("18446744073709551616", LLONG_MIN, LLONG_MAX); /* 2^64: wraps to 0 when unchecked */
  refused_ll("99999999999999999999999999999", LLONG_MIN, LLONG_MAX);
  int v = 5;
  assert_int_equal(gr__parse_int("2147483648", INT_MIN, INT_MAX, &v), GR_ERR_INVALID);
  assert_int_equal(gr__parse_int("-2147483649", INT_MIN, INT_MAX, &v), GR_ERR_INVALID);
  assert_int_equal(gr__parse_int("4294967297", INT_MIN, INT_MAX, &v), GR_ERR_INVALID); /* 2^32+1 */
  assert_int_equal(v, 5);
  assert_int_equal(gr__parse_int("2147483647", INT_MIN, INT_MAX, &v), GR_OK);
  assert_int_equal(v, INT_MAX);
  assert_int_equal(gr__parse_int("-2147483648", INT_MIN, INT_MAX, &v), GR_OK);
  assert_int_equal(v, INT_MIN);
}

static void test_range(void **state) {
  (void)state;
  refused_ll("11", 0, 10);
  refused_ll("-1", 0, 10);
  refused_ll("0", 1, 100000);
  int v = 5;
  assert_int_equal(gr__parse_int("100001", 1, 100000, &v), GR_ERR_INVALID);
  assert_int_equal(v, 5);
}

static void test_malformed(void **state) {
  (void)state;
  static const char *const bad[] = {"",     "+",   "-",     "--1", "+-1",   "-+1", "++1", " 1",
                                    "1 ",   "\t1", "1\n",   "\n1", "1x",    "x1",  "1.0", "1e3",
                                    "0x10", "1,2", "1_000", "١",   "1\x01", "0b1", "1-",  "- 1",
                                    "+ 1",  "1 2", "\v1",   "1\r", "∞",     "NaN"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    refused_ll(bad[i], LLONG_MIN, LLONG_MAX);
  refused_ll(NULL, LLONG_MIN, LLONG_MAX);
  int v = 5;
  assert_int_equal(gr__parse_int(NULL, 0, 10, &v), GR_ERR_INVALID);
  assert_int_equal(gr__parse_int("3 ", 0, 10, &v), GR_ERR_INVALID);
  assert_int_equal(v, 5);
}

/* Every long long printed by printf reads back as itself. */
static void test_every_value_round_trips(void **state) {
  (void)state;
  char buf[32];
  static const long long vals[] = {0,
                                   1,
                                   -1,
                                   9,
                                   10,
                                   99,
                                   100,
                                   65535,
                                   -65536,
                                   INT_MAX,
                                   INT_MIN,
                                   (long long)INT_MAX + 1,
                                   LLONG_MAX / 10,
                                   LLONG_MIN / 10,
                                   LLONG_MAX - 1,
                                   LLONG_MIN + 1};
  for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
    snprintf(buf, sizeof buf, "%lld", vals[i]);
    accepted_ll(buf, LLONG_MIN, LLONG_MAX, vals[i]);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_accepts),
      cmocka_unit_test(test_overflow),
      cmocka_unit_test(test_range),
      cmocka_unit_test(test_malformed),
      cmocka_unit_test(test_every_value_round_trips),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
