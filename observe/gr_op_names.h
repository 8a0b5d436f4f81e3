/* Internal: what a flight record can be, and its name. A record's kind is either one of
 * libgpurun's calls (gr__kind, below GR__NKINDS) or an MPI function the MPI layer records
 * (libgpurun-mpi.so, mpitrace/: GR__MPI_FIRST and up) or an NCCL operation gpurun's NCCL profiler
 * plugin records (libgpurun-nccl-profiler.so, ncclprof/: GR__NCCL_FIRST and up, GR__NCCL_CALLS
 * below). One list of MPI functions, GR__MPI_CALLS, gives the ids, the names the flight dumps and
 * live files carry (docs/formats.md) and each one's class, which decides what a record means:
 *   COLL   a collective (blocking, or the start of a non-blocking one): numbered by cseq, the same
 *          number on every member of the communicator;
 *   SEND / RECV  point to point: peer and tag, shown as the rank's waits while unfinished;
 *   SYNC   anything else that can block: one-sided synchronisation, a probe, a wait;
 *   MAKE   communicator creation and release (collective over the parent, numbered too). */
#ifndef GR_OP_NAMES_H
#define GR_OP_NAMES_H

#include <gpurun/coll.h> /* gr_dtype */

/* libgpurun's calls (the collectives' front end) */
typedef enum {
  GR__ALLREDUCE,
  GR__BROADCAST,
  GR__REDUCE,
  GR__ALLGATHER,
  GR__REDUCE_SCATTER,
  GR__ALLTOALL,
  GR__SEND,
  GR__RECV,
  GR__BARRIER,
  GR__NKINDS
} gr__kind;

enum { GR__OPC_COLL, GR__OPC_SEND, GR__OPC_RECV, GR__OPC_SYNC, GR__OPC_MAKE };

/* X(id, class): the MPI functions the layer records, by their MPI name without "MPI_". */
/* clang-format off */
#define GR__MPI_CALLS(X)                                                                          \
  X(Barrier, COLL) X(Bcast, COLL) X(Reduce, COLL) X(Allreduce, COLL) X(Gather, COLL)              \
  X(Gatherv, COLL) X(Scatter, COLL) X(Scatterv, COLL) X(Allgather, COLL) X(Allgatherv, COLL)      \
  X(Alltoall, COLL) X(Alltoallv, COLL) X(Alltoallw, COLL) X(Reduce_scatter, COLL)                 \
  X(Reduce_scatter_block, COLL) X(Scan, COLL) X(Exscan, COLL) X(Ibarrier, COLL) X(Ibcast, COLL)   \
  X(Ireduce, COLL) X(Iallreduce, COLL) X(Igather, COLL) X(Igatherv, COLL) X(Iscatter, COLL)       \
  X(Iscatterv, COLL) X(Iallgather, COLL) X(Iallgatherv, COLL) X(Ialltoall, COLL)                  \
  X(Ialltoallv, COLL) X(Ialltoallw, COLL) X(Ireduce_scatter, COLL)                                \
  X(Ireduce_scatter_block, COLL) X(Iscan, COLL) X(Iexscan, COLL)                                  \
  X(Send, SEND) X(Ssend, SEND) X(Bsend, SEND) X(Rsend, SEND) X(Isend, SEND) X(Issend, SEND)       \
  X(Ibsend, SEND) X(Irsend, SEND)                                                                 \
  X(Recv, RECV) X(Irecv, RECV) X(Sendrecv, RECV) X(Sendrecv_replace, RECV) X(Probe, RECV)         \
  X(Mprobe, RECV) X(Mrecv, RECV)                                                                  \
  X(Wait, SYNC) X(Waitall, SYNC) X(Waitany, SYNC) X(Waitsome, SYNC) X(Win_fence, SYNC)            \
  X(Win_lock, SYNC) X(Win_unlock, SYNC) X(Win_lock_all, SYNC) X(Win_unlock_all, SYNC)             \
  X(Win_flush, SYNC) X(Win_flush_all, SYNC) X(Win_start, SYNC) X(Win_complete, SYNC)              \
  X(Win_post, SYNC) X(Win_wait, SYNC) X(Finalize, SYNC)                                           \
  X(Comm_dup, MAKE) X(Comm_dup_with_info, MAKE) X(Comm_split, MAKE) X(Comm_split_type, MAKE)      \
  X(Comm_create, MAKE) X(Comm_create_group, MAKE) X(Cart_create, MAKE) X(Cart_sub, MAKE)          \
  X(Graph_create, MAKE) X(Dist_graph_create, MAKE) X(Dist_graph_create_adjacent, MAKE)            \
  X(Intercomm_create, MAKE) X(Intercomm_merge, MAKE) X(Comm_free, MAKE) X(Comm_spawn, MAKE)       \
  X(Win_create, MAKE) X(Win_allocate, MAKE) X(Win_allocate_shared, MAKE)                          \
  X(Win_create_dynamic, MAKE) X(Comm_idup, MAKE) X(Comm_idup_with_info, MAKE)
