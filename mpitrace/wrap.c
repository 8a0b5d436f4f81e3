/* The MPI layer's C functions (gr_mpitrace.h): each records its call and calls the next
 * definition. Only what can block, or what a verdict needs, is recorded; the rest of MPI is not
 * defined here and goes to the library directly. */
#include "gr_mt_wrap.h"

#include <stdlib.h>
#include <string.h>

/* The MPI functions are the library's interface (exports.map). Open MPI's mpi.h marks them
 * visible itself, MPICH's does not: say it here for both. */
#pragma GCC visibility push(default)

/* ---- start and end ------------------------------------------------------------------------ */

int MPI_Init(int *argc, char ***argv) {
  int rc = NEXT(Init)(argc, argv);
  if (rc == MPI_SUCCESS) gr__mt_start();
  return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
  int rc = NEXT(Init_thread)(argc, argv, required, provided);
  if (rc == MPI_SUCCESS) gr__mt_start();
  return rc;
}

int MPI_Finalize(void) {
  gr__mt_rec r;
  int on = gr__mt_begin(&r, K(Finalize), MPI_COMM_WORLD, 0, MPI_DATATYPE_NULL, -1, -1, -1);
  if (on) gr__mt_end(&r, MPI_SUCCESS); /* recorded as reached; the call itself ends the layer */
  gr__mt_stop();
  return NEXT(Finalize)();
}

/* observe/'s objects call these by name (the layer links no MPI library): forwarders */
int MPI_Initialized(int *flag) { return NEXT(Initialized)(flag); }
int MPI_Finalized(int *flag) { return NEXT(Finalized)(flag); }
int MPI_Comm_rank(MPI_Comm c, int *rank) { return NEXT(Comm_rank)(c, rank); }
int MPI_Comm_size(MPI_Comm c, int *size) { return NEXT(Comm_size)(c, size); }
int MPI_Get_library_version(char *v, int *len) { return NEXT(Get_library_version)(v, len); }

/* ---- collectives -------------------------------------------------------------------------- */

int MPI_Barrier(MPI_Comm c) {
  RECORD(K(Barrier), c, 0, MPI_DATATYPE_NULL, -1, -1, -1, NEXT(Barrier)(c));
}

int MPI_Ibarrier(MPI_Comm c, MPI_Request *q) {
  START(K(Ibarrier), c, 0, MPI_DATATYPE_NULL, -1, -1, -1, NEXT(Ibarrier)(c, q), q);
}

/* ---- point to point ----------------------------------------------------------------------- */

int MPI_Probe(int src, int tag, MPI_Comm c, MPI_Status *s) {
  RECORD(K(Probe), c, 0, MPI_DATATYPE_NULL, -1, src, tag, NEXT(Probe)(src, tag, c, s));
}
int MPI_Mprobe(int src, int tag, MPI_Comm c, MPI_Message *m, MPI_Status *s) {
  RECORD(K(Mprobe), c, 0, MPI_DATATYPE_NULL, -1, src, tag, NEXT(Mprobe)(src, tag, c, m, s));
}

/* ---- the calls with counts: collectives, sends and receives (wrap_counted.h) --------------- */

typedef int N;
typedef int A;
#define SFX(name) name
#include "wrap_counted.h"

/* ---- waits and tests: they end the records of the requests they complete ---------------------
 * The handles are copied before the call (MPI sets a completed one to MPI_REQUEST_NULL). A wait is
 * itself recorded, on the communicator of its first tracked request (gr__mt_begin_wait). */

static int status_ok(const MPI_Status *s, int rc) {
  if (rc == MPI_SUCCESS) return 1;
  return s && s != MPI_STATUS_IGNORE && s != MPI_STATUSES_IGNORE ? s->MPI_ERROR == MPI_SUCCESS : 0;
}

