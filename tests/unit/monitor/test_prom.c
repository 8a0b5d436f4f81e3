/* The Prometheus text of one sample (monitor/prom.c): label values escaped as the exposition
 * format wants (backslash, double quote, newline), control bytes dropped, a missing reading gives
 * no series rather than a made-up value, and the file is replaced whole (never through a link). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sched.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gr_live_file.h"
#include "gr_prom.h"

/* Cases skipped for want of something this machine lacks (a namespace, a second user): the test
 * then passes its other cases and exits 77, so that ctest reports it skipped, not passed. */
static int skipped;
#define skip_case()                                                                                \
  do {                                                                                             \
    skipped++;                                                                                     \
    skip();                                                                                        \
  } while (0)

static void test_format(void **state) {
  (void)state;
  gr__sample s;
  memset(&s, 0, sizeof s);
  s.unix_s = 1000.5;
  s.rank = 3;
  s.local_rank = 1;
  s.cpu_util = 50;
  s.cpu_steal = 23;
  s.rss_kib = 2048;
  s.ngpus = 1;
  snprintf(s.gpu[0].pci, sizeof s.gpu[0].pci, "0000:17:00.0");
  s.gpu[0].index = 2;
  s.gpu[0].has_util = 1;
  s.gpu[0].util = 77;
  s.gpu[0].has_temp = 0; /* NVML could not say */
  gr__prom_text t = {0};
  assert_int_equal(gr__prom_format(&s, "a\"b\\c\nd\033e", "h\"1", NULL, NULL, &t), 0);
  const char *buf = t.buf;
  const char *want = "gpurun_gpu_utilization_ratio{job=\"a\\\"b\\\\c\\nde\",host=\"h\\\"1\","
                     "rank=\"3\",local_rank=\"1\",gpu=\"2\",pci=\"0000:17:00.0\"} 0.77\n";
  assert_non_null(strstr(buf, want));
  assert_null(strstr(buf, "temperature_celsius{"));      /* no reading, no series */
  assert_null(strstr(buf, "collective_seconds_total{")); /* no live file */
  assert_non_null(strstr(buf, "gpurun_rank_cpu_utilization_ratio{job=\"a\\\"b\\\\c\\nde\",host="
                              "\"h\\\"1\",rank=\"3\",local_rank=\"1\"} 0.5\n"));
  assert_non_null(strstr(buf, "gpurun_rank_resident_memory_bytes{job=\"a\\\"b\\\\c\\nde\",host="
                              "\"h\\\"1\",rank=\"3\",local_rank=\"1\"} 2097152\n"));
  assert_non_null(strstr(buf, "gpurun_rank_cpu_steal_ratio{job=\"a\\\"b\\\\c\\nde\",host="
                              "\"h\\\"1\",rank=\"3\",local_rank=\"1\"} 0.23\n"));
  assert_null(strchr(buf, '\033'));
  assert_non_null(strstr(buf, "\ngpurun_up{job=\"a\\\"b\\\\c\\nde\",host=\"h\\\"1\",rank=\"3\","
                              "local_rank=\"1\"} 1\n"));
  assert_non_null(strstr(buf, "\ngpurun_sample_time_seconds{job=\"a\\\"b\\\\c\\nde\",host="
                              "\"h\\\"1\",rank=\"3\",local_rank=\"1\"} 1000.5\n"));
  assert_int_equal(strncmp(buf, "# HELP ", 7), 0); /* no owner given: no owner line */
  gr__prom_text_free(&t);
}

/* The most a rank can have: 16 GPUs with every reading, the live file's series, a 64-byte host name
 * (HOST_NAME_MAX: the most Linux allows) and the longest job id (127 bytes). The text is whole
 * (every series of every GPU, and the rank's series after them), far beyond the 32 KiB a fixed
 * buffer would have held: about 75 KB, the figure docs/formats.md gives (change both together). */
