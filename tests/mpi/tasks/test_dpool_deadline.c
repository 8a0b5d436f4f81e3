/* One rank's mistake or stop must not leave the others in gr_dpool_run for ever.
 *
 *   test_dpool_deadline mismatch   registrations differ (rank 0 has one more function; then the
 *                                  same count in another order): GR_ERR_MISMATCH on every rank at
 *                                  the first run, no timeout needed; the dpool is then destroyed.
 *   test_dpool_deadline partial    timeout 2 s; the last rank skips a run (the first, then, with a
 *                                  fresh dpool, the second): the others return GR_ERR_TIMEOUT, the
 *                                  absent rank named both times; then it skips
 *                                  gr_dpool_create: the others' create times out, naming it.
 *   test_dpool_deadline barrier   timeout 2 s; the last rank stops just before a run's final
 *                                  barrier (after termination): the others time out naming it.
 *   test_dpool_deadline stop [--pool W]
 *                                  timeout 2 s; rank 1 SIGSTOPs itself inside a task of an endless
 *                                  tree: every other rank returns GR_ERR_TIMEOUT naming rank 1, not
 *                                  before the timeout; rank 0 then resumes rank 1, which ends its
 *                                  run with GR_ERR_TIMEOUT too (its peers are gone); all destroy.
 *
 * The old code hangs in every case (no deadline, no registration check): a watchdog (alarm) turns
 * a hang into exit status 3. Time bounds asserted: no earlier than the timeout, and no later than
 * a generous multiple of it (a loaded machine delays, never hurries). */
#include <gpurun/dpool.h>

#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int g_rank, g_size;

#define GR_TEST_RANK g_rank
#include "gr_check.h"
#include "gr_test_clock.h"

static void on_alarm(int sig) {
  (void)sig;
  char m[96];
  int k = snprintf(m, sizeof m, "HANG: rank %d did not return from gr_dpool_run\n", g_rank);
  if (k > 0) (void)!write(2, m, (size_t)k);
  _exit(3);
}

static void noop_task(gr_dpool *dp, const void *pl, size_t len, void *ctx) {
  (void)dp, (void)pl, (void)len, (void)ctx;
}
static void other_task(gr_dpool *dp, const void *pl, size_t len, void *ctx) {
  (void)dp, (void)pl, (void)len, (void)ctx;
}

/* ---- mismatch ------------------------------------------------------------------------------ */

static int test_mismatch(void) {
  for (int variant = 0; variant < 2; variant++) {
    gr_dpool *dp;
    REQUIRE_OK(gr_dpool_create(MPI_COMM_WORLD, NULL, NULL, &dp));
    int a, b;
    if (variant == 0) { /* count differs */
      REQUIRE_OK(gr_dpool_register(dp, noop_task, &a));
      if (g_rank == 0) REQUIRE_OK(gr_dpool_register(dp, other_task, &b));
    } else { /* order differs */
      if (g_rank % 2 == 0) {
        REQUIRE_OK(gr_dpool_register(dp, noop_task, &a));
        REQUIRE_OK(gr_dpool_register(dp, other_task, &b));
      } else {
        REQUIRE_OK(gr_dpool_register(dp, other_task, &b));
        REQUIRE_OK(gr_dpool_register(dp, noop_task, &a));
      }
    }
    if (g_rank == 0) REQUIRE_OK(gr_dpool_push(dp, a, NULL, 0));
    alarm(30);
    gr_status st = gr_dpool_run(dp);
    alarm(0);
    if (g_size > 1) {
      REQUIRE(st == GR_ERR_MISMATCH);
      REQUIRE(strstr(gr_last_error(), "registered differently") != NULL);
      REQUIRE(strstr(gr_last_error(), "rank 1") != NULL);
      if (g_rank == 0) printf("mismatch variant %d: %s\n", variant, gr_last_error());
      /* broken: no further runs, no late registrations; destroy still works */
      REQUIRE(gr_dpool_run(dp) == GR_ERR_STATE);
    } else {
      REQUIRE_OK(st);
      REQUIRE(gr_dpool_register(dp, noop_task, &a) == GR_ERR_STATE); /* after the first run */
    }
    REQUIRE_OK(gr_dpool_destroy(dp));
  }
  /* Same registrations: fine, and identical ids on every rank. */
  gr_dpool *dp;
  REQUIRE_OK(gr_dpool_create(MPI_COMM_WORLD, NULL, NULL, &dp));
  int a, b;
  REQUIRE_OK(gr_dpool_register(dp, noop_task, &a));
  REQUIRE_OK(gr_dpool_register(dp, other_task, &b));
  if (g_rank == 0) REQUIRE_OK(gr_dpool_push(dp, b, NULL, 0));
  alarm(30);
  REQUIRE_OK(gr_dpool_run(dp));
  REQUIRE_OK(gr_dpool_run(dp));
  alarm(0);
  REQUIRE_OK(gr_dpool_destroy(dp));
  return 0;
}

