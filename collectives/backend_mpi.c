/* The MPI backend: host buffers (device buffers are staged through pinned host memory, since
 * Debian's Open MPI is not CUDA-aware). Every call is an MPI_I... request progressed by the front
 * end's test loop, so that the timeout holds; only when the communicator has no timeout may a call
 * use the blocking MPI routine (post() completes it at once). fp16/bf16 reductions are user-defined
 * MPI ops (float arithmetic, one rounding per step); AVG is a SUM followed by one division.
 *
 * This file is the backend's dispatch and staging: the table gr__coll_ops_mpi, the MPI_I... call
 * of each kind, device-buffer staging, the hand-over to the shared-memory path (gr__shm_*) and to
 * the hierarchical path across nodes (gr__hier_*, hier.c), and for
 * allreduce the choice among gpurun's own algorithms (choose_allreduce, one file each:
 * mpi_allreduce_rd.c, mpi_allreduce_ring.c, mpi_allreduce_rab.c) with the tags and the list of
 * those in flight that they share. gr_mpi_be.h holds the state they share. */
#include "gr_mpi_be.h"

#include "gr_algo_count.h"
#include "gr_config.h"
#include "gr_dtype.h"
#include "gr_error.h"
#include "gr_live.h"
#include "gr_mpi_error.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if GPURUN_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

typedef gr__mpi_be mpi_be;

uint64_t gr__mpi_tag_slots_cap;

/* Small allreduces with a timeout use our own recursive doubling (mpi_allreduce_rd.c) instead of
 * MPI_Iallreduce; larger ones a pipelined ring (mpi_allreduce_ring.c) or, at 4, 8, ... ranks,
 * Rabenseifner (mpi_allreduce_rab.c). See choose_allreduce. */
#define RD_MAX_BYTES 32768 /* 16 chunks each way (reqs holds 64); above, the ring or Rabenseifner */
/* Tags. Every own allreduce (recursive doubling, ring, Rabenseifner) gets tags of its own, so that
 * the messages of calls in flight at once cannot match each other whatever order the steps are
 * posted in: call n uses slot n mod S, tags TAG_BASE + slot * 32 + j (j = ring segment; the other
 * algorithms use j = 0), where S = (MPI_TAG_UB - TAG_BASE + 1) / 32: 67 million slots over Open
 * MPI's ob1 (MPI_TAG_UB 2^31 - 1), 262 thousand over UCX (2^23 - 1). A tag must never be reused
 * while the call that had it is in flight, so when call n finds call n - S still in flight (S
 * calls in flight on one communicator), it first completes that call (bounded by the timeout),
 * and its tag is free again. Below 32 tags per slot (an MPI with MPI_TAG_UB near the standard's
 * minimum of 32767) each call gets one tag and the ring is not segmented. Tag 0 is gr_send/recv's. */
#define TAG_BASE 0x4000
#define RING_MAX_SEGS GR__MPI_RING_MAX_SEGS

#define GR_HALF_OP_(name, dt, op)                                                                  \
  static void name(void *in, void *inout, int *len, MPI_Datatype *t) {                             \
    (void)t;                                                                                       \
    gr__reduce_host(dt, op, inout, in, (size_t)*len);                                              \
  }
GR_HALF_OP_(h_sum, GR_FLOAT16, GR_SUM)
GR_HALF_OP_(h_prod, GR_FLOAT16, GR_PROD)
GR_HALF_OP_(h_min, GR_FLOAT16, GR_MIN)
GR_HALF_OP_(h_max, GR_FLOAT16, GR_MAX)
GR_HALF_OP_(b_sum, GR_BFLOAT16, GR_SUM)
GR_HALF_OP_(b_prod, GR_BFLOAT16, GR_PROD)
GR_HALF_OP_(b_min, GR_BFLOAT16, GR_MIN)
GR_HALF_OP_(b_max, GR_BFLOAT16, GR_MAX)

/* gpurun's own kernels behind an MPI_Op for the native types, for the (type, op) pairs where Open
 * MPI's built-in op answers differently from gpurun's definition (gr_dtype.h): Open MPI 4.1's
 * op/avx saturates 8-bit SUM (100 + 100 = 127 instead of -56), and its float MIN/MAX drop a NaN
 * depending on the operand order. */
