/* Randomised differential test of the reductions: one random sequence of calls (kind, dtype, op,
 * count, root, in place or not, values with NaN, +-inf, -0, the largest finite values and
 * full-width integers) - the same on every rank, from one seed - runs on every path gpurun has:
 *   blocking    timeout 0: MPI's blocking routines (and gpurun's ops where MPI's differ)
 *   timeout     timeout 60: gpurun's recursive doubling / ring / Rabenseifner, MPI_I... otherwise
 *   request     timeout 0, gr_iallreduce (gpurun's own algorithms without a timeout)
 *   grouped     timeout 0, each call alone in a group
 *   check       timeout 60 and check mode
 * (compiled with DIFF_NCCL_DOUBLE: the NCCL backend over the test double, timeout 0 and 60), and
 * every result is compared bit for bit with an answer computed here, independently of the library:
 * integers in 64-bit unsigned arithmetic truncated to the width (two's complement wrap), floats in
 * double from values chosen so that every order of the reduction gives the same result (exact
 * small integers, specials, or the largest finite value on every rank), rounded to the type by
 * ldexp/nearbyint. MIN/MAX must give the canonical quiet NaN when any input is NaN and order -0
 * below +0; SUM/PROD/AVG must give a NaN (its payload is not specified).
 * Usage: test_coll_diff [SEED [NCALLS]] */
#include <gpurun/coll.h>
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "world_comm.h"
#ifdef DIFF_NCCL_DOUBLE
extern const gr__coll_ops gr__coll_ops_nccl_double;
#define BACKEND_OPS (&gr__coll_ops_nccl_double)
#define LABEL "nccl-double"
#else
#define BACKEND_OPS NULL /* the MPI backend */
#define LABEL "mpi"
#endif

static int rank, size, failures, checks;

#define GR_TEST_RANK rank
#define GR_TEST_FAILURES failures
#include "gr_check.h"

/* ---- the independent model ---------------------------------------------------------------- */

static const size_t esize[] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8};
static const char *const dname[] = {"int8",   "uint8",   "int32",    "uint32",  "int64",
                                    "uint64", "float16", "bfloat16", "float32", "float64"};
static const char *const oname[] = {"sum", "prod", "min", "max", "avg"};
static int is_float(int t) { return t >= GR_FLOAT16; }

static uint64_t splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Largest finite value and the 16-bit formats' parameters. */
static double max_finite(int t) {
  switch (t) {
  case GR_FLOAT16:
    return 65504.0;
  case GR_BFLOAT16:
    return ldexp(255.0, 120); /* (2 - 2^-7) * 2^127 */
  case GR_FLOAT32:
    return ldexp(16777215.0, 104);
  default:
    return ldexp(9007199254740991.0, 971);
  }
}

/* Round a double to the nearest value of a binary format with mbits fraction bits and minimum
 * normal exponent emin (ties to even, overflow to inf). Inputs here are exact in double. */
static double round_to(double x, int mbits, int emin, double maxf) {
  if (x == 0 || isnan(x) || isinf(x)) return x;
  int e;
  frexp(fabs(x), &e);
  e -= 1;
  if (e < emin) e = emin;
  double q = ldexp(1.0, e - mbits), r = nearbyint(x / q) * q;
  if (fabs(r) > maxf) return x > 0 ? INFINITY : -INFINITY;
  return r;
}
static double round_type(int t, double x) {
  switch (t) {
  case GR_FLOAT16:
    return round_to(x, 10, -14, max_finite(t));
  case GR_BFLOAT16:
    return round_to(x, 7, -126, max_finite(t));
  case GR_FLOAT32:
    return round_to(x, 23, -126, max_finite(t));
  default:
    return x;
  }
}

