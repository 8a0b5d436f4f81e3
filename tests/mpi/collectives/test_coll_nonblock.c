/* The non-blocking forms gr_ireduce, gr_ireduce_scatter, gr_ialltoall, gr_iallreduce_multi,
 * gr_ibarrier, gr_isend and gr_irecv, exactly: every dtype and op, in and out of place, sizes {0, 1, 7, 1023, 20000}, each
 * completed by gr_wait or by gr_test alone; requests of every kind outstanding together and
 * completed forwards, in reverse, in an order of each rank's own and by gr_test sweeps; send and
 * receive requests matched across ranks in order; refusals (one rank's bad argument: every rank
 * learns it, nobody waits; a point-to-point refusal is the rank's alone). Compiled once for the
 * MPI backend and once, with NONBLOCK_NCCL_DOUBLE, for the NCCL backend over the test double.
 * Usage: test_coll_nonblock [--no-timeout] [--check]
 *   --no-timeout: timeout 0 (the MPI backend's blocking-capable paths); default 60 s
 *   --check: check mode (the fingerprint exchange carries refusals)
 *   --no-across: leave out the requests outstanding across a group and a split (t_across) */
#include <gpurun/coll.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exact_check.h"
#include "exact_values.h"
#include "gr_test_clock.h"

#ifdef NONBLOCK_NCCL_DOUBLE
#include "gr_coll.h"
#include "nccl_double/include/cuda_runtime_api.h"
extern const gr__coll_ops gr__coll_ops_nccl_double;
#define BACKEND_LABEL "nccl-double"
/* Every other buffer is "device" memory of the double, so that the backend's direct path and its
 * staging of host buffers both run. */
static unsigned nalloc;
static void *xalloc(size_t bytes) {
  if (nalloc++ % 2 != 0) return ec_alloc(bytes);
  void *p = NULL;
  if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) p = NULL;
  return ec_must(p);
}
static void xfree(void *p) {
  struct cudaPointerAttributes a;
  if (cudaPointerGetAttributes(&a, p) == cudaSuccess && a.type == cudaMemoryTypeDevice)
    cudaFree(p);
  else
    free(p);
}
#define free xfree
#else
#define BACKEND_LABEL "mpi"
static void *xalloc(size_t bytes) { return ec_alloc(bytes); }
#endif

static int world_rank, world_size, failures, checks, check_mode;
/* Receives run on a stream of their own: on NCCL a stream runs its work in order, so a send
 * and a receive with the same peer on one stream would wait for each other (NCCL's rule). */
static gr_stream recv_stream;

static const double SENTINEL = 99;
static const size_t sizes[] = {0, 1, 7, 1023, 20000};
#define NSIZES (sizeof sizes / sizeof sizes[0])

static void fill(gr_dtype t, gr_op op, void *buf, size_t n, int r, size_t off) {
  for (size_t i = 0; i < n; i++)
    ev_set(t, buf, i, ev_input(t, op, r, off + i));
}
static void fill_const(gr_dtype t, void *buf, size_t n, double v) {
  for (size_t i = 0; i < n; i++)
    ev_set(t, buf, i, v);
}

/* Complete q by gr_wait (by_test 0) or by gr_test alone. */
static void finish(const char *what, gr_status started, gr_request **q, int by_test) {
  if (started != GR_OK) {
    FAIL("%s: start %s (%s)", what, gr_status_name(started), gr_last_error());
    return;
  }
  if (!*q) {
    FAIL("%s: a start that returned GR_OK left no request", what);
    return;
  }
  gr_status st = GR_OK;
  if (by_test) {
    int done = 0;
    for (long spins = 0; !done && st == GR_OK; spins++)
      st = gr_test(q, &done);
  } else {
    st = gr_wait(q);
  }
  if (st != GR_OK) FAIL("%s: %s (%s)", what, gr_status_name(st), gr_last_error());
  if (*q) FAIL("%s: the request is still set after it finished", what);
}

static int ops_for(gr_dtype t, gr_op *ops) {
  int n = 0;
  for (int o = GR_SUM; o <= GR_AVG; o++)
    if (o != GR_AVG || ev_is_float(t)) ops[n++] = (gr_op)o;
  return n;
}

static void t_ireduce(gr_comm *c, gr_dtype t, gr_op op, size_t n, int inplace, int root, int bt) {
  int r = gr_comm_rank(c), P = gr_comm_size(c);
  size_t es = ev_size(t);
  char what[160];
  snprintf(what, sizeof what, "%s gr_ireduce %s %s n=%zu root=%d %s %s", BACKEND_LABEL,
           ev_dtype_name(t), ev_op_name(op), n, root, inplace ? "in-place" : "out-of-place",
           bt ? "gr_test" : "gr_wait");
  void *s = xalloc(n * es), *d = (inplace && r == root) ? s : xalloc(n * es);
  fill(t, op, s, n, r, 0);
  if (d != s) fill_const(t, d, n, SENTINEL);
  gr_request *q = NULL;
  finish(what, gr_ireduce(s, d, n, t, op, root, c, NULL, &q), &q, bt);
  EXPECT_OK_IN(gr_comm_synchronize(c, NULL), what);
  if (r == root)
    EXPECT_ALL(what, t, d, n, ev_reduced(t, op, P, i));
  else
    EXPECT_ALL(what, t, d, n, SENTINEL);
  if (d != s) {
    EXPECT_ALL(what, t, s, n, ev_input(t, op, r, i));
    free(d);
  }
  free(s);
}

