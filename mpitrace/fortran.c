/* Open MPI's Fortran entry points (gr_mpitrace.h). Open MPI's Fortran bindings call PMPI_* in C
 * (objdump of libmpi_mpifh: ompi_allreduce_f calls PMPI_Allreduce), so the C functions of wrap.c
 * never see a Fortran program's calls. Each binding ends in one function, ompi_<name>_f:
 * mpif.h and `use mpi` call it under the names mpi_<name>_ (and mpi_<name>, mpi_<name>__,
 * MPI_<NAME>), which are its aliases in libmpi_mpifh; `use mpi_f08`'s mpi_<name>_f08_ calls it
 * through the PLT. The layer defines ompi_<name>_f and the aliases, records, and calls Open MPI's
 * ompi_<name>_f. MPICH's Fortran bindings call the C MPI_* functions (libmpichfort:
 * pmpi_allreduce_ calls MPI_Allreduce), which wrap.c records: nothing is needed here for them.
 * Covered: init and finalize, the blocking collectives most codes use, point to point, waits,
 * communicator split, dup and free. */
#include "gr_mpitrace.h"

#if defined(OMPI_MAJOR_VERSION)

#include <dlfcn.h>
#include <stddef.h>

/* the entry points are the library's interface (exports.map); mpi.h marks the C ones itself */
#pragma GCC visibility push(default)

/* Open MPI's own definition of ompi_<name>_f, looked up once; under another MPI (the layer then
 * stands aside) its gfortran name. */
#define FNEXT(name)                                                                                \
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

typedef MPI_Fint F;

static MPI_Comm comm_of(const F *c) { return NEXT(Comm_f2c)(*c); }
static MPI_Datatype type_of(const F *t) { return NEXT(Type_f2c)(*t); }

/* Record a blocking call around Open MPI's binding. */
#define FRECORD(kind, comm, count, dtype, root, peer, tag, call)                                   \
  do {                                                                                             \
    gr__mt_rec r_;                                                                                 \
    int on_ = gr__mt_begin(&r_, kind, comm, count, dtype, root, peer, tag);                        \
    call;                                                                                          \
    if (on_) gr__mt_end(&r_, *ierr);                                                               \
  } while (0)

/* ---- init and finalize: the layer starts and stops here for a Fortran program ---------------- */

void ompi_init_f(F *ierr);
void ompi_init_f(F *ierr) {
  FNEXT(init);
  next_init(ierr);
  if (*ierr == MPI_SUCCESS) gr__mt_start();
}
ALIASES(init, INIT, (F * ierr))

void ompi_init_thread_f(F *required, F *provided, F *ierr);
void ompi_init_thread_f(F *required, F *provided, F *ierr) {
  FNEXT(init_thread);
  next_init_thread(required, provided, ierr);
  if (*ierr == MPI_SUCCESS) gr__mt_start();
}
ALIASES(init_thread, INIT_THREAD, (F * required, F *provided, F *ierr))

void ompi_finalize_f(F *ierr);
void ompi_finalize_f(F *ierr) {
  FNEXT(finalize);
  gr__mt_rec r;
  if (gr__mt_begin(&r, GR__MPI_Finalize, MPI_COMM_WORLD, 0, MPI_DATATYPE_NULL, -1, -1, -1))
    gr__mt_end(&r, MPI_SUCCESS);
  gr__mt_stop();
  next_finalize(ierr);
}
ALIASES(finalize, FINALIZE, (F * ierr))

/* ---- collectives -------------------------------------------------------------------------- */

void ompi_barrier_f(F *comm, F *ierr);
void ompi_barrier_f(F *comm, F *ierr) {
  FNEXT(barrier);
  FRECORD(GR__MPI_Barrier, comm_of(comm), 0, MPI_DATATYPE_NULL, -1, -1, -1,
          next_barrier(comm, ierr));
}
ALIASES(barrier, BARRIER, (F * comm, F *ierr))

