/* Private to the MPI backend: what backend_mpi.c (dispatch, staging, the MPI_I... calls, tags)
 * shares with its own allreduce algorithms, one per file (mpi_allreduce_pair.c two ranks,
 * mpi_allreduce_rd.c recursive doubling, mpi_allreduce_ring.c pipelined ring, mpi_allreduce_rab.c
 * Rabenseifner), each named by its row in path.c. Nothing outside the MPI
 * backend includes this header; the front end sees only gr__coll_ops_mpi. */
#ifndef GR_MPI_BE_H
#define GR_MPI_BE_H

#include "gr_coll.h"
#include "gr_hier.h"
#include "gr_op_map.h"
#include "gr_path.h"
#include "gr_shm.h"

#include <stddef.h>
#include <stdint.h>

typedef struct gr__mpi_ar gr__mpi_ar;
typedef struct gr__mpi_algo gr__mpi_algo;

/* The communicator's state (c->be), from create to destroy. */
typedef struct {
  gr__op_map ops;     /* the user-defined reduction ops (gr_op_map.h) */
  uint64_t rd_calls;  /* own allreduces so far: the same count on every rank */
  uint64_t tag_slots; /* call n uses slot n % tag_slots ... */
  int tags_per_slot;  /* ... and its tags BASE + slot * tags_per_slot + j */
  int ring_tags;      /* one tag per ring segment (tags_per_slot == RING_MAX_SEGS) */
  gr_list live;       /* gr__mpi_ar in flight (their node), oldest first */
  gr__mpi_ar *spare;  /* the last own allreduce's state, finished, kept for the next */
  gr__shm *shm;       /* node-local shared-memory path (gr_shm.h), or NULL */
  /* With shm: a duplicate of c->mpi for the MPI calls of gated calls, which start in the gate's
   * order (the same on every rank) but at another moment on each rank than the collectives the
   * front end posts on c->mpi in between (a group's verdict, a split): MPI_COMM_NULL otherwise. */
  MPI_Comm gate_mpi;
} gr__mpi_be;

/* What a call holds besides its path's state, in gr__mpi_call.flags. */
typedef enum {
  GR__MPI_PRIVATE_COPY = 1u << 0, /* tmp is a malloc'd private copy of an in-place input */
  GR__MPI_STAGED = 1u << 1,       /* tmp / tmp2 are pinned host copies of device buffers */
  GR__MPI_GATED = 1u << 2,        /* a gated call's MPI call: it runs on gate_mpi */
  GR__MPI_PRIVATE_RECV = 1u << 3, /* priv is a malloc'd receive buffer, copied out on completion */
} gr__mpi_call_flag;

/* A call's state, kept in the call record's be_area (no allocation for it). Its path is
 * gr__call.path (gr_path.h). */
typedef struct {
  unsigned flags;   /* gr__mpi_call_flag */
  int gate_status;  /* the shm-gate row: its MPI call, started by another call's test,
                             * failed with this status */
  MPI_Request req;  /* the MPI library row's request */
  void *tmp, *tmp2; /* staging (send side, receive side) or a private copy (tmp) */
  size_t bytes;     /* bytes of tmp2 */
  void *priv;       /* the MPI library row with a timeout: the private receive buffer */
  size_t priv_bytes;
  union {                   /* the handle of the row that runs the call */
    gr__mpi_ar *ar;         /* an own allreduce (rd, ring, rabenseifner) */
    gr__shm_op *shm_op;     /* shm; shm-gate: its agreement round until it passed */
    gr__hier_call *hier_op; /* hier */
    void *row_op;           /* a row that defines its handle in its own file (hier-ml) */
  };
} gr__mpi_call;

_Static_assert(sizeof(gr__mpi_call) <= GR__BE_CALL_BYTES, "gr__mpi_call must fit gr__call.be_area");

static inline gr__mpi_call *gr__mpi_call_of(gr__call *k) {
  return (gr__mpi_call *)(void *)k->be_area;
}

/* Tags. Every own allreduce (recursive doubling, ring, Rabenseifner) gets tags of its own, so that
 * the messages of calls in flight at once cannot match each other whatever order the steps are
 * posted in: call n uses slot n mod S, tags BASE + slot * 32 + j (j = ring segment; the other
 * algorithms use j = 0), where S = (MPI_TAG_UB - BASE + 1) / 32: 67 million slots over Open
 * MPI's ob1 (MPI_TAG_UB 2^31 - 1), 262 thousand over UCX (2^23 - 1). A tag must never be reused
 * while the call that had it is in flight, so when call n finds call n - S still in flight (S
 * calls in flight on one communicator), it first completes that call (bounded by the timeout),
 * and its tag is free again. Below 32 tags per slot (an MPI with MPI_TAG_UB near the standard's
 * minimum of 32767) each call gets one tag and the ring is not segmented. Tag 0 is gr_send/recv's.
 * BASE: */
#define GR__MPI_TAG_BASE 0x4000

#define GR__MPI_AR_REQS 64       /* requests one own allreduce has in flight at most */
#define GR__MPI_RING_MAX_SEGS 32 /* a receive and a send each in reqs */
#define GR__MPI_AR_DONE (-1)     /* gr__mpi_ar.phase once the result is in buf */