int MPI_Wait(MPI_Request *q, MPI_Status *s) {
  MPI_Request before = *q;
  gr__mt_rec r;
  if (!gr__mt_begin_wait(&r, K(Wait), 1, &before)) return NEXT(Wait)(q, s);
  int rc = NEXT(Wait)(q, s);
  gr__mt_req_done(before, rc == MPI_SUCCESS);
  gr__mt_end(&r, rc);
  return rc;
}

int MPI_Test(MPI_Request *q, int *flag, MPI_Status *s) {
  MPI_Request before = *q;
  int rc = NEXT(Test)(q, flag, s);
  if (__atomic_load_n(&gr__mt_on, __ATOMIC_RELAXED) && (rc != MPI_SUCCESS || *flag))
    gr__mt_req_done(before, rc == MPI_SUCCESS);
  return rc;
}

/* An array call: copy the handles, call, then end each that completed (now MPI_REQUEST_NULL, or
 * every one for waitall; the indices for the any/some forms). */
#define COPY_REQS(n, q)                                                                            \
  MPI_Request stack_[GR__MT_REQ_STACK], *before = stack_;                                          \
  int on_ = __atomic_load_n(&gr__mt_on, __ATOMIC_RELAXED) && (n) > 0;                              \
  if (on_ && (n) > GR__MT_REQ_STACK && !(before = malloc((size_t)(n) * sizeof *before))) on_ = 0;  \
  if (on_) memcpy(before, q, (size_t)(n) * sizeof *before);

#define FREE_REQS()                                                                                \
  if (before != stack_) free(before);

int MPI_Waitall(int n, MPI_Request q[], MPI_Status s[]) {
  COPY_REQS(n, q);
  gr__mt_rec r;
  int rec = on_ && gr__mt_begin_wait(&r, K(Waitall), n, before);
  int rc = NEXT(Waitall)(n, q, s);
  if (on_)
    for (int i = 0; i < n; i++)
      if (q[i] == MPI_REQUEST_NULL || rc == MPI_SUCCESS)
        gr__mt_req_done(before[i], rc == MPI_SUCCESS ||
                                       (s != MPI_STATUSES_IGNORE && s[i].MPI_ERROR == MPI_SUCCESS));
  if (rec) gr__mt_end(&r, rc);
  if (on_) FREE_REQS();
  return rc;
}

int MPI_Testall(int n, MPI_Request q[], int *flag, MPI_Status s[]) {
  COPY_REQS(n, q);
  int rc = NEXT(Testall)(n, q, flag, s);
  if (on_ && (rc != MPI_SUCCESS || *flag))
    for (int i = 0; i < n; i++)
      if (q[i] == MPI_REQUEST_NULL)
        gr__mt_req_done(before[i], rc == MPI_SUCCESS ||
                                       (s != MPI_STATUSES_IGNORE && s[i].MPI_ERROR == MPI_SUCCESS));
  if (on_) FREE_REQS();
  return rc;
}

int MPI_Waitany(int n, MPI_Request q[], int *idx, MPI_Status *s) {
  COPY_REQS(n, q);
  gr__mt_rec r;
  int rec = on_ && gr__mt_begin_wait(&r, K(Waitany), n, before);
  int rc = NEXT(Waitany)(n, q, idx, s);
  if (on_ && *idx != MPI_UNDEFINED && *idx >= 0 && *idx < n)
    gr__mt_req_done(before[*idx], status_ok(s, rc));
  if (rec) gr__mt_end(&r, rc);
  if (on_) FREE_REQS();
  return rc;
}

int MPI_Testany(int n, MPI_Request q[], int *idx, int *flag, MPI_Status *s) {
  COPY_REQS(n, q);
  int rc = NEXT(Testany)(n, q, idx, flag, s);
  if (on_ && *flag && *idx != MPI_UNDEFINED && *idx >= 0 && *idx < n)
    gr__mt_req_done(before[*idx], status_ok(s, rc));
  if (on_) FREE_REQS();
  return rc;
}