void ompi_bcast_f(char *buf, F *count, F *type, F *root, F *comm, F *ierr);
void ompi_bcast_f(char *buf, F *count, F *type, F *root, F *comm, F *ierr) {
  FNEXT(bcast);
  FRECORD(GR__MPI_Bcast, comm_of(comm), *count, type_of(type), *root, -1, -1,
          next_bcast(buf, count, type, root, comm, ierr));
}
ALIASES(bcast, BCAST, (char *buf, F *count, F *type, F *root, F *comm, F *ierr))

void ompi_reduce_f(char *s, char *r, F *count, F *type, F *op, F *root, F *comm, F *ierr);
void ompi_reduce_f(char *s, char *r, F *count, F *type, F *op, F *root, F *comm, F *ierr) {
  FNEXT(reduce);
  FRECORD(GR__MPI_Reduce, comm_of(comm), *count, type_of(type), *root, -1, -1,
          next_reduce(s, r, count, type, op, root, comm, ierr));
}
ALIASES(reduce, REDUCE, (char *s, char *r, F *count, F *type, F *op, F *root, F *comm, F *ierr))

void ompi_allreduce_f(char *s, char *r, F *count, F *type, F *op, F *comm, F *ierr);
void ompi_allreduce_f(char *s, char *r, F *count, F *type, F *op, F *comm, F *ierr) {
  FNEXT(allreduce);
  FRECORD(GR__MPI_Allreduce, comm_of(comm), *count, type_of(type), -1, -1, -1,
          next_allreduce(s, r, count, type, op, comm, ierr));
}
ALIASES(allreduce, ALLREDUCE, (char *s, char *r, F *count, F *type, F *op, F *comm, F *ierr))

void ompi_allgather_f(char *s, F *sn, F *st, char *r, F *rn, F *rt, F *comm, F *ierr);
void ompi_allgather_f(char *s, F *sn, F *st, char *r, F *rn, F *rt, F *comm, F *ierr) {
  FNEXT(allgather);
  FRECORD(GR__MPI_Allgather, comm_of(comm), *rn, type_of(rt), -1, -1, -1,
          next_allgather(s, sn, st, r, rn, rt, comm, ierr));
}
ALIASES(allgather, ALLGATHER, (char *s, F *sn, F *st, char *r, F *rn, F *rt, F *comm, F *ierr))

void ompi_alltoall_f(char *s, F *sn, F *st, char *r, F *rn, F *rt, F *comm, F *ierr);
void ompi_alltoall_f(char *s, F *sn, F *st, char *r, F *rn, F *rt, F *comm, F *ierr) {
  FNEXT(alltoall);
  FRECORD(GR__MPI_Alltoall, comm_of(comm), *sn, type_of(st), -1, -1, -1,
          next_alltoall(s, sn, st, r, rn, rt, comm, ierr));
}
ALIASES(alltoall, ALLTOALL, (char *s, F *sn, F *st, char *r, F *rn, F *rt, F *comm, F *ierr))

void ompi_gather_f(char *s, F *sn, F *st, char *r, F *rn, F *rt, F *root, F *comm, F *ierr);
void ompi_gather_f(char *s, F *sn, F *st, char *r, F *rn, F *rt, F *root, F *comm, F *ierr) {
  FNEXT(gather);
  FRECORD(GR__MPI_Gather, comm_of(comm), *sn, type_of(st), *root, -1, -1,
          next_gather(s, sn, st, r, rn, rt, root, comm, ierr));
}
ALIASES(gather, GATHER, (char *s, F *sn, F *st, char *r, F *rn, F *rt, F *root, F *comm, F *ierr))

void ompi_scatter_f(char *s, F *sn, F *st, char *r, F *rn, F *rt, F *root, F *comm, F *ierr);
void ompi_scatter_f(char *s, F *sn, F *st, char *r, F *rn, F *rt, F *root, F *comm, F *ierr) {
  FNEXT(scatter);
  FRECORD(GR__MPI_Scatter, comm_of(comm), *rn, type_of(rt), *root, -1, -1,
          next_scatter(s, sn, st, r, rn, rt, root, comm, ierr));
}
ALIASES(scatter, SCATTER, (char *s, F *sn, F *st, char *r, F *rn, F *rt, F *root, F *comm, F *ierr))