/* One of gpurun's own allreduces (point to point, tags of its own) from start to completion: one
 * allocation, the receive buffer at its end, which a finished call leaves to the next (spare). backend_mpi.c allocates it, gives it its
 * call number and tags and keeps the list of those in flight; the algorithm owns the rest. */
struct gr__mpi_ar {
  gr__call *k;
  const gr__mpi_algo *algo;
  int phase; /* the algorithm's step; GR__MPI_AR_DONE when finished */
  int mask;  /* the algorithm's: partner mask (rd, rab), segments (ring) */
  int tag;   /* its first tag (the ring uses tag + segment) */
  int nreqs;
  MPI_Request reqs[GR__MPI_AR_REQS];
  uint64_t recvs;                 /* which of reqs are receives (cancelled by forget) */
  void *buf;                      /* the result buffer */
  void *in;                       /* the receive buffer (data below) */
  const void *src;                /* the input (== buf when in place) */
  int seg[GR__MPI_RING_MAX_SEGS]; /* ring: segment j at step seg[j] / 2, low bit = reduced */
  uint64_t callno;                /* its number among own allreduces, which picks its tags */
  gr_list_node node;              /* its place in the list of those in flight */
  int live;                       /* on that list */
  size_t in_cap;                  /* bytes of data */
  max_align_t data[];
};

/* An allreduce algorithm: how big its receive buffer is, how it starts, how it progresses. Its
 * row in the MPI backend's table (path.c, OWN_ALLREDUCE) names it and says which calls it serves
 * (sizes, rank counts: gr__serves); it sees only allreduces of count > 0 on two or more ranks
 * with a timeout (not blocking_ok) that lie in those numbers. */
struct gr__mpi_algo {
  const char *name;
  size_t (*in_bytes)(const gr__call *k, const gr__mpi_be *b);
  /* s: the input, r: the result (s == r in place); a->k, tag, callno, in are set. */
  gr_status (*start)(gr__mpi_ar *a, const void *s, void *r);
  /* Progress; *done once the result is in a->buf (then phase = GR__MPI_AR_DONE). */
  gr_status (*test)(gr__mpi_ar *a, int *done);
  /* Optional: stop a call that will never complete (timeout, abort); return 1 when nothing writes
   * into a or the buffers any more (a is then freed), 0 to leave a allocated. NULL: the receives
   * in reqs (those in recvs) are cancelled and the sends let go, then a is freed. */
  int (*forget)(gr__mpi_ar *a);
};

/* Allreduces of up to this many bytes go by recursive doubling; above, the ring or Rabenseifner. */
#define GR__MPI_RD_MAX_BYTES 32768

/* The MPI backend's rows (backend_mpi.c; the hierarchical one in mpi_path_hier.c) and what the own
 * allreduces' rows share (path.c builds one row per algorithm on these, impl = its gr__mpi_algo,
 * and declares the algorithm there). */
extern const gr__path gr__path_shm_window, gr__path_shm, gr__path_shm_gate, gr__path_hier,
    gr__path_mpi_lib;
int gr__mpi_own_present(const gr_comm *c);
int gr__mpi_own_takes(const gr__path *p, const gr__call *k);
gr_status gr__mpi_own_post(const gr__path *p, gr__call *k, const void *s, void *r, int *done);
gr_status gr__mpi_own_test(gr__call *k, int *done);
int gr__mpi_own_forget(gr__call *k);
/* gr__coll_ops.progress: the oldest own allreduces in flight on c. */
void gr__mpi_own_progress(gr_comm *c);
extern const gr__path *const gr__mpi_paths[]; /* path.c */

/* MPI requests given up on (comm_wait.c, "MPI requests given up on"): a request a timed-out call
 * leaves running is handed over with the private buffers it writes (*req becomes MPI_REQUEST_NULL;
 * the buffers are freed once it completed, never while it may write them); gr__mpi_lost says
 * whether some of c's still run (then its MPI objects must not be freed: keep hands a communicator
 * or an op over, to be freed once they completed, 0 when it could not be kept); gr__mpi_reap tests
 * them and frees what nothing uses any more (every destroy, and MPI_Finalize through
 * MPI_COMM_SELF). */
void gr__mpi_abandon(gr_comm *c, MPI_Request *req, void *buf0, void *buf1);
int gr__mpi_lost(const gr_comm *c);
int gr__mpi_keep_comm(const gr_comm *c, MPI_Comm *m);
int gr__mpi_keep_op(const gr_comm *c, MPI_Op *op);
void gr__mpi_reap(void);
/* Shared by the algorithms and the rows (backend_mpi.c). */
/* What a call holds besides its path's state released: its private copy of the input freed, its
 * staging copied back and freed (for a row whose test failed). */
void gr__mpi_call_release(gr__call *k);
int gr__mpi_pof2(int p); /* the largest power of two <= p */
gr_status gr__mpi_rc_fail(gr__call *k, int rc, const char *what);
/* GR_OK for MPI_SUCCESS, else the MPI error string in the communicator's detail. */
static inline gr_status gr__mpi_rc(gr__call *k, int rc, const char *what) {
  return rc == MPI_SUCCESS ? GR_OK : gr__mpi_rc_fail(k, rc, what);
}

#endif
