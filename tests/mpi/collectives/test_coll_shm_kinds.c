/* Ranks of one node that disagree on a call's KIND where one kind runs off the shared-memory path
 * (reduce, alltoall: Open MPI's algorithms) get GR_ERR_MISMATCH on every rank, with a sentence
 * naming both calls, and the communicator still works, instead of the rank on the
 * shared-memory path waiting for its peers' counters and the others inside MPI for its messages
 * until the deadline (GR_ERR_TIMEOUT). Also: the calls that take an agreement round on the segment
 * before their MPI algorithm give exact results when several are in flight at once (a group mixing
 * them with shared-memory calls), which needs their MPI algorithms started in the same order on
 * every rank.
 *   test_coll_shm_kinds [--timeout S]   (S > 0: the production setting; 0: no timeout)
 * Needs >= 2 ranks on one node (the shared-memory path). */
#include <gpurun/coll.h>
#include <gpurun/runtime.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size, failures;

#include "expect.h"

static gr_comm *comm;

static void still_works(const char *after) {
  int32_t v[3] = {rank + 1, 2 * rank, -rank};
  gr_status st = gr_allreduce(v, v, 3, GR_INT32, GR_SUM, comm, NULL);
  int32_t s = size * (size + 1) / 2;
  if (st != GR_OK || v[0] != s || v[1] != 2 * (s - size) || v[2] != -(s - size))
    FAIL("allreduce after %s: %s, %d %d %d (%s)", after, gr_status_name(st), v[0], v[1], v[2],
         gr_last_error());
}

/* What the odd rank (rank 1) calls while every other rank calls allreduce, and the reverse. */
enum { K_ALLREDUCE, K_ALLTOALL, K_REDUCE0, K_REDUCE1, K_ALLGATHER, K_BARRIER };
static const char *const names[] = {"allreduce", "alltoall",  "reduce",
                                    "reduce",    "allgather", "barrier"};

static gr_status call(int k, int32_t *s, int32_t *r) {
  switch (k) {
  case K_ALLREDUCE:
    return gr_allreduce(s, r, 4, GR_INT32, GR_SUM, comm, NULL);
  case K_ALLTOALL:
    return gr_alltoall(s, r, 4, GR_INT32, comm, NULL);
  case K_REDUCE0:
    return gr_reduce(s, r, 4, GR_INT32, GR_SUM, 0, comm, NULL);
  case K_REDUCE1:
    return gr_reduce(s, r, 4, GR_INT32, GR_SUM, 1, comm, NULL);
  case K_ALLGATHER:
    return gr_allgather(s, r, 4, GR_INT32, comm, NULL);
  default:
    return gr_barrier(comm);
  }
}

/* Rank 1 calls `odd`, every other rank `even`; all must fail with GR_ERR_MISMATCH naming both. */
static void disagree(int even, int odd, const char *want_even, const char *want_odd) {
  int32_t s[64], r[64];
  for (int i = 0; i < 64; i++)
    s[i] = rank * 100 + i, r[i] = -1;
  int mine = rank == 1 ? odd : even;
  gr_clear_error();
  gr_status st = call(mine, s, r);
  char what[64];
  snprintf(what, sizeof what, "%s against %s", names[even], names[odd]);
  if (st != GR_ERR_MISMATCH) {
    FAIL("%s: %s on rank %d, expected GR_ERR_MISMATCH on every rank (%s)", what, gr_status_name(st),
         rank, gr_last_error());
  } else {
    const char *e = gr_last_error();
    if (!strstr(e, want_even) || !strstr(e, want_odd))
      FAIL("%s: the sentence does not name both calls (%s, %s): %s", what, want_even, want_odd, e);
  }
  still_works(what);
}

/* A group of calls of every kind, the gated ones (reduce, alltoall) among them: exact answers. */
static void mixed_group(void) {
  enum { N = 5 };
  int32_t a2a_s[2][N * 8], a2a_r[2][N * 8], red_s[N], red_r[N], ar[N];
  for (int j = 0; j < 2; j++)
    for (int p = 0; p < size; p++)
      for (int i = 0; i < N; i++)
        a2a_s[j][p * N + i] = 1000 * j + 100 * rank + 10 * p + i, a2a_r[j][p * N + i] = -1;
  for (int i = 0; i < N; i++)
    red_s[i] = rank + i, red_r[i] = -1, ar[i] = rank * i;
  EXPECT_ST(gr_group_start(), GR_OK);
  EXPECT_ST(gr_alltoall(a2a_s[0], a2a_r[0], N, GR_INT32, comm, NULL), GR_OK);
  EXPECT_ST(gr_allreduce(ar, ar, N, GR_INT32, GR_SUM, comm, NULL), GR_OK);
  EXPECT_ST(gr_reduce(red_s, red_r, N, GR_INT32, GR_MAX, size - 1, comm, NULL), GR_OK);
  EXPECT_ST(gr_alltoall(a2a_s[1], a2a_r[1], N, GR_INT32, comm, NULL), GR_OK);
  EXPECT_ST(gr_group_end(), GR_OK);
  for (int j = 0; j < 2; j++)
    for (int p = 0; p < size; p++)
      for (int i = 0; i < N; i++)
        if (a2a_r[j][p * N + i] != 1000 * j + 100 * p + 10 * rank + i) {
          FAIL("grouped alltoall %d: block %d element %d = %d", j, p, i, a2a_r[j][p * N + i]);
          return;
        }
  for (int i = 0; i < N; i++) {
    if (ar[i] != i * size * (size - 1) / 2) FAIL("grouped allreduce: element %d = %d", i, ar[i]);
    int want = rank == size - 1 ? size - 1 + i : -1;
    if (red_r[i] != want) FAIL("grouped reduce: element %d = %d, expected %d", i, red_r[i], want);
  }
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  double timeout = 20;
  for (int i = 1; i + 1 < argc; i++)
    if (strcmp(argv[i], "--timeout") == 0) timeout = atof(argv[i + 1]);
  gr_comm_config cfg;
  gr_comm_config_init(&cfg);
  cfg.backend = GR_BACKEND_MPI;
  cfg.timeout_s = timeout;
  if (size < 2 || size > 8 || gr_comm_create(MPI_COMM_WORLD, &cfg, &comm) != GR_OK) {
    fprintf(stderr, "[rank %d] needs 2..8 ranks and a communicator: %s\n", rank, gr_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  mixed_group();
  disagree(K_ALLREDUCE, K_ALLTOALL, "allreduce(count=4", "alltoall(count=4");
  disagree(K_ALLTOALL, K_ALLREDUCE, "alltoall(count=4", "allreduce(count=4");
  disagree(K_REDUCE0, K_ALLGATHER, "reduce(count=4", "allgather(count=4");
  disagree(K_BARRIER, K_REDUCE0, "barrier(", "reduce(count=4");
  disagree(K_ALLTOALL, K_REDUCE0, "alltoall(count=4", "reduce(count=4");
  disagree(K_REDUCE0, K_REDUCE1, "root=0", "root=1"); /* the root decides where Open MPI sends */
  mixed_group();
  gr_comm_destroy(comm);
  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0)
    printf("test_coll_shm_kinds (%d ranks, timeout %g s): %d failures\n", size, timeout, total);
  MPI_Finalize();
  return total != 0;
}