/* ---- partial ------------------------------------------------------------------------------- */

static const double T = 2.0;

static gr_dpool *make(void) {
  gr_dpool_config cfg;
  gr_dpool_config_init(&cfg);
  cfg.timeout_s = T;
  gr_dpool *dp;
  REQUIRE_OK(gr_dpool_create(MPI_COMM_WORLD, NULL, &cfg, &dp));
  int id;
  REQUIRE_OK(gr_dpool_register(dp, noop_task, &id));
  return dp;
}

/* dt at least min_share of the timeout: all of it where this rank's own clock decides, less where
 * another rank's notice may end the wait first (it started earlier by the ranks' skew). */
static void expect_timeout_in(gr_status st, double dt, double min_share, int named,
                              const char *said) {
  REQUIRE(st == GR_ERR_TIMEOUT);
  REQUIRE(dt >= T * min_share);
  REQUIRE(dt < 10 * T + 20);
  if (named >= 0) {
    char want[96];
    snprintf(want, sizeof want, "rank %d did not %s", named, said);
    if (!strstr(gr_last_error(), want)) fprintf(stderr, "rank %d: expected \"%s\"\n", g_rank, want);
    REQUIRE(strstr(gr_last_error(), want) != NULL);
  }
  printf("rank %d: after %.2f s: %s\n", g_rank, dt, gr_last_error());
  fflush(stdout);
}

static void expect_timeout_said(gr_status st, double dt, int named, const char *said) {
  expect_timeout_in(st, dt, 0.99, named, said);
}

static void expect_timeout(gr_status st, double dt, int named) {
  expect_timeout_said(st, dt, named, "answer");
}

static int test_partial(void) {
  int absent = g_size - 1;
  MPI_Comm rev; /* world in reverse order, for the last case */
  MPI_Comm_split(MPI_COMM_WORLD, 0, g_size - g_rank, &rev);
  for (int skip_run = 0; skip_run < 2; skip_run++) {
    gr_dpool *dp = make();
    alarm((unsigned)(20 * T + 30));
    for (int run = 0; run <= skip_run; run++) {
      if (g_rank == absent && run == skip_run) {
        /* the absent rank does something else for longer than the others wait */
        struct timespec ts = {(time_t)(3 * T), 0};
        nanosleep(&ts, NULL);
        continue;
      }
      double t0 = gr_test_now();
      gr_status st = gr_dpool_run(dp);
      double dt = gr_test_now() - t0;
      if (run < skip_run) {
        REQUIRE_OK(st);
      } else {
        /* first run: the registration check names who did not come; later: the heartbeats */
        if (skip_run == 0)
          expect_timeout_said(st, dt, absent, "enter the first run");
        else
          expect_timeout(st, dt, absent);
        REQUIRE(gr_dpool_run(dp) == GR_ERR_STATE);
      }
    }
    alarm(0);
    REQUIRE_OK(gr_dpool_destroy(dp));
    MPI_Barrier(MPI_COMM_WORLD);
  }
  /* A rank that never creates the dpool: the others' gr_dpool_create times out. */
  alarm((unsigned)(20 * T + 30));
  if (g_rank != absent) {
    gr_dpool_config cfg;
    gr_dpool_config_init(&cfg);
    cfg.timeout_s = T;
    gr_dpool *dp = (gr_dpool *)&cfg;
    double t0 = gr_test_now();
    gr_status st = gr_dpool_create(MPI_COMM_WORLD, NULL, &cfg, &dp);
    double dt = gr_test_now() - t0;
    REQUIRE(dp == NULL);
    REQUIRE(strstr(gr_last_error(), "gr_dpool_create") != NULL);
    /* the first rank whose timeout runs out tells the others, who may have started later */
    expect_timeout_in(st, dt, 0.5, -1, "");
    /* ... naming the rank that never came, and only it (before: "not every rank of comm entered
     * gr_dpool_create", nobody named) */
    char want[64];
    snprintf(want, sizeof want, "rank(s) %d of comm did not enter gr_dpool_create", absent);
    if (!strstr(gr_last_error(), want))
      fprintf(stderr, "rank %d: expected \"%s\" in \"%s\"\n", g_rank, want, gr_last_error());
    REQUIRE(strstr(gr_last_error(), want) != NULL);
  }
  alarm(0);
  MPI_Barrier(MPI_COMM_WORLD);
  /* The same on a communicator in reverse order (made before anything failed: a timed-out
   * gr_dpool_create leaves its MPI_Comm_idup pending, after which Open MPI may not create another
   * communicator): the absent rank is rank 0 there, and its world rank is named too. */
  alarm((unsigned)(20 * T + 30));
  if (g_rank != absent) {
    gr_dpool_config cfg;
    gr_dpool_config_init(&cfg);
    cfg.timeout_s = T;
    gr_dpool *dp = NULL;
    double t0 = gr_test_now();
    gr_status st = gr_dpool_create(rev, NULL, &cfg, &dp);
    expect_timeout_in(st, gr_test_now() - t0, 0.5, -1, ""); /* as above: a notice may come first */
    char want[96];
    snprintf(want, sizeof want, "rank(s) 0 (world rank %d) of comm did not enter", absent);
    if (!strstr(gr_last_error(), want))
      fprintf(stderr, "rank %d: expected \"%s\" in \"%s\"\n", g_rank, want, gr_last_error());
    REQUIRE(strstr(gr_last_error(), want) != NULL);
  }
  alarm(0);
  MPI_Barrier(MPI_COMM_WORLD);
  return 0; /* rev is not freed: its duplication is still pending on the others */
}

