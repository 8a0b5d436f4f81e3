/* gr__job_from_time (base/jobdir.c): the one rule for a job id made from a clock, UTC whatever TZ
 * says (the supervisor used local time, gr_init UTC, so one job could get two directories). The
 * expected strings are the epoch dates written out by hand. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gr_jobdir.h"

static void utc_whatever_tz(void **state) {
  (void)state;
  static const char *const zones[] = {"UTC0", "IST-5:30", "PST8PDT", "NZST-12NZDT"};
  for (size_t i = 0; i < sizeof zones / sizeof zones[0]; i++) {
    setenv("TZ", zones[i], 1);
    tzset();
    char id[32];
    gr__job_from_time(0, 0, id, sizeof id);
    assert_string_equal(id, "19700101-000000");
    gr__job_from_time((time_t)1700000000, 0, id, sizeof id); /* 2023-11-14 22:13:20 UTC */
    assert_string_equal(id, "20231114-221320");
    gr__job_from_time((time_t)1700000000, 1, id, sizeof id);
    assert_string_equal(id, "20231114-2213");
  }
  unsetenv("TZ");
  tzset();
}

static void small_buffer_stays_terminated(void **state) {
  (void)state;
  /* filled without a terminator, so that only the function can put one there */
  char id[8];
  memset(id, 'x', sizeof id);
  gr__job_from_time((time_t)1700000000, 0, id, sizeof id);
  assert_non_null(memchr(id, '\0', sizeof id));
  assert_string_equal(id, "1700000"); /* too small for the date: the seconds, cut to fit */
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(utc_whatever_tz),
                                     cmocka_unit_test(small_buffer_stays_terminated)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
