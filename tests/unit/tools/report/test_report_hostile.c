/* gpurun-report on input another job (or user) wrote: long lines, non-finite numbers, markup and
 * control characters in names, symlinks, FIFOs, devices, huge jobs; and the wait-for analysis on
 * flight dumps whose answer is worked out by hand. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "gr_test_tmpdir.h"

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gr_telemetry.h"
#include "gr_json_read.h"
#include "gr_report.h"

#define FIX GR_REPORT_FIXTURES

static char dir[64];

static int setup(void **state) {
  (void)state;
  return gr_test_tmpdir_make(dir, sizeof dir, "gr_report_hostile");
}

static int teardown(void **state) {
  (void)state;
  return gr_test_tmpdir_remove(dir);
}

static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  rewind(f);
  char *b = malloc((size_t)n + 1);
  assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
  b[n] = '\0';
  fclose(f);
  if (len) *len = (size_t)n;
  return b;
}

static void job_dir(const char *name, char *out, size_t cap) {
  snprintf(out, cap, "%s/%s", dir, name);
  assert_int_equal(mkdir(out, 0700), 0);
}

/* A CSV row for n0's local rank 0 at time t. */
static void row(FILE *f, double t, const char *gpu, const char *util, const char *power) {
  fprintf(f, "%.3f,%.3f,0,0,%s,%s,1,100,1000,50,%s,1000,0x0,0,10,100,,,,\n" /* 20 columns */, t,
          t - 1000, gpu, util, power);
}

/* The cases: a 5000-byte line ended reading (11 of 100 samples); inf/nan reached the SVG
 * as coordinates; a GPU name was taken as markup; a control character reached the terminal. */
static void test_hostile_csv(void **state) {
  (void)state;
  char jd[128], path[256];
  job_dir("csv", jd, sizeof jd);
  snprintf(path, sizeof path, "%s/n\x1b]0;pwned\x07.0.csv", jd);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(GR_TELEMETRY_CSV_HEADER, f);
  const char *gpu = "<script>x</script>&B";
  for (int i = 0; i < 100; i++) {
    if (i == 10) {
      char big[5001];
      memset(big, 'x', 5000);
      big[5000] = '\0';
      fprintf(f, "%s\n", big);
    }
    row(f, 1000 + i, gpu,
        i == 20   ? "inf"
        : i == 21 ? "nan"
        : i == 22 ? "1e999"
                  : "50",
        i == 23 ? "-inf" : "100");
  }
  fclose(f);
  gr__rpt_job j;
  assert_int_equal(gr__rpt_load(jd, &j), GR_OK);
  gr__rpt_summarize(&j);
  assert_int_equal(gr__rpt_nseries(&j), 1);
  assert_int_equal(GR__RPT_SERIES(&j, 0).n, 100); /* every sample, the long line skipped */
  assert_int_equal((int)isnan(GR__RPT_SERIES(&j, 0).m[GR__RPT_M_GPU_UTIL][20]), 1);
  assert_int_equal((int)isnan(GR__RPT_SERIES(&j, 0).m[GR__RPT_M_GPU_UTIL][22]), 1);
  assert_int_equal((int)isnan(GR__RPT_SERIES(&j, 0).m[GR__RPT_M_POWER][23]), 1);
  assert_float_equal(GR__RPT_SERIES(&j, 0).util_max, 50, 0);

  /* Terminal: the escape sequence in the node name is shown, not sent. */
  char tpath[256];
  snprintf(tpath, sizeof tpath, "%s/table.txt", dir);
  FILE *t = fopen(tpath, "w");
  gr__rpt_print_table(&j, t);
  fclose(t);
  char *text = slurp(tpath, NULL);
  assert_null(strchr(text, '\x1b'));
  assert_null(strchr(text, '\x07'));
  assert_non_null(strstr(text, "\\x1b"));
  free(text);

  char svg[256], js[256];
  snprintf(svg, sizeof svg, "%s/r.svg", dir);
  snprintf(js, sizeof js, "%s/r.json", dir);
  assert_int_equal(gr__rpt_write_svg(&j, svg, 0), GR_OK);
  assert_int_equal(gr__rpt_write_json(&j, js, NULL, NULL, 0), GR_OK);
  char *s = slurp(svg, NULL);
  assert_null(strstr(s, "<script"));
  assert_non_null(strstr(s, "&lt;script&gt;x&lt;/script&gt;&amp;B"));
  assert_null(strstr(s, "inf"));
  assert_null(strstr(s, "nan"));
  assert_null(strchr(s, '\x1b'));
  free(s);
  char *jt = slurp(js, NULL);
  size_t at = 0;
  gr__rpt_json *doc = gr__rpt_json_parse(jt, &at);
  assert_non_null(doc); /* valid JSON despite quotes, markup and control characters */
  const gr__rpt_json *ser = gr__rpt_json_get(doc, "series");
  assert_string_equal(gr__rpt_json_str(ser->child, "gpu"), gpu);
  assert_string_equal(gr__rpt_json_str(ser->child, "node"), "n\x1b]0;pwned\x07");
  gr__rpt_json_free(doc);
  free(jt);
  gr__rpt_free(&j);
}

