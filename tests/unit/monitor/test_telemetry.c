/* Telemetry: the /proc parsers on recorded text, the CPU-only sample without NVML, and the NVML
 * path against a fake libnvidia-ml (fake_nvml.c) whose values are known. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gr_log.h"
#include "gr_telemetry.h"

/* From a 4-CPU machine; cpu2 has guest time, which is already inside user. */
static const char proc_stat_a[] = "cpu  1000 0 500 8000 100 0 0 0 0 0\n"
                                  "cpu0 100 0 50 1000 10 0 0 0 0 0\n"
                                  "cpu1 200 5 100 2000 20 1 2 0 0 0\n"
                                  "cpu2 300 0 100 3000 30 0 0 0 50 0\n"
                                  "cpu3 400 0 250 2000 40 0 0 0 0 0\n"
                                  "intr 12345 0 0\n"
                                  "ctxt 999\n";
static const char proc_stat_b[] = "cpu  2000 0 1000 9000 100 0 0 0 0 0\n"
                                  "cpu0 150 0 50 1050 10 0 0 0 0 0\n"   /* +50 busy, +50 idle */
                                  "cpu1 200 5 100 2100 20 1 2 0 0 0\n"  /* +0 busy, +100 idle */
                                  "cpu2 390 0 110 3000 30 0 0 0 60 0\n" /* +100 busy */
                                  "cpu3 400 0 250 2000 40 0 0 0 0 0\n";

static void test_parse_proc_stat(void **state) {
  (void)state;
  gr__cpu_times t[8];
  assert_int_equal(gr__parse_proc_stat(proc_stat_a, t, 8, NULL), 4);
  /* By hand: cpu1 total = 200+5+100+2000+20+1+2+0 = 2328, idle = 2000+20. */
  assert_int_equal(t[1].total, 2328);
  assert_int_equal(t[1].busy, 2328 - 2020);
  /* cpu2: guest (50) not added: total = 300+100+3000+30 = 3430, busy = 400. */
  assert_int_equal(t[2].total, 3430);
  assert_int_equal(t[2].busy, 400);
  assert_int_equal(t[5].total, 0);
  /* Fewer slots than CPUs: the count still says 4. */
  assert_int_equal(gr__parse_proc_stat(proc_stat_a, t, 2, NULL), 4);
  assert_int_equal(gr__parse_proc_stat("intr 1 2 3\n", t, 8, NULL), -1);
  assert_int_equal(gr__parse_proc_stat("", t, 8, NULL), -1);
}

static void test_cpu_util(void **state) {
  (void)state;
  gr__cpu_times a[4], b[4];
  gr__parse_proc_stat(proc_stat_a, a, 4, NULL);
  gr__parse_proc_stat(proc_stat_b, b, 4, NULL);
  unsigned char cpu0[4] = {1, 0, 0, 0}, cpu01[4] = {1, 1, 0, 0}, cpu2[4] = {0, 0, 1, 0},
                cpu3[4] = {0, 0, 0, 1};
  assert_float_equal(gr__cpu_util(a, b, cpu0, 4), 50.0, 1e-9);              /* 50 of 100 */
  assert_float_equal(gr__cpu_util(a, b, cpu01, 4), 100.0 * 50 / 200, 1e-9); /* 50 of 200 */
  assert_float_equal(gr__cpu_util(a, b, cpu2, 4), 100.0, 1e-9);
  assert_float_equal(gr__cpu_util(a, b, cpu3, 4), -1.0, 1e-9); /* no time passed on cpu3 */
}

#define FIX(name) GR_PROC_STAT_FIXTURES "/" name /* tests/unit/monitor/CMakeLists.txt */

/* Steal from /proc/stat texts (proc_stat/README says what each holds): the share of the rank's
 * cores' time, else of the node's when /proc/stat has no line for those cores, else unknown. */
