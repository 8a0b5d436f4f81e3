/* Pool benchmark runner: runs every peer (serial, gpurun, oneTBB, libgomp, libomp) on every
 * benchmark at each thread count, interleaved round by round so that machine noise hits all peers
 * alike, checks every result, and prints best and median wall time, CPU time and the ratios.
 *
 *   bench_pool [-r ROUNDS] [-t 1,2] [-b fib30,fib40c20,nqueens12,uts-t1]
 *
 * The peers are the bench_pool_* executables next to this one; each runs one timed repetition per
 * call after an untimed warm-up (see bench_common.h). */
#include "bench_common.h"

#include <limits.h>
#include <unistd.h>

/* gr-asym: gpurun with the deques' opt-in asymmetric barrier (GPURUN_POOL_FENCE=asym) instead of
 * the default seq_cst fence pair (Le et al.); see tasks/gr_deque.h. */
enum { P_SERIAL = 0, P_GPURUN, P_GRASYM, P_TBB, P_GOMP, P_OMP, P_COUNT };
static const char *const peer_label[P_COUNT] = {"serial", "gpurun",  "gr-asym",
                                                "oneTBB", "libgomp", "libomp"};
static const char *const peer_env[P_COUNT] = {"", "", "GPURUN_POOL_FENCE=asym ", "", "", ""};
static const char *const peer_exe[P_COUNT] = {"bench_pool_gpurun --serial",
                                              "bench_pool_gpurun",
                                              "bench_pool_gpurun",
                                              "bench_pool_tbb",
                                              "bench_pool_gomp",
                                              "bench_pool_libomp"};
#define MAX_ROUNDS 32
#define MAX_THREADS_LIST 8

static char dir[PATH_MAX];

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double best(const double *v, int n) {
  double m = n ? v[0] : 0;
  for (int i = 1; i < n; i++)
    m = v[i] < m ? v[i] : m;
  return m;
}

