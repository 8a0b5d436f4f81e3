/* Shared by every peer of the pool benchmark (C and C++): the problems, their serial versions and
 * known answers, the UTS splittable SHA-1 RNG, and timing. Each peer implements the same
 * decomposition: spawn all children but the last, run the last inline, then wait.
 *
 * UTS: the Unbalanced Tree Search benchmark (Olivier et al., LCPC 2006), tree T1: geometric
 * distribution, fixed shape (-t 1 -a 3 -d 10 -b 4 -r 19), 4,130,071 nodes. A node's state is 20
 * bytes; child i's state is SHA-1(parent state || i as 4 big-endian bytes); the root's is
 * SHA-1(16 zero bytes || seed as 4 big-endian bytes). (examples/uts on branch dpool holds the same
 * tree generator; this copy keeps the benchmark self-contained.) */
#ifndef GR_BENCH_POOL_COMMON_H
#define GR_BENCH_POOL_COMMON_H

#define OPENSSL_SUPPRESS_DEPRECATED /* SHA1_Init & co: deprecated in OpenSSL 3, still the fastest */
#include <math.h>
#include <openssl/sha.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- problems ---------------------------------------------------------------------------- */

enum { B_FIB30 = 0, B_FIB40, B_NQUEENS, B_UTS, B_COUNT };
static const char *const bench_names[B_COUNT] = {"fib30", "fib40c20", "nqueens12", "uts-t1"};
static const long bench_expected[B_COUNT] = {832040L, 102334155L, 14200L, 4130071L};
#define FIB30_N 30
#define FIB30_CUTOFF 2 /* a task at every call with n >= 2: 1,346,268 tasks */
#define FIB40_N 40
#define FIB40_CUTOFF 20
#define NQ_N 12
#define NQ_MAX 16

static inline int bench_parse(const char *s) {
  for (int i = 0; i < B_COUNT; i++)
    if (strcmp(s, bench_names[i]) == 0) return i;
  return -1;
}

static inline long fib_serial(int n) { return n < 2 ? n : fib_serial(n - 1) + fib_serial(n - 2); }

/* nqueens: queens placed in rows [0, row) at columns board[0..row). */
static inline int nq_ok(const signed char *board, int row, int col) {
  for (int r = 0; r < row; r++) {
    int c = board[r];
    if (c == col || c - col == row - r || col - c == row - r) return 0;
  }
  return 1;
}

static inline long nq_serial(int n, int row, signed char *board) {
  if (row == n) return 1;
  long s = 0;
  for (int c = 0; c < n; c++)
    if (nq_ok(board, row, c)) {
      board[row] = (signed char)c;
      s += nq_serial(n, row + 1, board);
    }
  return s;
}

/* ---- UTS T1 ------------------------------------------------------------------------------ */

#define UTS_B0 4.0
#define UTS_GEN_MX 10
#define UTS_ROOT_SEED 19
#define UTS_MAX_CHILDREN 100

typedef struct {
  unsigned char state[20];
  int height;
} uts_node;

static inline void uts_root(uts_node *n) {
  unsigned char buf[20] = {0};
  buf[16] = (unsigned char)(UTS_ROOT_SEED >> 24);
  buf[17] = (unsigned char)(UTS_ROOT_SEED >> 16);
  buf[18] = (unsigned char)(UTS_ROOT_SEED >> 8);
  buf[19] = (unsigned char)UTS_ROOT_SEED;
  SHA1(buf, 20, n->state);
  n->height = 0;
}

static inline void uts_child(const uts_node *parent, int i, uts_node *child) {
  unsigned char buf[24];
  memcpy(buf, parent->state, 20);
  buf[20] = (unsigned char)(i >> 24);
  buf[21] = (unsigned char)(i >> 16);
  buf[22] = (unsigned char)(i >> 8);
  buf[23] = (unsigned char)i;
  SHA_CTX c; /* the low-level calls: OpenSSL 3's SHA1() goes through EVP and costs 3x more */
  SHA1_Init(&c);
  SHA1_Update(&c, buf, 24);
  SHA1_Final(child->state, &c);
  child->height = parent->height + 1;
}

/* Geometric number of children with mean b_i (fixed shape: b0 above depth gen_mx, 0 below). */
static inline int uts_num_children(const uts_node *n) {
  double b = n->height < UTS_GEN_MX ? UTS_B0 : 0.0;
  double p = 1.0 / (1.0 + b);
  uint32_t h = ((uint32_t)n->state[16] << 24 | (uint32_t)n->state[17] << 16 |
                (uint32_t)n->state[18] << 8 | (uint32_t)n->state[19]) &
               0x7fffffffu;
  double u = (double)h / 2147483648.0;
  int k = (int)floor(log(1.0 - u) / log(1.0 - p));
  if (k > UTS_MAX_CHILDREN) k = UTS_MAX_CHILDREN;
  return k < 0 ? 0 : k;
}

static inline long uts_serial(const uts_node *n) {
  int k = uts_num_children(n);
  long s = 1;
  for (int i = 0; i < k; i++) {
    uts_node c;
    uts_child(n, i, &c);
    s += uts_serial(&c);
  }
  return s;
}

/* ---- timing ------------------------------------------------------------------------------ */

static inline double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CPU seconds of the whole process (all threads), user + system. */
static inline double cpu_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
         (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
}

/* The peer's protocol: "PEER BENCH THREADS" -> lines "RESULT name bench threads wall cpu value ok"
 * for `reps` timed runs after one untimed warm-up (pool/arena/team created before any timer). */
typedef long (*bench_run_fn)(int bench, void *ctx);

static inline int bench_main(const char *peer, int argc, char **argv, void *(*setup)(int threads),
                             bench_run_fn run, void (*teardown)(void *ctx)) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s BENCH THREADS [REPS]   (BENCH: fib30 fib40c20 nqueens12 uts-t1)\n",
            argv[0]);
    return 2;
  }
  int b = bench_parse(argv[1]);
  int threads = atoi(argv[2]);
  int reps = argc > 3 ? atoi(argv[3]) : 1;
  if (b < 0 || threads < 1 || reps < 1) {
    fprintf(stderr, "%s: bad arguments\n", argv[0]);
    return 2;
  }
  void *ctx = setup(threads);
  int ok_all = 1;
  (void)run(b == B_UTS || b == B_FIB40 ? B_FIB30 : b, ctx); /* warm-up: threads, allocators */
  for (int r = 0; r < reps; r++) {
    double c0 = cpu_s(), t0 = now_s();
    long v = run(b, ctx);
    double t1 = now_s(), c1 = cpu_s();
    int ok = v == bench_expected[b];
    ok_all &= ok;
    printf("RESULT %s %s %d %.6f %.6f %ld %s\n", peer, bench_names[b], threads, t1 - t0, c1 - c0, v,
           ok ? "ok" : "WRONG");
    fflush(stdout);
  }
  teardown(ctx);
  return ok_all ? 0 : 1;
}

#ifdef __cplusplus
}
#endif
#endif