static void test_steal(void **state) {
  (void)state;
  gr__cpu_times a[8], b[8], na, nb;
  assert_int_equal(gr__read_proc_stat(FIX("vm_a"), a, 8, &na), 4);
  assert_int_equal(gr__read_proc_stat(FIX("vm_b"), b, 8, &nb), 4);
  /* cpu0 by hand: 700000+7000+300000+500000+3000+0+2000+1000 = 1513000 jiffies, 1000 steal */
  assert_int_equal(a[0].total, 1513000);
  assert_int_equal(a[0].steal, 1000);
  assert_true(a[0].has_steal);
  assert_int_equal(na.steal, 3527);
  unsigned char cpu0[8] = {1}, cpu01[8] = {1, 1}, cpu2[8] = {0, 0, 1}, cpu012[8] = {1, 1, 1},
                cpu3[8] = {0, 0, 0, 1}, cpu6[8] = {0, 0, 0, 0, 0, 0, 1};
  assert_float_equal(gr__cpu_steal(a, b, cpu0, 8, &na, &nb), 30.0, 1e-9);         /* 30/100 */
  assert_float_equal(gr__cpu_steal(a, b, cpu01, 8, &na, &nb), 15.0, 1e-9);        /* 30/200 */
  assert_float_equal(gr__cpu_steal(a, b, cpu2, 8, &na, &nb), 29.0, 1e-9);         /* 290/1000 */
  assert_float_equal(gr__cpu_steal(a, b, cpu012, 8, NULL, NULL), 80.0 / 3, 1e-9); /* 320/1200 */
  /* cpu3 ran no time and cpu6 has no line: the node's 320 of 1200, or unknown without it */
  assert_float_equal(gr__cpu_steal(a, b, cpu3, 8, &na, &nb), 80.0 / 3, 1e-9);
  assert_float_equal(gr__cpu_steal(a, b, cpu6, 8, &na, &nb), 80.0 / 3, 1e-9);
  assert_float_equal(gr__cpu_steal(a, b, cpu3, 8, NULL, NULL), -1.0, 1e-9);
  /* the busy share counts stolen time: cpu0 ran 50 and lost 30 of its 100 */
  assert_float_equal(gr__cpu_util(a, b, cpu0, 8), 80.0, 1e-9);
  /* counters that went back (the snapshots swapped) are left out, not taken as huge steal */
  assert_float_equal(gr__cpu_steal(b, a, cpu012, 8, NULL, NULL), -1.0, 1e-9);

  /* no per-CPU lines (the parse says -1): the all-CPU line alone, 100 of 1000 */
  assert_int_equal(gr__read_proc_stat(FIX("aggregate_only_a"), a, 8, &na), -1);
  assert_int_equal(gr__read_proc_stat(FIX("aggregate_only_b"), b, 8, &nb), -1);
  assert_float_equal(gr__cpu_steal(a, b, cpu0, 8, &na, &nb), 10.0, 1e-9);

  /* a kernel without the steal field: unknown, though its time passed */
  assert_int_equal(gr__read_proc_stat(FIX("no_steal_field"), a, 8, &na), 2);
  assert_false(a[0].has_steal);
  memcpy(b, a, sizeof a);
  nb = na;
  b[0].total += 100, b[0].busy += 50, nb.total += 100;
  assert_float_equal(gr__cpu_util(a, b, cpu0, 8), 50.0, 1e-9);
  assert_float_equal(gr__cpu_steal(a, b, cpu0, 8, &na, &nb), -1.0, 1e-9);

  /* unreadable: -1 */
  assert_int_equal(gr__read_proc_stat(FIX("absent"), a, 8, &na), -1);
}

static void test_parse_status_rss(void **state) {
  (void)state;
  static const char status[] =
      "Name:\tsim\nUmask:\t0022\nState:\tS (sleeping)\nVmPeak:\t  123456 kB\n"
      "VmHWM:\t   20480 kB\nVmRSS:\t   10240 kB\nRssAnon:\t    8000 kB\nThreads:\t1\n";
  assert_int_equal(gr__parse_status_rss_kib(status), 10240);
  /* A kernel thread has no VmRSS line. */
  assert_int_equal(gr__parse_status_rss_kib("Name:\tkthreadd\nState:\tS\n"), -1);
  assert_int_equal(gr__parse_status_rss_kib(""), -1);
}

static char captured[8192];