/* ---- barrier ------------------------------------------------------------------------------- */

/* The last rank stops itself (SIGSTOP, the library's test hook) after termination, just before the
 * run's final barrier; no stealing, so nothing else waits for it. The others' run times out in the
 * barrier naming it (before: "a rank stopped after termination", nobody named); once all of them
 * have timed out, rank 0 resumes it, and its barrier completes (the others are in it). */
extern int gr__dp_test_stop_before_barrier;

static int test_barrier(void) {
  int late = g_size - 1;
  int pid = (int)getpid(), *pids = calloc((size_t)g_size, sizeof *pids);
  MPI_Allgather(&pid, 1, MPI_INT, pids, 1, MPI_INT, MPI_COMM_WORLD);
  MPI_Comm others; /* the ranks that time out: all of them, before the late one is resumed */
  MPI_Comm_split(MPI_COMM_WORLD, g_rank == late, g_rank, &others);
  gr_dpool_config cfg;
  gr_dpool_config_init(&cfg);
  cfg.timeout_s = T;
  cfg.steal = 0;
  cfg.lifelines = 0;
  gr_dpool *dp;
  REQUIRE_OK(gr_dpool_create(MPI_COMM_WORLD, NULL, &cfg, &dp));
  int id;
  REQUIRE_OK(gr_dpool_register(dp, noop_task, &id));
  if (g_rank == 0) REQUIRE_OK(gr_dpool_push(dp, id, NULL, 0));
  REQUIRE_OK(gr_dpool_run(dp)); /* a clean run first: its arrivals leave nothing behind */
  if (g_rank == 0) REQUIRE_OK(gr_dpool_push(dp, id, NULL, 0));
  gr__dp_test_stop_before_barrier = late;
  alarm((unsigned)(20 * T + 30));
  double t0 = gr_test_now();
  gr_status st = gr_dpool_run(dp);
  double dt = gr_test_now() - t0;
  if (g_rank != late) {
    expect_timeout_said(st, dt, late, "reach the run's final barrier");
    /* Resumed earlier, the late rank's arrival could reach a rank whose deadline is still to
     * come, which then times out with the barrier about to complete and nobody to name. */
    MPI_Barrier(others);
    if (g_rank == 0) kill((pid_t)pids[late], SIGCONT);
  } else {
    printf("rank %d (resumed): %s\n", g_rank, st == GR_OK ? "GR_OK" : gr_last_error());
  }
  alarm(0);
  REQUIRE_OK(gr_dpool_destroy(dp));
  free(pids);
  MPI_Comm_free(&others);
  MPI_Barrier(MPI_COMM_WORLD);
  return 0;
}

/* ---- stop ---------------------------------------------------------------------------------- */

static long g_ran;
static int g_tree_id;
static double g_stop_time;
static _Thread_local volatile double g_sink; /* per thread: workers run tasks concurrently */

/* A binary tree of depth 40: endless here. Depth-first on each rank, so queues stay short. */
static void tree_task(gr_dpool *dp, const void *pl, size_t len, void *ctx) {
  (void)ctx;
  int depth = 0;
  if (len == sizeof depth) memcpy(&depth, pl, sizeof depth);
  long n = __atomic_add_fetch(&g_ran, 1, __ATOMIC_RELAXED);
  if (g_rank == 1 && n == 20000) { /* silent from here until rank 0 resumes it */
    g_stop_time = gr_test_now();   /* CLOCK_MONOTONIC: one clock for the node's processes */
    raise(SIGSTOP);
  }
  double x = 0; /* a little work per task */
  for (int i = 0; i < 2000; i++)
    x += i * 0.5;
  g_sink += x;
  if (depth >= 40) return; /* 2^41 tasks: endless for this test's purposes */
  int next = depth + 1;
  gr_dpool_push(dp, g_tree_id, &next, sizeof next);
  gr_dpool_push(dp, g_tree_id, &next, sizeof next);
}