/* 50k rows each with its own long GPU name made the report quadratic; now a name over 31 bytes is
 * refused and a file brings at most GR__RPT_MAX_SERIES_PER_FILE series. */
static void test_many_series_bounded(void **state) {
  (void)state;
  char jd[128], path[256];
  job_dir("series", jd, sizeof jd);
  snprintf(path, sizeof path, "%s/n0.0.csv", jd);
  FILE *f = fopen(path, "w");
  fputs(GR_TELEMETRY_CSV_HEADER, f);
  for (int i = 0; i < 20000; i++) {
    char gpu[64];
    snprintf(gpu, sizeof gpu, i % 2 ? "gpu%d" : "a-very-long-gpu-name-over-31-bytes-%d", i);
    row(f, 1000 + i * 0.01, gpu, "10", "10");
  }
  fclose(f);
  gr__rpt_job j;
  assert_int_equal(gr__rpt_load(jd, &j), GR_OK);
  assert_int_equal(gr__rpt_nseries(&j), GR__RPT_MAX_SERIES_PER_FILE);
  gr__rpt_free(&j);
}

/* A 1.2-million-sample job gave an SVG no renderer opens: now each chart has at most two points a
 * bucket, and spikes survive as the bucket's maximum. */
static void test_svg_envelope(void **state) {
  (void)state;
  char jd[128], path[256];
  job_dir("big", jd, sizeof jd);
  snprintf(path, sizeof path, "%s/n0.0.csv", jd);
  FILE *f = fopen(path, "w");
  fputs(GR_TELEMETRY_CSV_HEADER, f);
  const int n = 200000;
  for (int i = 0; i < n; i++)
    row(f, 1000 + i * 0.05, "0000:17:00.0", i == 123457 ? "99" : "10", "100");
  fclose(f);
  gr__rpt_job j;
  assert_int_equal(gr__rpt_load(jd, &j), GR_OK);
  gr__rpt_summarize(&j);
  assert_int_equal(GR__RPT_SERIES(&j, 0).n, n);
  char svg[256];
  snprintf(svg, sizeof svg, "%s/big.svg", dir);
  assert_int_equal(gr__rpt_write_svg(&j, svg, 0), GR_OK);
  size_t len;
  char *s = slurp(svg, &len);
  /* 4 GPU charts x at most 2 x GR__RPT_SVG_BUCKETS points of ~12 bytes, plus the frame. */
  assert_true(len < 4 * 2 * GR__RPT_SVG_BUCKETS * 14 + 8000);
  int points = 0;
  for (const char *p = strstr(s, "points=\""); p; p = strstr(p + 1, "points=\"")) {
    const char *e = strchr(p + 8, '"');
    for (const char *q = p + 8; q < e; q++)
      points += *q == ',';
  }
  assert_true(points <= 4 * 2 * GR__RPT_SVG_BUCKETS);
  assert_true(points >= 4 * GR__RPT_SVG_BUCKETS / 2);
  /* The one 99% spike is still drawn at the top of the utilisation chart: y = PAD_T + 40 + 1%. */
  assert_non_null(strstr(s, "max 99"));
  free(s);
  gr__rpt_free(&j);
}