/* clang-format on */

/* The MPI layer's kinds: GR__MPI_<Name>. */
#define GR__MPI_FIRST 64
#define GR__MPI_ENUM(name, cls) GR__MPI_##name,
typedef enum {
  GR__MPI_BEFORE = GR__MPI_FIRST - 1,
  GR__MPI_CALLS(GR__MPI_ENUM) GR__MPI_END
} gr__mpi_kind;
#undef GR__MPI_ENUM

/* NCCL's operations, as NCCL's profiler plugin interface hands them to gpurun's plugin
 * (libgpurun-nccl-profiler.so, ncclprof/): X(name, class), name as NCCL's ncclFuncToString spells
 * it; a record's op is "nccl" #name ("ncclAllReduce", ...). Kinds GR__NCCL_<name>, after the MPI
 * layer's (GR__NCCL_FIRST and up); their names and classes are inline here. */
#define GR__NCCL_CALLS(X)                                                                          \
  X(AllReduce, COLL)                                                                               \
  X(Broadcast, COLL)                                                                               \
  X(Reduce, COLL)                                                                                  \
  X(AllGather, COLL)                                                                               \
  X(ReduceScatter, COLL)                                                                           \
  X(AlltoAll, COLL)                                                                                \
  X(Gather, COLL)                                                                                  \
  X(Scatter, COLL)                                                                                 \
  X(Send, SEND)                                                                                    \
  X(Recv, RECV)
#define GR__NCCL_FIRST 224
#define GR__NCCL_ENUM(name, cls) GR__NCCL_##name,
typedef enum {
  GR__NCCL_BEFORE = GR__NCCL_FIRST - 1,
  GR__NCCL_CALLS(GR__NCCL_ENUM) GR__NCCL_END
} gr__nccl_kind;
#undef GR__NCCL_ENUM
_Static_assert((int)GR__MPI_END <= GR__NCCL_FIRST, "NCCL kinds overlap the MPI layer's");

static inline int gr__kind_is_nccl(int kind) {
  return kind >= GR__NCCL_FIRST && kind < GR__NCCL_END;
}
static inline const char *gr__nccl_kind_name(int kind) {
  switch (kind) {
#define GR__NCCL_NAME(name, cls)                                                                   \
  case GR__NCCL_##name:                                                                            \
    return "nccl" #name;
    GR__NCCL_CALLS(GR__NCCL_NAME)
#undef GR__NCCL_NAME
  default:
    return "?";
  }
}
static inline int gr__nccl_kind_class(int kind) {
  switch (kind) {
#define GR__NCCL_CLASS(name, cls)                                                                  \
  case GR__NCCL_##name:                                                                            \
    return GR__OPC_##cls;
    GR__NCCL_CALLS(GR__NCCL_CLASS)
#undef GR__NCCL_CLASS
  default:
    return GR__OPC_COLL;
  }
}

/* Each kind's class (GR__OPC_*), indexed by kind - GR__MPI_FIRST. */
extern const unsigned char gr__mpi_kind_class[GR__MPI_END - GR__MPI_FIRST];

/* "allreduce", ... for libgpurun's kinds; "MPI_Allreduce", ... for the layer's; "?" otherwise. */
const char *gr__kind_name(int kind);
/* Any kind's name: NCCL's kinds (inline, above) as well as gr__kind_name's. */
static inline const char *gr__record_name(int kind) {
  return gr__kind_is_nccl(kind) ? gr__nccl_kind_name(kind) : gr__kind_name(kind);
}
/* "float32", "bfloat16", ...; "?" outside the enum. */
const char *gr__dtype_name(gr_dtype t);

static inline int gr__kind_class(int kind) {
  if (kind == GR__SEND) return GR__OPC_SEND;
  if (kind == GR__RECV) return GR__OPC_RECV;
  if (kind >= GR__MPI_FIRST && kind < GR__MPI_END) return gr__mpi_kind_class[kind - GR__MPI_FIRST];
  if (gr__kind_is_nccl(kind)) return gr__nccl_kind_class(kind);
  return GR__OPC_COLL;
}
/* Point to point: a send or a receive (peer and tag recorded, shown as waits). */
static inline int gr__kind_is_p2p(int kind) {
  int c = gr__kind_class(kind);
  return c == GR__OPC_SEND || c == GR__OPC_RECV;
}
/* Numbered by cseq, the same on every member: collectives and creations. */
static inline int gr__kind_is_collective(int kind) {
  int c = gr__kind_class(kind);
  return c == GR__OPC_COLL || c == GR__OPC_MAKE;
}

#endif
