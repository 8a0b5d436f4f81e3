/* Internal: the MPI layer (libgpurun-mpi.so). gpurun preloads it (launcher/trace.c) into a
 * program that never calls gr_init; it defines MPI's C functions (and Open MPI's Fortran ones),
 * records each call that can block into the flight recorder and the live state
 * (observe/: the same files libgpurun's calls fill), and calls the next definition: another
 * PMPI tool preloaded after it, else the MPI library. docs/architecture.md, "The MPI layer".
 *
 * A wrapper is
 *   gr__mt_rec r;
 *   if (!gr__mt_begin(&r, GR__MPI_Allreduce, comm, count, dtype, -1, -1, -1))
 *     return NEXT(Allreduce)(...);           // off, standing aside, or a call from inside
 *   int rc = NEXT(Allreduce)(...);
 *   gr__mt_end(&r, rc);
 *   return rc;
 * Non-blocking calls hand their request to gr__mt_req_track after the call; the waits and tests
 * end those records (gr__mt_req_*). */
#ifndef GR_MPITRACE_H
#define GR_MPITRACE_H

#include "gr_flight.h"
#include "gr_watchdog.h"

#include <mpi.h>
#include <stdint.h>

/* The C functions the layer calls on (the recorded ones, the ones its own code uses, and the
 * helpers it forwards: observe/'s objects call MPI_Comm_rank and friends by name). */
/* clang-format off */
#define GR__MT_C_FUNCS(X)                                                                          \
  X(Init) X(Init_thread) X(Finalize) X(Initialized) X(Finalized) X(Query_thread) X(Abort)         \
  X(Get_library_version) X(Comm_rank) X(Comm_size) X(Comm_group) X(Comm_test_inter)               \
  X(Comm_set_name) X(Group_translate_ranks) X(Group_size) X(Group_free) X(Type_size)              \
  GR__MT_F2C(X) X(Win_get_group)                                                                  \
  X(Barrier) X(Bcast) X(Reduce) X(Allreduce) X(Gather) X(Gatherv) X(Scatter) X(Scatterv)          \
  X(Allgather) X(Allgatherv) X(Alltoall) X(Alltoallv) X(Alltoallw) X(Reduce_scatter)              \
  X(Reduce_scatter_block) X(Scan) X(Exscan) X(Ibarrier) X(Ibcast) X(Ireduce) X(Iallreduce)        \
  X(Igather) X(Igatherv) X(Iscatter) X(Iscatterv) X(Iallgather) X(Iallgatherv) X(Ialltoall)       \
  X(Ialltoallv) X(Ialltoallw) X(Ireduce_scatter) X(Ireduce_scatter_block) X(Iscan) X(Iexscan)     \
  X(Send) X(Ssend) X(Bsend) X(Rsend) X(Isend) X(Issend) X(Ibsend) X(Irsend) X(Recv) X(Irecv)      \
  X(Sendrecv) X(Sendrecv_replace) X(Probe) X(Mprobe) X(Mrecv)                                     \
  X(Wait) X(Waitall) X(Waitany) X(Waitsome) X(Test) X(Testall) X(Testany) X(Testsome)             \
  X(Win_fence) X(Win_lock) X(Win_unlock) X(Win_lock_all) X(Win_unlock_all) X(Win_flush)           \
  X(Win_flush_all) X(Win_start) X(Win_complete) X(Win_post) X(Win_wait)                           \
  X(Comm_dup) X(Comm_dup_with_info) X(Comm_split) X(Comm_split_type) X(Comm_create)               \
  X(Comm_create_group) X(Cart_create) X(Cart_sub) X(Graph_create) X(Dist_graph_create)            \
  X(Dist_graph_create_adjacent) X(Intercomm_create) X(Intercomm_merge) X(Comm_free)               \
  X(Comm_spawn) X(Win_create) X(Win_allocate) X(Win_allocate_shared) X(Win_create_dynamic)        \
  X(Comm_idup) X(Comm_get_parent) GR__MT_MPI4(X)
/* clang-format on */

/* Open MPI's handle conversions, functions there (fortran.c needs them); macros in MPICH. */
#if defined(OMPI_MAJOR_VERSION)
#define GR__MT_F2C(X) X(Comm_f2c) X(Type_f2c) X(Request_f2c)
#else
#define GR__MT_F2C(X)
#endif

/* MPI 4.0's calls (wrap_bigcount.c, MPI_Comm_idup_with_info in wrap.c): the big-count `_c`
 * form of every call wrap.c records, where the MPI headers declare them (MPICH 4; Open MPI 4.1
 * is MPI 3.1 and has none). */
