/* Two requests on a communicator whose ranks share a GPU (collectives/nccl_share.c), over the NCCL
 * test double. Every collective's refusal travels as a verdict posted at the request's start
 * (sequencer.c, gr__seq_carried_verdict), while nccl_share.c posts an all-to-all's MPI stage
 * (MPI_Ialltoall on host copies) only once that verdict is in, a moment that differs from rank to
 * rank. The last rank R starts both all-to-alls before any other rank starts its first; the
 * others drive their first one until it has posted its stage, and only then start the second. If
 * the verdicts and the stages share one MPI communicator, R posts verdict, verdict, stage, stage
 * and the others verdict, stage, verdict, stage: MPI matches a verdict's allreduce against an
 * all-to-all (a failure, wrong data or a hang until the timeout). Each rank checks both calls'
 * data exactly; three rounds. Run it with ranks sharing a GPU (GRDBL_GPUS, nccl_share.sh checks
 * that the grouping was found). */
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

enum { N = 5, ROUNDS = 3 };

/* What rank src sends to rank dst in all-to-all number call of round r, element i. */
static int32_t value(int r, int call, int src, int dst, int i) {
  return (int32_t)(r * 100000 + call * 10000 + src * 1000 + dst * 10 + i);
}

static void fill(int32_t *s, int r, int call) {
  for (int d = 0; d < size; d++)
    for (int i = 0; i < N; i++)
      s[d * N + i] = value(r, call, rank, d, i);
}

static void check(const int32_t *v, int r, int call) {
  cudaStreamSynchronize(NULL);
  for (int src = 0; src < size; src++)
    for (int i = 0; i < N; i++)
      if (v[src * N + i] != value(r, call, src, rank, i)) {
        FAIL("round %d, all-to-all %d: element %d from rank %d is %d, want %d", r, call, i, src,
             v[src * N + i], value(r, call, src, rank, i));
        return;
      }
}

/* R has started both of its calls: the others go on. */
static void r_started(void) {
  int token = 0;
  if (rank == size - 1) {
    for (int d = 0; d < size - 1; d++)
      MPI_Send(&token, 1, MPI_INT, d, 12, MPI_COMM_WORLD);
  } else {
    MPI_Recv(&token, 1, MPI_INT, size - 1, 12, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
}

static void round_of(gr_comm *c, int r) {
  const size_t bytes = (size_t)size * N * sizeof(int32_t);
  int32_t *s1 = dev_alloc(bytes), *r1 = dev_alloc(bytes), *s2 = dev_alloc(bytes),
          *r2 = dev_alloc(bytes);
  fill(s1, r, 1);
  fill(s2, r, 2);
  memset(r1, 0xff, bytes);
  memset(r2, 0xff, bytes);
  gr_request *q1 = NULL, *q2 = NULL;
  if (rank == size - 1) {
    EXPECT_ST(gr_ialltoall(s1, r1, N, GR_INT32, c, NULL, &q1), GR_OK);
    EXPECT_ST(gr_ialltoall(s2, r2, N, GR_INT32, c, NULL, &q2), GR_OK);
    r_started();
  } else {
    r_started();
    EXPECT_ST(gr_ialltoall(s1, r1, N, GR_INT32, c, NULL, &q1), GR_OK);
    /* the first call's verdict in and its stage posted before the second call starts */
    double until = MPI_Wtime() + 10.0;
    int done = 0;
    while (q1 && !done && gr__seq_phase_of(q1) < GR__SEQ_POSTED && MPI_Wtime() < until) {
      gr_status st = gr_test(&q1, &done);
      if (st != GR_OK) {
        FAIL("round %d: testing the first all-to-all: %s (%s)", r, gr_status_name(st),
             gr_last_error());
        break;
      }
    }
    if (q1 && !done && gr__seq_phase_of(q1) < GR__SEQ_POSTED)
      FAIL("round %d: the first all-to-all never posted (phase %d)", r, (int)gr__seq_phase_of(q1));
    EXPECT_ST(gr_ialltoall(s2, r2, N, GR_INT32, c, NULL, &q2), GR_OK);
  }
  if (q1) EXPECT_ST(gr_wait(&q1), GR_OK);
  if (q2) EXPECT_ST(gr_wait(&q2), GR_OK);
  check(r1, r, 1);
  check(r2, r, 2);
  cudaFree(s1);
  cudaFree(r1);
  cudaFree(s2);
  cudaFree(r2);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  gr_comm *c = world_comm(&gr__coll_ops_nccl_double, 10.0, 0);
  if (!c) MPI_Abort(MPI_COMM_WORLD, 1);
  for (int r = 0; r < ROUNDS && size > 1; r++)
    round_of(c, r);
  EXPECT_ST(gr_comm_destroy(c), GR_OK);
  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0)
    printf("test_coll_nccl_share_order: %s (%d failures)\n", total ? "FAIL" : "ok", total);
  MPI_Finalize();
  return total ? 1 : 0;
}