static gr_dtype native_dtype(MPI_Datatype t) {
  if (t == MPI_INT8_T) return GR_INT8;
  if (t == MPI_UINT8_T) return GR_UINT8;
  if (t == MPI_INT32_T) return GR_INT32;
  if (t == MPI_UINT32_T) return GR_UINT32;
  if (t == MPI_INT64_T) return GR_INT64;
  if (t == MPI_UINT64_T) return GR_UINT64;
  if (t == MPI_FLOAT) return GR_FLOAT32;
  return GR_FLOAT64; /* only the types gr__mpi_type() hands out reach these ops */
}
#define GR_OWN_OP_(name, op)                                                                       \
  static void name(void *in, void *inout, int *len, MPI_Datatype *t) {                             \
    gr__reduce_host(native_dtype(*t), op, inout, in, (size_t)*len);                                \
  }
GR_OWN_OP_(own_sum, GR_SUM)
GR_OWN_OP_(own_prod, GR_PROD)
GR_OWN_OP_(own_min, GR_MIN)
GR_OWN_OP_(own_max, GR_MAX)

/* Whether MPI's built-in op gives gpurun's answer for (t, op): integer SUM/PROD must wrap (8-bit
 * ones do not under op/avx; PROD goes along, as it shares the 8-bit code paths), float MIN/MAX
 * must propagate NaN and order -0 below +0. */
static int builtin_ok(gr_dtype t, gr_op op) {
  if (t == GR_INT8 || t == GR_UINT8) return op == GR_MIN || op == GR_MAX;
  if (t == GR_FLOAT32 || t == GR_FLOAT64) return op != GR_MIN && op != GR_MAX;
  return 1;
}

MPI_Datatype gr__mpi_type(gr_dtype t) {
  switch (t) {
  case GR_INT8:
    return MPI_INT8_T;
  case GR_UINT8:
    return MPI_UINT8_T;
  case GR_INT32:
    return MPI_INT32_T;
  case GR_UINT32:
    return MPI_UINT32_T;
  case GR_INT64:
    return MPI_INT64_T;
  case GR_UINT64:
    return MPI_UINT64_T;
  case GR_FLOAT32:
    return MPI_FLOAT;
  case GR_FLOAT64:
    return MPI_DOUBLE;
  default:
    return MPI_UINT16_T; /* fp16, bf16: only our own ops touch the bits */
  }
}

static MPI_Op mpi_op(const mpi_be *b, gr_dtype t, gr_op op) {
  int i = op == GR_AVG ? GR_SUM : (int)op;
  if (t == GR_FLOAT16) return b->half_ops[i];
  if (t == GR_BFLOAT16) return b->bf16_ops[i];
  if (!builtin_ok(t, (gr_op)i)) return b->own_ops[i];
  switch (i) {
  case GR_PROD:
    return MPI_PROD;
  case GR_MIN:
    return MPI_MIN;
  case GR_MAX:
    return MPI_MAX;
  default:
    return MPI_SUM;
  }
}

static gr_status mpi_create(gr_comm *c, double deadline) {
  (void)deadline;
  mpi_be *b = calloc(1, sizeof *b);
  if (!b) return gr__comm_err(c, GR_ERR_NOMEM, "out of memory");
  MPI_User_function *h[4] = {h_sum, h_prod, h_min, h_max}, *bf[4] = {b_sum, b_prod, b_min, b_max};
  MPI_User_function *own[4] = {own_sum, own_prod, own_min, own_max};
  for (int i = 0; i < 4; i++) {
    MPI_Op_create(h[i], 1, &b->half_ops[i]);
    MPI_Op_create(bf[i], 1, &b->bf16_ops[i]);
    MPI_Op_create(own[i], 1, &b->own_ops[i]);
  }
  int *ub = NULL, flag = 0;
  MPI_Comm_get_attr(c->mpi, MPI_TAG_UB, &ub, &flag);
  uint64_t tags = flag && ub && *ub >= TAG_BASE ? (uint64_t)*ub - TAG_BASE + 1 : 16384;
  b->ring_tags = tags / RING_MAX_SEGS >= 1024;
  b->tags_per_slot = b->ring_tags ? RING_MAX_SEGS : 1;
  b->tag_slots = tags / (uint64_t)b->tags_per_slot;
  if (gr__mpi_tag_slots_cap > 0 && gr__mpi_tag_slots_cap < b->tag_slots)
    b->tag_slots = gr__mpi_tag_slots_cap;
  c->be = b;
  gr__live_create_step(GR_LIVE_STEP_SHM); /* gpurun-top: where a creation waits */
  GR_CHECK(gr__shm_comm_attach(c, &b->shm));
  gr__live_create_step(GR_LIVE_STEP_HIER);
  return gr__hier_attach(c, &b->hier);
}

static gr_status mpi_split(gr_comm *parent, gr_comm *child, int color, int key, double deadline) {
  (void)color, (void)key;
  return child ? mpi_create(child, deadline) : GR_OK;
}

