/* Two ways a dpool run could hang, F1 and F2 (below), each on a case built to reach it.
 *
 *   test_dpool_regress runs N [--pool W]
 *     N back-to-back gr_dpool_run calls with no barrier in between; each run has one task, pushed
 *     on the last rank (even runs) or sent there by rank 0 with gr_dpool_push_to (odd runs), so
 *     the other ranks are passive at once and pass the token / send lifeline requests / work while
 *     a slower rank may still be in the previous run's final barrier. F1: such a message must not
 *     be consumed by the previous run (token lost: hang; work: "arrived after termination").
 *   test_dpool_regress nested   (1 rank)
 *     A local pool of 2 workers, one of them busy with an application task when the run starts;
 *     the dpool task spawns a subtask into a local taskgroup and waits for it. F2: the waiting
 *     task must not pick up one of the dpool's worker loops while helping (it would never
 *     return).
 *
 * A watchdog (alarm) turns a hang into exit status 3 within seconds; the ctest TIMEOUT is the
 * backstop. Counts are checked against the number of tasks pushed here. */
#include <gpurun/dpool.h>

#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int g_rank, g_size;
static volatile sig_atomic_t g_run = -1;
static gr_pool *g_pool;

static void on_alarm(int sig) {
  (void)sig;
  char m[96];
  int k = snprintf(m, sizeof m, "HANG: rank %d stuck in run %d\n", g_rank, (int)g_run);
  if (k > 0) (void)!write(2, m, (size_t)k);
  _exit(3);
}

#define GR_TEST_RANK g_rank
#include "gr_check.h"

static long g_ran; /* tasks run on this rank (F1: one thread runs tasks at a time per run) */

static void count_task(gr_dpool *dp, const void *pl, size_t len, void *ctx) {
  (void)dp, (void)pl, (void)len, (void)ctx;
  __atomic_fetch_add(&g_ran, 1, __ATOMIC_RELAXED);
}

static int test_runs(int nruns) {
  gr_dpool *dp;
  REQUIRE_OK(gr_dpool_create(MPI_COMM_WORLD, g_pool, NULL, &dp));
  int id;
  REQUIRE_OK(gr_dpool_register(dp, count_task, &id));
  alarm(20);
  for (int i = 0; i < nruns; i++) {
    g_run = i;
    if (i % 2 == 0) {
      if (g_rank == g_size - 1) REQUIRE_OK(gr_dpool_push(dp, id, NULL, 0));
    } else if (g_rank == 0) {
      REQUIRE_OK(gr_dpool_push_to(dp, g_size - 1, id, &i, sizeof i));
    }
    gr_status st = gr_dpool_run(dp);
    if (st != GR_OK) {
      fprintf(stderr, "rank %d: run %d failed: %s\n", g_rank, i, gr_last_error());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
  alarm(0);
  long total = 0;
  MPI_Allreduce(&g_ran, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  REQUIRE(total == nruns);
  REQUIRE_OK(gr_dpool_destroy(dp));
  if (g_rank == 0)
    printf("runs: %d back-to-back runs on %d ranks, %ld tasks run\n", nruns, g_size, total);
  return 0;
}

static int g_sub_done;
static void blocker(void *a) {
  (void)a;
  usleep(300000);
}
static void sub(void *a) {
  (void)a;
  usleep(200000);
  __atomic_store_n(&g_sub_done, 1, __ATOMIC_RELEASE);
}
static void waiting_task(gr_dpool *dp, const void *pl, size_t len, void *ctx) {
  (void)dp, (void)pl, (void)len, (void)ctx;
  gr_taskgroup h;
  gr_taskgroup_init(&h, g_pool);
  REQUIRE_OK(gr_spawn_prio(&h, GR_PRIO_HIGH, sub, NULL));
  usleep(400000); /* the task's own work, while the subtask gets stolen */
  REQUIRE_OK(gr_taskgroup_wait(&h));
  REQUIRE(__atomic_load_n(&g_sub_done, __ATOMIC_ACQUIRE));
  __atomic_fetch_add(&g_ran, 1, __ATOMIC_RELAXED);
}

static int test_nested(void) {
  gr_pool_config pc;
  gr_pool_config_init(&pc);
  pc.nthreads = 2;
  pc.pin = 0;
  REQUIRE_OK(gr_pool_create(&pc, &g_pool));
  gr_taskgroup gb;
  gr_taskgroup_init(&gb, g_pool);
  REQUIRE_OK(gr_spawn(&gb, blocker, NULL)); /* the application keeps one worker busy */
  usleep(50000);
  gr_dpool *dp;
  REQUIRE_OK(gr_dpool_create(MPI_COMM_WORLD, g_pool, NULL, &dp));
  int id;
  REQUIRE_OK(gr_dpool_register(dp, waiting_task, &id));
  for (int i = 0; i < 2; i++) {
    g_run = i;
    if (g_rank == 0) REQUIRE_OK(gr_dpool_push(dp, id, NULL, 0));
    alarm(10);
    REQUIRE_OK(gr_dpool_run(dp));
    alarm(0);
    if (i == 0) REQUIRE_OK(gr_spawn(&gb, blocker, NULL)); /* busy again for the second run */
    __atomic_store_n(&g_sub_done, 0, __ATOMIC_RELEASE);
  }
  REQUIRE_OK(gr_taskgroup_wait(&gb));
  long total = 0;
  MPI_Allreduce(&g_ran, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  REQUIRE(total == 2);
  REQUIRE_OK(gr_dpool_destroy(dp));
  REQUIRE_OK(gr_pool_destroy(g_pool));
  g_pool = NULL;
  if (g_rank == 0) printf("nested: 2 runs, the waiting task returned each time\n");
  return 0;
}

int main(int argc, char **argv) {
  int prov = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &prov);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  signal(SIGALRM, on_alarm);
  int rc = 2;
  if (argc >= 3 && strcmp(argv[1], "runs") == 0) {
    if (argc >= 5 && strcmp(argv[3], "--pool") == 0) {
      gr_pool_config pc;
      gr_pool_config_init(&pc);
      pc.nthreads = atoi(argv[4]);
      pc.pin = 0;
      REQUIRE_OK(gr_pool_create(&pc, &g_pool));
    }
    rc = test_runs(atoi(argv[2]));
    if (g_pool) REQUIRE_OK(gr_pool_destroy(g_pool));
  } else if (argc >= 2 && strcmp(argv[1], "nested") == 0) {
    rc = test_nested();
  } else if (g_rank == 0) {
    fprintf(stderr, "usage: test_dpool_regress runs N [--pool W] | nested\n");
  }
  MPI_Finalize();
  return rc;
}
