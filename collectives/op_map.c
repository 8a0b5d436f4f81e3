/* The (gr_dtype, gr_op) -> (MPI_Datatype, MPI_Op) map of the collectives (see gr_op_map.h). */
#include "gr_op_map.h"

#include "gr_front.h"
#include "gr_mpi_error.h"

#define GR_HALF_OP_(name, dt, op)                                                                  \
  static void name(void *in, void *inout, int *len, MPI_Datatype *t) {                             \
    (void)t;                                                                                       \
    gr__reduce_host(dt, op, inout, in, (size_t)*len);                                              \
  }
GR_HALF_OP_(h_sum, GR_FLOAT16, GR_SUM)
GR_HALF_OP_(h_prod, GR_FLOAT16, GR_PROD)
GR_HALF_OP_(h_min, GR_FLOAT16, GR_MIN)
GR_HALF_OP_(h_max, GR_FLOAT16, GR_MAX)
GR_HALF_OP_(b_sum, GR_BFLOAT16, GR_SUM)
GR_HALF_OP_(b_prod, GR_BFLOAT16, GR_PROD)
GR_HALF_OP_(b_min, GR_BFLOAT16, GR_MIN)
GR_HALF_OP_(b_max, GR_BFLOAT16, GR_MAX)

/* gpurun's own kernels behind an MPI_Op for the native types, for the (type, op) pairs where MPI's
 * built-in op answers differently from gpurun's definition (gr_dtype.h): Open MPI 4.1's op/avx
 * saturates 8-bit SUM (100 + 100 = 127 instead of -56), and its float MIN/MAX drop a NaN depending
 * on the operand order. One op per gr_op serves every native type: the datatype says which. */
static gr_dtype native_dtype(MPI_Datatype t) {
  if (t == MPI_INT8_T) return GR_INT8;
  if (t == MPI_UINT8_T) return GR_UINT8;
  if (t == MPI_INT32_T) return GR_INT32;
  if (t == MPI_UINT32_T) return GR_UINT32;
  if (t == MPI_INT64_T) return GR_INT64;
  if (t == MPI_UINT64_T) return GR_UINT64;
  if (t == MPI_FLOAT) return GR_FLOAT32;
  return GR_FLOAT64; /* only the types gr__mpi_type() hands out with these ops reach them */
}
#define GR_OWN_OP_(name, op)                                                                       \
  static void name(void *in, void *inout, int *len, MPI_Datatype *t) {                             \
    gr__reduce_host(native_dtype(*t), op, inout, in, (size_t)*len);                                \
  }
GR_OWN_OP_(own_sum, GR_SUM)
GR_OWN_OP_(own_prod, GR_PROD)
GR_OWN_OP_(own_min, GR_MIN)
GR_OWN_OP_(own_max, GR_MAX)

enum { FAM_HALF, FAM_BF16, FAM_OWN };
static MPI_User_function *const fns[GR__OP_MAP_FAMILIES][4] = {
    [FAM_HALF] = {h_sum, h_prod, h_min, h_max},
    [FAM_BF16] = {b_sum, b_prod, b_min, b_max},
    [FAM_OWN] = {own_sum, own_prod, own_min, own_max},
};
static const char *const fam_names[GR__OP_MAP_FAMILIES] = {"fp16", "bf16", "native-type"};

/* Whether MPI's built-in op gives gpurun's answer for (t, op): integer SUM/PROD must wrap (8-bit
 * ones do not under op/avx; PROD goes along, as it shares the 8-bit code paths), float MIN/MAX
 * must propagate NaN and order -0 below +0, and unsigned MIN/MAX must compare unsigned, which
 * MPICH 4.0's built-in ops do not (they take every unsigned type as signed: max(135, 0) = 0 in 8
 * bits; pmodels/mpich#6083, #7507), nor some Open MPI 4.1 releases for unsigned long
 * (open-mpi/ompi#10525): gpurun's own kernel serves them on every MPI. */
static int builtin_ok(gr_dtype t, gr_op op) {
  int minmax = op == GR_MIN || op == GR_MAX;
  if (t == GR_INT8) return minmax;
  if (t == GR_UINT8 || t == GR_UINT32 || t == GR_UINT64) return 0;
  if (t == GR_FLOAT32 || t == GR_FLOAT64) return !minmax;
  return 1;
}

