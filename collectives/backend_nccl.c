/* The NCCL backend: device buffers, stream-ordered. Communicators are non-blocking (config
 * blocking = 0) so that init, split, finalize and every enqueue can be bounded by the deadline and
 * abandoned with ncclCommAbort. Host buffers are accepted and staged through device memory (then
 * the call waits for its stream, since the caller will read host memory when it returns).
 *
 * Compiled twice: into libgpurun against NVIDIA's nccl.h/cuda_runtime_api.h (table
 * gr__coll_ops_nccl), and for the tests against the NCCL test double's headers
 * (tests/mpi/collectives/nccl_double/, table named by GR__NCCL_OPS), so that this file's logic
 * runs in CI without a GPU.
 *
 * A call that one rank refuses on its own arguments (coll.h, Errors) must not leave the others
 * inside it: both rows carry the refusal with the call (GR__REFUSAL_CARRIED), as a 4-byte verdict
 * (MPI_Iallreduce, MAX, over c->mpi) that the front end's sequencer (sequencer.c) puts in front of
 * every collective but the barrier; it hands the call to post() only once that verdict is in and
 * clear, on every rank alike and in start order, so this file only posts, tests and forgets
 * (docs/architecture.md says why the verdict is not in the stream). */
#include "gr_coll.h"

#include "gr_agree.h"
#include "gr_dtype.h"
#include "gr_error.h"
#include "gr_live.h"
#include "gr_log.h"
#include "gr_nccl_map.h"
#include "gr_nccl_share.h"
#include "gr_path.h"

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
/* be_area: the direct path's nccl_call, or nccl_share.c's state. */
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
  gr__live_create_step(GR_LIVE_STEP_NCCL); /* gpurun-top: where a creation waits */
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
  /* on a heap copy that a broadcast given up on leaves to the lost list (gr_agree.h) */
  GR_CHECK(gr__agree_bcast(c, "the NCCL unique id", &boot, sizeof boot, 0));
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
  gr__live_create_step(GR_LIVE_STEP_NCCL);
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

/* Between group_begin and group_finish the front end posts a group whose verdict it has agreed on
 * already (group.c, agree_group). */
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

/* ---- the rows: NCCL over all ranks, and NCCL among one leader per GPU (nccl_share.c) ------- */

static int direct_present(const gr_comm *c) { return c->be && !B((gr_comm *)c)->share; }
static int share_present(const gr_comm *c) { return c->be && B((gr_comm *)c)->share; }

