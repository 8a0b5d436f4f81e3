/* Failure behaviour of the collectives, one mode per run:
 *   timeout DIR   the last rank never joins an allreduce: the others get GR_ERR_TIMEOUT naming the
 *                 call, within timeout + margin, the communicator is aborted afterwards, the flight
 *                 recorder is in DIR, and every process exits cleanly; the same through a request
 *                 and through a group of two (the sentence says "grouped")
 *   mismatch      GPURUN_CHECK-style fingerprints: rank 0 calls broadcast(count=12) while the others
 *                 call allreduce(count=10): GR_ERR_MISMATCH with the sentence on every rank; one
 *                 rank's bad argument fails the call on every rank; the communicator still works
 *   badargs       every locally invalid argument: GR_ERR_INVALID, a sentence, buffers unchanged,
 *                 and nothing sent (a correct call afterwards still matches up)
 *   signal DIR    SIGUSR1 (with GPURUN_FLIGHT=1) writes the flight recorder at the next call */
#include <gpurun/coll.h>
#include <mpi.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gr_test_clock.h"
#include "gr_coll_stats.h"
#include "gr_device.h"
#include "world_comm.h"
#ifdef FAULTS_NCCL_DOUBLE
extern const gr__coll_ops gr__coll_ops_nccl_double;
#define BACKEND_OPS (&gr__coll_ops_nccl_double)
#else
#define BACKEND_OPS NULL /* the MPI backend */
#endif

static int rank, size, failures;

#include "expect.h"

/* The test's communicator (world_comm.h); without one the job stops. */
static gr_comm *make(double timeout, int check) {
  gr_comm *c = world_comm(BACKEND_OPS, timeout, check);
  if (!c) MPI_Abort(MPI_COMM_WORLD, 1);
  return c;
}

static int file_has(const char *path, const char *needle) {
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  static char buf[1 << 16];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = '\0';
  fclose(f);
  return strstr(buf, needle) != NULL;
}

static void mode_timeout(const char *dir) {
  const double T = 1.0, MARGIN = 10.0; /* a bound on a hang, not a performance threshold */
  gr_comm *c = make(T, 0), *c2 = make(T, 0), *c3 = make(T, 0);
  float x[10] = {1}, y[10];
  if (rank != size - 1) {
    double t0 = gr_test_now();
    EXPECT_ST(gr_allreduce(x, y, 10, GR_FLOAT32, GR_SUM, c, NULL), GR_ERR_TIMEOUT);
    double dt = gr_test_now() - t0;
    if (dt < T || dt > T + MARGIN) FAIL("timed out after %.2f s, timeout %.1f s", dt, T);
    EXPECT_MSG("allreduce #1 (count=10, dtype=float32) on communicator world");
    EXPECT_MSG("aborted");
    EXPECT_ST(gr_allreduce(x, y, 10, GR_FLOAT32, GR_SUM, c, NULL), GR_ERR_ABORTED);
    EXPECT_ST(gr_barrier(c), GR_ERR_ABORTED);
    char path[1024];
    snprintf(path, sizeof path, "%s/flight.%d.json", dir, rank);
    if (!file_has(path, "\"state\": \"timeout\"") || !file_has(path, "\"reason\": \"timeout\"") ||
        !file_has(path, "\"op\": \"allreduce\", \"count\": 10, \"dtype\": \"float32\""))
      FAIL("flight recorder %s missing or without the timed-out call", path);
    /* the same through a request */
    gr_request *q = NULL;
    double big[5000] = {0};
    EXPECT_ST(gr_iallreduce(big, big, 5000, GR_FLOAT64, GR_MAX, c2, NULL, &q), GR_OK);
    t0 = gr_test_now();
    EXPECT_ST(gr_wait(&q), GR_ERR_TIMEOUT);
    if (gr_test_now() - t0 > T + MARGIN) FAIL("gr_wait timed out after %.2f s", gr_test_now() - t0);
    EXPECT_MSG("allreduce #1 (count=5000, dtype=float64)");
    if (q) FAIL("request left set after a timeout");
    /* the same in a group of two: the first call's sentence, "grouped" */
    float y2[10];
    EXPECT_ST(gr_group_start(), GR_OK);
    EXPECT_ST(gr_allreduce(x, y, 10, GR_FLOAT32, GR_SUM, c3, NULL), GR_OK);
    EXPECT_ST(gr_allreduce(x, y2, 10, GR_FLOAT32, GR_SUM, c3, NULL), GR_OK);
    t0 = gr_test_now();
    EXPECT_ST(gr_group_end(), GR_ERR_TIMEOUT);
    if (gr_test_now() - t0 > T + MARGIN)
      FAIL("gr_group_end timed out after %.2f s", gr_test_now() - t0);
    EXPECT_MSG("grouped allreduce #1 (count=10, dtype=float32) on communicator");
    EXPECT_MSG("aborted");
    EXPECT_ST(gr_barrier(c3), GR_ERR_ABORTED);
  }
  EXPECT_ST(gr_comm_destroy(c3), GR_OK);
  EXPECT_ST(gr_comm_destroy(c2), GR_OK);
  EXPECT_ST(gr_comm_destroy(c), GR_OK);
}

