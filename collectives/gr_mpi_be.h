/* Private to the MPI backend: what backend_mpi.c (dispatch, staging, the MPI_I... calls, tags)
 * shares with its own allreduce algorithms, one per file (mpi_allreduce_rd.c recursive doubling,
 * mpi_allreduce_ring.c pipelined ring, mpi_allreduce_rab.c Rabenseifner). Nothing outside the MPI
 * backend includes this header; the front end sees only gr__coll_ops_mpi. */
#ifndef GR_MPI_BE_H
#define GR_MPI_BE_H

#include "gr_coll.h"
#include "gr_hier.h"
#include "gr_shm.h"

#include <stddef.h>
#include <stdint.h>

typedef struct gr__mpi_ar gr__mpi_ar;
typedef struct gr__mpi_algo gr__mpi_algo;

/* The communicator's state (c->be), from create to destroy. */
typedef struct {
  MPI_Op half_ops[4], bf16_ops[4];   /* SUM, PROD, MIN, MAX */
  MPI_Op own_ops[4];                 /* gpurun's kernels for the native types MPI's ops get wrong */
  uint64_t rd_calls;                 /* own allreduces so far: the same count on every rank */
  uint64_t tag_slots;                /* call n uses slot n % tag_slots ... */
  int tags_per_slot;                 /* ... and its tags TAG_BASE + slot * tags_per_slot + j */
  int ring_tags;                     /* one tag per ring segment (tags_per_slot == RING_MAX_SEGS) */
  gr__mpi_ar *live_head, *live_tail; /* own allreduces in flight, oldest first */
  gr__shm *shm;                      /* node-local shared-memory path (shm_coll.c), or NULL */
  /* With shm: a duplicate of c->mpi for the MPI calls of gated calls, which start in the gate's
   * order (the same on every rank) but at another moment on each rank than the collectives the
   * front end posts on c->mpi in between (a group's verdict, a split): MPI_COMM_NULL otherwise. */
  MPI_Comm gate_mpi;
  gr__hier *hier; /* hierarchical path across nodes (hier.c), or NULL */
} gr__mpi_be;

/* What runs a call and what it holds, in gr__mpi_call.flags. */
typedef enum {
  GR__MPI_PRIVATE_COPY = 1u << 0, /* tmp is a malloc'd private copy of an in-place input */
  GR__MPI_STAGED = 1u << 1,       /* tmp / tmp2 are pinned host copies of device buffers */
  GR__MPI_OWN = 1u << 2,          /* ar: one of gpurun's own allreduces runs the call */
  GR__MPI_SHM = 1u << 3,          /* shm_op: the shared-memory path runs the call */
  GR__MPI_HIER = 1u << 4,         /* hier_op: the hierarchical path runs the call (gr_hier.h) */
  /* reduce, alltoall with a segment: an agreement round there first (gr_shm.h, Agreement) */
  GR__MPI_GATE = 1u << 5,     /* not started yet: shm_op is its round, or NULL once it passed */
  GR__MPI_GATED = 1u << 6,    /* its round passed: post starts the MPI call */
  GR__MPI_GATE_ERR = 1u << 7, /* another call's test started it and that failed: gate_status */
} gr__mpi_call_flag;

/* A call's state, kept in the call record's be_area (no allocation for it). */
typedef struct {
  unsigned flags;           /* gr__mpi_call_flag */
  int gate_status;          /* GR__MPI_GATE_ERR */
  MPI_Request req;          /* the MPI_I... request (no path flag set) */
  void *tmp, *tmp2;         /* staging (send side, receive side) or a private copy (tmp) */
  size_t bytes;             /* bytes of tmp2 */
  union {                   /* one path runs a call: the handle of the one its flag names */
    gr__mpi_ar *ar;         /* GR__MPI_OWN */
    gr__shm_op *shm_op;     /* GR__MPI_SHM */
    gr__hier_call *hier_op; /* GR__MPI_HIER */
  };
} gr__mpi_call;

_Static_assert(sizeof(gr__mpi_call) <= GR__BE_CALL_BYTES, "gr__mpi_call must fit gr__call.be_area");

static inline gr__mpi_call *gr__mpi_call_of(gr__call *k) {
  return (gr__mpi_call *)(void *)k->be_area;
}

#define GR__MPI_AR_REQS 64       /* requests one own allreduce has in flight at most */
#define GR__MPI_RING_MAX_SEGS 32 /* a receive and a send each in reqs */
#define GR__MPI_AR_DONE (-1)     /* gr__mpi_ar.phase once the result is in buf */

/* One of gpurun's own allreduces (point to point, tags of its own) from start to completion: one
 * allocation per call, the receive buffer at its end. backend_mpi.c allocates it, gives it its
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
  gr__mpi_ar *prev, *next;        /* its place in the list of those in flight */
  int live;                       /* on that list */
  max_align_t data[];
};

/* An allreduce algorithm: how big its receive buffer is, how it starts, how it progresses. */
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

extern const gr__mpi_algo gr__mpi_allreduce_rd;   /* mpi_allreduce_rd.c */
extern const gr__mpi_algo gr__mpi_allreduce_ring; /* mpi_allreduce_ring.c */
extern const gr__mpi_algo gr__mpi_allreduce_rab;  /* mpi_allreduce_rab.c */

/* Shared by the algorithms (backend_mpi.c). */
MPI_Datatype gr__mpi_type(gr_dtype t);
int gr__mpi_pof2(int p); /* the largest power of two <= p */
gr_status gr__mpi_rc_fail(gr__call *k, int rc, const char *what);
/* GR_OK for MPI_SUCCESS, else the MPI error string in the communicator's detail. */
static inline gr_status gr__mpi_rc(gr__call *k, int rc, const char *what) {
  return rc == MPI_SUCCESS ? GR_OK : gr__mpi_rc_fail(k, rc, what);
}

#endif