int MPI_Waitsome(int n, MPI_Request q[], int *outn, int idx[], MPI_Status s[]) {
  COPY_REQS(n, q);
  gr__mt_rec r;
  int rec = on_ && gr__mt_begin_wait(&r, K(Waitsome), n, before);
  int rc = NEXT(Waitsome)(n, q, outn, idx, s);
  if (on_ && *outn != MPI_UNDEFINED)
    for (int i = 0; i < *outn; i++)
      if (idx[i] >= 0 && idx[i] < n)
        gr__mt_req_done(before[idx[i]], rc == MPI_SUCCESS || (s != MPI_STATUSES_IGNORE &&
                                                              s[i].MPI_ERROR == MPI_SUCCESS));
  if (rec) gr__mt_end(&r, rc);
  if (on_) FREE_REQS();
  return rc;
}

int MPI_Testsome(int n, MPI_Request q[], int *outn, int idx[], MPI_Status s[]) {
  COPY_REQS(n, q);
  int rc = NEXT(Testsome)(n, q, outn, idx, s);
  if (on_ && *outn != MPI_UNDEFINED)
    for (int i = 0; i < *outn; i++)
      if (idx[i] >= 0 && idx[i] < n)
        gr__mt_req_done(before[idx[i]], rc == MPI_SUCCESS || (s != MPI_STATUSES_IGNORE &&
                                                              s[i].MPI_ERROR == MPI_SUCCESS));
  if (on_) FREE_REQS();
  return rc;
}

/* ---- one-sided synchronisation: recorded on the window's communicator --------------------- */

#define WIN_SYNC(name, win, peer, call)                                                            \
  RECORD(K(name), gr__mt_win_comm(win), 0, MPI_DATATYPE_NULL, -1, peer, -1, call)

int MPI_Win_fence(int a, MPI_Win w) { WIN_SYNC(Win_fence, w, -1, NEXT(Win_fence)(a, w)); }
int MPI_Win_lock(int t, int rank, int a, MPI_Win w) {
  WIN_SYNC(Win_lock, w, rank, NEXT(Win_lock)(t, rank, a, w));
}
int MPI_Win_unlock(int rank, MPI_Win w) {
  WIN_SYNC(Win_unlock, w, rank, NEXT(Win_unlock)(rank, w));
}
int MPI_Win_lock_all(int a, MPI_Win w) { WIN_SYNC(Win_lock_all, w, -1, NEXT(Win_lock_all)(a, w)); }
int MPI_Win_unlock_all(MPI_Win w) { WIN_SYNC(Win_unlock_all, w, -1, NEXT(Win_unlock_all)(w)); }
int MPI_Win_flush(int rank, MPI_Win w) { WIN_SYNC(Win_flush, w, rank, NEXT(Win_flush)(rank, w)); }
int MPI_Win_flush_all(MPI_Win w) { WIN_SYNC(Win_flush_all, w, -1, NEXT(Win_flush_all)(w)); }
int MPI_Win_start(MPI_Group g, int a, MPI_Win w) {
  WIN_SYNC(Win_start, w, -1, NEXT(Win_start)(g, a, w));
}
int MPI_Win_complete(MPI_Win w) { WIN_SYNC(Win_complete, w, -1, NEXT(Win_complete)(w)); }
int MPI_Win_post(MPI_Group g, int a, MPI_Win w) {
  WIN_SYNC(Win_post, w, -1, NEXT(Win_post)(g, a, w));
}
int MPI_Win_wait(MPI_Win w) { WIN_SYNC(Win_wait, w, -1, NEXT(Win_wait)(w)); }

/* ---- communicators ------------------------------------------------------------------------- */

/* A creation over parent: recorded (it is collective over parent and can hang), then the new
 * communicator gets its id from the parent's (gr__mt_comm_made). */