static void mode_mismatch(void) {
  gr_comm *c = make(30, 1);
  int buf[12] = {0};
  if (size > 1) {
    if (rank == 0)
      EXPECT_ST(gr_broadcast(buf, buf, 12, GR_INT32, 0, c, NULL), GR_ERR_MISMATCH);
    else
      EXPECT_ST(gr_allreduce(buf, buf, 10, GR_INT32, GR_SUM, c, NULL), GR_ERR_MISMATCH);
    EXPECT_MSG(
        "rank 1 called allreduce(count=10) as call #1 while rank 0 called broadcast(count=12)");
    /* dtype differs only */
    EXPECT_ST(gr_allreduce(buf, buf, 4, rank == size - 1 ? GR_UINT32 : GR_INT32, GR_SUM, c, NULL),
              GR_ERR_MISMATCH);
    char want[128];
    snprintf(want, sizeof want, "rank %d called allreduce(count=4, dtype=uint32) as call #2",
             size - 1);
    EXPECT_MSG(want);
    /* one rank's bad argument: everyone fails, nobody hangs */
    EXPECT_ST(gr_allreduce(rank == 1 ? NULL : buf, buf, 4, GR_INT32, GR_SUM, c, NULL),
              GR_ERR_INVALID);
    if (rank == 1)
      EXPECT_MSG("send is NULL");
    else
      EXPECT_MSG(
          "rank 1 of communicator world[0.1] rejected its own arguments to allreduce call #3");
  }
  /* still usable, and the check passes for matching calls */
  for (int i = 0; i < 4; i++)
    buf[i] = rank + 1;
  EXPECT_ST(gr_allreduce(buf, buf, 4, GR_INT32, GR_SUM, c, NULL), GR_OK);
  if (buf[0] != size * (size + 1) / 2) FAIL("allreduce after mismatch: %d", buf[0]);
  EXPECT_ST(gr_barrier(c), GR_OK);
  EXPECT_ST(gr_comm_destroy(c), GR_OK);
}

