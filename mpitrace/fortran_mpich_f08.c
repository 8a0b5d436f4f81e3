/* MPICH's `use mpi_f08` entry points (gr_mpitrace.h). mpif.h and `use mpi` reach the C MPI_*
 * functions of wrap.c (libmpichfort: pmpi_allreduce_ calls MPI_Allreduce), but the mpi_f08
 * bindings call PMPI_* for every call without a buffer (mpi_init_f08_ calls PMPI_Init,
 * mpi_barrier_f08_ PMPI_Barrier, mpi_comm_split_f08_ PMPI_Comm_split, mpi_wait_f08_ PMPI_Wait) and
 * for some with one (mpi_alltoallv_f08ts_): without this file the layer never starts in an mpi_f08
 * program and sees none of those calls. The layer defines the entry points the program calls,
 * records, and calls MPICH's (dlsym RTLD_NEXT), as wrap.c does for C.
 *
 * How they are called (gfortran -fdump-tree-original of a caller, objdump of libmpichfort 4.0):
 * every argument by reference, in the order of the standard's Fortran 2008 binding:
 *   - handles, TYPE(MPI_Comm) and the others, as a pointer to their one INTEGER MPI_VAL, which in
 *     MPICH is the C handle (MPI_Comm_f2c is a cast);
 *   - the optional ierror last, NULL when left out (the binding stores into it when present);
 *   - choice buffers, TYPE(*) DIMENSION(..), as a pointer to gfortran's array descriptor (the
 *     binding turns it into a CFI descriptor for its C half): passed on untouched;
 *   - LOGICAL as a 4-byte integer, TYPE(MPI_Status) as MPI_F08_status, arrays of handles and
 *     statuses as a pointer to their first element;
 *   - CHARACTER arguments' lengths after all the others, one size_t each in order;
 *   - the buffer calls come twice: mpi_<name>_f08ts_ with INTEGER counts and
 *     mpi_<name>_f08ts_large_ with INTEGER(MPI_COUNT_KIND) (MPI_Count) ones.
 * Where the caller left ierror out the wrapper passes its own, to learn the outcome: the binding
 * then stores into that instead of nowhere, which the caller cannot tell apart.
 * The buffer bindings that go on to call the C MPI_* (most of them) are recorded here, once: the
 * C wrapper then runs inside a recorded call and passes through (gr__mt_begin's depth).
 *
 * Covered: init, init_thread and finalize, every collective, point-to-point call, wait, test,
 * probe, one-sided synchronisation and communicator or window creation that wrap.c records for
 * C, with the large-count forms. Left out, as in C: the persistent and neighbourhood calls, I/O;
 * and MPI_Comm_idup, which C's wrappers record (a Fortran idup's communicator gets an id of this
 * process only). */
#include "gr_mpitrace.h"

#if defined(MPICH)

#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* MPI_STATUS(ES)_IGNORE of mpi_f08, to know when a status may be read: libmpich's, referenced
 * weakly as the layer links no MPI library (NULL: unknown, no status is read). */
#pragma weak MPI_F08_STATUS_IGNORE
#pragma weak MPI_F08_STATUSES_IGNORE

typedef MPI_Fint F;       /* INTEGER, LOGICAL and every handle's MPI_VAL */
typedef MPI_Count N;      /* INTEGER(MPI_COUNT_KIND): the large forms' counts */
typedef void D;           /* a choice buffer: gfortran's descriptor, or anything passed on as is */
typedef MPI_F08_status S; /* TYPE(MPI_Status) */
#define K(name) GR__MPI_##name
#define COMM(c) MPI_Comm_f2c(*(c))
#define TYPE(t) MPI_Type_f2c(*(t))

/* MPICH's definition of an entry point: looked up once; an mpi_f08 program without it has no
 * MPICH binding to go on to (the layer was built for MPICH, the program's MPI is another). */