static void test_big(void **state) {
  (void)state;
  gr__sample s;
  memset(&s, 0, sizeof s);
  s.unix_s = 1700000000.25;
  s.rank = 1023;
  s.local_rank = 15;
  s.cpu_util = 12.5;
  s.cpu_steal = 4.5;
  s.rss_kib = 1 << 20;
  s.ngpus = GR_TELEMETRY_MAX_GPUS;
  for (int g = 0; g < s.ngpus; g++) {
    gr__gpu_sample *G = &s.gpu[g];
    snprintf(G->pci, sizeof G->pci, "0000:%02x:00.0", 0x10 + g);
    G->index = g;
    G->has_util = G->has_mem = G->has_temp = G->has_power = G->has_clock = G->has_throttle =
        G->has_ecc = G->has_energy = G->has_share_util = G->has_share_mem = 1;
    G->util = 90;
    G->mem_util = 40;
    G->mem_used = 81ull << 30;
    G->mem_total = 96ull << 30;
    G->temp_c = 70;
    G->sm_mhz = 1980;
    G->power_w = 699.5;
    G->energy_j = 123456789.125;
    G->throttle = 0x24;
    G->ecc_uncorrected = 0;
    G->rank_sm = 60;
    G->others_sm = 30;
    G->rank_mem = 1ull << 30;
    G->others_mem = 2ull << 30;
  }
  char host[65], job[128];
  for (int i = 0; i < 64; i++)
    host[i] = (char)('a' + i % 26);
  host[63] = 'Z'; /* the last byte must survive */
  host[64] = '\0';
  memset(job, 'j', 127);
  job[127] = '\0';
  gr__prom_owner me;
  assert_int_equal(gr__prom_owner_self(&me), 0);
  gr__live live; /* one communicator in a call: the collective seconds, calls and wait series */
  memset(&live, 0, sizeof live);
  live.rank = s.rank;
  live.ncomms = 1;
  snprintf(live.comm[0].state, sizeof live.comm[0].state, "running");
  live.comm[0].start = s.unix_s - 2.5;
  live.comm[0].busy_s = 3600.25;
  live.comm[0].calls = 1000000;
  live.has_mpi = 1; /* the MPI layer's lines: its two series more */
  live.mpi_s = 3600.25;
  live.mpi_coll_s = 1800.125;
  live.mpi_inside_since = s.unix_s - 2.5;
  gr__prom_text t = {0};
  assert_int_equal(gr__prom_format(&s, job, host, &live, &me, &t), 0);
  assert_true(t.len > 32768);
  /* 74,534 bytes with this process's pid and start time in the owner line (a few digits more or
   * less elsewhere) */
  if (t.len < 74000 || t.len > 75000) fail_msg("%zu bytes, not about 75 KB", t.len);
  assert_int_equal(strlen(t.buf), t.len);
  assert_int_equal(t.buf[t.len - 1], '\n');
  char label[300];
  snprintf(label, sizeof label, "host=\"%s\",", host);
  int series = 0, lines = 0, last_gpu15 = 0;
  for (char *line = t.buf; *line;) {
    char *nl = strchr(line, '\n');
    assert_non_null(nl);
    *nl = '\0';
    lines++;
    if (line[0] != '#') {
      series++;
      assert_non_null(strstr(line, label));
      assert_non_null(strstr(line, "rank=\"1023\",local_rank=\"15\""));
      if (strstr(line, "gpu=\"15\",pci=\"0000:1f:00.0\"}")) last_gpu15++;
    }
    *nl = '\n';
    line = nl + 1;
  }
  /* 14 families for each of 16 GPUs; cpu, rss, steal, collective seconds, calls, wait, MPI
   * seconds, MPI collective seconds, up and time for the rank */
  assert_int_equal(series, 14 * 16 + 10);
  assert_int_equal(last_gpu15, 14);
  assert_int_equal(lines, series + 2 * (14 + 10) + 1); /* HELP and TYPE per family, owner line */
  const char *tail = "gpurun_sample_time_seconds{";
  assert_non_null(strstr(t.buf, tail));
  assert_non_null(strstr(t.buf, "} 1700000000.25\n"));
  /* and the file holds it whole */
  char dir[] = "/tmp/gr_test_prom.XXXXXX";
  assert_non_null(mkdtemp(dir));
  assert_int_equal(gr__prom_write(dir, "gpurun_big.prom", t.buf, t.len), 0);
  char path[300];
  snprintf(path, sizeof path, "%s/gpurun_big.prom", dir);
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal((size_t)st.st_size, t.len);
  assert_int_equal(unlink(path), 0);
  assert_int_equal(rmdir(dir), 0);
  gr__prom_text_free(&t);
}

