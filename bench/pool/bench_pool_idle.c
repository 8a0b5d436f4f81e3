/* Idle cost of a pool by worker count: create a pool of N workers, wake them all with a burst of
 * tiny tasks, let them settle, then report the process's CPU time (getrusage) and the pool's
 * futex sleeps over an idle interval.
 *
 *   bench_pool_idle [-s SECONDS] N...      e.g. bench_pool_idle 1024 4096
 * Prints one line per N: "idle N workers: X% of a core, S sleeps/s over T s". */
#include <gpurun/pool.h>

#include "gr_pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static double cpu_s(void) {
  struct rusage r;
  getrusage(RUSAGE_SELF, &r);
  return (double)(r.ru_utime.tv_sec + r.ru_stime.tv_sec) +
         1e-6 * (double)(r.ru_utime.tv_usec + r.ru_stime.tv_usec);
}

static double wall_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void sleep_s(double s) {
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

static void body(size_t lo, size_t hi, void *arg) { (void)lo, (void)hi, (void)arg; }

int main(int argc, char **argv) {
  double secs = 2;
  int i = 1;
  if (argc > 2 && strcmp(argv[1], "-s") == 0) {
    secs = atof(argv[2]);
    i = 3;
  }
  if (i >= argc || !(secs > 0 && secs < 3600)) {
    fprintf(stderr, "usage: %s [-s SECONDS] NWORKERS...\n", argv[0]);
    return 2;
  }
  for (; i < argc; i++) {
    gr_pool_config cfg;
    gr_pool_config_init(&cfg);
    cfg.nthreads = atoi(argv[i]);
    cfg.pin = 0;
    gr_pool *p;
    if (gr_pool_create(&cfg, &p) != GR_OK) {
      fprintf(stderr, "%s: %s\n", argv[0], gr_last_error());
      return 1;
    }
    if (gr_parallel_for(p, 0, 100000, 10, body, NULL) != GR_OK) return 1;
    sleep_s(0.5);
    gr__pool_stats st;
    gr__pool_get_stats(p, &st);
    uint64_t s0 = st.sleeps;
    double c0 = cpu_s(), w0 = wall_s();
    sleep_s(secs);
    double c1 = cpu_s(), w1 = wall_s();
    gr__pool_get_stats(p, &st);
    printf("idle %d workers: %.1f%% of a core, %.0f sleeps/s over %.2f s\n", cfg.nthreads,
           100 * (c1 - c0) / (w1 - w0), (double)(st.sleeps - s0) / (w1 - w0), w1 - w0);
    fflush(stdout);
    gr_pool_destroy(p);
  }
  return 0;
}