/* Encode a value of the type (already representable) as bits. */
static uint16_t enc16(double x, int ebits, int mbits) {
  int bias = (1 << (ebits - 1)) - 1;
  uint16_t sign = signbit(x) ? 0x8000 : 0;
  if (isnan(x)) return (uint16_t)(0x7fff & ~((1 << (mbits - 1)) - 1)); /* canonical quiet NaN */
  if (isinf(x)) return (uint16_t)(sign | (((1 << ebits) - 1) << mbits));
  if (x == 0) return sign;
  int e;
  double f = frexp(fabs(x), &e);
  e -= 1;
  if (e < 1 - bias)
    return (uint16_t)(sign | (uint16_t)ldexp(fabs(x), bias - 1 + mbits)); /* subnormal */
  return (uint16_t)(sign | ((e + bias) << mbits) | (uint16_t)((f * 2 - 1) * (1 << mbits)));
}
static double dec16(uint16_t h, int ebits, int mbits) {
  int bias = (1 << (ebits - 1)) - 1, emax = (1 << ebits) - 1;
  int e = (h >> mbits) & emax, m = h & ((1 << mbits) - 1);
  double s = (h & 0x8000) ? -1 : 1;
  if (e == emax) return m ? NAN : s * INFINITY;
  if (e == 0) return s * ldexp(m, 1 - bias - mbits);
  return s * ldexp(m + (1 << mbits), e - bias - mbits);
}

static void put(int t, void *buf, size_t i, double f, uint64_t u) {
  switch (t) {
  case GR_INT8:
  case GR_UINT8:
    ((uint8_t *)buf)[i] = (uint8_t)u;
    break;
  case GR_INT32:
  case GR_UINT32:
    ((uint32_t *)buf)[i] = (uint32_t)u;
    break;
  case GR_INT64:
  case GR_UINT64:
    ((uint64_t *)buf)[i] = u;
    break;
  case GR_FLOAT16:
    ((uint16_t *)buf)[i] = enc16(f, 5, 10);
    break;
  case GR_BFLOAT16:
    ((uint16_t *)buf)[i] = enc16(f, 8, 7);
    break;
  case GR_FLOAT32: {
    float x = (float)f;
    if (isnan(f)) {
      uint32_t q = 0x7fc00000u;
      memcpy(&x, &q, 4);
    }
    ((float *)buf)[i] = x;
    break;
  }
  default: {
    double x = f;
    if (isnan(f)) {
      uint64_t q = 0x7ff8000000000000ull;
      memcpy(&x, &q, 8);
    }
    ((double *)buf)[i] = x;
    break;
  }
  }
}
static double getf(int t, const void *buf, size_t i) {
  switch (t) {
  case GR_FLOAT16:
    return dec16(((const uint16_t *)buf)[i], 5, 10);
  case GR_BFLOAT16:
    return dec16(((const uint16_t *)buf)[i], 8, 7);
  case GR_FLOAT32:
    return ((const float *)buf)[i];
  default:
    return ((const double *)buf)[i];
  }
}

/* Element i of rank r's input of call `id`: a pure function of (seed, id, i, r), so that every
 * rank can compute every rank's input. Per element a class is drawn from (seed, id, i) alone, so
 * that the ranks' values fit together (a special on some ranks, the largest value on all). */
typedef struct {
  uint64_t seed, id;
  int t, op;
} callspec;

static void value(const callspec *c, size_t i, int r, double *f, uint64_t *u) {
  uint64_t s = c->seed ^ (c->id * 0x9e3779b97f4a7c15ull) ^ (i * 0xd1b54a32d192ed03ull);
  uint64_t cls = splitmix(&s) % 100, sgn = splitmix(&s);
  uint64_t sr = s ^ ((uint64_t)(r + 1) * 0x8cb92ba72f3d8dd7ull);
  uint64_t x = splitmix(&sr);
  *u = 0;
  *f = 0;
  if (!is_float(c->t)) {
    if (cls < 25)
      *u = x; /* full width: SUM and PROD overflow and wrap */
    else if (c->op == GR_PROD)
      *u = (uint64_t)(int64_t)((int)(x % 5) - 2);
    else
      *u = (uint64_t)(int64_t)((int)(x % 9) - 4);
    if (c->t == GR_UINT8 || c->t == GR_UINT32 || c->t == GR_UINT64) *u = cls < 25 ? x : x % 9;
    return;
  }
  if (cls < 12) { /* the largest finite value on every rank, one sign per element */
    *f = (sgn & 1 ? -1 : 1) * max_finite(c->t);
  } else if (cls < 30) { /* specials on some ranks */
    static const double sp[] = {NAN, INFINITY, -INFINITY, -0.0, 0.0};
    if (x % 3 == 0)
      *f = sp[(x >> 8) % 5];
    else
      *f = c->op == GR_PROD ? ((x >> 8) % 2 ? -1.0 : 1.0) : (double)((int)((x >> 8) % 9) - 4);
  } else if (c->op == GR_PROD) { /* +-1, +-2: every product exact */
    static const double pv[] = {1, -1, 2, -2, 1, -1, 0.5};
    *f = pv[(x >> 8) % 7];
  } else {
    *f = (double)((int)((x >> 8) % 9) - 4) * (cls % 2 ? 0.5 : 1.0);
  }
}

