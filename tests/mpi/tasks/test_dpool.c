/* MPI tests of the distributed task pool. Run at 1..4 ranks. Every count is checked against a
 * value computed here independently of the dpool (closed forms, or a serial recursion over the
 * same deterministic task tree). Usage: test_dpool [--pool N] (N workers per rank in a gr_pool). */
#include <gpurun/dpool.h>

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int g_rank, g_size;
static gr_pool *g_pool;

#define GR_TEST_RANK g_rank
#include "gr_check.h"

static uint64_t sum_u64(uint64_t v) {
  uint64_t s = 0;
  MPI_Allreduce(&v, &s, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  return s;
}

static uint64_t mix(uint64_t x) { /* splitmix64 finaliser */
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

static void usleep_ns(long us) {
  struct timespec ts = {0, us * 1000L};
  nanosleep(&ts, NULL);
}

/* Per-test counters; tasks may run on pool workers, hence atomics. */
typedef struct {
  uint64_t ran;
  uint64_t sum;
  int fn_tree, fn_chain, fn_noop;
  int delays;
} tctx;

static gr_dpool *make(tctx *c, int steal, int lifelines) {
  gr_dpool_config cfg;
  gr_dpool_config_init(&cfg);
  cfg.ctx = c;
  cfg.steal = steal;
  cfg.lifelines = lifelines;
  cfg.poll_interval_us = 20;
  gr_dpool *dp = NULL;
  REQUIRE_OK(gr_dpool_create(MPI_COMM_WORLD, g_pool, &cfg, &dp));
  return dp;
}

/* ---- a deterministic irregular tree whose tasks go to random remote ranks --------------------- */
typedef struct {
  uint64_t key;
  int32_t depth;
  int32_t remote;
} tnode;

static int tree_kids(uint64_t key, int depth) { return depth >= 7 ? 0 : (int)(mix(key) % 6); }

static uint64_t tree_count_serial(uint64_t key, int depth) {
  uint64_t n = 1;
  int k = tree_kids(key, depth);
  for (int i = 0; i < k; i++)
    n += tree_count_serial(mix(key * 31 + (uint64_t)i + 1), depth + 1);
  return n;
}

static void tree_task(gr_dpool *dp, const void *p, size_t len, void *vc) {
  tctx *c = vc;
  tnode n;
  REQUIRE(len == sizeof n);
  memcpy(&n, p, sizeof n);
  __atomic_fetch_add(&c->ran, 1, __ATOMIC_RELAXED);
  __atomic_fetch_add(&c->sum, n.key & 0xffff, __ATOMIC_RELAXED);
  if (c->delays) usleep_ns((long)(mix(n.key ^ 0x5555) % 200));
  int k = tree_kids(n.key, n.depth);
  for (int i = 0; i < k; i++) {
    tnode ch = {mix(n.key * 31 + (uint64_t)i + 1), n.depth + 1, n.remote};
    if (n.remote) /* most children go to a pseudo-random rank: remote-heavy traffic */
      REQUIRE_OK(gr_dpool_push_to(dp, (int)(mix(ch.key ^ 77) % (uint64_t)g_size), c->fn_tree, &ch,
                                  sizeof ch));
    else
      REQUIRE_OK(gr_dpool_push(dp, c->fn_tree, &ch, sizeof ch));
  }
}

static uint64_t tree_sum_serial(uint64_t key, int depth) {
  uint64_t s = key & 0xffff;
  int k = tree_kids(key, depth);
  for (int i = 0; i < k; i++)
    s += tree_sum_serial(mix(key * 31 + (uint64_t)i + 1), depth + 1);
  return s;
}

/* ---- a chain: one task at a time, hopping rank to rank after a pause -------------------------- */
typedef struct {
  int32_t left;
  int32_t pause_us;
} cnode;

static void chain_task(gr_dpool *dp, const void *p, size_t len, void *vc) {
  tctx *c = vc;
  cnode n;
  REQUIRE(len == sizeof n);
  memcpy(&n, p, sizeof n);
  __atomic_fetch_add(&c->ran, 1, __ATOMIC_RELAXED);
  usleep_ns(n.pause_us); /* everyone else is idle meanwhile: termination must not fire */
  if (n.left > 0) {
    cnode next = {n.left - 1, n.pause_us};
    REQUIRE_OK(gr_dpool_push_to(dp, (g_rank + 1) % g_size, c->fn_chain, &next, sizeof next));
  }
}

static void noop_task(gr_dpool *dp, const void *p, size_t len, void *vc) {
  tctx *c = vc;
  __atomic_fetch_add(&c->ran, 1, __ATOMIC_RELAXED);
  (void)dp, (void)p, (void)len;
}

static void reg(gr_dpool *dp, tctx *c) {
  REQUIRE_OK(gr_dpool_register(dp, tree_task, &c->fn_tree));
  REQUIRE_OK(gr_dpool_register(dp, chain_task, &c->fn_chain));
  REQUIRE_OK(gr_dpool_register(dp, noop_task, &c->fn_noop));
}

/* The stats add up across ranks: tasks run == tasks pushed (MPI_Reduce to rank 0, as a user
 * would), and every task sent was received. */
static void check_stats(gr_dpool *dp, uint64_t expect_tasks) {
  struct gr_dpool_stats s;
  REQUIRE_OK(gr_dpool_stats(dp, &s));
  uint64_t mine[4] = {s.tasks_run, s.tasks_pushed, s.tasks_sent, s.tasks_received}, tot[4];
  MPI_Reduce(mine, tot, 4, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
  if (g_rank == 0) {
    REQUIRE(tot[0] == tot[1]);
    REQUIRE(tot[0] == expect_tasks);
    REQUIRE(tot[2] == tot[3]);
  }
}

static void test_bad_input(void) {
  gr_dpool_config cfg;
  gr_dpool_config_init(&cfg);
  gr_dpool *dp = (gr_dpool *)0x1;
  REQUIRE(gr_dpool_create(MPI_COMM_WORLD, NULL, &cfg, NULL) == GR_ERR_INVALID);
  cfg.poll_interval_us = 0;
  REQUIRE(gr_dpool_create(MPI_COMM_WORLD, NULL, &cfg, &dp) == GR_ERR_INVALID);
  REQUIRE(dp == NULL);
  REQUIRE(strstr(gr_last_error(), "poll_interval_us") != NULL);
  gr_dpool_config_init(&cfg);
  cfg.magic = 0;
  REQUIRE(gr_dpool_create(MPI_COMM_WORLD, NULL, &cfg, &dp) == GR_ERR_INVALID);
  gr_dpool_config_init(&cfg);
  cfg.steal = 7;
  REQUIRE(gr_dpool_create(MPI_COMM_WORLD, NULL, &cfg, &dp) == GR_ERR_INVALID);
  REQUIRE(gr_dpool_create(MPI_COMM_NULL, NULL, NULL, &dp) == GR_ERR_INVALID);

  tctx c = {0};
  dp = make(&c, 1, 1);
  int id = -1;
  REQUIRE(gr_dpool_register(dp, NULL, &id) == GR_ERR_INVALID);
  REQUIRE(gr_dpool_register(NULL, noop_task, &id) == GR_ERR_INVALID);
  reg(dp, &c);
  char b[8] = {0};
  REQUIRE(gr_dpool_push(dp, 99, b, 1) == GR_ERR_INVALID);
  REQUIRE(gr_dpool_push(dp, -1, b, 1) == GR_ERR_INVALID);
  REQUIRE(gr_dpool_push(dp, c.fn_noop, NULL, 4) == GR_ERR_INVALID);
  REQUIRE(gr_dpool_push(dp, c.fn_noop, b, (size_t)GR_DPOOL_MAX_PAYLOAD + 1) == GR_ERR_INVALID);
  REQUIRE(gr_dpool_push_to(dp, g_size, c.fn_noop, b, 1) == GR_ERR_INVALID);
  REQUIRE(gr_dpool_push_to(dp, -1, c.fn_noop, b, 1) == GR_ERR_INVALID);
  REQUIRE(strstr(gr_last_error(), "gr_dpool_push_to") != NULL);
  REQUIRE(gr_dpool_run(NULL) == GR_ERR_INVALID);
  REQUIRE(gr_dpool_stats(dp, NULL) == GR_ERR_INVALID);
  /* nothing was queued by the failed calls: the run is empty */
  REQUIRE_OK(gr_dpool_run(dp));
  REQUIRE(sum_u64(c.ran) == 0);
  check_stats(dp, 0);
  REQUIRE_OK(gr_dpool_destroy(dp));
  REQUIRE(gr_dpool_destroy(NULL) == GR_OK);
}

/* An empty job, twice, then a job with one task (of size 0) on the last rank only. */
static void test_empty(void) {
  tctx c = {0};
  gr_dpool *dp = make(&c, 1, 1);
  reg(dp, &c);
  REQUIRE_OK(gr_dpool_run(dp));
  REQUIRE_OK(gr_dpool_run(dp));
  REQUIRE(sum_u64(c.ran) == 0);
  if (g_rank == g_size - 1) REQUIRE_OK(gr_dpool_push(dp, c.fn_noop, NULL, 0));
  REQUIRE_OK(gr_dpool_run(dp));
  REQUIRE(sum_u64(c.ran) == 1);
  check_stats(dp, 1);
  REQUIRE_OK(gr_dpool_destroy(dp));
}

/* All work starts on the last rank (others start empty); local children; stealing spreads it. */
static void test_tree_local(int steal, int lifelines) {
  tctx c = {0};
  gr_dpool *dp = make(&c, steal, lifelines);
  reg(dp, &c);
  uint64_t expect = 0, esum = 0;
  for (int r = 0; r < 3; r++) {
    expect += tree_count_serial(1000 + (uint64_t)r, 0);
    esum += tree_sum_serial(1000 + (uint64_t)r, 0);
  }
  if (g_rank == g_size - 1)
    for (int r = 0; r < 3; r++) {
      tnode root = {1000 + (uint64_t)r, 0, 0};
      REQUIRE_OK(gr_dpool_push(dp, c.fn_tree, &root, sizeof root));
    }
  REQUIRE_OK(gr_dpool_run(dp));
  REQUIRE(sum_u64(c.ran) == expect);
  REQUIRE(sum_u64(c.sum) == esum);
  check_stats(dp, expect);
  REQUIRE_OK(gr_dpool_destroy(dp));
}

/* Remote-heavy: children pushed to pseudo-random ranks, optionally with random delays per task. */
static void test_tree_remote(int delays) {
  tctx c = {0};
  c.delays = delays;
  gr_dpool *dp = make(&c, 1, 1);
  reg(dp, &c);
  uint64_t key = delays ? 4242 : 777;
  uint64_t expect = tree_count_serial(key, 0), esum = tree_sum_serial(key, 0);
  if (g_rank == 0) {
    tnode root = {key, 0, 1};
    REQUIRE_OK(gr_dpool_push(dp, c.fn_tree, &root, sizeof root));
  }
  REQUIRE_OK(gr_dpool_run(dp));
  REQUIRE(sum_u64(c.ran) == expect);
  REQUIRE(sum_u64(c.sum) == esum);
  check_stats(dp, expect);
  REQUIRE_OK(gr_dpool_destroy(dp));
}

/* Termination under random delays, many times: short remote-heavy jobs whose tasks sleep a
 * pseudo-random 0-200 us, started on a different rank each time, ten runs on one dpool. An early
 * return on any rank shows up as a wrong total (or as tasks arriving after termination). */
static void test_repeat_delays(void) {
  tctx c = {0};
  c.delays = 1;
  gr_dpool *dp = make(&c, 1, 1);
  reg(dp, &c);
  uint64_t total = 0;
  for (int it = 0; it < 10; it++) {
    uint64_t key = 5000 + (uint64_t)it * 17;
    total += tree_count_serial(key, 0);
    if (g_rank == it % g_size) {
      tnode root = {key, 0, 1};
      REQUIRE_OK(gr_dpool_push(dp, c.fn_tree, &root, sizeof root));
    }
    REQUIRE_OK(gr_dpool_run(dp));
    REQUIRE(sum_u64(c.ran) == total);
  }
  check_stats(dp, total);
  REQUIRE_OK(gr_dpool_destroy(dp));
}

/* Late work from remote ranks: a single task hops rank to rank with a pause at each hop, started
 * by the last rank after a delay; every rank is idle most of the time. gr_dpool_run must not
 * return before the chain ends, on any rank: each rank counts the hops it ran, and after the run
 * the total must be the chain's length. Then the dpool is reused for a second run. */
static void test_chain(void) {
  tctx c = {0};
  gr_dpool *dp = make(&c, 1, 1);
  reg(dp, &c);
  const int hops = 6 * g_size + 1;
  if (g_rank == g_size - 1) {
    cnode first = {hops - 1, 3000};
    REQUIRE_OK(gr_dpool_push(dp, c.fn_chain, &first, sizeof first));
  }
  REQUIRE_OK(gr_dpool_run(dp));
  REQUIRE(sum_u64(c.ran) == (uint64_t)hops);
  /* Second run on the same dpool: pushes before the run from every rank to the next. */
  cnode one = {2, 500};
  REQUIRE_OK(gr_dpool_push_to(dp, (g_rank + 1) % g_size, c.fn_chain, &one, sizeof one));
  REQUIRE_OK(gr_dpool_run(dp));
  REQUIRE(sum_u64(c.ran) == (uint64_t)hops + 3u * (uint64_t)g_size);
  check_stats(dp, (uint64_t)hops + 3u * (uint64_t)g_size);
  REQUIRE_OK(gr_dpool_destroy(dp));
}

/* A rank that starts its run late (the others are already idle and probing for termination)
 * still gets its work done. */
static void test_late_rank(void) {
  tctx c = {0};
  gr_dpool *dp = make(&c, 1, 1);
  reg(dp, &c);
  uint64_t expect = tree_count_serial(99, 0);
  if (g_rank == g_size - 1) {
    usleep_ns(0);
    struct timespec ts = {0, 200 * 1000 * 1000};
    nanosleep(&ts, NULL);
    tnode root = {99, 0, 0};
    REQUIRE_OK(gr_dpool_push(dp, c.fn_tree, &root, sizeof root));
  }
  REQUIRE_OK(gr_dpool_run(dp));
  REQUIRE(sum_u64(c.ran) == expect);
  check_stats(dp, expect);
  REQUIRE_OK(gr_dpool_destroy(dp));
}

int main(int argc, char **argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  int nthreads = 0;
  for (int i = 1; i + 1 < argc; i++)
    if (strcmp(argv[i], "--pool") == 0) nthreads = atoi(argv[i + 1]);
  if (nthreads > 0) {
    gr_pool_config pc;
    gr_pool_config_init(&pc);
    pc.nthreads = nthreads;
    REQUIRE_OK(gr_pool_create(&pc, &g_pool));
  }
  struct {
    const char *name;
    void (*fn)(void);
  } tests[] = {{"bad_input", test_bad_input},
               {"empty", test_empty},
               {"chain", test_chain},
               {"late_rank", test_late_rank}};
  for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
    tests[i].fn();
    if (g_rank == 0) printf("ok %s\n", tests[i].name);
  }
  test_tree_local(1, 1);
  if (g_rank == 0) printf("ok tree_local steal+lifelines\n");
  test_tree_local(1, 0);
  if (g_rank == 0) printf("ok tree_local random steals only\n");
  test_tree_local(0, 0);
  if (g_rank == 0) printf("ok tree_local no stealing\n");
  test_tree_remote(0);
  if (g_rank == 0) printf("ok tree_remote\n");
  test_tree_remote(1);
  if (g_rank == 0) printf("ok tree_remote random delays\n");
  test_repeat_delays();
  if (g_rank == 0) printf("ok repeat_delays\n");
  if (g_pool) REQUIRE_OK(gr_pool_destroy(g_pool));
  MPI_Finalize();
  return 0;
}