static double median(double *v, int n) {
  if (n == 0) return 0;
  double t[MAX_ROUNDS];
  memcpy(t, v, (size_t)n * sizeof *v);
  qsort(t, (size_t)n, sizeof *t, cmp_double);
  return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

static int peer_present(int p) {
  char path[PATH_MAX + 64];
  char exe[64];
  sscanf(peer_exe[p], "%63s", exe);
  snprintf(path, sizeof path, "%s/%s", dir, exe);
  return access(path, X_OK) == 0;
}

/* Runs one repetition; returns 0 and fills wall/cpu, or -1 (failed or wrong answer). */
static int run_peer(int p, int b, int threads, double *wall, double *cpu) {
  char cmd[PATH_MAX + 256];
  snprintf(cmd, sizeof cmd, "%s'%s'/%s %s %d 1", peer_env[p], dir, peer_exe[p], bench_names[b],
           threads);
  FILE *f = popen(cmd, "r");
  if (!f) return -1;
  char line[512];
  int got = 0, ok = 0;
  while (fgets(line, sizeof line, f)) {
    char name[64], bn[64], status[16];
    int t;
    long v;
    if (sscanf(line, "RESULT %63s %63s %d %lf %lf %ld %15s", name, bn, &t, wall, cpu, &v, status) ==
        7) {
      got = 1;
      ok = strcmp(status, "ok") == 0;
      if (!ok)
        fprintf(stderr, "%s %s threads %d: got %ld, expected %ld\n", peer_label[p], bn, t, v,
                bench_expected[b]);
    }
  }
  int rc = pclose(f);
  return got && ok && rc == 0 ? 0 : -1;
}

static int parse_list(const char *s, int *out, int max, int is_bench) {
  int n = 0;
  char buf[256];
  snprintf(buf, sizeof buf, "%s", s);
  for (char *tok = strtok(buf, ","); tok && n < max; tok = strtok(NULL, ",")) {
    int v = is_bench ? bench_parse(tok) : atoi(tok);
    if (v < (is_bench ? 0 : 1)) return -1;
    out[n++] = v;
  }
  return n;
}

int main(int argc, char **argv) {
  int rounds = 3;
  int threads[MAX_THREADS_LIST] = {1, 2}, nthreads = 2;
  int benches[B_COUNT] = {B_FIB30, B_FIB40, B_NQUEENS, B_UTS}, nbench = B_COUNT;
  int opt;
  while ((opt = getopt(argc, argv, "r:t:b:h")) != -1) {
    switch (opt) {
    case 'r':
      rounds = atoi(optarg);
      if (rounds < 1 || rounds > MAX_ROUNDS) rounds = 3;
      break;
    case 't':
      nthreads = parse_list(optarg, threads, MAX_THREADS_LIST, 0);
      break;
    case 'b':
      nbench = parse_list(optarg, benches, B_COUNT, 1);
      break;
    default:
      fprintf(stderr, "usage: %s [-r ROUNDS] [-t 1,2] [-b fib30,fib40c20,nqueens12,uts-t1]\n",
              argv[0]);
      return 2;
    }
  }
  if (nthreads < 1 || nbench < 1) {
    fprintf(stderr, "%s: bad -t or -b list\n", argv[0]);
    return 2;
  }
  ssize_t len = readlink("/proc/self/exe", dir, sizeof dir - 1);
  if (len <= 0) return 1;
  dir[len] = '\0';
  char *slash = strrchr(dir, '/');
  if (slash) *slash = '\0';
  int present[P_COUNT];
  for (int p = 0; p < P_COUNT; p++) {
    present[p] = peer_present(p);
    if (!present[p]) fprintf(stderr, "note: %s not built, skipped\n", peer_label[p]);
  }

  int failures = 0;
  printf("pool benchmark, %d interleaved rounds. Cells: best wall / median wall / best CPU, all in"
         " ms (CPU: all threads).\nRatios: peer best wall / gpurun best wall (> 1: gpurun faster);"
         " gr/ser: gpurun best wall / serial best wall.\n",
         rounds);
  printf("gpurun: default deques (Le et al. fences); gr-asym: GPURUN_POOL_FENCE=asym "
         "(membarrier)\n\n");
  printf("%-10s %3s %8s %16s %16s %16s %16s %16s %7s %7s %7s %7s\n", "bench", "thr", "serial",
         "gpurun", "gr-asym", "oneTBB", "libgomp", "libomp", "TBB/gr", "gomp/gr", "omp/gr",
         "gr/ser");
  for (int bi = 0; bi < nbench; bi++) {
    int b = benches[bi];
    double serial_wall[MAX_ROUNDS];
    int nserial = 0;
    for (int ti = 0; ti < nthreads; ti++) {
      int t = threads[ti];
      double wall[P_COUNT][MAX_ROUNDS], cpu[P_COUNT][MAX_ROUNDS];
      int n[P_COUNT] = {0};
      for (int r = 0; r < rounds; r++)
        for (int p = 0; p < P_COUNT; p++) {
          if (!present[p] || (p == P_SERIAL && ti > 0)) continue;
          double w, c;
          if (run_peer(p, b, t, &w, &c) == 0) {
            wall[p][n[p]] = w;
            cpu[p][n[p]] = c;
            n[p]++;
          } else {
            failures++;
          }
          if (p == P_SERIAL) serial_wall[nserial++] = w;
        }
      /* Noise on a shared machine only adds time: the best round is the least disturbed one. The
       * median is printed too, for the spread. */
      double mw[P_COUNT], mc[P_COUNT], md[P_COUNT];
      for (int p = 0; p < P_COUNT; p++) {
        mw[p] = best(wall[p], n[p]);
        mc[p] = best(cpu[p], n[p]);
        md[p] = median(wall[p], n[p]);
      }
      double ms = best(serial_wall, nserial);
      char cell[P_COUNT][32];
      for (int p = 1; p < P_COUNT; p++) {
        if (n[p])
          snprintf(cell[p], sizeof cell[p], "%.1f/%.0f/%.0f", 1e3 * mw[p], 1e3 * md[p],
                   1e3 * mc[p]);
        else
          snprintf(cell[p], sizeof cell[p], "-");
      }
      char ratio[3][16], rs[16];
      for (int k = 0; k < 3; k++) {
        int p = P_TBB + k;
        if (n[p] && n[P_GPURUN])
          snprintf(ratio[k], sizeof ratio[k], "%.2f", mw[p] / mw[P_GPURUN]);
        else
          snprintf(ratio[k], sizeof ratio[k], "-");
      }
      if (nserial && n[P_GPURUN])
        snprintf(rs, sizeof rs, "%.2f", mw[P_GPURUN] / ms);
      else
        snprintf(rs, sizeof rs, "-");
      char sc[16];
      if (nserial)
        snprintf(sc, sizeof sc, "%.1f", 1e3 * ms);
      else
        snprintf(sc, sizeof sc, "-");
      printf("%-10s %3d %8s %16s %16s %16s %16s %16s %7s %7s %7s %7s\n", bench_names[b], t, sc,
             cell[P_GPURUN], cell[P_GRASYM], cell[P_TBB], cell[P_GOMP], cell[P_OMP], ratio[0],
             ratio[1], ratio[2], rs);
      fflush(stdout);
    }
  }
  if (failures) printf("\n%d runs failed or gave a wrong answer (see stderr)\n", failures);
  return failures ? 1 : 0;
}
