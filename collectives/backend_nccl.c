/* The NCCL backend: device buffers, stream-ordered. Communicators are non-blocking (config
 * blocking = 0) so that init, split, finalize and every enqueue can be bounded by the deadline and
 * abandoned with ncclCommAbort. Host buffers are accepted and staged through device memory (then
 * the call waits for its stream, since the caller will read host memory when it returns).
 *
 * Compiled twice: into libgpurun against NVIDIA's nccl.h/cuda_runtime_api.h (table
 * gr__coll_ops_nccl), and for the tests against the NCCL test double's headers
 * (tests/mpi/collectives/nccl_double/, table named by GR__NCCL_OPS), so that this file's logic
 * runs in CI without a GPU. */
#include "gr_coll.h"

#include "gr_dtype.h"
#include "gr_error.h"
#include "gr_log.h"
#include "gr_nccl_share.h"

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef GR__NCCL_OPS
#define GR__NCCL_OPS gr__coll_ops_nccl
#endif

typedef struct {
  ncclComm_t nc;
  void *one;             /* a device int for the barrier */
  gr__nccl_share *share; /* ranks share a GPU: NCCL among one leader per GPU (nccl_share.c) */
} nccl_be;

/* A call's state, kept in the call record's be_area (gr_coll.h). */
typedef enum { STAGED = 1, NEED_D2H = 2, WAIT_STREAM = 4 } nccl_call_flag;
typedef struct {
  unsigned flags;   /* nccl_call_flag */
  void *tmp, *tmp2; /* device copies of host buffers (send side, receive side) */
  size_t bytes;     /* bytes of tmp2 */
} nccl_call;
_Static_assert(sizeof(nccl_call) <= GR__BE_CALL_BYTES, "nccl_call must fit gr__call.be_area");

static nccl_call *NC(gr__call *k) { return (nccl_call *)(void *)k->be_area; }

static nccl_be *B(gr_comm *c) { return c->be; }

static gr_status nccl_err(gr_comm *c, ncclComm_t nc, ncclResult_t rc, const char *what) {
  const char *detail = nc ? ncclGetLastError(nc) : ncclGetLastError(NULL);
  return gr__comm_err(c, GR_ERR_NCCL, "%s failed: %s%s%s", what, ncclGetErrorString(rc),
                      detail && *detail ? ": " : "", detail ? detail : "");
}

static gr_status cuda_err(gr_comm *c, cudaError_t e, const char *what) {
  return gr__comm_err(c, GR_ERR_CUDA, "%s failed: %s (%d)", what, cudaGetErrorString(e), (int)e);
}

/* Wait until a non-blocking communicator leaves ncclInProgress. */
static gr_status nccl_wait(gr_comm *c, ncclComm_t nc, double deadline, const char *what) {
  for (;;) {
    ncclResult_t a = ncclInProgress;
    ncclResult_t rc = ncclCommGetAsyncError(nc, &a);
    if (rc != ncclSuccess) return nccl_err(c, nc, rc, "ncclCommGetAsyncError");
    if (a == ncclSuccess) return GR_OK;
    if (a != ncclInProgress) return nccl_err(c, nc, a, what);
    if (gr__past(deadline))
      return gr__comm_err(c, GR_ERR_TIMEOUT, "%s did not finish before the deadline", what);
  }
}

static void nccl_config(ncclConfig_t *cfg) {
  ncclConfig_t init = NCCL_CONFIG_INITIALIZER;
  *cfg = init;
  cfg->blocking = 0;
}

static gr_status be_alloc(gr_comm *c) {
  nccl_be *b = calloc(1, sizeof *b);
  if (!b) return gr__comm_err(c, GR_ERR_NOMEM, "out of memory");
  c->be = b;
  cudaError_t e = cudaMalloc(&b->one, sizeof(int));
  if (e != cudaSuccess) return cuda_err(c, e, "cudaMalloc");
  return GR_OK;
}