static int test_stop(int pool_threads) {
  REQUIRE(g_size >= 2);
  int *pids = malloc((size_t)g_size * sizeof *pids);
  REQUIRE(pids != NULL);
  int me = (int)getpid();
  MPI_Allgather(&me, 1, MPI_INT, pids, 1, MPI_INT, MPI_COMM_WORLD);
  gr_pool *pool = NULL;
  if (pool_threads > 0) {
    gr_pool_config pc;
    gr_pool_config_init(&pc);
    pc.nthreads = pool_threads;
    pc.pin = 0;
    REQUIRE_OK(gr_pool_create(&pc, &pool));
  }
  gr_dpool_config cfg;
  gr_dpool_config_init(&cfg);
  cfg.timeout_s = T;
  gr_dpool *dp;
  REQUIRE_OK(gr_dpool_create(MPI_COMM_WORLD, pool, &cfg, &dp));
  REQUIRE_OK(gr_dpool_register(dp, tree_task, &g_tree_id));
  int zero = 0;
  if (g_rank == 0) REQUIRE_OK(gr_dpool_push(dp, g_tree_id, &zero, sizeof zero));
  alarm((unsigned)(40 * T + 30));
  double t0 = gr_test_now();
  gr_status st = gr_dpool_run(dp);
  double t_ret = gr_test_now();
  if (g_rank != 1) {
    /* The stop happened some time into the run: bound the return by the time since then, which
     * rank 1 cannot tell us; the check here is that it returned at all, with the right name. */
    REQUIRE(st == GR_ERR_TIMEOUT);
    REQUIRE(strstr(gr_last_error(), "rank 1 did not answer") != NULL);
    REQUIRE(t_ret - t0 >= T * 0.99);
    printf("rank %d: after %.2f s (%ld tasks here): %s\n", g_rank, t_ret - t0, g_ran,
           gr_last_error());
    fflush(stdout);
    REQUIRE(gr_dpool_run(dp) == GR_ERR_STATE);
  } else {
    /* Resumed by rank 0 after the others gave up: its peers no longer answer. */
    REQUIRE(st == GR_ERR_TIMEOUT);
    printf("rank 1 (was stopped): after %.2f s: %s\n", t_ret - t0, gr_last_error());
    fflush(stdout);
  }
  if (g_rank == 0) {
    /* wait for every other live rank to have returned before resuming rank 1: they report on
     * MPI_COMM_WORLD, which rank 1 does not join until it is resumed */
    for (int r = 2; r < g_size; r++) {
      int one;
      MPI_Recv(&one, 1, MPI_INT, r, 77, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    kill((pid_t)pids[1], SIGCONT);
  } else if (g_rank >= 2) {
    int one = 1;
    MPI_Send(&one, 1, MPI_INT, 0, 77, MPI_COMM_WORLD);
  }
  REQUIRE_OK(gr_dpool_destroy(dp));
  if (pool) REQUIRE_OK(gr_pool_destroy(pool));
  alarm(0);
  MPI_Barrier(MPI_COMM_WORLD);
  /* Every live rank returned within timeout + heartbeat period (T/4) + a generous margin for a
   * loaded machine, counted from the stop. */
  MPI_Bcast(&g_stop_time, 1, MPI_DOUBLE, 1, MPI_COMM_WORLD);
  if (g_rank != 1) {
    double late = t_ret - g_stop_time;
    printf("rank %d: returned %.2f s after rank 1 stopped (timeout %.0f s)\n", g_rank, late, T);
    REQUIRE(g_stop_time > 0 && late >= T * 0.99 && late < 1.25 * T + 10);
  }
  free(pids);
  return 0;
}

int main(int argc, char **argv) {
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  signal(SIGALRM, on_alarm);
  const char *mode = argc > 1 ? argv[1] : "";
  int pool_threads = 0;
  for (int i = 2; i + 1 < argc; i++)
    if (strcmp(argv[i], "--pool") == 0) pool_threads = atoi(argv[i + 1]);
  int rc;
  if (strcmp(mode, "mismatch") == 0)
    rc = test_mismatch();
  else if (strcmp(mode, "partial") == 0)
    rc = test_partial();
  else if (strcmp(mode, "stop") == 0)
    rc = test_stop(pool_threads);
  else if (strcmp(mode, "barrier") == 0)
    rc = test_barrier();
  else {
    if (g_rank == 0)
      fprintf(stderr, "usage: test_dpool_deadline mismatch|partial|stop|barrier [--pool W]\n");
    rc = 2;
  }
  MPI_Finalize();
  if (rc == 0 && g_rank == 0) printf("test_dpool_deadline %s: OK\n", mode);
  return rc;
}
