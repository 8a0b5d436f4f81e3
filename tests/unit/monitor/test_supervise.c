/* gr__supervise: exit codes, signal forwarding, the time limit, the monitor CSV, and a host name
 * too long for its file names. Each case runs the supervisor in a forked helper so that signals
 * aimed at it do not hit the test runner. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gr_log.h"
#include "gr_supervise.h"
#include "gr_telemetry.h"

static char tmpdir[256];

static int setup(void **state) {
  (void)state;
  snprintf(tmpdir, sizeof tmpdir, "/tmp/gr_supervise_XXXXXX");
  assert_non_null(mkdtemp(tmpdir));
  setenv("GPURUN_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  char cmd[512];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  return system(cmd) == 0 ? 0 : -1;
}

/* Runs the supervisor in a helper process; returns the helper's pid. The helper exits with
 * exit_code, or 250 when gr__supervise failed. */
static pid_t start(char *const argv[], const gr_supervise_opts *o) {
  pid_t h = fork();
  assert_true(h >= 0);
  if (h == 0) {
    int code = -1;
    gr_status st = gr__supervise(argv, o, &code);
    _exit(st == GR_OK ? code : 250);
  }
  return h;
}

static int finish(pid_t h) {
  int st;
  assert_int_equal(waitpid(h, &st, 0), h);
  assert_true(WIFEXITED(st));
  return WEXITSTATUS(st);
}

static int run(char *const argv[], const gr_supervise_opts *o) { return finish(start(argv, o)); }

static void wait_for_file(const char *path) {
  struct timespec ts = {0, 10 * 1000 * 1000};
  while (access(path, F_OK) != 0)
    nanosleep(&ts, NULL);
}

static void test_exit_codes(void **state) {
  (void)state;
  gr_supervise_opts o;
  gr__supervise_opts_init(&o);
  char *ok[] = {"sh", "-c", "exit 0", NULL};
  char *three[] = {"sh", "-c", "exit 3", NULL};
  char *sig[] = {"sh", "-c", "kill -KILL $$", NULL};
  char *missing[] = {"/nonexistent/program", NULL};
  assert_int_equal(run(ok, &o), 0);
  assert_int_equal(run(three, &o), 3);
  assert_int_equal(run(sig, &o), 128 + SIGKILL);
  assert_int_equal(run(missing, &o), 127);

  char script[300];
  snprintf(script, sizeof script, "%s/notexec", tmpdir);
  FILE *f = fopen(script, "w");
  assert_non_null(f);
  fputs("#!/bin/sh\nexit 0\n", f);
  fclose(f);
  chmod(script, 0644);
  char *noexec[] = {script, NULL};
  assert_int_equal(run(noexec, &o), 126);
}

static void test_bad_options(void **state) {
  (void)state;
  gr_supervise_opts o;
  gr__supervise_opts_init(&o);
  o.time_limit_s = -1;
  char *ok[] = {"true", NULL};
  int code = 0;
  assert_int_equal(gr__supervise(ok, &o, &code), GR_ERR_INVALID);
  assert_int_equal(gr__supervise(NULL, NULL, &code), GR_ERR_INVALID);
  /* Below the documented floor of 50 ms: refused, nothing started. */
  gr__supervise_opts_init(&o);
  o.monitor_interval_s = 1e-9;
  assert_int_equal(gr__supervise(ok, &o, &code), GR_ERR_INVALID);
  o.monitor_interval_s = 0.049;
  assert_int_equal(gr__supervise(ok, &o, &code), GR_ERR_INVALID);
}

static void test_forwards_signals(void **state) {
  (void)state;
  static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
  static const char *const names[] = {"INT", "TERM", "HUP", "QUIT", "USR1", "USR2"};
  for (int i = 0; i < 6; i++) {
    char ready[300], body[600];
    snprintf(ready, sizeof ready, "%s/ready.%d", tmpdir, i);
    /* The program exits 40+i only when it receives the signal: proof it was forwarded. */
    snprintf(body, sizeof body, "trap 'exit %d' %s; touch %s; while :; do sleep 0.02; done", 40 + i,
             names[i], ready);
    char *argv[] = {"sh", "-c", body, NULL};
    gr_supervise_opts o;
    gr__supervise_opts_init(&o);
    pid_t h = start(argv, &o);
    wait_for_file(ready);
    kill(h, sigs[i]);
    assert_int_equal(finish(h), 40 + i);
  }
}