static void be_free(gr_comm *c) {
  nccl_be *b = c->be;
  if (!b) return;
  if (b->one) cudaFree(b->one);
  free(b);
  c->be = NULL;
}

static gr_status nccl_create(gr_comm *c, double deadline) {
  /* NCCL refuses two ranks on one GPU: then NCCL runs among one leader per GPU instead. */
  gr__nccl_share *share = NULL;
  GR_CHECK(gr__nccl_share_setup(c, deadline, &share));
  if (share) {
    nccl_be *b = calloc(1, sizeof *b);
    if (!b) {
      gr__nccl_share_abort(share);
      gr__nccl_share_destroy(c, share, deadline);
      return gr__comm_err(c, GR_ERR_NOMEM, "out of memory");
    }
    b->share = share;
    c->be = b;
    return GR_OK;
  }
  /* Rank 0's unique id, with its verdict, so that a failure there does not hang the others. */
  struct {
    int ok;
    ncclUniqueId id;
  } boot;
  memset(&boot, 0, sizeof boot);
  ncclResult_t rc = ncclSuccess;
  if (c->rank == 0) {
    rc = ncclGetUniqueId(&boot.id);
    boot.ok = rc == ncclSuccess;
  }
  MPI_Request req;
  if (MPI_Ibcast(&boot, (int)sizeof boot, MPI_BYTE, 0, c->mpi, &req) != MPI_SUCCESS)
    return gr__comm_err(c, GR_ERR_MPI, "MPI_Ibcast of the NCCL unique id failed");
  GR_CHECK(gr__mpi_wait(c, &req, deadline));
  if (!boot.ok)
    return c->rank == 0 ? nccl_err(c, NULL, rc, "ncclGetUniqueId")
                        : gr__comm_err(c, GR_ERR_NCCL, "rank 0 could not get an NCCL unique id");
  GR_CHECK(be_alloc(c));
  nccl_be *b = B(c);
  ncclConfig_t cfg;
  nccl_config(&cfg);
  rc = ncclCommInitRankConfig(&b->nc, c->size, boot.id, c->rank, &cfg);
  gr_status st = GR_OK;
  if (rc != ncclSuccess && rc != ncclInProgress)
    st = nccl_err(c, NULL, rc, "ncclCommInitRankConfig");
  else
    st = nccl_wait(c, b->nc, deadline, "ncclCommInitRankConfig");
  if (st != GR_OK) {
    if (b->nc) ncclCommAbort(b->nc);
    b->nc = NULL;
    be_free(c);
  }
  return st;
}

static gr_status nccl_split(gr_comm *parent, gr_comm *child, int color, int key, double deadline) {
  /* The leaders' communicator cannot be split into the child's groups: set the child up anew. */
  if (B(parent)->share) {
    (void)color, (void)key;
    if (!child) return GR_OK;
    gr_status st = nccl_create(child, deadline);
    if (st != GR_OK) snprintf(parent->err, sizeof parent->err, "%s", child->err);
    return st;
  }
  ncclConfig_t cfg;
  nccl_config(&cfg);
  ncclComm_t nc = NULL;
  ncclResult_t rc =
      ncclCommSplit(B(parent)->nc, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &nc, &cfg);
  if (rc != ncclSuccess && rc != ncclInProgress)
    return nccl_err(parent, B(parent)->nc, rc, "ncclCommSplit");
  gr_status st = nccl_wait(parent, B(parent)->nc, deadline, "ncclCommSplit");
  if (st == GR_OK && nc) st = nccl_wait(parent, nc, deadline, "ncclCommSplit (new communicator)");
  if (st == GR_OK && child) {
    st = be_alloc(child);
    if (st == GR_OK)
      B(child)->nc = nc, nc = NULL;
    else
      snprintf(parent->err, sizeof parent->err, "%s", child->err);
  }
  if (nc) ncclCommAbort(nc);
  return st;
}

