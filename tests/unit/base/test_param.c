/* The GPURUN_* table and its parsers (base/param.c): seconds, sizes, booleans, integers with a
 * range and word lists on good and hostile text (empty, blanks, overflow, huge suffixes), the table
 * itself (every default parses as its own type), and reading from the environment: a value set
 * between two calls is seen, a bad one gives the default and one warning in the one sentence. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gr_log.h"
#include "gr_param.h"

/* ---- stderr, captured ---- */

static char captured[8192];

static void capture_start(FILE **tmp, int *saved) {
  fflush(stderr);
  *tmp = tmpfile();
  assert_non_null(*tmp);
  *saved = dup(STDERR_FILENO);
  dup2(fileno(*tmp), STDERR_FILENO);
}

static const char *capture_end(FILE *tmp, int saved) {
  fflush(stderr);
  dup2(saved, STDERR_FILENO);
  close(saved);
  rewind(tmp);
  size_t n = fread(captured, 1, sizeof captured - 1, tmp);
  captured[n] = '\0';
  fclose(tmp);
  return captured;
}

/* ---- seconds ---- */

static void seconds_ok(const char *s, double lo, double hi, double want) {
  double v = -7;
  if (gr__parse_seconds(s, lo, hi, &v) != 0) fail_msg("'%s' refused", s);
  if (v != want) fail_msg("'%s' read as %g, not %g", s, v, want);
}

static void seconds_bad(const char *s, double lo, double hi) {
  double v = -7;
  if (gr__parse_seconds(s, lo, hi, &v) == 0) fail_msg("'%s' accepted as %g", s ? s : "(null)", v);
  assert_true(v == -7);
}