static void capture_open_twice(const char *gpus) {
  FILE *tmp = tmpfile();
  assert_non_null(tmp);
  fflush(stderr);
  int saved = dup(2);
  dup2(fileno(tmp), 2);
  for (int i = 0; i < 2; i++) {
    gr__telemetry *t = NULL;
    assert_int_equal(gr__telemetry_open(gpus, "0", getpid(), 3, 1, &t), GR_OK);
    assert_int_equal(gr__telemetry_ngpus(t), 0);
    gr__telemetry_close(t);
  }
  dup2(saved, 2);
  close(saved);
  rewind(tmp);
  size_t n = fread(captured, 1, sizeof captured - 1, tmp);
  captured[n] = '\0';
  fclose(tmp);
}

static int occurrences(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = hay; (p = strstr(p, needle)); p++)
    n++;
  return n;
}

static void test_no_nvml(void **state) {
  (void)state;
  setenv("GPURUN_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
  setenv("GPURUN_LOG", "info", 1);
  gr__log_reset();
  capture_open_twice(NULL);
  /* Said once, at info, however often telemetry starts. */
  assert_int_equal(occurrences(captured, "NVML not available"), 1);
  assert_non_null(strstr(captured, "info"));

  gr__telemetry *t = NULL;
  assert_int_equal(gr__telemetry_open(NULL, NULL, getpid(), 3, 1, &t), GR_OK);
  char buf[4096];
  size_t n = gr__telemetry_sample(t, 1.5, buf, sizeof buf);
  assert_true(n > 0);
  assert_int_equal(buf[n - 1], '\n');
  buf[n] = '\0';
  /* One row; all nine GPU fields empty; RSS of this process is there. */
  assert_int_equal(occurrences(buf, "\n"), 1);
  assert_non_null(strstr(buf, ",1.500,3,1,-,,,,,,,,,,"));
  /* rss_mib is the 16th column; the four per-process share columns after it are empty */
  const char *rss = buf;
  for (int i = 0; i < 15; i++)
    rss = strchr(rss, ',') + 1;
  assert_true(atof(rss) > 0);
  assert_non_null(strstr(rss, ",,,,\n"));
  /* Too small a buffer: nothing rather than half a line. */
  assert_int_equal(gr__telemetry_sample(t, 2.0, buf, 10), 0);
  gr__telemetry_close(t);
  unsetenv("GPURUN_LOG");
  gr__log_reset();
}

#ifdef GR_FAKE_NVML
/* fake_nvml.c knows two GPUs, 0000:17:00.0 and 0000:65:00.0, with fixed readings. */
static void test_fake_nvml(void **state) {
  (void)state;
  setenv("GPURUN_NVML_LIBRARY", GR_FAKE_NVML, 1);
  gr__telemetry *t = NULL;
  assert_int_equal(gr__telemetry_open("0000:65:00.0,0000:99:00.0", "0", getpid(), 0, 0, &t), GR_OK);
  assert_int_equal(gr__telemetry_ngpus(t), 1); /* 99:00.0 is not a GPU NVML knows */
  char buf[4096];
  size_t n = gr__telemetry_sample(t, 0.0, buf, sizeof buf);
  assert_true(n > 0);
  buf[n] = '\0';
  /* util 77/33, 2048 of 81920 MiB, 61 C, 312.5 W, 1980 MHz, throttle 0x4, 2 ECC errors. */
  assert_non_null(strstr(buf, ",0000:65:00.0,77,33,2048.0,81920.0,61,312.500,1980,0x4,2,"));
  gr__telemetry_close(t);

  assert_int_equal(gr__telemetry_open(NULL, "0", getpid(), 0, 0, &t), GR_OK);
  assert_int_equal(gr__telemetry_ngpus(t), 2); /* no list: every GPU */
  n = gr__telemetry_sample(t, 0.0, buf, sizeof buf);
  buf[n] = '\0';
  assert_int_equal(occurrences(buf, "\n"), 2);
  assert_non_null(strstr(buf, ",0000:17:00.0,"));
  gr__telemetry_close(t);

  assert_int_equal(gr__telemetry_open("", "0", getpid(), 0, 0, &t), GR_OK);
  assert_int_equal(gr__telemetry_ngpus(t), 0); /* "" means the rank has none */
  gr__telemetry_close(t);
}

/* node4's GPU 0 is shared: the caller's children (here the forked "rank") at 60% SM / 1 GiB, pid 1
 * at 25% / 512 MiB. Attributed through the process tree: the child is the rank's, pid 1 "others";
 * GPU 1 has no per-process rows. Energy comes from NVML's counter. */
static void test_fake_nvml_share(void **state) {
  (void)state;
  setenv("GPURUN_NVML_LIBRARY", GR_FAKE_NVML, 1);
  setenv("GR_FAKE_NVML", "node4", 1);
  pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    pause();
    _exit(0);
  }
  gr__telemetry *t = NULL;
  assert_int_equal(gr__telemetry_open("0004:04:00.0,0004:05:00.0", "0", child, 0, 0, &t), GR_OK);
  assert_int_equal(gr__telemetry_ngpus(t), 2);
  gr__sample smp;
  gr__telemetry_read(t, 0.0, &smp);
  char buf[4096];
  size_t n = gr__telemetry_format_csv(&smp, buf, sizeof buf);
  buf[n] = '\0';
  kill(child, SIGKILL);
  waitpid(child, NULL, 0);
  assert_true(smp.gpu[0].has_share_util && smp.gpu[0].has_share_mem);
  assert_float_equal(smp.gpu[0].rank_sm, 60.0, 1e-9);
  assert_float_equal(smp.gpu[0].others_sm, 25.0, 1e-9);
  assert_int_equal(smp.gpu[0].rank_mem, 1ull << 30);
  assert_int_equal(smp.gpu[0].others_mem, 512ull << 20);
  assert_non_null(strstr(buf, ",60.0,25.0,1024.0,512.0\n"));
  assert_true(smp.gpu[1].has_share_mem && smp.gpu[1].rank_mem == 0 && smp.gpu[1].others_mem == 0);
  assert_true(smp.gpu[0].has_energy);
  assert_float_equal(smp.gpu[0].energy_j, 123456.789, 1e-6);
  gr__telemetry_close(t);

  /* Many samples since the last call (more than the first buffer): averaged per process. */
  child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    pause();
    _exit(0);
  }
  setenv("GR_FAKE_NVML_MANY", "1", 1);
  assert_int_equal(gr__telemetry_open("0004:04:00.0", "0", child, 0, 0, &t), GR_OK);
  gr__telemetry_read(t, 0.0, &smp);
  kill(child, SIGKILL);
  waitpid(child, NULL, 0);
  unsetenv("GR_FAKE_NVML_MANY");
  assert_true(smp.gpu[0].has_share_util);
  assert_float_equal(smp.gpu[0].rank_sm, 60.0, 1e-9);
  assert_float_equal(smp.gpu[0].others_sm, 25.0, 1e-9);
  gr__telemetry_close(t);

  /* GPU 3 is in MIG mode with two MIG devices: each is sampled after its parent, with its own
   * memory (2048 of 20480 MiB) and the parent's index. */
  assert_int_equal(gr__telemetry_open("0035:04:00.0", "0", getpid(), 0, 0, &t), GR_OK);
  assert_int_equal(gr__telemetry_ngpus(t), 3);
  gr__telemetry_read(t, 0.0, &smp);
  n = gr__telemetry_format_csv(&smp, buf, sizeof buf);
  buf[n] = '\0';
  assert_string_equal(smp.gpu[1].pci, "0035:04:00.0/mig0");
  assert_string_equal(smp.gpu[2].pci, "0035:04:00.0/mig1");
  assert_int_equal(smp.gpu[1].index, smp.gpu[0].index);
  assert_int_equal(smp.gpu[0].index, 3);
  assert_non_null(strstr(buf, ",0035:04:00.0,30,10,4096.0,40960.0,50,"));
  assert_non_null(strstr(buf, ",0035:04:00.0/mig0,40,10,2048.0,20480.0,"));
  assert_non_null(strstr(buf, ",0035:04:00.0/mig1,20,10,2048.0,20480.0,"));
  assert_false(smp.gpu[1].has_power); /* a slice has no power reading of its own */
  gr__telemetry_close(t);
  unsetenv("GR_FAKE_NVML");
}
#endif

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse_proc_stat),
      cmocka_unit_test(test_cpu_util),
      cmocka_unit_test(test_parse_status_rss),
      cmocka_unit_test(test_no_nvml),
      cmocka_unit_test(test_steal),
#ifdef GR_FAKE_NVML
      cmocka_unit_test(test_fake_nvml),
      cmocka_unit_test(test_fake_nvml_share),
#endif
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