static gr_status nccl_destroy(gr_comm *c, double deadline) {
  nccl_be *b = B(c);
  if (!b) return GR_OK;
  gr_status st = GR_OK;
  if (b->share) {
    st = gr__nccl_share_destroy(c, b->share, deadline);
    b->share = NULL;
  }
  if (b->nc) {
    ncclResult_t rc = ncclCommFinalize(b->nc);
    if (rc != ncclSuccess && rc != ncclInProgress)
      st = nccl_err(c, b->nc, rc, "ncclCommFinalize");
    else
      st = nccl_wait(c, b->nc, deadline, "ncclCommFinalize");
    if (st == GR_OK)
      ncclCommDestroy(b->nc);
    else
      ncclCommAbort(b->nc); /* bounded: never wait past the deadline to tear down */
    b->nc = NULL;
  }
  be_free(c);
  return st;
}

static void nccl_abort(gr_comm *c) {
  nccl_be *b = B(c);
  if (b && b->share) gr__nccl_share_abort(b->share);
  if (b && b->nc) {
    ncclCommAbort(b->nc);
    b->nc = NULL;
  }
}

static gr_status nccl_group_begin(void) {
  ncclResult_t rc = ncclGroupStart();
  return rc == ncclSuccess ? GR_OK : GR_ERR_NCCL;
}

static gr_status nccl_group_finish(gr_comm *any, double deadline) {
  ncclResult_t rc = ncclGroupEnd();
  if (rc == ncclSuccess) return GR_OK;
  ncclComm_t nc = B(any)->nc; /* NULL with a share: its NCCL calls never run inside a group */
  if (rc != ncclInProgress) return nccl_err(any, nc, rc, "ncclGroupEnd");
  return nc ? nccl_wait(any, nc, deadline, "ncclGroupEnd") : GR_OK;
}

static ncclDataType_t nccl_type(gr_dtype t) {
  static const ncclDataType_t m[GR__NDTYPES] = {ncclInt8,    ncclUint8,  ncclInt32,   ncclUint32,
                                                ncclInt64,   ncclUint64, ncclFloat16, ncclBfloat16,
                                                ncclFloat32, ncclFloat64};
  return m[t];
}

static ncclRedOp_t nccl_op(gr_op op) {
  switch (op) {
  case GR_PROD:
    return ncclProd;
  case GR_MIN:
    return ncclMin;
  case GR_MAX:
    return ncclMax;
  case GR_AVG:
    return ncclAvg;
  default:
    return ncclSum;
  }
}

/* ---- staging of host buffers -------------------------------------------------------------- */

