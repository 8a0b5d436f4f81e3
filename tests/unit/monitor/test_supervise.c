/* gr__supervise: the program keeps the helper's pid and gets its signals directly, its exit codes,
 * the time limit, the monitor CSV (with the program's own columns), the end record, a program
 * that waits for any child, either process killed with SIGKILL, and a host name too long for its
 * file names. Each case runs gr__supervise in a forked helper (which becomes the program); the
 * test process is a child subreaper, so that the orphaned supervisor becomes its child and can be
 * waited for (and must be gone soon after the program). The test binary is also the program of
 * some cases (argv[1] "--wait-any"). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <errno.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gr_clock.h"
#include "gr_end_record.h"
#include "gr_log.h"
#include "gr_monitor_csv.h"
#include "gr_supervise.h"

/* dst = src cut to cap bytes (terminated): a file's text into a fixed buffer. */
static void copy_text(char *dst, size_t cap, const char *src) {
  size_t n = strlen(src);
  if (n >= cap) n = cap - 1;
  memcpy(dst, src, n);
  dst[n] = '\0';
}

static char tmpdir[256];

static int setup(void **state) {
  (void)state;
  snprintf(tmpdir, sizeof tmpdir, "/tmp/gr_supervise_XXXXXX");
  assert_non_null(mkdtemp(tmpdir));
  setenv("GPURUN_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
  assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  char cmd[512];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  return system(cmd) == 0 ? 0 : -1;
}

/* Runs gr__supervise in a helper process, which becomes the program; returns the helper's pid.
 * The helper exits with the program's status, or 250 when gr__supervise failed. */
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

/* The helper's status, shell-style: 128+N when killed by signal N. */
static int finish(pid_t h) {
  int st;
  assert_int_equal(waitpid(h, &st, 0), h);
  if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
  assert_true(WIFEXITED(st));
  return WEXITSTATUS(st);
}

/* Waits for every other child (the orphaned supervisors, and what the programs left, reparented
 * to this subreaper) to exit within seconds; fails, naming them, when one lingers. */
static void reap_supervisors(double seconds) {
  struct timespec ts = {0, 5 * 1000 * 1000};
  for (int i = 0; i < (int)(seconds * 200); i++) {
    int st;
    pid_t w = waitpid(-1, &st, WNOHANG);
    if (w < 0 && errno == ECHILD) return;
    if (w == 0) nanosleep(&ts, NULL);
  }
  char cmd[200];
  snprintf(cmd, sizeof cmd, "ps -o pid,ppid,stat,args --ppid %d >&2", (int)getpid());
  if (system(cmd) != 0) {
  }
  fail_msg("a supervisor (or a child of a program) outlived its program by %g s", seconds);
}

static int run(char *const argv[], const gr_supervise_opts *o) {
  int code = finish(start(argv, o));
  reap_supervisors(5);
  return code;
}

/* The supervisor of this test: the child of the test process named gpurun-monitor. */
static pid_t find_supervisor(void) {
  for (int tries = 0; tries < 500; tries++) {
    DIR *d = opendir("/proc");
    assert_non_null(d);
    pid_t found = 0;
    for (struct dirent *e; !found && (e = readdir(d));) {
      char path[300], buf[1024];
      snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
      FILE *f = fopen(path, "r");
      if (!f) continue;
      size_t n = fread(buf, 1, sizeof buf - 1, f);
      fclose(f);
      buf[n] = '\0';
      gr__pid_stat st;
      if (gr__parse_pid_stat(buf, &st) == 0 && st.ppid == getpid() &&
          strstr(buf, "(gpurun-monitor)"))
        found = atoi(e->d_name);
    }
    closedir(d);
    if (found) return found;
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  fail_msg("no supervisor found among the test's children");
  return -1;
}

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

/* Signals sent to the helper's pid reach the program: it is that process. */
static void test_signals_reach_program(void **state) {
  (void)state;
  static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
  static const char *const names[] = {"INT", "TERM", "HUP", "QUIT", "USR1", "USR2"};
  for (int i = 0; i < 6; i++) {
    char ready[300], body[600];
    snprintf(ready, sizeof ready, "%s/ready.%d", tmpdir, i);
    /* The program exits 40+i only when it receives the signal. */
    snprintf(body, sizeof body, "trap 'exit %d' %s; touch %s; while :; do sleep 0.02; done", 40 + i,
             names[i], ready);
    char *argv[] = {"sh", "-c", body, NULL};
    gr_supervise_opts o;
    gr__supervise_opts_init(&o);
    pid_t h = start(argv, &o);
    wait_for_file(ready);
    kill(h, sigs[i]);
    assert_int_equal(finish(h), 40 + i);
    reap_supervisors(5);
  }
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
  size_t hl = strlen(GR_MONITOR_CSV_FILE_HEADER);
  assert_memory_equal(text, GR_MONITOR_CSV_FILE_HEADER, hl);
  size_t len = strlen(text);
  assert_true(len > hl);
  assert_int_equal(text[len - 1], '\n'); /* never cut mid-line */
  int rows = 0, with_rss = 0, with_state = 0, with_steal = 0;
  for (char *line = text + hl; *line;) {
    char *nl = strchr(line, '\n');
    *nl = '\0';
    assert_int_equal(count_char(line, ','), 22); /* 23 columns, GR_MONITOR_CSV_FILE_HEADER */
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
    /* cpu_steal, the last column: empty, or a share of the cores' time (this Linux has the
     * field, so some row has it) */
    char *steal = strrchr(line, ',');
    *steal++ = '\0';
    if (*steal) {
      char *end;
      double v = strtod(steal, &end);
      assert_true(*end == '\0' && v >= 0 && v <= 100);
      with_steal++;
    }
    /* cpu_time_s and state, the program's own: the two columns before it */
    const char *state = strrchr(line, ',') + 1, *cpu = state - 2;
    while (cpu > line && cpu[-1] != ',')
      cpu--;
    if (*state) {
      assert_int_equal(strlen(state), 1);
      assert_non_null(strchr("RSDTtZXIPWK", *state));
      assert_true(atof(cpu) >= 0 && cpu[0] >= '0' && cpu[0] <= '9');
      with_state++;
    }
    rows++;
    line = nl + 1;
  }
  assert_true(rows >= min_rows);
  assert_true(with_rss >= 1);
  assert_true(with_state >= 1);
  assert_true(with_steal >= 1);
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
  reap_supervisors(5);
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
  int code = finish(h);
  reap_supervisors(5);
  return code;
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

/* Waits (up to 10 s) for path to exist and be non-empty. */
static void wait_for_content(const char *path) {
  struct timespec ts = {0, 10 * 1000 * 1000};
  struct stat sb;
  for (int i = 0; i < 1000; i++) {
    if (stat(path, &sb) == 0 && sb.st_size > 0) return;
    nanosleep(&ts, NULL);
  }
  fail_msg("%s never appeared", path);
}

/* Options of a monitored case whose files go to tmpdir/<job>/n9.1.*. */
static void monitored(gr_supervise_opts *o, const char *job) {
  gr__supervise_opts_init(o);
  o->monitor_interval_s = 0.05;
  o->monitor_dir = tmpdir;
  o->job_id = job;
  o->node_name = "n9";
  o->local_rank = 1;
  o->rank = 7;
  o->gpus_pci = "";
}

/* Runs argv monitored under job without reaping the program until its end record is there (so
 * that the zombie's status is always seen), then returns its status; *end gets the record. */
static int run_to_end_record(char *const argv[], gr_supervise_opts *o, const char *job, char *end,
                             size_t cap) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s/n9.1" GR_END_SUFFIX, tmpdir, job);
  pid_t h = start(argv, o);
  wait_for_content(path);
  int code = finish(h);
  reap_supervisors(5);
  copy_text(end, cap, slurp(path));
  return code;
}

/* The program is the process the helper was: same pid (what mpirun, gdb and STAT see). */
static void test_keeps_pid(void **state) {
  (void)state;
  char out[300], body[400];
  snprintf(out, sizeof out, "%s/pid.txt", tmpdir);
  snprintf(body, sizeof body, "echo $$ > %s", out);
  char *argv[] = {"sh", "-c", body, NULL};
  for (int mon = 0; mon < 2; mon++) {
    gr_supervise_opts o;
    if (mon)
      monitored(&o, "pid");
    else
      gr__supervise_opts_init(&o), o.time_limit_s = 30;
    pid_t h = start(argv, &o);
    assert_int_equal(finish(h), 0);
    reap_supervisors(5);
    assert_int_equal(atoi(slurp(out)), (int)h);
  }
}

/* A program that waits for any child it has (waitpid(-1)) reaps only its own: the supervisor is
 * none of its children. The program is this binary with "--wait-any" (main below). */
static void test_wait_any(void **state) {
  (void)state;
  char *argv[] = {"/proc/self/exe", "--wait-any", NULL};
  gr_supervise_opts o;
  monitored(&o, "waitany");
  assert_int_equal(run(argv, &o), 0);
  gr__supervise_opts_init(&o);
  o.time_limit_s = 30;
  assert_int_equal(run(argv, &o), 0);
}

/* A program that exits at once, one that cannot be executed: no supervisor lingers (run() checks),
 * and an exec that failed leaves no end record. */
static void test_quick_and_failed(void **state) {
  (void)state;
  gr_supervise_opts o;
  monitored(&o, "quick");
  char *t[] = {"true", NULL};
  assert_int_equal(run(t, &o), 0);
  char *missing[] = {"/nonexistent/program", NULL};
  monitored(&o, "failed");
  assert_int_equal(run(missing, &o), 127);
  char path[512];
  snprintf(path, sizeof path, "%s/failed/n9.1" GR_END_SUFFIX, tmpdir);
  assert_int_not_equal(access(path, F_OK), 0);
}

/* The end record: an exit status, a signal (the zombie read before it is reaped). */
static void test_end_record(void **state) {
  (void)state;
  gr_supervise_opts o;
  char end[2048];
  char *three[] = {"sh", "-c", "sleep 0.1; exit 3", NULL};
  monitored(&o, "end3");
  assert_int_equal(run_to_end_record(three, &o, "end3", end, sizeof end), 3);
  assert_non_null(strstr(end, "\"how\": \"exit\", \"exit_code\": 3, \"signal\": null"));
  assert_non_null(strstr(end, "\"rank\": 7"));
  assert_non_null(strstr(end, "\"time_limit\": \"none\""));
  assert_int_equal(end[strlen(end) - 1], '\n');
  char *seg[] = {"sh", "-c", "kill -SEGV $$", NULL};
  monitored(&o, "endsegv");
  assert_int_equal(run_to_end_record(seg, &o, "endsegv", end, sizeof end), 128 + SIGSEGV);
  assert_non_null(strstr(end, "\"how\": \"signal\", \"exit_code\": null, \"signal\": 11, "
                              "\"signal_name\": \"SEGV\""));
}

/* SIGKILL of the program: the supervisor sees it within an interval, records it, and exits. */
static void test_program_killed(void **state) {
  (void)state;
  char ready[300], body[400], path[512];
  snprintf(ready, sizeof ready, "%s/ready.pk", tmpdir);
  snprintf(body, sizeof body, "touch %s; exec sleep 300", ready);
  snprintf(path, sizeof path, "%s/pk/n9.1" GR_END_SUFFIX, tmpdir);
  char *argv[] = {"sh", "-c", body, NULL};
  gr_supervise_opts o;
  monitored(&o, "pk");
  o.monitor_interval_s = 1; /* long: the pidfd, not the next sample, tells of the end */
  pid_t h = start(argv, &o);
  wait_for_file(ready);
  pid_t sup = find_supervisor();
  kill(h, SIGKILL);
  double t0 = gr__mono_now();
  wait_for_content(path);
  int st;
  assert_int_equal(waitpid(sup, &st, 0), sup); /* it exits by itself */
  double took = gr__mono_now() - t0;
  if (took > 0.9) fail_msg("the supervisor took %.2f s to see its program killed", took);
  assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  assert_int_equal(finish(h), 128 + SIGKILL);
  assert_non_null(strstr(slurp(path), "\"signal\": 9, \"signal_name\": \"KILL\""));
}

/* SIGKILL of the supervisor: the program runs on unharmed and ends with its own status. */
static void test_supervisor_killed(void **state) {
  (void)state;
  char ready[300], go[300], body[700];
  snprintf(ready, sizeof ready, "%s/ready.sk", tmpdir);
  snprintf(go, sizeof go, "%s/go.sk", tmpdir);
  snprintf(body, sizeof body, "touch %s; while [ ! -e %s ]; do sleep 0.02; done; exit 7", ready,
           go);
  char *argv[] = {"sh", "-c", body, NULL};
  gr_supervise_opts o;
  monitored(&o, "sk");
  o.time_limit_s = 60;
  pid_t h = start(argv, &o);
  wait_for_file(ready);
  pid_t sup = find_supervisor();
  assert_int_equal(kill(sup, SIGKILL), 0);
  int st;
  assert_int_equal(waitpid(sup, &st, 0), sup);
  assert_true(WIFSIGNALED(st));
  assert_int_equal(kill(h, 0), 0); /* still there */
  FILE *f = fopen(go, "w");
  assert_non_null(f);
  fclose(f);
  assert_int_equal(finish(h), 7);
}

/* The supervisor ignores the job-wide signals a launcher or batch system sends by pid: the
 * program's end is still recorded after the supervisor got SIGTERM. */
static void test_supervisor_ignores_term(void **state) {
  (void)state;
  char ready[300], body[400], end[2048];
  snprintf(ready, sizeof ready, "%s/ready.it", tmpdir);
  snprintf(body, sizeof body, "touch %s; sleep 0.5; exit 4", ready);
  char *argv[] = {"sh", "-c", body, NULL};
  gr_supervise_opts o;
  monitored(&o, "it");
  char path[512];
  snprintf(path, sizeof path, "%s/it/n9.1" GR_END_SUFFIX, tmpdir);
  pid_t h = start(argv, &o);
  wait_for_file(ready);
  pid_t sup = find_supervisor();
  kill(sup, SIGTERM);
  kill(sup, SIGINT);
  kill(sup, SIGHUP);
  wait_for_content(path);
  assert_int_equal(finish(h), 4);
  reap_supervisors(5);
  copy_text(end, sizeof end, slurp(path));
  assert_non_null(strstr(end, "\"exit_code\": 4"));
}

/* The time limit: SIGTERM, the program's own status (no 124), the log line, the end record. */
static void test_time_limit_term(void **state) {
  (void)state;
  gr_supervise_opts o;
  monitored(&o, "tlterm");
  o.time_limit_s = 0.2;
  o.kill_grace_s = 5;
  char *argv[] = {"sh", "-c", "while :; do sleep 0.02; done", NULL};
  char end[2048];
  assert_int_equal(run_to_end_record(argv, &o, "tlterm", end, sizeof end), 128 + SIGTERM);
  assert_non_null(strstr(end, "\"signal\": 15"));
  assert_non_null(strstr(end, "\"time_limit\": \"term\""));
  /* a program that handles SIGTERM ends with its own status */
  gr__supervise_opts_init(&o);
  o.time_limit_s = 0.2;
  char err[300];
  snprintf(err, sizeof err, "%s/tl.err", tmpdir);
  char *trap[] = {"sh", "-c", "trap 'exit 0' TERM; while :; do sleep 0.02; done", NULL};
  assert_int_equal(run_stderr(trap, &o, err), 0);
  const char *text = slurp(err);
  if (!strstr(text, "time limit of 0.2 s reached: sending SIGTERM to sh") ||
      !strstr(text, "ended by the time limit of 0.2 s (after SIGTERM): "))
    fail_msg("stderr:\n%s", text);
}

static void test_time_limit_kill(void **state) {
  (void)state;
  gr_supervise_opts o;
  monitored(&o, "tlkill");
  o.time_limit_s = 0.2;
  o.kill_grace_s = 0.2;
  /* Ignores SIGTERM: only the SIGKILL after the grace period ends it. */
  char *argv[] = {"sh", "-c", "trap '' TERM; while :; do sleep 0.02; done", NULL};
  char end[2048];
  assert_int_equal(run_to_end_record(argv, &o, "tlkill", end, sizeof end), 128 + SIGKILL);
  assert_non_null(strstr(end, "\"signal\": 9"));
  assert_non_null(strstr(end, "\"time_limit\": \"kill\""));
}

/* The time limit reaches the program's children when the program leads no process group of its
 * own (the helper is in the test's group): found below it through /proc. */
static void test_time_limit_children(void **state) {
  (void)state;
  char pidf[300], body[600];
  snprintf(pidf, sizeof pidf, "%s/bg.pid", tmpdir);
  snprintf(body, sizeof body, "sleep 300 & echo $! > %s; wait", pidf);
  char *argv[] = {"sh", "-c", body, NULL};
  gr_supervise_opts o;
  gr__supervise_opts_init(&o);
  o.time_limit_s = 0.3;
  o.kill_grace_s = 5;
  assert_int_equal(run(argv, &o), 128 + SIGTERM);
  pid_t bg = (pid_t)atoi(slurp(pidf));
  assert_true(bg > 0);
  /* the orphaned sleep was reparented to this subreaper: reaped here once killed */
  int st;
  for (int i = 0; i < 500 && waitpid(bg, &st, WNOHANG) == 0; i++) {
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  if (kill(bg, 0) == 0) {
    kill(bg, SIGKILL);
    fail_msg("the program's child %d survived the time limit", (int)bg);
  }
}

static void test_parse_pid_stat(void **state) {
  (void)state;
  gr__pid_stat st;
  const char *text =
      "4242 (a) b) (c) S 17 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 1 0 123456 "
      "1000 10 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0 93000 94000 "
      "95000 96000 97000 98000 99000 2304\n";
  assert_int_equal(gr__parse_pid_stat(text, &st), 0);
  assert_int_equal(st.state, 'S');
  assert_int_equal(st.ppid, 17);
  assert_int_equal(st.pgrp, 4242);
  assert_int_equal(st.flags, 4194560); /* PF_EXITING (0x4) not set */
  assert_int_equal(st.utime, 250);
  assert_int_equal(st.stime, 50);
  assert_int_equal(st.start, 123456);
  assert_true(st.mm_visible);
  assert_true(st.has_exit_code);
  assert_int_equal(st.exit_code, 2304); /* exit(9) */
  /* an old kernel's shorter line: no exit code */
  assert_int_equal(gr__parse_pid_stat("1 (x) Z 0 1 1 0 -1 0 0 0 0 0 3 4", &st), 0);
  assert_int_equal(st.state, 'Z');
  assert_false(st.has_exit_code);
  assert_int_equal(gr__parse_pid_stat("1 (x) R 0", &st), -1);
  assert_int_equal(gr__parse_pid_stat("garbage", &st), -1);
}

/* "--wait-any": fork a child that exits 5, then waitpid(-1) until no child is left; exit 0 when
 * the only child reaped was our own, 2 when another child of ours exists (the supervisor would
 * be one if it were the program's child), 1 otherwise. */
static int wait_any(void) {
  pid_t c = fork();
  if (c < 0) return 1;
  if (c == 0) _exit(5);
  int st;
  pid_t w = waitpid(-1, &st, 0);
  if (w != c || !WIFEXITED(st) || WEXITSTATUS(st) != 5) return 1;
  w = waitpid(-1, &st, WNOHANG);
  if (w == 0) return 2;
  return w < 0 && errno == ECHILD ? 0 : 1;
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "--wait-any")) return wait_any();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_exit_codes),
      cmocka_unit_test(test_bad_options),
      cmocka_unit_test(test_signals_reach_program),
      cmocka_unit_test(test_time_limit_term),
      cmocka_unit_test(test_time_limit_kill),
      cmocka_unit_test(test_time_limit_children),
      cmocka_unit_test(test_keeps_pid),
      cmocka_unit_test(test_wait_any),
      cmocka_unit_test(test_quick_and_failed),
      cmocka_unit_test(test_end_record),
      cmocka_unit_test(test_program_killed),
      cmocka_unit_test(test_supervisor_killed),
      cmocka_unit_test(test_supervisor_ignores_term),
      cmocka_unit_test(test_parse_pid_stat),
      cmocka_unit_test(test_monitor_csv),
      cmocka_unit_test(test_monitor_sigterm_leaves_whole_lines),
      cmocka_unit_test(test_exports_monitor_env),
      cmocka_unit_test(test_monitor_long_host),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
