/* A rank that waits for something else on a communicator (a check-mode fingerprint, a refusal
 * verdict, the words that name a refusing rank) must keep moving its requests' calls that progress
 * only when tested (the MPI backend's own allreduces, with a timeout set): a peer may be waiting
 * inside one of them before it gets to what this rank waits for. Each case below is a legal MPI
 * program (requests started in one order everywhere, waited in different orders) that timed out
 * before gr__mpi_wait and gr_test called the backend's progress op; run at 4 ranks with
 * GPURUN_COLL_ALGO=mpi and a timeout, so that recursive doubling takes two steps and the second
 * needs its owner's test.
 *   test_coll_req_progress */
#include <gpurun/coll.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size, failures;

#include "expect.h"
#include "world_comm.h"

#define N 1024 /* float32: 4 KiB, own recursive doubling (two steps at 4 ranks) */

static gr_comm *make(int check) {
  gr_comm *c = world_comm(NULL, 10, check);
  if (!c) failures++;
  return c;
}

static void expect_sum(const char *what, const float *v, size_t n) {
  float want = (float)(size * (size - 1) / 2);
  for (size_t i = 0; i < n; i++)
    if (v[i] != want) {
      FAIL("%s: [%zu] = %g, expected %g", what, i, v[i], want);
      return;
    }
}

/* Rank 0 starts R1 then what (a second request's start in check mode, or a blocking call that
 * agrees on a verdict first) before waiting for R1; the others wait for R1 first. */
static void start_then_wait(int check) {
  gr_comm *c = make(check);
  if (!c) return;
  static float a[N], b[N], d[16384];
  for (int i = 0; i < N; i++)
    a[i] = (float)rank;
  gr_request *r1 = NULL, *r2 = NULL;
  const char *what = check ? "a request started in check mode" : "a blocking broadcast";
  EXPECT_ST(gr_iallreduce(a, b, N, GR_FLOAT32, GR_SUM, c, NULL, &r1), GR_OK);
  if (rank != 0) EXPECT_ST(gr_wait(&r1), GR_OK);
  if (check) {
    EXPECT_ST(gr_iallreduce(a, d, N, GR_FLOAT32, GR_SUM, c, NULL, &r2), GR_OK);
    EXPECT_ST(gr_wait(&r2), GR_OK);
    expect_sum(what, d, N);
  } else { /* 64 KiB: past the in-band broadcasts, so a verdict first */
    for (int i = 0; i < 16384; i++)
      d[i] = rank == 1 ? (float)i : -1.0f;
    EXPECT_ST(gr_broadcast(d, d, 16384, GR_FLOAT32, 1, c, NULL), GR_OK);
    for (int i = 0; i < 16384; i++)
      if (d[i] != (float)i) {
        FAIL("%s: d[%d] = %g", what, i, d[i]);
        break;
      }
  }
  if (rank == 0) EXPECT_ST(gr_wait(&r1), GR_OK);
  expect_sum(what, b, N);
  EXPECT_ST(gr_comm_destroy(c), GR_OK);
}

/* Rank 3 refuses R2 (in band, NULL recv); rank 0 waits for R2 first, so it waits for the others'
 * words naming the refusal while they wait for R1, which needs rank 0's second step. */
static void naming_while_others_wait(void) {
  gr_comm *c = make(0);
  if (!c) return;
  static float a[N], b[N];
  float s[4] = {1, 1, 1, 1}, t[4];
  for (int i = 0; i < N; i++)
    a[i] = (float)rank;
  gr_request *r1 = NULL, *r2 = NULL;
  EXPECT_ST(gr_iallreduce(a, b, N, GR_FLOAT32, GR_SUM, c, NULL, &r1), GR_OK);
  EXPECT_ST(gr_iallreduce(s, rank == size - 1 ? NULL : t, 4, GR_FLOAT32, GR_SUM, c, NULL, &r2),
            GR_OK);
  if (rank == 0) {
    EXPECT_ST(gr_wait(&r2), GR_ERR_INVALID);
    EXPECT_ST(gr_wait(&r1), GR_OK);
  } else {
    EXPECT_ST(gr_wait(&r1), GR_OK);
    EXPECT_ST(gr_wait(&r2), GR_ERR_INVALID);
  }
  expect_sum("a request waited while another names a refusal", b, N);
  EXPECT_ST(gr_comm_destroy(c), GR_OK);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  start_then_wait(1);
  start_then_wait(0);
  naming_while_others_wait();
  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) printf("req_progress: %d failures\n", total);
  MPI_Finalize();
  return total ? 1 : 0;
}