/* The expected element: into exp (bits), and whether only "a NaN" is required. */
static int expected(const callspec *c, size_t i, void *exp) {
  int t = c->t, op = c->op == GR_AVG ? GR_SUM : c->op;
  if (!is_float(t)) {
    uint64_t acc = 0, w = esize[t] * 8 == 64 ? ~0ull : (1ull << (esize[t] * 8)) - 1;
    int sgn = t == GR_INT8 || t == GR_INT32 || t == GR_INT64;
    for (int r = 0; r < size; r++) {
      double f;
      uint64_t u;
      value(c, i, r, &f, &u);
      u &= w;
      /* MIN/MAX compare as the type: sign-extend signed values */
      int64_t sv = sgn && w != ~0ull && (u >> (esize[t] * 8 - 1)) ? (int64_t)(u | ~w) : (int64_t)u;
      int64_t sa =
          sgn && w != ~0ull && (acc >> (esize[t] * 8 - 1)) ? (int64_t)(acc | ~w) : (int64_t)acc;
      if (r == 0) {
        acc = u;
        continue;
      }
      switch (op) {
      case GR_SUM:
        acc = (acc + u) & w;
        break;
      case GR_PROD:
        acc = (acc * u) & w;
        break;
      case GR_MIN:
        acc = sgn ? (sv < sa ? u : acc) : (u < acc ? u : acc);
        break;
      default:
        acc = sgn ? (sv > sa ? u : acc) : (u > acc ? u : acc);
        break;
      }
    }
    put(t, exp, 0, 0, acc);
    return 0;
  }
  double acc = 0;
  int nan = 0;
  for (int r = 0; r < size; r++) {
    double f;
    uint64_t u;
    value(c, i, r, &f, &u);
    nan |= isnan(f);
    if (r == 0) {
      acc = f;
      continue;
    }
    switch (op) {
    case GR_SUM:
      acc = acc + f;
      break;
    case GR_PROD:
      acc = acc * f;
      break;
    case GR_MIN:
      acc = f < acc || (f == acc && signbit(f)) ? f : acc;
      break;
    default:
      acc = f > acc || (f == acc && !signbit(f)) ? f : acc;
      break;
    }
  }
  /* every input is exact and every partial result is too (or overflows the same way) */
  acc = round_type(t, acc);
  if (c->op == GR_AVG) {
    if (t == GR_FLOAT64)
      acc = acc / size;
    else
      acc = round_type(t, (double)((float)acc / (float)size)); /* divided in float */
  }
  if (nan || isnan(acc)) {
    put(t, exp, 0, NAN, 0);
    return op != GR_MIN && op != GR_MAX; /* MIN/MAX: the canonical NaN, bit for bit */
  }
  put(t, exp, 0, acc, 0);
  return 0;
}

/* A NaN input in one of four encodings, by k: the canonical quiet NaN, a negative quiet one with
 * a payload, a signalling one with a payload, a negative signalling one. MIN/MAX must give the
 * canonical quiet NaN whatever the inputs' payload, sign and signalling bit (gr_dtype(3)). */
static void put_nan(int t, void *buf, size_t i, unsigned k) {
  static const uint16_t h[4] = {0x7e00, 0xfe2b, 0x7c15, 0xfd01},
                        b[4] = {0x7fc0, 0xffd3, 0x7f85, 0xffa1};
  static const uint32_t f32[4] = {0x7fc00000u, 0xffc0abcdu, 0x7f800123u, 0xffa00001u};
  static const uint64_t f64[4] = {0x7ff8000000000000ull, 0xfff800000000abcdull,
                                  0x7ff0000000000123ull, 0xfff4000000000001ull};
  k %= 4;
  if (t == GR_FLOAT16) ((uint16_t *)buf)[i] = h[k];
  if (t == GR_BFLOAT16) ((uint16_t *)buf)[i] = b[k];
  if (t == GR_FLOAT32) memcpy((uint32_t *)buf + i, &f32[k], 4);
  if (t == GR_FLOAT64) memcpy((uint64_t *)buf + i, &f64[k], 8);
}

