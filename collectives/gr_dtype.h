/* Internal: the element types and reduction operators of coll.h, host-side.
 * Sizes and names, IEEE half (fp16) and bfloat16 conversions (round to nearest, ties to even; NaN
 * stays NaN, quieted), and the host reduction kernels behind the user-defined MPI ops (gr_op_map.h)
 * and the AVG division. Shared by both backends and by the NCCL test double. */
#ifndef GR_DTYPE_H
#define GR_DTYPE_H

#include <gpurun/coll.h>
#include "gr_op_names.h"
#include <stddef.h>
#include <stdint.h>

#define GR__NDTYPES 10
#define GR__NOPS 5

/* Bytes per element; 0 for a value outside the enum. Inline: every call asks it several times. */
extern const size_t gr__dtype_sizes[GR__NDTYPES];
static inline size_t gr__dtype_size(gr_dtype t) {
  return (unsigned)t < GR__NDTYPES ? gr__dtype_sizes[t] : 0;
}
/* gr__dtype_name: observe/gr_op_names.h (the flight recorder names them too). */
/* "sum", "prod", "min", "max", "avg"; "?" outside the enum. */
const char *gr__op_name(gr_op op);
static inline int gr__dtype_valid(int t) { return t >= 0 && t < GR__NDTYPES; }
static inline int gr__op_valid(int op) { return op >= 0 && op < GR__NOPS; }
static inline int gr__dtype_is_float(gr_dtype t) { return t >= GR_FLOAT16 && t <= GR_FLOAT64; }
/* Whether op is defined on t (AVG needs a floating type: an integer mean has no agreed rounding). */
static inline int gr__op_defined(gr_dtype t, gr_op op) {
  return gr__dtype_valid((int)t) && gr__op_valid((int)op) &&
         (op != GR_AVG || gr__dtype_is_float(t));
}

float gr__f16_to_f32(uint16_t h);
uint16_t gr__f32_to_f16(float f);
float gr__bf16_to_f32(uint16_t h);
uint16_t gr__f32_to_bf16(float f);

/* inout[i] = inout[i] (op) in[i] for n elements; AVG adds (the division comes once, at the end).
 * fp16/bf16 are computed in float and rounded once per step. */
void gr__reduce_host(gr_dtype t, gr_op op, void *inout, const void *in, size_t n);
/* A reduction over one operand (a communicator of one rank): buf as gr__reduce_host leaves a
 * result, so that a one-rank path follows the same rules as every other (a floating MIN/MAX of a
 * NaN gives the canonical quiet NaN; everything else stays as it is). */
void gr__reduce_one(gr_dtype t, gr_op op, void *buf, size_t n);
/* buf[i] /= nranks, rounded to the type (the second half of AVG). */
void gr__avg_divide(gr_dtype t, void *buf, size_t n, int nranks);

#endif