static gr_status mpi_destroy(gr_comm *c, double deadline) {
  (void)deadline;
  mpi_be *b = c->be;
  if (!b) return GR_OK;
  for (int i = 0; i < 4 && !gr__mpi_gone(); i++) {
    MPI_Op_free(&b->half_ops[i]);
    MPI_Op_free(&b->bf16_ops[i]);
    MPI_Op_free(&b->own_ops[i]);
  }
  gr__shm_free(b->shm);
  gr__hier_free(b->hier);
  free(b);
  c->be = NULL;
  return GR_OK;
}

static void mpi_abort(gr_comm *c) {
  /* MPI cannot cancel a collective: the requests stay with the communicator, which is freed (MPI
   * defers that until they finish) at destroy. Nothing else to do. */
  (void)c;
}

static int mpi_gone(const gr_comm *c, char *buf, size_t len) {
  const gr__mpi_be *b = c->be;
  if (len) buf[0] = '\0';
  if (!b) return 0;
  if (b->shm) return gr__shm_gone(b->shm, buf, len);
  return b->hier ? gr__hier_gone(b->hier, buf, len) : 0;
}

int gr__mpi_pof2(int p) {
  int q = 1;
  while (q * 2 <= p)
    q *= 2;
  return q;
}

gr_status gr__mpi_rc_fail(gr__call *k, int rc, const char *what) {
  char s[MPI_MAX_ERROR_STRING];
  return gr__comm_err(k->comm, GR_ERR_MPI, "%s failed: %s", what, gr__mpi_strerror(rc, s));
}

/* ---- staging of device buffers ----------------------------------------------------------- */

#if GPURUN_HAVE_CUDA
static int on_device(const void *p) {
  if (!p) return 0;
  struct cudaPointerAttributes a;
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError(); /* a host pointer unknown to CUDA: not sticky */
    return 0;
  }
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

#endif

/* Replace device pointers by pinned host copies (tmp = send side, tmp2 = receive side). */
static gr_status stage_in(gr__call *k, const void **s, void **r) {
#if GPURUN_HAVE_CUDA
  gr__mpi_call *m = gr__mpi_call_of(k);
  if (!k->comm->gpu_buffers) return GR_OK;
  size_t sb, rb;
  gr__call_sides(k, &sb, &rb);
  int dr = rb && on_device(*r);
  /* in place (or the send side inside recv): the input starts in the receive buffer */
  int inside =
      dr && sb && (uintptr_t)*s >= (uintptr_t)*r && (uintptr_t)*s + sb <= (uintptr_t)*r + rb;
  int ds = sb && !inside && on_device(*s);
  if (!dr && !ds) return GR_OK;
  m->flags |= GR__MPI_STAGED;
  if (dr) {
    if (cudaMallocHost(&m->tmp2, rb) != cudaSuccess)
      return gr__comm_err(k->comm, GR_ERR_CUDA, "cudaMallocHost(%zu) for staging failed", rb);
    if (inside) {
      if (cudaMemcpy(m->tmp2, *r, rb, cudaMemcpyDeviceToHost) != cudaSuccess)
        return gr__comm_err(k->comm, GR_ERR_CUDA, "cudaMemcpy to the staging buffer failed");
      *s = (char *)m->tmp2 + ((const char *)*s - (const char *)*r);
    }
    m->bytes = rb;
  }
  if (ds) {
    if (cudaMallocHost(&m->tmp, sb) != cudaSuccess)
      return gr__comm_err(k->comm, GR_ERR_CUDA, "cudaMallocHost(%zu) for staging failed", sb);
    if (cudaMemcpy(m->tmp, *s, sb, cudaMemcpyDeviceToHost) != cudaSuccess)
      return gr__comm_err(k->comm, GR_ERR_CUDA, "cudaMemcpy to the staging buffer failed");
    *s = m->tmp;
  }
  if (dr) *r = m->tmp2;
#else
  (void)k, (void)s, (void)r;
#endif
  return GR_OK;
}

static gr_status stage_out(gr__call *k) {
#if GPURUN_HAVE_CUDA
  gr__mpi_call *m = gr__mpi_call_of(k);
  if (!(m->flags & GR__MPI_STAGED)) return GR_OK;
  gr_status st = GR_OK;
  if (m->tmp2 && cudaMemcpy(k->recv, m->tmp2, m->bytes, cudaMemcpyHostToDevice) != cudaSuccess)
    st = gr__comm_err(k->comm, GR_ERR_CUDA, "cudaMemcpy from the staging buffer failed");
  if (m->tmp && !(m->flags & GR__MPI_PRIVATE_COPY)) cudaFreeHost(m->tmp);
  if (m->tmp2) cudaFreeHost(m->tmp2);
  m->tmp = m->tmp2 = NULL;
  m->flags &= ~GR__MPI_STAGED;
  return st;
#else
  (void)k;
  return GR_OK;
#endif
}

