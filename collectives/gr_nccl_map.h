/* Internal: coll.h's element types and operators in NCCL's terms, for backend_nccl.c and
 * nccl_share.c. Header-only, so that it compiles against whichever nccl.h the including file sees
 * (NVIDIA's, or the NCCL test double's in tests/mpi/collectives/nccl_double/). */
#ifndef GR_NCCL_MAP_H
#define GR_NCCL_MAP_H

#include "gr_dtype.h"

#include <gpurun/coll.h>
#include <nccl.h>

/* t must be valid (the front end checked it). */
static inline ncclDataType_t gr__nccl_type(gr_dtype t) {
  static const ncclDataType_t m[GR__NDTYPES] = {ncclInt8,    ncclUint8,  ncclInt32,   ncclUint32,
                                                ncclInt64,   ncclUint64, ncclFloat16, ncclBfloat16,
                                                ncclFloat32, ncclFloat64};
  return m[t];
}

/* GR_AVG becomes avg, the caller's choice: ncclAvg where NCCL itself averages over its ranks,
 * ncclSum where the caller divides once at the end (NCCL among the leaders only does not see
 * every rank). */
static inline ncclRedOp_t gr__nccl_op(gr_op op, ncclRedOp_t avg) {
  switch (op) {
  case GR_PROD:
    return ncclProd;
  case GR_MIN:
    return ncclMin;
  case GR_MAX:
    return ncclMax;
  case GR_AVG:
    return avg;
  default:
    return ncclSum;
  }
}

#endif
