/* MPI 4.0's big-count C functions (MPI_Send_c, MPI_Allreduce_c, ...: MPI_Count counts, MPI_Aint
 * displacements): the `_c` form of every call wrap.c records, recorded as wrap.c records the plain
 * form (the same kind, so the flight dump says MPI_Send; the count as the record's count) around
 * the next definition (NEXT: gr__mt_next, GR__MT_MPI4 in gr_mpitrace.h). Without them a program
 * that calls the `_c` forms under MPICH 4 passes the layer unrecorded. Compiled only where the MPI
 * headers declare them (mpitrace/CMakeLists.txt: MPI 4.0 or later; Open MPI 4.1 is MPI 3.1).
 * MPICH's mpi_f08 `_large_` bindings call these (fortran_mpich_f08.c records them first: they
 * pass through here inside the recorded call). */
#include "gr_mpitrace.h"

#if MPI_VERSION < 4
#error "wrap_bigcount.c needs the MPI 4.0 big-count functions, which this MPI's mpi.h lacks"
#endif

#pragma GCC visibility push(default)

/* wrap.c's two forms: a blocking call recorded around its next definition, and a non-blocking
 * one whose record runs until its request completes. */
#define RECORD(kind, comm, count, dtype, root, peer, tag, call)                                    \
  do {                                                                                             \
    gr__mt_rec r_;                                                                                 \
    if (!gr__mt_begin(&r_, kind, comm, count, dtype, root, peer, tag)) return call;                \
    int rc_ = call;                                                                                \
    gr__mt_end(&r_, rc_);                                                                          \
    return rc_;                                                                                    \
  } while (0)

#define START(kind, comm, count, dtype, root, peer, tag, call, req)                                \
  do {                                                                                             \
    gr__mt_rec r_;                                                                                 \
    if (!gr__mt_begin(&r_, kind, comm, count, dtype, root, peer, tag)) return call;                \
    int rc_ = call;                                                                                \
    gr__mt_req_track(&r_, rc_, *(req));                                                            \
    return rc_;                                                                                    \
  } while (0)

#define K(name) GR__MPI_##name
typedef MPI_Count N;
typedef MPI_Aint A;

/* ---- collectives -------------------------------------------------------------------------- */