static void fill(const callspec *c, void *buf, size_t n, size_t off) {
  for (size_t i = 0; i < n; i++) {
    double f;
    uint64_t u;
    value(c, off + i, rank, &f, &u);
    put(c->t, buf, i, f, u);
    if (is_float(c->t) && isnan(f)) put_nan(c->t, buf, i, (unsigned)(off + i + (size_t)rank));
  }
}

/* Compare n elements of got (element j stands for element off + j of the call). */
static void compare(const char *path, const char *what, const callspec *c, const void *got,
                    size_t n, size_t off) {
  size_t es = esize[c->t];
  unsigned char exp[8];
  for (size_t j = 0; j < n; j++) {
    int any_nan = expected(c, off + j, exp);
    checks++;
    const unsigned char *g = (const unsigned char *)got + j * es;
    int ok = any_nan ? isnan(getf(c->t, g, 0)) : memcmp(g, exp, es) == 0;
    if (!ok) {
      uint64_t gb = 0, eb = 0;
      memcpy(&gb, g, es);
      memcpy(&eb, exp, es);
      FAIL("%s %s, call %llu: %s %s %s element %zu is 0x%llx, expected 0x%llx%s", LABEL, path,
           (unsigned long long)c->id, what, dname[c->t], oname[c->op], off + j,
           (unsigned long long)gb, (unsigned long long)eb, any_nan ? " (any NaN)" : "");
      return;
    }
  }
}

/* ---- the paths ---------------------------------------------------------------------------- */

enum { PATH_BLOCKING, PATH_TIMEOUT, PATH_REQUEST, PATH_GROUPED, PATH_CHECK, NPATHS };
static const char *const pname[] = {"blocking", "timeout", "request", "grouped", "check"};

/* The test's communicator (world_comm.h); without one the job stops. */
static gr_comm *make(double timeout, int check) {
  gr_comm *c = world_comm(BACKEND_OPS, timeout, check);
  if (!c) MPI_Abort(MPI_COMM_WORLD, 1);
  return c;
}

static void ok(gr_status st, const char *path, const char *what) {
  if (st != GR_OK)
    FAIL("%s %s: %s returned %s (%s)", LABEL, path, what, gr_status_name(st), gr_last_error());
}

/* Run one call of kind k on a path; the library call goes through `run`. */
static gr_status call_allreduce(int path, gr_comm *c, const void *s, void *d, size_t n, int t,
                                int op) {
  if (path == PATH_REQUEST) {
    gr_request *q = NULL;
    gr_status st = gr_iallreduce(s, d, n, (gr_dtype)t, (gr_op)op, c, NULL, &q);
    return st == GR_OK ? gr_wait(&q) : st;
  }
  if (path == PATH_GROUPED) {
    gr_status st = gr_group_start();
    if (st == GR_OK) st = gr_allreduce(s, d, n, (gr_dtype)t, (gr_op)op, c, NULL);
    gr_status st2 = gr_group_end();
    return st != GR_OK ? st : st2;
  }
  return gr_allreduce(s, d, n, (gr_dtype)t, (gr_op)op, c, NULL);
}