void gr__op_map_init(gr__op_map *m) {
  for (int f = 0; f < GR__OP_MAP_FAMILIES; f++)
    for (int o = 0; o < 4; o++)
      m->op[f][o] = MPI_OP_NULL;
}

gr_status gr__op_map_create(gr_comm *c, gr__op_map *m) {
  gr__op_map_init(m);
  for (int f = 0; f < GR__OP_MAP_FAMILIES; f++)
    for (int o = 0; o < 4; o++) {
      int rc = MPI_Op_create(fns[f][o], 1, &m->op[f][o]);
      if (rc == MPI_SUCCESS) continue;
      m->op[f][o] = MPI_OP_NULL;
      char s[MPI_MAX_ERROR_STRING];
      gr__mpi_strerror(rc, s); /* before the frees below, which may change MPI's state */
      for (int g = 0; g < GR__OP_MAP_FAMILIES; g++)
        for (int p = 0; p < 4; p++)
          if (m->op[g][p] != MPI_OP_NULL && MPI_Op_free(&m->op[g][p]) != MPI_SUCCESS)
            m->op[g][p] = MPI_OP_NULL; /* left to MPI_Finalize: this sentence is the one said */
      return gr__comm_err(c, GR_ERR_MPI, "MPI_Op_create for the %s %s failed on rank %d: %s",
                          fam_names[f], gr__op_name((gr_op)o), c->rank, s);
    }
  return GR_OK;
}

gr_status gr__op_map_free(gr_comm *c, gr__op_map *m) {
  gr_status st = GR_OK;
  if (gr__mpi_gone()) { /* MPI_Finalize released them; no MPI call may be made any more */
    gr__op_map_init(m);
    return GR_OK;
  }
  /* A request given up on (comm_wait.c) may still run with them: kept until it completed; one
   * that cannot be kept (out of memory) is left unfreed, never freed under the request. */
  int lost = gr__mpi_lost(c);
  for (int f = 0; f < GR__OP_MAP_FAMILIES; f++)
    for (int o = 0; o < 4; o++) {
      MPI_Op *op = &m->op[f][o];
      if (*op == MPI_OP_NULL) continue;
      if (lost) {
        if (!gr__mpi_keep_op(c, op)) *op = MPI_OP_NULL;
        continue;
      }
      int rc = MPI_Op_free(op);
      if (rc != MPI_SUCCESS && st == GR_OK) {
        char s[MPI_MAX_ERROR_STRING];
        st = gr__comm_err(c, GR_ERR_MPI, "MPI_Op_free for the %s %s failed on rank %d: %s",
                          fam_names[f], gr__op_name((gr_op)o), c->rank, gr__mpi_strerror(rc, s));
      }
      *op = MPI_OP_NULL; /* freed, or MPI refused: either way not ours to free again */
    }
  return st;
}

MPI_Datatype gr__mpi_type(gr_dtype t) {
  switch (t) {
  case GR_INT8:
    return MPI_INT8_T;
  case GR_UINT8:
    return MPI_UINT8_T;
  case GR_INT32:
    return MPI_INT32_T;
  case GR_UINT32:
    return MPI_UINT32_T;
  case GR_INT64:
    return MPI_INT64_T;
  case GR_UINT64:
    return MPI_UINT64_T;
  case GR_FLOAT32:
    return MPI_FLOAT;
  case GR_FLOAT64:
    return MPI_DOUBLE;
  case GR_FLOAT16:
  case GR_BFLOAT16:
    return MPI_UINT16_T; /* only the user-defined ops touch the bits */
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op gr__op_map_get(const gr__op_map *m, gr_dtype t, gr_op op) {
  if (!gr__op_defined(t, op)) return MPI_OP_NULL;
  int i = op == GR_AVG ? GR_SUM : (int)op;
  if (t == GR_FLOAT16) return m->op[FAM_HALF][i];
  if (t == GR_BFLOAT16) return m->op[FAM_BF16][i];
  if (!builtin_ok(t, (gr_op)i)) return m->op[FAM_OWN][i];
  switch (i) {
  case GR_PROD:
    return MPI_PROD;
  case GR_MIN:
    return MPI_MIN;
  case GR_MAX:
    return MPI_MAX;
  default:
    return MPI_SUM;
  }
}