int MPI_Bcast_c(void *b, N n, MPI_Datatype t, int root, MPI_Comm c) {
  RECORD(K(Bcast), c, n, t, root, -1, -1, NEXT(Bcast_c)(b, n, t, root, c));
}
int MPI_Reduce_c(const void *s, void *r, N n, MPI_Datatype t, MPI_Op op, int root, MPI_Comm c) {
  RECORD(K(Reduce), c, n, t, root, -1, -1, NEXT(Reduce_c)(s, r, n, t, op, root, c));
}
int MPI_Allreduce_c(const void *s, void *r, N n, MPI_Datatype t, MPI_Op op, MPI_Comm c) {
  RECORD(K(Allreduce), c, n, t, -1, -1, -1, NEXT(Allreduce_c)(s, r, n, t, op, c));
}
int MPI_Gather_c(const void *s, N sn, MPI_Datatype st, void *r, N rn, MPI_Datatype rt, int root,
                 MPI_Comm c) {
  RECORD(K(Gather), c, sn, st, root, -1, -1, NEXT(Gather_c)(s, sn, st, r, rn, rt, root, c));
}
int MPI_Gatherv_c(const void *s, N sn, MPI_Datatype st, void *r, const N rn[], const A d[],
                  MPI_Datatype rt, int root, MPI_Comm c) {
  RECORD(K(Gatherv), c, sn, st, root, -1, -1, NEXT(Gatherv_c)(s, sn, st, r, rn, d, rt, root, c));
}
int MPI_Scatter_c(const void *s, N sn, MPI_Datatype st, void *r, N rn, MPI_Datatype rt, int root,
                  MPI_Comm c) {
  RECORD(K(Scatter), c, rn, rt, root, -1, -1, NEXT(Scatter_c)(s, sn, st, r, rn, rt, root, c));
}
int MPI_Scatterv_c(const void *s, const N sn[], const A d[], MPI_Datatype st, void *r, N rn,
                   MPI_Datatype rt, int root, MPI_Comm c) {
  RECORD(K(Scatterv), c, rn, rt, root, -1, -1, NEXT(Scatterv_c)(s, sn, d, st, r, rn, rt, root, c));
}
int MPI_Allgather_c(const void *s, N sn, MPI_Datatype st, void *r, N rn, MPI_Datatype rt,
                    MPI_Comm c) {
  RECORD(K(Allgather), c, rn, rt, -1, -1, -1, NEXT(Allgather_c)(s, sn, st, r, rn, rt, c));
}
int MPI_Allgatherv_c(const void *s, N sn, MPI_Datatype st, void *r, const N rn[], const A d[],
                     MPI_Datatype rt, MPI_Comm c) {
  RECORD(K(Allgatherv), c, sn, st, -1, -1, -1, NEXT(Allgatherv_c)(s, sn, st, r, rn, d, rt, c));
}
int MPI_Alltoall_c(const void *s, N sn, MPI_Datatype st, void *r, N rn, MPI_Datatype rt,
                   MPI_Comm c) {
  RECORD(K(Alltoall), c, sn, st, -1, -1, -1, NEXT(Alltoall_c)(s, sn, st, r, rn, rt, c));
}
int MPI_Alltoallv_c(const void *s, const N sn[], const A sd[], MPI_Datatype st, void *r,
                    const N rn[], const A rd[], MPI_Datatype rt, MPI_Comm c) {
  RECORD(K(Alltoallv), c, 0, st, -1, -1, -1, NEXT(Alltoallv_c)(s, sn, sd, st, r, rn, rd, rt, c));
}
int MPI_Alltoallw_c(const void *s, const N sn[], const A sd[], const MPI_Datatype st[], void *r,
                    const N rn[], const A rd[], const MPI_Datatype rt[], MPI_Comm c) {
  RECORD(K(Alltoallw), c, 0, MPI_DATATYPE_NULL, -1, -1, -1,
         NEXT(Alltoallw_c)(s, sn, sd, st, r, rn, rd, rt, c));
}
int MPI_Reduce_scatter_c(const void *s, void *r, const N rn[], MPI_Datatype t, MPI_Op op,
                         MPI_Comm c) {
  RECORD(K(Reduce_scatter), c, 0, t, -1, -1, -1, NEXT(Reduce_scatter_c)(s, r, rn, t, op, c));
}
int MPI_Reduce_scatter_block_c(const void *s, void *r, N rn, MPI_Datatype t, MPI_Op op,
                               MPI_Comm c) {
  RECORD(K(Reduce_scatter_block), c, rn, t, -1, -1, -1,
         NEXT(Reduce_scatter_block_c)(s, r, rn, t, op, c));
}
int MPI_Scan_c(const void *s, void *r, N n, MPI_Datatype t, MPI_Op op, MPI_Comm c) {
  RECORD(K(Scan), c, n, t, -1, -1, -1, NEXT(Scan_c)(s, r, n, t, op, c));
}
int MPI_Exscan_c(const void *s, void *r, N n, MPI_Datatype t, MPI_Op op, MPI_Comm c) {
  RECORD(K(Exscan), c, n, t, -1, -1, -1, NEXT(Exscan_c)(s, r, n, t, op, c));
}

