/* gpurun-bench-overlap: a non-blocking allreduce against compute, at 2 ranks on one node (the
 * shared-memory path). Each repeat runs, in this order, with a barrier before each:
 *   compute    every rank computes (no collective)
 *   allreduce  gr_iallreduce then gr_wait at once
 *   (a) test   gr_iallreduce, then every rank computes in slices with a gr_test after each, then
 *              gr_wait
 *   (b) late   gr_iallreduce; the last rank computes without testing and then waits, the others
 *              wait at once
 * The compute is a fixed amount of arithmetic (calibrated once, the same on every rank), so a
 * thread or a rank that takes its core shows as a longer job. A job's time is the slowest rank's,
 * from the barrier to its wait's return. Every allreduce's result is checked exactly. gr_test's
 * time is taken on every call that returns not done.
 *
 *   gpurun-bench-overlap [--mib M] [--compute-ms C] [--slice-ms S] [--repeats N] */
#include <gpurun/coll.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Arithmetic the compiler cannot drop, on a few KiB that stay in L1 (compute that leaves the
 * memory bandwidth to the allreduce, as a GEMM would). Never inlined: a copy inlined into the
 * calibration and another into run() may be compiled differently (at -O3 the two ran at rates
 * 2.3x apart, so "50 ms" of compute took 33 ms). */
static volatile double sink;
__attribute__((noinline)) static void work(long iters) {
  double x[64];
  for (int i = 0; i < 64; i++)
    x[i] = 1.0 + i * 1e-3;
  for (long it = 0; it < iters; it++)
    for (int i = 0; i < 64; i++)
      x[i] = x[i] * 0.999999 + 1e-7;
  double s = 0;
  for (int i = 0; i < 64; i++)
    s += x[i];
  sink = s;
}

/* Iterations of work() per millisecond: the smallest over ranks of the best of a few tries. */
static long calibrate(void) {
  long iters = 1000;
  for (;;) {
    double t0 = now();
    work(iters);
    if (now() - t0 > 0.02) break;
    iters *= 2;
  }
  double best = 1e9;
  for (int k = 0; k < 5; k++) {
    double t0 = now();
    work(iters);
    double t = now() - t0;
    if (t < best) best = t;
  }
  long per_ms = (long)((double)iters / (best * 1e3));
  MPI_Allreduce(MPI_IN_PLACE, &per_ms, 1, MPI_LONG, MPI_MIN, MPI_COMM_WORLD);
  return per_ms;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n ? v[n / 2] : 0.0;
}

static int rank, size;
static float *in, *out;
static size_t count;
static int bad;

static void fill(void) {
  for (size_t i = 0; i < count; i++)
    in[i] = (float)((i + (size_t)rank) % 1000);
  memset(out, 0xff, count * sizeof *out);
}

static void check(const char *what) {
  for (size_t i = 0; i < count; i++) {
    float want = 0;
    for (int r = 0; r < size; r++)
      want += (float)((i + (size_t)r) % 1000);
    if (out[i] != want) {
      fprintf(stderr, "rank %d: %s: out[%zu] = %g, expected %g\n", rank, what, i, out[i], want);
      bad = 1;
      return;
    }
  }
}

static int ok(gr_status st, const char *what) {
  if (st == GR_OK) return 1;
  fprintf(stderr, "rank %d: %s: %s\n", rank, what, gr_last_error());
  bad = 1;
  return 0;
}

static double job_time(double t0) {
  double t = now() - t0;
  MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return t;
}

/* Test times (seconds) of calls that returned not done. */
static double *tests;
static int ntests, captests;
/* Of the gr_test calls that returned not done: the longest thread CPU time one took, how many the
 * kernel preempted (an involuntary context switch inside the call), and the longest wall time of
 * those it did not: a long wall time with a switch inside is the scheduler's, not gpurun's. */
static double test_cpu_max, unswitched_max;
static int test_switched;

