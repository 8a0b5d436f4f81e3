/* On the NCCL backend (over the NCCL test double): a call that one rank refuses locally
 * fails on every rank with GR_ERR_INVALID naming that rank and the argument, nobody is left inside
 * it, and the next, correct call works with fresh data. Blocking calls, requests (whose start
 * stays local: the others' start does not wait for the refusing rank), groups and
 * gr_allreduce_multi, on device buffers of the double and on host buffers (staged).
 *
 * Before the NCCL backend had a refusal route, the others waited inside the call (forever without
 * a timeout; with one, GR_ERR_TIMEOUT and an aborted communicator), so a hang (ctest's TIMEOUT) or
 * a timeout here is the failure.
 *
 * Options: --timeout (a 20 s timeout), --check (check mode, which carries the refusal in its
 * fingerprints instead). GRDBL_GPUS makes ranks share a GPU (nccl_share.c). */
#include <gpurun/coll.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gr_coll.h"
#include "nccl_double/include/cuda_runtime_api.h"

extern const gr__coll_ops gr__coll_ops_nccl_double;

static int rank, size, failures, opt_timeout, opt_check;

#include "expect.h"
#include "expect_refused.h"
#include "refuse_cases.h"
#include "dev_alloc.h"
#include "world_comm.h"

/* The communicator still works, with fresh data on every rank (device buffers: the double's
 * device memory is host-readable once the stream is synchronised). */
static int round_no;
static void still_works(gr_comm *c, const char *after) {
  round_no++;
  int32_t *v = dev_alloc(5 * sizeof *v), *b = dev_alloc(3 * sizeof *b);
  fresh_inputs(v, 5, b, round_no);
  gr_status st = gr_allreduce(v, v, 5, GR_INT32, GR_SUM, c, NULL);
  if (st == GR_OK) st = gr_comm_synchronize(c, NULL);
  expect_fresh_sum("allreduce", after, st, v, 5, round_no);
  /* a broadcast from the last rank: the others' next call sees its new data */
  st = gr_broadcast(b, b, 3, GR_INT32, size - 1, c, NULL);
  if (st == GR_OK) st = gr_comm_synchronize(c, NULL);
  expect_fresh_broadcast(after, st, b, round_no);
  cudaFree(v);
  cudaFree(b);
}

/* A request's start is local: ranks other than R start theirs, then send R a message, which R
 * receives before it starts its own (refused) request. Had a start waited for the other ranks
 * (a verdict round before it), this would deadlock. */