static int on_device(const void *p) {
  struct cudaPointerAttributes a;
  if (!p) return 1; /* nothing to stage */
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

/* Host buffers -> device copies (tmp: send side, tmp2: receive side), copied in on the
 * call's stream; the copy out is enqueued by test() once the NCCL work is (NCCL groups launch
 * at ncclGroupEnd, after this returns). */
static gr_status stage_in(gr__call *k, cudaStream_t s, const void **sp, void **rp) {
  gr_comm *c = k->comm;
  size_t sb, rb;
  gr__call_sides(k, &sb, &rb);
  int hr = rb && !on_device(*rp);
  int inside =
      hr && sb && (uintptr_t)*sp >= (uintptr_t)*rp && (uintptr_t)*sp + sb <= (uintptr_t)*rp + rb;
  int hs = sb && !inside && !on_device(*sp);
  if (!hr && !hs) return GR_OK;
  cudaError_t e;
  NC(k)->flags |= STAGED | WAIT_STREAM;
  if (hr) {
    if ((e = cudaMalloc(&NC(k)->tmp2, rb)) != cudaSuccess)
      return cuda_err(c, e, "cudaMalloc (staging)");
    NC(k)->bytes = rb;
    NC(k)->flags |= NEED_D2H;
    if (inside) {
      if ((e = cudaMemcpyAsync(NC(k)->tmp2, *rp, rb, cudaMemcpyHostToDevice, s)) != cudaSuccess)
        return cuda_err(c, e, "cudaMemcpyAsync (staging in)");
      *sp = (char *)NC(k)->tmp2 + ((const char *)*sp - (const char *)*rp);
    }
    *rp = NC(k)->tmp2;
  }
  if (hs) {
    if ((e = cudaMalloc(&NC(k)->tmp, sb)) != cudaSuccess)
      return cuda_err(c, e, "cudaMalloc (staging)");
    if ((e = cudaMemcpyAsync(NC(k)->tmp, *sp, sb, cudaMemcpyHostToDevice, s)) != cudaSuccess)
      return cuda_err(c, e, "cudaMemcpyAsync (staging in)");
    *sp = NC(k)->tmp;
  }
  return GR_OK;
}

static void release(gr__call *k) {
  if (NC(k)->tmp) cudaFree(NC(k)->tmp);
  if (NC(k)->tmp2) cudaFree(NC(k)->tmp2);
  NC(k)->tmp = NC(k)->tmp2 = NULL;
}

/* ---- calls -------------------------------------------------------------------------------- */

static gr_status nccl_post(gr__call *k, int *done) {
  gr_comm *c = k->comm;
  if (B(c)->share) return gr__nccl_share_post(B(c)->share, k, done);
  ncclComm_t nc = B(c)->nc;
  cudaStream_t s = (cudaStream_t)k->stream;
  const void *sp = k->send;
  void *rp = k->recv;
  gr_status st = stage_in(k, s, &sp, &rp);
  if (st != GR_OK) {
    release(k);
    return st;
  }
  ncclDataType_t dt = nccl_type(k->dtype);
  size_t n = k->count, es = gr__dtype_size(k->dtype), P = (size_t)c->size;
  ncclResult_t rc = ncclSuccess;
  const char *what = "";
  switch (k->kind) {
  case GR__ALLREDUCE:
    what = "ncclAllReduce";
    rc = ncclAllReduce(sp, rp, n, dt, nccl_op(k->op), nc, s);
    break;
  case GR__BROADCAST:
    what = "ncclBroadcast";
    rc = ncclBroadcast(sp, rp, n, dt, k->root, nc, s);
    break;
  case GR__REDUCE:
    what = "ncclReduce";
    rc = ncclReduce(sp, rp, n, dt, nccl_op(k->op), k->root, nc, s);
    break;
  case GR__ALLGATHER:
    what = "ncclAllGather";
    rc = ncclAllGather(sp, rp, n, dt, nc, s);
    break;
  case GR__REDUCE_SCATTER:
    what = "ncclReduceScatter";
    rc = ncclReduceScatter(sp, rp, n, dt, nccl_op(k->op), nc, s);
    break;
  case GR__ALLTOALL: {
    what = "ncclSend/ncclRecv (all-to-all)";
    if (sp == rp && n) { /* grouped send/recv cannot work in place: send from a copy */
      cudaError_t e = cudaMalloc(&NC(k)->tmp, n * es * P);
      if (e == cudaSuccess)
        e = cudaMemcpyAsync(NC(k)->tmp, rp, n * es * P, cudaMemcpyDeviceToDevice, s);
      if (e != cudaSuccess) {
        release(k);
        return cuda_err(c, e, "cudaMalloc/cudaMemcpyAsync (all-to-all in place)");
      }
      sp = NC(k)->tmp;
      NC(k)->flags |= WAIT_STREAM; /* the copy is freed once the stream is past it */
    }
    rc = ncclGroupStart();
    for (size_t p = 0; p < P && rc == ncclSuccess; p++) {
      rc = ncclSend((const char *)sp + p * n * es, n, dt, (int)p, nc, s);
      if (rc == ncclSuccess) rc = ncclRecv((char *)rp + p * n * es, n, dt, (int)p, nc, s);
    }
    ncclResult_t rc2 = ncclGroupEnd();
    if (rc == ncclSuccess) rc = rc2;
    break;
  }
  case GR__SEND:
    what = "ncclSend";
    rc = ncclSend(sp, n, dt, k->root, nc, s);
    break;
  case GR__RECV:
    what = "ncclRecv";
    rc = ncclRecv(rp, n, dt, k->root, nc, s);
    break;
  case GR__BARRIER:
    what = "ncclAllReduce (barrier)";
    NC(k)->flags |= WAIT_STREAM;
    rc = ncclAllReduce(B(c)->one, B(c)->one, 1, ncclInt32, ncclSum, nc, s);
    break;
  default:
    return gr__comm_err(c, GR_ERR_INTERNAL, "unknown call kind %d", (int)k->kind);
  }
  if (rc != ncclSuccess && rc != ncclInProgress) {
    release(k);
    return nccl_err(c, nc, rc, what);
  }
  *done = 0; /* test() settles ncclInProgress, the copy out and the stream wait */
  return GR_OK;
}

static gr_status nccl_test(gr__call *k, int *done) {
  gr_comm *c = k->comm;
  if (B(c)->share) return gr__nccl_share_test(B(c)->share, k, done);
  ncclComm_t nc = B(c)->nc;
  ncclResult_t a = ncclSuccess;
  ncclResult_t rc = ncclCommGetAsyncError(nc, &a);
  if (rc != ncclSuccess) return nccl_err(c, nc, rc, "ncclCommGetAsyncError");
  if (a == ncclInProgress) return GR_OK;
  if (a != ncclSuccess) {
    release(k);
    return nccl_err(c, nc, a, gr__kind_name(k->kind));
  }
  cudaStream_t s = (cudaStream_t)k->stream;
  if (NC(k)->flags & NEED_D2H) {
    NC(k)->flags &= ~NEED_D2H;
    cudaError_t e = cudaMemcpyAsync(k->recv, NC(k)->tmp2, NC(k)->bytes, cudaMemcpyDeviceToHost, s);
    if (e != cudaSuccess) return cuda_err(c, e, "cudaMemcpyAsync (staging out)");
  }
  if (NC(k)->flags & WAIT_STREAM) {
    cudaError_t e = cudaStreamQuery(s);
    if (e == cudaErrorNotReady) return GR_OK;
    if (e != cudaSuccess) return cuda_err(c, e, "cudaStreamQuery");
    release(k);
  }
  *done = 1;
  return GR_OK;
}

static void nccl_forget(gr__call *k) {
  if (B(k->comm)->share) {
    gr__nccl_share_forget(B(k->comm)->share, k);
    return;
  }
  /* The stream may still use the staging buffers until the abort has torn the work down. */
  NC(k)->tmp = NC(k)->tmp2 = NULL;
}

static gr_status nccl_synchronize(gr_comm *c, gr_stream stream, double deadline) {
  if (B(c)->share) return gr__nccl_share_synchronize(B(c)->share, c, stream, deadline);
  ncclComm_t nc = B(c)->nc;
  for (;;) {
    cudaError_t e = cudaStreamQuery((cudaStream_t)stream);
    ncclResult_t a = ncclSuccess;
    ncclResult_t rc = ncclCommGetAsyncError(nc, &a);
    if (rc != ncclSuccess) return nccl_err(c, nc, rc, "ncclCommGetAsyncError");
    if (a != ncclSuccess && a != ncclInProgress) return nccl_err(c, nc, a, "enqueued work");
    if (e == cudaSuccess) return GR_OK;
    if (e != cudaErrorNotReady) return cuda_err(c, e, "cudaStreamQuery");
    if (gr__past(deadline)) return gr__comm_err(c, GR_ERR_TIMEOUT, "the stream did not drain");
  }
}

const gr__coll_ops GR__NCCL_OPS = {
    .name = "nccl",
    .kind = GR_BACKEND_NCCL,
    .caps = 0,
    .create = nccl_create,
    .split = nccl_split,
    .destroy = nccl_destroy,
    .abort = nccl_abort,
    .group_begin = nccl_group_begin,
    .group_finish = nccl_group_finish,
    .post = nccl_post,
    .test = nccl_test,
    .forget = nccl_forget,
    .synchronize = nccl_synchronize,
};