int MPI_Ibcast_c(void *b, N n, MPI_Datatype t, int root, MPI_Comm c, MPI_Request *q) {
  START(K(Ibcast), c, n, t, root, -1, -1, NEXT(Ibcast_c)(b, n, t, root, c, q), q);
}
int MPI_Ireduce_c(const void *s, void *r, N n, MPI_Datatype t, MPI_Op op, int root, MPI_Comm c,
                  MPI_Request *q) {
  START(K(Ireduce), c, n, t, root, -1, -1, NEXT(Ireduce_c)(s, r, n, t, op, root, c, q), q);
}
int MPI_Iallreduce_c(const void *s, void *r, N n, MPI_Datatype t, MPI_Op op, MPI_Comm c,
                     MPI_Request *q) {
  START(K(Iallreduce), c, n, t, -1, -1, -1, NEXT(Iallreduce_c)(s, r, n, t, op, c, q), q);
}
int MPI_Igather_c(const void *s, N sn, MPI_Datatype st, void *r, N rn, MPI_Datatype rt, int root,
                  MPI_Comm c, MPI_Request *q) {
  START(K(Igather), c, sn, st, root, -1, -1, NEXT(Igather_c)(s, sn, st, r, rn, rt, root, c, q), q);
}
int MPI_Igatherv_c(const void *s, N sn, MPI_Datatype st, void *r, const N rn[], const A d[],
                   MPI_Datatype rt, int root, MPI_Comm c, MPI_Request *q) {
  START(K(Igatherv), c, sn, st, root, -1, -1, NEXT(Igatherv_c)(s, sn, st, r, rn, d, rt, root, c, q),
        q);
}
int MPI_Iscatter_c(const void *s, N sn, MPI_Datatype st, void *r, N rn, MPI_Datatype rt, int root,
                   MPI_Comm c, MPI_Request *q) {
  START(K(Iscatter), c, rn, rt, root, -1, -1, NEXT(Iscatter_c)(s, sn, st, r, rn, rt, root, c, q),
        q);
}
int MPI_Iscatterv_c(const void *s, const N sn[], const A d[], MPI_Datatype st, void *r, N rn,
                    MPI_Datatype rt, int root, MPI_Comm c, MPI_Request *q) {
  START(K(Iscatterv), c, rn, rt, root, -1, -1,
        NEXT(Iscatterv_c)(s, sn, d, st, r, rn, rt, root, c, q), q);
}
int MPI_Iallgather_c(const void *s, N sn, MPI_Datatype st, void *r, N rn, MPI_Datatype rt,
                     MPI_Comm c, MPI_Request *q) {
  START(K(Iallgather), c, rn, rt, -1, -1, -1, NEXT(Iallgather_c)(s, sn, st, r, rn, rt, c, q), q);
}
int MPI_Iallgatherv_c(const void *s, N sn, MPI_Datatype st, void *r, const N rn[], const A d[],
                      MPI_Datatype rt, MPI_Comm c, MPI_Request *q) {
  START(K(Iallgatherv), c, sn, st, -1, -1, -1, NEXT(Iallgatherv_c)(s, sn, st, r, rn, d, rt, c, q),
        q);
}
int MPI_Ialltoall_c(const void *s, N sn, MPI_Datatype st, void *r, N rn, MPI_Datatype rt,
                    MPI_Comm c, MPI_Request *q) {
  START(K(Ialltoall), c, sn, st, -1, -1, -1, NEXT(Ialltoall_c)(s, sn, st, r, rn, rt, c, q), q);
}
int MPI_Ialltoallv_c(const void *s, const N sn[], const A sd[], MPI_Datatype st, void *r,
                     const N rn[], const A rd[], MPI_Datatype rt, MPI_Comm c, MPI_Request *q) {
  START(K(Ialltoallv), c, 0, st, -1, -1, -1, NEXT(Ialltoallv_c)(s, sn, sd, st, r, rn, rd, rt, c, q),
        q);
}
int MPI_Ialltoallw_c(const void *s, const N sn[], const A sd[], const MPI_Datatype st[], void *r,
                     const N rn[], const A rd[], const MPI_Datatype rt[], MPI_Comm c,
                     MPI_Request *q) {
  START(K(Ialltoallw), c, 0, MPI_DATATYPE_NULL, -1, -1, -1,
        NEXT(Ialltoallw_c)(s, sn, sd, st, r, rn, rd, rt, c, q), q);
}
int MPI_Ireduce_scatter_c(const void *s, void *r, const N rn[], MPI_Datatype t, MPI_Op op,
                          MPI_Comm c, MPI_Request *q) {
  START(K(Ireduce_scatter), c, 0, t, -1, -1, -1, NEXT(Ireduce_scatter_c)(s, r, rn, t, op, c, q), q);
}
int MPI_Ireduce_scatter_block_c(const void *s, void *r, N rn, MPI_Datatype t, MPI_Op op, MPI_Comm c,
                                MPI_Request *q) {
  START(K(Ireduce_scatter_block), c, rn, t, -1, -1, -1,
        NEXT(Ireduce_scatter_block_c)(s, r, rn, t, op, c, q), q);
}
int MPI_Iscan_c(const void *s, void *r, N n, MPI_Datatype t, MPI_Op op, MPI_Comm c,
                MPI_Request *q) {
  START(K(Iscan), c, n, t, -1, -1, -1, NEXT(Iscan_c)(s, r, n, t, op, c, q), q);
}
int MPI_Iexscan_c(const void *s, void *r, N n, MPI_Datatype t, MPI_Op op, MPI_Comm c,
                  MPI_Request *q) {
  START(K(Iexscan), c, n, t, -1, -1, -1, NEXT(Iexscan_c)(s, r, n, t, op, c, q), q);
}