/* ---- calls ------------------------------------------------------------------------------- */

static gr_status complete(gr__call *k) {
  gr__mpi_call *m = gr__mpi_call_of(k);
  void *r = (m->flags & GR__MPI_STAGED) && m->tmp2 ? m->tmp2 : k->recv;
  int avg_here = k->op == GR_AVG && (k->kind == GR__ALLREDUCE || k->kind == GR__REDUCE_SCATTER ||
                                     (k->kind == GR__REDUCE && k->root == k->comm->rank));
  if (avg_here) gr__avg_divide(k->dtype, r, k->count, k->comm->size);
  if (m->flags & GR__MPI_PRIVATE_COPY) { /* a private copy of an in-place input */
    free(m->tmp);
    m->tmp = NULL;
    m->flags &= ~GR__MPI_PRIVATE_COPY;
  }
  return stage_out(k);
}

/* A private copy of the input, for in-place forms MPI spells differently than NCCL. */
static gr_status private_copy(gr__call *k, const void **s, size_t bytes) {
  gr__mpi_call *m = gr__mpi_call_of(k);
  if (m->tmp) /* staged send side: already a private copy */
    return GR_OK;
  void *t = malloc(bytes ? bytes : 1);
  if (!t) return gr__comm_err(k->comm, GR_ERR_NOMEM, "out of memory (%zu bytes)", bytes);
  memcpy(t, *s, bytes);
  m->tmp = t;
  m->flags |= GR__MPI_PRIVATE_COPY;
  *s = t;
  return GR_OK;
}

/* ---- gpurun's own allreduces: tags, the list in flight, the choice of algorithm -------------- */

static void live_remove(mpi_be *b, gr__mpi_ar *a) {
  if (!a->live) return;
  if (a->prev)
    a->prev->next = a->next;
  else
    b->live_head = a->next;
  if (a->next)
    a->next->prev = a->prev;
  else
    b->live_tail = a->prev;
  a->prev = a->next = NULL;
  a->live = 0;
}

/* Progress; *done when the result is in a->buf. */
static gr_status ar_test(gr__mpi_ar *a, int *done) {
  if (a->phase == GR__MPI_AR_DONE) {
    *done = 1;
    return GR_OK;
  }
  return a->algo->test(a, done);
}

/* Take the next call number and its tag slot; first complete the call that last had the slot if
 * it is still in flight (see TAG_BASE). */
static gr_status take_slot(gr__mpi_ar *a) {
  gr__call *k = a->k;
  gr_comm *c = k->comm;
  mpi_be *b = c->be;
  uint64_t n = b->rd_calls++;
  double deadline = gr__deadline(c->timeout_s);
  while (b->live_head && b->live_head->callno + b->tag_slots <= n) {
    gr__mpi_ar *old = b->live_head;
    int done = 0;
    for (unsigned spin = 0; !done; spin++) {
      gr_status st = ar_test(old, &done);
      if (st != GR_OK)
        return gr__comm_err(c, st,
                            "allreduce #%llu needs the tags of allreduce #%llu, %llu calls "
                            "earlier and still in flight, which failed: %s",
                            (unsigned long long)k->seq, (unsigned long long)old->k->seq,
                            (unsigned long long)b->tag_slots, c->err);
      if (!done && (spin & 15) == 15 && gr__past(deadline))
        return gr__comm_err(c, GR_ERR_TIMEOUT,
                            "allreduce #%llu needs the tags of allreduce #%llu, "
                            "which is still in flight (%llu own allreduces in flight on one "
                            "communicator) and did not complete in time",
                            (unsigned long long)k->seq, (unsigned long long)old->k->seq,
                            (unsigned long long)b->tag_slots);
    }
    live_remove(b, old); /* finished: its owner's next test completes it */
  }
  a->callno = n;
  a->tag = TAG_BASE + (int)(n % b->tag_slots) * b->tags_per_slot;
  a->prev = b->live_tail;
  a->next = NULL;
  if (b->live_tail)
    b->live_tail->next = a;
  else
    b->live_head = a;
  b->live_tail = a;
  a->live = 1;
  return GR_OK;
}

/* The one place that picks an allreduce algorithm (NULL: MPI's own, MPI_Iallreduce or the blocking
 * MPI_Allreduce). gpurun's own need a timeout to honour (without one MPI's blocking call is the
 * fastest) and at least one element per rank above RD_MAX_BYTES. */