/* Three buffers of n, 0 and n / 2 + 1 elements, inputs at consecutive offsets of one index space.
 * The send buffers are overwritten right after the start (the call runs on its own packed copy);
 * the results arrive in every recv when the request completes. On the NCCL backend the fused
 * request is GR_ERR_UNSUPPORTED on every rank. */
static void t_iallreduce_multi(gr_comm *c, gr_dtype t, gr_op op, size_t n, int inplace, int bt) {
  int r = gr_comm_rank(c);
  size_t es = ev_size(t), cnt[3] = {n, 0, n / 2 + 1}, off[3] = {0, n, n};
  char what[160];
  snprintf(what, sizeof what, "%s gr_iallreduce_multi %s %s n=%zu %s %s", BACKEND_LABEL,
           ev_dtype_name(t), ev_op_name(op), n, inplace ? "in-place" : "out-of-place",
           bt ? "gr_test" : "gr_wait");
  void *s[3], *d[3];
  for (int b = 0; b < 3; b++) {
    s[b] = ec_alloc(cnt[b] * es);
    d[b] = inplace ? s[b] : ec_alloc(cnt[b] * es);
    fill(t, op, s[b], cnt[b], r, off[b]);
    if (!inplace) fill_const(t, d[b], cnt[b], SENTINEL);
  }
  gr_request *q = NULL;
  gr_status st = gr_iallreduce_multi((const void *const *)s, d, cnt, 3, t, op, c, NULL, &q);
#ifdef NONBLOCK_NCCL_DOUBLE
  checks++;
  if (st != GR_ERR_UNSUPPORTED || q || !strstr(gr_last_error(), "one gr_iallreduce per buffer"))
    FAIL("%s: %s (%s), expected GR_ERR_UNSUPPORTED", what, gr_status_name(st), gr_last_error());
#else
  if (!inplace)
    for (int b = 0; b < 3; b++)
      fill_const(t, s[b], cnt[b], 55); /* the request holds its own copy */
  finish(what, st, &q, bt);
  for (int b = 0; b < 3; b++)
    EXPECT_ALL(what, t, d[b], cnt[b], ev_reduced(t, op, gr_comm_size(c), off[b] + i));
#endif
  for (int b = 0; b < 3; b++) {
    if (d[b] != s[b]) free(d[b]);
    free(s[b]);
  }
}

static void t_ireduce_scatter(gr_comm *c, gr_dtype t, gr_op op, size_t n, int inplace, int bt) {
  int r = gr_comm_rank(c), P = gr_comm_size(c);
  size_t es = ev_size(t), off = (size_t)r * n;
  char what[160];
  snprintf(what, sizeof what, "%s gr_ireduce_scatter %s %s n=%zu %s %s", BACKEND_LABEL,
           ev_dtype_name(t), ev_op_name(op), n, inplace ? "in-place" : "out-of-place",
           bt ? "gr_test" : "gr_wait");
  void *s = xalloc(n * es * (size_t)P);
  fill(t, op, s, n * (size_t)P, r, 0);
  void *d = inplace ? (char *)s + off * es : xalloc(n * es);
  if (!inplace) fill_const(t, d, n, SENTINEL);
  gr_request *q = NULL;
  finish(what, gr_ireduce_scatter(s, d, n, t, op, c, NULL, &q), &q, bt);
  EXPECT_OK_IN(gr_comm_synchronize(c, NULL), what);
  EXPECT_ALL(what, t, d, n, ev_reduced(t, op, P, off + i));
  if (!inplace) {
    EXPECT_ALL(what, t, s, n * (size_t)P, ev_input(t, op, r, i));
    free(d);
  }
  free(s);
}

static void t_ialltoall(gr_comm *c, gr_dtype t, size_t n, int inplace, int bt) {
  int r = gr_comm_rank(c), P = gr_comm_size(c);
  size_t es = ev_size(t), N = n * (size_t)P, m = n ? n : 1;
  char what[160];
  snprintf(what, sizeof what, "%s gr_ialltoall %s n=%zu %s %s", BACKEND_LABEL, ev_dtype_name(t), n,
           inplace ? "in-place" : "out-of-place", bt ? "gr_test" : "gr_wait");
  void *s = xalloc(N * es), *d = inplace ? s : xalloc(N * es);
  fill(t, GR_SUM, s, N, r, 0);
  if (!inplace) fill_const(t, d, N, SENTINEL);
  gr_request *q = NULL;
  finish(what, gr_ialltoall(s, d, n, t, c, NULL, &q), &q, bt);
  EXPECT_OK_IN(gr_comm_synchronize(c, NULL), what);
  EXPECT_ALL(what, t, d, N, ev_input(t, GR_SUM, (int)(i / m), (size_t)r * n + i % m));
  if (!inplace) {
    EXPECT_ALL(what, t, s, N, ev_input(t, GR_SUM, r, i));
    free(d);
  }
  free(s);
}