static void run(int path, gr_comm *c, const callspec *cs, uint64_t *rng) {
  static const size_t counts[] = {1, 2, 3, 7, 64, 255, 1000, 4097, 9000, 20011};
  size_t n = counts[splitmix(rng) % (sizeof counts / sizeof *counts)];
  int kind = (int)(splitmix(rng) % 4), inplace = (int)(splitmix(rng) % 2);
  int root = (int)(splitmix(rng) % (uint64_t)size);
  int t = cs->t, op = cs->op;
  size_t es = esize[t], P = (size_t)size;
  const char *pn = pname[path];
  char what[96];
  if (kind == 0 || path == PATH_REQUEST) { /* allreduce */
    snprintf(what, sizeof what, "allreduce n=%zu %s", n, inplace ? "in place" : "out of place");
    void *s = malloc(n * es), *d = inplace ? s : malloc(n * es);
    fill(cs, s, n, 0);
    ok(call_allreduce(path, c, s, d, n, t, op), pn, what);
    compare(pn, what, cs, d, n, 0);
    if (d != s) free(d);
    free(s);
  } else if (kind == 1) { /* reduce */
    snprintf(what, sizeof what, "reduce n=%zu root=%d %s", n, root,
             inplace ? "in place" : "out of place");
    void *s = malloc(n * es), *d = inplace && rank == root ? s : malloc(n * es);
    fill(cs, s, n, 0);
    gr_status st;
    if (path == PATH_GROUPED) {
      st = gr_group_start();
      if (st == GR_OK) st = gr_reduce(s, d, n, (gr_dtype)t, (gr_op)op, root, c, NULL);
      gr_status st2 = gr_group_end();
      if (st == GR_OK) st = st2;
    } else {
      st = gr_reduce(s, d, n, (gr_dtype)t, (gr_op)op, root, c, NULL);
    }
    ok(st, pn, what);
    if (rank == root) compare(pn, what, cs, d, n, 0);
    if (d != s) free(d);
    free(s);
  } else if (kind ==
             2) { /* reduce_scatter: block r of rank r's result is elements [r n, r n + n) */
    if (n > 5000) n /= P;
    snprintf(what, sizeof what, "reduce_scatter n=%zu %s", n,
             inplace ? "in place" : "out of place");
    void *s = malloc(n * es * P), *d = inplace ? (char *)s + (size_t)rank * n * es : malloc(n * es);
    fill(cs, s, n * P, 0);
    gr_status st;
    if (path == PATH_GROUPED) {
      st = gr_group_start();
      if (st == GR_OK) st = gr_reduce_scatter(s, d, n, (gr_dtype)t, (gr_op)op, c, NULL);
      gr_status st2 = gr_group_end();
      if (st == GR_OK) st = st2;
    } else {
      st = gr_reduce_scatter(s, d, n, (gr_dtype)t, (gr_op)op, c, NULL);
    }
    ok(st, pn, what);
    compare(pn, what, cs, d, n, (size_t)rank * n);
    if (!inplace) free(d);
    free(s);
  } else { /* allreduce_multi: three buffers, the middle one in place */
    size_t cn[3] = {n, (n / 3) + 1, 5};
    snprintf(what, sizeof what, "allreduce_multi n=%zu,%zu,%zu", cn[0], cn[1], cn[2]);
    void *s[3], *d[3];
    size_t off = 0;
    for (int b = 0; b < 3; b++) {
      s[b] = malloc(cn[b] * es);
      d[b] = b == 1 ? s[b] : malloc(cn[b] * es);
      fill(cs, s[b], cn[b], off);
      off += cn[b];
    }
    ok(gr_allreduce_multi((const void *const *)s, d, cn, 3, (gr_dtype)t, (gr_op)op, c, NULL), pn,
       what);
    off = 0;
    for (int b = 0; b < 3; b++) {
      compare(pn, what, cs, d[b], cn[b], off);
      off += cn[b];
      if (b != 1) free(d[b]);
      free(s[b]);
    }
  }
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  uint64_t seed = argc > 1 ? strtoull(argv[1], NULL, 0) : 0x18;
  int ncalls = argc > 2 ? atoi(argv[2]) : 60;
  gr_comm *comm[NPATHS];
  comm[PATH_BLOCKING] = make(0, 0);
  comm[PATH_TIMEOUT] = make(60, 0);
  comm[PATH_REQUEST] = comm[PATH_GROUPED] = comm[PATH_BLOCKING];
  comm[PATH_CHECK] = make(60, 1);
  for (int path = 0; path < NPATHS; path++) {
#ifdef DIFF_NCCL_DOUBLE
    if (path == PATH_REQUEST || path == PATH_GROUPED) continue; /* the backend's own groups */
#endif
    uint64_t rng = seed; /* the same sequence of calls on every path */
    for (int i = 0; i < ncalls; i++) {
      callspec cs = {seed, (uint64_t)i, 0, 0};
      cs.t = (int)(splitmix(&rng) % 10);
      cs.op = (int)(splitmix(&rng) % (is_float(cs.t) ? 5 : 4));
      run(path, comm[path], &cs, &rng);
    }
  }
  gr_comm_destroy(comm[PATH_BLOCKING]);
  gr_comm_destroy(comm[PATH_TIMEOUT]);
  gr_comm_destroy(comm[PATH_CHECK]);
  int total = 0, nchecks = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(&checks, &nchecks, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0)
    printf("%s differential, seed %llu, %d calls per path at %d ranks: %d element checks, %d "
           "failures\n",
           LABEL, (unsigned long long)seed, ncalls, size, nchecks, total);
  MPI_Finalize();
  return total ? 1 : 0;
}
