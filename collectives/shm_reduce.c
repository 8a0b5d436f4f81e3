/* The shared-memory path's reduction kernel: n inputs into one output, in rank order, a block at a
 * time through a small buffer that stays in L1 (so the output may be one of the inputs, and the
 * result can go to two places at the cost of one read). Semantics as gr_dtype.h states for every
 * path: NaN wins in MIN/MAX, integer SUM/PROD wrap, fp16/bf16 round after every step. */
#include "gr_dtype.h"
#include "gr_shm.h"

#include <string.h>

#define BLOCK_BYTES 4096

/* Integers: computed in the unsigned type of the same width, where overflow is defined to wrap;
 * converting back is two's complement on every compiler we build with. */
#define INT_KERNEL_(T, U)                                                                    \
  static void red_##T(gr_op op, T *o, const T *a, const T *b, size_t n) {                    \
    switch (op) {                                                                            \
    case GR_PROD:                                                                            \
      for (size_t i = 0; i < n; i++) o[i] = (T)(U)((U)a[i] * (U)b[i]);                       \
      break;                                                                                 \
    case GR_MIN:                                                                             \
      for (size_t i = 0; i < n; i++) o[i] = b[i] < a[i] ? b[i] : a[i];                       \
      break;                                                                                 \
    case GR_MAX:                                                                             \
      for (size_t i = 0; i < n; i++) o[i] = b[i] > a[i] ? b[i] : a[i];                       \
      break;                                                                                 \
    default:                                                                                 \
      for (size_t i = 0; i < n; i++) o[i] = (T)(U)((U)a[i] + (U)b[i]);                       \
      break;                                                                                 \
    }                                                                                        \
  }
INT_KERNEL_(int8_t, uint8_t)
INT_KERNEL_(uint8_t, uint8_t)
INT_KERNEL_(int32_t, uint32_t)
INT_KERNEL_(uint32_t, uint32_t)
INT_KERNEL_(int64_t, uint64_t)
INT_KERNEL_(uint64_t, uint64_t)

/* Floats: a NaN operand wins MIN and MAX (the first one when both are); x != x is NaN. */
#define FLT_KERNEL_(T)                                                                       \
  static void red_##T(gr_op op, T *o, const T *a, const T *b, size_t n) {                    \
    switch (op) {                                                                            \
    case GR_PROD:                                                                            \
      for (size_t i = 0; i < n; i++) o[i] = a[i] * b[i];                                     \
      break;                                                                                 \
    case GR_MIN:                                                                             \
      for (size_t i = 0; i < n; i++)                                                         \
        o[i] = a[i] != a[i] ? a[i] : b[i] != b[i] ? b[i] : b[i] < a[i] ? b[i] : a[i];         \
      break;                                                                                 \
    case GR_MAX:                                                                             \
      for (size_t i = 0; i < n; i++)                                                         \
        o[i] = a[i] != a[i] ? a[i] : b[i] != b[i] ? b[i] : b[i] > a[i] ? b[i] : a[i];         \
      break;                                                                                 \
    default:                                                                                 \
      for (size_t i = 0; i < n; i++) o[i] = a[i] + b[i];                                     \
      break;                                                                                 \
    }                                                                                        \
  }
FLT_KERNEL_(float)
FLT_KERNEL_(double)

static float apply_f(gr_op op, float a, float b) {
  switch (op) {
  case GR_PROD: return a * b;
  case GR_MIN: return a != a ? a : b != b ? b : b < a ? b : a;
  case GR_MAX: return a != a ? a : b != b ? b : b > a ? b : a;
  default: return a + b;
  }
}

static void red_f16(gr_op op, uint16_t *o, const uint16_t *a, const uint16_t *b, size_t n) {
  for (size_t i = 0; i < n; i++)
    o[i] = gr__f32_to_f16(apply_f(op, gr__f16_to_f32(a[i]), gr__f16_to_f32(b[i])));
}

static void red_bf16(gr_op op, uint16_t *o, const uint16_t *a, const uint16_t *b, size_t n) {
  for (size_t i = 0; i < n; i++)
    o[i] = gr__f32_to_bf16(apply_f(op, gr__bf16_to_f32(a[i]), gr__bf16_to_f32(b[i])));
}

/* o = a (op) b for n elements; o may be a. */
static void red2(gr_dtype t, gr_op op, void *o, const void *a, const void *b, size_t n) {
  switch (t) {
  case GR_INT8: red_int8_t(op, o, a, b, n); break;
  case GR_UINT8: red_uint8_t(op, o, a, b, n); break;
  case GR_INT32: red_int32_t(op, o, a, b, n); break;
  case GR_UINT32: red_uint32_t(op, o, a, b, n); break;
  case GR_INT64: red_int64_t(op, o, a, b, n); break;
  case GR_UINT64: red_uint64_t(op, o, a, b, n); break;
  case GR_FLOAT16: red_f16(op, o, a, b, n); break;
  case GR_BFLOAT16: red_bf16(op, o, a, b, n); break;
  case GR_FLOAT32: red_float(op, o, a, b, n); break;
  case GR_FLOAT64: red_double(op, o, a, b, n); break;
  }
}

void gr__shm_reduce(gr_dtype t, gr_op op, const void *const *in, int n, void *out, void *out2,
                    size_t count) {
  size_t es = gr__dtype_size(t);
  if (n <= 0 || es == 0) return;
  _Alignas(64) unsigned char tmp[BLOCK_BYTES];
  size_t per = BLOCK_BYTES / es;
  for (size_t at = 0; at < count; at += per) {
    size_t m = count - at < per ? count - at : per, off = at * es;
    if (n == 1) memcpy(tmp, (const char *)in[0] + off, m * es);
    else red2(t, op, tmp, (const char *)in[0] + off, (const char *)in[1] + off, m);
    for (int i = 2; i < n; i++) red2(t, op, tmp, tmp, (const char *)in[i] + off, m);
    memcpy((char *)out + off, tmp, m * es);
    if (out2) memcpy((char *)out2 + off, tmp, m * es);
  }
}