static void test_time_limit_term(void **state) {
  (void)state;
  gr_supervise_opts o;
  gr__supervise_opts_init(&o);
  o.time_limit_s = 0.2;
  o.kill_grace_s = 5;
  char *argv[] = {"sh", "-c", "while :; do sleep 0.02; done", NULL};
  assert_int_equal(run(argv, &o), 124);
}

static void test_time_limit_kill(void **state) {
  (void)state;
  gr_supervise_opts o;
  gr__supervise_opts_init(&o);
  o.time_limit_s = 0.2;
  o.kill_grace_s = 0.2;
  /* Ignores SIGTERM: only the SIGKILL after the grace period ends it. */
  char *argv[] = {"sh", "-c", "trap '' TERM; while :; do sleep 0.02; done", NULL};
  assert_int_equal(run(argv, &o), 124);
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return NULL;
  static char buf[1 << 16];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = '\0';
  fclose(f);
  return buf;
}

static int count_char(const char *s, char c) {
  int n = 0;
  for (; *s; s++)
    n += *s == c;
  return n;
}

static void check_csv(const char *path, int min_rows) {
  char *text = slurp(path);
  assert_non_null(text);
  size_t hl = strlen(GR_TELEMETRY_CSV_HEADER);
  assert_memory_equal(text, GR_TELEMETRY_CSV_HEADER, hl);
  size_t len = strlen(text);
  assert_true(len > hl);
  assert_int_equal(text[len - 1], '\n'); /* never cut mid-line */
  int rows = 0, with_rss = 0;
  for (char *line = text + hl; *line;) {
    char *nl = strchr(line, '\n');
    *nl = '\0';
    assert_int_equal(count_char(line, ','), 19); /* 20 columns, GR_TELEMETRY_CSV_HEADER */
    /* time,elapsed,rank,local_rank,gpu ... */
    char gpu[32];
    int rank, lr;
    double t, el;
    assert_int_equal(sscanf(line, "%lf,%lf,%d,%d,%31[^,]", &t, &el, &rank, &lr, gpu), 5);
    assert_int_equal(rank, 5);
    assert_int_equal(lr, 2);
    assert_string_equal(gpu, "-");
    const char *rss = line; /* rss_mib: the 16th column */
    for (int i = 0; i < 15; i++)
      rss = strchr(rss, ',') + 1;
    if (*rss != ',' && atof(rss) > 0) with_rss++;
    rows++;
    line = nl + 1;
  }
  assert_true(rows >= min_rows);
  assert_true(with_rss >= 1);
}

static void test_monitor_csv(void **state) {
  (void)state;
  gr_supervise_opts o;
  gr__supervise_opts_init(&o);
  o.monitor_interval_s = 0.05;
  o.monitor_dir = tmpdir;
  o.job_id = "job/1"; /* the slash must not make a subdirectory */
  o.node_name = "n0";
  o.local_rank = 2;
  o.rank = 5;
  o.gpus_pci = "";
  char *argv[] = {"sh", "-c", "sleep 0.3", NULL};
  assert_int_equal(run(argv, &o), 0);
  char path[512];
  snprintf(path, sizeof path, "%s/job_1/n0.2.csv", tmpdir);
  /* Samples at 0, 0.05, ... until the 0.3 s program ends: at least the first two. */
  check_csv(path, 2);
}

static void test_monitor_sigterm_leaves_whole_lines(void **state) {
  (void)state;
  gr_supervise_opts o;
  gr__supervise_opts_init(&o);
  o.monitor_interval_s = 0.05; /* the floor: as many samples as allowed */
  o.monitor_dir = tmpdir;
  o.job_id = "term";
  o.node_name = "n1";
  o.local_rank = 2;
  o.rank = 5;
  char ready[300], body[400];
  snprintf(ready, sizeof ready, "%s/ready.term", tmpdir);
  snprintf(body, sizeof body, "touch %s; while :; do sleep 0.02; done", ready);
  char *argv[] = {"sh", "-c", body, NULL};
  pid_t h = start(argv, &o);
  wait_for_file(ready);
  struct timespec ts = {0, 100 * 1000 * 1000};
  nanosleep(&ts, NULL);
  kill(h, SIGTERM);
  assert_int_equal(finish(h), 128 + SIGTERM);
  char path[512];
  snprintf(path, sizeof path, "%s/term/n1.2.csv", tmpdir);
  check_csv(path, 1);
}