static void test_seconds(void **state) {
  (void)state;
  seconds_ok("0", 0, INFINITY, 0);
  seconds_ok("5", 0, INFINITY, 5);
  seconds_ok("2.5", 0, INFINITY, 2.5);
  seconds_ok("  3\t", 0, INFINITY, 3); /* blanks around */
  seconds_ok("1e3", 0, INFINITY, 1000);
  seconds_ok("0x10", 0, INFINITY, 16); /* strtod's hex, accepted by GPURUN_TIMEOUT before */
  seconds_ok("5s", 0, INFINITY, 5);
  seconds_ok("1e300", 0, INFINITY, 1e300);
  seconds_ok("-0", 0, INFINITY, 0);
  double tiny = -7;
  assert_int_equal(gr__parse_seconds("1e-400", 0, INFINITY, &tiny), 0); /* underflow: about 0 */
  assert_true(tiny >= 0 && tiny < 1e-300);
  seconds_bad(NULL, 0, INFINITY);
  seconds_bad("", 0, INFINITY);
  seconds_bad("   ", 0, INFINITY);
  seconds_bad("abc", 0, INFINITY);
  seconds_bad("-1", 0, INFINITY);
  seconds_bad("-0.001", 0, INFINITY);
  seconds_bad("inf", 0, INFINITY);
  seconds_bad("infinity", 0, INFINITY);
  seconds_bad("nan", 0, INFINITY);
  seconds_bad("1e400", 0, INFINITY); /* overflow */
  seconds_bad("5ss", 0, INFINITY);
  seconds_bad("5 s", 0, INFINITY);
  seconds_bad("5x", 0, INFINITY);
  seconds_bad("5m", 0, INFINITY);
  seconds_bad("1,5", 0, INFINITY);
  /* a range */
  seconds_ok("0.01", 0.01, 3600, 0.01);
  seconds_ok("3600", 0.01, 3600, 3600);
  seconds_bad("0.001", 0.01, 3600);
  seconds_bad("3601", 0.01, 3600);
  /* a value longer than any number is refused, not cut */
  char big[300];
  memset(big, '1', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  seconds_bad(big, 0, INFINITY);
}

/* ---- sizes ---- */

static void size_ok(const char *s, unsigned long long want) {
  unsigned long long v = 7;
  if (gr__parse_size(s, &v) != 0) fail_msg("'%s' refused", s);
  if (v != want) fail_msg("'%s' read as %llu, not %llu", s, v, want);
}

static void size_bad(const char *s) {
  unsigned long long v = 7;
  if (gr__parse_size(s, &v) == 0) fail_msg("'%s' accepted as %llu", s ? s : "(null)", v);
  assert_true(v == 7);
}

static void test_sizes(void **state) {
  (void)state;
  size_ok("0", 0);
  size_ok("1024", 1024);
  size_ok("4k", 4096);
  size_ok("4K", 4096);
  size_ok("512M", 512ull << 20);
  size_ok("512MB", 512ull << 20);
  size_ok("1.5GB", 3ull << 29);
  size_ok(" 8G ", 8ull << 30);
  size_ok("2T", 2ull << 40);
  size_ok("16777215T", 16777215ull << 40); /* the largest whole number of T below 2^64 */
  size_bad(NULL);
  size_bad("");
  size_bad(" ");
  size_bad("G");
  size_bad("-1G");
  size_bad("4Q");
  size_bad("1GG");
  size_bad("1 G");
  size_bad("1e30");
  size_bad("16777216T");    /* 2^64 */
  size_bad("17179869184G"); /* 2^64 */
  size_bad("99999999999999999999999T");
  size_bad("inf");
  size_bad("nan");
}

/* ---- booleans, words, integers ---- */

static void test_bools(void **state) {
  (void)state;
  assert_int_equal(gr__parse_bool(" On "), 1);
  assert_int_equal(gr__parse_bool("TRUE"), 1);
  assert_int_equal(gr__parse_bool("off"), 0);
  assert_int_equal(gr__parse_bool("\t0\n"), 0);
  assert_int_equal(gr__parse_bool(""), -1);
  assert_int_equal(gr__parse_bool("2"), -1);
  assert_int_equal(gr__parse_bool("yess"), -1);
  assert_int_equal(gr__parse_bool("o n"), -1);
  assert_int_equal(gr__parse_bool(NULL), -1);
}

static int word(gr_param_id id, const char *s) {
  gr_param_value v;
  return gr__param_parse(id, s, &v) == 0 ? v.w : -1;
}

static void test_words(void **state) {
  (void)state;
  assert_int_equal(word(GR_PARAM_COLL_ALGO, "auto"), GR_COLL_ALGO_AUTO);
  assert_int_equal(word(GR_PARAM_COLL_ALGO, "shm"), GR_COLL_ALGO_SHM);
  assert_int_equal(word(GR_PARAM_COLL_ALGO, "hier"), GR_COLL_ALGO_HIER);
  assert_int_equal(word(GR_PARAM_COLL_ALGO, "hier-ml"), GR_COLL_ALGO_HIER_ML);
  assert_int_equal(word(GR_PARAM_COLL_ALGO, "flat"), GR_COLL_ALGO_FLAT);
  assert_int_equal(word(GR_PARAM_COLL_ALGO, " MPI "), GR_COLL_ALGO_MPI);
  assert_int_equal(word(GR_PARAM_COLL_ALGO, ""), -1);
  assert_int_equal(word(GR_PARAM_COLL_ALGO, "mpix"), -1);
  assert_int_equal(word(GR_PARAM_COLL_ALGO, "m"), -1);
  assert_int_equal(word(GR_PARAM_VERIFY, "strict"), GR_VERIFY_STRICT);
  assert_int_equal(word(GR_PARAM_VERIFY, "Off"), GR_VERIFY_OFF);
  assert_int_equal(word(GR_PARAM_LOG, "warning"), GR_LOG_WARN); /* an alias */
  assert_int_equal(word(GR_PARAM_LOG, "3"), GR_LOG_DEBUG);
  assert_int_equal(word(GR_PARAM_LOG, "4"), -1);
  assert_int_equal(word(GR_PARAM_PRIORITY, "high"), GR_PRIORITY_HIGH);
  assert_int_equal(word(GR_PARAM_POOL_FENCE, "asym"), GR_POOL_FENCE_ASYM);
  assert_int_equal(word(GR_PARAM_SHM_SEGMENT, "posix"), GR_SHM_SEGMENT_POSIX);
  assert_int_equal(word(GR_PARAM_SHM_PRIVATE, "SLOTS"), GR_SHM_PRIVATE_SLOTS);
  assert_int_equal(word(GR_PARAM_SHM_PRIVATE, " single "), GR_SHM_PRIVATE_SINGLE);
  char big[200];
  memset(big, 'a', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  assert_int_equal(word(GR_PARAM_COLL_ALGO, big), -1);
}

static void test_ints(void **state) {
  (void)state;
  gr_param_value v;
  assert_int_equal(gr__param_parse(GR_PARAM_MASTER_PORT, "29500", &v), 0);
  assert_int_equal(v.i, 29500);
  assert_int_equal(gr__param_parse(GR_PARAM_MASTER_PORT, " 42 ", &v), 0);
  assert_int_equal(v.i, 42);
  assert_int_equal(gr__param_parse(GR_PARAM_MASTER_PORT, "0", &v), -1); /* below 1 */
  assert_int_equal(gr__param_parse(GR_PARAM_MASTER_PORT, "1000001", &v), -1);
  assert_int_equal(gr__param_parse(GR_PARAM_MASTER_PORT, "99999999999999999999", &v), -1);
  assert_int_equal(gr__param_parse(GR_PARAM_MASTER_PORT, "", &v), -1);
  assert_int_equal(gr__param_parse(GR_PARAM_MASTER_PORT, "4 2", &v), -1);
  assert_int_equal(gr__param_parse(GR_PARAM_MASTER_PORT, "0x10", &v), -1);
}

/* ---- the table ---- */

static void test_table(void **state) {
  (void)state;
  for (int i = 0; i < GR_PARAM_COUNT; i++) {
    const gr_param_def *d = gr__param_def(i);
    assert_non_null(d);
    if (!d->name || strncmp(d->name, "GPURUN_", 7) != 0)
      fail_msg("entry %d has no GPURUN_ name", i);
    if (!d->doc || !*d->doc || !d->reader || !*d->reader) fail_msg("%s: no doc or reader", d->name);
    for (int j = 0; j < i; j++)
      if (strcmp(gr__param_def(j)->name, d->name) == 0) fail_msg("%s is listed twice", d->name);
    gr_param_value v;
    if (d->def[0] && gr__param_parse((gr_param_id)i, d->def, &v) != 0)
      fail_msg("%s: its default '%s' is not a value of its type", d->name, d->def);
    if (d->type == GR_PARAM_WORD && (!d->words || !d->words[0].word))
      fail_msg("%s: a word list without words", d->name);
  }
  assert_null(gr__param_def(-1));
  assert_null(gr__param_def(GR_PARAM_COUNT));
  assert_string_equal(gr__param_name(GR_PARAM_TIMEOUT), "GPURUN_TIMEOUT");
  assert_string_equal(gr__param_name(GR_PARAM_CPUS), "GPURUN_CPUS");
}

static void test_sentence(void **state) {
  (void)state;
  char s[512];
  gr__param_bad_sentence(GR_PARAM_TIMEOUT, "abc", s, sizeof s);
  assert_string_equal(s,
                      "GPURUN_TIMEOUT=abc is not a number of seconds >= 0; using 0 (no timeout)");
  gr__param_bad_sentence(GR_PARAM_LIVE_INTERVAL, "9999", s, sizeof s);
  assert_string_equal(s, "GPURUN_LIVE_INTERVAL=9999 is not a number of seconds in [0.01, 3600]; "
                         "using 0.25");
  gr__param_bad_sentence(GR_PARAM_COLL_ALGO, "fast", s, sizeof s);
  assert_string_equal(
      s, "GPURUN_COLL_ALGO=fast is not one of auto, shm, hier, hier-ml, flat, mpi, pair, rd, "
         "rabenseifner, ring; using auto");
  gr__param_bad_sentence(GR_PARAM_LOG, "loud", s, sizeof s);
  assert_string_equal(s, "GPURUN_LOG=loud is not one of error, warn, info, debug; using warn");
  gr__param_bad_sentence(GR_PARAM_SHM_CMA, "maybe", s, sizeof s);
  assert_string_equal(s, "GPURUN_SHM_CMA=maybe is not a boolean (0/1/yes/no/true/false/on/off); "
                         "using on");
  gr__param_bad_sentence(GR_PARAM_SHM_PRIVATE, "sometimes", s, sizeof s);
  assert_string_equal(s,
                      "GPURUN_SHM_PRIVATE=sometimes is not one of auto, single, slots; using auto");
  char big[4096];
  memset(big, 'A', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  gr__param_bad_sentence(GR_PARAM_TIMEOUT, big, s, sizeof s);
  assert_non_null(strstr(s, "=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA... is not"));
  char tiny[8];
  gr__param_bad_sentence(GR_PARAM_TIMEOUT, big, tiny, sizeof tiny); /* cut, terminated */
  assert_int_equal(strlen(tiny), sizeof tiny - 1);
}

/* ---- the environment ---- */

static void test_environment(void **state) {
  (void)state;
  unsetenv("GPURUN_TIMEOUT");
  assert_true(gr__param_seconds(GR_PARAM_TIMEOUT) == 0);
  setenv("GPURUN_TIMEOUT", "2.5", 1);
  assert_true(gr__param_seconds(GR_PARAM_TIMEOUT) == 2.5);
  setenv("GPURUN_TIMEOUT", "7", 1); /* changed between calls: seen */
  assert_true(gr__param_seconds(GR_PARAM_TIMEOUT) == 7);
  setenv("GPURUN_TIMEOUT", "", 1);
  assert_true(gr__param_seconds(GR_PARAM_TIMEOUT) == 0);

  FILE *tmp;
  int saved;
  capture_start(&tmp, &saved);
  setenv("GPURUN_TIMEOUT", "abc", 1);
  double a = gr__param_seconds(GR_PARAM_TIMEOUT);
  setenv("GPURUN_TIMEOUT", "-3", 1);
  double b = gr__param_seconds(GR_PARAM_TIMEOUT);
  setenv("GPURUN_COLL_ALGO", "fast", 1);
  int w = gr__param_word(GR_PARAM_COLL_ALGO);
  const char *out = capture_end(tmp, saved);
  assert_true(a == 0 && b == 0);
  assert_int_equal(w, GR_COLL_ALGO_AUTO);
  assert_non_null(
      strstr(out, "GPURUN_TIMEOUT=abc is not a number of seconds >= 0; using 0 (no timeout)\n"));
  assert_null(strstr(out, "GPURUN_TIMEOUT=-3")); /* once per variable */
  assert_non_null(strstr(out,
                         "GPURUN_COLL_ALGO=fast is not one of auto, shm, hier, hier-ml, flat, mpi, "
                         "pair, rd, rabenseifner, ring"));
  setenv("GPURUN_COLL_ALGO", "mpi", 1);
  assert_int_equal(gr__param_word(GR_PARAM_COLL_ALGO), GR_COLL_ALGO_MPI);
  unsetenv("GPURUN_COLL_ALGO");
  unsetenv("GPURUN_TIMEOUT");

  unsetenv("GPURUN_SHM_CMA");
  assert_int_equal(gr__param_bool(GR_PARAM_SHM_CMA), 1);
  setenv("GPURUN_SHM_CMA", "0", 1);
  assert_int_equal(gr__param_bool(GR_PARAM_SHM_CMA), 0);
  setenv("GPURUN_SHM_CMA", "no", 1);
  assert_int_equal(gr__param_bool(GR_PARAM_SHM_CMA), 0);
  unsetenv("GPURUN_SHM_CMA");

  unsetenv("GPURUN_NVML_LIBRARY");
  assert_string_equal(gr__param_str(GR_PARAM_NVML_LIBRARY), "libnvidia-ml.so.1");
  setenv("GPURUN_NVML_LIBRARY", "/x/libfake.so", 1);
  assert_string_equal(gr__param_str(GR_PARAM_NVML_LIBRARY), "/x/libfake.so");
  unsetenv("GPURUN_NVML_LIBRARY");
  setenv("GPURUN_MONITOR_DIR", "", 1);
  assert_null(gr__param_str(GR_PARAM_MONITOR_DIR));
  assert_null(gr__param_raw(GR_PARAM_MONITOR_DIR));
  unsetenv("GPURUN_MONITOR_DIR");
}

/* ---- the help text ---- */

static void test_help(void **state) {
  (void)state;
  char *buf = NULL, *man = NULL;
  size_t len = 0, mlen = 0;
  FILE *f = open_memstream(&buf, &len);
  gr__param_help(f);
  fclose(f);
  f = open_memstream(&man, &mlen);
  gr__param_man(f);
  fclose(f);
  for (int i = 0; i < GR_PARAM_COUNT; i++) {
    const gr_param_def *d = gr__param_def(i);
    char line[80];
    snprintf(line, sizeof line, "  %s ", d->name);
    if (!strstr(buf, line)) fail_msg("--help-env lacks %s", d->name);
    if (!strstr(buf, d->doc)) fail_msg("--help-env lacks %s's doc", d->name);
    snprintf(line, sizeof line, ".B %s\n", d->name); /* names have no '-' or '\\' to escape */
    if (!strstr(man, line)) fail_msg("the man section lacks %s", d->name);
  }
  assert_non_null(strstr(buf, "GPURUN_TIMEOUT           seconds, default 0 (no timeout)\n"));
  free(buf);
  free(man);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_seconds),  cmocka_unit_test(test_sizes),
      cmocka_unit_test(test_bools),    cmocka_unit_test(test_words),
      cmocka_unit_test(test_ints),     cmocka_unit_test(test_table),
      cmocka_unit_test(test_sentence), cmocka_unit_test(test_environment),
      cmocka_unit_test(test_help),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
