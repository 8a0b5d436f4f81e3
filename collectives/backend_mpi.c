/* The MPI backend: host buffers (device buffers are staged through pinned host memory, since
 * Debian's Open MPI is not CUDA-aware). Every call is an MPI_I... request progressed by the front
 * end's test loop, so that the timeout holds; only when the communicator has no timeout may a call
 * use the blocking MPI routine (post() completes it at once). fp16/bf16 reductions are user-defined
 * MPI ops (float arithmetic, one rounding per step); AVG is a SUM followed by one division. */
#include "gr_coll.h"

#include "gr_config.h"
#include "gr_dtype.h"
#include "gr_error.h"
#include "gr_shm.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if GPURUN_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

typedef struct {
  MPI_Op half_ops[4], bf16_ops[4]; /* SUM, PROD, MIN, MAX */
  MPI_Op own_ops[4];               /* gpurun's kernels for the native types MPI's ops get wrong */
  uint64_t rd_calls;               /* own allreduces so far: the same count on every rank */
  uint64_t tag_slots;              /* call n uses slot n % tag_slots ... */
  int tags_per_slot;               /* ... and its tags TAG_BASE + slot * tags_per_slot + j */
  int ring_tags;                   /* one tag per ring segment (tags_per_slot == RING_MAX_SEGS) */
  gr__call *live_head, *live_tail; /* own allreduces in flight, oldest first */
  gr__shm *shm;                    /* node-local shared-memory path (shm_coll.c), or NULL */
} mpi_be;

uint64_t gr__mpi_tag_slots_cap;

/* Small allreduces with a timeout use our own recursive doubling over MPI_Isend/MPI_Irecv instead
 * of MPI_Iallreduce: Open MPI's non-blocking collectives (libnbc) cost several microseconds more
 * than its blocking ones at these sizes, while point-to-point requests are as fast as they get. */
#define RD_MAX_BYTES 32768 /* 16 chunks each way (be_reqs holds 64); above, MPI_Iallreduce */
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
/* Larger ones (with a timeout) use a ring: reduce-scatter then allgather, P-1 steps each, the
 * bandwidth-optimal schedule MPI libraries use too. Each block of count/P elements travels in
 * segments that move through the steps independently (Open MPI's segmented ring does the same), so
 * segment j is reduced while segment j+1 is still in flight and its next step starts at once. */
/* Segment size, measured on vader (shared memory, 2-4 ranks): every message above the eager limit
 * pays a rendezvous handshake, which on a loaded machine waits for the peer to be scheduled, so
 * segments of 8-64 KiB lost more to handshakes than they won by overlap (a 256 KiB allreduce in
 * 32 KiB segments took 1.5-2.6x raw MPI, unsegmented 0.9-1.1x); 256 KiB was the best of 64, 128 and
 * 256 KiB from 1 to 16 MiB. A block under one segment goes whole, as before. */
#define RING_SEG_BYTES (256 * 1024)
#define RING_MAX_SEGS 32 /* a receive and a send each in be_reqs[64] */
enum { RD_FOLD_SEND = 1, RD_FOLD_RECV, RD_LOOP, RD_UNFOLD_SEND, RD_UNFOLD_RECV, RING_PIPE,
       RAB_RS, RAB_AG, RD_DONE };