/* ---- point to point ----------------------------------------------------------------------- */

void ompi_send_f(char *b, F *n, F *t, F *dest, F *tag, F *comm, F *ierr);
void ompi_send_f(char *b, F *n, F *t, F *dest, F *tag, F *comm, F *ierr) {
  FNEXT(send);
  FRECORD(GR__MPI_Send, comm_of(comm), *n, type_of(t), -1, *dest, *tag,
          next_send(b, n, t, dest, tag, comm, ierr));
}
ALIASES(send, SEND, (char *b, F *n, F *t, F *dest, F *tag, F *comm, F *ierr))

void ompi_ssend_f(char *b, F *n, F *t, F *dest, F *tag, F *comm, F *ierr);
void ompi_ssend_f(char *b, F *n, F *t, F *dest, F *tag, F *comm, F *ierr) {
  FNEXT(ssend);
  FRECORD(GR__MPI_Ssend, comm_of(comm), *n, type_of(t), -1, *dest, *tag,
          next_ssend(b, n, t, dest, tag, comm, ierr));
}
ALIASES(ssend, SSEND, (char *b, F *n, F *t, F *dest, F *tag, F *comm, F *ierr))

void ompi_recv_f(char *b, F *n, F *t, F *src, F *tag, F *comm, F *status, F *ierr);
void ompi_recv_f(char *b, F *n, F *t, F *src, F *tag, F *comm, F *status, F *ierr) {
  FNEXT(recv);
  FRECORD(GR__MPI_Recv, comm_of(comm), *n, type_of(t), -1, *src, *tag,
          next_recv(b, n, t, src, tag, comm, status, ierr));
}
ALIASES(recv, RECV, (char *b, F *n, F *t, F *src, F *tag, F *comm, F *status, F *ierr))

void ompi_sendrecv_f(char *sb, F *sn, F *st, F *dest, F *stag, char *rb, F *rn, F *rt, F *src,
                     F *rtag, F *comm, F *status, F *ierr);
void ompi_sendrecv_f(char *sb, F *sn, F *st, F *dest, F *stag, char *rb, F *rn, F *rt, F *src,
                     F *rtag, F *comm, F *status, F *ierr) {
  FNEXT(sendrecv);
  FRECORD(GR__MPI_Sendrecv, comm_of(comm), *rn, type_of(rt), -1, *src, *rtag,
          next_sendrecv(sb, sn, st, dest, stag, rb, rn, rt, src, rtag, comm, status, ierr));
}
ALIASES(sendrecv, SENDRECV,
        (char *sb, F *sn, F *st, F *dest, F *stag, char *rb, F *rn, F *rt, F *src, F *rtag, F *comm,
         F *status, F *ierr))

/* A non-blocking start: the record runs until a wait completes the request. */
#define FSTART(kind, comm, count, dtype, peer, tag, call, freq)                                    \
  do {                                                                                             \
    gr__mt_rec r_;                                                                                 \
    int on_ = gr__mt_begin(&r_, kind, comm, count, dtype, -1, peer, tag);                          \
    call;                                                                                          \
    if (on_)                                                                                       \
      gr__mt_req_track(&r_, *ierr,                                                                 \
                       *ierr == MPI_SUCCESS ? NEXT(Request_f2c)(*(freq)) : MPI_REQUEST_NULL);      \
  } while (0)

void ompi_isend_f(char *b, F *n, F *t, F *dest, F *tag, F *comm, F *req, F *ierr);
void ompi_isend_f(char *b, F *n, F *t, F *dest, F *tag, F *comm, F *req, F *ierr) {
  FNEXT(isend);
  FSTART(GR__MPI_Isend, comm_of(comm), *n, type_of(t), *dest, *tag,
         next_isend(b, n, t, dest, tag, comm, req, ierr), req);
}
ALIASES(isend, ISEND, (char *b, F *n, F *t, F *dest, F *tag, F *comm, F *req, F *ierr))