static const gr__mpi_algo *choose_allreduce(const gr__call *k) {
  const gr_comm *c = k->comm;
  size_t bytes = k->count * gr__dtype_size(k->dtype);
  if (k->blocking_ok || c->size <= 1 || k->count == 0) return NULL;
  if (bytes <= RD_MAX_BYTES) return &gr__mpi_allreduce_rd;
  if (k->count < (size_t)c->size) return NULL;
  if (c->size >= 4 && gr__mpi_pof2(c->size) == c->size) return &gr__mpi_allreduce_rab;
  return &gr__mpi_allreduce_ring;
}

/* Start algo on the (staged) buffers: one allocation for its state and receive buffer. */
static gr_status own_start(gr__call *k, const gr__mpi_algo *algo, const void *s, void *r) {
  gr_comm *c = k->comm;
  gr__mpi_call *m = gr__mpi_call_of(k);
  size_t in = algo->in_bytes(k, c->be);
  gr__mpi_ar *a = malloc(sizeof *a + in);
  if (!a) return gr__comm_err(c, GR_ERR_NOMEM, "out of memory (%zu bytes)", in);
  a->k = k;
  a->algo = algo;
  a->in = a->data;
  a->src = s;
  a->nreqs = 0;
  a->recvs = 0;
  a->live = 0;
  gr_status st = take_slot(a);
  if (st != GR_OK) {
    free(a);
    return st;
  }
  m->ar = a;
  m->flags |= GR__MPI_OWN;
  return algo->start(a, s, r);
}

/* ---- calls ------------------------------------------------------------------------------- */

/* gr__coll_ops.carries_refusal: the shared-memory path's descriptor carries it (gr_shm.h), for the
 * calls it runs and for those it gates alike, whatever their size. */
static int mpi_carries_refusal(const gr_comm *c, gr__kind kind) {
  return c->be && gr__shm_agrees(((const mpi_be *)c->be)->shm, kind);
}

/* ---- calls that agree on the segment before their MPI call (gr_shm.h, Agreement) -------------
 * A gated call waits in the segment's FIFO (gr__shm_defer) from its post until its MPI call is
 * started. Starts happen in FIFO order, which is posting order on every rank, whichever call's
 * test finds the rounds passed: MPI needs its collectives started in one order everywhere, and a
 * program may wait for a later call (a group, requests) first. */

static gr_status gate_post(mpi_be *b, gr__call *k) {
  gr__mpi_call *m = gr__mpi_call_of(k);
  if (!gr__shm_defer(b->shm, k)) return gr__comm_err(k->comm, GR_ERR_NOMEM, "out of memory");
  gr_status st = gr__shm_call_post(b->shm, k, NULL, NULL, &m->shm_op);
  if (st != GR_OK) {
    gr__shm_undefer(b->shm, k);
    return st;
  }
  m->flags |= GR__MPI_GATE;
  return GR_OK;
}

static gr_status mpi_post(gr__call *k, int *done);

/* Start the MPI calls of the gated calls whose round passed, oldest first, up to the first one
 * still in its round. One whose round failed leaves the FIFO: its own test reports it. */
static void gate_start_passed(mpi_be *b) {
  gr__call *f;
  while ((f = gr__shm_deferred(b->shm))) {
    gr__mpi_call *m = gr__mpi_call_of(f);
    int failed = 0;
    if (m->shm_op) {
      if (!gr__shm_settled(b->shm, m->shm_op, &failed)) return; /* still in its round */
      if (failed) {
        gr__shm_undefer(b->shm, f);
        continue;
      }
      int d = 0; /* finished and agreed: this releases the op */
      if (gr__shm_call_test(b->shm, f, &m->shm_op, &d) != GR_OK || !d) return;
    }
    gr__shm_undefer(b->shm, f);
    m->flags = (m->flags & ~GR__MPI_GATE) | GR__MPI_GATED;
    f->blocking_ok = 0; /* started from any call's test: never block there */
    int done = 0;
    gr_status st = mpi_post(f, &done);
    if (st != GR_OK) {
      m->flags |= GR__MPI_GATE_ERR;
      m->gate_status = (int)st;
    }
  }
}

