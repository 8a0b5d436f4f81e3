/* The MPI backend: host buffers (device buffers are staged through pinned host memory, since
 * Debian's Open MPI is not CUDA-aware). Every call is an MPI_I... request progressed by the front
 * end's test loop, so that the timeout holds; only when the communicator has no timeout may a call
 * use the blocking MPI routine (post() completes it at once). fp16/bf16 reductions are user-defined
 * MPI ops (float arithmetic, one rounding per step; gr_op_map.h says which op reduces which type);
 * AVG is a SUM followed by one division.
 *
 * This file is the backend's dispatch and staging: the table gr__coll_ops_mpi, whose post runs a
 * call on the first of the communicator's paths that takes it (gr_path.h; the list is path.c's
 * gr__mpi_paths), device-buffer staging around it, and the rows defined here: the shared-memory
 * path (gr__shm_*), its agreement round in front of an MPI call (shm-gate), the MPI library's own
 * call of each kind, and what gpurun's own allreduces (one file each: mpi_allreduce_rd.c,
 * mpi_allreduce_ring.c, mpi_allreduce_rab.c) share: their tags and the list of those in flight.
 * The rows that keep state of their own define it in their file (mpi_path_hier.c: the hierarchy
 * across nodes). gr_mpi_be.h holds what they share. */
#include "gr_mpi_be.h"

#include "gr_agree.h"
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
#include <sys/mman.h>

#if GPURUN_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

typedef gr__mpi_be mpi_be;

uint64_t gr__mpi_tag_slots_cap;

/* Allreduces with a timeout use gpurun's own algorithms instead of MPI_Iallreduce: at two ranks up
 * to 256 bytes one exchange (mpi_allreduce_pair.c), up to GR__MPI_RD_MAX_BYTES recursive doubling
 * (mpi_allreduce_rd.c: 16 chunks each way, reqs holds 64), above a pipelined ring
 * (mpi_allreduce_ring.c) or, at 4, 8, ... ranks, Rabenseifner (mpi_allreduce_rab.c). Their rows
 * in path.c's table say which sizes and rank counts each serves. */

static gr_status mpi_destroy(gr_comm *c, double deadline);

/* A creation that failed after the backend's state exists: destroy it, keeping the sentence that
 * stands (gr__op_map_free may record one of its own). Returns st. */
static gr_status create_undo(gr_comm *c, gr_status st, double deadline) {
  char why[sizeof c->err];
  memcpy(why, c->err, sizeof why);
  mpi_destroy(c, deadline);
  memcpy(c->err, why, sizeof why);
  return st;
}

static gr_status mpi_create(gr_comm *c, double deadline) {
  mpi_be *b = calloc(1, sizeof *b);
  if (!b) return gr__comm_err(c, GR_ERR_NOMEM, "out of memory");
  gr_status st;
  GR_CHECK_GOTO(gr__op_map_create(c, &b->ops), st, no_ops);
  int *ub = NULL, flag = 0;
  if (MPI_Comm_get_attr(c->mpi, MPI_TAG_UB, &ub, &flag) != MPI_SUCCESS)
    flag = 0; /* MPI guarantees tags up to 32767: the default below stays under it */
  uint64_t tags =
      flag && ub && *ub >= GR__MPI_TAG_BASE ? (uint64_t)*ub - GR__MPI_TAG_BASE + 1 : 16384;
  b->ring_tags = tags / GR__MPI_RING_MAX_SEGS >= 1024;
  b->tags_per_slot = b->ring_tags ? GR__MPI_RING_MAX_SEGS : 1;
  b->tag_slots = tags / (uint64_t)b->tags_per_slot;
  if (gr__mpi_tag_slots_cap > 0 && gr__mpi_tag_slots_cap < b->tag_slots)
    b->tag_slots = gr__mpi_tag_slots_cap;
  b->gate_mpi = MPI_COMM_NULL;
  c->be = b;
  gr__live_create_step(GR_LIVE_STEP_SHM); /* gpurun-top: where a creation waits */
  GR_CHECK_GOTO(gr__shm_comm_attach(c, &b->shm), st, fail);
  int rc = b->shm ? MPI_Comm_dup(c->mpi, &b->gate_mpi) : MPI_SUCCESS;
  if (rc != MPI_SUCCESS) {
    b->gate_mpi = MPI_COMM_NULL;
    st = gr__comm_mpi_err(c, rc, "MPI_Comm_dup for the gated calls");
    goto fail;
  }
  return GR_OK;
fail: /* the front end destroys nothing of a creation that failed */
  return create_undo(c, st, deadline);
no_ops:
  free(b);
  return st;
}