/* The NCCL call of k's kind, on device copies of host buffers where k has them. */
static gr_status direct_post(const gr__path *path, gr__call *k, const void *send, void *recv,
                             int *done) {
  (void)path, (void)send, (void)recv;
  gr_comm *c = k->comm;
  ncclComm_t nc = B(c)->nc;
  cudaStream_t s = (cudaStream_t)k->stream;
  const void *sp = k->send;
  void *rp = k->recv;
  gr_status st = stage_in(k, s, &sp, &rp);
  if (st != GR_OK) {
    release(k);
    return st;
  }
  ncclDataType_t dt = gr__nccl_type(k->dtype);
  ncclRedOp_t op = gr__nccl_op(k->op, ncclAvg); /* NCCL averages over all the ranks */
  size_t n = k->count, es = gr__dtype_size(k->dtype), P = (size_t)c->size;
  ncclResult_t rc = ncclSuccess;
  const char *what = "";
  switch (k->kind) {
  case GR__ALLREDUCE:
    what = "ncclAllReduce";
    rc = ncclAllReduce(sp, rp, n, dt, op, nc, s);
    break;
  case GR__BROADCAST:
    what = "ncclBroadcast";
    rc = ncclBroadcast(sp, rp, n, dt, k->root, nc, s);
    break;
  case GR__REDUCE:
    what = "ncclReduce";
    rc = ncclReduce(sp, rp, n, dt, op, k->root, nc, s);
    break;
  case GR__ALLGATHER:
    what = "ncclAllGather";
    rc = ncclAllGather(sp, rp, n, dt, nc, s);
    break;
  case GR__REDUCE_SCATTER:
    what = "ncclReduceScatter";
    rc = ncclReduceScatter(sp, rp, n, dt, op, nc, s);
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

static gr_status direct_test(gr__call *k, int *done) {
  gr_comm *c = k->comm;
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

/* The stream may still use the staging buffers until the abort has torn the work down. */
static int direct_forget(gr__call *k) {
  NC(k)->tmp = NC(k)->tmp2 = NULL;
  return 0;
}

static gr_status share_post(const gr__path *p, gr__call *k, const void *send, void *recv,
                            int *done) {
  (void)p, (void)send, (void)recv;
  return gr__nccl_share_post(B(k->comm)->share, k, done);
}
static gr_status share_test(gr__call *k, int *done) {
  return gr__nccl_share_test(B(k->comm)->share, k, done);
}
static int share_forget(gr__call *k) { return gr__nccl_share_forget(B(k->comm)->share, k); }

/* Both carry a refusal with the call (gr_path.h): the refusing rank makes the call too, and the
 * sequencer posts the verdict in front of every collective but the barrier (gr__seq_carried_verdict;
 * a group's is agreed once for the group); NCCL only ever sees calls nobody refused. */
static const gr__path path_nccl = {.name = "nccl",
                                   .algo = -1,
                                   .refusal = GR__REFUSAL_CARRIED,
                                   .kinds = GR__KINDS_ALL,
                                   .present = direct_present,
                                   .takes = gr__path_takes_all,
                                   .post = direct_post,
                                   .test = direct_test,
                                   .forget = direct_forget};
static const gr__path path_nccl_share = {.name = "nccl-share",
                                         .algo = -1,
                                         .refusal = GR__REFUSAL_CARRIED,
                                         .kinds = GR__KINDS_ALL,
                                         .present = share_present,
                                         .takes = gr__path_takes_all,
                                         .post = share_post,
                                         .test = share_test,
                                         .forget = share_forget};
static const gr__path *const nccl_paths[] = {&path_nccl_share, &path_nccl, NULL};

/* The sequencer hands over only calls whose verdict, if they needed one, was clear: the call
 * goes to its row (gr__path_choose), which posts, tests and forgets it. */
static gr_status nccl_post(gr__call *k, int *done) {
  const gr__path *p = gr__path_choose(k);
  if (!p) return gr__comm_err(k->comm, GR_ERR_INTERNAL, "no path takes %s", gr__kind_name(k->kind));
  k->path = p;
  return p->post(p, k, k->send, k->recv, done);
}

static gr_status nccl_test(gr__call *k, int *done) { return k->path->test(k, done); }

/* The row's answer (gr__coll_ops.forget); a call never posted has nothing in use. */
static int nccl_forget(gr__call *k) { return k->path ? k->path->forget(k) : 1; }

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

/* ---- memory the calls reach directly (gr_mem_alloc, gr_mem_register) -----------------------
 * gr_mem_alloc: NCCL's own memory (ncclMemAlloc) registered as a symmetric window on the
 * communicator (ncclCommWindowRegister, NCCL_WIN_COLL_SYMMETRIC) where NCCL has windows (2.27 and
 * later, at build and at run time) and this rank runs NCCL directly; else plain device memory
 * (cudaMalloc), which every call takes as it takes any device buffer. The ranks agree on the kind
 * first: the window is collective and needs every rank's memory. gr_mem_register: a device buffer
 * registered with the communicator once (ncclCommRegister), which later calls on it reuse; a host
 * buffer, or a rank on a shared GPU (nccl_share.c), registers nothing (calls stage host buffers).
 * Every step that may fail on one rank ends with an agreement over c->mpi (mem_agree), so a
 * failure anywhere is the same error on every rank, and no rank enters the window's registration
 * after another gave up. A window that failed on some rank is deregistered by the ranks where it
 * succeeded before the memory is freed: in NCCL 2.28's source ncclCommWindowDeregister is local
 * (it unmaps the peers' memory and drops its own registration, with no barrier), so that cleanup
 * never waits for the rank that failed. A rank that fails inside ncclCommWindowRegister after its
 * peers entered the registration's own exchange leaves them to NCCL's bootstrap timeout. The
 * memory is zeroed, as on the MPI backend. */
#if defined(NCCL_WIN_COLL_SYMMETRIC)
#define NCCL_HAS_WINDOWS 1
#else
#define NCCL_HAS_WINDOWS 0
#endif

typedef enum { MEM_PLAIN, MEM_NCCL, MEM_REGISTERED } nccl_mem_kind;
typedef struct {
  nccl_mem_kind kind;
  void *handle; /* ncclCommRegister's; NULL when nothing was registered */
#if NCCL_HAS_WINDOWS
  ncclWindow_t win; /* ncclCommWindowRegister's (MEM_NCCL) */
#endif
} nccl_mem;

/* GR_OK when every rank's step succeeded; else, on every rank, the status and sentence of the
 * lowest rank whose step failed (its c->err, after "rank R: "), or the round's own failure. One
 * agreement round and the failing rank's words, each bounded by the communicator's timeout
 * (gr_agree.h). */
static gr_status mem_agree(gr_comm *c, gr_status mine) {
  int64_t me = mine == GR_OK ? c->size : c->rank, lowest = 0;
  struct {
    int st;
    char err[GR__ERRLEN];
  } said;
  memset(&said, 0, sizeof said);
  if (mine != GR_OK) snprintf(said.err, sizeof said.err, "%s", c->err);
  GR_CHECK(gr__agree(c, "the memory verdict", GR__AGREE_MIN, &me, &lowest, 1));
  if (lowest >= c->size) return GR_OK;
  int first = (int)lowest;
  said.st = (int)mine;
  GR_CHECK(gr__agree_bcast(c, "the failing rank's memory verdict", &said, sizeof said, first));
  said.err[sizeof said.err - 1] = '\0';
  return gr__comm_err(c, (gr_status)said.st, "rank %d: %s", first, said.err);
}

/* An NCCL call's result on a non-blocking communicator: ncclInProgress waited for. */
static gr_status nccl_settle(gr_comm *c, ncclComm_t nc, ncclResult_t rc, const char *what) {
  if (rc == ncclSuccess) return GR_OK;
  if (rc != ncclInProgress) return nccl_err(c, nc, rc, what);
  return nccl_wait(c, nc, gr__deadline(c->timeout_s), what);
}

/* Whether this rank can put a symmetric window on c: NCCL directly (no shared GPU), with windows
 * in the headers and in the library that runs. */
static int windows_here(gr_comm *c) {
  int v = 0;
  return NCCL_HAS_WINDOWS && B(c)->nc && ncclGetVersion(&v) == ncclSuccess &&
         v >= NCCL_VERSION(2, 27, 0);
}

static gr_status nccl_mem_alloc(gr_comm *c, size_t bytes, gr__mem *m) {
  nccl_mem *x = calloc(1, sizeof *x);
  int wins = 0;
  gr_status st = gr__agree_ok(c, "the memory kind", x && windows_here(c), &wins);
  if (st != GR_OK) { /* the round itself failed: no rank goes on to the next one */
    free(x);
    return st;
  }
  if (!x) st = gr__comm_err(c, GR_ERR_NOMEM, "out of memory"); /* said to all in mem_agree */
  void *p = NULL;
  if (st == GR_OK && wins) {
    ncclResult_t rc = ncclMemAlloc(&p, bytes);
    if (rc != ncclSuccess) {
      p = NULL;
      st = nccl_err(c, NULL, rc, "ncclMemAlloc");
    }
    x->kind = MEM_NCCL;
  } else if (st == GR_OK) {
    cudaError_t e = cudaMalloc(&p, bytes);
    if (e != cudaSuccess) {
      p = NULL;
      cudaGetLastError();
      st = cuda_err(c, e, "cudaMalloc");
    }
    x->kind = MEM_PLAIN;
  }
  if (st == GR_OK) { /* zeroed, as on every backend (gr_mem_alloc(3)), before any stream uses it */
    cudaError_t e = cudaMemset(p, 0, bytes);
    if (e == cudaSuccess) e = cudaStreamSynchronize(NULL);
    if (e != cudaSuccess) cudaGetLastError(), st = cuda_err(c, e, "cudaMemset");
  }
  st = mem_agree(c, st);
#if NCCL_HAS_WINDOWS
  if (st == GR_OK && wins) {
    ncclResult_t rc = ncclCommWindowRegister(B(c)->nc, p, bytes, &x->win, NCCL_WIN_COLL_SYMMETRIC);
    gr_status reg = nccl_settle(c, B(c)->nc, rc, "ncclCommWindowRegister");
    if (reg != GR_OK) x->win = NULL;
    st = mem_agree(c, reg);
    if (st != GR_OK && x->win)
      nccl_settle(c, B(c)->nc, ncclCommWindowDeregister(B(c)->nc, x->win),
                  "ncclCommWindowDeregister");
  }
#endif
  if (st != GR_OK) {
    if (p && x->kind == MEM_NCCL) ncclMemFree(p);
    if (p && x->kind == MEM_PLAIN) cudaFree(p);
    free(x);
    return st;
  }
  m->ptr = p;
  m->lo = (uintptr_t)p;
  m->len = bytes;
  m->be = x;
  return GR_OK;
}

static gr_status nccl_mem_register(gr_comm *c, gr__mem *m) {
  nccl_mem *x = calloc(1, sizeof *x);
  gr_status st = x ? GR_OK : gr__comm_err(c, GR_ERR_NOMEM, "out of memory");
  ncclComm_t nc = B(c)->nc;
  if (st == GR_OK) x->kind = MEM_REGISTERED;
  if (st == GR_OK && nc && on_device(m->ptr))
    st = nccl_settle(c, nc, ncclCommRegister(nc, m->ptr, m->bytes, &x->handle), "ncclCommRegister");
  if (st != GR_OK && x) x->handle = NULL;
  st = mem_agree(c, st);
  if (st != GR_OK) {
    if (x && x->handle) ncclCommDeregister(nc, x->handle);
    free(x);
    return st;
  }
  m->be = x;
  return GR_OK;
}

/* Undo either, on every exit path (gr_mem_free, gr_mem_deregister, gr_comm_destroy). After an
 * abort NCCL has dropped the communicator's registrations with it: then only the memory is
 * freed. */
static void nccl_mem_free(gr_comm *c, gr__mem *m) {
  nccl_mem *x = m->be;
  if (!x) return;
  ncclComm_t nc = c->be ? B(c)->nc : NULL;
#if NCCL_HAS_WINDOWS
  if (x->win && nc &&
      nccl_settle(c, nc, ncclCommWindowDeregister(nc, x->win), "ncclCommWindowDeregister") != GR_OK)
    GR_WARN("communicator %s: %s", c->id, c->err);
#endif
  if (x->handle && nc &&
      nccl_settle(c, nc, ncclCommDeregister(nc, x->handle), "ncclCommDeregister") != GR_OK)
    GR_WARN("communicator %s: %s", c->id, c->err);
  if (x->kind == MEM_NCCL) {
    ncclResult_t rc = ncclMemFree(m->ptr);
    if (rc != ncclSuccess)
      GR_WARN("communicator %s: ncclMemFree failed: %s", c->id, ncclGetErrorString(rc));
  } else if (x->kind == MEM_PLAIN) {
    cudaError_t e = cudaFree(m->ptr);
    if (e != cudaSuccess)
      GR_WARN("communicator %s: cudaFree failed: %s", c->id, cudaGetErrorString(e));
  }
  free(x);
  m->be = NULL;
}

const gr__coll_ops GR__NCCL_OPS = {
    .name = "nccl",
    .kind = GR_BACKEND_NCCL,
    .caps = GR__CAP_JOIN_REFUSALS | GR__CAP_VERDICT_IN_FRONT | GR__CAP_P2P_IN_LINE,
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
    .paths = nccl_paths,
    .mem_alloc = nccl_mem_alloc,
    .mem_register = nccl_mem_register,
    .mem_free = nccl_mem_free,
};