/* Symlinks, FIFOs and devices are not read; a /dev/zero flight dump is refused, not read. */
static void test_refuses_special_files(void **state) {
  (void)state;
  char jd[128], path[256], victim[256];
  job_dir("special", jd, sizeof jd);
  snprintf(victim, sizeof victim, "%s/victim.csv", dir);
  FILE *f = fopen(victim, "w");
  fputs(GR_TELEMETRY_CSV_HEADER, f);
  row(f, 1000, "-", "1", "1");
  fclose(f);
  snprintf(path, sizeof path, "%s/n0.0.csv", jd);
  assert_int_equal(symlink(victim, path), 0);
  snprintf(path, sizeof path, "%s/n0.1.counters.json", jd);
  assert_int_equal(mkfifo(path, 0600), 0);
  snprintf(path, sizeof path, "%s/n0.2.csv", jd);
  assert_int_equal(mkfifo(path, 0600), 0);
  gr__rpt_job j;
  assert_int_equal(gr__rpt_load(jd, &j),
                   GR_OK); /* no hang on the FIFOs, nothing read via the link */
  assert_int_equal(gr__rpt_nseries(&j), 0);
  gr__rpt_free(&j);

  char fj[128];
  job_dir("zero", fj, sizeof fj);
  snprintf(path, sizeof path, "%s/flight.0.json", fj);
  assert_int_equal(symlink("/dev/zero", path), 0);
  char *json = NULL;
  int nd = -1;
  assert_int_equal(gr__rpt_flight(fj, stdout, &json, NULL, &nd), GR_ERR_INVALID);
  assert_non_null(strstr(gr_last_error(), "flight.0.json: "));
  assert_null(json);
  /* A regular file over the cap is refused too, without reading it all. */
  unlink(path);
  int fd = open(path, O_WRONLY | O_CREAT, 0600);
  assert_int_equal(ftruncate(fd, (off_t)GR__RPT_MAX_FLIGHT_FILE + 1), 0);
  close(fd);
  assert_int_equal(gr__rpt_flight(fj, stdout, &json, NULL, &nd), GR_ERR_INVALID);
}

static void test_json_bounds(void **state) {
  (void)state;
  const char *bad[] = {"1e999", "-inf", "[nan]", "0x10", "[-]", "01", "1.", "[1e]", "\"a\\u0000\""};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    gr__rpt_json *v = gr__rpt_json_parse(bad[i], NULL);
    if (i == 8) { /* \u0000 is read, but never as an embedded NUL */
      assert_non_null(v);
      assert_string_equal(v->str, "a?");
    } else {
      assert_null(v);
    }
    gr__rpt_json_free(v);
  }
  /* Inputs that end inside a key (found by fuzz_report_json: the reader stepped past the NUL and
   * read beyond the buffer); exact-size heap copies so that ASan sees any overread. */
  const char *cut[] = {"{\"wa", "{\"a\\", "{\"\\u00", "[\"x", "{\"k\": \"v"};
  for (size_t i = 0; i < sizeof cut / sizeof cut[0]; i++) {
    char *c = strdup(cut[i]);
    size_t at = 0;
    assert_null(gr__rpt_json_parse(c, &at));
    assert_true(at <= strlen(c));
    free(c);
  }
  char deep[200];
  memset(deep, '[', GR__RPT_JSON_MAX_DEPTH + 1);
  memset(deep + GR__RPT_JSON_MAX_DEPTH + 1, ']', GR__RPT_JSON_MAX_DEPTH + 1);
  deep[2 * (GR__RPT_JSON_MAX_DEPTH + 1)] = '\0';
  assert_null(gr__rpt_json_parse(deep, NULL));
  gr__rpt_json *ok = gr__rpt_json_parse("[-0.5e+3, 0, 12]", NULL);
  assert_non_null(ok);
  assert_float_equal(ok->child->num, -500, 0);
  gr__rpt_json_free(ok);
}

/* The priority line: only the three levels are shown; a control sequence, another case or an
 * over-long value in another job's counters file is left out. */
static void test_priority_levels(void **state) {
  (void)state;
  char jd[128], path[256];
  job_dir("prio", jd, sizeof jd);
  const char *level[] = {"low", "\\u001b[2Jhigh", "HIGH", "high", "lowlowlowlow", "low"};
  for (int r = 0; r < 6; r++) {
    snprintf(path, sizeof path, "%s/n0.%d.counters.json", jd, r);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "{\"rank\": %d, \"size\": 6, \"local_rank\": %d, \"priority\": \"%s\"}\n", r, r,
            level[r]);
    fclose(f);
  }
  gr__rpt_job j;
  assert_int_equal(gr__rpt_load(jd, &j), GR_OK);
  char *out = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&out, &len);
  gr__rpt_print_table(&j, m);
  fclose(m);
  assert_non_null(strstr(out, "\npriority high: ranks 3\n"));
  assert_true(strstr(out, "\npriority low: ranks 0,5\n") ||
              strstr(out, "\npriority low: ranks 5,0\n"));
  assert_null(strstr(out, "normal"));
  assert_null(strchr(out, 0x1b));
  free(out);
  gr__rpt_free(&j);
}