/* The owner line: written first, read back, and anything malformed refused. */
static void test_owner(void **state) {
  (void)state;
  gr__prom_owner me, got;
  assert_int_equal(gr__prom_owner_self(&me), 0);
  assert_int_equal(me.pid, (long)getpid());
  unsigned long long start;
  assert_int_equal(gr__prom_proc_start(getpid(), &start), 0);
  assert_true(start == me.start);
  assert_true(me.boot[0] != '\0' && me.pidns != 0);
  char line[GR_PROM_OWNER_MAX];
  size_t n = gr__prom_owner_line(&me, line, sizeof line);
  assert_true(n > 0);
  assert_int_equal(strncmp(line, "# gpurun-owner 1 host=", 22), 0);
  assert_int_equal(gr__prom_owner_parse(line, n, &got), 0);
  assert_string_equal(got.host, me.host);
  assert_string_equal(got.boot, me.boot);
  assert_true(got.pidns == me.pidns && got.pid == me.pid && got.start == me.start);
  const char *bad[] = {
      "",
      "garbage\n",
      "# gpurun-owner 2 host=h boot=b pidns=1 pid=2 start=3\n",
      "# gpurun-owner 1 host=h boot=b pidns=1 pid=2 start=3",       /* no newline */
      "# gpurun-owner 1 host=h boot=b pidns=1 pid=2 start=3 x=1\n", /* trailing field */
      "# gpurun-owner 1 host=h boot=b pidns=1 pid=0 start=3\n",
      "# gpurun-owner 1 host=h boot=b pidns=1 pid=-2 start=3\n",
      "# gpurun-owner 1 host=h boot=b pidns=1 pid=99999999999 start=3\n",
      "# gpurun-owner 1 host=h boot=b pidns=1 pid=2 start=3x\n",
      "# gpurun-owner 1 host=h\"x boot=b pidns=1 pid=2 start=3\n",
      "# gpurun-owner 1 host= boot=b pidns=1 pid=2 start=3\n",
      "# gpurun-owner 1 boot=b host=h pidns=1 pid=2 start=3\n",
      "# gpurun-owner 1 host=h boot=b pidns=1 pid=2 start=99999999999999999999999\n",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    assert_int_equal(gr__prom_owner_parse(bad[i], strlen(bad[i]), &got), -1);
  /* a first line longer than the sweep reads is no owner line */
  char longl[GR_PROM_OWNER_MAX + 64];
  int k = snprintf(longl, sizeof longl, "# gpurun-owner 1 host=");
  memset(longl + k, 'h', sizeof longl - (size_t)k);
  snprintf(longl + GR_PROM_OWNER_MAX, 64, " boot=b pidns=1 pid=2 start=3\n");
  assert_int_equal(gr__prom_owner_parse(longl, strlen(longl), &got), -1);
  /* the start time of a process that is gone, and of a zombie */
  pid_t c = fork();
  assert_true(c >= 0);
  if (c == 0) _exit(0);
  struct timespec ts = {0, 100000000};
  for (int i = 0; i < 50; i++) { /* until it is a zombie */
    if (gr__prom_proc_start(c, &start) != 0) break;
    nanosleep(&ts, NULL);
  }
  assert_int_equal(gr__prom_proc_start(c, &start), -1);
  assert_int_equal(errno, ESRCH);
  assert_int_equal(waitpid(c, NULL, 0), c);
  assert_int_equal(gr__prom_proc_start(c, &start), -1);
  assert_int_equal(errno, ESRCH);
}

static void put_file(const char *dir, const char *name, const char *text) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static int exists(const char *dir, const char *name) {
  char path[512];
  struct stat st;
  snprintf(path, sizeof path, "%s/%s", dir, name);
  return lstat(path, &st) == 0;
}

/* A file of owner o with one series after the owner line. */
static void owned_file(const char *dir, const char *name, const gr__prom_owner *o) {
  char text[GR_PROM_OWNER_MAX + 64];
  size_t n = gr__prom_owner_line(o, text, sizeof text);
  assert_true(n > 0);
  snprintf(text + n, sizeof text - n, "gpurun_up{job=\"x\"} 1\n");
  put_file(dir, name, text);
}

/* The sweep removes the files of owners gone from this host and nothing else: not a live
 * owner's, not another host's or pid namespace's, not another user's, not garbage, never through
 * or of a link. */
static void test_sweep(void **state) {
  (void)state;
  char dir[] = "/tmp/gr_test_prom.XXXXXX";
  assert_non_null(mkdtemp(dir));
  gr__prom_owner me, o;
  assert_int_equal(gr__prom_owner_self(&me), 0);

  /* a process that has ended and been reaped, and one that has ended and not been */
  pid_t dead = fork();
  assert_true(dead >= 0);
  if (dead == 0) _exit(0);
  assert_int_equal(waitpid(dead, NULL, 0), dead);
  pid_t zombie = fork();
  assert_true(zombie >= 0);
  if (zombie == 0) _exit(0);
  unsigned long long zstart = 0;
  struct timespec ts = {0, 100000000};
  for (int i = 0; i < 50 && gr__prom_proc_start(zombie, &zstart) == 0; i++)
    nanosleep(&ts, NULL);

  int want_removed = 0;
  o = me;
  o.pid = dead;
  owned_file(dir, "gpurun_dead_h_0.prom", &o);
  want_removed++;
  o.pid = zombie;
  owned_file(dir, "gpurun_zombie_h_0.prom", &o);
  want_removed++;
  o = me;
  o.start = me.start + 1; /* our pid, another start: the pid was reused */
  owned_file(dir, "gpurun_reused_h_0.prom", &o);
  want_removed++;
  o = me;
  o.pid = getppid();
  assert_int_equal(gr__prom_proc_start(o.pid, &o.start), 0);
  owned_file(dir, "gpurun_parent_h_0.prom", &o); /* alive */
  o.start += 7;
  owned_file(dir, "gpurun_parent_reused_h_0.prom", &o);
  want_removed++;
  owned_file(dir, "gpurun_me_h_0.prom", &me); /* alive */
  o = me;
  o.pid = dead;
  snprintf(o.host, sizeof o.host, "elsewhere");
  owned_file(dir, "gpurun_otherhost_h_0.prom", &o); /* another host's: its own to sweep */
  o = me;
  o.pid = dead;
  o.pidns = me.pidns + 1;
  owned_file(dir, "gpurun_otherns_h_0.prom", &o); /* pids of another namespace */
  o = me;
  o.pid = dead;
  snprintf(o.boot, sizeof o.boot, "00000000-0000-0000-0000-000000000000");
  owned_file(dir, "gpurun_rebooted_h_0.prom", &o); /* written before this boot */
  char path[512];
  snprintf(path, sizeof path, "%s/gpurun_rebooted_h_0.prom", dir);
  struct timespec old[2] = {{1000, 0}, {1000, 0}};
  assert_int_equal(utimensat(AT_FDCWD, path, old, 0), 0);
  want_removed++;
  owned_file(dir, "gpurun_namesake_h_0.prom", &o); /* same name, other boot, written now */
  /* an owner line, then 64 MiB (sparse): only the head is read */
  o = me;
  o.pid = dead;
  owned_file(dir, "gpurun_huge_h_0.prom", &o);
  snprintf(path, sizeof path, "%s/gpurun_huge_h_0.prom", dir);
  assert_int_equal(truncate(path, 64 << 20), 0);
  want_removed++;
  owned_file(dir, "other.prom", &o);                /* not gpurun's name */
  owned_file(dir, "gpurun_x.txt", &o);              /* not gpurun's name */
  owned_file(dir, ".gpurun_x_h_0.prom.tmp.12", &o); /* a killed writer's temp file */
  want_removed++;
  owned_file(dir, ".gpurun_x_h_0.prom.tmp.12-3", &o); /* its name beside a squatted one */
  want_removed++;
  owned_file(dir, ".gpurun_x_h_0.prom.tmp.12-", &o);  /* not a writer's name */
  owned_file(dir, ".gpurun_me_h_0.prom.tmp.13", &me); /* a live writer's */
  owned_file(dir, ".gpurun_x_h_0.prom.tmp.1x", &o);   /* not a writer's name */
  owned_file(dir, ".gpurun_.prom.tmp.1", &o);         /* not a writer's name */
  put_file(dir, "gpurun_garbage_h_0.prom", "\x01\x02 gpurun-owner\n");
  put_file(dir, "gpurun_noowner_h_0.prom", "gpurun_up{job=\"x\"} 1\n");
  /* a link to a dead owner's file outside the names: neither removed nor followed */
  owned_file(dir, "victim", &o);
  char target[512];
  snprintf(target, sizeof target, "%s/victim", dir);
  snprintf(path, sizeof path, "%s/gpurun_link_h_0.prom", dir);
  assert_int_equal(symlink(target, path), 0);
  snprintf(path, sizeof path, "%s/gpurun_dir_h_0.prom", dir);
  assert_int_equal(mkdir(path, 0700), 0);
  snprintf(path, sizeof path, "%s/gpurun_fifo_h_0.prom", dir);
  assert_int_equal(mkfifo(path, 0600), 0); /* opening it would block */
  /* another user's file (root can make one): never ours to remove */
  int chowned = 0;
  if (geteuid() == 0) {
    owned_file(dir, "gpurun_nobody_h_0.prom", &o);
    snprintf(path, sizeof path, "%s/gpurun_nobody_h_0.prom", dir);
    assert_int_equal(chown(path, 65534, 65534), 0);
    chowned = 1;
  }

  assert_int_equal(gr__prom_sweep(dir, &me), want_removed);
  assert_false(exists(dir, "gpurun_dead_h_0.prom"));
  assert_false(exists(dir, "gpurun_zombie_h_0.prom"));
  assert_false(exists(dir, "gpurun_reused_h_0.prom"));
  assert_false(exists(dir, "gpurun_parent_reused_h_0.prom"));
  assert_false(exists(dir, "gpurun_rebooted_h_0.prom"));
  assert_false(exists(dir, "gpurun_huge_h_0.prom"));
  assert_false(exists(dir, ".gpurun_x_h_0.prom.tmp.12"));
  assert_false(exists(dir, ".gpurun_x_h_0.prom.tmp.12-3"));
  const char *kept[] = {"gpurun_parent_h_0.prom",
                        "gpurun_me_h_0.prom",
                        "gpurun_otherhost_h_0.prom",
                        "gpurun_otherns_h_0.prom",
                        "gpurun_namesake_h_0.prom",
                        "other.prom",
                        "gpurun_x.txt",
                        ".gpurun_me_h_0.prom.tmp.13",
                        ".gpurun_x_h_0.prom.tmp.1x",
                        ".gpurun_x_h_0.prom.tmp.12-",
                        ".gpurun_.prom.tmp.1",
                        "gpurun_garbage_h_0.prom",
                        "gpurun_noowner_h_0.prom",
                        "victim",
                        "gpurun_link_h_0.prom",
                        "gpurun_dir_h_0.prom",
                        "gpurun_fifo_h_0.prom"};
  for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++)
    if (!exists(dir, kept[i])) fail_msg("the sweep removed %s", kept[i]);
  if (chowned) assert_true(exists(dir, "gpurun_nobody_h_0.prom"));
  assert_int_equal(gr__prom_sweep(dir, &me), 0); /* nothing left to remove */
  assert_int_equal(waitpid(zombie, NULL, 0), zombie);
  assert_int_equal(gr__prom_sweep("/nonexistent/gr_test_prom", &me), -1);

  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
}

