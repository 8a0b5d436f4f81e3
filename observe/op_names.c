/* The names of what a flight record can be (gr_op_names.h). */
#include "gr_op_names.h"

#include "gr_flight_format.h"

static const char *const kind_names[GR__NKINDS] = {"allreduce",   "broadcast",      "reduce",
                                                   "allgather",   "reduce_scatter", "alltoall",
                                                   GR_FL_OP_SEND, GR_FL_OP_RECV,    "barrier"};

#define NAME(name, cls) "MPI_" #name,
static const char *const mpi_names[GR__MPI_END - GR__MPI_FIRST] = {GR__MPI_CALLS(NAME)};
#undef NAME
#define CLASS(name, cls) GR__OPC_##cls,
const unsigned char gr__mpi_kind_class[GR__MPI_END - GR__MPI_FIRST] = {GR__MPI_CALLS(CLASS)};
#undef CLASS

const char *gr__kind_name(int kind) {
  if (kind >= 0 && kind < GR__NKINDS) return kind_names[kind];
  if (kind >= GR__MPI_FIRST && kind < GR__MPI_END) return mpi_names[kind - GR__MPI_FIRST];
  return "?";
}

static const char *const dnames[] = {"int8",   "uint8",   "int32",    "uint32",  "int64",
                                     "uint64", "float16", "bfloat16", "float32", "float64"};

const char *gr__dtype_name(gr_dtype t) {
  return (unsigned)t < sizeof dnames / sizeof dnames[0] ? dnames[t] : "?";
}