#define MAKE(kind, parent, call, made)                                                             \
  do {                                                                                             \
    gr__mt_rec r_;                                                                                 \
    if (!gr__mt_begin(&r_, kind, parent, 0, MPI_DATATYPE_NULL, -1, -1, -1)) return call;           \
    int rc_ = call;                                                                                \
    gr__mt_end(&r_, rc_);                                                                          \
    if (rc_ == MPI_SUCCESS) gr__mt_comm_made(parent, made);                                        \
    return rc_;                                                                                    \
  } while (0)

int MPI_Comm_dup(MPI_Comm c, MPI_Comm *n) { MAKE(K(Comm_dup), c, NEXT(Comm_dup)(c, n), *n); }
int MPI_Comm_dup_with_info(MPI_Comm c, MPI_Info i, MPI_Comm *n) {
  MAKE(K(Comm_dup_with_info), c, NEXT(Comm_dup_with_info)(c, i, n), *n);
}
/* A non-blocking creation: recorded on the parent from the call until its request completes; the
 * new communicator gets its id then, as the n-th creation over the parent, n counted at the call
 * (gr__mt_req_track_made). */
#define IMAKE(kind, parent, call, made, req)                                                       \
  do {                                                                                             \
    gr__mt_rec r_;                                                                                 \
    if (!gr__mt_begin(&r_, kind, parent, 0, MPI_DATATYPE_NULL, -1, -1, -1)) return call;           \
    int rc_ = call;                                                                                \
    gr__mt_req_track_made(&r_, rc_, *(req), parent, made);                                         \
    return rc_;                                                                                    \
  } while (0)