/* Child of test_sweep_big_node: on a node with hundreds of cores /proc/stat runs past 16 KiB
 * before its btime line (a line per core, then the interrupt counts). With such a /proc/stat bound
 * over the real one in a private mount namespace, a dead owner's file from before this boot is
 * still removed. Exit 0 removed, 1 kept, 77 no mount namespace here (not root). */
static int big_node_child(const char *dir) {
  char real[8192];
  FILE *f = fopen("/proc/stat", "r");
  long long btime = -1;
  while (f && fgets(real, sizeof real, f))
    if (!strncmp(real, "btime ", 6)) btime = atoll(real + 6);
  if (f) fclose(f);
  if (btime <= 1000) return 1;
  char fake[512], name[] = "gpurun_rebooted_h_0.prom";
  snprintf(fake, sizeof fake, "%s/stat", dir);
  f = fopen(fake, "w");
  if (!f) return 1;
  fprintf(f, "cpu  1 2 3 4 5 6 7 8 9 10\n");
  for (int c = 0; c < 384; c++)
    fprintf(f, "cpu%d 1234567890 12345678 123456789 12345678901 1234567 0 1234567 0 0 0\n", c);
  fprintf(f, "intr 123456789");
  for (int i = 0; i < 4000; i++)
    fprintf(f, " %d", i % 7 ? 0 : 12345);
  fprintf(f, "\nctxt 1234567890\nbtime %lld\nprocesses 123456\nprocs_running 1\n", btime);
  fclose(f);
  if (unshare(CLONE_NEWNS) != 0 || mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
      mount(fake, "/proc/stat", NULL, MS_BIND, NULL) != 0)
    return 77;
  struct stat st;
  if (stat("/proc/stat", &st) != 0 || st.st_size < 32768) return 77; /* the bind did not take */
  gr__prom_owner me, o;
  if (gr__prom_owner_self(&me) != 0) return 1;
  o = me;
  o.pid = 1;
  snprintf(o.boot, sizeof o.boot, "00000000-0000-0000-0000-000000000000");
  owned_file(dir, name, &o);
  char path[600];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  struct timespec old[2] = {{1000, 0}, {1000, 0}};
  if (utimensat(AT_FDCWD, path, old, 0) != 0) return 1;
  return gr__prom_sweep(dir, &me) == 1 && !exists(dir, name) ? 0 : 1;
}

