/* Every collective x dtype x op x in/out-of-place x size {0, 1, 7, 1023, 1Mi+3}, on the world and
 * on split communicators, against expectations computed here (exact_values.h). Compiled once for
 * the MPI backend and once, with EXACT_NCCL_DOUBLE, for the NCCL backend over the test double.
 * Usage: test_coll_exact [--big] [--no-timeout] [--mem]
 *   --big: the 1Mi+3 cases (a chosen few per collective, on the world)
 *   --no-timeout: timeout 0, so that the MPI backend may use its blocking fast path
 *   --mem: every buffer from gr_mem_alloc memory of the communicator under test (a stack in one
 *          allocation per communicator, so that each rank's buffers lie at offsets of its own),
 *          with sizes around the direct path's thresholds
 *   --register: the same on a malloc'd buffer (page-aligned whole pages, at an offset per rank)
 *          made reachable by gr_mem_register, whose contents must survive registering and
 *          deregistering */
#include <gpurun/coll.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exact_check.h"
#include "exact_values.h"

#ifdef EXACT_NCCL_DOUBLE
#include "gr_coll.h"
extern const gr__coll_ops gr__coll_ops_nccl_double;
#define BACKEND_LABEL "nccl-double"
#elif defined(EXACT_REAL_NCCL)
#include <cuda_runtime_api.h>
#include "gr_device.h"
#define BACKEND_LABEL "nccl"
#else
#include "gr_shm.h" /* gr__shm_direct_calls */
#define BACKEND_LABEL "mpi"
#endif

static int world_rank, failures, checks;
static int mem_mode;                         /* --mem or --register */
static int reg_mode __attribute__((unused)); /* --register (the MPI backend only) */
static const size_t small_sizes[] = {0, 1, 7, 1023};
#define BIG ((size_t)(1u << 20) + 3)

#if defined(EXACT_NCCL_DOUBLE) || defined(EXACT_REAL_NCCL)
#ifdef EXACT_NCCL_DOUBLE
/* Every other buffer is "device" memory of the double (host-readable there), so that the NCCL
 * backend's direct path, its staging of host buffers and mixed calls all run. */
#include "nccl_double/include/cuda_runtime_api.h"
#define DEV_ALLOC(p, bytes) cudaMalloc(p, bytes)
#define DEV_TYPE cudaMemoryTypeDevice
#else
/* Every other buffer is CUDA managed memory (device memory to NCCL, readable here), the others
 * plain host memory that the backend stages. */
#define DEV_ALLOC(p, bytes) cudaMallocManaged(p, bytes, cudaMemAttachGlobal)
#define DEV_TYPE cudaMemoryTypeManaged
#endif
static unsigned nalloc;
static void *xalloc(size_t bytes) {
  if (nalloc++ % 2 != 0) return ec_alloc(bytes);
  void *p = NULL;
  if (DEV_ALLOC(&p, bytes ? bytes : 1) != cudaSuccess) p = NULL;
  return ec_must(p);
}
static void xfree(void *p) {
  struct cudaPointerAttributes a;
  if (cudaPointerGetAttributes(&a, p) == cudaSuccess && a.type == DEV_TYPE)
    cudaFree(p);
  else
    free(p);
}
#define free xfree
#else
/* --mem: buffers are taken from the top of the current communicator's allocation and given back
 * by moving the top down (the t_ functions free in the reverse order of their allocations). */
