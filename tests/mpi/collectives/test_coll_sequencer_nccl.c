/* The sequencer (collectives/sequencer.c) driven directly on the NCCL backend's route, over the
 * NCCL test double: its rows carry a refusal (ROUTE_CALL) as a verdict the sequencer posts in front
 * of every collective but the barrier (gr__seq_carried_verdict), over c->mpi. The last rank R starts
 * each case only after a message from the others, so their verdicts cannot be in before it does:
 *
 *   verdict  an allreduce waits in VERDICT with no row chosen, the communicator's queue not empty;
 *   queued   a broadcast started behind it never posts before it: driving the broadcast one turn
 *            at a time, whenever it has posted the allreduce has; both complete exactly;
 *   in line  a send started behind a collective whose verdict is out waits in QUEUED (NCCL runs a
 *            communicator's calls in one order, point-to-point included: gr__seq_in_line), and a
 *            blocking send drains the queue first; the data arrive exactly;
 *   refused  R refuses an allreduce: its start is refused once the others started theirs (no
 *            request), the others' call settles without reaching a row (no path, recv untouched)
 *            and fails naming R and the argument;
 *   drained  gr__requests_drain posts every queued call (none left in VERDICT or QUEUED);
 *   settled  after each case the queue is empty and the communicator has no request pending.
 * Options: GRDBL_GPUS makes ranks share a GPU (nccl_share.c), which takes the same route. */
#include "gr_sequencer.h"

#include <gpurun/coll.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl_double/include/cuda_runtime_api.h"

extern const gr__coll_ops gr__coll_ops_nccl_double;

static int rank, size, failures;

#include "expect.h"
#include "dev_alloc.h"
#include "world_comm.h"

static const char fn[] = "test_coll_sequencer_nccl";

static gr__call call_of(gr__kind kind, gr_comm *c, const void *send, void *recv, size_t n,
                        int root) {
  gr__call k = CALL_INIT(kind, c);
  k.send = send, k.recv = recv, k.count = n, k.dtype = GR_INT32, k.op = GR_SUM, k.root = root;
  return k;
}