static void test_sweep_big_node(void **state) {
  (void)state;
  char dir[] = "/tmp/gr_test_prom.XXXXXX";
  assert_non_null(mkdtemp(dir));
  pid_t c = fork();
  assert_true(c >= 0);
  if (c == 0) _exit(big_node_child(dir));
  int st = 0;
  assert_int_equal(waitpid(c, &st, 0), c);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
  assert_true(WIFEXITED(st));
  if (WEXITSTATUS(st) == 77) skip_case(); /* no private mount namespace: cannot fake /proc/stat */
  if (WEXITSTATUS(st) != 0)
    fail_msg("a file from before this boot was kept with a large /proc/stat");
}

/* A process in a pid namespace of its own under the parent namespace's /proc (unshare --pid
 * without remounting /proc): /proc/<getpid()> is another process there, so the pids in /proc are
 * not this process's and no owner line may be made from them. Exit 0 refused, 1 accepted, 77 no
 * pid namespace here (not root). */
static int foreign_proc_child(void) {
  if (unshare(CLONE_NEWPID) != 0) return 77;
  pid_t c = fork(); /* pid 1 of the new namespace; /proc/1 is the parent namespace's init */
  if (c < 0) return 77;
  if (c == 0) {
    gr__prom_owner me;
    _exit(gr__prom_owner_self(&me) == 0 ? 1 : 0);
  }
  int st = 0;
  if (waitpid(c, &st, 0) != c || !WIFEXITED(st)) return 1;
  return WEXITSTATUS(st);
}