typedef struct {
  unsigned char *base, *top;
  size_t bytes;
  gr_mem_handle *handle; /* --register */
  void *block;           /* --register: what malloc gave */
} arena;
static arena *cur;
static void libc_free(void *p) { free(p); } /* the name free is the arena's below */
static void *xalloc(size_t bytes) {
  if (!mem_mode) return ec_alloc(bytes);
  size_t need = (bytes + 63) & ~(size_t)63;
  if (!cur || need > cur->bytes - (size_t)(cur->top - cur->base)) {
    fprintf(stderr, "rank %d: test arena exhausted (%zu bytes asked)\n", world_rank, bytes);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  void *p = cur->top;
  cur->top += need ? need : 64;
  return p;
}
static void xfree(void *p) {
  if (!mem_mode) {
    free(p);
    return;
  }
  if ((unsigned char *)p >= cur->base && (unsigned char *)p < cur->top) cur->top = p;
}
#define free xfree
#endif

static const double SENTINEL = 99;

static void fill(gr_dtype t, gr_op op, void *buf, size_t n, int r, size_t off) {
  for (size_t i = 0; i < n; i++)
    ev_set(t, buf, i, ev_input(t, op, r, off + i));
}
static void fill_const(gr_dtype t, void *buf, size_t n, double v) {
  for (size_t i = 0; i < n; i++)
    ev_set(t, buf, i, v);
}

static int ops_for(gr_dtype t, gr_op *ops) {
  int n = 0;
  for (int o = GR_SUM; o <= GR_AVG; o++)
    if (o != GR_AVG || ev_is_float(t)) ops[n++] = (gr_op)o;
  return n;
}

static void t_allreduce(gr_comm *c, gr_dtype t, gr_op op, size_t n, int inplace) {
  int r = gr_comm_rank(c), P = gr_comm_size(c);
  size_t es = ev_size(t);
  char what[128];
  snprintf(what, sizeof what, "%s allreduce %s %s n=%zu %s", BACKEND_LABEL, ev_dtype_name(t),
           ev_op_name(op), n, inplace ? "in-place" : "out-of-place");
  void *s = xalloc(n * es), *d = inplace ? s : xalloc(n * es);
  fill(t, op, s, n, r, 0);
  if (!inplace) fill_const(t, d, n, SENTINEL);
  EXPECT_OK_IN(gr_allreduce(s, d, n, t, op, c, NULL), what);
  EXPECT_OK_IN(gr_comm_synchronize(c, NULL), what);
  EXPECT_ALL(what, t, d, n, ev_reduced(t, op, P, i));
  if (!inplace) EXPECT_ALL(what, t, s, n, ev_input(t, op, r, i)); /* send untouched */
  if (!inplace) free(d);
  free(s);
}

static void t_reduce(gr_comm *c, gr_dtype t, gr_op op, size_t n, int inplace, int root) {
  int r = gr_comm_rank(c), P = gr_comm_size(c);
  size_t es = ev_size(t);
  char what[128];
  snprintf(what, sizeof what, "%s reduce %s %s n=%zu root=%d %s", BACKEND_LABEL, ev_dtype_name(t),
           ev_op_name(op), n, root, inplace ? "in-place" : "out-of-place");
  void *s = xalloc(n * es), *d = (inplace && r == root) ? s : xalloc(n * es);
  fill(t, op, s, n, r, 0);
  if (d != s) fill_const(t, d, n, SENTINEL);
  EXPECT_OK_IN(gr_reduce(s, d, n, t, op, root, c, NULL), what);
  EXPECT_OK_IN(gr_comm_synchronize(c, NULL), what);
  if (r == root)
    EXPECT_ALL(what, t, d, n, ev_reduced(t, op, P, i));
  else
    EXPECT_ALL(what, t, d, n, SENTINEL); /* non-roots' recv is not touched */
  if (d != s) {
    EXPECT_ALL(what, t, s, n, ev_input(t, op, r, i));
    free(d);
  }
  free(s);
}

static void t_broadcast(gr_comm *c, gr_dtype t, size_t n, int inplace, int root) {
  int r = gr_comm_rank(c);
  size_t es = ev_size(t);
  char what[128];
  snprintf(what, sizeof what, "%s broadcast %s n=%zu root=%d %s", BACKEND_LABEL, ev_dtype_name(t),
           n, root, inplace ? "in-place" : "out-of-place");
  void *s = xalloc(n * es), *d = inplace ? s : xalloc(n * es);
  if (r == root)
    fill(t, GR_SUM, s, n, r, 0);
  else
    fill_const(t, s, n, SENTINEL);
  if (!inplace) fill_const(t, d, n, SENTINEL);
  EXPECT_OK_IN(gr_broadcast(r == root ? s : (inplace ? s : NULL), d, n, t, root, c, NULL), what);
  EXPECT_OK_IN(gr_comm_synchronize(c, NULL), what);
  EXPECT_ALL(what, t, d, n, ev_input(t, GR_SUM, root, i));
  if (!inplace) free(d);
  free(s);
}

static void t_allgather(gr_comm *c, gr_dtype t, size_t n, int inplace) {
  int r = gr_comm_rank(c), P = gr_comm_size(c);
  size_t es = ev_size(t);
  char what[128];
  snprintf(what, sizeof what, "%s allgather %s n=%zu %s", BACKEND_LABEL, ev_dtype_name(t), n,
           inplace ? "in-place" : "out-of-place");
  void *d = xalloc(n * es * (size_t)P);
  fill_const(t, d, n * (size_t)P, SENTINEL);
  void *s = inplace ? (char *)d + (size_t)r * n * es : xalloc(n * es);
  fill(t, GR_SUM, s, n, r, 0);
  EXPECT_OK_IN(gr_allgather(s, d, n, t, c, NULL), what);
  EXPECT_OK_IN(gr_comm_synchronize(c, NULL), what);
  EXPECT_ALL(what, t, d, n * (size_t)P,
             ev_input(t, GR_SUM, (int)(i / (n ? n : 1)), i % (n ? n : 1)));
  if (!inplace) {
    EXPECT_ALL(what, t, s, n, ev_input(t, GR_SUM, r, i));
    free(s);
  }
  free(d);
}

static void t_reduce_scatter(gr_comm *c, gr_dtype t, gr_op op, size_t n, int inplace) {
  int r = gr_comm_rank(c), P = gr_comm_size(c);
  size_t es = ev_size(t), off = (size_t)r * n;
  char what[128];
  snprintf(what, sizeof what, "%s reduce_scatter %s %s n=%zu %s", BACKEND_LABEL, ev_dtype_name(t),
           ev_op_name(op), n, inplace ? "in-place" : "out-of-place");
  void *s = xalloc(n * es * (size_t)P);
  fill(t, op, s, n * (size_t)P, r, 0);
  void *d = inplace ? (char *)s + off * es : xalloc(n * es);
  if (!inplace) fill_const(t, d, n, SENTINEL);
  EXPECT_OK_IN(gr_reduce_scatter(s, d, n, t, op, c, NULL), what);
  EXPECT_OK_IN(gr_comm_synchronize(c, NULL), what);
  EXPECT_ALL(what, t, d, n, ev_reduced(t, op, P, off + i));
  if (!inplace) {
    EXPECT_ALL(what, t, s, n * (size_t)P, ev_input(t, op, r, i));
    free(d);
  }
  free(s);
}

static void t_alltoall(gr_comm *c, gr_dtype t, size_t n, int inplace) {
  int r = gr_comm_rank(c), P = gr_comm_size(c);
  size_t es = ev_size(t), N = n * (size_t)P;
  char what[128];
  snprintf(what, sizeof what, "%s alltoall %s n=%zu %s", BACKEND_LABEL, ev_dtype_name(t), n,
           inplace ? "in-place" : "out-of-place");
  void *s = xalloc(N * es), *d = inplace ? s : xalloc(N * es);
  fill(t, GR_SUM, s, N, r, 0); /* block p of rank r: ev_input(r, p*n + i) */
  if (!inplace) fill_const(t, d, N, SENTINEL);
  EXPECT_OK_IN(gr_alltoall(s, d, n, t, c, NULL), what);
  EXPECT_OK_IN(gr_comm_synchronize(c, NULL), what);
  EXPECT_ALL(what, t, d, N,
             ev_input(t, GR_SUM, (int)(i / (n ? n : 1)), (size_t)r * n + i % (n ? n : 1)));
  if (!inplace) {
    EXPECT_ALL(what, t, s, N, ev_input(t, GR_SUM, r, i));
    free(d);
  }
  free(s);
}

/* A ring: everyone sends to the next and receives from the previous, in one group. */
static void t_sendrecv(gr_comm *c, gr_dtype t, size_t n) {
  int r = gr_comm_rank(c), P = gr_comm_size(c);
  int next = (r + 1) % P, prev = (r + P - 1) % P;
  size_t es = ev_size(t);
  char what[128];
  snprintf(what, sizeof what, "%s send/recv %s n=%zu", BACKEND_LABEL, ev_dtype_name(t), n);
  void *s = xalloc(n * es), *d = xalloc(n * es);
  fill(t, GR_SUM, s, n, r, 0);
  fill_const(t, d, n, SENTINEL);
  EXPECT_OK_IN(gr_group_start(), what);
  EXPECT_OK_IN(gr_send(s, n, t, next, c, NULL), what);
  EXPECT_OK_IN(gr_recv(d, n, t, prev, c, NULL), what);
  EXPECT_OK_IN(gr_group_end(), what);
  EXPECT_OK_IN(gr_comm_synchronize(c, NULL), what);
  EXPECT_ALL(what, t, d, n, ev_input(t, GR_SUM, prev, i));
  /* and ungrouped, rank 0 -> rank P-1 */
  if (P > 1 && (r == 0 || r == P - 1)) {
    fill_const(t, d, n, SENTINEL);
    if (r == 0)
      EXPECT_OK_IN(gr_send(s, n, t, P - 1, c, NULL), what);
    else
      EXPECT_OK_IN(gr_recv(d, n, t, 0, c, NULL), what);
    EXPECT_OK_IN(gr_comm_synchronize(c, NULL), what);
    if (r == P - 1) EXPECT_ALL(what, t, d, n, ev_input(t, GR_SUM, 0, i));
  }
  free(s);
  free(d);
}

/* Fused: buffers of 0, 7 and 1023 elements in one call; the middle one in place. */
static void t_allreduce_multi(gr_comm *c, gr_dtype t, gr_op op) {
  int r = gr_comm_rank(c), P = gr_comm_size(c);
  size_t es = ev_size(t), counts[3] = {0, 7, 1023};
  char what[128];
  snprintf(what, sizeof what, "%s allreduce_multi %s %s", BACKEND_LABEL, ev_dtype_name(t),
           ev_op_name(op));
  void *s[3], *d[3];
  for (int b = 0; b < 3; b++) {
    s[b] = xalloc(counts[b] * es);
    d[b] = b == 1 ? s[b] : xalloc(counts[b] * es);
    fill(t, op, s[b], counts[b], r, 100 * (size_t)b);
    if (b != 1) fill_const(t, d[b], counts[b], SENTINEL);
  }
  EXPECT_OK_IN(gr_allreduce_multi((const void *const *)s, d, counts, 3, t, op, c, NULL), what);
  EXPECT_OK_IN(gr_comm_synchronize(c, NULL), what);
  for (int b = 0; b < 3; b++)
    EXPECT_ALL(what, t, d[b], counts[b], ev_reduced(t, op, P, 100 * (size_t)b + i));
  for (int b = 0; b < 3; b++) {
    if (b != 1) free(d[b]);
    free(s[b]);
  }
}

/* Several collectives in flight at once: a group of allreduces and a broadcast. */
static void t_grouped(gr_comm *c) {
  int r = gr_comm_rank(c), P = gr_comm_size(c);
  const char *what = BACKEND_LABEL " grouped allreduce x3 + broadcast";
  void *a = xalloc(7 * 4), *b = xalloc(1023 * 4), *d = xalloc(1023 * 8), *e = xalloc(5 * 2);
  fill(GR_INT32, GR_SUM, a, 7, r, 0);
  fill(GR_FLOAT32, GR_MAX, b, 1023, r, 0);
  fill(GR_FLOAT64, GR_PROD, d, 1023, r, 0);
  if (r == 0)
    fill(GR_FLOAT16, GR_SUM, e, 5, r, 0);
  else
    fill_const(GR_FLOAT16, e, 5, SENTINEL);
  EXPECT_OK_IN(gr_group_start(), what);
  EXPECT_OK_IN(gr_allreduce(a, a, 7, GR_INT32, GR_SUM, c, NULL), what);
  EXPECT_OK_IN(gr_allreduce(b, b, 1023, GR_FLOAT32, GR_MAX, c, NULL), what);
  EXPECT_OK_IN(gr_broadcast(e, e, 5, GR_FLOAT16, 0, c, NULL), what);
  EXPECT_OK_IN(gr_allreduce(d, d, 1023, GR_FLOAT64, GR_PROD, c, NULL), what);
  EXPECT_OK_IN(gr_group_end(), what);
  EXPECT_OK_IN(gr_comm_synchronize(c, NULL), what);
  EXPECT_ALL(what, GR_INT32, a, 7, ev_reduced(GR_INT32, GR_SUM, P, i));
  EXPECT_ALL(what, GR_FLOAT32, b, 1023, ev_reduced(GR_FLOAT32, GR_MAX, P, i));
  EXPECT_ALL(what, GR_FLOAT64, d, 1023, ev_reduced(GR_FLOAT64, GR_PROD, P, i));
  EXPECT_ALL(what, GR_FLOAT16, e, 5, ev_input(GR_FLOAT16, GR_SUM, 0, i));
  free(a), free(b), free(d), free(e);
}

/* Requests: three collectives in flight, completed in another order, plus a large allreduce. */
static void t_nonblocking(gr_comm *c) {
  int r = gr_comm_rank(c), P = gr_comm_size(c);
  const char *what = BACKEND_LABEL " non-blocking requests";
  size_t big = 100003;
  void *a = xalloc(1023 * 4), *b = xalloc(7 * 8), *g = xalloc(7 * (size_t)P), *gs = xalloc(7);
  void *l = xalloc(big * 4), *lo = xalloc(big * 4);
  fill(GR_FLOAT32, GR_SUM, a, 1023, r, 0);
  if (r == P - 1)
    fill(GR_INT64, GR_SUM, b, 7, r, 0);
  else
    fill_const(GR_INT64, b, 7, SENTINEL);
  fill(GR_UINT8, GR_SUM, gs, 7, r, 0);
  fill(GR_FLOAT32, GR_MAX, l, big, r, 0);
  gr_request *ra = NULL, *rb = NULL, *rg = NULL, *rl = NULL;
  EXPECT_OK_IN(gr_iallreduce(a, a, 1023, GR_FLOAT32, GR_SUM, c, NULL, &ra), what);
  EXPECT_OK_IN(gr_ibroadcast(b, b, 7, GR_INT64, P - 1, c, NULL, &rb), what);
  EXPECT_OK_IN(gr_iallgather(gs, g, 7, GR_UINT8, c, NULL, &rg), what);
  EXPECT_OK_IN(gr_iallreduce(l, lo, big, GR_FLOAT32, GR_MAX, c, NULL, &rl), what);
  int done = 0;
  while (!done && rg)
    EXPECT_OK_IN(gr_test(&rg, &done), what);
  if (rg) FAIL("gr_test left the request set after it finished");
  EXPECT_OK_IN(gr_wait(&rb), what);
  EXPECT_OK_IN(gr_wait(&rl), what);
  EXPECT_OK_IN(gr_wait(&ra), what);
  if (ra || rb || rl) FAIL("gr_wait left a request set");
  EXPECT_OK_IN(gr_comm_synchronize(c, NULL), what);
  EXPECT_ALL(what, GR_FLOAT32, a, 1023, ev_reduced(GR_FLOAT32, GR_SUM, P, i));
  EXPECT_ALL(what, GR_INT64, b, 7, ev_input(GR_INT64, GR_SUM, P - 1, i));
  EXPECT_ALL(what, GR_UINT8, g, 7 * (size_t)P, ev_input(GR_UINT8, GR_SUM, (int)(i / 7), i % 7));
  EXPECT_ALL(what, GR_FLOAT32, lo, big, ev_reduced(GR_FLOAT32, GR_MAX, P, i));
  free(a), free(b), free(g), free(gs), free(l), free(lo);
}

#if !defined(EXACT_NCCL_DOUBLE) && !defined(EXACT_REAL_NCCL)
/* A pattern of this rank's over the arena, and its check (registering moves the pages). */
static void pattern(const arena *a, int check, const char *what) {
  for (size_t i = 0; i < a->bytes; i += 997) {
    unsigned char want = (unsigned char)(i * 31 + (size_t)world_rank);
    if (!check)
      a->base[i] = want;
    else if (a->base[i] != want) {
      FAIL("%s: byte %zu is %u, expected %u", what, i, a->base[i], want);
      return;
    }
  }
}

static void arena_open(arena *a, gr_comm *c, size_t bytes) {
  a->bytes = bytes;
  if (reg_mode) {
    /* whole pages, page-aligned (gr_mem_register refuses a buffer sharing a page with other
     * memory), at an offset of a few pages that differs per rank */
    a->bytes = bytes = (bytes + 4095) & ~(size_t)4095;
    a->block = ec_alloc(bytes + 4096 * (size_t)(world_rank + 2));
    a->base = (unsigned char *)(((uintptr_t)a->block + 4095) & ~(uintptr_t)4095) +
              4096 * (size_t)world_rank;
    pattern(a, 0, "");
    EXPECT_OK_IN(gr_mem_register(c, a->base, bytes, &a->handle), "gr_mem_register");
    pattern(a, 1, "contents after gr_mem_register");
  } else {
    EXPECT_OK_IN(gr_mem_alloc(c, bytes, (void **)&a->base), "gr_mem_alloc");
  }
  if (!a->base) MPI_Abort(MPI_COMM_WORLD, 2);
  a->top = a->base;
}

static void arena_close(arena *a, gr_comm *c) {
  if (!reg_mode) {
    EXPECT_OK_IN(gr_mem_free(c, a->base), "gr_mem_free");
    return;
  }
  pattern(a, 0, "");
  EXPECT_OK_IN(gr_mem_deregister(c, a->handle), "gr_mem_deregister");
  pattern(a, 1, "contents after gr_mem_deregister");
  libc_free(a->block);
}
#endif

static void suite(gr_comm *c, const size_t *sizes, size_t nsizes) {
  int P = gr_comm_size(c);
  for (int t = GR_INT8; t <= GR_FLOAT64; t++) {
    gr_op ops[5];
    int nops = ops_for((gr_dtype)t, ops);
    for (size_t si = 0; si < nsizes; si++) {
      size_t n = sizes[si];
      for (int inplace = 0; inplace < 2; inplace++) {
        for (int o = 0; o < nops; o++) {
          t_allreduce(c, (gr_dtype)t, ops[o], n, inplace);
          t_reduce(c, (gr_dtype)t, ops[o], n, inplace, P - 1);
          t_reduce_scatter(c, (gr_dtype)t, ops[o], n, inplace);
        }
        t_reduce(c, (gr_dtype)t, GR_SUM, n, inplace, 0);
        t_broadcast(c, (gr_dtype)t, n, inplace, 0);
        t_broadcast(c, (gr_dtype)t, n, inplace, P - 1);
        t_allgather(c, (gr_dtype)t, n, inplace);
        t_alltoall(c, (gr_dtype)t, n, inplace);
      }
      t_sendrecv(c, (gr_dtype)t, n);
    }
  }
}

/* The 1Mi+3 cases: one or two per collective (each type family once), so that the large-message
 * paths (rendezvous, segmentation, staging) run without multiplying the run time. */
static void big_suite(gr_comm *c) {
  int P = gr_comm_size(c);
  size_t per_peer = P <= 2 ? BIG : BIG / 8; /* allgather/reduce_scatter/alltoall move n*P */
  t_allreduce(c, GR_FLOAT32, GR_SUM, BIG, 0);
  t_allreduce(c, GR_FLOAT16, GR_SUM, BIG, 1);
  t_allreduce(c, GR_BFLOAT16, GR_MAX, BIG, 0);
  t_allreduce(c, GR_FLOAT64, GR_AVG, BIG, 1);
  t_allreduce(c, GR_INT8, GR_PROD, BIG, 0);
  t_reduce(c, GR_INT64, GR_MIN, BIG, 1, P - 1);
  t_broadcast(c, GR_UINT8, BIG, 0, P - 1);
  t_allgather(c, GR_INT32, per_peer, 1);
  t_reduce_scatter(c, GR_UINT32, GR_SUM, per_peer, 0);
  t_alltoall(c, GR_FLOAT32, per_peer, 1);
  t_sendrecv(c, GR_UINT64, BIG);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  int big = 0, blocking = 0;
  for (int i = 1; i < argc; i++) {
    big |= strcmp(argv[i], "--big") == 0;
    blocking |= strcmp(argv[i], "--no-timeout") == 0;
#if !defined(EXACT_NCCL_DOUBLE) && !defined(EXACT_REAL_NCCL)
    mem_mode |= strcmp(argv[i], "--mem") == 0;
    reg_mode |= strcmp(argv[i], "--register") == 0;
    mem_mode |= reg_mode;
#endif
  }
  gr_comm_config cfg;
  gr_comm_config_init(&cfg);
  /* A hang fails the test with a message instead of ctest's kill; --no-timeout exercises the
   * MPI backend's blocking fast path instead. */
  cfg.timeout_s = blocking ? 0 : 60;
  gr_comm *world = NULL, *split = NULL, *halves = NULL;
#ifdef EXACT_NCCL_DOUBLE
  EXPECT_OK_IN(gr__comm_create_ops(MPI_COMM_WORLD, &cfg, &gr__coll_ops_nccl_double, &world),
               "create");
#elif defined(EXACT_REAL_NCCL)
  {
    int ndev = 0, nranks;
    char why[160] = "";
    if (gr__cuda_device_count(&ndev) != GR_OK) snprintf(why, sizeof why, "%s", gr_last_error());
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    /* One GPU per rank (NCCL refuses two ranks on one device), unless the run asks for ranks
     * that share a GPU (GPURUN_EXACT_SHARE_GPU=1: the device kit tests the backend's path for it) */
    const char *share = getenv("GPURUN_EXACT_SHARE_GPU");
    if (ndev < 1 || (ndev < nranks && !(share && strcmp(share, "1") == 0))) {
      if (world_rank == 0)
        printf("skipped: %d rank(s), %d GPU(s) (%s)\n", nranks, ndev, ndev ? "" : why);
      MPI_Finalize();
      return 77;
    }
    cudaSetDevice(world_rank % ndev);
  }
  cfg.backend = GR_BACKEND_NCCL;
  EXPECT_OK_IN(gr_comm_create(MPI_COMM_WORLD, &cfg, &world), "create");
#else
  cfg.backend = GR_BACKEND_MPI;
  EXPECT_OK_IN(gr_comm_create(MPI_COMM_WORLD, &cfg, &world), "create");
#endif
  if (!world) MPI_Abort(MPI_COMM_WORLD, 1);
  int P = gr_comm_size(world);
#if !defined(EXACT_NCCL_DOUBLE) && !defined(EXACT_REAL_NCCL)
  /* around the direct path's thresholds: 4 KiB per rank (its start), 16 KiB (the single copy's) */
  static const size_t mem_sizes[] = {1, 1023, 1025, 5003};
  arena world_arena = {0}, split_arena = {0}, halves_arena = {0};
  if (mem_mode) {
    arena_open(&world_arena, world, (size_t)(big ? 64 : 8) << 20);
    cur = &world_arena;
  }
#endif
  if (big) {
    big_suite(world);
  } else if (mem_mode) {
#if !defined(EXACT_NCCL_DOUBLE) && !defined(EXACT_REAL_NCCL)
    suite(world, mem_sizes, 4);
    t_nonblocking(world);
    EXPECT_OK_IN(gr_comm_split(world, world_rank % 2, -world_rank, &split), "split");
    if (split) {
      arena_open(&split_arena, split, (size_t)8 << 20);
      cur = &split_arena;
      suite(split, mem_sizes + 2, 2);
      t_nonblocking(split);
    }
    EXPECT_OK_IN(gr_comm_split(world, world_rank == P - 1 && P > 1 ? -1 : 0, 0, &halves),
                 "split nocolor");
    if (halves) {
      arena_open(&halves_arena, halves, (size_t)1 << 20);
      cur = &halves_arena;
      t_allreduce(halves, GR_FLOAT32, GR_SUM, 5003, 1);
      t_allgather(halves, GR_INT32, 2000, 0);
      arena_close(&halves_arena, halves);
    }
    /* the split's allocation is released by gr_comm_destroy (a registered buffer's by hand: its
     * malloc'd block is freed here) */
    if (split && reg_mode) arena_close(&split_arena, split);
    EXPECT_OK_IN(gr_comm_destroy(halves), "destroy");
    EXPECT_OK_IN(gr_comm_destroy(split), "destroy");
    cur = &world_arena;
#endif
  } else {
    suite(world, small_sizes, 4);
    t_allreduce_multi(world, GR_FLOAT32, GR_SUM);
    t_allreduce_multi(world, GR_FLOAT16, GR_AVG);
    t_allreduce_multi(world, GR_INT8, GR_MIN);
    t_grouped(world);
    t_nonblocking(world);
    /* odd/even ranks, numbered backwards: comm ranks differ from world ranks */
    EXPECT_OK_IN(gr_comm_split(world, world_rank % 2, -world_rank, &split), "split");
    if (split) {
      if (gr_comm_size(split) != (P + 1 - world_rank % 2) / 2)
        FAIL("split size %d", gr_comm_size(split));
      suite(split, small_sizes + 1, 2);
    }
    /* a split in which the last rank takes no part (color < 0) */
    EXPECT_OK_IN(gr_comm_split(world, world_rank == P - 1 && P > 1 ? -1 : 0, 0, &halves),
                 "split nocolor");
    if ((halves == NULL) != (world_rank == P - 1 && P > 1))
      FAIL("split with no color: comm %p", (void *)halves);
    if (halves) t_allreduce(halves, GR_INT32, GR_SUM, 7, 0);
    if (split) t_grouped(split);
    if (split) t_nonblocking(split);
    EXPECT_OK_IN(gr_comm_destroy(halves), "destroy");
    EXPECT_OK_IN(gr_comm_destroy(split), "destroy");
  }
#if !defined(EXACT_NCCL_DOUBLE) && !defined(EXACT_REAL_NCCL)
  if (mem_mode) arena_close(&world_arena, world);
  /* on one node, every case from 4 KiB per rank on runs direct in the windows */
  if (mem_mode && P > 1 && gr__shm_direct_calls() == 0) FAIL("no call ran direct in the windows");
  if (mem_mode && world_rank == 0)
    printf("calls run direct in the windows on rank 0: %llu\n",
           (unsigned long long)gr__shm_direct_calls());
#endif
  EXPECT_OK_IN(gr_comm_destroy(world), "destroy");
  int total = 0, nchecks = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(&checks, &nchecks, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (world_rank == 0)
    printf("%s %s%s at %d ranks: %d element checks, %d failures\n", BACKEND_LABEL,
           big ? "1Mi+3 cases" : "all cases",
#if !defined(EXACT_NCCL_DOUBLE) && !defined(EXACT_REAL_NCCL)
           reg_mode   ? " on gr_mem_register'ed buffers"
           : mem_mode ? " on gr_mem_alloc memory"
                      :
#endif
                      "",
           P, nchecks, total);
  MPI_Finalize();
  return total ? 1 : 0;
}
