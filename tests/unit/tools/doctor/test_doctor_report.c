/* gpurun-doctor's report and parsers (tools/doctor/report.c, doctor.c): text lines never pass
 * 80 columns whatever a finding holds (long words are cut, nothing is lost between the breaks),
 * hostile strings reach the terminal escaped and JSON as valid strings, the worst verdict decides,
 * and the InfiniBand port-state and CUDA-version parsers. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gr_doctor.h"

/* The text report of r as a malloc'd string. */
static char *text_of(const gr__dr_report *r, int json) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  assert_non_null(f);
  if (json)
    gr__dr_print_json(f, r);
  else
    gr__dr_print_text(f, r, GR__DR_WIDTH);
  fclose(f);
  return buf;
}

static void test_width(void **state) {
  (void)state;
  gr__dr_report r;
  gr__dr_report_init(&r);
  snprintf(r.host, sizeof r.host, "node-with-a-rather-long-name-%0100d", 7);
  snprintf(r.source, sizeof r.source, "live");
  r.ranks = 2;
  char word[300];
  memset(word, 'x', sizeof word - 1);
  word[sizeof word - 1] = 0;
  gr__dr_add(&r, "long", GR__DR_WARN,
             "advice that goes on and on and on, past the end of any "
             "terminal line anyone would use, and then some more words",
             "one %s word and then short ones: a b c d e f g h i j k l m n o p q r s t u v w",
             word);
  gr__dr_add(&r, "a-check-name-too-long", GR__DR_OK, NULL, "short");
  gr__dr_add(&r, "esc", GR__DR_FAIL, NULL, "evil \x1b]0;title\x07 end");
  char *out = text_of(&r, 0);
  size_t xs = 0;
  for (char *line = out, *end; *line; line = end + 1) {
    end = strchr(line, '\n');
    assert_non_null(end);
    assert_true(end - line <= 80);
    for (char *p = line; p < end; p++) {
      assert_true((unsigned char)*p >= 0x20); /* no control character reaches the terminal */
      xs += *p == 'x';
    }
  }
  /* the long word is cut, not lost: its x's and the two of the escapes \x1b and \x07 */
  assert_int_equal(xs, sizeof word - 1 + 2);
  assert_non_null(strstr(out, "\\x1b]0;title\\x07"));
  assert_non_null(strstr(out, "fail  esc"));
  assert_non_null(strstr(out, "ok    a-check-n short"));
  assert_non_null(strstr(out, "FAIL: 1 failed, 1 warned"));
  free(out);
  out = text_of(&r, 1);
  assert_non_null(strstr(out, "\"verdict\": \"fail\""));
  assert_non_null(strstr(out, "evil \\u001b]0;title\\u0007 end"));
  free(out);
  assert_int_equal(gr__dr_worst(&r), GR__DR_FAIL);
  gr__dr_free(&r);
}

static void test_worst(void **state) {
  (void)state;
  gr__dr_report r;
  gr__dr_report_init(&r);
  assert_int_equal(gr__dr_worst(&r), GR__DR_OK);
  gr__dr_add(&r, "a", GR__DR_SKIP, NULL, "skipped");
  assert_int_equal(gr__dr_worst(&r), GR__DR_OK); /* a skip is not a problem */
  gr__dr_add(&r, "b", GR__DR_WARN, NULL, "warned");
  gr__dr_add(&r, "c", GR__DR_OK, NULL, "fine");
  assert_int_equal(gr__dr_worst(&r), GR__DR_WARN);
  for (int i = 0; i < 100; i++) /* past the first allocation */
    gr__dr_add(&r, "d", GR__DR_OK, NULL, "line %d", i);
  assert_int_equal(r.line.count, 103);
  assert_string_equal(GR__DR_LINE(&r, 102).found, "line 99");
  gr__dr_free(&r);
}

static void test_parsers(void **state) {
  (void)state;
  char s[32];
  assert_int_equal(gr__dr_ib_state("4: ACTIVE\n", s, sizeof s), 0);
  assert_string_equal(s, "ACTIVE");
  assert_int_equal(gr__dr_ib_state("1: DOWN", s, sizeof s), 0);
  assert_string_equal(s, "DOWN");
  assert_int_equal(gr__dr_ib_state("2: INIT", s, sizeof s), 0);
  assert_string_equal(s, "INIT");
  assert_int_equal(gr__dr_ib_state("ACTIVE", s, sizeof s), -1);
  assert_int_equal(gr__dr_ib_state("x: ACTIVE", s, sizeof s), -1);
  assert_int_equal(gr__dr_ib_state("4: \x1b[31m", s, sizeof s), -1);
  assert_int_equal(gr__dr_ib_state("4: ", s, sizeof s), -1);
  assert_int_equal(gr__dr_ib_state("4: ACTIVEACTIVEACTIVE", s, 8), -1);
  gr__dr_cuda_version(13000, s, sizeof s);
  assert_string_equal(s, "13.0");
  gr__dr_cuda_version(12040, s, sizeof s);
  assert_string_equal(s, "12.4");
  gr__dr_cuda_version(11080, s, sizeof s);
  assert_string_equal(s, "11.8");
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_width), cmocka_unit_test(test_worst),
                                     cmocka_unit_test(test_parsers)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