static void mode_badargs(void) {
  gr_comm *c = make(30, 0);
  int32_t s[8], r[8], r0[8];
  for (int i = 0; i < 8; i++)
    s[i] = i + 1, r[i] = r0[i] = -7;
#define UNCHANGED()                                                                                \
  do {                                                                                             \
    if (memcmp(r, r0, sizeof r) != 0) FAIL("recv buffer changed by a rejected call");              \
  } while (0)
  EXPECT_ST(gr_allreduce(s, r, 8, GR_INT32, GR_SUM, NULL, NULL), GR_ERR_INVALID);
  EXPECT_MSG("gr_allreduce: comm is NULL");
  EXPECT_ST(gr_allreduce(NULL, r, 8, GR_INT32, GR_SUM, c, NULL), GR_ERR_INVALID);
  EXPECT_MSG("send is NULL with count 8");
  EXPECT_ST(gr_allreduce(s, NULL, 8, GR_INT32, GR_SUM, c, NULL), GR_ERR_INVALID);
  EXPECT_ST(gr_allreduce(s, r, SIZE_MAX / 2, GR_INT32, GR_SUM, c, NULL), GR_ERR_INVALID);
  EXPECT_MSG("overflows");
  EXPECT_ST(gr_allreduce(s, r, 8, (gr_dtype)42, GR_SUM, c, NULL), GR_ERR_INVALID);
  EXPECT_MSG("dtype 42");
  EXPECT_ST(gr_allreduce(s, r, 8, GR_INT32, (gr_op)-1, c, NULL), GR_ERR_INVALID);
  EXPECT_MSG("op -1");
  EXPECT_ST(gr_allreduce(s, r, 8, GR_INT32, GR_AVG, c, NULL), GR_ERR_INVALID);
  EXPECT_MSG("avg is not defined on dtype int32");
  EXPECT_ST(gr_allreduce(s, s + 1, 4, GR_INT32, GR_SUM, c, NULL), GR_ERR_INVALID);
  EXPECT_MSG("overlap");
  EXPECT_ST(gr_broadcast(s, r, 8, GR_INT32, size, c, NULL), GR_ERR_INVALID);
  EXPECT_MSG("root");
  EXPECT_ST(gr_broadcast(s, r, 8, GR_INT32, -1, c, NULL), GR_ERR_INVALID);
  EXPECT_ST(gr_reduce(s, r, 8, GR_INT32, GR_SUM, size + 3, c, NULL), GR_ERR_INVALID);
  EXPECT_ST(gr_allgather(s, r, SIZE_MAX / 8, GR_INT32, c, NULL), GR_ERR_INVALID);
  EXPECT_ST(gr_reduce_scatter(s, r, 8, GR_FLOAT64, (gr_op)9, c, NULL), GR_ERR_INVALID);
  EXPECT_ST(gr_alltoall(NULL, r, 1, GR_INT32, c, NULL), GR_ERR_INVALID);
  EXPECT_ST(gr_send(s, 8, GR_INT32, size, c, NULL), GR_ERR_INVALID);
  EXPECT_MSG("peer");
  EXPECT_ST(gr_recv(r, 8, GR_INT32, -2, c, NULL), GR_ERR_INVALID);
  EXPECT_ST(gr_send(s, 8, GR_INT32, rank, c, NULL), GR_ERR_INVALID);
  EXPECT_MSG("itself");
  EXPECT_ST(gr_recv(NULL, 8, GR_INT32, 0, c, NULL), GR_ERR_INVALID);
  EXPECT_ST(gr_group_end(), GR_ERR_STATE);
  EXPECT_ST(gr_iallreduce(s, r, 8, GR_INT32, GR_SUM, c, NULL, NULL), GR_ERR_INVALID);
  gr_request *rq = NULL;
  EXPECT_ST(gr_iallreduce(s, r, 8, GR_INT32, GR_AVG, c, NULL, &rq), GR_ERR_INVALID);
  if (rq) FAIL("request set by a rejected call");
  EXPECT_ST(gr_wait(&rq), GR_ERR_INVALID);
  EXPECT_ST(gr_group_start(), GR_OK);
  EXPECT_ST(gr_ibroadcast(s, r, 8, GR_INT32, 0, c, NULL, &rq), GR_ERR_STATE);
  EXPECT_ST(gr_group_end(), GR_OK);
  EXPECT_ST(gr_comm_split(c, 0, 0, NULL), GR_ERR_INVALID);
  EXPECT_ST(gr_comm_create(MPI_COMM_WORLD, NULL, NULL), GR_ERR_INVALID);
  EXPECT_ST(gr_comm_create(MPI_COMM_NULL, NULL, &(gr_comm *){NULL}), GR_ERR_INVALID);
  gr_comm_config cfg;
  gr_comm_config_init(&cfg);
  cfg.timeout_s = -1;
  gr_comm *bad = (gr_comm *)&cfg;
  EXPECT_ST(gr_comm_create(MPI_COMM_WORLD, &cfg, &bad), GR_ERR_INVALID);
  if (bad != NULL) FAIL("out not cleared on failure");
  EXPECT_MSG("timeout_s");
  cfg.timeout_s = 0;
  cfg.backend = (gr_backend)7;
  EXPECT_ST(gr_comm_create(MPI_COMM_WORLD, &cfg, &bad), GR_ERR_INVALID);
  EXPECT_ST(gr_barrier(NULL), GR_ERR_INVALID);
  if (gr_comm_rank(NULL) != -1 || gr_comm_size(NULL) != -1) FAIL("rank/size of NULL");
  /* count 0 with NULL buffers is fine and matches up across ranks */
  EXPECT_ST(gr_allreduce(NULL, NULL, 0, GR_INT32, GR_SUM, c, NULL), GR_OK);
  UNCHANGED();
  /* A grouped call with bad arguments is refused and stays queued, marked: gr_group_end fails on
   * every rank (a rank that refused alone would otherwise leave the others in the group), on
   * both backends. */
  EXPECT_ST(gr_group_start(), GR_OK);
  EXPECT_ST(gr_allreduce(s, r, 8, GR_INT32, GR_AVG, c, NULL), GR_ERR_INVALID);
  EXPECT_ST(gr_barrier(c), GR_ERR_STATE);
  EXPECT_ST(gr_group_end(), size > 1 ? GR_ERR_INVALID : GR_OK);
  UNCHANGED();
  /* Nothing reached the network: a correct call now pairs up with the peers' correct call. */
  EXPECT_ST(gr_allreduce(s, r, 8, GR_INT32, GR_SUM, c, NULL), GR_OK);
  for (int i = 0; i < 8; i++)
    if (r[i] != size * (i + 1)) FAIL("allreduce after rejected calls: r[%d] = %d", i, r[i]);
  /* The counters saw only what ran: two allreduces (8 and 0 elements of int32), no rejected call. */
  gr_coll_stats cs;
  if (gr__coll_stats_get(c, &cs) != GR_OK) FAIL("gr__coll_stats_get");
  if (cs.calls[0] != 2 || cs.bytes[0] != 32 || cs.calls[8] != 0 || cs.failures != 0)
    FAIL("stats: %llu allreduce calls, %llu bytes, %llu barriers, %llu failures",
         (unsigned long long)cs.calls[0], (unsigned long long)cs.bytes[0],
         (unsigned long long)cs.calls[8], (unsigned long long)cs.failures);
  if (strcmp(gr__coll_stats_op_name(4), "reduce_scatter") != 0 || gr__coll_stats_op_name(9) != NULL)
    FAIL("stats op names");
  /* A group's calls all run inside one gr_group_end: their charged seconds add up to no more than
   * the time spent in it (not n times that). Eight grouped send/recv pairs around the ring. */
  {
    int to = (rank + 1) % size, from = (rank + size - 1) % size;
    int sb[8][64], rb[8][64];
    memset(sb, 0, sizeof sb);
    gr_coll_stats before, after;
    if (gr__coll_stats_get(c, &before) != GR_OK) FAIL("gr__coll_stats_get");
    double t0 = MPI_Wtime();
    EXPECT_ST(gr_group_start(), GR_OK);
    for (int i = 0; i < 8; i++) {
      EXPECT_ST(gr_send(sb[i], 64, GR_INT32, to, c, NULL), GR_OK);
      EXPECT_ST(gr_recv(rb[i], 64, GR_INT32, from, c, NULL), GR_OK);
    }
    EXPECT_ST(gr_group_end(), GR_OK);
    double spent = MPI_Wtime() - t0, charged = 0;
    if (gr__coll_stats_get(c, &after) != GR_OK) FAIL("gr__coll_stats_get");
    for (int i = 0; gr__coll_stats_op_name(i); i++)
      charged += after.seconds[i] - before.seconds[i];
    if (charged > spent * 1.001 + 1e-6)
      FAIL("a group of 16 calls was charged %.6f s for %.6f s spent in it", charged, spent);
  }
  EXPECT_ST(gr_barrier(c), GR_OK);
  /* gr_comm_abort: local, later calls refuse, destroy still works */
  EXPECT_ST(gr_comm_abort(c), GR_OK);
  EXPECT_ST(gr_allreduce(s, r, 8, GR_INT32, GR_SUM, c, NULL), GR_ERR_ABORTED);
  EXPECT_MSG("aborted");
  gr_comm *sub = (gr_comm *)&cs;
  EXPECT_ST(gr_comm_split(c, 0, 0, &sub), GR_ERR_ABORTED);
  if (sub != NULL) FAIL("split of an aborted communicator left *out set");
  EXPECT_ST(gr_comm_destroy(c), GR_OK);
  EXPECT_ST(gr_comm_destroy(NULL), GR_OK);
#ifndef FAULTS_NCCL_DOUBLE
  /* AUTO on a machine without a usable GPU: the MPI backend, whatever the build. */
  gr_comm *a = NULL;
  EXPECT_ST(gr_comm_create(MPI_COMM_WORLD, NULL, &a), GR_OK);
  int ndev = 0;
  if (gr__cuda_device_count(&ndev) != GR_OK && gr_comm_backend(a) != GR_BACKEND_MPI)
    FAIL("GR_BACKEND_AUTO chose %d without a GPU", (int)gr_comm_backend(a));
  EXPECT_ST(gr_comm_destroy(a), GR_OK);
#endif
}