/* A ring of send and receive requests, three messages to the next rank with different contents:
 * they must arrive in the order sent. Completed receives first or sends first. */
static void t_isend_irecv(gr_comm *c, gr_dtype t, size_t n, int bt) {
  int r = gr_comm_rank(c), P = gr_comm_size(c);
  if (P < 2) return;
  int next = (r + 1) % P, prev = (r + P - 1) % P;
  size_t es = ev_size(t);
  char what[160];
  snprintf(what, sizeof what, "%s gr_isend/gr_irecv ring %s n=%zu %s", BACKEND_LABEL,
           ev_dtype_name(t), n, bt ? "gr_test" : "gr_wait");
  void *s[3], *d[3];
  gr_request *qs[3] = {0}, *qr[3] = {0};
  for (int m = 0; m < 3; m++) {
    s[m] = xalloc(n * es), d[m] = xalloc(n * es);
    fill(t, GR_SUM, s[m], n, r, 1000 * (size_t)m);
    fill_const(t, d[m], n, SENTINEL);
  }
  for (int m = 0; m < 3; m++) {
    gr_status st = gr_irecv(d[m], n, t, prev, c, recv_stream, &qr[m]);
    if (st != GR_OK) FAIL("%s: gr_irecv %s (%s)", what, gr_status_name(st), gr_last_error());
  }
  for (int m = 0; m < 3; m++) {
    gr_status st = gr_isend(s[m], n, t, next, c, NULL, &qs[m]);
    if (st != GR_OK) FAIL("%s: gr_isend %s (%s)", what, gr_status_name(st), gr_last_error());
  }
  for (int m = 2; m >= 0; m--) { /* newest first */
    if (r % 2) {
      finish(what, GR_OK, &qr[m], bt), finish(what, GR_OK, &qs[m], bt);
    } else {
      finish(what, GR_OK, &qs[m], bt), finish(what, GR_OK, &qr[m], bt);
    }
  }
  EXPECT_OK_IN(gr_comm_synchronize(c, NULL), what);
  EXPECT_OK_IN(gr_comm_synchronize(c, recv_stream), what);
  for (int m = 0; m < 3; m++) {
    EXPECT_ALL(what, t, d[m], n, ev_input(t, GR_SUM, prev, 1000 * (size_t)m + i));
    EXPECT_ALL(what, t, s[m], n, ev_input(t, GR_SUM, r, 1000 * (size_t)m + i));
    free(s[m]), free(d[m]);
  }
}

static void t_ibarrier(gr_comm *c, int bt) {
  gr_request *q = NULL;
  finish(BACKEND_LABEL " gr_ibarrier", gr_ibarrier(c, &q), &q, bt);
  /* a barrier really waits: the last rank enters 50 ms late and nobody leaves before it entered
   * (one node: CLOCK_MONOTONIC is the same clock in every rank, where MPI_Wtime counts from each
   * process's own start in Open MPI) */
  int P = gr_comm_size(c), r = gr_comm_rank(c);
  double entered = 0;
  if (r == P - 1) {
    gr_test_spin(0.05);
    entered = gr_test_now();
  }
  finish(BACKEND_LABEL " gr_ibarrier (late last rank)", gr_ibarrier(c, &q), &q, bt);
  double left = gr_test_now();
  MPI_Comm mc = MPI_COMM_WORLD;
  if (c == NULL || gr_comm_size(c) != world_size) return; /* the clock check runs on the world */
  MPI_Bcast(&entered, 1, MPI_DOUBLE, P - 1, mc);
  checks++;
  if (left < entered)
    FAIL("gr_ibarrier finished on rank %d %.6f s before the last rank entered it", r,
         entered - left);
}

static void suite(gr_comm *c, const size_t *sz, size_t nsz) {
  int P = gr_comm_size(c);
  int bt = 0;
  for (int t = GR_INT8; t <= GR_FLOAT64; t++) {
    gr_op ops[5];
    int nops = ops_for((gr_dtype)t, ops);
    for (size_t si = 0; si < nsz; si++) {
      size_t n = sz[si];
      for (int inplace = 0; inplace < 2; inplace++) {
        for (int o = 0; o < nops; o++) {
          t_ireduce(c, (gr_dtype)t, ops[o], n, inplace, P - 1, bt ^= 1);
          t_ireduce_scatter(c, (gr_dtype)t, ops[o], n, inplace, bt ^= 1);
          t_iallreduce_multi(c, (gr_dtype)t, ops[o], n, inplace, bt ^= 1);
        }
        t_ireduce(c, (gr_dtype)t, GR_SUM, n, inplace, 0, bt ^= 1);
        t_ialltoall(c, (gr_dtype)t, n, inplace, bt ^= 1);
      }
      t_isend_irecv(c, (gr_dtype)t, n, bt ^= 1);
    }
  }
  t_ibarrier(c, 0);
  t_ibarrier(c, 1);
}