/* The program learns where its counters go. */
static void test_exports_monitor_env(void **state) {
  (void)state;
  gr_supervise_opts o;
  gr__supervise_opts_init(&o);
  o.monitor_interval_s = 1;
  o.monitor_dir = tmpdir;
  o.job_id = "envjob";
  o.node_name = "n2";
  char out[300], body[600];
  snprintf(out, sizeof out, "%s/env.txt", tmpdir);
  snprintf(body, sizeof body, "echo \"$GPURUN_MONITOR_DIR|$GPURUN_JOB_ID\" > %s", out);
  char *argv[] = {"sh", "-c", body, NULL};
  assert_int_equal(run(argv, &o), 0);
  char want[400];
  snprintf(want, sizeof want, "%s|envjob\n", tmpdir);
  assert_string_equal(slurp(out), want);
}

/* Runs the supervisor with its stderr (warn level) in errpath; returns the helper's exit code. */
static int run_stderr(char *const argv[], const gr_supervise_opts *o, const char *errpath) {
  pid_t h = fork();
  assert_true(h >= 0);
  if (h == 0) {
    int fd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || dup2(fd, 2) < 0) _exit(251);
    setenv("GPURUN_LOG", "warn", 1);
    gr__log_reset();
    int code = -1;
    gr_status st = gr__supervise(argv, o, &code);
    _exit(st == GR_OK ? code : 250);
  }
  return finish(h);
}

/* A host name too long for the job directory's file names: the longest of them,
 * <host>.<local_rank>.counters.json, may have NAME_MAX bytes (255). Linux host names are at most
 * 64 bytes; a longer node name is one sentence (its length, the limit, the longest that fits, what
 * to do) and the program runs unmonitored, not an errno from open(2). One byte shorter works. */
static void test_monitor_long_host(void **state) {
  (void)state;
  long nm = pathconf(tmpdir, _PC_NAME_MAX);
  if (nm <= 0) nm = 255;
  struct {
    int local_rank;
    size_t len; /* host name */
    int ok;
  } cases[] = {
      {0, (size_t)nm - 16, 1},  /* "<host>.0.counters.json": exactly NAME_MAX */
      {0, (size_t)nm - 15, 0},  /* one byte over */
      {12, (size_t)nm - 16, 0}, /* ".12.counters.json" is a byte longer */
      {3, 255, 0},              /* the 255 bytes docs/formats.md once assumed */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char node[300];
    memset(node, 'h', cases[i].len);
    node[cases[i].len] = '\0';
    gr_supervise_opts o;
    gr__supervise_opts_init(&o);
    o.monitor_interval_s = 0.05;
    o.monitor_dir = tmpdir;
    o.job_id = "longhost";
    o.node_name = node;
    o.local_rank = cases[i].local_rank;
    o.rank = 0;
    o.gpus_pci = "";
    char err[300], csv[600];
    snprintf(err, sizeof err, "%s/longhost.err", tmpdir);
    snprintf(csv, sizeof csv, "%s/longhost/%s.%d.csv", tmpdir, node, cases[i].local_rank);
    char *argv[] = {"sh", "-c", "exit 3", NULL};
    assert_int_equal(run_stderr(argv, &o, err), 3); /* the program runs either way */
    const char *text = slurp(err);
    assert_non_null(text);
    if (cases[i].ok) {
      if (access(csv, F_OK) != 0)
        fail_msg("host name of %zu bytes: no CSV; stderr: %s", cases[i].len, text);
      assert_null(strstr(text, "--monitor"));
      assert_int_equal(unlink(csv), 0);
      continue;
    }
    char want[600];
    snprintf(want, sizeof want,
             "--monitor: the host name is %zu bytes, and with it the file <host>.%d.counters.json "
             "in %s/longhost would pass the %ld bytes a file name can have (NAME_MAX): monitoring "
             "needs a host name of at most %ld bytes, so give this node a shorter one; running "
             "without monitoring\n",
             cases[i].len, cases[i].local_rank, tmpdir, nm,
             nm - (cases[i].local_rank >= 10 ? 17 : 16));
    if (!strstr(text, want))
      fail_msg("host name of %zu bytes: stderr is\n%s\nnot\n%s", cases[i].len, text, want);
    assert_int_equal(count_char(text, '\n'), 1); /* that sentence alone */
    assert_null(strstr(text, "too long:"));      /* no strerror(ENAMETOOLONG) */
    assert_int_not_equal(access(csv, F_OK), 0);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_exit_codes),
      cmocka_unit_test(test_bad_options),
      cmocka_unit_test(test_forwards_signals),
      cmocka_unit_test(test_time_limit_term),
      cmocka_unit_test(test_time_limit_kill),
      cmocka_unit_test(test_monitor_csv),
      cmocka_unit_test(test_monitor_sigterm_leaves_whole_lines),
      cmocka_unit_test(test_exports_monitor_env),
      cmocka_unit_test(test_monitor_long_host),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
