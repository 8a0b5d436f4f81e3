/* Test-side element codecs and input values for the exact-by-construction collective tests.
 * Written independently of collectives/dtype.c: values are encoded only when exactly
 * representable, decoded with ldexp, and expected results are rounded to the type's grid with
 * nearbyint (round half to even), so nothing here reuses the library's conversion code. */
#ifndef EXACT_VALUES_H
#define EXACT_VALUES_H

#include <gpurun/coll.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

static inline size_t ev_size(gr_dtype t) {
  static const size_t s[] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8};
  return s[t];
}
static inline const char *ev_dtype_name(gr_dtype t) {
  static const char *n[] = {"int8",   "uint8",   "int32",    "uint32",  "int64",
                            "uint64", "float16", "bfloat16", "float32", "float64"};
  return n[t];
}
static inline const char *ev_op_name(gr_op o) {
  static const char *n[] = {"sum", "prod", "min", "max", "avg"};
  return n[o];
}
static inline int ev_is_float(gr_dtype t) { return t >= GR_FLOAT16; }
static inline int ev_is_unsigned(gr_dtype t) {
  return t == GR_UINT8 || t == GR_UINT32 || t == GR_UINT64;
}

/* Exactly representable x (checked by the caller's choice of values) to 16-bit float bits with
 * the given exponent bias and mantissa width. */
static inline uint16_t ev_enc16(double x, int bias, int mbits) {
  if (x == 0) return 0;
  uint16_t sign = x < 0 ? 0x8000 : 0;
  int e;
  double f = frexp(fabs(x), &e); /* |x| = f * 2^e, f in [0.5, 1) */
  uint16_t field = (uint16_t)(e - 1 + bias);
  uint16_t mant = (uint16_t)((f * 2 - 1) * (1 << mbits));
  return (uint16_t)(sign | (field << mbits) | mant);
}
static inline double ev_dec16(uint16_t h, int bias, int mbits) {
  int ebits = 15 - mbits, emax = (1 << ebits) - 1;
  int e = (h >> mbits) & emax, m = h & ((1 << mbits) - 1);
  double s = (h & 0x8000) ? -1 : 1;
  if (e == emax) return m ? NAN : s * INFINITY;
  if (e == 0) return s * ldexp(m, 1 - bias - mbits);
  return s * ldexp(m + (1 << mbits), e - bias - mbits);
}

static inline void ev_set(gr_dtype t, void *buf, size_t i, double v) {
  switch (t) {
  case GR_INT8:
    ((int8_t *)buf)[i] = (int8_t)v;
    break;
  case GR_UINT8:
    ((uint8_t *)buf)[i] = (uint8_t)v;
    break;
  case GR_INT32:
    ((int32_t *)buf)[i] = (int32_t)v;
    break;
  case GR_UINT32:
    ((uint32_t *)buf)[i] = (uint32_t)v;
    break;
  case GR_INT64:
    ((int64_t *)buf)[i] = (int64_t)v;
    break;
  case GR_UINT64:
    ((uint64_t *)buf)[i] = (uint64_t)v;
    break;
  case GR_FLOAT16:
    ((uint16_t *)buf)[i] = ev_enc16(v, 15, 10);
    break;
  case GR_BFLOAT16:
    ((uint16_t *)buf)[i] = ev_enc16(v, 127, 7);
    break;
  case GR_FLOAT32:
    ((float *)buf)[i] = (float)v;
    break;
  case GR_FLOAT64:
    ((double *)buf)[i] = v;
    break;
  }
}
static inline double ev_get(gr_dtype t, const void *buf, size_t i) {
  switch (t) {
  case GR_INT8:
    return ((const int8_t *)buf)[i];
  case GR_UINT8:
    return ((const uint8_t *)buf)[i];
  case GR_INT32:
    return ((const int32_t *)buf)[i];
  case GR_UINT32:
    return ((const uint32_t *)buf)[i];
  case GR_INT64:
    return (double)((const int64_t *)buf)[i];
  case GR_UINT64:
    return (double)((const uint64_t *)buf)[i];
  case GR_FLOAT16:
    return ev_dec16(((const uint16_t *)buf)[i], 15, 10);
  case GR_BFLOAT16:
    return ev_dec16(((const uint16_t *)buf)[i], 127, 7);
  case GR_FLOAT32:
    return ((const float *)buf)[i];
  case GR_FLOAT64:
    return ((const double *)buf)[i];
  }
  return NAN;
}

/* Round x to the nearest value of type t (ties to even), for the AVG expectations. */
static inline double ev_round(gr_dtype t, double x) {
  if (x == 0 || !ev_is_float(t)) return x;
  int mbits = t == GR_FLOAT16 ? 10 : t == GR_BFLOAT16 ? 7 : t == GR_FLOAT32 ? 23 : 52;
  int emin = t == GR_FLOAT16 ? -14 : t == GR_BFLOAT16 ? -126 : t == GR_FLOAT32 ? -126 : -1022;
  int e;
  frexp(fabs(x), &e);
  e -= 1; /* |x| in [2^e, 2^(e+1)) */
  if (e < emin) e = emin;
  double q = ldexp(1.0, e - mbits);
  return nearbyint(x / q) * q;
}

/* Inputs: small integers chosen per operation so that every reduction over up to 8 ranks is exact
 * in every type (int8 and bf16 included) whatever the order. */
static inline double ev_input(gr_dtype t, gr_op op, int r, size_t i) {
  int u = ev_is_unsigned(t);
  switch (op) {
  case GR_PROD: {
    double v = ((size_t)r + i) % 4 == 0 ? 2 : 1; /* at most two 2s among 8 ranks */
    if (!u && ((size_t)r + 2 * i) % 3 == 1) v = -v;
    return v;
  }
  case GR_MIN:
  case GR_MAX:
    return (double)(((size_t)r * 5 + i * 3) % 11) - (u ? 0 : 5);
  default: /* SUM, AVG, and the data of the non-reducing calls */
    return (double)(((size_t)(r + 1) * 3 + i) % 7) - (u ? 0 : 3);
  }
}

static inline double ev_combine(gr_op op, double a, double b) {
  switch (op) {
  case GR_PROD:
    return a * b;
  case GR_MIN:
    return b < a ? b : a;
  case GR_MAX:
    return b > a ? b : a;
  default:
    return a + b;
  }
}

/* The expected reduction of element i over ranks 0..P-1 (inputs ev_input(t, op, r, i)). */
static inline double ev_reduced(gr_dtype t, gr_op op, int P, size_t i) {
  double acc = ev_input(t, op, 0, i);
  for (int r = 1; r < P; r++)
    acc = ev_combine(op, acc, ev_input(t, op, r, i));
  if (op == GR_AVG) acc = ev_round(t, acc / P);
  return acc;
}

#endif