/* A gated call's test until its MPI call started (then GR__MPI_GATE is clear). */
static gr_status gate_test(mpi_be *b, gr__call *k) {
  gr__mpi_call *m = gr__mpi_call_of(k);
  if (m->shm_op) {
    int d = 0;
    gr_status st = gr__shm_call_test(b->shm, k, &m->shm_op, &d); /* progresses earlier rounds too */
    if (st != GR_OK) { /* disagreement, or the segment broke: k never starts */
      gr__shm_undefer(b->shm, k);
      m->shm_op = NULL;
      m->flags &= ~GR__MPI_GATE;
      return st;
    }
  }
  gate_start_passed(b);
  if (m->flags & GR__MPI_GATE_ERR) {
    m->flags &= ~GR__MPI_GATE_ERR;
    return (gr_status)m->gate_status;
  }
  return GR_OK;
}

static void gate_forget(mpi_be *b, gr__call *k) {
  gr__mpi_call *m = gr__mpi_call_of(k);
  gr__shm_undefer(b->shm, k);
  m->flags &= ~(GR__MPI_GATE | GR__MPI_GATED);
  /* (one whose round passed waits for an earlier one's round: the sentence names who) */
  gr__shm_call_forget(b->shm, k, &m->shm_op);
}

static gr_status mpi_post(gr__call *k, int *done) {
  gr_comm *c = k->comm;
  mpi_be *b = c->be;
  gr__mpi_call *m = gr__mpi_call_of(k);
  m->req = MPI_REQUEST_NULL;
  if (k->fe_refused) { /* no data: only the descriptor (mpi_carries_refusal said yes) */
    gr_status st = gr__shm_call_post(b->shm, k, NULL, NULL, &m->shm_op);
    if (st == GR_OK) m->flags |= GR__MPI_SHM;
    return st;
  }
  if (k->count > INT_MAX)
    return gr__comm_err(c, GR_ERR_UNSUPPORTED,
                        "count %zu exceeds the MPI backend's limit of "
                        "INT_MAX elements per call; split the call",
                        k->count);
  /* reduce, alltoall: the ranks agree on the segment first; gate_start posts them again */
  if (gr__shm_gates(b->shm, k->kind, k->count, k->dtype) && !(m->flags & GR__MPI_GATED))
    return gate_post(b, k);
  const void *s = k->send;
  void *r = k->recv;
  GR_CHECK(stage_in(k, &s, &r));
  if (gr__shm_takes(b->shm, k->kind, k->count, k->dtype)) {
    if (k->kind == GR__ALLREDUCE) gr__algo_note(GR__ALGO_SHM);
    gr_status st = gr__shm_call_post(b->shm, k, s, r, &m->shm_op);
    if (st != GR_OK)
      stage_out(k);
    else
      m->flags |= GR__MPI_SHM;
    return st;
  }
  if (gr__hier_takes(b->hier, k)) {
    if (k->kind == GR__ALLREDUCE) gr__algo_note(GR__ALGO_HIER);
    gr_status st = gr__hier_call_post(b->hier, k, s, r, &m->hier_op);
    if (st != GR_OK)
      stage_out(k);
    else
      m->flags |= GR__MPI_HIER;
    return st;
  }
  MPI_Datatype dt = gr__mpi_type(k->dtype);
  MPI_Op op = mpi_op(b, k->dtype, k->op);
  int n = (int)k->count, blk = k->blocking_ok, rc = MPI_SUCCESS;
  size_t es = gr__dtype_size(k->dtype), P = (size_t)c->size;
  MPI_Request *q = &m->req;
  const char *what = "";
  switch (k->kind) {
  case GR__ALLREDUCE: {
    const gr__mpi_algo *algo = choose_allreduce(k);
    gr__algo_note(!algo                             ? GR__ALGO_MPI_LIB
                  : algo == &gr__mpi_allreduce_rab  ? GR__ALGO_RABENSEIFNER
                  : algo == &gr__mpi_allreduce_ring ? GR__ALGO_RING
                                                    : GR__ALGO_RD);
    if (algo) {
      gr_status st = own_start(k, algo, s, r);
      if (st != GR_OK) {
        /* requests may be posted into its receive buffer: the state is left allocated */
        if (m->ar) live_remove(b, m->ar);
        stage_out(k);
        return st;
      }
      return GR_OK;
    }
    const void *in = s == r ? MPI_IN_PLACE : s;
    what = "MPI_Iallreduce";
    rc =
        blk ? MPI_Allreduce(in, r, n, dt, op, c->mpi) : MPI_Iallreduce(in, r, n, dt, op, c->mpi, q);
    break;
  }
  case GR__BROADCAST:
    if (c->rank == k->root && s != r && n) memcpy(r, s, k->count * es);
    what = "MPI_Ibcast";
    rc = blk ? MPI_Bcast(r, n, dt, k->root, c->mpi) : MPI_Ibcast(r, n, dt, k->root, c->mpi, q);
    break;
  case GR__REDUCE: {
    const void *in = (c->rank == k->root && s == r) ? MPI_IN_PLACE : s;
    what = "MPI_Ireduce";
    rc = blk ? MPI_Reduce(in, r, n, dt, op, k->root, c->mpi)
             : MPI_Ireduce(in, r, n, dt, op, k->root, c->mpi, q);
    break;
  }
  case GR__ALLGATHER: {
    const void *in = n && s == (char *)r + (size_t)c->rank * k->count * es ? MPI_IN_PLACE : s;
    what = "MPI_Iallgather";
    rc = blk ? MPI_Allgather(in, n, dt, r, n, dt, c->mpi)
             : MPI_Iallgather(in, n, dt, r, n, dt, c->mpi, q);
    break;
  }
  case GR__REDUCE_SCATTER:
    if (n && r == (const char *)s + (size_t)c->rank * k->count * es)
      GR_CHECK(private_copy(k, &s, k->count * es * P));
    what = "MPI_Ireduce_scatter_block";
    rc = blk ? MPI_Reduce_scatter_block(s, r, n, dt, op, c->mpi)
             : MPI_Ireduce_scatter_block(s, r, n, dt, op, c->mpi, q);
    break;
  case GR__ALLTOALL:
    if (s == r && n) GR_CHECK(private_copy(k, &s, k->count * es * P));
    what = "MPI_Ialltoall";
    rc = blk ? MPI_Alltoall(s, n, dt, r, n, dt, c->mpi)
             : MPI_Ialltoall(s, n, dt, r, n, dt, c->mpi, q);
    break;
  case GR__SEND:
    what = "MPI_Isend";
    rc = blk ? MPI_Send(s, n, dt, k->root, GR__P2P_TAG, c->mpi)
             : MPI_Isend(s, n, dt, k->root, GR__P2P_TAG, c->mpi, q);
    break;
  case GR__RECV:
    what = "MPI_Irecv";
    rc = blk ? MPI_Recv(r, n, dt, k->root, GR__P2P_TAG, c->mpi, MPI_STATUS_IGNORE)
             : MPI_Irecv(r, n, dt, k->root, GR__P2P_TAG, c->mpi, q);
    break;
  case GR__BARRIER:
    what = "MPI_Ibarrier";
    rc = blk ? MPI_Barrier(c->mpi) : MPI_Ibarrier(c->mpi, q);
    break;
  default:
    return gr__comm_err(c, GR_ERR_INTERNAL, "unknown call kind %d", (int)k->kind);
  }
  if (rc != MPI_SUCCESS) {
    gr_status st = gr__mpi_rc(k, rc, what);
    if (m->flags & GR__MPI_PRIVATE_COPY) free(m->tmp), m->tmp = NULL;
    stage_out(k);
    return st;
  }
  if (blk) {
    *done = 1;
    return complete(k);
  }
  return GR_OK;
}