static gr_status mpi_split(gr_comm *parent, gr_comm *child, int color, int key, double deadline) {
  (void)color, (void)key;
  return child ? mpi_create(child, deadline) : GR_OK;
}

static gr_status mpi_destroy(gr_comm *c, double deadline) {
  (void)deadline;
  mpi_be *b = c->be;
  if (!b) return GR_OK;
  /* A request given up on (comm_wait.c) may still run with the ops, on gate_mpi: then they and
   * gate_mpi are kept until it completed (one that cannot be kept is left unfreed, never freed
   * under it). */
  int gone = gr__mpi_gone(), lost = !gone && gr__mpi_lost(c);
  gr_status st = gr__op_map_free(c, &b->ops);
  if (lost && !gr__mpi_keep_comm(c, &b->gate_mpi)) b->gate_mpi = MPI_COMM_NULL;
  if (b->gate_mpi != MPI_COMM_NULL && !gone) {
    int rc = MPI_Comm_free(&b->gate_mpi);
    if (rc != MPI_SUCCESS && st == GR_OK) /* the first failure is the sentence */
      st = gr__comm_mpi_err(c, rc, "MPI_Comm_free of the gated calls' communicator");
  }
  gr__shm_free(b->shm);
  free(b->spare);
  free(b);
  c->be = NULL;
  return st;
}