int MPI_Comm_idup(MPI_Comm c, MPI_Comm *n, MPI_Request *q) {
  IMAKE(K(Comm_idup), c, NEXT(Comm_idup)(c, n, q), n, q);
}
#if MPI_VERSION >= 4
int MPI_Comm_idup_with_info(MPI_Comm c, MPI_Info i, MPI_Comm *n, MPI_Request *q) {
  IMAKE(K(Comm_idup_with_info), c, NEXT(Comm_idup_with_info)(c, i, n, q), n, q);
}
#endif
int MPI_Comm_split(MPI_Comm c, int color, int key, MPI_Comm *n) {
  MAKE(K(Comm_split), c, NEXT(Comm_split)(c, color, key, n), *n);
}
int MPI_Comm_split_type(MPI_Comm c, int type, int key, MPI_Info i, MPI_Comm *n) {
  MAKE(K(Comm_split_type), c, NEXT(Comm_split_type)(c, type, key, i, n), *n);
}
int MPI_Comm_create(MPI_Comm c, MPI_Group g, MPI_Comm *n) {
  MAKE(K(Comm_create), c, NEXT(Comm_create)(c, g, n), *n);
}
int MPI_Comm_create_group(MPI_Comm c, MPI_Group g, int tag, MPI_Comm *n) {
  /* collective over the group only: the parent's count is not the same on every rank, so the
   * new communicator is one the layer finds on first use */
  RECORD(K(Comm_create_group), c, 0, MPI_DATATYPE_NULL, -1, -1, tag,
         NEXT(Comm_create_group)(c, g, tag, n));
}
int MPI_Cart_create(MPI_Comm c, int nd, const int dims[], const int periods[], int reorder,
                    MPI_Comm *n) {
  MAKE(K(Cart_create), c, NEXT(Cart_create)(c, nd, dims, periods, reorder, n), *n);
}
int MPI_Cart_sub(MPI_Comm c, const int remain[], MPI_Comm *n) {
  MAKE(K(Cart_sub), c, NEXT(Cart_sub)(c, remain, n), *n);
}
int MPI_Graph_create(MPI_Comm c, int nn, const int index[], const int edges[], int reorder,
                     MPI_Comm *n) {
  MAKE(K(Graph_create), c, NEXT(Graph_create)(c, nn, index, edges, reorder, n), *n);
}
int MPI_Dist_graph_create(MPI_Comm c, int nn, const int src[], const int deg[], const int dst[],
                          const int w[], MPI_Info i, int reorder, MPI_Comm *n) {
  MAKE(K(Dist_graph_create), c, NEXT(Dist_graph_create)(c, nn, src, deg, dst, w, i, reorder, n),
       *n);
}
int MPI_Dist_graph_create_adjacent(MPI_Comm c, int indeg, const int src[], const int sw[],
                                   int outdeg, const int dst[], const int dw[], MPI_Info i,
                                   int reorder, MPI_Comm *n) {
  MAKE(K(Dist_graph_create_adjacent), c,
       NEXT(Dist_graph_create_adjacent)(c, indeg, src, sw, outdeg, dst, dw, i, reorder, n), *n);
}
int MPI_Intercomm_create(MPI_Comm local, int lleader, MPI_Comm peer, int rleader, int tag,
                         MPI_Comm *n) {
  MAKE(K(Intercomm_create), local, NEXT(Intercomm_create)(local, lleader, peer, rleader, tag, n),
       *n);
}
int MPI_Intercomm_merge(MPI_Comm c, int high, MPI_Comm *n) {
  MAKE(K(Intercomm_merge), c, NEXT(Intercomm_merge)(c, high, n), *n);
}
int MPI_Comm_free(MPI_Comm *c) {
  MPI_Comm old = *c;
  gr__mt_comm_freed(old);
  return NEXT(Comm_free)(c);
}
int MPI_Comm_set_name(MPI_Comm c, const char *name) {
  int rc = NEXT(Comm_set_name)(c, name);
  if (rc == MPI_SUCCESS) gr__mt_comm_named(c, name);
  return rc;
}
int MPI_Comm_spawn(const char *cmd, char *argv[], int maxprocs, MPI_Info info, int root, MPI_Comm c,
                   MPI_Comm *inter, int errs[]) {
  /* recorded as a collective over c; the intercommunicator is named as a communicator made over
   * c, so that one merged from it has the same id on every parent. The children are a job of
   * their own: where they load the layer too, it records them under a job id of theirs
   * (spawned_job in layer.c) or stands aside, never in the parents' files. */
  gr__mt_rec r;
  if (!gr__mt_begin(&r, K(Comm_spawn), c, maxprocs, MPI_DATATYPE_NULL, root, -1, -1))
    return NEXT(Comm_spawn)(cmd, argv, maxprocs, info, root, c, inter, errs);
  int rc = NEXT(Comm_spawn)(cmd, argv, maxprocs, info, root, c, inter, errs);
  gr__mt_end(&r, rc);
  if (rc == MPI_SUCCESS) gr__mt_comm_made(c, *inter);
  return rc;
}

/* windows: remember the communicator their synchronisation waits on */
#define WIN_MADE(call, c, w)                                                                       \
  do {                                                                                             \
    int rc_ = call;                                                                                \
    if (rc_ == MPI_SUCCESS) gr__mt_win_made(*(w), c);                                              \
    return rc_;                                                                                    \
  } while (0)

int MPI_Win_create(void *b, MPI_Aint size, int disp, MPI_Info i, MPI_Comm c, MPI_Win *w) {
  WIN_MADE(NEXT(Win_create)(b, size, disp, i, c, w), c, w);
}
int MPI_Win_allocate(MPI_Aint size, int disp, MPI_Info i, MPI_Comm c, void *b, MPI_Win *w) {
  WIN_MADE(NEXT(Win_allocate)(size, disp, i, c, b, w), c, w);
}
int MPI_Win_allocate_shared(MPI_Aint size, int disp, MPI_Info i, MPI_Comm c, void *b, MPI_Win *w) {
  WIN_MADE(NEXT(Win_allocate_shared)(size, disp, i, c, b, w), c, w);
}
int MPI_Win_create_dynamic(MPI_Info i, MPI_Comm c, MPI_Win *w) {
  WIN_MADE(NEXT(Win_create_dynamic)(i, c, w), c, w);
}

#pragma GCC visibility pop