static void request_start_is_local(gr_comm *c, int32_t *a, int32_t *b, int R) {
  gr_request *q = NULL;
  gr_status st;
  int token = 42;
  if (rank != R) {
    st = gr_iallreduce(a, b, 4, GR_INT32, GR_SUM, c, NULL, &q);
    if (st != GR_OK) FAIL("gr_iallreduce start: %s (%s)", gr_status_name(st), gr_last_error());
    MPI_Send(&token, 1, MPI_INT, R, 7, MPI_COMM_WORLD);
    if (q) st = gr_wait(&q);
  } else {
    for (int r = 0; r < size; r++)
      if (r != R) MPI_Recv(&token, 1, MPI_INT, r, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    st = gr_iallreduce(a, NULL, 4, GR_INT32, GR_SUM, c, NULL, &q);
    if (q) FAIL("a refused gr_iallreduce left a request");
  }
  refused("gr_iallreduce (start, message, wait) with a NULL recv", st, R, "recv is NULL", "recv");
}

/* Requests reach NCCL in start order whichever the program tests first: rank 0 tests the first
 * before a blocking call, the others not at all until after it; then they wait newest first. */
static void requests_in_order(gr_comm *c) {
  int32_t *x = dev_alloc(4 * sizeof *x), *y = dev_alloc(4 * sizeof *y),
          *z = dev_alloc(2 * sizeof *z);
  for (int i = 0; i < 4; i++)
    x[i] = rank + i, y[i] = rank == 0 ? 50 + i : -1;
  z[0] = 1, z[1] = rank;
  gr_request *q1 = NULL, *q2 = NULL;
  EXPECT_ST(gr_iallreduce(x, x, 4, GR_INT32, GR_MAX, c, NULL, &q1), GR_OK);
  EXPECT_ST(gr_ibroadcast(y, y, 4, GR_INT32, 0, c, NULL, &q2), GR_OK);
  if (rank == 0 && q1) {
    int done = 0;
    for (int i = 0; i < 1000 && !done && q1; i++)
      EXPECT_ST(gr_test(&q1, &done), GR_OK);
  }
  EXPECT_ST(gr_allreduce(z, z, 2, GR_INT32, GR_SUM, c, NULL), GR_OK);
  if (q2) EXPECT_ST(gr_wait(&q2), GR_OK);
  if (q1) EXPECT_ST(gr_wait(&q1), GR_OK);
  EXPECT_ST(gr_comm_synchronize(c, NULL), GR_OK);
  for (int i = 0; i < 4; i++)
    if (x[i] != size - 1 + i || y[i] != 50 + i)
      FAIL("requests in order: x[%d] = %d (expected %d), y[%d] = %d (expected %d)", i, x[i],
           size - 1 + i, i, y[i], 50 + i);
  if (z[0] != size || z[1] != size * (size - 1) / 2)
    FAIL("requests in order: the blocking allreduce gave %d %d", z[0], z[1]);
  cudaFree(x);
  cudaFree(y);
  cudaFree(z);
}

#define N 64

static void run(void) {
  gr_comm *c = world_comm(&gr__coll_ops_nccl_double, opt_timeout ? 20 : 0, opt_check);
  if (!c) MPI_Abort(MPI_COMM_WORLD, 1);
  const int R = size - 1; /* the refusing rank */
  int me = rank == R;
  /* device buffers (the NCCL backend's own kind) and host buffers (staged) */
  int32_t *a = dev_alloc((size_t)N * size * sizeof *a),
          *b = dev_alloc((size_t)N * size * sizeof *b);
  int32_t *ha = calloc((size_t)N * size, sizeof *ha), *hb = calloc((size_t)N * size, sizeof *hb);
  for (int i = 0; i < N; i++)
    a[i] = ha[i] = i % 1000;
  gr_status st;

  refuse_null_recv(c, a, b);

  st = gr_allreduce(me ? NULL : ha, hb, N, GR_FLOAT32, GR_SUM, c, NULL);
  refused("allreduce (host buffers) with a NULL send", st, R, "send is NULL", "send");
  still_works(c, "allreduce (host buffers) with a NULL send");

  refuse_overlap_and_root(c, a, b);

  /* reduce with a root out of range on one rank only (negative there) */
  st = gr_reduce(a, b, 6, GR_INT64, GR_SUM, me ? -1 : 0, c, NULL);
  refused("reduce with a root out of range", st, R, "out of range", "root");
  still_works(c, "reduce with a root out of range");

  refuse_reduce_and_allgather(c, a, b);
  st = gr_allgather(hb, hb, 4, GR_INT32, c, NULL);
  refused("allgather(v, v, n) on host buffers", st, rank == 0 ? 1 : rank, "overlaps recv",
          "overlap");
  still_works(c, "allgather(v, v, n) on host buffers");

  refuse_scatter_alltoall_requests(c, a, b);
  gr_request *q = NULL;
  st = gr_iallgather(b, b, 4, GR_INT32, c, NULL, &q);
  if (st == GR_OK && q) st = gr_wait(&q);
  refused("gr_iallgather(v, v, n)", st, rank == 0 ? 1 : rank, "overlaps recv", "overlap");
  still_works(c, "gr_iallgather(v, v, n)");
  if (!opt_check) { /* check mode's fingerprint exchange makes a start collective */
    request_start_is_local(c, a, b, R);
    still_works(c, "a request started before a message");
  }
  requests_in_order(c);

  refuse_group_multi_everyone(c, a, b);

  EXPECT_ST(gr_comm_destroy(c), GR_OK);
  cudaFree(a);
  cudaFree(b);
  free(ha);
  free(hb);
}

int main(int argc, char **argv) {
  return refuse_main(argc, argv, run, "refuse nccl-double", "GRDBL_GPUS");
}