static void mode_signal(const char *dir) {
  gr_comm *c = make(30, 0);
  int x = 1;
  EXPECT_ST(gr_allreduce(&x, &x, 1, GR_INT32, GR_SUM, c, NULL), GR_OK);
  raise(SIGUSR1); /* with the handler installed this only sets a flag */
  EXPECT_ST(gr_broadcast(&x, &x, 1, GR_INT32, 0, c, NULL), GR_OK); /* the dump happens here */
  char path[1024];
  snprintf(path, sizeof path, "%s/flight.%d.json", dir, rank);
  if (!file_has(path, "\"reason\": \"signal\"") ||
      !file_has(path, "{\"seq\": 1, \"op\": \"allreduce\", \"count\": 1, \"dtype\": \"int32\", "
                      "\"root\": -1, \"peer\": -1, \"start\": "))
    FAIL("flight recorder %s missing or incomplete", path);
  if (!file_has(path, "\"state\": \"done\"}")) FAIL("no finished call in %s", path);
  EXPECT_ST(gr_comm_destroy(c), GR_OK);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char *mode = argc > 1 ? argv[1] : "";
  if (strcmp(mode, "timeout") == 0 && argc > 2)
    mode_timeout(argv[2]);
  else if (strcmp(mode, "mismatch") == 0)
    mode_mismatch();
  else if (strcmp(mode, "badargs") == 0)
    mode_badargs();
  else if (strcmp(mode, "signal") == 0 && argc > 2)
    mode_signal(argv[2]);
  else {
    fprintf(stderr, "usage: test_coll_faults timeout DIR|mismatch|badargs|signal DIR\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) printf("%s: %d failures\n", mode, total);
  MPI_Finalize();
  return total ? 1 : 0;
}