static double thread_cpu(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
static long involuntary_switches(void) {
  struct rusage ru;
  return getrusage(RUSAGE_THREAD, &ru) == 0 ? ru.ru_nivcsw : 0;
}

static void note_test(double t) {
  if (ntests == captests) {
    captests = captests ? 2 * captests : 1024;
    tests = realloc(tests, (size_t)captests * sizeof *tests);
    if (!tests) abort();
  }
  tests[ntests++] = t;
}

enum { COMPUTE, ALLREDUCE, TESTED, LATE, NMODES };
static const char *mode_name[NMODES] = {"compute", "allreduce", "(a) test", "(b) late"};

static double run(int mode, gr_comm *c, long per_ms, int compute_ms, int slice_ms) {
  gr_request *req = NULL;
  int slices = compute_ms / slice_ms;
  fill();
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = now();
  if (mode != COMPUTE &&
      !ok(gr_iallreduce(in, out, count, GR_FLOAT32, GR_SUM, c, NULL, &req), "gr_iallreduce"))
    return job_time(t0);
  switch (mode) {
  case COMPUTE:
    work(per_ms * compute_ms);
    break;
  case TESTED:
    for (int i = 0; i < slices; i++) {
      work(per_ms * slice_ms);
      if (!req) continue;
      int done = 0;
      long sw = involuntary_switches();
      double ca = thread_cpu(), a = now();
      gr_status st = gr_test(&req, &done);
      double b = now(), cb = thread_cpu();
      int switched = involuntary_switches() != sw;
      if (!ok(st, "gr_test")) req = NULL;
      if (!done) {
        note_test(b - a);
        test_cpu_max = cb - ca > test_cpu_max ? cb - ca : test_cpu_max;
        test_switched += switched;
        if (!switched && b - a > unswitched_max) unswitched_max = b - a;
      }
    }
    break;
  case LATE:
    if (rank == size - 1) work(per_ms * compute_ms);
    break;
  default:
    break;
  }
  if (req) ok(gr_wait(&req), "gr_wait");
  double t = job_time(t0);
  if (mode != COMPUTE) check(mode_name[mode]);
  return t;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int mib = 64, compute_ms = 50, slice_ms = 1, repeats = 9;
  for (int i = 1; i + 1 < argc; i += 2) {
    int v = atoi(argv[i + 1]);
    if (v <= 0) continue;
    if (!strcmp(argv[i], "--mib")) mib = v;
    if (!strcmp(argv[i], "--compute-ms")) compute_ms = v;
    if (!strcmp(argv[i], "--slice-ms")) slice_ms = v;
    if (!strcmp(argv[i], "--repeats")) repeats = v;
  }
  count = (size_t)mib * 1024 * 1024 / sizeof(float);
  in = malloc(count * sizeof *in);
  out = malloc(count * sizeof *out);
  if (!in || !out) MPI_Abort(MPI_COMM_WORLD, 1);
  gr_comm_config cfg;
  gr_comm_config_init(&cfg);
  cfg.backend = GR_BACKEND_MPI;
  gr_comm *c = NULL;
  if (gr_comm_create(MPI_COMM_WORLD, &cfg, &c) != GR_OK) {
    fprintf(stderr, "rank %d: gr_comm_create: %s\n", rank, gr_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  long per_ms = calibrate();
  for (int w = 0; w < 2; w++) /* warm the pages and the path */
    run(ALLREDUCE, c, per_ms, compute_ms, slice_ms);
  double *t[NMODES];
  for (int m = 0; m < NMODES; m++)
    t[m] = calloc((size_t)repeats, sizeof(double));
  for (int i = 0; i < repeats; i++)
    for (int m = 0; m < NMODES; m++)
      t[m][i] = run(m, c, per_ms, compute_ms, slice_ms);
  /* every rank's test times, median and max of each rank's, the worst rank's shown */
  double tmed = median(tests, ntests), tmax = 0;
  for (int i = 0; i < ntests; i++)
    tmax = tests[i] > tmax ? tests[i] : tmax;
  double tm[4] = {tmed, tmax, test_cpu_max, unswitched_max};
  MPI_Allreduce(MPI_IN_PLACE, tm, 4, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  int tn[2] = {ntests, test_switched};
  MPI_Allreduce(MPI_IN_PLACE, tn, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0) {
    double med[NMODES];
    printf("# %d ranks, %d MiB float32 SUM gr_iallreduce against %d ms of compute (%d ms slices), "
           "%d repeats\n",
           size, mib, compute_ms, slice_ms, repeats);
    printf("%-10s %10s %10s %10s\n", "job", "median_ms", "min_ms", "max_ms");
    for (int m = 0; m < NMODES; m++) {
      med[m] = median(t[m], repeats); /* sorts */
      printf("%-10s %10.2f %10.2f %10.2f\n", mode_name[m], 1e3 * med[m], 1e3 * t[m][0],
             1e3 * t[m][repeats - 1]);
    }
    double sum = med[COMPUTE] + med[ALLREDUCE];
    double longer = med[COMPUTE] > med[ALLREDUCE] ? med[COMPUTE] : med[ALLREDUCE];
    printf("(a) / (compute + allreduce) = %.3f   (b) / max(compute, allreduce) = %.3f\n",
           med[TESTED] / sum, med[LATE] / longer);
    printf("gr_test not done: %d calls, median %.1f us, max %.1f us (worst rank)\n", tn[0],
           1e6 * tm[0], 1e6 * tm[1]);
    printf("gr_test not done: max thread CPU time %.1f us; %d calls preempted inside (an "
           "involuntary context switch), max wall time of the others %.1f us\n",
           1e6 * tm[2], tn[1], 1e6 * tm[3]);
    printf("results %s\n", bad ? "WRONG" : "exact");
  }
  gr_comm_destroy(c);
  MPI_Finalize();
  return bad;
}
