/* Open MPI's Fortran entry points (gr_mpitrace.h). Open MPI's Fortran bindings call PMPI_* in C
 * (objdump of libmpi_mpifh: ompi_allreduce_f calls PMPI_Allreduce), so the C functions of wrap.c
 * never see a Fortran program's calls. Each binding ends in one function, ompi_<name>_f:
 * mpif.h and `use mpi` call it under the names mpi_<name>_ (and mpi_<name>, mpi_<name>__,
 * MPI_<NAME>), which are its aliases in libmpi_mpifh; `use mpi_f08`'s mpi_<name>_f08_ calls it
 * through the PLT, except where an argument is LOGICAL: Open MPI 4.1's mpi_test_f08_,
 * mpi_testall_f08_, mpi_testany_f08_, mpi_testsome_f08_, mpi_cart_create_f08_, mpi_cart_sub_f08_,
 * mpi_graph_create_f08_, mpi_dist_graph_create[_adjacent]_f08_ and mpi_intercomm_merge_f08_ call
 * the profiling alias pmpi_<name>_ instead (objdump of libmpi_usempif08), which those wrappers
 * define too. The layer defines ompi_<name>_f and the aliases, records, and calls Open MPI's
 * ompi_<name>_f. MPICH's mpif.h and `use mpi` call the C MPI_* functions (libmpichfort:
 * pmpi_allreduce_ calls MPI_Allreduce), which wrap.c records; its mpi_f08 is
 * fortran_mpich_f08.c's.
 *
 * How they are called (Open MPI 4.1's ompi/mpi/fortran/mpif-h/): every argument by reference,
 * INTEGER and handles as MPI_Fint (a handle is an index for PMPI_<Kind>_f2c), LOGICAL as a 4-byte
 * integer (nonzero is true), ierror last, CHARACTER lengths after it as C ints. The any and some
 * forms return indices from 1; a request they complete is freed, and its Fortran handle becomes
 * MPI_REQUEST_NULL's, only when the call succeeds (on an error the binding leaves the Fortran
 * array as it was and the completed requests cannot be told apart: their records stay running).
 *
 * Covered: what wrap.c records for C: init, init_thread and finalize, every collective blocking
 * and not, point to point, probes, every wait and test, one-sided synchronisation, communicator
 * and window creation, split_type, set_name and free. */
#include "gr_mpitrace.h"

#if defined(OMPI_MAJOR_VERSION)

#include <dlfcn.h>
#include <stddef.h>
#include <stdlib.h>

/* the entry points are the library's interface (exports.map); mpi.h marks the C ones itself */
#pragma GCC visibility push(default)

typedef MPI_Fint F;
#define K(name) GR__MPI_##name

/* Open MPI's own definition of ompi_<name>_f, looked up once; under another MPI (the layer then
 * stands aside) its gfortran name. A NULL ierror (the bindings allow one) is replaced by the
 * wrapper's own, so that the outcome can be read: the binding then stores into that instead of
 * nowhere, which the caller cannot tell apart. */