static void test_owner_foreign_proc(void **state) {
  (void)state;
  pid_t c = fork();
  assert_true(c >= 0);
  if (c == 0) _exit(foreign_proc_child());
  int st = 0;
  assert_int_equal(waitpid(c, &st, 0), c);
  assert_true(WIFEXITED(st));
  if (WEXITSTATUS(st) == 77) skip_case(); /* no pid namespace of our own here */
  if (WEXITSTATUS(st) != 0) fail_msg("an owner line was made from another pid namespace's /proc");
}

/* Another user in a shared sticky directory creates the writer's temporary name first (its pid
 * is public): the writer, not root, can neither remove nor open it, and must still write its file
 * through another name. Root makes the squatter's file and runs the writer as nobody. */
static void test_write_squatted_tmp(void **state) {
  (void)state;
  if (geteuid() != 0) skip_case(); /* needs two users */
  char dir[] = "/tmp/gr_test_prom.XXXXXX";
  assert_non_null(mkdtemp(dir));
  assert_int_equal(chmod(dir, 01777), 0);
  int go[2];
  assert_int_equal(pipe(go), 0);
  pid_t c = fork();
  assert_true(c >= 0);
  if (c == 0) {
    char b;
    close(go[1]);
    if (read(go[0], &b, 1) != 1 || setgid(65534) != 0 || setuid(65534) != 0) _exit(3);
    if (gr__prom_write(dir, "gpurun_sq_h_0.prom", "gpurun_up 1\n", 12) != 0) _exit(1);
    char path[600], text[64] = "";
    snprintf(path, sizeof path, "%s/gpurun_sq_h_0.prom", dir);
    FILE *f = fopen(path, "r");
    if (!f || !fgets(text, sizeof text, f)) _exit(2);
    fclose(f);
    _exit(strcmp(text, "gpurun_up 1\n") ? 2 : 0);
  }
  close(go[0]);
  char squat[600];
  snprintf(squat, sizeof squat, "%s/.gpurun_sq_h_0.prom.tmp.%d", dir, (int)c);
  put_file(dir, squat + strlen(dir) + 1, "theirs\n");
  assert_int_equal(write(go[1], "x", 1), 1);
  close(go[1]);
  int st = 0;
  assert_int_equal(waitpid(c, &st, 0), c);
  FILE *f = fopen(squat, "r");
  char text[64] = "";
  assert_non_null(f);
  assert_non_null(fgets(text, sizeof text, f));
  fclose(f);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
  assert_string_equal(text, "theirs\n"); /* the squatter's file is neither followed nor changed */
  assert_true(WIFEXITED(st));
  if (WEXITSTATUS(st) == 3) skip_case(); /* cannot become nobody */
  if (WEXITSTATUS(st) != 0)
    fail_msg("a squatted temporary name stopped the write (child exit %d)", WEXITSTATUS(st));
}