/* report.json / report.svg: a symlink planted at the name is refused and its target untouched; a
 * write that fails leaves the previous file whole. */
static void test_outputs_not_through_symlinks(void **state) {
  (void)state;
  char jd[128], victim[256], path[256];
  job_dir("out", jd, sizeof jd);
  snprintf(victim, sizeof victim, "%s/victim.txt", dir);
  FILE *f = fopen(victim, "w");
  fputs("precious\n", f);
  fclose(f);
  snprintf(path, sizeof path, "%s/report.svg", jd);
  assert_int_equal(symlink(victim, path), 0);
  gr__rpt_job j;
  assert_int_equal(gr__rpt_load(FIX "/cpu_job", &j), GR_OK);
  gr__rpt_summarize(&j);
  assert_int_equal(gr__rpt_write_svg(&j, path, 1), GR_ERR_SYSTEM);
  assert_non_null(strstr(gr_last_error(), "cannot write "));
  char *v = slurp(victim, NULL);
  assert_string_equal(v, "precious\n");
  free(v);
  /* A regular previous report is replaced whole; no temporary file is left behind. */
  snprintf(path, sizeof path, "%s/report.json", jd);
  f = fopen(path, "w");
  fputs("{\"old\": 1}\n", f);
  fclose(f);
  assert_int_equal(gr__rpt_write_json(&j, path, NULL, NULL, 1), GR_OK);
  char *js = slurp(path, NULL);
  gr__rpt_json *doc = gr__rpt_json_parse(js, NULL);
  assert_non_null(doc);
  assert_non_null(gr__rpt_json_get(doc, "series"));
  gr__rpt_json_free(doc);
  free(js);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "ls -A '%s' | grep -c tmp", jd);
  FILE *p = popen(cmd, "r");
  int ntmp = -1;
  assert_int_equal(fscanf(p, "%d", &ntmp), 1);
  pclose(p);
  assert_int_equal(ntmp, 0);
  /* A device is not a report file. */
  assert_int_equal(gr__rpt_write_json(&j, "/dev/full", NULL, NULL, 0), GR_ERR_SYSTEM);
  assert_non_null(strstr(gr_last_error(), "cannot write "));
  /* A job directory others can write is not written into by default. */
  assert_int_equal(chmod(jd, 0777), 0);
  assert_int_equal(gr__rpt_write_json(&j, path, NULL, NULL, 1), GR_ERR_SYSTEM);
  assert_non_null(strstr(gr_last_error(), "cannot write "));
  assert_int_equal(chmod(jd, 0700), 0);
  gr__rpt_free(&j);
}

static int has_rank(const gr__rpt_json *arr, int r) {
  for (const gr__rpt_json *c = arr ? arr->child : NULL; c; c = c->next)
    if (c->num == r) return 1;
  return 0;
}

/* The case: rank 0 waits in recv on 1, rank 1 in recv on 2, rank 2 was stopped and left no
 * dump. The old report said rank 0 "never entered". */
static void test_wait_for_p2p_chain(void **state) {
  (void)state;
  char *json = NULL, *wait = NULL;
  char tpath[256];
  snprintf(tpath, sizeof tpath, "%s/p2p.txt", dir);
  FILE *out = fopen(tpath, "w");
  {
    int nd = -1;
    assert_int_equal(gr__rpt_flight(FIX "/p2p_chain_job", out, &json, &wait, &nd), GR_OK);
    assert_int_equal(nd, 2);
  }
  fclose(out);
  char *text = slurp(tpath, NULL);
  printf("%s", text);
  assert_null(strstr(text, "NEVER ENTERED"));
  assert_non_null(strstr(text, "chain: 0 -> 1 -> 2: rank 2 left no dump"));
  free(text);
  gr__rpt_json *w = gr__rpt_json_parse(wait, NULL);
  assert_non_null(w);
  const gr__rpt_json *ends = gr__rpt_json_get(w, "ends");
  assert_non_null(ends->child);
  assert_null(ends->child->next);
  assert_float_equal(gr__rpt_json_num(ends->child, "rank", -1), 2, 0);
  assert_string_equal(gr__rpt_json_str(ends->child, "why"), "no_dump");
  const gr__rpt_json *e = gr__rpt_json_get(w, "edges")->child;
  assert_float_equal(gr__rpt_json_num(e, "rank", -1), 0, 0);
  assert_true(has_rank(gr__rpt_json_get(e, "waits_for"), 1));
  gr__rpt_json_free(w);
  free(json);
  free(wait);
}

