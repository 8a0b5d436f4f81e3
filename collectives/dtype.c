/* Element types, fp16/bf16 rounding and host reduction kernels (see gr_dtype.h). */
#include "gr_dtype.h"

#include <math.h>
#include <string.h>

const size_t gr__dtype_sizes[GR__NDTYPES] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8};
static const char *const onames[GR__NOPS] = {"sum", "prod", "min", "max", "avg"};

const char *gr__op_name(gr_op op) { return gr__op_valid((int)op) ? onames[op] : "?"; }

static uint32_t f2u(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static float u2f(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

float gr__f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1f) return u2f(sign | 0x7f800000u | (m << 13));
  if (e != 0) return u2f(sign | ((e + 112u) << 23) | (m << 13));
  if (m == 0) return u2f(sign);
  uint32_t sh = 0; /* subnormal: normalise the mantissa */
  while (!(m & 0x400u)) {
    m <<= 1;
    sh++;
  }
  return u2f(sign | ((113u - sh) << 23) | ((m & 0x3ffu) << 13));
}

uint16_t gr__f32_to_f16(float f) {
  uint32_t x = f2u(f), sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) /* Inf stays Inf; NaN keeps its top payload bits and is quieted */
    return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u | ((ax >> 13) & 0x3ffu) : 0));
  if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 rounds to Inf */
  if (ax >= 0x38800000u) {                                  /* normal half */
    ax -= 0x38000000u;                                      /* rebias 127 -> 15 */
    ax += 0xfffu + ((ax >> 13) & 1u);                       /* ties to even */
    return (uint16_t)(sign | (ax >> 13));
  }
  if (ax <= 0x33000000u) return (uint16_t)sign; /* <= 2^-25: the tie at 2^-25 goes to even 0 */
  /* subnormal half: units of 2^-24 */
  uint32_t e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u, s = 126u - e;
  uint32_t q = m >> s, rem = m & ((1u << s) - 1u), half = 1u << (s - 1u);
  if (rem > half || (rem == half && (q & 1u))) q++;
  return (uint16_t)(sign | q);
}

float gr__bf16_to_f32(uint16_t h) { return u2f((uint32_t)h << 16); }

uint16_t gr__f32_to_bf16(float f) {
  uint32_t x = f2u(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u); /* quiet NaN */
  x += 0x7fffu + ((x >> 16) & 1u); /* ties to even; overflow carries into Inf */
  return (uint16_t)(x >> 16);
}

/* The semantics every backend and algorithm shares (coll.h, "Reductions"):
 * - integers wrap (two's complement): signed arithmetic is done on the unsigned type of the same
 *   width, where C defines it, and converted back;
 * - MIN/MAX of floating types propagate NaN as the canonical quiet NaN (so the result has the same
 *   bits whatever the order of the operands), and order -0 below +0 (min(-0, +0) = -0, max = +0),
 *   so that min and max are commutative bit for bit, as IEEE 754-2019 minimum/maximum are. */
/* Each element-wise loop is generated twice: for operands that do not overlap (every caller's
 * case) in blocks of GR_LANES_ elements through restrict pointers, which gcc vectorises at -O2 (its
 * "very cheap" cost model takes only loops whose trip count is a multiple of the vector width and
 * that need no run-time alias check; the plain loop stayed scalar there, and -O2 is the default
 * RelWithDebInfo build), and as the plain loop for overlapping operands. Both compute the same
 * expression per element in the same order, so the result has the same bits either way: vector
 * add/mul/compare are the scalar IEEE / two's-complement operations lane by lane. */
#define GR_LANES_ 16
#define GR_EW_(NAME, T, EXPR)                                                                      \
  static void NAME##_apart(T *restrict o, const T *restrict x, size_t n) {                         \
    size_t i = 0;                                                                                  \
    for (; i + GR_LANES_ <= n; i += GR_LANES_)                                                     \
      for (size_t j = 0; j < GR_LANES_; j++) {                                                     \
        T a = o[i + j], b = x[i + j];                                                              \
        o[i + j] = (EXPR);                                                                         \
      }                                                                                            \
    for (; i < n; i++) {                                                                           \
      T a = o[i], b = x[i];                                                                        \
      o[i] = (EXPR);                                                                               \
    }                                                                                              \
  }                                                                                                \
  static void NAME(void *inout, const void *in, size_t n) {                                        \
    T *o = inout;                                                                                  \
    const T *x = in;                                                                               \
    if (apart(o, x, n * sizeof(T))) {                                                              \
      NAME##_apart(o, x, n);                                                                       \
      return;                                                                                      \
    }                                                                                              \
    for (size_t i = 0; i < n; i++) {                                                               \
      T a = o[i], b = x[i];                                                                        \
      o[i] = (EXPR);                                                                               \
    }                                                                                              \
  }

static int apart(const void *a, const void *b, size_t bytes) {
  uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
  return x + bytes <= y || y + bytes <= x;
}