/* The wait gauge: the longest of the running collective and the communicator creation. */
static void test_wait(void **state) {
  (void)state;
  gr__sample s;
  memset(&s, 0, sizeof s);
  s.unix_s = 1000.5;
  s.cpu_util = s.rss_kib = -1;
  const char *text = "gpurun-live 1\nrank 0\n"
                     "comm world 0 2 mpi 4 allreduce 1 running 998.5 0 4 0.1\n"
                     "creating gr_comm_split split world 0 2 990.5\n";
  gr__live lv;
  assert_int_equal(gr__live_parse(text, strlen(text), &lv), 0);
  gr__prom_text t = {0};
  assert_int_equal(gr__prom_format(&s, "j", "h", &lv, NULL, &t), 0);
  assert_non_null(strstr(t.buf,
                         "gpurun_rank_collective_wait_seconds{job=\"j\",host=\"h\",rank=\"0\","
                         "local_rank=\"0\"} 10\n"));
  lv.ncreating = 0; /* without the creation: the collective's 2 s */
  assert_int_equal(gr__prom_format(&s, "j", "h", &lv, NULL, &t), 0);
  assert_non_null(strstr(t.buf, "local_rank=\"0\"} 2\n"));
  gr__prom_text_free(&t);
}

/* A program under the MPI layer (the live file's mpi_ lines): its time inside MPI and inside
 * blocking collectives as counters labelled job, host, rank and local_rank only; the collective
 * seconds are the time inside MPI (the records' busy time counts a request's life besides the
 * wait that completes it); the wait is the layer's call in progress, not an MPI_Irecv that has
 * been open for a minute while the rank computes. Without all three lines the layer's rules and
 * series are off, and a reading the parser refuses takes them with it. */
static const char *series_value(const char *buf, const char *name, char *out, size_t cap) {
  char key[200];
  snprintf(key, sizeof key, "\n%s{job=\"j\",host=\"h\",rank=\"2\",local_rank=\"0\"} ", name);
  const char *p = strstr(buf, key);
  if (!p) return NULL;
  p += strlen(key);
  size_t n = strcspn(p, "\n");
  snprintf(out, cap, "%.*s", (int)n, p);
  return out;
}