/* ---- several kinds outstanding together ------------------------------------------------------ */

enum { K_AR, K_BC, K_AG, K_RD, K_RS, K_A2A, K_BAR, K_SEND, K_RECV, NK };
static const char *const kname[NK] = {"iallreduce", "ibroadcast",      "iallgather",
                                      "ireduce",    "ireduce_scatter", "ialltoall",
                                      "ibarrier",   "isend",           "irecv"};

/* Every kind started in one order on every rank (point to point the same on each), completed in
 * the order `order` gives (how: 0 forwards, 1 in reverse, 2 shuffled by this rank's own seed, 3
 * gr_test sweeps over all until each is done); the results exact. */
static void t_outstanding(gr_comm *c, int how, unsigned seed) {
  int r = gr_comm_rank(c), P = gr_comm_size(c);
  int next = (r + 1) % P, prev = (r + P - 1) % P, p2p = P > 1;
  static const char *const hows[] = {"forwards", "in reverse", "shuffled", "by gr_test sweeps"};
  char what[128];
  snprintf(what, sizeof what, "%s outstanding, completed %s", BACKEND_LABEL, hows[how]);
  size_t n = 1023, big = 30011, Pn = (size_t)P;
  int32_t *ar = xalloc(n * 4);
  double *bc = xalloc(big * 8);
  uint8_t *ags = xalloc(7), *ag = xalloc(7 * Pn);
  float *rd = xalloc(big * 4), *rdo = xalloc(big * 4);
  int64_t *rs = xalloc(n * 8 * Pn), *rso = xalloc(n * 8);
  uint16_t *a2a = xalloc(7 * 2 * Pn), *a2ao = xalloc(7 * 2 * Pn);
  int32_t *snd = xalloc(n * 4), *rcv = xalloc(n * 4);
  fill(GR_INT32, GR_SUM, ar, n, r, 0);
  if (r == 0)
    fill(GR_FLOAT64, GR_SUM, bc, big, r, 0);
  else
    fill_const(GR_FLOAT64, bc, big, SENTINEL);
  fill(GR_UINT8, GR_SUM, ags, 7, r, 0);
  fill(GR_FLOAT32, GR_MAX, rd, big, r, 0);
  fill_const(GR_FLOAT32, rdo, big, SENTINEL);
  fill(GR_INT64, GR_PROD, rs, n * Pn, r, 0);
  fill(GR_FLOAT16, GR_SUM, a2a, 7 * Pn, r, 0);
  fill(GR_INT32, GR_SUM, snd, n, r, 500);
  fill_const(GR_INT32, rcv, n, SENTINEL);
  gr_request *q[NK] = {0};
  gr_status st[NK];
  for (int k = 0; k < NK; k++)
    st[k] = GR_OK;
  if (p2p) st[K_RECV] = gr_irecv(rcv, n, GR_INT32, prev, c, recv_stream, &q[K_RECV]);
  st[K_AR] = gr_iallreduce(ar, ar, n, GR_INT32, GR_SUM, c, NULL, &q[K_AR]);
  st[K_RD] = gr_ireduce(rd, rdo, big, GR_FLOAT32, GR_MAX, P - 1, c, NULL, &q[K_RD]);
  st[K_BC] = gr_ibroadcast(bc, bc, big, GR_FLOAT64, 0, c, NULL, &q[K_BC]);
  st[K_BAR] = gr_ibarrier(c, &q[K_BAR]);
  st[K_RS] = gr_ireduce_scatter(rs, rso, n, GR_INT64, GR_PROD, c, NULL, &q[K_RS]);
  if (p2p) st[K_SEND] = gr_isend(snd, n, GR_INT32, next, c, NULL, &q[K_SEND]);
  st[K_AG] = gr_iallgather(ags, ag, 7, GR_UINT8, c, NULL, &q[K_AG]);
  st[K_A2A] = gr_ialltoall(a2a, a2ao, 7, GR_FLOAT16, c, NULL, &q[K_A2A]);
  for (int k = 0; k < NK; k++)
    if (st[k] != GR_OK) FAIL("%s: gr_%s start %s (%s)", what, kname[k], gr_status_name(st[k]), "");
  int order[NK];
  for (int k = 0; k < NK; k++)
    order[k] = how == 1 ? NK - 1 - k : k;
  if (how == 2) {
    srand(seed * 7919u + (unsigned)r * 104729u);
    for (int k = NK - 1; k > 0; k--) {
      int j = rand() % (k + 1), x = order[k];
      order[k] = order[j], order[j] = x;
    }
  }
  if (how == 3) {
    int left = 0;
    for (int k = 0; k < NK; k++)
      left += q[k] != NULL;
    while (left > 0) {
      for (int k = 0; k < NK; k++) {
        if (!q[k]) continue;
        int done = 0;
        gr_status s = gr_test(&q[k], &done);
        if (s != GR_OK) {
          FAIL("%s: gr_test of gr_%s: %s (%s)", what, kname[k], gr_status_name(s), gr_last_error());
          q[k] = NULL, done = 1; /* a failed test completed it */
        }
        if (done) left--;
      }
    }
  } else {
    for (int i = 0; i < NK; i++) {
      int k = order[i];
      if (!q[k]) continue;
      gr_status s = gr_wait(&q[k]);
      if (s != GR_OK)
        FAIL("%s: gr_wait of gr_%s: %s (%s)", what, kname[k], gr_status_name(s), gr_last_error());
    }
  }
  EXPECT_OK_IN(gr_comm_synchronize(c, NULL), what);
  EXPECT_OK_IN(gr_comm_synchronize(c, recv_stream), what);
  EXPECT_ALL(what, GR_INT32, ar, n, ev_reduced(GR_INT32, GR_SUM, P, i));
  EXPECT_ALL(what, GR_FLOAT64, bc, big, ev_input(GR_FLOAT64, GR_SUM, 0, i));
  EXPECT_ALL(what, GR_UINT8, ag, 7 * Pn, ev_input(GR_UINT8, GR_SUM, (int)(i / 7), i % 7));
  if (r == P - 1)
    EXPECT_ALL(what, GR_FLOAT32, rdo, big, ev_reduced(GR_FLOAT32, GR_MAX, P, i));
  else
    EXPECT_ALL(what, GR_FLOAT32, rdo, big, SENTINEL);
  EXPECT_ALL(what, GR_INT64, rso, n, ev_reduced(GR_INT64, GR_PROD, P, (size_t)r * n + i));
  EXPECT_ALL(what, GR_FLOAT16, a2ao, 7 * Pn,
             ev_input(GR_FLOAT16, GR_SUM, (int)(i / 7), (size_t)r * 7 + i % 7));
  if (p2p) EXPECT_ALL(what, GR_INT32, rcv, n, ev_input(GR_INT32, GR_SUM, prev, 500 + i));
  free(ar), free(bc), free(ags), free(ag), free(rd), free(rdo), free(rs), free(rso);
  free(a2a), free(a2ao), free(snd), free(rcv);
}