#define FNEXT(name)                                                                                \
  F own_ierr_ = MPI_SUCCESS;                                                                       \
  if (!ierr) ierr = &own_ierr_;                                                                    \
  static __typeof__(&ompi_##name##_f) next_##name;                                                 \
  if (!next_##name) next_##name = (__typeof__(next_##name))dlsym(RTLD_NEXT, "ompi_" #name "_f");   \
  if (!next_##name) next_##name = (__typeof__(next_##name))dlsym(RTLD_NEXT, "mpi_" #name "_");     \
  if (!next_##name) return;

/* The names the Fortran compilers call: gfortran's mpi_x_, and the other manglings. */
#define ALIASES(name, upper, args)                                                                 \
  void mpi_##name args __attribute__((alias("ompi_" #name "_f")));                                 \
  void mpi_##name##_ args __attribute__((alias("ompi_" #name "_f")));                              \
  void mpi_##name##__ args __attribute__((alias("ompi_" #name "_f")));                             \
  void MPI_##upper args __attribute__((alias("ompi_" #name "_f")));

/* An entry point: its prototype, its aliases, then the definition's head (the body follows). */
#define FDEF(name, upper, args)                                                                    \
  void ompi_##name##_f args;                                                                       \
  ALIASES(name, upper, args)                                                                       \
  void ompi_##name##_f args

/* The profiling alias mpi_f08 calls for the bindings with a LOGICAL argument (above). */
#define PALIAS(name, args) void pmpi_##name##_ args __attribute__((alias("ompi_" #name "_f")));

static int on(void) { return __atomic_load_n(&gr__mt_on, __ATOMIC_RELAXED); }
static MPI_Comm comm_of(const F *c) { return NEXT(Comm_f2c)(*c); }
static MPI_Datatype type_of(const F *t) { return NEXT(Type_f2c)(*t); }

/* A C function of libmpi the layer's table does not hold, looked up once (NULL: none). */
static void *c_fn(void **slot, const char *name) {
  void *p = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
  if (!p) {
    p = dlsym(RTLD_NEXT, name);
    if (!p) p = dlsym(RTLD_DEFAULT, name);
    __atomic_store_n(slot, p, __ATOMIC_RELEASE);
  }
  return p;
}

/* A Fortran window's C handle (MPI_WIN_NULL where libmpi has no PMPI_Win_f2c). */
static MPI_Win win_of(const F *w) {
  static void *slot;
  __typeof__(&PMPI_Win_f2c) f2c = (__typeof__(f2c))c_fn(&slot, "PMPI_Win_f2c");
  return f2c ? f2c(*w) : MPI_WIN_NULL;
}

/* Record a blocking call around Open MPI's binding. */
#define FRECORD(kind, comm, count, dtype, root, peer, tag, call)                                   \
  do {                                                                                             \
    gr__mt_rec r_;                                                                                 \
    int on_ = gr__mt_begin(&r_, kind, comm, count, dtype, root, peer, tag);                        \
    call;                                                                                          \
    if (on_) gr__mt_end(&r_, *ierr);                                                               \
  } while (0)

/* A non-blocking start: the record runs until a wait or test completes the request *freq. */
#define FSTART(kind, comm, count, dtype, root, peer, tag, call, freq)                              \
  do {                                                                                             \
    gr__mt_rec r_;                                                                                 \
    int on_ = gr__mt_begin(&r_, kind, comm, count, dtype, root, peer, tag);                        \
    call;                                                                                          \
    if (on_)                                                                                       \
      gr__mt_req_track(&r_, *ierr,                                                                 \
                       *ierr == MPI_SUCCESS ? NEXT(Request_f2c)(*(freq)) : MPI_REQUEST_NULL);      \
  } while (0)

/* ---- init and finalize: the layer starts and stops here for a Fortran program ---------------- */

FDEF(init, INIT, (F * ierr)) {
  FNEXT(init);
  next_init(ierr);
  if (*ierr == MPI_SUCCESS) gr__mt_start();
}

FDEF(init_thread, INIT_THREAD, (F * required, F *provided, F *ierr)) {
  FNEXT(init_thread);
  next_init_thread(required, provided, ierr);
  if (*ierr == MPI_SUCCESS) gr__mt_start();
}

FDEF(finalize, FINALIZE, (F * ierr)) {
  FNEXT(finalize);
  gr__mt_rec r;
  if (gr__mt_begin(&r, K(Finalize), MPI_COMM_WORLD, 0, MPI_DATATYPE_NULL, -1, -1, -1))
    gr__mt_end(&r, MPI_SUCCESS);
  gr__mt_stop();
  next_finalize(ierr);
}

/* ---- collectives -------------------------------------------------------------------------- */

FDEF(barrier, BARRIER, (F * comm, F *ierr)) {
  FNEXT(barrier);
  FRECORD(K(Barrier), comm_of(comm), 0, MPI_DATATYPE_NULL, -1, -1, -1, next_barrier(comm, ierr));
}

FDEF(bcast, BCAST, (char *buf, F *count, F *type, F *root, F *comm, F *ierr)) {
  FNEXT(bcast);
  FRECORD(K(Bcast), comm_of(comm), *count, type_of(type), *root, -1, -1,
          next_bcast(buf, count, type, root, comm, ierr));
}

FDEF(reduce, REDUCE, (char *s, char *r, F *count, F *type, F *op, F *root, F *comm, F *ierr)) {
  FNEXT(reduce);
  FRECORD(K(Reduce), comm_of(comm), *count, type_of(type), *root, -1, -1,
          next_reduce(s, r, count, type, op, root, comm, ierr));
}

FDEF(allreduce, ALLREDUCE, (char *s, char *r, F *count, F *type, F *op, F *comm, F *ierr)) {
  FNEXT(allreduce);
  FRECORD(K(Allreduce), comm_of(comm), *count, type_of(type), -1, -1, -1,
          next_allreduce(s, r, count, type, op, comm, ierr));
}

FDEF(allgather, ALLGATHER, (char *s, F *sn, F *st, char *r, F *rn, F *rt, F *comm, F *ierr)) {
  FNEXT(allgather);
  FRECORD(K(Allgather), comm_of(comm), *rn, type_of(rt), -1, -1, -1,
          next_allgather(s, sn, st, r, rn, rt, comm, ierr));
}

FDEF(alltoall, ALLTOALL, (char *s, F *sn, F *st, char *r, F *rn, F *rt, F *comm, F *ierr)) {
  FNEXT(alltoall);
  FRECORD(K(Alltoall), comm_of(comm), *sn, type_of(st), -1, -1, -1,
          next_alltoall(s, sn, st, r, rn, rt, comm, ierr));
}

FDEF(gather, GATHER, (char *s, F *sn, F *st, char *r, F *rn, F *rt, F *root, F *comm, F *ierr)) {
  FNEXT(gather);
  FRECORD(K(Gather), comm_of(comm), *sn, type_of(st), *root, -1, -1,
          next_gather(s, sn, st, r, rn, rt, root, comm, ierr));
}

FDEF(scatter, SCATTER, (char *s, F *sn, F *st, char *r, F *rn, F *rt, F *root, F *comm, F *ierr)) {
  FNEXT(scatter);
  FRECORD(K(Scatter), comm_of(comm), *rn, type_of(rt), *root, -1, -1,
          next_scatter(s, sn, st, r, rn, rt, root, comm, ierr));
}

FDEF(gatherv, GATHERV,
     (char *s, F *sn, F *st, char *r, F *rn, F *d, F *rt, F *root, F *comm, F *ierr)) {
  FNEXT(gatherv);
  FRECORD(K(Gatherv), comm_of(comm), *sn, type_of(st), *root, -1, -1,
          next_gatherv(s, sn, st, r, rn, d, rt, root, comm, ierr));
}

FDEF(scatterv, SCATTERV,
     (char *s, F *sn, F *d, F *st, char *r, F *rn, F *rt, F *root, F *comm, F *ierr)) {
  FNEXT(scatterv);
  FRECORD(K(Scatterv), comm_of(comm), *rn, type_of(rt), *root, -1, -1,
          next_scatterv(s, sn, d, st, r, rn, rt, root, comm, ierr));
}

FDEF(allgatherv, ALLGATHERV,
     (char *s, F *sn, F *st, char *r, F *rn, F *d, F *rt, F *comm, F *ierr)) {
  FNEXT(allgatherv);
  FRECORD(K(Allgatherv), comm_of(comm), *sn, type_of(st), -1, -1, -1,
          next_allgatherv(s, sn, st, r, rn, d, rt, comm, ierr));
}

FDEF(alltoallv, ALLTOALLV,
     (char *s, F *sn, F *sd, F *st, char *r, F *rn, F *rd, F *rt, F *comm, F *ierr)) {
  FNEXT(alltoallv);
  FRECORD(K(Alltoallv), comm_of(comm), 0, type_of(st), -1, -1, -1,
          next_alltoallv(s, sn, sd, st, r, rn, rd, rt, comm, ierr));
}

FDEF(alltoallw, ALLTOALLW,
     (char *s, F *sn, F *sd, F *st, char *r, F *rn, F *rd, F *rt, F *comm, F *ierr)) {
  FNEXT(alltoallw);
  FRECORD(K(Alltoallw), comm_of(comm), 0, MPI_DATATYPE_NULL, -1, -1, -1,
          next_alltoallw(s, sn, sd, st, r, rn, rd, rt, comm, ierr));
}

FDEF(reduce_scatter, REDUCE_SCATTER, (char *s, char *r, F *rn, F *type, F *op, F *comm, F *ierr)) {
  FNEXT(reduce_scatter);
  FRECORD(K(Reduce_scatter), comm_of(comm), 0, type_of(type), -1, -1, -1,
          next_reduce_scatter(s, r, rn, type, op, comm, ierr));
}

FDEF(reduce_scatter_block, REDUCE_SCATTER_BLOCK,
     (char *s, char *r, F *rn, F *type, F *op, F *comm, F *ierr)) {
  FNEXT(reduce_scatter_block);
  FRECORD(K(Reduce_scatter_block), comm_of(comm), *rn, type_of(type), -1, -1, -1,
          next_reduce_scatter_block(s, r, rn, type, op, comm, ierr));
}

FDEF(scan, SCAN, (char *s, char *r, F *count, F *type, F *op, F *comm, F *ierr)) {
  FNEXT(scan);
  FRECORD(K(Scan), comm_of(comm), *count, type_of(type), -1, -1, -1,
          next_scan(s, r, count, type, op, comm, ierr));
}

FDEF(exscan, EXSCAN, (char *s, char *r, F *count, F *type, F *op, F *comm, F *ierr)) {
  FNEXT(exscan);
  FRECORD(K(Exscan), comm_of(comm), *count, type_of(type), -1, -1, -1,
          next_exscan(s, r, count, type, op, comm, ierr));
}

/* ---- non-blocking collectives: records that run until their request completes -------------- */

FDEF(ibarrier, IBARRIER, (F * comm, F *req, F *ierr)) {
  FNEXT(ibarrier);
  FSTART(K(Ibarrier), comm_of(comm), 0, MPI_DATATYPE_NULL, -1, -1, -1,
         next_ibarrier(comm, req, ierr), req);
}

FDEF(ibcast, IBCAST, (char *buf, F *count, F *type, F *root, F *comm, F *req, F *ierr)) {
  FNEXT(ibcast);
  FSTART(K(Ibcast), comm_of(comm), *count, type_of(type), *root, -1, -1,
         next_ibcast(buf, count, type, root, comm, req, ierr), req);
}

FDEF(ireduce, IREDUCE,
     (char *s, char *r, F *count, F *type, F *op, F *root, F *comm, F *req, F *ierr)) {
  FNEXT(ireduce);
  FSTART(K(Ireduce), comm_of(comm), *count, type_of(type), *root, -1, -1,
         next_ireduce(s, r, count, type, op, root, comm, req, ierr), req);
}

FDEF(iallreduce, IALLREDUCE,
     (char *s, char *r, F *count, F *type, F *op, F *comm, F *req, F *ierr)) {
  FNEXT(iallreduce);
  FSTART(K(Iallreduce), comm_of(comm), *count, type_of(type), -1, -1, -1,
         next_iallreduce(s, r, count, type, op, comm, req, ierr), req);
}

FDEF(igather, IGATHER,
     (char *s, F *sn, F *st, char *r, F *rn, F *rt, F *root, F *comm, F *req, F *ierr)) {
  FNEXT(igather);
  FSTART(K(Igather), comm_of(comm), *sn, type_of(st), *root, -1, -1,
         next_igather(s, sn, st, r, rn, rt, root, comm, req, ierr), req);
}

FDEF(igatherv, IGATHERV,
     (char *s, F *sn, F *st, char *r, F *rn, F *d, F *rt, F *root, F *comm, F *req, F *ierr)) {
  FNEXT(igatherv);
  FSTART(K(Igatherv), comm_of(comm), *sn, type_of(st), *root, -1, -1,
         next_igatherv(s, sn, st, r, rn, d, rt, root, comm, req, ierr), req);
}

FDEF(iscatter, ISCATTER,
     (char *s, F *sn, F *st, char *r, F *rn, F *rt, F *root, F *comm, F *req, F *ierr)) {
  FNEXT(iscatter);
  FSTART(K(Iscatter), comm_of(comm), *rn, type_of(rt), *root, -1, -1,
         next_iscatter(s, sn, st, r, rn, rt, root, comm, req, ierr), req);
}

FDEF(iscatterv, ISCATTERV,
     (char *s, F *sn, F *d, F *st, char *r, F *rn, F *rt, F *root, F *comm, F *req, F *ierr)) {
  FNEXT(iscatterv);
  FSTART(K(Iscatterv), comm_of(comm), *rn, type_of(rt), *root, -1, -1,
         next_iscatterv(s, sn, d, st, r, rn, rt, root, comm, req, ierr), req);
}

FDEF(iallgather, IALLGATHER,
     (char *s, F *sn, F *st, char *r, F *rn, F *rt, F *comm, F *req, F *ierr)) {
  FNEXT(iallgather);
  FSTART(K(Iallgather), comm_of(comm), *rn, type_of(rt), -1, -1, -1,
         next_iallgather(s, sn, st, r, rn, rt, comm, req, ierr), req);
}

FDEF(iallgatherv, IALLGATHERV,
     (char *s, F *sn, F *st, char *r, F *rn, F *d, F *rt, F *comm, F *req, F *ierr)) {
  FNEXT(iallgatherv);
  FSTART(K(Iallgatherv), comm_of(comm), *sn, type_of(st), -1, -1, -1,
         next_iallgatherv(s, sn, st, r, rn, d, rt, comm, req, ierr), req);
}

FDEF(ialltoall, IALLTOALL,
     (char *s, F *sn, F *st, char *r, F *rn, F *rt, F *comm, F *req, F *ierr)) {
  FNEXT(ialltoall);
  FSTART(K(Ialltoall), comm_of(comm), *sn, type_of(st), -1, -1, -1,
         next_ialltoall(s, sn, st, r, rn, rt, comm, req, ierr), req);
}

FDEF(ialltoallv, IALLTOALLV,
     (char *s, F *sn, F *sd, F *st, char *r, F *rn, F *rd, F *rt, F *comm, F *req, F *ierr)) {
  FNEXT(ialltoallv);
  FSTART(K(Ialltoallv), comm_of(comm), 0, type_of(st), -1, -1, -1,
         next_ialltoallv(s, sn, sd, st, r, rn, rd, rt, comm, req, ierr), req);
}

FDEF(ialltoallw, IALLTOALLW,
     (char *s, F *sn, F *sd, F *st, char *r, F *rn, F *rd, F *rt, F *comm, F *req, F *ierr)) {
  FNEXT(ialltoallw);
  FSTART(K(Ialltoallw), comm_of(comm), 0, MPI_DATATYPE_NULL, -1, -1, -1,
         next_ialltoallw(s, sn, sd, st, r, rn, rd, rt, comm, req, ierr), req);
}

FDEF(ireduce_scatter, IREDUCE_SCATTER,
     (char *s, char *r, F *rn, F *type, F *op, F *comm, F *req, F *ierr)) {
  FNEXT(ireduce_scatter);
  FSTART(K(Ireduce_scatter), comm_of(comm), 0, type_of(type), -1, -1, -1,
         next_ireduce_scatter(s, r, rn, type, op, comm, req, ierr), req);
}

FDEF(ireduce_scatter_block, IREDUCE_SCATTER_BLOCK,
     (char *s, char *r, F *rn, F *type, F *op, F *comm, F *req, F *ierr)) {
  FNEXT(ireduce_scatter_block);
  FSTART(K(Ireduce_scatter_block), comm_of(comm), *rn, type_of(type), -1, -1, -1,
         next_ireduce_scatter_block(s, r, rn, type, op, comm, req, ierr), req);
}

FDEF(iscan, ISCAN, (char *s, char *r, F *count, F *type, F *op, F *comm, F *req, F *ierr)) {
  FNEXT(iscan);
  FSTART(K(Iscan), comm_of(comm), *count, type_of(type), -1, -1, -1,
         next_iscan(s, r, count, type, op, comm, req, ierr), req);
}

FDEF(iexscan, IEXSCAN, (char *s, char *r, F *count, F *type, F *op, F *comm, F *req, F *ierr)) {
  FNEXT(iexscan);
  FSTART(K(Iexscan), comm_of(comm), *count, type_of(type), -1, -1, -1,
         next_iexscan(s, r, count, type, op, comm, req, ierr), req);
}

/* ---- point to point ----------------------------------------------------------------------- */

/* the blocking sends: (buf, count, type, dest, tag, comm, ierror) */
#define FSEND(name, upper, kind)                                                                   \
  FDEF(name, upper, (char *b, F *n, F *t, F *dest, F *tag, F *comm, F *ierr)) {                    \
    FNEXT(name);                                                                                   \
    FRECORD(K(kind), comm_of(comm), *n, type_of(t), -1, *dest, *tag,                               \
            next_##name(b, n, t, dest, tag, comm, ierr));                                          \
  }
FSEND(send, SEND, Send)
FSEND(ssend, SSEND, Ssend)
FSEND(bsend, BSEND, Bsend)
FSEND(rsend, RSEND, Rsend)

/* the non-blocking ones: (buf, count, type, peer, tag, comm, request, ierror) */
#define FISEND(name, upper, kind)                                                                  \
  FDEF(name, upper, (char *b, F *n, F *t, F *peer, F *tag, F *comm, F *req, F *ierr)) {            \
    FNEXT(name);                                                                                   \
    FSTART(K(kind), comm_of(comm), *n, type_of(t), -1, *peer, *tag,                                \
           next_##name(b, n, t, peer, tag, comm, req, ierr), req);                                 \
  }
FISEND(isend, ISEND, Isend)
FISEND(issend, ISSEND, Issend)
FISEND(ibsend, IBSEND, Ibsend)
FISEND(irsend, IRSEND, Irsend)
FISEND(irecv, IRECV, Irecv)

FDEF(recv, RECV, (char *b, F *n, F *t, F *src, F *tag, F *comm, F *status, F *ierr)) {
  FNEXT(recv);
  FRECORD(K(Recv), comm_of(comm), *n, type_of(t), -1, *src, *tag,
          next_recv(b, n, t, src, tag, comm, status, ierr));
}

FDEF(sendrecv, SENDRECV,
     (char *sb, F *sn, F *st, F *dest, F *stag, char *rb, F *rn, F *rt, F *src, F *rtag, F *comm,
      F *status, F *ierr)) {
  FNEXT(sendrecv);
  FRECORD(K(Sendrecv), comm_of(comm), *rn, type_of(rt), -1, *src, *rtag,
          next_sendrecv(sb, sn, st, dest, stag, rb, rn, rt, src, rtag, comm, status, ierr));
}

FDEF(sendrecv_replace, SENDRECV_REPLACE,
     (char *b, F *n, F *t, F *dest, F *stag, F *src, F *rtag, F *comm, F *status, F *ierr)) {
  FNEXT(sendrecv_replace);
  FRECORD(K(Sendrecv_replace), comm_of(comm), *n, type_of(t), -1, *src, *rtag,
          next_sendrecv_replace(b, n, t, dest, stag, src, rtag, comm, status, ierr));
}

FDEF(probe, PROBE, (F * src, F *tag, F *comm, F *status, F *ierr)) {
  FNEXT(probe);
  FRECORD(K(Probe), comm_of(comm), 0, MPI_DATATYPE_NULL, -1, *src, *tag,
          next_probe(src, tag, comm, status, ierr));
}

FDEF(mprobe, MPROBE, (F * src, F *tag, F *comm, F *msg, F *status, F *ierr)) {
  FNEXT(mprobe);
  FRECORD(K(Mprobe), comm_of(comm), 0, MPI_DATATYPE_NULL, -1, *src, *tag,
          next_mprobe(src, tag, comm, msg, status, ierr));
}

FDEF(mrecv, MRECV, (char *b, F *n, F *t, F *msg, F *status, F *ierr)) {
  FNEXT(mrecv);
  FRECORD(K(Mrecv), MPI_COMM_NULL, *n, type_of(t), -1, -1, -1,
          next_mrecv(b, n, t, msg, status, ierr));
}

/* ---- waits and tests: they end the records of the requests they complete ---------------------
 * The C handles are taken before the call (PMPI_Request_f2c of each Fortran handle: the binding
 * frees a request it completes). A wait is itself recorded, on the communicator of its first
 * tracked request (gr__mt_begin_wait); a test is not, as in C. */

FDEF(wait, WAIT, (F * req, F *status, F *ierr)) {
  FNEXT(wait);
  MPI_Request before = on() ? NEXT(Request_f2c)(*req) : MPI_REQUEST_NULL;
  gr__mt_rec r;
  int rec = gr__mt_begin_wait(&r, K(Wait), 1, &before);
  next_wait(req, status, ierr);
  if (before != MPI_REQUEST_NULL) gr__mt_req_done(before, *ierr == MPI_SUCCESS);
  if (rec) gr__mt_end(&r, *ierr);
}

FDEF(test, TEST, (F * req, F *flag, F *status, F *ierr)) {
  FNEXT(test);
  MPI_Request before = on() ? NEXT(Request_f2c)(*req) : MPI_REQUEST_NULL;
  next_test(req, flag, status, ierr);
  if (before != MPI_REQUEST_NULL && (*ierr != MPI_SUCCESS || *flag))
    gr__mt_req_done(before, *ierr == MPI_SUCCESS);
}
PALIAS(test, (F * req, F *flag, F *status, F *ierr))

/* An array of n Fortran requests as C handles, on the stack up to GR__MT_REQ_STACK. */
typedef struct {
  MPI_Request stack[GR__MT_REQ_STACK], *v;
  int n;
} freqs;

/* 1: taken (the layer records, n > 0, the memory was there); 0: the call passes through. */
static int freqs_take(freqs *b, const F *n, const F *q) {
  b->v = b->stack;
  b->n = 0;
  if (!on() || *n <= 0) return 0;
  if (*n > GR__MT_REQ_STACK && !(b->v = malloc((size_t)*n * sizeof *b->v))) {
    b->v = b->stack;
    return 0;
  }
  b->n = *n;
  for (int i = 0; i < b->n; i++)
    b->v[i] = NEXT(Request_f2c)(q[i]);
  return 1;
}

static void freqs_drop(freqs *b) {
  if (b->v != b->stack) free(b->v);
}

/* End the records of the m requests a successful any or some call completed: idx holds their
 * indices from 1 (anything outside 1..n is ignored). */
static void freqs_done(const freqs *b, int m, const F *idx) {
  if (m > b->n) m = b->n;
  for (int i = 0; i < m; i++)
    if (idx[i] >= 1 && idx[i] <= b->n) gr__mt_req_done(b->v[idx[i] - 1], 1);
}

FDEF(waitall, WAITALL, (F * n, F *reqs, F *statuses, F *ierr)) {
  FNEXT(waitall);
  freqs b;
  int taken = freqs_take(&b, n, reqs);
  gr__mt_rec r;
  int rec = taken && gr__mt_begin_wait(&r, K(Waitall), b.n, b.v);
  next_waitall(n, reqs, statuses, ierr);
  for (int i = 0; taken && *ierr == MPI_SUCCESS && i < b.n; i++)
    gr__mt_req_done(b.v[i], 1);
  if (rec) gr__mt_end(&r, *ierr);
  freqs_drop(&b);
}

FDEF(testall, TESTALL, (F * n, F *reqs, F *flag, F *statuses, F *ierr)) {
  FNEXT(testall);
  freqs b;
  int taken = freqs_take(&b, n, reqs);
  next_testall(n, reqs, flag, statuses, ierr);
  for (int i = 0; taken && *ierr == MPI_SUCCESS && *flag && i < b.n; i++)
    gr__mt_req_done(b.v[i], 1);
  freqs_drop(&b);
}
PALIAS(testall, (F * n, F *reqs, F *flag, F *statuses, F *ierr))

FDEF(waitany, WAITANY, (F * n, F *reqs, F *idx, F *status, F *ierr)) {
  FNEXT(waitany);
  freqs b;
  int taken = freqs_take(&b, n, reqs);
  gr__mt_rec r;
  int rec = taken && gr__mt_begin_wait(&r, K(Waitany), b.n, b.v);
  next_waitany(n, reqs, idx, status, ierr);
  if (taken && *ierr == MPI_SUCCESS) freqs_done(&b, 1, idx);
  if (rec) gr__mt_end(&r, *ierr);
  freqs_drop(&b);
}

FDEF(testany, TESTANY, (F * n, F *reqs, F *idx, F *flag, F *status, F *ierr)) {
  FNEXT(testany);
  freqs b;
  int taken = freqs_take(&b, n, reqs);
  next_testany(n, reqs, idx, flag, status, ierr);
  if (taken && *ierr == MPI_SUCCESS && *flag) freqs_done(&b, 1, idx);
  freqs_drop(&b);
}
PALIAS(testany, (F * n, F *reqs, F *idx, F *flag, F *status, F *ierr))

FDEF(waitsome, WAITSOME, (F * n, F *reqs, F *outn, F *idx, F *statuses, F *ierr)) {
  FNEXT(waitsome);
  freqs b;
  int taken = freqs_take(&b, n, reqs);
  gr__mt_rec r;
  int rec = taken && gr__mt_begin_wait(&r, K(Waitsome), b.n, b.v);
  next_waitsome(n, reqs, outn, idx, statuses, ierr);
  if (taken && *ierr == MPI_SUCCESS && *outn != MPI_UNDEFINED) freqs_done(&b, *outn, idx);
  if (rec) gr__mt_end(&r, *ierr);
  freqs_drop(&b);
}

FDEF(testsome, TESTSOME, (F * n, F *reqs, F *outn, F *idx, F *statuses, F *ierr)) {
  FNEXT(testsome);
  freqs b;
  int taken = freqs_take(&b, n, reqs);
  next_testsome(n, reqs, outn, idx, statuses, ierr);
  if (taken && *ierr == MPI_SUCCESS && *outn != MPI_UNDEFINED) freqs_done(&b, *outn, idx);
  freqs_drop(&b);
}
PALIAS(testsome, (F * n, F *reqs, F *outn, F *idx, F *statuses, F *ierr))

/* ---- one-sided synchronisation: recorded on the window's communicator --------------------- */

static MPI_Comm win_comm(const F *w) { return on() ? gr__mt_win_comm(win_of(w)) : MPI_COMM_NULL; }

#define FWIN(kind, w, peer, call)                                                                  \
  FRECORD(kind, win_comm(w), 0, MPI_DATATYPE_NULL, -1, peer, -1, call)

FDEF(win_fence, WIN_FENCE, (F * a, F *w, F *ierr)) {
  FNEXT(win_fence);
  FWIN(K(Win_fence), w, -1, next_win_fence(a, w, ierr));
}

FDEF(win_lock, WIN_LOCK, (F * type, F *rank, F *a, F *w, F *ierr)) {
  FNEXT(win_lock);
  FWIN(K(Win_lock), w, *rank, next_win_lock(type, rank, a, w, ierr));
}

FDEF(win_unlock, WIN_UNLOCK, (F * rank, F *w, F *ierr)) {
  FNEXT(win_unlock);
  FWIN(K(Win_unlock), w, *rank, next_win_unlock(rank, w, ierr));
}

FDEF(win_lock_all, WIN_LOCK_ALL, (F * a, F *w, F *ierr)) {
  FNEXT(win_lock_all);
  FWIN(K(Win_lock_all), w, -1, next_win_lock_all(a, w, ierr));
}

FDEF(win_unlock_all, WIN_UNLOCK_ALL, (F * w, F *ierr)) {
  FNEXT(win_unlock_all);
  FWIN(K(Win_unlock_all), w, -1, next_win_unlock_all(w, ierr));
}

FDEF(win_flush, WIN_FLUSH, (F * rank, F *w, F *ierr)) {
  FNEXT(win_flush);
  FWIN(K(Win_flush), w, *rank, next_win_flush(rank, w, ierr));
}

FDEF(win_flush_all, WIN_FLUSH_ALL, (F * w, F *ierr)) {
  FNEXT(win_flush_all);
  FWIN(K(Win_flush_all), w, -1, next_win_flush_all(w, ierr));
}

FDEF(win_start, WIN_START, (F * group, F *a, F *w, F *ierr)) {
  FNEXT(win_start);
  FWIN(K(Win_start), w, -1, next_win_start(group, a, w, ierr));
}

FDEF(win_complete, WIN_COMPLETE, (F * w, F *ierr)) {
  FNEXT(win_complete);
  FWIN(K(Win_complete), w, -1, next_win_complete(w, ierr));
}

FDEF(win_post, WIN_POST, (F * group, F *a, F *w, F *ierr)) {
  FNEXT(win_post);
  FWIN(K(Win_post), w, -1, next_win_post(group, a, w, ierr));
}

FDEF(win_wait, WIN_WAIT, (F * w, F *ierr)) {
  FNEXT(win_wait);
  FWIN(K(Win_wait), w, -1, next_win_wait(w, ierr));
}

/* ---- windows: remember the communicator their synchronisation waits on ---------------------- */

#define FWIN_MADE(call, c, w)                                                                      \
  do {                                                                                             \
    call;                                                                                          \
    if (*ierr == MPI_SUCCESS) gr__mt_win_made(win_of(w), comm_of(c));                              \
  } while (0)

FDEF(win_create, WIN_CREATE, (char *b, MPI_Aint *size, F *disp, F *info, F *c, F *w, F *ierr)) {
  FNEXT(win_create);
  FWIN_MADE(next_win_create(b, size, disp, info, c, w, ierr), c, w);
}

/* baseptr: an INTEGER(MPI_ADDRESS_KIND), or a TYPE(C_PTR) under the names ending in _cptr, which
 * libmpi_mpifh makes aliases of the same binding */
#define CPTR_ALIASES(name, upper, args)                                                            \
  void mpi_##name##_cptr args __attribute__((alias("ompi_" #name "_f")));                          \
  void mpi_##name##_cptr_ args __attribute__((alias("ompi_" #name "_f")));                         \
  void mpi_##name##_cptr__ args __attribute__((alias("ompi_" #name "_f")));                        \
  void MPI_##upper##_CPTR args __attribute__((alias("ompi_" #name "_f")));

FDEF(win_allocate, WIN_ALLOCATE,
     (MPI_Aint * size, F *disp, F *info, F *c, char *b, F *w, F *ierr)) {
  FNEXT(win_allocate);
  FWIN_MADE(next_win_allocate(size, disp, info, c, b, w, ierr), c, w);
}
CPTR_ALIASES(win_allocate, WIN_ALLOCATE,
             (MPI_Aint * size, F *disp, F *info, F *c, char *b, F *w, F *ierr))

FDEF(win_allocate_shared, WIN_ALLOCATE_SHARED,
     (MPI_Aint * size, F *disp, F *info, F *c, char *b, F *w, F *ierr)) {
  FNEXT(win_allocate_shared);
  FWIN_MADE(next_win_allocate_shared(size, disp, info, c, b, w, ierr), c, w);
}
CPTR_ALIASES(win_allocate_shared, WIN_ALLOCATE_SHARED,
             (MPI_Aint * size, F *disp, F *info, F *c, char *b, F *w, F *ierr))

FDEF(win_create_dynamic, WIN_CREATE_DYNAMIC, (F * info, F *c, F *w, F *ierr)) {
  FNEXT(win_create_dynamic);
  FWIN_MADE(next_win_create_dynamic(info, c, w, ierr), c, w);
}

/* ---- communicators ------------------------------------------------------------------------- */

/* A creation over parent: recorded (it is collective over parent and can hang), then the new
 * communicator gets its id from the parent's (gr__mt_comm_made). */
#define FMAKE(kind, comm, made, call)                                                              \
  do {                                                                                             \
    MPI_Comm parent_ = comm_of(comm);                                                              \
    FRECORD(kind, parent_, 0, MPI_DATATYPE_NULL, -1, -1, -1, call);                                \
    if (*ierr == MPI_SUCCESS) gr__mt_comm_made(parent_, comm_of(made));                            \
  } while (0)

FDEF(comm_split, COMM_SPLIT, (F * comm, F *color, F *key, F *newcomm, F *ierr)) {
  FNEXT(comm_split);
  FMAKE(K(Comm_split), comm, newcomm, next_comm_split(comm, color, key, newcomm, ierr));
}

FDEF(comm_split_type, COMM_SPLIT_TYPE, (F * comm, F *type, F *key, F *info, F *newcomm, F *ierr)) {
  FNEXT(comm_split_type);
  FMAKE(K(Comm_split_type), comm, newcomm,
        next_comm_split_type(comm, type, key, info, newcomm, ierr));
}

FDEF(comm_dup, COMM_DUP, (F * comm, F *newcomm, F *ierr)) {
  FNEXT(comm_dup);
  FMAKE(K(Comm_dup), comm, newcomm, next_comm_dup(comm, newcomm, ierr));
}

FDEF(comm_dup_with_info, COMM_DUP_WITH_INFO, (F * comm, F *info, F *newcomm, F *ierr)) {
  FNEXT(comm_dup_with_info);
  FMAKE(K(Comm_dup_with_info), comm, newcomm, next_comm_dup_with_info(comm, info, newcomm, ierr));
}

FDEF(comm_create, COMM_CREATE, (F * comm, F *group, F *newcomm, F *ierr)) {
  FNEXT(comm_create);
  FMAKE(K(Comm_create), comm, newcomm, next_comm_create(comm, group, newcomm, ierr));
}

/* collective over the group only: the parent's count is not the same on every rank, so the new
 * communicator is one the layer finds on first use (as in C) */
FDEF(comm_create_group, COMM_CREATE_GROUP, (F * comm, F *group, F *tag, F *newcomm, F *ierr)) {
  FNEXT(comm_create_group);
  FRECORD(K(Comm_create_group), comm_of(comm), 0, MPI_DATATYPE_NULL, -1, -1, *tag,
          next_comm_create_group(comm, group, tag, newcomm, ierr));
}

/* periods, remain_dims and reorder are LOGICAL */
FDEF(cart_create, CART_CREATE, (F * comm, F *nd, F *dims, F *periods, F *reorder, F *n, F *ierr)) {
  FNEXT(cart_create);
  FMAKE(K(Cart_create), comm, n, next_cart_create(comm, nd, dims, periods, reorder, n, ierr));
}
PALIAS(cart_create, (F * comm, F *nd, F *dims, F *periods, F *reorder, F *n, F *ierr))

FDEF(cart_sub, CART_SUB, (F * comm, F *remain, F *n, F *ierr)) {
  FNEXT(cart_sub);
  FMAKE(K(Cart_sub), comm, n, next_cart_sub(comm, remain, n, ierr));
}
PALIAS(cart_sub, (F * comm, F *remain, F *n, F *ierr))

FDEF(graph_create, GRAPH_CREATE, (F * comm, F *nn, F *index, F *edges, F *reorder, F *n, F *ierr)) {
  FNEXT(graph_create);
  FMAKE(K(Graph_create), comm, n, next_graph_create(comm, nn, index, edges, reorder, n, ierr));
}
PALIAS(graph_create, (F * comm, F *nn, F *index, F *edges, F *reorder, F *n, F *ierr))

FDEF(dist_graph_create, DIST_GRAPH_CREATE,
     (F * comm, F *nn, F *src, F *deg, F *dst, F *w, F *info, F *reorder, F *n, F *ierr)) {
  FNEXT(dist_graph_create);
  FMAKE(K(Dist_graph_create), comm, n,
        next_dist_graph_create(comm, nn, src, deg, dst, w, info, reorder, n, ierr));
}
PALIAS(dist_graph_create,
       (F * comm, F *nn, F *src, F *deg, F *dst, F *w, F *info, F *reorder, F *n, F *ierr))

FDEF(dist_graph_create_adjacent, DIST_GRAPH_CREATE_ADJACENT,
     (F * comm, F *indeg, F *src, F *sw, F *outdeg, F *dst, F *dw, F *info, F *reorder, F *n,
      F *ierr)) {
  FNEXT(dist_graph_create_adjacent);
  FMAKE(K(Dist_graph_create_adjacent), comm, n,
        next_dist_graph_create_adjacent(comm, indeg, src, sw, outdeg, dst, dw, info, reorder, n,
                                        ierr));
}
PALIAS(dist_graph_create_adjacent, (F * comm, F *indeg, F *src, F *sw, F *outdeg, F *dst, F *dw,
                                    F *info, F *reorder, F *n, F *ierr))

FDEF(intercomm_create, INTERCOMM_CREATE,
     (F * local, F *lleader, F *peer, F *rleader, F *tag, F *n, F *ierr)) {
  FNEXT(intercomm_create);
  FMAKE(K(Intercomm_create), local, n,
        next_intercomm_create(local, lleader, peer, rleader, tag, n, ierr));
}

/* high is LOGICAL */
FDEF(intercomm_merge, INTERCOMM_MERGE, (F * comm, F *high, F *n, F *ierr)) {
  FNEXT(intercomm_merge);
  FMAKE(K(Intercomm_merge), comm, n, next_intercomm_merge(comm, high, n, ierr));
}
PALIAS(intercomm_merge, (F * comm, F *high, F *n, F *ierr))

FDEF(comm_free, COMM_FREE, (F * comm, F *ierr)) {
  FNEXT(comm_free);
  gr__mt_comm_freed(comm_of(comm));
  next_comm_free(comm, ierr);
}

/* The name is a CHARACTER(LEN=len), blank-padded: the layer takes it back from MPI once set
 * (PMPI_Comm_get_name), as the binding converted it, rather than reading the Fortran string. */
FDEF(comm_set_name, COMM_SET_NAME, (F * comm, char *name, F *ierr, int len)) {
  FNEXT(comm_set_name);
  next_comm_set_name(comm, name, ierr, len);
  if (*ierr != MPI_SUCCESS || !on()) return;
  static void *slot;
  __typeof__(&PMPI_Comm_get_name) get = (__typeof__(get))c_fn(&slot, "PMPI_Comm_get_name");
  char buf[MPI_MAX_OBJECT_NAME + 1] = "";
  int n = 0;
  MPI_Comm c = comm_of(comm);
  if (get && get(c, buf, &n) == MPI_SUCCESS) {
    buf[MPI_MAX_OBJECT_NAME] = '\0';
    gr__mt_comm_named(c, buf);
  }
}

/* (command, argv, maxprocs, info, root, comm, intercomm, array_of_errcodes, ierror) and the
 * lengths of command and argv's strings; recorded as a collective over comm, as in C */
FDEF(comm_spawn, COMM_SPAWN,
     (char *cmd, char *argv, F *maxprocs, F *info, F *root, F *comm, F *inter, F *errs, F *ierr,
      int cmdlen, int argvlen)) {
  FNEXT(comm_spawn);
  FRECORD(
      K(Comm_spawn), comm_of(comm), *maxprocs, MPI_DATATYPE_NULL, *root, -1, -1,
      next_comm_spawn(cmd, argv, maxprocs, info, root, comm, inter, errs, ierr, cmdlen, argvlen));
}

#pragma GCC visibility pop

#endif
