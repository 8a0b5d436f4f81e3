/* fp16/bf16 conversions against known bit patterns (IEEE 754 binary16; bfloat16 = the top half of
 * binary32), round to nearest with ties to even, NaN/Inf/subnormals; and the host reduction. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <math.h>

#include <cmocka.h>

#include "gr_dtype.h"

static float bits_f(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static uint32_t f_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

static void f16_known(void **state) {
  (void)state;
  struct {
    float f;
    uint16_t h;
  } c[] = {
      {0.0f, 0x0000},
      {-0.0f, 0x8000},
      {1.0f, 0x3c00},
      {-2.0f, 0xc000},
      {0.5f, 0x3800},
      {65504.0f, 0x7bff}, /* largest finite */
      {65519.0f, 0x7bff}, /* below the midpoint to 65536 */
      {65520.0f, 0x7c00}, /* the midpoint: ties to even = Inf */
      {1e9f, 0x7c00},
      {-1e9f, 0xfc00},
      {INFINITY, 0x7c00},
      {-INFINITY, 0xfc00},
      {0x1p-14f, 0x0400},        /* smallest normal */
      {0x1p-24f, 0x0001},        /* smallest subnormal */
      {0x1p-25f, 0x0000},        /* tie between 0 and 2^-24: even is 0 */
      {0x1.000002p-25f, 0x0001}, /* just above the tie */
      {0x3p-25f, 0x0002},        /* tie between 1 and 2 units: even is 2 */
      {0x5p-25f, 0x0002},        /* tie between 2 and 3 units: even is 2 */
      {0x3ffp-24f, 0x03ff},      /* largest subnormal */
      {0x1p-26f, 0x0000},
      {1.0f + 0x1p-11f, 0x3c00}, /* tie: mantissa 0 is even */
      {1.0f + 0x3p-11f, 0x3c02}, /* tie: rounds up to even 2 */
      {0x1.002004p+0f, 0x3c01},  /* 1 + 2^-11 + 2^-22: just above the tie */
      {2049.0f, 0x6800},         /* 2048 + 1: tie to even 2048 */
      {2051.0f, 0x6802},         /* 2048 + 3: tie to even 2052 */
  };
  for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
    uint16_t h = gr__f32_to_f16(c[i].f);
    if (h != c[i].h)
      fail_msg("f32_to_f16(%a) = 0x%04x, expected 0x%04x", (double)c[i].f, h, c[i].h);
  }
  assert_true(gr__f16_to_f32(0x3c00) == 1.0f);
  assert_true(gr__f16_to_f32(0x0001) == 0x1p-24f);
  assert_true(gr__f16_to_f32(0x03ff) == 0x3ffp-24f);
  assert_true(gr__f16_to_f32(0x7bff) == 65504.0f);
  assert_true(isinf(gr__f16_to_f32(0xfc00)) && gr__f16_to_f32(0xfc00) < 0);
  assert_true(f_bits(gr__f16_to_f32(0x8000)) == 0x80000000u);
  /* NaN: stays NaN both ways, quiet, sign kept */
  assert_true(isnan(gr__f16_to_f32(0x7e00)) && isnan(gr__f16_to_f32(0x7c01)));
  uint16_t qn = gr__f32_to_f16(bits_f(0x7f800001u)); /* signalling NaN with low payload */
  assert_true((qn & 0x7c00) == 0x7c00 && (qn & 0x3ff) != 0);
  assert_true((gr__f32_to_f16(bits_f(0xffc00000u)) & 0xfe00) == 0xfe00);
}

static void f16_round_trip_all(void **state) {
  (void)state;
  for (uint32_t h = 0; h < 0x10000; h++) {
    float f = gr__f16_to_f32((uint16_t)h);
    uint16_t back = gr__f32_to_f16(f);
    if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) { /* NaN: stays NaN, quieted */
      if (!isnan(f) || (back & 0x7e00) != 0x7e00 || (back & 0x8000) != (h & 0x8000))
        fail_msg("NaN 0x%04x -> 0x%04x", h, back);
    } else if (back != h) {
      fail_msg("0x%04x -> %a -> 0x%04x", h, (double)f, back);
    }
  }
}