static void mpi_abort(gr_comm *c) {
  /* MPI cannot cancel a collective: the requests stay with the communicator, which is freed (MPI
   * defers that until they finish) at destroy. Nothing else to do. */
  (void)c;
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
  void *r = m->flags & GR__MPI_PRIVATE_RECV          ? m->priv
            : (m->flags & GR__MPI_STAGED) && m->tmp2 ? m->tmp2
                                                     : k->recv;
  int avg_here = k->op == GR_AVG && (k->kind == GR__ALLREDUCE || k->kind == GR__REDUCE_SCATTER ||
                                     (k->kind == GR__REDUCE && k->root == k->comm->rank));
  if (avg_here) gr__avg_divide(k->dtype, r, k->count, k->comm->size);
  if (m->flags & GR__MPI_PRIVATE_RECV) { /* the result reaches the program's buffer only now */
    memcpy(k->recv, m->priv, m->priv_bytes);
    free(m->priv);
    m->priv = NULL;
    m->flags &= ~GR__MPI_PRIVATE_RECV;
  }
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

/* What a call holds besides its path's state, released: a private copy, the staging. */
void gr__mpi_call_release(gr__call *k) {
  gr__mpi_call *m = gr__mpi_call_of(k);
  if (m->flags & GR__MPI_PRIVATE_RECV) {
    free(m->priv);
    m->priv = NULL;
    m->flags &= ~GR__MPI_PRIVATE_RECV;
  }
  if (m->flags & GR__MPI_PRIVATE_COPY) {
    free(m->tmp);
    m->tmp = NULL;
    m->flags &= ~GR__MPI_PRIVATE_COPY;
  }
  stage_out(k);
}

/* Run k on path p: the MPI backend's limit, the staging p asks for, the post; a refusing rank's
 * call (k->fe_refused) posts without data. */
static gr_status post_on(const gr__path *p, gr__call *k, int *done) {
  k->path = p;
  if (k->fe_refused) return p->post(p, k, NULL, NULL, done);
  if (k->count > INT_MAX)
    return gr__comm_err(k->comm, GR_ERR_UNSUPPORTED,
                        "count %zu exceeds the MPI backend's limit of "
                        "INT_MAX elements per call; split the call",
                        k->count);
  const void *s = k->send;
  void *r = k->recv;
  if (p->staged) GR_CHECK(stage_in(k, &s, &r));
  if (k->kind == GR__ALLREDUCE && p->algo >= 0) gr__algo_note((gr__algo)p->algo);
  gr_status st = p->post(p, k, s, r, done);
  if (st != GR_OK) {
    gr__mpi_call_release(k);
    return st;
  }
  return *done ? complete(k) : GR_OK;
}

/* ---- the MPI library's own call of each kind ------------------------------------------------ */

static int any_present(const gr_comm *c) {
  (void)c;
  return 1;
}

/* A call that may be given up on (a timeout is set, so it is not blocking) runs on private
 * copies of the buffers MPI reads and writes: MPI cannot cancel a collective, and once the call is
 * given up on its request keeps running (gr__mpi_abandon, comm_wait.c) until the late peers
 * arrive, long after the program may have freed its buffers (gr_comm_destroy(3)). The input is
 * copied in (a broadcast's root copies it into the receive copy below; an input inside the receive
 * buffer, an in-place form, comes with that buffer), the result copied out when the call
 * completes; the sides staging made private already stay as they are. The price, a copy of each
 * side, only with a timeout; without one the call blocks in MPI and cannot be given up on. */
static gr_status lib_private(gr__call *k, const void **s, void **r) {
  gr__mpi_call *m = gr__mpi_call_of(k);
  size_t sb, rb;
  gr__call_sides(k, &sb, &rb);
  if (!k->count) return GR_OK;
  int inside =
      sb && rb && (uintptr_t)*s >= (uintptr_t)*r && (uintptr_t)*s + sb <= (uintptr_t)*r + rb;
  if (rb && !((m->flags & GR__MPI_STAGED) && *r == m->tmp2)) {
    void *p = malloc(rb);
    if (!p) return gr__comm_err(k->comm, GR_ERR_NOMEM, "out of memory (%zu bytes)", rb);
    if (inside) {
      memcpy(p, *r, rb);
      *s = (const char *)p + ((const char *)*s - (const char *)*r);
    }
    m->priv = p;
    m->priv_bytes = rb;
    m->flags |= GR__MPI_PRIVATE_RECV;
    *r = p;
  }
  if (sb && !inside && k->kind != GR__BROADCAST && *s != m->tmp) GR_CHECK(private_copy(k, s, sb));
  return GR_OK;
}

/* The MPI_I... call of k's kind (with no timeout, the blocking MPI routine: *done at once). */
static gr_status lib_post(const gr__path *p, gr__call *k, const void *s, void *r, int *done) {
  (void)p;
  gr_comm *c = k->comm;
  mpi_be *b = c->be;
  gr__mpi_call *m = gr__mpi_call_of(k);
  MPI_Datatype dt = gr__mpi_type(k->dtype);
  MPI_Op op = gr__op_map_get(&b->ops, k->dtype, k->op);
  /* a gated call's MPI call runs on a communicator of its own (gr_mpi_be.h, gate_mpi) */
  MPI_Comm mc = (m->flags & GR__MPI_GATED) && b->gate_mpi != MPI_COMM_NULL ? b->gate_mpi : c->mpi;
  int n = (int)k->count, blk = k->blocking_ok, rc = MPI_SUCCESS;
  size_t es = gr__dtype_size(k->dtype), P = (size_t)c->size;
  MPI_Request *q = &m->req;
  const char *what = "";
  if (!blk) GR_CHECK(lib_private(k, &s, &r));
  switch (k->kind) {
  case GR__ALLREDUCE: {
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
    void *copy = NULL;
#if defined(MPICH_NUMVERSION) && MPICH_NUMVERSION < 40200000
    /* MPICH 4.0-4.1's blocking reduce reads MPI_IN_PLACE as an address at a root other than 0
     * (above its short-message size: a segfault; pmodels/mpich#6540, fixed in 4.1.2): the root
     * sends a copy of its data there instead */
    if (blk && in == MPI_IN_PLACE && k->root != 0 && n) {
      copy = malloc(k->count * es);
      if (!copy) return gr__comm_err(c, GR_ERR_NOMEM, "out of memory (a copy for MPI_Reduce)");
      memcpy(copy, r, k->count * es);
      in = copy;
    }
#endif
    rc = blk ? MPI_Reduce(in, r, n, dt, op, k->root, mc)
             : MPI_Ireduce(in, r, n, dt, op, k->root, mc, q);
    free(copy);
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
    rc = blk ? MPI_Alltoall(s, n, dt, r, n, dt, mc) : MPI_Ialltoall(s, n, dt, r, n, dt, mc, q);
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
  if (rc != MPI_SUCCESS) return gr__mpi_rc(k, rc, what);
  *done = blk;
  return GR_OK;
}

static gr_status lib_test(gr__call *k, int *done) {
  int flag = 0;
  int rc = gr__mpi_test(&gr__mpi_call_of(k)->req, &flag);
  if (rc != MPI_SUCCESS) return gr__mpi_rc(k, rc, "MPI_Test");
  *done = flag;
  return GR_OK;
}

/* A collective request cannot be cancelled: it goes to the requests given up on (comm_wait.c) with
 * the private copies it reads and writes, which are freed once it completed; the program's buffers
 * are not among them (lib_private). Staging buffers (device calls) stay allocated, as MPI may still
 * write them: 0. */
static int lib_forget(gr__call *k) {
  gr__mpi_call *m = gr__mpi_call_of(k);
  void *in = m->flags & GR__MPI_PRIVATE_COPY ? m->tmp : NULL;
  void *out = m->flags & GR__MPI_PRIVATE_RECV ? m->priv : NULL;
  gr__mpi_abandon(k->comm, &m->req, in, out);
  if (in) m->tmp = NULL, m->flags &= ~GR__MPI_PRIVATE_COPY;
  if (out) m->priv = NULL, m->flags &= ~GR__MPI_PRIVATE_RECV;
  return !(m->flags & GR__MPI_STAGED);
}

const gr__path gr__path_mpi_lib = {.name = GR__ALGO_NAME(MPI_LIB),
                                   .algo = GR__ALGO_MPI_LIB,
                                   .refusal = GR__REFUSAL_AGREED,
                                   .kinds = GR__KINDS_ALL,
                                   .staged = 1,
                                   .present = any_present,
                                   .takes = gr__path_takes_all,
                                   .post = lib_post,
                                   .test = lib_test,
                                   .forget = lib_forget};

/* ---- the shared-memory path (gr_shm.h) -------------------------------------------------- */

static int shm_present(const gr_comm *c) { return c->be && ((const mpi_be *)c->be)->shm; }

static int shm_takes(const gr__path *p, const gr__call *k) {
  (void)p;
  return gr__shm_takes(((const mpi_be *)k->comm->be)->shm, k->kind, k->count, k->dtype);
}

/* A refusing rank's call (send, recv NULL) posts its descriptor only. */
static gr_status shm_post(const gr__path *p, gr__call *k, const void *s, void *r, int *done) {
  (void)p, (void)done;
  mpi_be *b = k->comm->be;
  return gr__shm_call_post(b->shm, k, s, r, NULL, NULL, &gr__mpi_call_of(k)->shm_op);
}

static gr_status shm_test(gr__call *k, int *done) {
  mpi_be *b = k->comm->be;
  gr_status st = gr__shm_call_test(b->shm, k, &gr__mpi_call_of(k)->shm_op, done);
  if (st == GR_ERR_MISMATCH || st == GR_ERR_INVALID) /* disagreed or refused: nothing received */
    gr__mpi_call_release(k);
  return st;
}

/* Nothing writes into the buffers once this rank stops. */
static int shm_forget(gr__call *k) {
  mpi_be *b = k->comm->be;
  gr__shm_call_forget(b->shm, k, &gr__mpi_call_of(k)->shm_op);
  return 1;
}

static int shm_gone(const gr_comm *c, char *buf, size_t len) {
  return c->be ? gr__shm_gone(((const mpi_be *)c->be)->shm, buf, len) : 0;
}

const gr__path gr__path_shm = {.name = GR__ALGO_NAME(SHM),
                               .algo = GR__ALGO_SHM,
                               .refusal = GR__REFUSAL_CARRIED,
                               .kinds = GR__KINDS_COLLECTIVE,
                               .staged = 1,
                               .present = shm_present,
                               .takes = shm_takes,
                               .post = shm_post,
                               .test = shm_test,
                               .forget = shm_forget,
                               .gone = shm_gone};

/* ---- calls on buffers in the windows (gr_mem_alloc, gr_shm.h) -----------------------------------
 * The row takes a call whose buffers on this rank lie in the communicator's windows; the shm row
 * takes the others. Both post to the same segment queue and start with the same first round, so a
 * rank on one row and a rank on the other meet there, and the round decides from every rank's
 * buffers whether the call runs direct (gr__shm_window_add). */

/* Present with the segment (windows come and go after creation); takes nothing without one. */
static int window_present(const gr_comm *c) { return shm_present(c); }

/* Where this rank's buffers of k lie in the windows: 1 when the sides the peers reach do (the
 * send of allreduce, reduce-scatter and broadcast, the recv of allreduce and allgather). */
static int window_sides(const gr__call *k, uint64_t tok[2], size_t off[2]) {
  const gr__shm *s = ((const mpi_be *)k->comm->be)->shm;
  size_t sb, rb;
  gr__call_sides(k, &sb, &rb);
  int need_send = k->kind != GR__ALLGATHER,
      need_recv = k->kind == GR__ALLREDUCE || k->kind == GR__ALLGATHER;
  if (k->kind == GR__BROADCAST && k->root != k->comm->rank) need_send = 0;
  tok[0] = need_send ? gr__shm_window_of(s, k->send, sb, &off[0]) : 0;
  tok[1] = need_recv ? gr__shm_window_of(s, k->recv, rb, &off[1]) : 0;
  return (!need_send || tok[0]) && (!need_recv || tok[1]) && (need_send || need_recv);
}

static int window_takes(const gr__path *p, const gr__call *k) {
  (void)p;
  uint64_t tok[2];
  size_t off[2];
  if (!gr__shm_windows(((const mpi_be *)k->comm->be)->shm)) return 0;
  return k->kind != GR__BROADCAST || k->root == k->comm->rank ? window_sides(k, tok, off)
                                                              : 1; /* a non-root reads only */
}

static gr_status window_post(const gr__path *p, gr__call *k, const void *s, void *r, int *done) {
  (void)p, (void)done;
  mpi_be *b = k->comm->be;
  gr__mpi_call *m = gr__mpi_call_of(k);
  uint64_t tok[2];
  size_t off[2] = {0, 0};
  window_sides(k, tok, off);
  return gr__shm_call_post(b->shm, k, s, r, tok, off, &m->shm_op);
}

const gr__path gr__path_shm_window = {
    .name = GR__ALGO_NAME(SHM_WINDOW),
    .algo = GR__ALGO_SHM_WINDOW,
    .refusal = GR__REFUSAL_CARRIED,
    .kinds = GR__KIND_BIT(GR__ALLREDUCE) | GR__KIND_BIT(GR__REDUCE_SCATTER) |
             GR__KIND_BIT(GR__ALLGATHER) | GR__KIND_BIT(GR__BROADCAST),
    .staged = 0,
    .present = window_present,
    .takes = window_takes,
    .post = window_post,
    .test = shm_test,
    .forget = shm_forget,
    .gone = shm_gone};

/* gr_mem_alloc: a window on the segment where the ranks share a node; elsewhere (ranks on
 * several nodes, GPURUN_COLL_ALGO=mpi, one rank) memory of this rank's own, which every call
 * takes as it takes any buffer. gr_mem_register: the buffer made a window in place (shm_comm.c);
 * elsewhere nothing to do. m->be: the gr__shm_mapping, or NULL. */
static gr_status mpi_mem_alloc(gr_comm *c, size_t bytes, gr__mem *m) {
  mpi_be *b = c->be;
  gr__shm_mapping *w = calloc(1, sizeof *w);
  int all = 0;
  gr_status st = gr__agree_ok(c, "the window's record", w != NULL, &all);
  if (st != GR_OK || !all) {
    free(w);
    return st != GR_OK ? st : gr__comm_err(c, GR_ERR_NOMEM, "out of memory on some rank");
  }
  if (b && b->shm) {
    GR_CHECK_GOTO(gr__shm_comm_window(c, b->shm, bytes, w), st, free_w);
  } else {
    size_t len = (bytes + 4095) & ~(size_t)4095;
    void *p = len >= bytes
                  ? mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
                  : MAP_FAILED;
    int ok = p != MAP_FAILED;
    st = gr__agree_ok(c, "the mapped memory", ok, &all);
    if (st != GR_OK || !all) {
      if (ok) (void)munmap(p, len); /* the range mmap just gave: cannot fail */
      free(w);
      return st != GR_OK ? st
                         : gr__comm_err(c, GR_ERR_NOMEM,
                                        "%zu bytes could not be mapped on some rank", bytes);
    }
    w->ptr = w->map = p;
    w->map_bytes = len;
  }
  m->ptr = w->ptr;
  m->lo = (uintptr_t)w->ptr;
  m->len = (bytes + 4095) & ~(size_t)4095;
  m->be = w;
  return GR_OK;
free_w:
  free(w);
  return st;
}

static gr_status mpi_mem_register(gr_comm *c, gr__mem *m) {
  mpi_be *b = c->be;
  if (!b || !b->shm) return GR_OK; /* nothing to share: calls take the buffer as any */
  gr__shm_mapping *w = calloc(1, sizeof *w);
  int all = 0;
  gr_status st = gr__agree_ok(c, "the registration's record", w != NULL, &all);
  if (st != GR_OK || !all) {
    free(w);
    return st != GR_OK ? st : gr__comm_err(c, GR_ERR_NOMEM, "out of memory on some rank");
  }
  GR_CHECK_GOTO(gr__shm_comm_register(c, b->shm, m->ptr, m->bytes, w), st, free_w);
  m->be = w;
  return GR_OK;
free_w:
  free(w);
  return st;
}

static void mpi_mem_free(gr_comm *c, gr__mem *m) {
  mpi_be *b = c->be;
  gr__shm_mapping *w = m->be;
  if (!w) return;
  if (w->token || w->peer)
    gr__shm_comm_window_free(b ? b->shm : NULL, w);
  else if (w->map)
    (void)munmap(w->map, w->map_bytes); /* fails only for a range mmap did not give: never */
  free(w);
  m->be = NULL;
}

/* ---- calls that agree on the segment before their MPI call (gr_shm.h, Agreement) -------------
 * A gated call waits in the segment's FIFO (gr__shm_defer) from its post until its MPI call is
 * started, and then runs on the MPI library's row. Starts happen in FIFO order, which is posting
 * order on every rank, whichever call's test finds the rounds passed: MPI needs its collectives
 * started in one order everywhere, and a program may wait for a later call (a group, requests)
 * first. */

static int gate_takes(const gr__path *p, const gr__call *k) {
  (void)p;
  return gr__shm_gates(((const mpi_be *)k->comm->be)->shm, k->kind, k->count, k->dtype);
}

static gr_status gate_post(const gr__path *p, gr__call *k, const void *s, void *r, int *done) {
  (void)p, (void)s, (void)r, (void)done;
  mpi_be *b = k->comm->be;
  gr__mpi_call *m = gr__mpi_call_of(k);
  if (!gr__shm_defer(b->shm, k)) return gr__comm_err(k->comm, GR_ERR_NOMEM, "out of memory");
  gr_status st = gr__shm_call_post(b->shm, k, NULL, NULL, NULL, NULL, &m->shm_op);
  if (st != GR_OK) gr__shm_undefer(b->shm, k);
  return st;
}

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
    f->blocking_ok = 0; /* started from any call's test: never block there */
    m->flags |= GR__MPI_GATED;
    int done = 0;
    gr_status st = post_on(&gr__path_mpi_lib, f, &done);
    if (st != GR_OK) {
      f->path = &gr__path_shm_gate;
      m->gate_status = (int)st;
    }
  }
}

/* A gated call's test: its round, then (once its MPI call started, k->path is the MPI library's
 * row) that call's. */
static gr_status gate_test(gr__call *k, int *done) {
  gr__mpi_call *m = gr__mpi_call_of(k);
  mpi_be *b = k->comm->be;
  if (m->gate_status) return (gr_status)m->gate_status;
  if (m->shm_op) {
    int d = 0;
    gr_status st = gr__shm_call_test(b->shm, k, &m->shm_op, &d); /* progresses earlier rounds too */
    if (st != GR_OK) { /* disagreement, or the segment broke: k never starts */
      gr__shm_undefer(b->shm, k);
      m->shm_op = NULL;
      return st;
    }
  }
  gate_start_passed(b);
  if (m->gate_status) return (gr_status)m->gate_status;
  return k->path == &gr__path_shm_gate ? GR_OK : k->path->test(k, done);
}

static int gate_forget(gr__call *k) {
  mpi_be *b = k->comm->be;
  if (gr__mpi_call_of(k)->gate_status) return 1; /* its round passed, its MPI call never started */
  gr__shm_undefer(b->shm, k);
  /* (one whose round passed waits for an earlier one's round: the sentence names who) */
  gr__shm_call_forget(b->shm, k, &gr__mpi_call_of(k)->shm_op);
  return 1;
}

const gr__path gr__path_shm_gate = {.name = "shm-gate",
                                    .algo = -1,
                                    .refusal = GR__REFUSAL_CARRIED,
                                    .kinds = GR__KIND_BIT(GR__REDUCE) | GR__KIND_BIT(GR__ALLTOALL),
                                    .present = shm_present,
                                    .takes = gate_takes,
                                    .post = gate_post,
                                    .test = gate_test,
                                    .forget = gate_forget};

/* ---- the backend's post, test and forget: through the call's path ------------------------- */

static gr_status mpi_post(gr__call *k, int *done) {
  gr__mpi_call_of(k)->req = MPI_REQUEST_NULL;
  const gr__path *p = gr__path_choose(k);
  if (!p)
    return gr__comm_err(k->comm, GR_ERR_INTERNAL, "no path takes %s(count=%zu)",
                        gr__kind_name(k->kind), k->count);
  return post_on(p, k, done);
}

static gr_status mpi_test(gr__call *k, int *done) {
  gr_status st = k->path->test(k, done);
  return st == GR_OK && *done ? complete(k) : st;
}

/* The row's answer: 1 when nothing writes into the call's buffers any more (a call never posted
 * has none in use). */
static int mpi_forget(gr__call *k) {
  if (!k->path) return 1;
  if (k->path->forget(k)) {
    gr__mpi_call_release(k); /* frees the staging buffers (the copy back is harmless) */
    return 1;
  }
  /* A collective request (or an own algorithm that could not stop) may still write into the
   * buffers: they are left alone (and leaked), and the caller keeps its own. */
  gr__mpi_call *m = gr__mpi_call_of(k);
  m->tmp = m->tmp2 = NULL;
  return 0;
}

/* gr__coll_ops.progress: the own allreduces in flight (mpi_own.c); the gated calls whose round
 * passed start their MPI call (a request waited for after another one that runs on the segment:
 * the peers wait inside that MPI call); and MPI's engine moves (a peer's rendezvous send that this
 * rank receives while it waits on the segment). */
static void mpi_progress(gr_comm *c) {
  mpi_be *b = c->be;
  if (!b) return;
  gr__mpi_own_progress(c);
  if (b->shm && gr__shm_deferred(b->shm)) gate_start_passed(b);
  int flag = 0;
  /* only a nudge to MPI's engine: a failure here is the failure of some request's own test, which
   * reports it with its sentence */
  (void)MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, c->mpi, &flag, MPI_STATUS_IGNORE);
}

static gr_status mpi_synchronize(gr_comm *c, gr_stream s, double deadline) {
  (void)c, (void)s, (void)deadline; /* every MPI-backend call has completed when it returns */
  return GR_OK;
}

const gr__coll_ops gr__coll_ops_mpi = {
    .name = "mpi",
    .kind = GR_BACKEND_MPI,
    .caps = GR__CAP_PACK_MULTI | GR__CAP_JOIN_REFUSALS | GR__CAP_REGISTER_PAGES,
    .create = mpi_create,
    .split = mpi_split,
    .destroy = mpi_destroy,
    .abort = mpi_abort,
    .post = mpi_post,
    .test = mpi_test,
    .forget = mpi_forget,
    .synchronize = mpi_synchronize,
    .paths = gr__mpi_paths,
    .progress = mpi_progress,
    .gone = gr__paths_gone,
    .mem_alloc = mpi_mem_alloc,
    .mem_register = mpi_mem_register,
    .mem_free = mpi_mem_free,
};