/* Progress the oldest own allreduces in flight besides k's: a program that waits for its newest
 * request first would otherwise leave the older ones' messages to pile up, and Open MPI matches
 * every arrival against the whole list of posted receives (16500 requests waited newest first at
 * 3 ranks took 28 s without this, 2 s with it). A call found finished leaves the list; its owner's
 * next test completes it. Errors are left for the owner's own test to report. */
static void progress_oldest(mpi_be *b, gr__mpi_ar *a) {
  gr__mpi_ar *o = b->live_head;
  for (int i = 0; o && i < 16; i++) {
    gr__mpi_ar *next = o->next;
    int done = 0;
    if (o != a && ar_test(o, &done) == GR_OK && done) live_remove(b, o);
    o = next;
  }
}

static void mpi_progress(gr_comm *c) {
  if (c->be) progress_oldest(c->be, NULL);
}

static gr_status mpi_test(gr__call *k, int *done) {
  gr__mpi_call *m = gr__mpi_call_of(k);
  mpi_be *b = k->comm->be;
  if (m->flags & (GR__MPI_GATE | GR__MPI_GATE_ERR)) {
    gr_status st = gate_test(b, k);
    if (st != GR_OK || (m->flags & GR__MPI_GATE)) return st; /* failed, or still waiting */
  }
  if (m->flags & GR__MPI_SHM) {
    gr_status st = gr__shm_call_test(b->shm, k, &m->shm_op, done);
    if (!m->shm_op) m->flags &= ~GR__MPI_SHM;
    if (st == GR_ERR_MISMATCH ||
        st == GR_ERR_INVALID) { /* disagreed or refused: nothing received */
      if (m->flags & GR__MPI_PRIVATE_COPY) {
        free(m->tmp), m->tmp = NULL;
        m->flags &= ~GR__MPI_PRIVATE_COPY;
      }
      stage_out(k);
      return st;
    }
    if (st != GR_OK) return st;
    return *done ? complete(k) : GR_OK;
  }
  if (m->flags & GR__MPI_HIER) {
    gr_status st = gr__hier_call_test(b->hier, k, &m->hier_op, done);
    if (!m->hier_op) m->flags &= ~GR__MPI_HIER;
    if (st != GR_OK) { /* the call's state is released */
      stage_out(k);
      return st;
    }
    return *done ? complete(k) : GR_OK;
  }
  if (m->flags & GR__MPI_OWN) {
    gr__mpi_ar *a = m->ar;
    if (k->fe_request) progress_oldest(b, a); /* a group tests all its calls anyway */
    gr_status st = ar_test(a, done);
    if (st != GR_OK) { /* the caller frees k after a failure: it must leave the list */
      live_remove(b, a);
      return st;
    }
    if (!*done) return GR_OK;
    live_remove(b, a);
    free(a);
    m->ar = NULL;
    m->flags &= ~GR__MPI_OWN;
    return complete(k);
  }
  int flag = 0;
  int rc = gr__mpi_test(&m->req, &flag);
  if (rc != MPI_SUCCESS) return gr__mpi_rc(k, rc, "MPI_Test");
  if (!flag) return GR_OK;
  *done = 1;
  return complete(k);
}