/* ---- requests outstanding across calls that use the communicator's MPI side ----------------- */

/* A reduce and an all-to-all request (gated on the shared-memory path: their MPI call starts once
 * the ranks' agreement round has passed, found by whichever test comes first) stay outstanding
 * across a group (whose verdict is an MPI collective) and a split. Every rank tests them once
 * (it enters their rounds), then rank 0 tests them until their MPI calls have started while the
 * others go on to the group: the MPI calls then start at different places among the others on
 * each rank, which must not change what MPI matches. */
static void t_across(gr_comm *c) {
  int r = gr_comm_rank(c), P = gr_comm_size(c);
  const char *what = BACKEND_LABEL " requests outstanding across a group and a split";
  size_t big = 30011, Pn = (size_t)P;
  float *rd = xalloc(big * 4), *rdo = xalloc(big * 4);
  int32_t *a2a = xalloc(4000 * 4 * Pn), *a2ao = xalloc(4000 * 4 * Pn);
  int32_t g1[5], g2[3];
  fill(GR_FLOAT32, GR_SUM, rd, big, r, 0);
  fill_const(GR_FLOAT32, rdo, big, SENTINEL);
  fill(GR_INT32, GR_SUM, a2a, 4000 * Pn, r, 0);
  gr_request *q1 = NULL, *q2 = NULL;
  EXPECT_OK_IN(gr_ireduce(rd, rdo, big, GR_FLOAT32, GR_SUM, 0, c, NULL, &q1), what);
  EXPECT_OK_IN(gr_ialltoall(a2a, a2ao, 4000, GR_INT32, c, NULL, &q2), what);
  int d1 = 0, d2 = 0; /* every rank enters the agreement rounds; rank 0 sees them pass */
  EXPECT_OK_IN(gr_test(&q1, &d1), what);
  EXPECT_OK_IN(gr_test(&q2, &d2), what);
  if (r == 0) {
    double t0 = gr_test_now();
    while (gr_test_now() - t0 < 0.05 && q1 && q2) {
      if (q1) EXPECT_OK_IN(gr_test(&q1, &d1), what);
      if (q2) EXPECT_OK_IN(gr_test(&q2, &d2), what);
    }
  }
  for (int i = 0; i < 5; i++)
    g1[i] = r + i;
  for (int i = 0; i < 3; i++)
    g2[i] = 2 * r - i;
  EXPECT_OK_IN(gr_group_start(), what);
  EXPECT_OK_IN(gr_allreduce(g1, g1, 5, GR_INT32, GR_SUM, c, NULL), what);
  EXPECT_OK_IN(gr_allreduce(g2, g2, 3, GR_INT32, GR_MAX, c, NULL), what);
  EXPECT_OK_IN(gr_group_end(), what);
  EXPECT_OK_IN(gr_comm_synchronize(c, NULL), what);
  for (int i = 0; i < 5; i++)
    if (g1[i] != P * (P - 1) / 2 + P * i) FAIL("%s: group g1[%d] = %d", what, i, g1[i]);
  for (int i = 0; i < 3; i++)
    if (g2[i] != 2 * (P - 1) - i) FAIL("%s: group g2[%d] = %d", what, i, g2[i]);
  gr_comm *sub = NULL;
  EXPECT_OK_IN(gr_comm_split(c, 0, -r, &sub), what);
  if (sub && gr_comm_rank(sub) != P - 1 - r) FAIL("%s: split rank %d", what, gr_comm_rank(sub));
  EXPECT_OK_IN(gr_comm_destroy(sub), what);
  if (q2) EXPECT_OK_IN(gr_wait(&q2), what);
  if (q1) EXPECT_OK_IN(gr_wait(&q1), what);
  EXPECT_OK_IN(gr_comm_synchronize(c, NULL), what);
  if (r == 0) EXPECT_ALL(what, GR_FLOAT32, rdo, big, ev_reduced(GR_FLOAT32, GR_SUM, P, i));
  EXPECT_ALL(what, GR_INT32, a2ao, 4000 * Pn,
             ev_input(GR_INT32, GR_SUM, (int)(i / 4000), (size_t)r * 4000 + i % 4000));
  free(rd), free(rdo), free(a2a), free(a2ao);
}