static void bf16_known(void **state) {
  (void)state;
  struct {
    uint32_t f;
    uint16_t h;
  } c[] = {
      {0x3f800000u, 0x3f80}, /* 1.0 */
      {0x3f808000u, 0x3f80}, /* 1 + 2^-8: tie, even 0x3f80 */
      {0x3f818000u, 0x3f82}, /* 1 + 3*2^-8: tie, even 0x3f82 */
      {0x3f808001u, 0x3f81}, /* just above the tie */
      {0x7f7fffffu, 0x7f80}, /* FLT_MAX rounds to Inf */
      {0x7f7f7fffu, 0x7f7f}, /* largest bf16 stays */
      {0x7f800000u, 0x7f80}, {0xff800000u, 0xff80}, {0x00010000u, 0x0001}, /* subnormal */
      {0x00008000u, 0x0000},                                               /* tie to even 0 */
      {0x00018000u, 0x0002},                                               /* tie to even 2 */
      {0x80000000u, 0x8000},
  };
  for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
    uint16_t h = gr__f32_to_bf16(bits_f(c[i].f));
    if (h != c[i].h) fail_msg("f32_to_bf16(0x%08x) = 0x%04x, expected 0x%04x", c[i].f, h, c[i].h);
  }
  assert_int_equal(gr__f32_to_bf16(bits_f(0x7f800001u)), 0x7fc0); /* sNaN quieted, not Inf */
  assert_int_equal(gr__f32_to_bf16(bits_f(0xffffffffu)), 0xffff);
  assert_true(gr__bf16_to_f32(0x3f80) == 1.0f);
  for (uint32_t h = 0; h < 0x10000; h++) {
    uint16_t back = gr__f32_to_bf16(gr__bf16_to_f32((uint16_t)h));
    int nan = (h & 0x7f80) == 0x7f80 && (h & 0x7f);
    if (nan ? (back & 0x7fc0) != 0x7fc0 : back != h) fail_msg("bf16 0x%04x -> 0x%04x", h, back);
  }
}

static void host_reduce(void **state) {
  (void)state;
  uint16_t a[3] = {gr__f32_to_f16(2048), gr__f32_to_f16(2048), gr__f32_to_f16(-1)};
  uint16_t b[3] = {gr__f32_to_f16(1), gr__f32_to_f16(3), gr__f32_to_f16(0.5f)};
  gr__reduce_host(GR_FLOAT16, GR_SUM, a, b, 3);
  assert_int_equal(a[0], 0x6800); /* 2049 -> 2048 */
  assert_int_equal(a[1], 0x6802); /* 2051 -> 2052 */
  assert_true(gr__f16_to_f32(a[2]) == -0.5f);
  int8_t x[2] = {100, -7}, y[2] = {27, 3};
  gr__reduce_host(GR_INT8, GR_MAX, x, y, 2);
  assert_int_equal(x[0], 100);
  assert_int_equal(x[1], 3);
  uint16_t v[1] = {gr__f32_to_bf16(7)};
  gr__avg_divide(GR_BFLOAT16, v, 1, 2);
  assert_true(gr__bf16_to_f32(v[0]) == 3.5f);
  assert_false(gr__op_defined(GR_INT32, GR_AVG));
  assert_true(gr__op_defined(GR_BFLOAT16, GR_AVG));
  assert_false(gr__dtype_valid(10));
  assert_int_equal(gr__dtype_size(GR_BFLOAT16), 2);
}

