/* Boolean environment variables (GPURUN_CHECK, GPURUN_FLIGHT): the accepted spellings, and the
 * rest rejected with the default kept. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "gr_env_bool.h"

static void spellings(void **state) {
  (void)state;
  const char *on[] = {"1", "yes", "true", "on", "YES", "True", "ON", " on", "yes \t"};
  const char *off[] = {"0", "no", "false", "off", "NO", "False", "OFF", " 0 "};
  const char *bad[] = {"",           "2",   "-1",    "y",  "n",   "enable",
                       "yes please", "0x1", "onoff", "10", "\xff"};
  for (size_t i = 0; i < sizeof on / sizeof *on; i++)
    assert_int_equal(gr__parse_bool(on[i]), 1);
  for (size_t i = 0; i < sizeof off / sizeof *off; i++)
    assert_int_equal(gr__parse_bool(off[i]), 0);
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    assert_int_equal(gr__parse_bool(bad[i]), -1);
  assert_int_equal(gr__parse_bool(NULL), -1);
}

static void environment(void **state) {
  (void)state;
  unsetenv("GR_TEST_BOOL");
  assert_int_equal(gr__env_bool("GR_TEST_BOOL", 1), 1);
  assert_int_equal(gr__env_bool("GR_TEST_BOOL", 0), 0);
  setenv("GR_TEST_BOOL", "", 1);
  assert_int_equal(gr__env_bool("GR_TEST_BOOL", 1), 1);
  setenv("GR_TEST_BOOL", "no", 1);
  assert_int_equal(gr__env_bool("GR_TEST_BOOL", 1), 0);
  setenv("GR_TEST_BOOL", "off", 1);
  assert_int_equal(gr__env_bool("GR_TEST_BOOL", 1), 0);
  setenv("GR_TEST_BOOL", "On", 1);
  assert_int_equal(gr__env_bool("GR_TEST_BOOL", 0), 1);
  setenv("GR_TEST_BOOL", "maybe", 1); /* rejected (with a warning): the default */
  assert_int_equal(gr__env_bool("GR_TEST_BOOL", 0), 0);
  assert_int_equal(gr__env_bool("GR_TEST_BOOL", 1), 1);
  /* a long hostile value is shown cut, and still rejected */
  char big[4096];
  for (size_t i = 0; i < sizeof big - 1; i++)
    big[i] = (char)('A' + i % 26);
  big[sizeof big - 1] = '\0';
  setenv("GR_TEST_BOOL2", big, 1);
  assert_int_equal(gr__env_bool("GR_TEST_BOOL2", 0), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(spellings), cmocka_unit_test(environment)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