#define GR_HALF_OP_(name, dt, op)                                                    \
  static void name(void *in, void *inout, int *len, MPI_Datatype *t) {               \
    (void)t;                                                                         \
    gr__reduce_host(dt, op, inout, in, (size_t)*len);                                \
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
  return GR_FLOAT64; /* only the types mpi_type() hands out reach these ops */
}
#define GR_OWN_OP_(name, op)                                                      \
  static void name(void *in, void *inout, int *len, MPI_Datatype *t) {            \
    gr__reduce_host(native_dtype(*t), op, inout, in, (size_t)*len);               \
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

static MPI_Datatype mpi_type(gr_dtype t) {
  switch (t) {
  case GR_INT8: return MPI_INT8_T;
  case GR_UINT8: return MPI_UINT8_T;
  case GR_INT32: return MPI_INT32_T;
  case GR_UINT32: return MPI_UINT32_T;
  case GR_INT64: return MPI_INT64_T;
  case GR_UINT64: return MPI_UINT64_T;
  case GR_FLOAT32: return MPI_FLOAT;
  case GR_FLOAT64: return MPI_DOUBLE;
  default: return MPI_UINT16_T; /* fp16, bf16: only our own ops touch the bits */
  }
}

static MPI_Op mpi_op(const mpi_be *b, gr_dtype t, gr_op op) {
  int i = op == GR_AVG ? GR_SUM : (int)op;
  if (t == GR_FLOAT16) return b->half_ops[i];
  if (t == GR_BFLOAT16) return b->bf16_ops[i];
  if (!builtin_ok(t, (gr_op)i)) return b->own_ops[i];
  switch (i) {
  case GR_PROD: return MPI_PROD;
  case GR_MIN: return MPI_MIN;
  case GR_MAX: return MPI_MAX;
  default: return MPI_SUM;
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
  return gr__shm_comm_attach(c, &b->shm);
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
  free(b);
  c->be = NULL;
  return GR_OK;
}

static void mpi_abort(gr_comm *c) {
  /* MPI cannot cancel a collective: the requests stay with the communicator, which is freed (MPI
   * defers that until they finish) at destroy. Nothing else to do. */
  (void)c;
}

static gr_status mpi_rc(gr__call *k, int rc, const char *what) {
  if (rc == MPI_SUCCESS) return GR_OK;
  char s[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, s, &len);
  return gr__comm_err(k->comm, GR_ERR_MPI, "%s failed: %s", what, s);
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

/* Replace device pointers by pinned host copies (be_tmp = send side, be_tmp2 = receive side). */
static gr_status stage_in(gr__call *k, const void **s, void **r) {
#if GPURUN_HAVE_CUDA
  if (!k->comm->gpu_buffers) return GR_OK;
  size_t sb, rb;
  gr__call_sides(k, &sb, &rb);
  int dr = rb && on_device(*r);
  /* in place (or the send side inside recv): the input starts in the receive buffer */
  int inside = dr && sb && (uintptr_t)*s >= (uintptr_t)*r &&
               (uintptr_t)*s + sb <= (uintptr_t)*r + rb;
  int ds = sb && !inside && on_device(*s);
  if (!dr && !ds) return GR_OK;
  k->be_flags |= 2;
  if (dr) {
    if (cudaMallocHost(&k->be_tmp2, rb) != cudaSuccess)
      return gr__comm_err(k->comm, GR_ERR_CUDA, "cudaMallocHost(%zu) for staging failed", rb);
    if (inside) {
      if (cudaMemcpy(k->be_tmp2, *r, rb, cudaMemcpyDeviceToHost) != cudaSuccess)
        return gr__comm_err(k->comm, GR_ERR_CUDA, "cudaMemcpy to the staging buffer failed");
      *s = (char *)k->be_tmp2 + ((const char *)*s - (const char *)*r);
    }
    k->be_bytes = rb;
  }
  if (ds) {
    if (cudaMallocHost(&k->be_tmp, sb) != cudaSuccess)
      return gr__comm_err(k->comm, GR_ERR_CUDA, "cudaMallocHost(%zu) for staging failed", sb);
    if (cudaMemcpy(k->be_tmp, *s, sb, cudaMemcpyDeviceToHost) != cudaSuccess)
      return gr__comm_err(k->comm, GR_ERR_CUDA, "cudaMemcpy to the staging buffer failed");
    *s = k->be_tmp;
  }
  if (dr) *r = k->be_tmp2;
#else
  (void)k, (void)s, (void)r;
#endif
  return GR_OK;
}

static gr_status stage_out(gr__call *k) {
#if GPURUN_HAVE_CUDA
  if (!(k->be_flags & 2)) return GR_OK;
  gr_status st = GR_OK;
  if (k->be_tmp2 && cudaMemcpy(k->recv, k->be_tmp2, k->be_bytes, cudaMemcpyHostToDevice) != cudaSuccess)
    st = gr__comm_err(k->comm, GR_ERR_CUDA, "cudaMemcpy from the staging buffer failed");
  if (k->be_tmp && !(k->be_flags & 1)) cudaFreeHost(k->be_tmp);
  if (k->be_tmp2) cudaFreeHost(k->be_tmp2);
  k->be_tmp = k->be_tmp2 = NULL;
  k->be_flags &= ~2;
  return st;
#else
  (void)k;
  return GR_OK;
#endif
}

/* ---- calls ------------------------------------------------------------------------------- */

static gr_status complete(gr__call *k) {
  void *r = (k->be_flags & 2) && k->be_tmp2 ? k->be_tmp2 : k->recv;
  int avg_here = k->op == GR_AVG && (k->kind == GR__ALLREDUCE || k->kind == GR__REDUCE_SCATTER ||
                                     (k->kind == GR__REDUCE && k->root == k->comm->rank));
  if (avg_here) gr__avg_divide(k->dtype, r, k->count, k->comm->size);
  if (k->be_flags & 1) { /* a private copy of an in-place input */
    free(k->be_tmp);
    k->be_tmp = NULL;
    k->be_flags &= ~1;
  }
  return stage_out(k);
}

/* A private copy of the input, for in-place forms MPI spells differently than NCCL. */
static gr_status private_copy(gr__call *k, const void **s, size_t bytes) {
  if (k->be_tmp) /* staged send side: already a private copy */
    return GR_OK;
  void *t = malloc(bytes ? bytes : 1);
  if (!t) return gr__comm_err(k->comm, GR_ERR_NOMEM, "out of memory (%zu bytes)", bytes);
  memcpy(t, *s, bytes);
  k->be_tmp = t;
  k->be_flags |= 1;
  *s = t;
  return GR_OK;
}


/* ---- recursive doubling ------------------------------------------------------------------- */

static int rd_pof2(int p) {
  int q = 1;
  while (q * 2 <= p) q *= 2;
  return q;
}

/* Messages go in chunks of at most RD_CHUNK bytes, which stay under the shared-memory transport's
 * eager limit (a 4 KiB message already takes the rendezvous path, several times slower). */
#define RD_CHUNK 2048

static int rd_chunks(const gr__call *k, int dir, void *buf, int peer) {
  gr_comm *c = k->comm;
  gr__call *m = (gr__call *)k;
  size_t bytes = k->count * gr__dtype_size(k->dtype);
  int rc = MPI_SUCCESS;
  size_t off = 0;
  do {
    int len = (int)(bytes - off < RD_CHUNK ? bytes - off : RD_CHUNK);
    if (!dir) m->be_recvs |= 1ull << m->be_nreqs;
    MPI_Request *q = &m->be_reqs[m->be_nreqs++];
    rc = dir ? MPI_Isend((char *)buf + off, len, MPI_BYTE, peer, k->be_tag, c->mpi, q)
             : MPI_Irecv((char *)buf + off, len, MPI_BYTE, peer, k->be_tag, c->mpi, q);
    off += (size_t)len;
  } while (rc == MPI_SUCCESS && off < bytes);
  return rc;
}

/* Block b of the ring: elements [*off, *off + *len). */
static void ring_block(const gr__call *k, int b, size_t *off, size_t *len) {
  size_t P = (size_t)k->comm->size, q = k->count / P, rm = k->count % P, ub = (size_t)b;
  *off = ub * q + (ub < rm ? ub : rm);
  *len = q + (ub < rm);
}

static gr_status rd_post_step(gr__call *k) {
  gr_comm *c = k->comm;
  int P = c->size, r = c->rank, pof2 = rd_pof2(P), rem = P - pof2, rc = MPI_SUCCESS;
  k->be_nreqs = 0;
  k->be_recvs = 0;
  switch (k->be_phase) {
  case RD_FOLD_SEND: rc = rd_chunks(k, 1, k->be_buf, r + 1); break;
  case RD_FOLD_RECV: rc = rd_chunks(k, 0, k->be_in, r - 1); break;
  case RD_LOOP: {
    int nr = r < 2 * rem ? r / 2 : r - rem, pn = nr ^ k->be_mask;
    int partner = pn < rem ? pn * 2 + 1 : pn + rem;
    rc = rd_chunks(k, 0, k->be_in, partner);
    if (rc == MPI_SUCCESS) rc = rd_chunks(k, 1, k->be_buf, partner);
    break;
  }
  case RD_UNFOLD_SEND: rc = rd_chunks(k, 1, k->be_buf, r - 1); break;
  case RD_UNFOLD_RECV: rc = rd_chunks(k, 0, k->be_buf, r + 1); break;
  default: break;
  }
  return mpi_rc(k, rc, "MPI_Isend/MPI_Irecv (allreduce)");
}

/* The phase after the current one completed. */
static int rd_next(gr__call *k) {
  gr_comm *c = k->comm;
  int P = c->size, r = c->rank, pof2 = rd_pof2(P), rem = P - pof2;
  switch (k->be_phase) {
  case RD_FOLD_SEND: return RD_UNFOLD_RECV; /* idle until the result comes back */
  case RD_FOLD_RECV:
  case 0:
    k->be_mask = 1;
    return pof2 > 1 ? RD_LOOP : (r < 2 * rem ? RD_UNFOLD_SEND : RD_DONE);
  case RD_LOOP:
    k->be_mask <<= 1;
    if (k->be_mask < pof2) return RD_LOOP;
    return r < 2 * rem ? RD_UNFOLD_SEND : RD_DONE;
  default: return RD_DONE;
  }
}

/* ---- pipelined ring ------------------------------------------------------------------------ */

/* Step t (0 <= t < 2(P-1)) sends block *sb to the right and receives block *rb from the left: the
 * first P-1 steps reduce-scatter (afterwards this rank holds the result of block r+1), the rest
 * gather the results. */
static void ring_blocks(const gr__call *k, int t, int *sb, int *rb) {
  int P = k->comm->size, r = k->comm->rank;
  if (t < P - 1) {
    *sb = ((r - t) % P + P) % P;
    *rb = ((r - t - 1) % P + P) % P;
  } else {
    t -= P - 1;
    *sb = ((r + 1 - t) % P + P) % P;
    *rb = ((r - t) % P + P) % P;
  }
}

/* Elements per segment: the same for every block, so segment j always lands at the same place in
 * be_in whichever block it belongs to (blocks differ in length by one element). */
static size_t ring_seg_elems(const gr__call *k) {
  size_t maxb = k->count / (size_t)k->comm->size + 1, n = (size_t)k->be_mask;
  return (maxb + n - 1) / n;
}

/* Segment j of block b: elements [*off, *off + *len) of the buffer, *in from the block's start. */
static void ring_seg(const gr__call *k, int b, int j, size_t *off, size_t *len, size_t *in) {
  size_t bo, bl, se = ring_seg_elems(k), a = (size_t)j * se;
  ring_block(k, b, &bo, &bl);
  *in = a;
  *off = bo + (a < bl ? a : bl);
  *len = a < bl ? (bl - a < se ? bl - a : se) : 0;
}

static int ring_seg_post(gr__call *k, int j) {
  gr_comm *c = k->comm;
  int P = c->size, r = c->rank, t = k->be_seg[j] / 2, sb, rb;
  size_t es = gr__dtype_size(k->dtype), so, sl, ro, rl, in;
  MPI_Datatype dt = mpi_type(k->dtype);
  mpi_be *b = c->be;
  int tag = b->ring_tags ? k->be_tag + j : k->be_tag;
  ring_blocks(k, t, &sb, &rb);
  ring_seg(k, sb, j, &so, &sl, &in);
  ring_seg(k, rb, j, &ro, &rl, &in);
  void *into = t < P - 1 ? (char *)k->be_in + in * es : (char *)k->be_buf + ro * es;
  /* the first step sends the input itself (out of place, be_buf gets each block when reduced) */
  const char *from = t == 0 ? (const char *)k->be_src : (const char *)k->be_buf;
  int rc = MPI_Irecv(into, (int)rl, dt, (r + P - 1) % P, tag, c->mpi, &k->be_reqs[2 * j]);
  if (rc == MPI_SUCCESS)
    rc = MPI_Isend(from + so * es, (int)sl, dt, (r + 1) % P, tag, c->mpi, &k->be_reqs[2 * j + 1]);
  return rc;
}

static gr_status ring_start(gr__call *k, const void *s, void *r) {
  gr_comm *c = k->comm;
  mpi_be *b = c->be;
  size_t es = gr__dtype_size(k->dtype), q = k->count / (size_t)c->size;
  size_t n = ((q + 1) * es + RING_SEG_BYTES - 1) / RING_SEG_BYTES;
  if (n > RING_MAX_SEGS) n = RING_MAX_SEGS;
  if (n > q) n = q;
  if (n < 1 || !b->ring_tags) n = 1;
  k->be_mask = (int)n;
  k->be_buf = r;
  k->be_src = s;
  size_t bytes = n * ring_seg_elems(k) * es;
  k->be_in = malloc(bytes);
  if (!k->be_in) return gr__comm_err(c, GR_ERR_NOMEM, "out of memory (%zu bytes)", bytes);
  k->be_flags |= 4;
  k->be_phase = RING_PIPE;
  k->be_nreqs = 2 * (int)n;
  k->be_recvs = 0;
  for (int j = 0; j < k->be_nreqs; j++) {
    k->be_reqs[j] = MPI_REQUEST_NULL;
    if (j % 2 == 0) k->be_recvs |= 1ull << j;
  }
  for (int j = 0; j < (int)n; j++) {
    k->be_seg[j] = 0;
    int rc = ring_seg_post(k, j);
    if (rc != MPI_SUCCESS) return mpi_rc(k, rc, "MPI_Isend/MPI_Irecv (allreduce)");
  }
  return GR_OK;
}

/* Reduce every segment whose receive arrived, start its next step once its send is done too. */
static gr_status ring_test(gr__call *k, int *done) {
  int P = k->comm->size, n = k->be_mask, T = 2 * (P - 1);
  size_t es = gr__dtype_size(k->dtype);
  for (;;) {
    int outc = 0, idx[2 * RING_MAX_SEGS];
    int rc = MPI_Testsome(2 * n, k->be_reqs, &outc, idx, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) return mpi_rc(k, rc, "MPI_Testsome (allreduce)");
    int active = 0, moved = 0;
    for (int j = 0; j < n; j++) {
      int t = k->be_seg[j] / 2;
      if (t >= T) continue;
      if (!(k->be_seg[j] & 1) && k->be_reqs[2 * j] == MPI_REQUEST_NULL) {
        if (t < P - 1) {
          int sb, rb;
          size_t off, len, in;
          ring_blocks(k, t, &sb, &rb);
          ring_seg(k, rb, j, &off, &len, &in);
          char *dst = (char *)k->be_buf + off * es;
          /* out of place: each block is reduced exactly once during the reduce-scatter, so its
           * input is copied in here, segment by segment while it is in cache */
          if (k->be_src != k->be_buf) memcpy(dst, (const char *)k->be_src + off * es, len * es);
          gr__reduce_host(k->dtype, k->op, dst, (char *)k->be_in + in * es, len);
        }
        k->be_seg[j] |= 1;
      }
      if ((k->be_seg[j] & 1) && k->be_reqs[2 * j + 1] == MPI_REQUEST_NULL) {
        k->be_seg[j] = 2 * (t + 1);
        moved = 1;
        if (t + 1 < T) {
          rc = ring_seg_post(k, j);
          if (rc != MPI_SUCCESS) return mpi_rc(k, rc, "MPI_Isend/MPI_Irecv (allreduce)");
        }
      }
      if (k->be_seg[j] / 2 < T) active = 1;
    }
    if (!active) {
      k->be_phase = RD_DONE;
      *done = 1;
      return GR_OK;
    }
    if (!moved) return GR_OK;
  }
}

/* ---- Rabenseifner (power-of-two ranks) --------------------------------------------------- */

/* Reduce-scatter by recursive halving, then allgather by recursive doubling: the ring's bandwidth
 * in 2 log2(P) steps instead of 2(P-1). Used for 4, 8, ... ranks above RD_MAX_BYTES (at 2 ranks it
 * is the ring's schedule): at 4 ranks on this 2-core VM every step waits for a peer to be
 * scheduled, and 64 KiB-1 MiB went from 1.3-1.6x raw MPI (ring) to 1.07-1.19x. Not segmented. */

/* The window this rank owns after the halving steps with masks P/2 .. stop (stop = P: none). */
static void rab_window(const gr__call *k, int stop, size_t *lo, size_t *hi) {
  int P = k->comm->size, r = k->comm->rank;
  *lo = 0;
  *hi = k->count;
  for (int m = P / 2; m >= stop && m >= 1; m /= 2) {
    size_t mid = *lo + (*hi - *lo) / 2;
    if (r & m) *lo = mid;
    else *hi = mid;
  }
}

static int rab_post(gr__call *k) {
  gr_comm *c = k->comm;
  int partner = c->rank ^ k->be_mask;
  size_t es = gr__dtype_size(k->dtype), lo, hi, plo, phi;
  MPI_Datatype dt = mpi_type(k->dtype);
  char *buf = k->be_buf;
  void *into;
  if (k->be_phase == RAB_RS) { /* keep one half of the window, send the other */
    size_t wlo, whi;
    rab_window(k, k->be_mask * 2, &wlo, &whi);
    rab_window(k, k->be_mask, &lo, &hi);
    plo = c->rank & k->be_mask ? wlo : hi;
    phi = c->rank & k->be_mask ? lo : whi;
    into = k->be_in;
    k->be_recvs = 1;
    int rc = MPI_Irecv(into, (int)(hi - lo), dt, partner, k->be_tag, c->mpi, &k->be_reqs[0]);
    if (rc == MPI_SUCCESS)
      rc = MPI_Isend(buf + plo * es, (int)(phi - plo), dt, partner, k->be_tag, c->mpi, &k->be_reqs[1]);
    k->be_nreqs = 2;
    return rc;
  }
  /* gather: send the window owned after the halving step with this mask, receive its sibling */
  size_t wlo, whi;
  rab_window(k, k->be_mask * 2, &wlo, &whi);
  rab_window(k, k->be_mask, &lo, &hi);
  plo = c->rank & k->be_mask ? wlo : hi;
  phi = c->rank & k->be_mask ? lo : whi;
  k->be_recvs = 1;
  int rc = MPI_Irecv(buf + plo * es, (int)(phi - plo), dt, partner, k->be_tag, c->mpi, &k->be_reqs[0]);
  if (rc == MPI_SUCCESS)
    rc = MPI_Isend(buf + lo * es, (int)(hi - lo), dt, partner, k->be_tag, c->mpi, &k->be_reqs[1]);
  k->be_nreqs = 2;
  return rc;
}

static gr_status rab_start(gr__call *k, const void *s, void *r) {
  gr_comm *c = k->comm;
  size_t es = gr__dtype_size(k->dtype), bytes = (k->count / 2 + 1) * es;
  if (s != r) memcpy(r, s, k->count * es);
  k->be_buf = r;
  k->be_in = malloc(bytes);
  if (!k->be_in) return gr__comm_err(c, GR_ERR_NOMEM, "out of memory (%zu bytes)", bytes);
  k->be_flags |= 4;
  k->be_phase = RAB_RS;
  k->be_mask = c->size / 2;
  return mpi_rc(k, rab_post(k), "MPI_Isend/MPI_Irecv (allreduce)");
}

static gr_status rab_test(gr__call *k, int *done) {
  for (;;) {
    int flag = 0;
    int rc = MPI_Testall(k->be_nreqs, k->be_reqs, &flag, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) return mpi_rc(k, rc, "MPI_Testall (allreduce)");
    if (!flag) return GR_OK;
    if (k->be_phase == RAB_RS) {
      size_t lo, hi;
      rab_window(k, k->be_mask, &lo, &hi);
      gr__reduce_host(k->dtype, k->op, (char *)k->be_buf + lo * gr__dtype_size(k->dtype), k->be_in,
                      hi - lo);
      if (k->be_mask > 1) k->be_mask /= 2;
      else k->be_phase = RAB_AG; /* the gather starts with mask 1 */
    } else if (k->be_mask * 2 < k->comm->size) {
      k->be_mask *= 2;
    } else {
      k->be_phase = RD_DONE;
      *done = 1;
      return GR_OK;
    }
    rc = rab_post(k);
    if (rc != MPI_SUCCESS) return mpi_rc(k, rc, "MPI_Isend/MPI_Irecv (allreduce)");
  }
}

static void live_remove(mpi_be *b, gr__call *k) {
  if (!(k->be_flags & 8)) return;
  if (k->be_prev) k->be_prev->be_next = k->be_next;
  else b->live_head = k->be_next;
  if (k->be_next) k->be_next->be_prev = k->be_prev;
  else b->live_tail = k->be_prev;
  k->be_prev = k->be_next = NULL;
  k->be_flags &= ~8;
}

static gr_status rd_test(gr__call *k, int *done);

/* Take the next call number and its tag slot; first complete the call that last had the slot if
 * it is still in flight (see TAG_BASE). */
static gr_status take_slot(gr__call *k) {
  gr_comm *c = k->comm;
  mpi_be *b = c->be;
  uint64_t n = b->rd_calls++;
  double deadline = gr__deadline(c->timeout_s);
  while (b->live_head && b->live_head->be_callno + b->tag_slots <= n) {
    gr__call *old = b->live_head;
    int done = 0;
    for (unsigned spin = 0; !done; spin++) {
      gr_status st = rd_test(old, &done);
      if (st != GR_OK)
        return gr__comm_err(c, st, "allreduce #%llu needs the tags of allreduce #%llu, %llu calls "
                            "earlier and still in flight, which failed: %s",
                            (unsigned long long)k->seq, (unsigned long long)old->seq,
                            (unsigned long long)b->tag_slots, c->err);
      if (!done && (spin & 15) == 15 && gr__past(deadline))
        return gr__comm_err(c, GR_ERR_TIMEOUT, "allreduce #%llu needs the tags of allreduce #%llu, "
                            "which is still in flight (%llu own allreduces in flight on one "
                            "communicator) and did not complete in time",
                            (unsigned long long)k->seq, (unsigned long long)old->seq,
                            (unsigned long long)b->tag_slots);
    }
    live_remove(b, old); /* finished: its owner's next test completes it */
  }
  k->be_callno = n;
  k->be_tag = TAG_BASE + (int)(n % b->tag_slots) * b->tags_per_slot;
  k->be_prev = b->live_tail;
  k->be_next = NULL;
  if (b->live_tail) b->live_tail->be_next = k;
  else b->live_head = k;
  b->live_tail = k;
  k->be_flags |= 8;
  return GR_OK;
}

static gr_status rd_start(gr__call *k, const void *s, void *r, int ring) {
  gr_comm *c = k->comm;
  size_t bytes = k->count * gr__dtype_size(k->dtype);
  GR_CHECK(take_slot(k));
  if (ring && c->size >= 4 && rd_pof2(c->size) == c->size) return rab_start(k, s, r);
  if (ring) return ring_start(k, s, r);
  if (s != r) memcpy(r, s, bytes);
  k->be_buf = r;
  k->be_in = malloc(bytes ? bytes : 1);
  if (!k->be_in) return gr__comm_err(c, GR_ERR_NOMEM, "out of memory (%zu bytes)", bytes);
  k->be_flags |= 4;
  int rem = c->size - rd_pof2(c->size);
  if (c->rank < 2 * rem)
    k->be_phase = c->rank % 2 == 0 ? RD_FOLD_SEND : RD_FOLD_RECV;
  else
    k->be_phase = rd_next(k); /* from phase 0 */
  if (k->be_phase == RD_DONE) return GR_OK;
  return rd_post_step(k);
}

/* Progress; *done when the result is in be_buf. */
static gr_status rd_test(gr__call *k, int *done) {
  if (k->be_phase == RING_PIPE) return ring_test(k, done);
  if (k->be_phase == RAB_RS || k->be_phase == RAB_AG) return rab_test(k, done);
  for (;;) {
    if (k->be_phase == RD_DONE) {
      *done = 1;
      return GR_OK;
    }
    int flag = 0;
    int rc = MPI_Testall(k->be_nreqs, k->be_reqs, &flag, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) return mpi_rc(k, rc, "MPI_Testall (allreduce)");
    if (!flag) return GR_OK;
    if (k->be_phase == RD_FOLD_RECV || k->be_phase == RD_LOOP)
      gr__reduce_host(k->dtype, k->op, k->be_buf, k->be_in, k->count);
    k->be_phase = rd_next(k);
    if (k->be_phase != RD_DONE) GR_CHECK(rd_post_step(k));
  }
}

static gr_status mpi_post(gr__call *k, int *done) {
  gr_comm *c = k->comm;
  mpi_be *b = c->be;
  if (k->count > INT_MAX)
    return gr__comm_err(c, GR_ERR_UNSUPPORTED, "count %zu exceeds the MPI backend's limit of "
                        "INT_MAX elements per call; split the call", k->count);
  /* reduce, alltoall: the ranks agree on the segment first (gr_shm.h); mpi_start_gated follows */
  if (gr__shm_gates(b->shm, k->kind) && !(k->be_flags & GR__SHM_GATED))
    return gr__shm_gate_post(b->shm, k);
  const void *s = k->send;
  void *r = k->recv;
  GR_CHECK(stage_in(k, &s, &r));
  if (gr__shm_takes(b->shm, k->kind)) {
    gr_status st = gr__shm_call_post(b->shm, k, s, r);
    if (st != GR_OK) stage_out(k);
    return st;
  }
  MPI_Datatype dt = mpi_type(k->dtype);
  MPI_Op op = mpi_op(b, k->dtype, k->op);
  int n = (int)k->count, blk = k->blocking_ok, rc = MPI_SUCCESS;
  size_t es = gr__dtype_size(k->dtype), P = (size_t)c->size;
  MPI_Request *q = &k->be_req;
  const char *what = "";
  switch (k->kind) {
  case GR__ALLREDUCE: {
    if (!blk && c->size > 1 && k->count > 0 &&
        (k->count * es <= RD_MAX_BYTES || k->count >= (size_t)c->size)) {
      gr_status st = rd_start(k, s, r, k->count * es > RD_MAX_BYTES);
      if (st != GR_OK) {
        live_remove(b, k);
        stage_out(k);
        return st;
      }
      return GR_OK;
    }
    const void *in = s == r ? MPI_IN_PLACE : s;
    what = "MPI_Iallreduce";
    rc = blk ? MPI_Allreduce(in, r, n, dt, op, c->mpi) : MPI_Iallreduce(in, r, n, dt, op, c->mpi, q);
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
    rc = blk ? MPI_Alltoall(s, n, dt, r, n, dt, c->mpi) : MPI_Ialltoall(s, n, dt, r, n, dt, c->mpi, q);
    break;
  case GR__SEND:
    what = "MPI_Isend";
    rc = blk ? MPI_Send(s, n, dt, k->root, 0, c->mpi) : MPI_Isend(s, n, dt, k->root, 0, c->mpi, q);
    break;
  case GR__RECV:
    what = "MPI_Irecv";
    rc = blk ? MPI_Recv(r, n, dt, k->root, 0, c->mpi, MPI_STATUS_IGNORE)
             : MPI_Irecv(r, n, dt, k->root, 0, c->mpi, q);
    break;
  case GR__BARRIER:
    what = "MPI_Ibarrier";
    rc = blk ? MPI_Barrier(c->mpi) : MPI_Ibarrier(c->mpi, q);
    break;
  default:
    return gr__comm_err(c, GR_ERR_INTERNAL, "unknown call kind %d", (int)k->kind);
  }
  if (rc != MPI_SUCCESS) {
    gr_status st = mpi_rc(k, rc, what);
    if (k->be_flags & 1) free(k->be_tmp), k->be_tmp = NULL;
    stage_out(k);
    return st;
  }
  if (blk) {
    *done = 1;
    return complete(k);
  }
  return GR_OK;
}

/* Progress the oldest own allreduces in flight besides k: a program that waits for its newest
 * request first would otherwise leave the older ones' messages to pile up, and Open MPI matches
 * every arrival against the whole list of posted receives (16500 requests waited newest first at
 * 3 ranks took 28 s without this, 2 s with it). A call found finished leaves the list; its owner's
 * next test completes it. Errors are left for the owner's own test to report. */
static void progress_oldest(mpi_be *b, gr__call *k) {
  gr__call *o = b->live_head;
  for (int i = 0; o && i < 16; i++) {
    gr__call *next = o->be_next;
    int done = 0;
    if (o != k && rd_test(o, &done) == GR_OK && done) live_remove(b, o);
    o = next;
  }
}

static gr_status mpi_start_gated(gr__call *k) {
  int done = 0;
  return mpi_post(k, &done); /* not blocking_ok: never done here */
}

static gr_status mpi_test(gr__call *k, int *done) {
  if (k->be_flags & GR__SHM_GATE) {
    gr_status st = gr__shm_gate_test(((mpi_be *)k->comm->be)->shm, k, mpi_start_gated);
    if (st != GR_OK || (k->be_flags & GR__SHM_GATE)) return st; /* failed, or still waiting */
  }
  if (k->be_flags & GR__SHM_CALL) {
    gr_status st = gr__shm_call_test(((mpi_be *)k->comm->be)->shm, k, done);
    if (st == GR_ERR_MISMATCH) { /* the ranks disagreed: nothing was received; release as forget */
      if (k->be_flags & 1) free(k->be_tmp), k->be_tmp = NULL, k->be_flags &= ~1;
      stage_out(k);
      return st;
    }
    if (st != GR_OK) return st;
    return *done ? complete(k) : GR_OK;
  }
  if (k->be_flags & 4) {
    if (k->fe_request) progress_oldest(k->comm->be, k); /* a group tests all its calls anyway */
    gr_status st = rd_test(k, done);
    if (st != GR_OK) { /* the caller frees k after a failure: it must leave the list */
      live_remove(k->comm->be, k);
      return st;
    }
    if (!*done) return GR_OK;
    live_remove(k->comm->be, k);
    free(k->be_in);
    k->be_in = NULL;
    k->be_flags &= ~4;
    return complete(k);
  }
  int flag = 0;
  int rc = gr__mpi_test(&k->be_req, &flag);
  if (rc != MPI_SUCCESS) return mpi_rc(k, rc, "MPI_Test");
  if (!flag) return GR_OK;
  *done = 1;
  return complete(k);
}

static void mpi_forget(gr__call *k) {
  if (k->be_flags & (GR__SHM_CALL | GR__SHM_GATE)) { /* nothing writes into the buffers once this rank stops */
    gr__shm_call_forget(((mpi_be *)k->comm->be)->shm, k);
    if (k->be_flags & 1) free(k->be_tmp), k->be_tmp = NULL;
    stage_out(k);
    return;
  }
  if (k->be_flags & 4) {
    /* Our own allreduce is point to point, hence cancellable: once cancelled, the waits return
     * locally and nothing writes into the buffers any more. */
    for (int i = 0; i < k->be_nreqs; i++) {
      if (k->be_reqs[i] == MPI_REQUEST_NULL) continue;
      if (k->be_recvs & (1ull << i)) {
        MPI_Cancel(&k->be_reqs[i]);
        MPI_Wait(&k->be_reqs[i], MPI_STATUS_IGNORE);
      } else { /* Open MPI cannot cancel a send: let it go (it reads, never writes) */
        MPI_Request_free(&k->be_reqs[i]);
      }
    }
    live_remove(k->comm->be, k);
    free(k->be_in); /* only ever received into, and those receives are cancelled */
    k->be_in = NULL;
    k->be_flags &= ~4;
    if (k->be_flags & 1) free(k->be_tmp), k->be_tmp = NULL;
    stage_out(k); /* frees the staging buffers (the copy back is harmless) */
    return;
  }
  /* A collective request cannot be cancelled and may still write into the buffers: they are
   * left alone (and leaked). */
  k->be_tmp = k->be_tmp2 = k->be_in = NULL;
}

static gr_status mpi_synchronize(gr_comm *c, gr_stream s, double deadline) {
  (void)c, (void)s, (void)deadline; /* every MPI-backend call has completed when it returns */
  return GR_OK;
}

const gr__coll_ops gr__coll_ops_mpi = {
    .name = "mpi",
    .kind = GR_BACKEND_MPI,
    .create = mpi_create,
    .split = mpi_split,
    .destroy = mpi_destroy,
    .abort = mpi_abort,
    .post = mpi_post,
    .test = mpi_test,
    .forget = mpi_forget,
    .synchronize = mpi_synchronize,
};