/* Integers wrap at every width, for SUM and PROD, in both operand orders. */
static void host_reduce_wraps(void **state) {
  (void)state;
  int8_t a[2] = {100, -128}, b[2] = {100, -1};
  gr__reduce_host(GR_INT8, GR_SUM, a, b, 2);
  assert_int_equal(a[0], -56);
  assert_int_equal(a[1], 127);
  int8_t p[1] = {100}, q[1] = {100};
  gr__reduce_host(GR_INT8, GR_PROD, p, q, 1);
  assert_int_equal(p[0], 16); /* 10000 mod 256 */
  uint8_t u[1] = {200}, w[1] = {200};
  gr__reduce_host(GR_UINT8, GR_SUM, u, w, 1);
  assert_int_equal(u[0], 144);
  int32_t i[2] = {INT32_MAX, INT32_MIN}, j[2] = {1, -1};
  gr__reduce_host(GR_INT32, GR_SUM, i, j, 2);
  assert_int_equal(i[0], INT32_MIN);
  assert_int_equal(i[1], INT32_MAX);
  int32_t m[1] = {65536}, n[1] = {65537};
  gr__reduce_host(GR_INT32, GR_PROD, m, n, 1);
  assert_int_equal(m[0], 65536); /* 2^32 + 2^16 mod 2^32 */
  int64_t k[1] = {INT64_MAX}, l[1] = {INT64_MAX};
  gr__reduce_host(GR_INT64, GR_SUM, k, l, 1);
  assert_true(k[0] == -2);
  int64_t s[1] = {INT64_MIN}, t[1] = {-1};
  gr__reduce_host(GR_INT64, GR_PROD, s, t, 1);
  assert_true(s[0] == INT64_MIN);
  uint64_t x[1] = {UINT64_MAX}, y[1] = {2};
  gr__reduce_host(GR_UINT64, GR_PROD, x, y, 1);
  assert_true(x[0] == UINT64_MAX - 1);
}

static uint64_t d_bits(double d) {
  uint64_t u;
  memcpy(&u, &d, 8);
  return u;
}

/* MIN/MAX: a NaN on either side gives the canonical quiet NaN; -0 is below +0; both orders. */
static void host_reduce_nan_zero(void **state) {
  (void)state;
  float nanp = bits_f(0x7fa00001u), nann = bits_f(0xffc00123u); /* signalling, negative payload */
  for (int op = GR_MIN; op <= GR_MAX; op++) {
    float a[4] = {nanp, 2, -0.0f, 0.0f}, b[4] = {2, nann, 0.0f, -0.0f};
    gr__reduce_host(GR_FLOAT32, (gr_op)op, a, b, 4);
    assert_int_equal(f_bits(a[0]), 0x7fc00000u);
    assert_int_equal(f_bits(a[1]), 0x7fc00000u);
    uint32_t z = op == GR_MIN ? 0x80000000u : 0u;
    assert_int_equal(f_bits(a[2]), z);
    assert_int_equal(f_bits(a[3]), z);
    double c[3] = {NAN, 1, -0.0}, d[3] = {-INFINITY, -NAN, 0.0};
    gr__reduce_host(GR_FLOAT64, (gr_op)op, c, d, 3);
    assert_true(d_bits(c[0]) == 0x7ff8000000000000ull);
    assert_true(d_bits(c[1]) == 0x7ff8000000000000ull);
    assert_true(d_bits(c[2]) == (op == GR_MIN ? 0x8000000000000000ull : 0));
    uint16_t h[3] = {0x7d01, 0x4000, 0x0000}, g[3] = {0x4000, 0xfe00, 0x8000};
    gr__reduce_host(GR_FLOAT16, (gr_op)op, h, g, 3);
    assert_int_equal(h[0], 0x7e00);
    assert_int_equal(h[1], 0x7e00);
    assert_int_equal(h[2], op == GR_MIN ? 0x8000 : 0);
    uint16_t e[2] = {0x7f81, 0x8000}, f[2] = {0x4000, 0x0000};
    gr__reduce_host(GR_BFLOAT16, (gr_op)op, e, f, 2);
    assert_int_equal(e[0], 0x7fc0);
    assert_int_equal(e[1], op == GR_MIN ? 0x8000 : 0);
  }
  /* infinities order as numbers */
  float i[2] = {INFINITY, -INFINITY}, j[2] = {-INFINITY, 5};
  gr__reduce_host(GR_FLOAT32, GR_MIN, i, j, 2);
  assert_true(i[0] == -INFINITY && i[1] == -INFINITY);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(f16_known),         cmocka_unit_test(f16_round_trip_all),
      cmocka_unit_test(bf16_known),        cmocka_unit_test(host_reduce),
      cmocka_unit_test(host_reduce_wraps), cmocka_unit_test(host_reduce_nan_zero)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