#define GR_INT_FNS_(S, T, U)                                                                       \
  GR_EW_(sum_##S, T, (T)(U)((U)a + (U)b))                                                          \
  GR_EW_(prod_##S, T, (T)(U)((U)a * (U)b))                                                         \
  GR_EW_(min_##S, T, b < a ? b : a)                                                                \
  GR_EW_(max_##S, T, b > a ? b : a)

/* unsigned int: 8-bit operands promote to int, whose product cannot overflow; 32 and 64 bits
 * multiply as unsigned. */
#define GR_U8_ unsigned int

GR_INT_FNS_(i8, int8_t, GR_U8_)
GR_INT_FNS_(u8, uint8_t, GR_U8_)
GR_INT_FNS_(i32, int32_t, uint32_t)
GR_INT_FNS_(u32, uint32_t, uint32_t)
GR_INT_FNS_(i64, int64_t, uint64_t)
GR_INT_FNS_(u64, uint64_t, uint64_t)

static double canonical_nan_d(void) {
  uint64_t u = 0x7ff8000000000000ull;
  double d;
  memcpy(&d, &u, 8);
  return d;
}

static float min_f(float a, float b) {
  if (a != a || b != b) return u2f(0x7fc00000u);
  if (a == b) return signbit(a) ? a : b;
  return b < a ? b : a;
}
static float max_f(float a, float b) {
  if (a != a || b != b) return u2f(0x7fc00000u);
  if (a == b) return signbit(a) ? b : a;
  return b > a ? b : a;
}
static double min_d(double a, double b) {
  if (a != a || b != b) return canonical_nan_d();
  if (a == b) return signbit(a) ? a : b;
  return b < a ? b : a;
}
static double max_d(double a, double b) {
  if (a != a || b != b) return canonical_nan_d();
  if (a == b) return signbit(a) ? b : a;
  return b > a ? b : a;
}

#define GR_FLOAT_FNS_(S, T, MIN, MAX)                                                              \
  GR_EW_(sum_##S, T, a + b)                                                                        \
  GR_EW_(prod_##S, T, a *b)                                                                        \
  GR_EW_(min_##S, T, MIN(a, b))                                                                    \
  GR_EW_(max_##S, T, MAX(a, b))

GR_FLOAT_FNS_(f32, float, min_f, max_f)
GR_FLOAT_FNS_(f64, double, min_d, max_d)

typedef void (*ew_fn)(void *, const void *, size_t);
/* by op (SUM, PROD, MIN, MAX, AVG = SUM) */
#define GR_FNS_ROW_(S)                                                                             \
  { sum_##S, prod_##S, min_##S, max_##S, sum_##S }

static float apply_f(gr_op op, float a, float b) {
  switch (op) {
  case GR_PROD:
    return a * b;
  case GR_MIN:
    return min_f(a, b);
  case GR_MAX:
    return max_f(a, b);
  default:
    return a + b;
  }
}

void gr__reduce_host(gr_dtype t, gr_op op, void *inout, const void *in, size_t n) {
  switch (t) {
  case GR_INT8:
  case GR_UINT8:
  case GR_INT32:
  case GR_UINT32:
  case GR_INT64:
  case GR_UINT64:
  case GR_FLOAT32:
  case GR_FLOAT64: {
    static const ew_fn fns[][GR__NOPS] = {
        [GR_INT8] = GR_FNS_ROW_(i8),     [GR_UINT8] = GR_FNS_ROW_(u8),
        [GR_INT32] = GR_FNS_ROW_(i32),   [GR_UINT32] = GR_FNS_ROW_(u32),
        [GR_INT64] = GR_FNS_ROW_(i64),   [GR_UINT64] = GR_FNS_ROW_(u64),
        [GR_FLOAT32] = GR_FNS_ROW_(f32), [GR_FLOAT64] = GR_FNS_ROW_(f64)};
    if (gr__op_valid((int)op)) fns[t][op](inout, in, n);
    break;
  }
  case GR_FLOAT16: {
    uint16_t *o = inout;
    const uint16_t *x = in;
    for (size_t i = 0; i < n; i++)
      o[i] = gr__f32_to_f16(apply_f(op, gr__f16_to_f32(o[i]), gr__f16_to_f32(x[i])));
    break;
  }
  case GR_BFLOAT16: {
    uint16_t *o = inout;
    const uint16_t *x = in;
    for (size_t i = 0; i < n; i++)
      o[i] = gr__f32_to_bf16(apply_f(op, gr__bf16_to_f32(o[i]), gr__bf16_to_f32(x[i])));
    break;
  }
  }
}

void gr__reduce_one(gr_dtype t, gr_op op, void *buf, size_t n) {
  /* x op x is x for every op but a floating MIN/MAX of a NaN, which the kernel makes canonical */
  if (gr__dtype_is_float(t) && (op == GR_MIN || op == GR_MAX)) gr__reduce_host(t, op, buf, buf, n);
}

void gr__avg_divide(gr_dtype t, void *buf, size_t n, int nranks) {
  switch (t) {
  case GR_FLOAT32: {
    float *b = buf;
    for (size_t i = 0; i < n; i++)
      b[i] /= (float)nranks;
    break;
  }
  case GR_FLOAT64: {
    double *b = buf;
    for (size_t i = 0; i < n; i++)
      b[i] /= (double)nranks;
    break;
  }
  case GR_FLOAT16: {
    uint16_t *b = buf;
    for (size_t i = 0; i < n; i++)
      b[i] = gr__f32_to_f16(gr__f16_to_f32(b[i]) / (float)nranks);
    break;
  }
  case GR_BFLOAT16: {
    uint16_t *b = buf;
    for (size_t i = 0; i < n; i++)
      b[i] = gr__f32_to_bf16(gr__bf16_to_f32(b[i]) / (float)nranks);
    break;
  }
  default:
    break; /* integer AVG is rejected at the front end */
  }
}
