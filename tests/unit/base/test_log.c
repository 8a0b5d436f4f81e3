/* GPURUN_LOG filtering and the line format, read back from a redirected stderr. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gr_error.h"
#include "gr_log.h"

/* Run fn with stderr redirected to a temporary file; return what it wrote (static buffer). */
static const char *capture(void (*fn)(void)) {
  static char buf[8192];
  FILE *tmp = tmpfile();
  assert_non_null(tmp);
  int saved = dup(STDERR_FILENO);
  dup2(fileno(tmp), STDERR_FILENO);
  fn();
  dup2(saved, STDERR_FILENO);
  close(saved);
  rewind(tmp);
  size_t n = fread(buf, 1, sizeof buf - 1, tmp);
  buf[n] = '\0';
  fclose(tmp);
  return buf;
}

static void emit_all_levels(void) {
  GR_ERROR("e %d", 1);
  GR_WARN("w %d", 2);
  GR_INFO("i %d", 3);
  GR_DEBUG("d %d", 4);
}

static void with_level(const char *lvl) {
  if (lvl)
    setenv("GPURUN_LOG", lvl, 1);
  else
    unsetenv("GPURUN_LOG");
  gr__log_reset();
}

static void default_level_is_warn(void **state) {
  (void)state;
  gr__set_process_rank(-1);
  with_level(NULL);
  assert_string_equal(capture(emit_all_levels), "gpurun error: e 1\ngpurun warn: w 2\n");
}

static void each_level_filters(void **state) {
  (void)state;
  gr__set_process_rank(5);
  with_level("error");
  assert_string_equal(capture(emit_all_levels), "gpurun[5] error: e 1\n");
  with_level("info");
  assert_string_equal(capture(emit_all_levels),
                      "gpurun[5] error: e 1\ngpurun[5] warn: w 2\ngpurun[5] info: i 3\n");
  with_level("DEBUG");
  assert_string_equal(capture(emit_all_levels), "gpurun[5] error: e 1\ngpurun[5] warn: w 2\n"
                                                "gpurun[5] info: i 3\ngpurun[5] debug: d 4\n");
  gr__set_process_rank(-1);
}

static void bad_level_warns_and_defaults(void **state) {
  (void)state;
  gr__set_process_rank(-1);
  with_level("loud");
  const char *out = capture(emit_all_levels);
  assert_non_null(
      strstr(out, "GPURUN_LOG=loud is not one of error, warn, info, debug; using warn"));
  assert_null(strstr(out, "i 3"));
  assert_non_null(strstr(out, "w 2"));
}

/* A hostile value quoted in a message (here GPURUN_LOG itself) reaches the terminal escaped. */
static void control_characters_are_escaped(void **state) {
  (void)state;
  gr__set_process_rank(-1);
  with_level("\x1b]0;pwned\x07\x1b[2J\nfake line");
  const char *out = capture(emit_all_levels);
  assert_null(strchr(out, '\x1b'));
  assert_null(strchr(out, '\x07'));
  assert_non_null(strstr(out, "GPURUN_LOG=\\x1b]0;pwned\\x07\\x1b[2J\\x0afake line is not one"));
  /* one line per message: the newline in the value did not start a line of its own */
  assert_null(strstr(out, "\nfake line"));
}

static void parse_levels(void **state) {
  (void)state;
  assert_int_equal(gr__log_parse_level("warning"), GR_LOG_WARN);
  assert_int_equal(gr__log_parse_level("3"), GR_LOG_DEBUG);
  assert_int_equal(gr__log_parse_level("4"), -1);
  assert_int_equal(gr__log_parse_level(""), -1);
  assert_int_equal(gr__log_parse_level(NULL), -1);
}

static void once_logs_once(void) {
  for (int i = 0; i < 3; i++)
    GR_LOG_ONCE(GR_LOG_WARN, "only once");
}

static void log_once(void **state) {
  (void)state;
  with_level("warn");
  assert_string_equal(capture(once_logs_once), "gpurun warn: only once\n");
}

static void long_line_is_cut_and_ends_with_newline(void) {
  char big[5000];
  memset(big, 'y', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  GR_WARN("%s", big);
}

static void long_lines(void **state) {
  (void)state;
  with_level("warn");
  const char *out = capture(long_line_is_cut_and_ends_with_newline);
  size_t n = strlen(out);
  assert_true(n > 1000 && n <= 2048);
  assert_int_equal(out[n - 1], '\n');
  assert_ptr_equal(strchr(out, '\n'), out + n - 1); /* exactly one line */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(default_level_is_warn),
      cmocka_unit_test(each_level_filters),
      cmocka_unit_test(bad_level_warns_and_defaults),
      cmocka_unit_test(control_characters_are_escaped),
      cmocka_unit_test(parse_levels),
      cmocka_unit_test(log_once),
      cmocka_unit_test(long_lines),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