/* ---- refusals ---------------------------------------------------------------------------------- */

/* The request's outcome on this rank: started then waited, or refused at its start. */
static gr_status outcome(gr_status started, gr_request **q) {
  if (started != GR_OK) {
    if (*q) FAIL("a start that failed (%s) left a request", gr_status_name(started));
    return started;
  }
  if (!*q) {
    FAIL("a start that returned GR_OK left no request");
    return GR_ERR_INTERNAL;
  }
  gr_status st = gr_wait(q);
  if (*q) FAIL("gr_wait left the request set");
  return st;
}

/* Every rank GR_ERR_INVALID; the others name the refusing rank and the argument. */
static void refused(const char *what, gr_status st, int refuser, const char *own,
                    const char *word) {
  const char *e = gr_last_error();
  if (st != GR_ERR_INVALID) {
    FAIL("%s: %s, expected GR_ERR_INVALID (%s)", what, gr_status_name(st), e);
    return;
  }
  if (world_rank == refuser) {
    if (!strstr(e, own)) FAIL("%s: the refusing rank's sentence \"%s\" lacks \"%s\"", what, e, own);
    return;
  }
  char who[32];
  snprintf(who, sizeof who, "rank %d ", refuser);
  if (!check_mode && (!strstr(e, who) || !strstr(e, "rejected its own") || !strstr(e, word)))
    FAIL("%s: \"%s\" does not name %s(rejected its own ...) and \"%s\"", what, e, who, word);
  if (check_mode && !strstr(e, who)) FAIL("%s: \"%s\" does not name %s", what, e, who);
}

/* After a refusal the communicator carries on: a reduce and a reduce-scatter with fresh data. */
static int round_no;
static void still_works(gr_comm *c, const char *after) {
  int r = gr_comm_rank(c), P = gr_comm_size(c);
  round_no++;
  int32_t v[8], w[8], *rs = malloc(sizeof *rs * 4 * (size_t)P), o[4];
  for (int i = 0; i < 8; i++)
    v[i] = (r + 1) * (i + round_no), w[i] = -1;
  gr_request *q = NULL;
  gr_status st = outcome(gr_ireduce(v, w, 8, GR_INT32, GR_SUM, 0, c, NULL, &q), &q);
  for (int i = 0; i < 8 && r == 0; i++)
    if (st != GR_OK || w[i] != P * (P + 1) / 2 * (i + round_no)) {
      FAIL("gr_ireduce after %s: %s, w[%d] = %d (%s)", after, gr_status_name(st), i, w[i],
           gr_last_error());
      break;
    }
  for (int i = 0; i < 4 * P; i++)
    rs[i] = r + i + round_no;
  st = outcome(gr_ireduce_scatter(rs, o, 4, GR_INT32, GR_MAX, c, NULL, &q), &q);
  for (int i = 0; i < 4; i++)
    if (st != GR_OK || o[i] != P - 1 + r * 4 + i + round_no) {
      FAIL("gr_ireduce_scatter after %s: %s, o[%d] = %d (%s)", after, gr_status_name(st), i, o[i],
           gr_last_error());
      break;
    }
  free(rs);
}