void ompi_irecv_f(char *b, F *n, F *t, F *src, F *tag, F *comm, F *req, F *ierr);
void ompi_irecv_f(char *b, F *n, F *t, F *src, F *tag, F *comm, F *req, F *ierr) {
  FNEXT(irecv);
  FSTART(GR__MPI_Irecv, comm_of(comm), *n, type_of(t), *src, *tag,
         next_irecv(b, n, t, src, tag, comm, req, ierr), req);
}
ALIASES(irecv, IRECV, (char *b, F *n, F *t, F *src, F *tag, F *comm, F *req, F *ierr))

void ompi_wait_f(F *req, F *status, F *ierr);
void ompi_wait_f(F *req, F *status, F *ierr) {
  FNEXT(wait);
  MPI_Request before =
      __atomic_load_n(&gr__mt_on, __ATOMIC_RELAXED) ? NEXT(Request_f2c)(*req) : MPI_REQUEST_NULL;
  gr__mt_rec r;
  int on = gr__mt_begin_wait(&r, GR__MPI_Wait, 1, &before);
  next_wait(req, status, ierr);
  if (before != MPI_REQUEST_NULL) gr__mt_req_done(before, *ierr == MPI_SUCCESS);
  if (on) gr__mt_end(&r, *ierr);
}
ALIASES(wait, WAIT, (F * req, F *status, F *ierr))

void ompi_waitall_f(F *n, F *reqs, F *statuses, F *ierr);
void ompi_waitall_f(F *n, F *reqs, F *statuses, F *ierr) {
  FNEXT(waitall);
  int on = __atomic_load_n(&gr__mt_on, __ATOMIC_RELAXED) && *n > 0 && *n <= GR__MT_REQ_STACK;
  MPI_Request before[GR__MT_REQ_STACK];
  for (int i = 0; on && i < *n; i++)
    before[i] = NEXT(Request_f2c)(reqs[i]);
  gr__mt_rec r;
  int rec = on && gr__mt_begin_wait(&r, GR__MPI_Waitall, *n, before);
  next_waitall(n, reqs, statuses, ierr);
  for (int i = 0; on && *ierr == MPI_SUCCESS && i < *n; i++)
    gr__mt_req_done(before[i], 1);
  if (rec) gr__mt_end(&r, *ierr);
}
ALIASES(waitall, WAITALL, (F * n, F *reqs, F *statuses, F *ierr))

/* ---- communicators ------------------------------------------------------------------------- */

void ompi_comm_split_f(F *comm, F *color, F *key, F *newcomm, F *ierr);
void ompi_comm_split_f(F *comm, F *color, F *key, F *newcomm, F *ierr) {
  FNEXT(comm_split);
  MPI_Comm parent = comm_of(comm);
  FRECORD(GR__MPI_Comm_split, parent, 0, MPI_DATATYPE_NULL, -1, -1, -1,
          next_comm_split(comm, color, key, newcomm, ierr));
  if (*ierr == MPI_SUCCESS) gr__mt_comm_made(parent, comm_of(newcomm));
}
ALIASES(comm_split, COMM_SPLIT, (F * comm, F *color, F *key, F *newcomm, F *ierr))

void ompi_comm_dup_f(F *comm, F *newcomm, F *ierr);
void ompi_comm_dup_f(F *comm, F *newcomm, F *ierr) {
  FNEXT(comm_dup);
  MPI_Comm parent = comm_of(comm);
  FRECORD(GR__MPI_Comm_dup, parent, 0, MPI_DATATYPE_NULL, -1, -1, -1,
          next_comm_dup(comm, newcomm, ierr));
  if (*ierr == MPI_SUCCESS) gr__mt_comm_made(parent, comm_of(newcomm));
}
ALIASES(comm_dup, COMM_DUP, (F * comm, F *newcomm, F *ierr))

void ompi_comm_free_f(F *comm, F *ierr);
void ompi_comm_free_f(F *comm, F *ierr) {
  FNEXT(comm_free);
  gr__mt_comm_freed(comm_of(comm));
  next_comm_free(comm, ierr);
}
ALIASES(comm_free, COMM_FREE, (F * comm, F *ierr))

#pragma GCC visibility pop

#endif