static void test_mpi_layer(void **state) {
  (void)state;
  gr__sample s;
  memset(&s, 0, sizeof s);
  s.unix_s = 1000.5;
  s.rank = 2;
  s.cpu_util = s.rss_kib = -1;
  char text[1024];
  const char *comms = "comm w 2 4 mpi 9 MPI_Allreduce 1 done 990 990.25 500 75.5 world -\n"
                      "comm c1 2 4 mpi 0 MPI_Irecv 1 running 940.5 0 1 0 side r3:7\n";
  snprintf(text, sizeof text,
           "gpurun-live 2\nrank 2\nmpi_s 12.75\nmpi_coll_s 4.5\nmpi_inside_since 0\n%s", comms);
  gr__live lv;
  assert_int_equal(gr__live_parse(text, strlen(text), &lv), 0);
  assert_int_equal(lv.has_mpi, 1);
  gr__prom_text t = {0};
  char v[64];
  assert_int_equal(gr__prom_format(&s, "j", "h", &lv, NULL, &t), 0);
  assert_non_null(strstr(t.buf, "# TYPE gpurun_rank_mpi_seconds_total counter\n"));
  assert_non_null(strstr(t.buf, "# TYPE gpurun_rank_mpi_collective_seconds_total counter\n"));
  assert_string_equal(series_value(t.buf, "gpurun_rank_mpi_seconds_total", v, sizeof v), "12.75");
  assert_string_equal(series_value(t.buf, "gpurun_rank_mpi_collective_seconds_total", v, sizeof v),
                      "4.5");
  /* not the records' 75.5 s, more than the minute the rank has run */
  assert_string_equal(series_value(t.buf, "gpurun_rank_collective_seconds_total", v, sizeof v),
                      "12.75");
  assert_string_equal(series_value(t.buf, "gpurun_rank_collective_calls_total", v, sizeof v),
                      "501");
  /* the MPI_Irecv open since 940.5 is no call the rank is in */
  assert_string_equal(series_value(t.buf, "gpurun_rank_collective_wait_seconds", v, sizeof v), "0");
  /* inside a call since 993.25 (the rank stopped there, or a peer never came) */
  snprintf(text, sizeof text,
           "gpurun-live 2\nrank 2\nmpi_s 12.75\nmpi_coll_s 4.5\nmpi_inside_since 993.25\n%s",
           comms);
  assert_int_equal(gr__live_parse(text, strlen(text), &lv), 0);
  assert_int_equal(gr__prom_format(&s, "j", "h", &lv, NULL, &t), 0);
  assert_string_equal(series_value(t.buf, "gpurun_rank_collective_wait_seconds", v, sizeof v),
                      "7.25");
  /* a start after the sample (a file from elsewhere): no negative wait */
  snprintf(text, sizeof text,
           "gpurun-live 2\nrank 2\nmpi_s 1\nmpi_coll_s 0\nmpi_inside_since 5000\n%s", comms);
  assert_int_equal(gr__live_parse(text, strlen(text), &lv), 0);
  assert_int_equal(gr__prom_format(&s, "j", "h", &lv, NULL, &t), 0);
  assert_string_equal(series_value(t.buf, "gpurun_rank_collective_wait_seconds", v, sizeof v), "0");
  /* no labels but the rank's: one series per family per rank, whatever the communicators */
  for (const char *p = strstr(t.buf, "\ngpurun_rank_mpi"); p;
       p = strstr(p + 1, "\ngpurun_rank_mpi"))
    assert_true(
        strncmp(strchr(p, '{'), "{job=\"j\",host=\"h\",rank=\"2\",local_rank=\"0\"} ", 43) == 0);
  /* a line missing or refused (negative, not a number, too big): none of the layer's rules */
  const char *bad[] = {"mpi_s 12.75\nmpi_coll_s 4.5\n",
                       "mpi_s -1\nmpi_coll_s 4.5\nmpi_inside_since 0\n",
                       "mpi_s nan\nmpi_coll_s 4.5\nmpi_inside_since 0\n",
                       "mpi_s 12.75\nmpi_coll_s 1e300\nmpi_inside_since 0\n",
                       "mpi_s 12.75 1\nmpi_coll_s 4.5\nmpi_inside_since 0\n"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    snprintf(text, sizeof text, "gpurun-live 2\nrank 2\n%s%s", bad[i], comms);
    assert_int_equal(gr__live_parse(text, strlen(text), &lv), 0);
    assert_int_equal(lv.has_mpi, 0);
    assert_int_equal(gr__prom_format(&s, "j", "h", &lv, NULL, &t), 0);
    assert_null(strstr(t.buf, "\ngpurun_rank_mpi_"));
    assert_null(strstr(t.buf, "# TYPE gpurun_rank_mpi_"));
    assert_string_equal(series_value(t.buf, "gpurun_rank_collective_seconds_total", v, sizeof v),
                        "75.5");
    assert_string_equal(series_value(t.buf, "gpurun_rank_collective_wait_seconds", v, sizeof v),
                        "60"); /* the old rule: the running record's age */
  }
  gr__prom_text_free(&t);
}

static void test_write(void **state) {
  (void)state;
  char dir[] = "/tmp/gr_test_prom.XXXXXX";
  assert_non_null(mkdtemp(dir));
  char link[256], target[256];
  snprintf(link, sizeof link, "%s/x.prom", dir);
  snprintf(target, sizeof target, "%s/victim", dir);
  FILE *f = fopen(target, "w");
  assert_non_null(f);
  fputs("precious\n", f);
  fclose(f);
  assert_int_equal(symlink(target, link), 0);
  assert_int_equal(gr__prom_write(dir, "x.prom", "m 1\n", 4), 0);
  struct stat st;
  assert_int_equal(lstat(link, &st), 0);
  assert_true(S_ISREG(st.st_mode)); /* the link was replaced, not followed */
  char got[64] = "";
  f = fopen(target, "r");
  assert_non_null(fgets(got, sizeof got, f));
  fclose(f);
  assert_string_equal(got, "precious\n");
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_format),
                                     cmocka_unit_test(test_big),
                                     cmocka_unit_test(test_owner),
                                     cmocka_unit_test(test_sweep),
                                     cmocka_unit_test(test_sweep_big_node),
                                     cmocka_unit_test(test_owner_foreign_proc),
                                     cmocka_unit_test(test_write_squatted_tmp),
                                     cmocka_unit_test(test_wait),
                                     cmocka_unit_test(test_mpi_layer),
                                     cmocka_unit_test(test_write)};
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  if (failed == 0 && skipped) {
    printf("SKIP part: %d case(s) this machine cannot set up; the rest passed\n", skipped);
    return 77;
  }
  return failed;
}