static void untouched(const char *what, const int32_t *b, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (b[i] != -77) {
      FAIL("%s: recv[%zu] = %d was written (nothing may be received)", what, i, b[i]);
      return;
    }
}

static void refusals(gr_comm *c) {
  int r = gr_comm_rank(c), P = gr_comm_size(c), R = P - 1, me = r == R;
  size_t n = 20000, Pn = (size_t)P;
  int32_t *a = calloc(n * Pn, 4), *b = malloc(n * Pn * 4);
  gr_request *q = NULL;
  gr_status st;
  if (P > 1) {
    for (int large = 0; large < 2; large++) {
      size_t m = large ? n : 4;
      for (size_t i = 0; i < m; i++)
        b[i] = -77;
      st = outcome(gr_ireduce(a, b, m, GR_INT32, GR_SUM, me ? P + 3 : 0, c, NULL, &q), &q);
      refused("gr_ireduce with a root out of range on one rank", st, R, "out of range", "root");
      if (r == 0) untouched("gr_ireduce with a root out of range on one rank", b, m);
      still_works(c, "gr_ireduce with a root out of range");
    }
    for (size_t i = 0; i < 4; i++)
      b[i] = -77;
    st = outcome(gr_ireduce_scatter(r == 0 ? NULL : a, b, 4, GR_INT32, GR_SUM, c, NULL, &q), &q);
    refused("gr_ireduce_scatter with a NULL send on rank 0", st, 0, "send is NULL", "send");
    untouched("gr_ireduce_scatter with a NULL send on rank 0", b, 4);
    still_works(c, "gr_ireduce_scatter with a NULL send");
    for (size_t i = 0; i < 4 * Pn; i++)
      b[i] = -77;
    st = outcome(gr_ialltoall(a, me ? a + 1 : b, 4, GR_INT32, c, NULL, &q), &q);
    refused("gr_ialltoall with overlapping buffers on one rank", st, R, "overlap", "overlap");
    if (!me) untouched("gr_ialltoall with overlapping buffers on one rank", b, 4 * Pn);
    still_works(c, "gr_ialltoall with overlapping buffers");
#ifndef NONBLOCK_NCCL_DOUBLE
    /* a fused request with one rank's recv[1] NULL: every rank's wait fails naming it, and no
     * recv is written anywhere */
    {
      const void *sv[2] = {a, a + 8};
      void *dv[2] = {b, me ? NULL : b + 8};
      size_t cv[2] = {8, 8};
      for (size_t i = 0; i < 16; i++)
        b[i] = -77;
      st = outcome(gr_iallreduce_multi(sv, dv, cv, 2, GR_INT32, GR_SUM, c, NULL, &q), &q);
      refused("gr_iallreduce_multi with a NULL recv on one rank", st, R, "recv is NULL", "recv");
      untouched("gr_iallreduce_multi with a NULL recv on one rank", b, me ? 8 : 16);
      still_works(c, "gr_iallreduce_multi with a NULL recv");
    }
#endif
    /* req NULL on one rank: it joins the exchange and fails alone or with the others */
    for (size_t i = 0; i < 4; i++)
      b[i] = -77;
    st = outcome(gr_ireduce(a, b, 4, GR_INT32, GR_SUM, 0, c, NULL, me ? NULL : &q), &q);
    refused("gr_ireduce with req NULL on one rank", st, R, "req is NULL", "req (NULL)");
    if (r == 0) untouched("gr_ireduce with req NULL on one rank", b, 4);
    still_works(c, "gr_ireduce with req NULL");
  }
  /* a barrier has nothing to refuse but its request: that rank fails, the barrier happens */
  st = outcome(gr_ibarrier(c, me ? NULL : &q), &q);
  if (me && (st != GR_ERR_INVALID || !strstr(gr_last_error(), "req is NULL")))
    FAIL("gr_ibarrier(c, NULL): %s (%s), expected GR_ERR_INVALID", gr_status_name(st),
         gr_last_error());
  if (!me && st != GR_OK && !(check_mode && st == GR_ERR_INVALID))
    FAIL("gr_ibarrier beside a rank's gr_ibarrier(c, NULL): %s (%s)", gr_status_name(st),
         gr_last_error());
  still_works(c, "gr_ibarrier with req NULL");
  /* point to point: a refusal is this rank's alone, nothing waits for it */
  st = gr_isend(a, 4, GR_INT32, P, c, NULL, &q);
  if (st != GR_ERR_INVALID || q || !strstr(gr_last_error(), "out of range"))
    FAIL("gr_isend to peer %d: %s (%s), expected GR_ERR_INVALID", P, gr_status_name(st),
         gr_last_error());
  st = gr_irecv(NULL, 4, GR_INT32, 0, c, NULL, &q);
  if (st != GR_ERR_INVALID || q)
    FAIL("gr_irecv into NULL: %s (%s), expected GR_ERR_INVALID", gr_status_name(st),
         gr_last_error());
  st = gr_isend(a, 4, GR_INT32, r, c, NULL, &q);
  if (st != GR_ERR_INVALID || q || !strstr(gr_last_error(), "this rank"))
    FAIL("gr_isend to itself: %s (%s), expected GR_ERR_INVALID", gr_status_name(st),
         gr_last_error());
  st = gr_isend(a, 4, GR_INT32, (r + 1) % P, c, NULL, NULL);
  if (st != GR_ERR_INVALID || !strstr(gr_last_error(), "req is NULL"))
    FAIL("gr_isend with req NULL: %s (%s), expected GR_ERR_INVALID", gr_status_name(st),
         gr_last_error());
  /* ... and inside a group, on every rank: each fails alone, the group is empty */
  EXPECT_OK_IN(gr_group_start(), "group");
  st = gr_irecv(b, 4, GR_INT32, (r + P - 1) % P, c, NULL, &q);
  if (st != GR_ERR_STATE || q || !strstr(gr_last_error(), "cannot be part of a group"))
    FAIL("gr_irecv inside a group: %s (%s), expected GR_ERR_STATE", gr_status_name(st),
         gr_last_error());
  EXPECT_OK_IN(gr_group_end(), "group");
  /* only rank 0's send is refused; the others' ring still matches without it */
  if (P > 2) {
    int32_t v[4] = {r, r, r, r}, w[4] = {-77, -77, -77, -77};
    gr_request *qs = NULL, *qr = NULL;
    int to = (r + 1) % P, from = (r + P - 1) % P;
    if (r != 1) EXPECT_OK_IN(gr_irecv(w, 4, GR_INT32, from, c, recv_stream, &qr), "irecv");
    st = gr_isend(r == 0 ? NULL : v, 4, GR_INT32, to, c, NULL, &qs);
    if (r == 0 && st != GR_ERR_INVALID) FAIL("gr_isend of NULL: %s", gr_status_name(st));
    if (r != 0 && st != GR_OK) FAIL("gr_isend: %s (%s)", gr_status_name(st), gr_last_error());
    if (qs) EXPECT_OK_IN(gr_wait(&qs), "isend");
    if (qr) EXPECT_OK_IN(gr_wait(&qr), "irecv");
    EXPECT_OK_IN(gr_comm_synchronize(c, recv_stream), "sync");
    if (r != 1 && w[3] != from)
      FAIL("irecv beside a refused send: w[3] = %d, expected %d", w[3], from);
  }
  still_works(c, "point-to-point refusals");
  free(a), free(b);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  int blocking = 0, across = 1;
  for (int i = 1; i < argc; i++) {
    blocking |= strcmp(argv[i], "--no-timeout") == 0;
    across &= strcmp(argv[i], "--no-across") != 0;
    check_mode |= strcmp(argv[i], "--check") == 0;
  }
  gr_comm_config cfg;
  gr_comm_config_init(&cfg);
  cfg.timeout_s = blocking ? 0 : 60;
  cfg.check = check_mode;
  gr_comm *world = NULL, *split = NULL;
#ifdef NONBLOCK_NCCL_DOUBLE
  EXPECT_OK_IN(gr__comm_create_ops(MPI_COMM_WORLD, &cfg, &gr__coll_ops_nccl_double, &world),
               "create");
  cudaStream_t rs = NULL;
  if (cudaStreamCreate(&rs) != cudaSuccess) FAIL("cudaStreamCreate");
  recv_stream = rs;
#else
  cfg.backend = GR_BACKEND_MPI;
  EXPECT_OK_IN(gr_comm_create(MPI_COMM_WORLD, &cfg, &world), "create");
#endif
  if (!world) MPI_Abort(MPI_COMM_WORLD, 1);
  int P = gr_comm_size(world);
  if (!check_mode) {
    suite(world, sizes, NSIZES);
    for (int how = 0; how < 4; how++)
      t_outstanding(world, how, 1);
    for (unsigned seed = 2; seed < 12; seed++)
      t_outstanding(world, 2, seed);
    for (int i = 0; i < 3 && across; i++)
      t_across(world);
    /* odd/even ranks, numbered backwards: comm ranks differ from world ranks */
    EXPECT_OK_IN(gr_comm_split(world, world_rank % 2, -world_rank, &split), "split");
    if (split) {
      suite(split, sizes + 1, 2);
      t_outstanding(split, 2, 99);
    }
    EXPECT_OK_IN(gr_comm_destroy(split), "destroy");
  }
  refusals(world);
  EXPECT_OK_IN(gr_comm_destroy(world), "destroy");
#ifdef NONBLOCK_NCCL_DOUBLE
  cudaStreamDestroy(rs);
#endif
  int total = 0, nchecks = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(&checks, &nchecks, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (world_rank == 0)
    printf("%s non-blocking forms at %d ranks%s%s: %d element checks, %d failures\n", BACKEND_LABEL,
           P, blocking ? ", no timeout" : "", check_mode ? ", check mode" : "", nchecks, total);
  MPI_Finalize();
  return total ? 1 : 0;
}