/* The ranks but R have started their calls; R goes on (it has not started its own yet). */
static void others_first(void) {
  int token = 0;
  if (rank != size - 1) {
    if (rank == 0) MPI_Send(&token, 1, MPI_INT, size - 1, 11, MPI_COMM_WORLD);
  } else {
    MPI_Recv(&token, 1, MPI_INT, 0, 11, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
}

static gr_status finish(gr_request *q) {
  int done = 0;
  gr_status st = gr__seq_request(fn, q, 0, &done);
  if (!done) FAIL("a drive without budget returned before the call finished");
  return st;
}

static void settled(gr_comm *c, const char *after) {
  if (!gr__seq_empty(c)) FAIL("%s: the communicator's queue is not empty", after);
  if (__atomic_load_n(&c->pending, __ATOMIC_RELAXED) != 0)
    FAIL("%s: %d request(s) still pending", after, (int)c->pending);
}

static void check_sum(const int32_t *v, size_t n, int base, const char *what) {
  cudaStreamSynchronize(NULL);
  for (size_t i = 0; i < n; i++) {
    int32_t want = 0;
    for (int r = 0; r < size; r++)
      want += base + r + (int32_t)i;
    if (v[i] != want) {
      FAIL("%s: element %zu is %d, want %d", what, i, v[i], want);
      return;
    }
  }
}

/* VERDICT, a broadcast behind it, and the drive order. */
static void verdict_and_queue(gr_comm *c) {
  int32_t *a = dev_alloc(8 * sizeof *a), *b = dev_alloc(4 * sizeof *b);
  for (int i = 0; i < 8; i++)
    a[i] = rank + i;
  for (int i = 0; i < 4; i++)
    b[i] = rank == 0 ? 70 + i : -1;
  gr__call ka = call_of(GR__ALLREDUCE, c, a, a, 8, -1), kb = call_of(GR__BROADCAST, c, b, b, 4, 0);
  gr_request *qa = NULL, *qb = NULL;
  if (rank == size - 1) others_first();
  EXPECT_ST(gr__seq_submit(fn, &ka, GR_OK, NULL, &qa), GR_OK);
  EXPECT_ST(gr__seq_submit(fn, &kb, GR_OK, NULL, &qb), GR_OK);
  if (!qa || !qb) MPI_Abort(MPI_COMM_WORLD, 3);
  if (rank == 0) { /* R starts after this: no verdict can be in */
    if (gr__seq_phase_of(qa) != GR__SEQ_VERDICT)
      FAIL("the allreduce is in phase %d, not VERDICT", (int)gr__seq_phase_of(qa));
    if (gr__seq_call_of(qa)->path) FAIL("a call waiting for its verdict has a row already");
    if (gr__seq_phase_of(qb) > GR__SEQ_QUEUED)
      FAIL("the broadcast behind it is in phase %d", (int)gr__seq_phase_of(qb));
    if (gr__seq_empty(c)) FAIL("the queue is empty with two calls waiting in it");
  }
  if (rank != size - 1) others_first();
  int done = 0, turns = 0;
  gr_status st = GR_OK;
  while (!done && st == GR_OK) {
    st = gr__seq_request(fn, qb, 1, &done);
    turns++;
    if (!done && gr__seq_phase_of(qb) >= GR__SEQ_POSTED && gr__seq_phase_of(qa) < GR__SEQ_POSTED)
      FAIL("the broadcast posted before the allreduce started before it");
  }
  EXPECT_ST(st, GR_OK);
  if (gr__seq_phase_of(qa) < GR__SEQ_POSTED)
    FAIL("the allreduce before the finished broadcast is in phase %d", (int)gr__seq_phase_of(qa));
  if (!gr__seq_call_of(qa)->path) FAIL("the posted allreduce has no row");
  EXPECT_ST(finish(qa), GR_OK);
  check_sum(a, 8, 0, "allreduce behind its verdict");
  for (int i = 0; i < 4; i++)
    if (b[i] != 70 + i) FAIL("the broadcast behind the allreduce: b[%d] = %d", i, b[i]);
  if (rank == 0 && turns < 2) FAIL("the broadcast finished in %d turn", turns);
  settled(c, "verdict and queue");
  cudaFree(a);
  cudaFree(b);
}

/* Point-to-point on NCCL keeps its place: a send behind an allreduce whose verdict is out waits in
 * QUEUED; then a blocking send and receive drain the queue first. Rank 0 sends to R. */
static void in_line(gr_comm *c) {
  int32_t *a = dev_alloc(4 * sizeof *a), *m = dev_alloc(6 * sizeof *m);
  for (int i = 0; i < 4; i++)
    a[i] = 100 + rank + i;
  for (int i = 0; i < 6; i++)
    m[i] = rank == 0 ? 500 + i : -1;
  const int R = size - 1;
  gr__call ka = call_of(GR__ALLREDUCE, c, a, a, 4, -1);
  gr__call kp =
      rank == 0 ? call_of(GR__SEND, c, m, NULL, 6, R) : call_of(GR__RECV, c, NULL, m, 6, 0);
  gr_request *qa = NULL, *qp = NULL;
  if (rank == R) others_first();
  EXPECT_ST(gr__seq_submit(fn, &ka, GR_OK, NULL, &qa), GR_OK);
  if (rank == 0 || rank == R) EXPECT_ST(gr__seq_submit(fn, &kp, GR_OK, NULL, &qp), GR_OK);
  if (rank == 0) {
    if (!qp || gr__seq_phase_of(qp) != GR__SEQ_QUEUED)
      FAIL("a send behind an allreduce waiting for its verdict is in phase %d, not QUEUED",
           qp ? (int)gr__seq_phase_of(qp) : -1);
    if (qp && gr__seq_call_of(qp)->path) FAIL("the queued send has a row already");
  }
  if (rank != R) others_first();
  if (qp) EXPECT_ST(finish(qp), GR_OK);
  if (qa) EXPECT_ST(finish(qa), GR_OK);
  check_sum(a, 4, 100, "allreduce before a send");
  if (rank == R)
    for (int i = 0; i < 6; i++)
      if (m[i] != 500 + i) FAIL("the queued send delivered m[%d] = %d", i, m[i]);
  settled(c, "a send behind an allreduce");
  /* blocking: R receives only after its own allreduce request, which the receive posts first */
  for (int i = 0; i < 4; i++)
    a[i] = 200 + rank + i;
  for (int i = 0; i < 6; i++)
    m[i] = rank == 0 ? 600 + i : -1;
  ka = call_of(GR__ALLREDUCE, c, a, a, 4, -1);
  EXPECT_ST(gr__seq_submit(fn, &ka, GR_OK, NULL, &qa), GR_OK);
  if (rank == 0) EXPECT_ST(gr_send(m, 6, GR_INT32, R, c, NULL), GR_OK);
  if (rank == R) EXPECT_ST(gr_recv(m, 6, GR_INT32, 0, c, NULL), GR_OK);
  if ((rank == 0 || rank == R) && qa && gr__seq_phase_of(qa) < GR__SEQ_POSTED)
    FAIL("a blocking point-to-point call left the allreduce before it in phase %d",
         (int)gr__seq_phase_of(qa));
  if (qa) EXPECT_ST(finish(qa), GR_OK);
  check_sum(a, 4, 200, "allreduce before a blocking send");
  if (rank == R)
    for (int i = 0; i < 6; i++)
      if (m[i] != 600 + i) FAIL("the blocking send delivered m[%d] = %d", i, m[i]);
  settled(c, "a blocking send behind an allreduce");
  cudaFree(a);
  cudaFree(m);
}

/* R refuses (a NULL recv): its start is refused, the others' calls never reach a row. */
static void refused(gr_comm *c) {
  int32_t *a = dev_alloc(4 * sizeof *a), *r = dev_alloc(4 * sizeof *r);
  for (int i = 0; i < 4; i++)
    a[i] = 1, r[i] = -7;
  const int R = size - 1;
  gr__call k = call_of(GR__ALLREDUCE, c, a, rank == R ? NULL : r, 4, -1);
  gr_request *q = NULL;
  if (rank == R) {
    others_first();
    gr_status st = gr_iallreduce(a, NULL, 4, GR_INT32, GR_SUM, c, NULL, &q);
    if (st != GR_ERR_INVALID || q)
      FAIL("R's refused start: %s%s (%s)", gr_status_name(st), q ? ", a request" : "",
           gr_last_error());
  } else {
    EXPECT_ST(gr__seq_submit(fn, &k, GR_OK, NULL, &q), GR_OK);
    if (!q) MPI_Abort(MPI_COMM_WORLD, 3);
    if (rank == 0 && gr__seq_phase_of(q) != GR__SEQ_VERDICT)
      FAIL("the call before R's refusal is in phase %d, not VERDICT", (int)gr__seq_phase_of(q));
    others_first();
    int done = 0;
    gr_status st = GR_OK;
    while (!done) { /* one turn at a time: it never reaches a row */
      st = gr__seq_request(fn, q, 1, &done);
      if (!done && gr__seq_call_of(q)->path) {
        FAIL("a call refused by R was handed to a row");
        st = finish(q);
        break;
      }
    }
    const char *e = gr_last_error();
    char who[32];
    snprintf(who, sizeof who, "rank %d ", R);
    if (st != GR_ERR_INVALID || !strstr(e, who) || !strstr(e, "rejected its own") ||
        !strstr(e, "recv"))
      FAIL("a call R refused: %s (%s)", gr_status_name(st), e);
    cudaStreamSynchronize(NULL);
    for (int i = 0; i < 4; i++)
      if (r[i] != -7) FAIL("a refused call wrote recv[%d] = %d", i, r[i]);
  }
  settled(c, "a refusal");
  cudaFree(a);
  cudaFree(r);
}

/* gr__requests_drain posts every queued call, in order, without waiting for them. */
static void drained(gr_comm *c) {
  int32_t *a = dev_alloc(4 * sizeof *a), *b = dev_alloc(4 * sizeof *b);
  for (int i = 0; i < 4; i++)
    a[i] = rank + i, b[i] = 10 + rank + i;
  gr__call ka = call_of(GR__ALLREDUCE, c, a, a, 4, -1), kb = call_of(GR__ALLREDUCE, c, b, b, 4, -1);
  gr_request *qa = NULL, *qb = NULL;
  EXPECT_ST(gr__seq_submit(fn, &ka, GR_OK, NULL, &qa), GR_OK);
  EXPECT_ST(gr__seq_submit(fn, &kb, GR_OK, NULL, &qb), GR_OK);
  EXPECT_ST(gr__requests_drain(fn, c), GR_OK);
  if (!gr__seq_empty(c)) FAIL("calls left in the queue after a drain");
  if (qa && gr__seq_phase_of(qa) < GR__SEQ_POSTED) FAIL("a drained call was not posted");
  if (qb && gr__seq_phase_of(qb) < GR__SEQ_POSTED) FAIL("a drained call was not posted");
  if (qb) EXPECT_ST(finish(qb), GR_OK);
  if (qa) EXPECT_ST(finish(qa), GR_OK);
  check_sum(a, 4, 0, "first drained allreduce");
  check_sum(b, 4, 10, "second drained allreduce");
  settled(c, "a drain");
  cudaFree(a);
  cudaFree(b);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  gr_comm *c = world_comm(&gr__coll_ops_nccl_double, 20.0, 0);
  if (!c) MPI_Abort(MPI_COMM_WORLD, 1);
  if (size > 1) {
    verdict_and_queue(c);
    in_line(c);
    refused(c);
    drained(c);
  }
  EXPECT_ST(gr_comm_destroy(c), GR_OK);
  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0)
    printf("test_coll_sequencer_nccl: %s (%d failures)\n", total ? "FAIL" : "ok", total);
  MPI_Finalize();
  return total ? 1 : 0;
}