/* Our own allreduces are point to point, hence cancellable: once the receives are cancelled, the
 * waits return locally and nothing writes into the buffers any more. Returns 1 (released). */
static int cancel_p2p(gr__mpi_ar *a) {
  for (int i = 0; i < a->nreqs; i++) {
    if (a->reqs[i] == MPI_REQUEST_NULL) continue;
    if (a->recvs & (1ull << i)) {
      MPI_Cancel(&a->reqs[i]);
      MPI_Wait(&a->reqs[i], MPI_STATUS_IGNORE);
    } else { /* Open MPI cannot cancel a send: let it go (it reads, never writes) */
      MPI_Request_free(&a->reqs[i]);
    }
  }
  return 1;
}

static void mpi_forget(gr__call *k) {
  gr__mpi_call *m = gr__mpi_call_of(k);
  mpi_be *b = k->comm->be;
  if (m->flags & GR__MPI_GATE) { /* its MPI call never started */
    gate_forget(b, k);
    return;
  }
  if (m->flags & GR__MPI_SHM) { /* nothing writes into the buffers once this rank stops */
    gr__shm_call_forget(b->shm, k, &m->shm_op);
    m->flags &= ~GR__MPI_SHM;
    if (m->flags & GR__MPI_PRIVATE_COPY) free(m->tmp), m->tmp = NULL;
    stage_out(k);
    return;
  }
  if (m->flags & GR__MPI_HIER) { /* the leaders' requests are cancelled or forgotten inside */
    gr__hier_call_forget(b->hier, k, &m->hier_op);
    m->flags &= ~GR__MPI_HIER;
    stage_out(k);
    return;
  }
  if (m->flags & GR__MPI_OWN) {
    gr__mpi_ar *a = m->ar;
    int released = a->algo->forget ? a->algo->forget(a) : cancel_p2p(a);
    live_remove(b, a);
    m->ar = NULL;
    m->flags &= ~GR__MPI_OWN;
    if (released) {
      free(a); /* its receive buffer is only received into: those receives are cancelled */
      if (m->flags & GR__MPI_PRIVATE_COPY) free(m->tmp), m->tmp = NULL;
      stage_out(k); /* frees the staging buffers (the copy back is harmless) */
      return;
    }
  }
  /* A collective request (or an own algorithm that could not stop) may still write into the
   * buffers: they are left alone (and leaked). */
  m->tmp = m->tmp2 = NULL;
}

static gr_status mpi_synchronize(gr_comm *c, gr_stream s, double deadline) {
  (void)c, (void)s, (void)deadline; /* every MPI-backend call has completed when it returns */
  return GR_OK;
}

const gr__coll_ops gr__coll_ops_mpi = {
    .name = "mpi",
    .kind = GR_BACKEND_MPI,
    .caps = GR__CAP_PACK_MULTI | GR__CAP_JOIN_REFUSALS,
    .create = mpi_create,
    .split = mpi_split,
    .destroy = mpi_destroy,
    .abort = mpi_abort,
    .post = mpi_post,
    .test = mpi_test,
    .forget = mpi_forget,
    .synchronize = mpi_synchronize,
    .carries_refusal = mpi_carries_refusal,
    .progress = mpi_progress,
    .gone = mpi_gone,
};