/* ---- point to point ----------------------------------------------------------------------- */

int MPI_Send_c(const void *b, N n, MPI_Datatype t, int dest, int tag, MPI_Comm c) {
  RECORD(K(Send), c, n, t, -1, dest, tag, NEXT(Send_c)(b, n, t, dest, tag, c));
}
int MPI_Ssend_c(const void *b, N n, MPI_Datatype t, int dest, int tag, MPI_Comm c) {
  RECORD(K(Ssend), c, n, t, -1, dest, tag, NEXT(Ssend_c)(b, n, t, dest, tag, c));
}
int MPI_Bsend_c(const void *b, N n, MPI_Datatype t, int dest, int tag, MPI_Comm c) {
  RECORD(K(Bsend), c, n, t, -1, dest, tag, NEXT(Bsend_c)(b, n, t, dest, tag, c));
}
int MPI_Rsend_c(const void *b, N n, MPI_Datatype t, int dest, int tag, MPI_Comm c) {
  RECORD(K(Rsend), c, n, t, -1, dest, tag, NEXT(Rsend_c)(b, n, t, dest, tag, c));
}
int MPI_Recv_c(void *b, N n, MPI_Datatype t, int src, int tag, MPI_Comm c, MPI_Status *st) {
  RECORD(K(Recv), c, n, t, -1, src, tag, NEXT(Recv_c)(b, n, t, src, tag, c, st));
}
int MPI_Sendrecv_c(const void *sb, N sn, MPI_Datatype st, int dest, int stag, void *rb, N rn,
                   MPI_Datatype rt, int src, int rtag, MPI_Comm c, MPI_Status *s) {
  RECORD(K(Sendrecv), c, rn, rt, -1, src, rtag,
         NEXT(Sendrecv_c)(sb, sn, st, dest, stag, rb, rn, rt, src, rtag, c, s));
}
int MPI_Sendrecv_replace_c(void *b, N n, MPI_Datatype t, int dest, int stag, int src, int rtag,
                           MPI_Comm c, MPI_Status *s) {
  RECORD(K(Sendrecv_replace), c, n, t, -1, src, rtag,
         NEXT(Sendrecv_replace_c)(b, n, t, dest, stag, src, rtag, c, s));
}
int MPI_Mrecv_c(void *b, N n, MPI_Datatype t, MPI_Message *m, MPI_Status *s) {
  RECORD(K(Mrecv), MPI_COMM_NULL, n, t, -1, -1, -1, NEXT(Mrecv_c)(b, n, t, m, s));
}

int MPI_Isend_c(const void *b, N n, MPI_Datatype t, int dest, int tag, MPI_Comm c, MPI_Request *q) {
  START(K(Isend), c, n, t, -1, dest, tag, NEXT(Isend_c)(b, n, t, dest, tag, c, q), q);
}
int MPI_Issend_c(const void *b, N n, MPI_Datatype t, int dest, int tag, MPI_Comm c,
                 MPI_Request *q) {
  START(K(Issend), c, n, t, -1, dest, tag, NEXT(Issend_c)(b, n, t, dest, tag, c, q), q);
}
int MPI_Ibsend_c(const void *b, N n, MPI_Datatype t, int dest, int tag, MPI_Comm c,
                 MPI_Request *q) {
  START(K(Ibsend), c, n, t, -1, dest, tag, NEXT(Ibsend_c)(b, n, t, dest, tag, c, q), q);
}
int MPI_Irsend_c(const void *b, N n, MPI_Datatype t, int dest, int tag, MPI_Comm c,
                 MPI_Request *q) {
  START(K(Irsend), c, n, t, -1, dest, tag, NEXT(Irsend_c)(b, n, t, dest, tag, c, q), q);
}
int MPI_Irecv_c(void *b, N n, MPI_Datatype t, int src, int tag, MPI_Comm c, MPI_Request *q) {
  START(K(Irecv), c, n, t, -1, src, tag, NEXT(Irecv_c)(b, n, t, src, tag, c, q), q);
}

#pragma GCC visibility pop