/* A collective waits on a rank that is itself in a recv from a third, which is computing. */
static void test_wait_for_mixed_chain(void **state) {
  (void)state;
  char *json = NULL, *wait = NULL;
  char tpath[256];
  snprintf(tpath, sizeof tpath, "%s/mixed.txt", dir);
  FILE *out = fopen(tpath, "w");
  {
    int nd = -1;
    assert_int_equal(gr__rpt_flight(FIX "/mixed_chain_job", out, &json, &wait, &nd), GR_OK);
    assert_int_equal(nd, 3);
  }
  fclose(out);
  char *text = slurp(tpath, NULL);
  printf("%s", text);
  assert_non_null(strstr(text, "chain: 0 -> 1 -> 2: rank 2 is in no collective call"));
  free(text);
  gr__rpt_json *w = gr__rpt_json_parse(wait, NULL);
  const gr__rpt_json *ends = gr__rpt_json_get(w, "ends");
  assert_float_equal(gr__rpt_json_num(ends->child, "rank", -1), 2, 0);
  assert_string_equal(gr__rpt_json_str(ends->child, "why"), "not_waiting");
  assert_null(ends->child->next);
  gr__rpt_json_free(w);
  free(json);
  free(wait);
}

/* Two ranks in recv from each other: a cycle, named as such. Dumps written here. */
static void test_wait_for_cycle(void **state) {
  (void)state;
  char jd[128], path[256];
  job_dir("cycle", jd, sizeof jd);
  for (int r = 0; r < 2; r++) {
    snprintf(path, sizeof path, "%s/flight.%d.json", jd, r);
    FILE *f = fopen(path, "w");
    fprintf(f,
            "{\"rank\": %d, \"size\": 2, \"node\": \"n\", \"reason\": \"timeout\", \"comms\": "
            "[{\"id\": \"world\", \"rank\": %d, \"size\": 2, \"backend\": \"mpi\", \"calls\": "
            "[{\"seq\": 1, \"cseq\": null, \"op\": \"recv\", \"peer\": %d, \"start\": 5, \"end\": "
            "null, \"state\": \"running\"}]}]}\n",
            r, r, 1 - r);
    fclose(f);
  }
  char *json = NULL, *wait = NULL;
  char tpath[256];
  snprintf(tpath, sizeof tpath, "%s/cycle.txt", dir);
  FILE *out = fopen(tpath, "w");
  {
    int nd = -1;
    assert_int_equal(gr__rpt_flight(jd, out, &json, &wait, &nd), GR_OK);
    assert_int_equal(nd, 2);
  }
  fclose(out);
  char *text = slurp(tpath, NULL);
  assert_non_null(strstr(text, "chain: 0 -> 1 -> 0: rank 0 is in a wait-for cycle"));
  free(text);
  gr__rpt_json *w = gr__rpt_json_parse(wait, NULL);
  assert_non_null(w);
  const gr__rpt_json *ends = gr__rpt_json_get(w, "ends");
  assert_string_equal(gr__rpt_json_str(ends->child, "why"), "cycle");
  gr__rpt_json_free(w);
  free(json);
  free(wait);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_hostile_csv),
      cmocka_unit_test(test_many_series_bounded),
      cmocka_unit_test(test_svg_envelope),
      cmocka_unit_test(test_refuses_special_files),
      cmocka_unit_test(test_json_bounds),
      cmocka_unit_test(test_outputs_not_through_symlinks),
      cmocka_unit_test(test_wait_for_p2p_chain),
      cmocka_unit_test(test_wait_for_mixed_chain),
      cmocka_unit_test(test_wait_for_cycle),
      cmocka_unit_test(test_priority_levels),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
