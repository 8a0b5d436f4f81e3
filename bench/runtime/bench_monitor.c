/* What does --monitor cost the program? A CPU-bound loop runs under gr__supervise with no sampling
 * and with sampling every 0.1 s (or --interval), alternately, several times; the table shows each
 * pair side by side and the ratio. Usage: bench_monitor [--repeats N] [--interval S] [--work ITERS]
 */
#include "gr_supervise.h"
#include "gr_telemetry.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The program being watched: a dependent integer recurrence the compiler cannot shorten. Prints its
 * own elapsed time, so fork/exec of the supervisor is not counted. */
static int work(long iters) {
  double t0 = now_s();
  uint64_t x = 88172645463325252ull;
  for (long i = 0; i < iters; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
  }
  printf("%.6f %llu\n", now_s() - t0, (unsigned long long)(x & 1));
  return 0;
}

static double run_once(const char *self, long iters, double interval, const char *dir) {
  char out[] = "/tmp/gr_bench_monitor_XXXXXX";
  int fd = mkstemp(out);
  if (fd < 0) return -1;
  char itbuf[32];
  snprintf(itbuf, sizeof itbuf, "%ld", iters);
  char *argv[] = {(char *)self, "--child", itbuf, NULL};
  gr_supervise_opts o;
  gr__supervise_opts_init(&o);
  o.monitor_interval_s = interval;
  o.monitor_dir = dir;
  o.job_id = "bench";
  o.gpus_pci = NULL; /* every GPU NVML sees, as a worst case */
  fflush(stdout);
  int saved = dup(1);
  dup2(fd, 1);
  int code = -1;
  gr_status st = gr__supervise(argv, &o, &code);
  dup2(saved, 1);
  close(saved);
  double t = -1;
  FILE *f = fdopen(fd, "r");
  rewind(f);
  if (st == GR_OK && code == 0 && fscanf(f, "%lf", &t) != 1) t = -1;
  fclose(f);
  unlink(out);
  return t;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  long iters = 400000000;
  int repeats = 5;
  double interval = 0.1;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--child") && i + 1 < argc) return work(atol(argv[i + 1]));
    if (!strcmp(argv[i], "--repeats") && i + 1 < argc)
      repeats = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--interval") && i + 1 < argc)
      interval = atof(argv[++i]);
    else if (!strcmp(argv[i], "--work") && i + 1 < argc)
      iters = atol(argv[++i]);
    else {
      fprintf(stderr, "usage: %s [--repeats N] [--interval S] [--work ITERS]\n", argv[0]);
      return 2;
    }
  }
  if (repeats < 1 || repeats > 100) repeats = 5;
  char dir[] = "/tmp/gr_bench_monitor_dir_XXXXXX";
  if (!mkdtemp(dir)) return 1;
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return 1;
  self[n] = '\0';

  printf("CPU-bound loop (%ld xorshift steps), alone vs under --monitor every %g s\n", iters,
         interval);
  printf("%-7s %12s %12s %8s\n", "repeat", "plain [s]", "monitor [s]", "ratio");
  double ratios[100];
  int ok = 0;
  for (int r = 0; r < repeats; r++) {
    /* Alternate which goes first so drift on a shared machine hits both sides. */
    double plain, mon;
    if (r % 2 == 0) {
      plain = run_once(self, iters, 0, dir);
      mon = run_once(self, iters, interval, dir);
    } else {
      mon = run_once(self, iters, interval, dir);
      plain = run_once(self, iters, 0, dir);
    }
    if (plain <= 0 || mon <= 0) {
      printf("%-7d run failed\n", r);
      continue;
    }
    ratios[ok++] = mon / plain;
    printf("%-7d %12.4f %12.4f %8.4f\n", r, plain, mon, mon / plain);
  }
  if (ok) {
    qsort(ratios, (size_t)ok, sizeof ratios[0], cmp);
    printf("median ratio monitor/plain: %.4f (min %.4f, max %.4f, %d pairs)\n", ratios[ok / 2],
           ratios[0], ratios[ok - 1], ok);
  }
  /* The cost of one sample itself, measured in the supervisor (this is all the CPU it takes). */
  gr__telemetry *t = NULL;
  if (gr__telemetry_open(NULL, NULL, getpid(), 0, 0, &t) == GR_OK) {
    char buf[8192];
    const int ns = 200;
    double t0 = now_s();
    for (int i = 0; i < ns; i++)
      gr__telemetry_sample(t, 0, buf, sizeof buf);
    double per = (now_s() - t0) / ns;
    printf("one sample: %.1f us (%d GPUs via NVML) = %.4f%% of one core at %g s interval\n",
           per * 1e6, gr__telemetry_ngpus(t), 100.0 * per / interval, interval);
    gr__telemetry_close(t);
  }
  fflush(stdout);
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) return 1;
  return ok ? 0 : 1;
}