#if MPI_VERSION >= 4
/* clang-format off */
#define GR__MT_MPI4(X)                                                                             \
  X(Comm_idup_with_info)                                                                          \
  X(Bcast_c) X(Reduce_c) X(Allreduce_c) X(Gather_c) X(Gatherv_c) X(Scatter_c) X(Scatterv_c)       \
  X(Allgather_c) X(Allgatherv_c) X(Alltoall_c) X(Alltoallv_c) X(Alltoallw_c) X(Reduce_scatter_c)  \
  X(Reduce_scatter_block_c) X(Scan_c) X(Exscan_c) X(Ibcast_c) X(Ireduce_c) X(Iallreduce_c)        \
  X(Igather_c) X(Igatherv_c) X(Iscatter_c) X(Iscatterv_c) X(Iallgather_c) X(Iallgatherv_c)        \
  X(Ialltoall_c) X(Ialltoallv_c) X(Ialltoallw_c) X(Ireduce_scatter_c) X(Ireduce_scatter_block_c)  \
  X(Iscan_c) X(Iexscan_c) X(Send_c) X(Ssend_c) X(Bsend_c) X(Rsend_c) X(Isend_c) X(Issend_c)       \
  X(Ibsend_c) X(Irsend_c) X(Recv_c) X(Irecv_c) X(Sendrecv_c) X(Sendrecv_replace_c) X(Mrecv_c)
/* clang-format on */
#else
#define GR__MT_MPI4(X)
#endif

#define GR__MT_NEXT_FIELD(name) __typeof__(&PMPI_##name) name;
typedef struct {
  GR__MT_C_FUNCS(GR__MT_NEXT_FIELD)
} gr__mt_next_table;
#undef GR__MT_NEXT_FIELD

/* The next definitions, resolved on first need (gr__mt_resolve: dlsym RTLD_NEXT, else the MPI
 * library's PMPI_ names; mpi4py loads MPI after the layer's constructor ran). */
extern gr__mt_next_table gr__mt_next;
void gr__mt_resolve(void);
#define NEXT(name)                                                                                 \
  (__builtin_expect(gr__mt_next.name != NULL, 1) ? gr__mt_next.name                                \
                                                 : (gr__mt_resolve(), gr__mt_next.name))

/* The layer's state: 1 while it records (from MPI_Init until MPI_Finalize, unless it stands
 * aside). Read on every call, relaxed. */
extern int gr__mt_on;

typedef struct {
  gr__flight *f; /* NULL: nothing recorded (a call without a communicator) */
  int slot, kind, peer;
  uint64_t seq;
  double start;
  void *comm; /* the layer's communicator entry (layer.c) */
} gr__mt_rec;

/* Begin recording a call on comm (MPI_COMM_NULL: none): 1 when recorded, 0 when it passes
 * through. count is in elements of dtype (MPI_DATATYPE_NULL: none); root, peer (ranks in comm,
 * MPI_ANY_SOURCE/MPI_PROC_NULL as given) and tag -1 when they do not apply. */
int gr__mt_begin(gr__mt_rec *r, int kind, MPI_Comm comm, long long count, MPI_Datatype dtype,
                 int root, int peer, int tag);
/* A wait or test on n requests: recorded on the communicator of the first one the layer tracks
 * (none: no communicator), so that the live state shows where the rank waits. */
int gr__mt_begin_wait(gr__mt_rec *r, int kind, int n, const MPI_Request *reqs);
/* End it: rc MPI_SUCCESS is done, anything else failed. */
void gr__mt_end(gr__mt_rec *r, int rc);

/* Communicators: one made over parent (collectively: every rank of parent calls it, in the same
 * order), and one freed. made may be MPI_COMM_NULL on ranks outside it. */
void gr__mt_comm_made(MPI_Comm parent, MPI_Comm made);
void gr__mt_comm_freed(MPI_Comm comm);
void gr__mt_comm_named(MPI_Comm comm, const char *name);
/* A window's communicator, for its synchronisation calls (MPI_COMM_NULL: unknown). */
void gr__mt_win_made(MPI_Win win, MPI_Comm comm);
MPI_Comm gr__mt_win_comm(MPI_Win win);

/* Non-blocking calls: the record r, begun before the call, stays running until the request
 * completes; track it after a successful start (the record ends failed otherwise). */
void gr__mt_req_track(gr__mt_rec *r, int rc, MPI_Request req);
/* MPI_Comm_idup: the record r, begun on parent, runs until the request completes, as for any
 * non-blocking call; the new communicator is the next creation over parent (counted now: idup
 * is ordered on parent with every other creation), and gets its id <parent>.<n>:<lowest world
 * rank> when the request completes, from *made (MPI writes the handle by then; the standard
 * keeps the pointer valid until completion). */
void gr__mt_req_track_made(gr__mt_rec *r, int rc, MPI_Request req, MPI_Comm parent, MPI_Comm *made);
/* After it: request before[i] completed (with status MPI_SUCCESS or not). */
void gr__mt_req_done(MPI_Request before, int ok);
/* Copies of request arrays, on the stack up to GR__MT_REQ_STACK. */
#define GR__MT_REQ_STACK 64

/* MPI_Init / MPI_Init_thread / MPI_Finalize: start (decide whether to stand aside, say why) and
 * stop recording. */
void gr__mt_start(void);
void gr__mt_stop(void);

/* The calling thread's call in progress, for the watchdog (observe/gr_watchdog.h) and the live
 * state: a kind, the communicator's entry and its start (gr__wall_now, the record's own), or kind
 * -1 when outside MPI. */
void gr__mt_thread_enter(int kind, void *comm, uint64_t seq, double since);
void gr__mt_thread_leave(void);
/* The longest call any thread of this process is inside now: 1 and *out, or 0 when none. */
int gr__mt_longest(gr__inside *out);

#endif