static void *next_of(void **slot, const char *name) {
  void *p = dlsym(RTLD_NEXT, name);
  if (!p) {
    fprintf(stderr,
            "gpurun: the MPI layer (libgpurun-mpi.so, built for MPICH) found no %s after it to "
            "pass this Fortran call on to: the program's MPI is not MPICH; run it without "
            "--trace=mpi\n",
            name);
    abort();
  }
  __atomic_store_n(slot, p, __ATOMIC_RELEASE);
  return p;
}
#define NEXTF(sym)                                                                                 \
  ({                                                                                               \
    static void *slot_;                                                                            \
    void *p_ = __atomic_load_n(&slot_, __ATOMIC_ACQUIRE);                                          \
    (__typeof__(&sym))(p_ ? p_ : next_of(&slot_, #sym));                                           \
  })

/* The caller's ierror, or the wrapper's own where the caller left it out. */
#define IERR                                                                                       \
  F own_ = MPI_SUCCESS;                                                                            \
  F *ie_ = ierr ? ierr : &own_

/* A call recorded around MPICH's binding; args ends in ie_. */
#define RECORD(sym, kind, comm, count, dtype, root, peer, tag, args)                               \
  do {                                                                                             \
    IERR;                                                                                          \
    __typeof__(&sym) fn_ = NEXTF(sym);                                                             \
    gr__mt_rec r_;                                                                                 \
    if (!gr__mt_begin(&r_, kind, comm, count, dtype, root, peer, tag)) {                           \
      fn_ args;                                                                                    \
      return;                                                                                      \
    }                                                                                              \
    fn_ args;                                                                                      \
    gr__mt_end(&r_, *ie_);                                                                         \
  } while (0)

/* A non-blocking start: its record runs until a wait or test completes the request *req. */
#define START(sym, kind, comm, count, dtype, root, peer, tag, args, req)                           \
  do {                                                                                             \
    IERR;                                                                                          \
    __typeof__(&sym) fn_ = NEXTF(sym);                                                             \
    gr__mt_rec r_;                                                                                 \
    if (!gr__mt_begin(&r_, kind, comm, count, dtype, root, peer, tag)) {                           \
      fn_ args;                                                                                    \
      return;                                                                                      \
    }                                                                                              \
    fn_ args;                                                                                      \
    gr__mt_req_track(&r_, *ie_, *ie_ == MPI_SUCCESS ? MPI_Request_f2c(*(req)) : MPI_REQUEST_NULL); \
  } while (0)

/* Each buffer call twice: INTEGER counts, and the large form's MPI_Count ones. */
#define TWICE(def, name) def(mpi_##name##_f08ts_, F) def(mpi_##name##_f08ts_large_, N)

/* the entry points are the library's interface (exports.map: mpi_*) */
#pragma GCC visibility push(default)

/* ---- init and finalize: the layer starts and stops here for an mpi_f08 program -------------- */

void mpi_init_f08_(F *ierr) {
  IERR;
  NEXTF(mpi_init_f08_)(ie_);
  if (*ie_ == MPI_SUCCESS) gr__mt_start();
}

void mpi_init_thread_f08_(F *required, F *provided, F *ierr) {
  IERR;
  NEXTF(mpi_init_thread_f08_)(required, provided, ie_);
  if (*ie_ == MPI_SUCCESS) gr__mt_start();
}

void mpi_finalize_f08_(F *ierr) {
  __typeof__(&mpi_finalize_f08_) fn = NEXTF(mpi_finalize_f08_);
  gr__mt_rec r;
  if (gr__mt_begin(&r, K(Finalize), MPI_COMM_WORLD, 0, MPI_DATATYPE_NULL, -1, -1, -1))
    gr__mt_end(&r, MPI_SUCCESS); /* recorded as reached; the call itself ends the layer */
  gr__mt_stop();
  fn(ierr);
}

/* ---- collectives -------------------------------------------------------------------------- */

void mpi_barrier_f08_(F *c, F *ierr) {
  RECORD(mpi_barrier_f08_, K(Barrier), COMM(c), 0, MPI_DATATYPE_NULL, -1, -1, -1, (c, ie_));
}
void mpi_ibarrier_f08_(F *c, F *q, F *ierr) {
  START(mpi_ibarrier_f08_, K(Ibarrier), COMM(c), 0, MPI_DATATYPE_NULL, -1, -1, -1, (c, q, ie_), q);
}

#define BCAST(sym, C)                                                                              \
  void sym(D *b, C *n, F *t, F *root, F *c, F *ierr) {                                             \
    RECORD(sym, K(Bcast), COMM(c), *n, TYPE(t), *root, -1, -1, (b, n, t, root, c, ie_));           \
  }
#define IBCAST(sym, C)                                                                             \
  void sym(D *b, C *n, F *t, F *root, F *c, F *q, F *ierr) {                                       \
    START(sym, K(Ibcast), COMM(c), *n, TYPE(t), *root, -1, -1, (b, n, t, root, c, q, ie_), q);     \
  }
TWICE(BCAST, bcast)
TWICE(IBCAST, ibcast)

#define REDUCE(sym, C)                                                                             \
  void sym(D *s, D *r, C *n, F *t, F *op, F *root, F *c, F *ierr) {                                \
    RECORD(sym, K(Reduce), COMM(c), *n, TYPE(t), *root, -1, -1, (s, r, n, t, op, root, c, ie_));   \
  }
#define IREDUCE(sym, C)                                                                            \
  void sym(D *s, D *r, C *n, F *t, F *op, F *root, F *c, F *q, F *ierr) {                          \
    START(sym, K(Ireduce), COMM(c), *n, TYPE(t), *root, -1, -1, (s, r, n, t, op, root, c, q, ie_), \
          q);                                                                                      \
  }
TWICE(REDUCE, reduce)
TWICE(IREDUCE, ireduce)

/* (sendbuf, recvbuf, count, datatype, op, comm): allreduce, scan, exscan, reduce_scatter_block */
#define REDOP(sym, C, kind)                                                                        \
  void sym(D *s, D *r, C *n, F *t, F *op, F *c, F *ierr) {                                         \
    RECORD(sym, K(kind), COMM(c), *n, TYPE(t), -1, -1, -1, (s, r, n, t, op, c, ie_));              \
  }
#define IREDOP(sym, C, kind)                                                                       \
  void sym(D *s, D *r, C *n, F *t, F *op, F *c, F *q, F *ierr) {                                   \
    START(sym, K(kind), COMM(c), *n, TYPE(t), -1, -1, -1, (s, r, n, t, op, c, q, ie_), q);         \
  }
#define ALLREDUCE(sym, C) REDOP(sym, C, Allreduce)
#define SCAN(sym, C) REDOP(sym, C, Scan)
#define EXSCAN(sym, C) REDOP(sym, C, Exscan)
#define RSBLOCK(sym, C) REDOP(sym, C, Reduce_scatter_block)
#define IALLREDUCE(sym, C) IREDOP(sym, C, Iallreduce)
#define ISCAN(sym, C) IREDOP(sym, C, Iscan)
#define IEXSCAN(sym, C) IREDOP(sym, C, Iexscan)
#define IRSBLOCK(sym, C) IREDOP(sym, C, Ireduce_scatter_block)
TWICE(ALLREDUCE, allreduce)
TWICE(SCAN, scan)
TWICE(EXSCAN, exscan)
TWICE(RSBLOCK, reduce_scatter_block)
TWICE(IALLREDUCE, iallreduce)
TWICE(ISCAN, iscan)
TWICE(IEXSCAN, iexscan)
TWICE(IRSBLOCK, ireduce_scatter_block)

/* (sendbuf, recvbuf, recvcounts(*), datatype, op, comm) */
#define RSCATTER(sym, C)                                                                           \
  void sym(D *s, D *r, D *rn, F *t, F *op, F *c, F *ierr) {                                        \
    RECORD(sym, K(Reduce_scatter), COMM(c), 0, TYPE(t), -1, -1, -1, (s, r, rn, t, op, c, ie_));    \
  }
#define IRSCATTER(sym, C)                                                                          \
  void sym(D *s, D *r, D *rn, F *t, F *op, F *c, F *q, F *ierr) {                                  \
    START(sym, K(Ireduce_scatter), COMM(c), 0, TYPE(t), -1, -1, -1, (s, r, rn, t, op, c, q, ie_),  \
          q);                                                                                      \
  }
TWICE(RSCATTER, reduce_scatter)
TWICE(IRSCATTER, ireduce_scatter)

/* (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, [root,] comm): recorded with the
 * count and type wrap.c records (the send side for gather and alltoall, the receive side for
 * scatter and allgather) */
#define ROOTED(sym, C, kind, cn, ct)                                                               \
  void sym(D *s, C *sn, F *st, D *r, C *rn, F *rt, F *root, F *c, F *ierr) {                       \
    RECORD(sym, K(kind), COMM(c), *cn, TYPE(ct), *root, -1, -1,                                    \
           (s, sn, st, r, rn, rt, root, c, ie_));                                                  \
  }
#define IROOTED(sym, C, kind, cn, ct)                                                              \
  void sym(D *s, C *sn, F *st, D *r, C *rn, F *rt, F *root, F *c, F *q, F *ierr) {                 \
    START(sym, K(kind), COMM(c), *cn, TYPE(ct), *root, -1, -1,                                     \
          (s, sn, st, r, rn, rt, root, c, q, ie_), q);                                             \
  }
#define ALL(sym, C, kind, cn, ct)                                                                  \
  void sym(D *s, C *sn, F *st, D *r, C *rn, F *rt, F *c, F *ierr) {                                \
    RECORD(sym, K(kind), COMM(c), *cn, TYPE(ct), -1, -1, -1, (s, sn, st, r, rn, rt, c, ie_));      \
  }
#define IALL(sym, C, kind, cn, ct)                                                                 \
  void sym(D *s, C *sn, F *st, D *r, C *rn, F *rt, F *c, F *q, F *ierr) {                          \
    START(sym, K(kind), COMM(c), *cn, TYPE(ct), -1, -1, -1, (s, sn, st, r, rn, rt, c, q, ie_), q); \
  }
#define GATHER(sym, C) ROOTED(sym, C, Gather, sn, st)
#define SCATTER(sym, C) ROOTED(sym, C, Scatter, rn, rt)
#define ALLGATHER(sym, C) ALL(sym, C, Allgather, rn, rt)
#define ALLTOALL(sym, C) ALL(sym, C, Alltoall, sn, st)
#define IGATHER(sym, C) IROOTED(sym, C, Igather, sn, st)
#define ISCATTER(sym, C) IROOTED(sym, C, Iscatter, rn, rt)
#define IALLGATHER(sym, C) IALL(sym, C, Iallgather, rn, rt)
#define IALLTOALL(sym, C) IALL(sym, C, Ialltoall, sn, st)
TWICE(GATHER, gather)
TWICE(SCATTER, scatter)
TWICE(ALLGATHER, allgather)
TWICE(ALLTOALL, alltoall)
TWICE(IGATHER, igather)
TWICE(ISCATTER, iscatter)
TWICE(IALLGATHER, iallgather)
TWICE(IALLTOALL, ialltoall)

/* the v forms: counts and displacements are arrays (MPI_Count and MPI_Aint in the large form),
 * passed on as they are */
#define GATHERV(sym, C)                                                                            \
  void sym(D *s, C *sn, F *st, D *r, D *rn, D *d, F *rt, F *root, F *c, F *ierr) {                 \
    RECORD(sym, K(Gatherv), COMM(c), *sn, TYPE(st), *root, -1, -1,                                 \
           (s, sn, st, r, rn, d, rt, root, c, ie_));                                               \
  }
#define IGATHERV(sym, C)                                                                           \
  void sym(D *s, C *sn, F *st, D *r, D *rn, D *d, F *rt, F *root, F *c, F *q, F *ierr) {           \
    START(sym, K(Igatherv), COMM(c), *sn, TYPE(st), *root, -1, -1,                                 \
          (s, sn, st, r, rn, d, rt, root, c, q, ie_), q);                                          \
  }
#define SCATTERV(sym, C)                                                                           \
  void sym(D *s, D *sn, D *d, F *st, D *r, C *rn, F *rt, F *root, F *c, F *ierr) {                 \
    RECORD(sym, K(Scatterv), COMM(c), *rn, TYPE(rt), *root, -1, -1,                                \
           (s, sn, d, st, r, rn, rt, root, c, ie_));                                               \
  }
#define ISCATTERV(sym, C)                                                                          \
  void sym(D *s, D *sn, D *d, F *st, D *r, C *rn, F *rt, F *root, F *c, F *q, F *ierr) {           \
    START(sym, K(Iscatterv), COMM(c), *rn, TYPE(rt), *root, -1, -1,                                \
          (s, sn, d, st, r, rn, rt, root, c, q, ie_), q);                                          \
  }
#define ALLGATHERV(sym, C)                                                                         \
  void sym(D *s, C *sn, F *st, D *r, D *rn, D *d, F *rt, F *c, F *ierr) {                          \
    RECORD(sym, K(Allgatherv), COMM(c), *sn, TYPE(st), -1, -1, -1,                                 \
           (s, sn, st, r, rn, d, rt, c, ie_));                                                     \
  }
#define IALLGATHERV(sym, C)                                                                        \
  void sym(D *s, C *sn, F *st, D *r, D *rn, D *d, F *rt, F *c, F *q, F *ierr) {                    \
    START(sym, K(Iallgatherv), COMM(c), *sn, TYPE(st), -1, -1, -1,                                 \
          (s, sn, st, r, rn, d, rt, c, q, ie_), q);                                                \
  }
#define ALLTOALLV(sym, C)                                                                          \
  void sym(D *s, D *sn, D *sd, F *st, D *r, D *rn, D *rd, F *rt, F *c, F *ierr) {                  \
    RECORD(sym, K(Alltoallv), COMM(c), 0, TYPE(st), -1, -1, -1,                                    \
           (s, sn, sd, st, r, rn, rd, rt, c, ie_));                                                \
  }
#define IALLTOALLV(sym, C)                                                                         \
  void sym(D *s, D *sn, D *sd, F *st, D *r, D *rn, D *rd, F *rt, F *c, F *q, F *ierr) {            \
    START(sym, K(Ialltoallv), COMM(c), 0, TYPE(st), -1, -1, -1,                                    \
          (s, sn, sd, st, r, rn, rd, rt, c, q, ie_), q);                                           \
  }
/* alltoallw's types are arrays too */
#define ALLTOALLW(sym, C)                                                                          \
  void sym(D *s, D *sn, D *sd, D *st, D *r, D *rn, D *rd, D *rt, F *c, F *ierr) {                  \
    RECORD(sym, K(Alltoallw), COMM(c), 0, MPI_DATATYPE_NULL, -1, -1, -1,                           \
           (s, sn, sd, st, r, rn, rd, rt, c, ie_));                                                \
  }
#define IALLTOALLW(sym, C)                                                                         \
  void sym(D *s, D *sn, D *sd, D *st, D *r, D *rn, D *rd, D *rt, F *c, F *q, F *ierr) {            \
    START(sym, K(Ialltoallw), COMM(c), 0, MPI_DATATYPE_NULL, -1, -1, -1,                           \
          (s, sn, sd, st, r, rn, rd, rt, c, q, ie_), q);                                           \
  }
TWICE(GATHERV, gatherv)
TWICE(IGATHERV, igatherv)
TWICE(SCATTERV, scatterv)
TWICE(ISCATTERV, iscatterv)
TWICE(ALLGATHERV, allgatherv)
TWICE(IALLGATHERV, iallgatherv)
TWICE(ALLTOALLV, alltoallv)
TWICE(IALLTOALLV, ialltoallv)
TWICE(ALLTOALLW, alltoallw)
TWICE(IALLTOALLW, ialltoallw)

/* ---- point to point ----------------------------------------------------------------------- */

/* (buf, count, datatype, peer, tag, comm[, request | status]) */
#define SENDLIKE(sym, C, kind)                                                                     \
  void sym(D *b, C *n, F *t, F *dest, F *tag, F *c, F *ierr) {                                     \
    RECORD(sym, K(kind), COMM(c), *n, TYPE(t), -1, *dest, *tag, (b, n, t, dest, tag, c, ie_));     \
  }
#define ISENDLIKE(sym, C, kind)                                                                    \
  void sym(D *b, C *n, F *t, F *peer, F *tag, F *c, F *q, F *ierr) {                               \
    START(sym, K(kind), COMM(c), *n, TYPE(t), -1, *peer, *tag, (b, n, t, peer, tag, c, q, ie_),    \
          q);                                                                                      \
  }
#define SEND(sym, C) SENDLIKE(sym, C, Send)
#define SSEND(sym, C) SENDLIKE(sym, C, Ssend)
#define BSEND(sym, C) SENDLIKE(sym, C, Bsend)
#define RSEND(sym, C) SENDLIKE(sym, C, Rsend)
#define ISEND(sym, C) ISENDLIKE(sym, C, Isend)
#define ISSEND(sym, C) ISENDLIKE(sym, C, Issend)
#define IBSEND(sym, C) ISENDLIKE(sym, C, Ibsend)
#define IRSEND(sym, C) ISENDLIKE(sym, C, Irsend)
#define IRECV(sym, C) ISENDLIKE(sym, C, Irecv)
TWICE(SEND, send)
TWICE(SSEND, ssend)
TWICE(BSEND, bsend)
TWICE(RSEND, rsend)
TWICE(ISEND, isend)
TWICE(ISSEND, issend)
TWICE(IBSEND, ibsend)
TWICE(IRSEND, irsend)
TWICE(IRECV, irecv)

#define RECV(sym, C)                                                                               \
  void sym(D *b, C *n, F *t, F *src, F *tag, F *c, S *st, F *ierr) {                               \
    RECORD(sym, K(Recv), COMM(c), *n, TYPE(t), -1, *src, *tag, (b, n, t, src, tag, c, st, ie_));   \
  }
#define SENDRECV(sym, C)                                                                           \
  void sym(D *sb, C *sn, F *st, F *dest, F *stag, D *rb, C *rn, F *rt, F *src, F *rtag, F *c,      \
           S *s, F *ierr) {                                                                        \
    RECORD(sym, K(Sendrecv), COMM(c), *rn, TYPE(rt), -1, *src, *rtag,                              \
           (sb, sn, st, dest, stag, rb, rn, rt, src, rtag, c, s, ie_));                            \
  }
#define SENDRECV_REPLACE(sym, C)                                                                   \
  void sym(D *b, C *n, F *t, F *dest, F *stag, F *src, F *rtag, F *c, S *s, F *ierr) {             \
    RECORD(sym, K(Sendrecv_replace), COMM(c), *n, TYPE(t), -1, *src, *rtag,                        \
           (b, n, t, dest, stag, src, rtag, c, s, ie_));                                           \
  }
#define MRECV(sym, C)                                                                              \
  void sym(D *b, C *n, F *t, F *m, S *s, F *ierr) {                                                \
    RECORD(sym, K(Mrecv), MPI_COMM_NULL, *n, TYPE(t), -1, -1, -1, (b, n, t, m, s, ie_));           \
  }
TWICE(RECV, recv)
TWICE(SENDRECV, sendrecv)
TWICE(SENDRECV_REPLACE, sendrecv_replace)
TWICE(MRECV, mrecv)

void mpi_probe_f08_(F *src, F *tag, F *c, S *s, F *ierr) {
  RECORD(mpi_probe_f08_, K(Probe), COMM(c), 0, MPI_DATATYPE_NULL, -1, *src, *tag,
         (src, tag, c, s, ie_));
}
void mpi_mprobe_f08_(F *src, F *tag, F *c, F *m, S *s, F *ierr) {
  RECORD(mpi_mprobe_f08_, K(Mprobe), COMM(c), 0, MPI_DATATYPE_NULL, -1, *src, *tag,
         (src, tag, c, m, s, ie_));
}

/* ---- waits and tests: they end the records of the requests they complete -------------------
 * The handles are copied before the call, as in wrap.c. A request the layer tracks (a
 * non-blocking start, never a persistent one) is set to MPI_REQUEST_NULL when it completes. */

/* Whether one status, or statuses[j] of an array, may be read: not MPI_STATUS(ES)_IGNORE. */
static int status_ok(const S *s, int rc) {
  if (rc == MPI_SUCCESS) return 1;
  const S *ignore = &MPI_F08_STATUS_IGNORE ? MPI_F08_STATUS_IGNORE : NULL;
  return s && ignore && s != ignore ? s->MPI_ERROR == MPI_SUCCESS : 0;
}
static int statuses_ok(const S *s, int j, int rc) {
  if (rc == MPI_SUCCESS) return 1;
  const S *ignore = &MPI_F08_STATUSES_IGNORE ? MPI_F08_STATUSES_IGNORE : NULL;
  return s && ignore && s != ignore ? s[j].MPI_ERROR == MPI_SUCCESS : 0;
}

typedef struct {
  MPI_Request stack[GR__MT_REQ_STACK], *v; /* v: the copy, stack or malloc'd */
  int n;                                   /* 0: nothing copied (off, or no memory) */
} reqs_before;

static int copy_reqs(reqs_before *b, const F *count, const F *q) {
  b->v = b->stack;
  b->n = 0;
  int n = *count;
  if (!__atomic_load_n(&gr__mt_on, __ATOMIC_RELAXED) || n <= 0) return 0;
  if (n > GR__MT_REQ_STACK && !(b->v = malloc((size_t)n * sizeof *b->v))) return 0;
  for (int i = 0; i < n; i++)
    b->v[i] = MPI_Request_f2c(q[i]);
  b->n = n;
  return 1;
}
static void free_reqs(reqs_before *b) {
  if (b->v != b->stack) free(b->v);
}
/* Request i was completed by the call (it was set to MPI_REQUEST_NULL). */
static int completed(const reqs_before *b, const F *q, int i) {
  return b->v[i] != MPI_REQUEST_NULL && MPI_Request_f2c(q[i]) == MPI_REQUEST_NULL;
}

/* The any and some forms: the indices they return count from 1 in the standard, from 0 in
 * MPICH 4.0.2's mpi_f08 (mpi_waitany_f08_ passes PMPI_Waitany's through; the same for waitsome,
 * testany and testsome: a test program prints 1 for the second request). The base is the one under
 * which every index names a request the call completed (one fits at most: the set shifted by one
 * is never the set itself); -1 when none fits (a persistent request, which the layer does not
 * track). The index then pairs a completed request with its status when the call failed. */
static int index_base(const reqs_before *b, const F *q, int m, const F *idx) {
  for (int base = 1; base >= 0; base--) {
    int fits = m > 0;
    for (int j = 0; j < m && fits; j++) {
      long k = (long)idx[j] - base;
      fits = k >= 0 && k < b->n && completed(b, q, (int)k);
    }
    if (fits) return base;
  }
  return -1;
}
/* End the records of the requests the call completed; m indices in idx (the any forms: one
 * status in s; the some forms: statuses[j] for idx[j]). */
static void some_done(const reqs_before *b, const F *q, int m, const F *idx, const S *s, int one,
                      int rc) {
  if (m < 0 || m > b->n) m = 0; /* MPI_UNDEFINED: nothing completed */
  int base = rc == MPI_SUCCESS ? -1 : index_base(b, q, m, idx);
  for (int i = 0; i < b->n; i++) {
    if (!completed(b, q, i)) continue;
    int ok = rc == MPI_SUCCESS;
    for (int j = 0; !ok && base >= 0 && j < m; j++)
      if ((long)idx[j] - base == i) ok = one ? status_ok(s, rc) : statuses_ok(s, j, rc);
    gr__mt_req_done(b->v[i], ok);
  }
}

void mpi_wait_f08_(F *q, S *s, F *ierr) {
  IERR;
  __typeof__(&mpi_wait_f08_) fn = NEXTF(mpi_wait_f08_);
  MPI_Request before = MPI_Request_f2c(*q);
  gr__mt_rec r;
  if (!gr__mt_begin_wait(&r, K(Wait), 1, &before)) {
    fn(q, s, ie_);
    return;
  }
  fn(q, s, ie_);
  gr__mt_req_done(before, *ie_ == MPI_SUCCESS);
  gr__mt_end(&r, *ie_);
}

void mpi_test_f08_(F *q, F *flag, S *s, F *ierr) {
  IERR;
  MPI_Request before = MPI_Request_f2c(*q);
  NEXTF(mpi_test_f08_)(q, flag, s, ie_);
  if (__atomic_load_n(&gr__mt_on, __ATOMIC_RELAXED) && (*ie_ != MPI_SUCCESS || *flag))
    gr__mt_req_done(before, *ie_ == MPI_SUCCESS);
}

void mpi_waitall_f08_(F *n, F *q, S *s, F *ierr) {
  IERR;
  __typeof__(&mpi_waitall_f08_) fn = NEXTF(mpi_waitall_f08_);
  reqs_before b;
  int on = copy_reqs(&b, n, q);
  gr__mt_rec r;
  int rec = on && gr__mt_begin_wait(&r, K(Waitall), b.n, b.v);
  fn(n, q, s, ie_);
  for (int i = 0; i < b.n; i++)
    if (*ie_ == MPI_SUCCESS || MPI_Request_f2c(q[i]) == MPI_REQUEST_NULL)
      gr__mt_req_done(b.v[i], statuses_ok(s, i, *ie_));
  if (rec) gr__mt_end(&r, *ie_);
  free_reqs(&b);
}

void mpi_testall_f08_(F *n, F *q, F *flag, S *s, F *ierr) {
  IERR;
  __typeof__(&mpi_testall_f08_) fn = NEXTF(mpi_testall_f08_);
  reqs_before b;
  copy_reqs(&b, n, q);
  fn(n, q, flag, s, ie_);
  if (*ie_ != MPI_SUCCESS || *flag)
    for (int i = 0; i < b.n; i++)
      if (MPI_Request_f2c(q[i]) == MPI_REQUEST_NULL)
        gr__mt_req_done(b.v[i], statuses_ok(s, i, *ie_));
  free_reqs(&b);
}

void mpi_waitany_f08_(F *n, F *q, F *idx, S *s, F *ierr) {
  IERR;
  __typeof__(&mpi_waitany_f08_) fn = NEXTF(mpi_waitany_f08_);
  reqs_before b;
  int on = copy_reqs(&b, n, q);
  gr__mt_rec r;
  int rec = on && gr__mt_begin_wait(&r, K(Waitany), b.n, b.v);
  fn(n, q, idx, s, ie_);
  if (on && *idx != MPI_UNDEFINED) some_done(&b, q, 1, idx, s, 1, *ie_);
  if (rec) gr__mt_end(&r, *ie_);
  free_reqs(&b);
}

void mpi_testany_f08_(F *n, F *q, F *idx, F *flag, S *s, F *ierr) {
  IERR;
  __typeof__(&mpi_testany_f08_) fn = NEXTF(mpi_testany_f08_);
  reqs_before b;
  int on = copy_reqs(&b, n, q);
  fn(n, q, idx, flag, s, ie_);
  if (on && *flag && *idx != MPI_UNDEFINED) some_done(&b, q, 1, idx, s, 1, *ie_);
  free_reqs(&b);
}

void mpi_waitsome_f08_(F *n, F *q, F *outn, F *idx, S *s, F *ierr) {
  IERR;
  __typeof__(&mpi_waitsome_f08_) fn = NEXTF(mpi_waitsome_f08_);
  reqs_before b;
  int on = copy_reqs(&b, n, q);
  gr__mt_rec r;
  int rec = on && gr__mt_begin_wait(&r, K(Waitsome), b.n, b.v);
  fn(n, q, outn, idx, s, ie_);
  if (on && *outn != MPI_UNDEFINED) some_done(&b, q, *outn, idx, s, 0, *ie_);
  if (rec) gr__mt_end(&r, *ie_);
  free_reqs(&b);
}

void mpi_testsome_f08_(F *n, F *q, F *outn, F *idx, S *s, F *ierr) {
  IERR;
  __typeof__(&mpi_testsome_f08_) fn = NEXTF(mpi_testsome_f08_);
  reqs_before b;
  int on = copy_reqs(&b, n, q);
  fn(n, q, outn, idx, s, ie_);
  if (on && *outn != MPI_UNDEFINED) some_done(&b, q, *outn, idx, s, 0, *ie_);
  free_reqs(&b);
}

/* ---- one-sided synchronisation: recorded on the window's communicator --------------------- */

#define WIN_SYNC(sym, name, w, peer, args)                                                         \
  RECORD(sym, K(name), gr__mt_win_comm(MPI_Win_f2c(*(w))), 0, MPI_DATATYPE_NULL, -1, peer, -1, args)

void mpi_win_fence_f08_(F *a, F *w, F *ierr) {
  WIN_SYNC(mpi_win_fence_f08_, Win_fence, w, -1, (a, w, ie_));
}
void mpi_win_lock_f08_(F *t, F *rank, F *a, F *w, F *ierr) {
  WIN_SYNC(mpi_win_lock_f08_, Win_lock, w, *rank, (t, rank, a, w, ie_));
}
void mpi_win_unlock_f08_(F *rank, F *w, F *ierr) {
  WIN_SYNC(mpi_win_unlock_f08_, Win_unlock, w, *rank, (rank, w, ie_));
}
void mpi_win_lock_all_f08_(F *a, F *w, F *ierr) {
  WIN_SYNC(mpi_win_lock_all_f08_, Win_lock_all, w, -1, (a, w, ie_));
}
void mpi_win_unlock_all_f08_(F *w, F *ierr) {
  WIN_SYNC(mpi_win_unlock_all_f08_, Win_unlock_all, w, -1, (w, ie_));
}
void mpi_win_flush_f08_(F *rank, F *w, F *ierr) {
  WIN_SYNC(mpi_win_flush_f08_, Win_flush, w, *rank, (rank, w, ie_));
}
void mpi_win_flush_all_f08_(F *w, F *ierr) {
  WIN_SYNC(mpi_win_flush_all_f08_, Win_flush_all, w, -1, (w, ie_));
}
void mpi_win_start_f08_(F *g, F *a, F *w, F *ierr) {
  WIN_SYNC(mpi_win_start_f08_, Win_start, w, -1, (g, a, w, ie_));
}
void mpi_win_complete_f08_(F *w, F *ierr) {
  WIN_SYNC(mpi_win_complete_f08_, Win_complete, w, -1, (w, ie_));
}
void mpi_win_post_f08_(F *g, F *a, F *w, F *ierr) {
  WIN_SYNC(mpi_win_post_f08_, Win_post, w, -1, (g, a, w, ie_));
}
void mpi_win_wait_f08_(F *w, F *ierr) { WIN_SYNC(mpi_win_wait_f08_, Win_wait, w, -1, (w, ie_)); }

/* ---- communicators ------------------------------------------------------------------------- */

/* A creation over parent *c, the new communicator in *made: recorded, then given its id from the
 * parent's (gr__mt_comm_made), as wrap.c's MAKE. */
#define MAKE(sym, kind, c, made, args)                                                             \
  do {                                                                                             \
    IERR;                                                                                          \
    __typeof__(&sym) fn_ = NEXTF(sym);                                                             \
    MPI_Comm parent_ = COMM(c);                                                                    \
    gr__mt_rec r_;                                                                                 \
    if (!gr__mt_begin(&r_, kind, parent_, 0, MPI_DATATYPE_NULL, -1, -1, -1)) {                     \
      fn_ args;                                                                                    \
      return;                                                                                      \
    }                                                                                              \
    fn_ args;                                                                                      \
    gr__mt_end(&r_, *ie_);                                                                         \
    if (*ie_ == MPI_SUCCESS) gr__mt_comm_made(parent_, COMM(made));                                \
  } while (0)

void mpi_comm_dup_f08_(F *c, F *n, F *ierr) {
  MAKE(mpi_comm_dup_f08_, K(Comm_dup), c, n, (c, n, ie_));
}
void mpi_comm_dup_with_info_f08_(F *c, F *info, F *n, F *ierr) {
  MAKE(mpi_comm_dup_with_info_f08_, K(Comm_dup_with_info), c, n, (c, info, n, ie_));
}
void mpi_comm_split_f08_(F *c, F *color, F *key, F *n, F *ierr) {
  MAKE(mpi_comm_split_f08_, K(Comm_split), c, n, (c, color, key, n, ie_));
}
void mpi_comm_split_type_f08_(F *c, F *type, F *key, F *info, F *n, F *ierr) {
  MAKE(mpi_comm_split_type_f08_, K(Comm_split_type), c, n, (c, type, key, info, n, ie_));
}
void mpi_comm_create_f08_(F *c, F *g, F *n, F *ierr) {
  MAKE(mpi_comm_create_f08_, K(Comm_create), c, n, (c, g, n, ie_));
}
void mpi_comm_create_group_f08_(F *c, F *g, F *tag, F *n, F *ierr) {
  /* collective over the group only: as in wrap.c, recorded, and the new communicator found on
   * first use */
  RECORD(mpi_comm_create_group_f08_, K(Comm_create_group), COMM(c), 0, MPI_DATATYPE_NULL, -1, -1,
         *tag, (c, g, tag, n, ie_));
}
void mpi_cart_create_f08_(F *c, F *nd, F *dims, F *periods, F *reorder, F *n, F *ierr) {
  MAKE(mpi_cart_create_f08_, K(Cart_create), c, n, (c, nd, dims, periods, reorder, n, ie_));
}
void mpi_cart_sub_f08_(F *c, F *remain, F *n, F *ierr) {
  MAKE(mpi_cart_sub_f08_, K(Cart_sub), c, n, (c, remain, n, ie_));
}
void mpi_graph_create_f08_(F *c, F *nn, F *index, F *edges, F *reorder, F *n, F *ierr) {
  MAKE(mpi_graph_create_f08_, K(Graph_create), c, n, (c, nn, index, edges, reorder, n, ie_));
}
void mpi_dist_graph_create_f08_(F *c, F *nn, F *src, F *deg, F *dst, D *w, F *info, F *reorder,
                                F *n, F *ierr) {
  MAKE(mpi_dist_graph_create_f08_, K(Dist_graph_create), c, n,
       (c, nn, src, deg, dst, w, info, reorder, n, ie_));
}
void mpi_dist_graph_create_adjacent_f08_(F *c, F *indeg, F *src, D *sw, F *outdeg, F *dst, D *dw,
                                         F *info, F *reorder, F *n, F *ierr) {
  MAKE(mpi_dist_graph_create_adjacent_f08_, K(Dist_graph_create_adjacent), c, n,
       (c, indeg, src, sw, outdeg, dst, dw, info, reorder, n, ie_));
}
void mpi_intercomm_create_f08_(F *local, F *lleader, F *peer, F *rleader, F *tag, F *n, F *ierr) {
  MAKE(mpi_intercomm_create_f08_, K(Intercomm_create), local, n,
       (local, lleader, peer, rleader, tag, n, ie_));
}
void mpi_intercomm_merge_f08_(F *c, F *high, F *n, F *ierr) {
  MAKE(mpi_intercomm_merge_f08_, K(Intercomm_merge), c, n, (c, high, n, ie_));
}

void mpi_comm_free_f08_(F *c, F *ierr) {
  gr__mt_comm_freed(COMM(c));
  NEXTF(mpi_comm_free_f08_)(c, ierr);
}

/* CHARACTER(LEN=*) name: not NUL-terminated, blank-padded to len (trailing blanks are not part of
 * the name, as MPI_Comm_set_name's Fortran binding says) */
void mpi_comm_set_name_f08_(F *c, const char *name, F *ierr, size_t len) {
  IERR;
  NEXTF(mpi_comm_set_name_f08_)(c, name, ie_, len);
  if (*ie_ != MPI_SUCCESS) return;
  char buf[MPI_MAX_OBJECT_NAME];
  size_t n = len < sizeof buf - 1 ? len : sizeof buf - 1;
  while (n > 0 && name[n - 1] == ' ')
    n--;
  memcpy(buf, name, n);
  buf[n] = '\0';
  gr__mt_comm_named(COMM(c), buf);
}

/* (command, argv, maxprocs, info, root, comm, intercomm, array_of_errcodes, ierror) and the
 * lengths of command and argv's strings */
void mpi_comm_spawn_f08_(const char *cmd, D *argv, F *maxprocs, F *info, F *root, F *c, F *inter,
                         F *errs, F *ierr, size_t cmdlen, size_t argvlen) {
  RECORD(mpi_comm_spawn_f08_, K(Comm_spawn), COMM(c), *maxprocs, MPI_DATATYPE_NULL, *root, -1, -1,
         (cmd, argv, maxprocs, info, root, c, inter, errs, ie_, cmdlen, argvlen));
}

/* windows: remember the communicator their synchronisation waits on */
#define WIN_MADE(sym, c, w, args)                                                                  \
  do {                                                                                             \
    IERR;                                                                                          \
    NEXTF(sym) args;                                                                               \
    if (*ie_ == MPI_SUCCESS) gr__mt_win_made(MPI_Win_f2c(*(w)), COMM(c));                          \
  } while (0)

/* (base, size, disp_unit, info, comm, win): disp_unit is MPI_Aint in the large form */
#define WIN_CREATE(sym, C)                                                                         \
  void sym(D *b, MPI_Aint *size, D *disp, F *info, F *c, F *w, F *ierr) {                          \
    WIN_MADE(sym, c, w, (b, size, disp, info, c, w, ie_));                                         \
  }
TWICE(WIN_CREATE, win_create)

/* (size, disp_unit, info, comm, baseptr, win): baseptr a TYPE(C_PTR) */
#define WIN_ALLOCATE(sym)                                                                          \
  void sym(MPI_Aint *size, D *disp, F *info, F *c, void **b, F *w, F *ierr) {                      \
    WIN_MADE(sym, c, w, (size, disp, info, c, b, w, ie_));                                         \
  }
WIN_ALLOCATE(mpi_win_allocate_f08_)
WIN_ALLOCATE(mpi_win_allocate_f08_large_)
WIN_ALLOCATE(mpi_win_allocate_shared_f08_)
WIN_ALLOCATE(mpi_win_allocate_shared_f08_large_)

void mpi_win_create_dynamic_f08_(F *info, F *c, F *w, F *ierr) {
  WIN_MADE(mpi_win_create_dynamic_f08_, c, w, (info, c, w, ie_));
}

#pragma GCC visibility pop

#endif
