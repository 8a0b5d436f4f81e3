/* The task pool: known answers at 1, 2, 4 and 8 workers, nested groups, cancellation, priorities,
 * parallel_for coverage, external threads, destroy with work in flight, bad input, cpuset sizing
 * and pinning. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <gpurun/pool.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gr_deque.h"
#include "fib_tasks.h"
#include "gr_pool.h"

static gr_pool *make_pool(int nthreads) {
  gr_pool_config cfg;
  gr_pool_config_init(&cfg);
  cfg.nthreads = nthreads;
  cfg.pin = 0;
  gr_pool *p = NULL;
  assert_int_equal(gr_pool_create(&cfg, &p), GR_OK);
  assert_non_null(p);
  assert_int_equal(gr_pool_nthreads(p), nthreads);
  /* test_pool_asym runs this binary with GPURUN_POOL_FENCE=asym: make sure the mode is on. */
  const char *fence = getenv("GPURUN_POOL_FENCE");
  int want_asym = fence && strcmp(fence, "asym") == 0 && gr__deque_asym_available();
  assert_int_equal(gr__pool_asym(p), want_asym);
  return p;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Run fn(arg) as one task on a worker while this (external) thread does not help: it waits on a
 * semaphore, so the only threads running tasks are the pool's workers. */
typedef struct {
  void (*fn)(void *);
  void *arg;
  sem_t done;
} on_worker_ctx;

static void on_worker_tramp(void *a) {
  on_worker_ctx *c = a;
  c->fn(c->arg);
  sem_post(&c->done);
}

static void run_on_worker(gr_pool *p, void (*fn)(void *), void *arg) {
  on_worker_ctx c;
  c.fn = fn;
  c.arg = arg;
  sem_init(&c.done, 0, 0);
  gr_taskgroup g;
  gr_taskgroup_init(&g, p);
  assert_int_equal(gr_spawn(&g, on_worker_tramp, &c), GR_OK);
  while (sem_wait(&c.done) != 0) {
  }
  assert_int_equal(gr_taskgroup_wait(&g), GR_OK);
  sem_destroy(&c.done);
}

/* ---- fib: a task at every call ----------------------------------------------------------- */

static void fib_at(int nthreads, int external_helps) {
  fib_pool = make_pool(nthreads);
  for (int n = 0; n <= 22; n += 11) {
    fib_arg f = {n, -1};
    if (external_helps) {
      gr_taskgroup g;
      gr_taskgroup_init(&g, fib_pool);
      assert_int_equal(gr_spawn(&g, fib_task, &f), GR_OK);
      assert_int_equal(gr_taskgroup_wait(&g), GR_OK);
    } else {
      run_on_worker(fib_pool, fib_task, &f);
    }
    assert_int_equal(f.r, fib_ref(n));
  }
  gr__pool_stats st;
  gr__pool_get_stats(fib_pool, &st);
  assert_true(st.run == st.spawned);
  assert_true(gr__pool_quiescent(fib_pool));
  assert_int_equal(gr_pool_destroy(fib_pool), GR_OK);
}

static void fib_known_answers(void **state) {
  (void)state;
  int threads[] = {1, 2, 4, 8};
  for (int i = 0; i < 4; i++) {
    fib_at(threads[i], 0);
    fib_at(threads[i], 1);
  }
}

/* ---- tree sum ---------------------------------------------------------------------------- */

typedef struct node {
  struct node *left, *right;
  long value;
} node;

static node *build_tree(node *pool, int *next, int n, uint64_t *rng) {
  if (n <= 0) return NULL;
  node *x = &pool[(*next)++];
  *rng ^= *rng << 13;
  *rng ^= *rng >> 7;
  *rng ^= *rng << 17;
  x->value = (long)(*rng % 1000);
  int nl = (int)(*rng % (uint64_t)n); /* unbalanced on purpose */
  x->left = build_tree(pool, next, nl, rng);
  x->right = build_tree(pool, next, n - 1 - nl, rng);
  return x;
}

static gr_pool *tree_pool;
typedef struct {
  node *x;
  long sum;
} tree_arg;

static void tree_task(void *a) {
  tree_arg *t = a;
  if (!t->x) {
    t->sum = 0;
    return;
  }
  tree_arg l = {t->x->left, 0}, r = {t->x->right, 0};
  gr_taskgroup g;
  gr_taskgroup_init(&g, tree_pool);
  if (gr_spawn(&g, tree_task, &l) != GR_OK) abort();
  tree_task(&r);
  if (gr_taskgroup_wait(&g) != GR_OK) abort();
  t->sum = t->x->value + l.sum + r.sum;
}

static void tree_sum_known_answers(void **state) {
  (void)state;
  enum { N = 20000 };
  node *nodes = calloc(N, sizeof *nodes);
  assert_non_null(nodes);
  int next = 0;
  uint64_t rng = 0x1234567u;
  node *root = build_tree(nodes, &next, N, &rng);
  assert_int_equal(next, N);
  long ref = 0;
  for (int i = 0; i < N; i++)
    ref += nodes[i].value; /* independent of the tree's shape */
  int threads[] = {1, 2, 4, 8};
  for (int i = 0; i < 4; i++) {
    tree_pool = make_pool(threads[i]);
    tree_arg t = {root, 0};
    run_on_worker(tree_pool, tree_task, &t);
    assert_int_equal(t.sum, ref);
    tree_arg t2 = {root, 0};
    gr_taskgroup g;
    gr_taskgroup_init(&g, tree_pool);
    assert_int_equal(gr_spawn(&g, tree_task, &t2), GR_OK);
    assert_int_equal(gr_taskgroup_wait(&g), GR_OK);
    assert_int_equal(t2.sum, ref);
    assert_int_equal(gr_pool_destroy(tree_pool), GR_OK);
  }
  free(nodes);
}

/* ---- nested groups ----------------------------------------------------------------------- */

static gr_pool *nest_pool;
static _Atomic long nest_leaves;
typedef struct {
  int depth;
} nest_arg;

/* Each level opens two groups, spawns 3 children into each, and waits for them separately. */
static void nest_task(void *a) {
  nest_arg *na = a;
  if (na->depth == 0) {
    atomic_fetch_add(&nest_leaves, 1);
    return;
  }
  nest_arg kids[6];
  gr_taskgroup g1, g2;
  gr_taskgroup_init(&g1, nest_pool);
  gr_taskgroup_init(&g2, nest_pool);
  for (int i = 0; i < 6; i++) {
    kids[i].depth = na->depth - 1;
    if (gr_spawn(i < 3 ? &g1 : &g2, nest_task, &kids[i]) != GR_OK) abort();
  }
  if (gr_taskgroup_wait(&g2) != GR_OK) abort();
  if (gr_taskgroup_wait(&g1) != GR_OK) abort();
}

static void nested_groups(void **state) {
  (void)state;
  for (int nt = 1; nt <= 4; nt *= 2) {
    nest_pool = make_pool(nt);
    atomic_store(&nest_leaves, 0);
    nest_arg root = {5};
    gr_taskgroup g;
    gr_taskgroup_init(&g, nest_pool);
    assert_int_equal(gr_spawn(&g, nest_task, &root), GR_OK);
    assert_int_equal(gr_taskgroup_wait(&g), GR_OK);
    assert_int_equal(atomic_load(&nest_leaves), 6 * 6 * 6 * 6 * 6);
    assert_int_equal(gr_pool_destroy(nest_pool), GR_OK);
  }
}

/* ---- cancellation ------------------------------------------------------------------------ */

static gr_pool *cancel_pool;
static _Atomic int cancel_ran;
static void count_task(void *a) {
  (void)a;
  atomic_fetch_add(&cancel_ran, 1);
}

/* Holds a worker until released, so that tasks spawned meanwhile cannot start. */
static _Atomic int blockers_running, blockers_release;
static void blocker_task(void *a) {
  (void)a;
  atomic_fetch_add(&blockers_running, 1);
  while (!atomic_load(&blockers_release))
    sched_yield();
}

/* On the only worker: nobody else can start the spawned tasks before the cancel. */
static void cancel_body(void *a) {
  (void)a;
  gr_taskgroup g;
  gr_taskgroup_init(&g, cancel_pool);
  for (int i = 0; i < 1000; i++)
    if (gr_spawn(&g, count_task, NULL) != GR_OK) abort();
  gr_taskgroup_cancel(&g);
  if (gr_taskgroup_wait(&g) != GR_OK) abort();
  if (atomic_load(&cancel_ran) != 0) abort();
  /* The group is usable again after its wait. */
  for (int i = 0; i < 10; i++)
    if (gr_spawn(&g, count_task, NULL) != GR_OK) abort();
  if (gr_taskgroup_wait(&g) != GR_OK) abort();
}

static void cancellation(void **state) {
  (void)state;
  cancel_pool = make_pool(1);
  atomic_store(&cancel_ran, 0);
  run_on_worker(cancel_pool, cancel_body, NULL);
  assert_int_equal(atomic_load(&cancel_ran), 10);
  assert_int_equal(gr_pool_destroy(cancel_pool), GR_OK);

  /* With running workers: tasks spawned while every worker is busy and cancelled before any
   * worker is free never run: the wait returns with none of them run, and none runs after it. */
  cancel_pool = make_pool(2);
  atomic_store(&cancel_ran, 0);
  atomic_store(&blockers_running, 0);
  atomic_store(&blockers_release, 0);
  gr_taskgroup busy;
  gr_taskgroup_init(&busy, cancel_pool);
  for (int i = 0; i < 2; i++)
    assert_int_equal(gr_spawn(&busy, blocker_task, NULL), GR_OK);
  while (atomic_load(&blockers_running) < 2)
    sched_yield(); /* both workers are held */
  gr_taskgroup g;
  gr_taskgroup_init(&g, cancel_pool);
  for (int i = 0; i < 5000; i++)
    assert_int_equal(gr_spawn(&g, count_task, NULL), GR_OK);
  gr_taskgroup_cancel(&g);
  atomic_store(&blockers_release, 1);
  assert_int_equal(gr_taskgroup_wait(&g), GR_OK);
  assert_int_equal(atomic_load(&cancel_ran), 0);
  assert_int_equal(gr_taskgroup_wait(&busy), GR_OK);
  assert_int_equal(gr_pool_destroy(cancel_pool), GR_OK);
  assert_int_equal(atomic_load(&cancel_ran), 0);

  /* Cancelled while the workers run freely: some tasks may already have started, the rest are
   * skipped, and nothing runs after the wait returns. */
  cancel_pool = make_pool(2);
  atomic_store(&cancel_ran, 0);
  gr_taskgroup_init(&g, cancel_pool);
  for (int i = 0; i < 5000; i++)
    assert_int_equal(gr_spawn(&g, count_task, NULL), GR_OK);
  gr_taskgroup_cancel(&g);
  assert_int_equal(gr_taskgroup_wait(&g), GR_OK);
  int after_wait = atomic_load(&cancel_ran);
  assert_int_equal(gr_pool_destroy(cancel_pool), GR_OK);
  assert_int_equal(atomic_load(&cancel_ran), after_wait);
}

/* ---- priorities -------------------------------------------------------------------------- */

static gr_pool *prio_pool;
static _Atomic int prio_seq;
static int prio_order[64];
static void prio_task(void *a) {
  int id = (int)(intptr_t)a;
  prio_order[atomic_fetch_add(&prio_seq, 1)] = id;
}

/* ids 0..15 normal, 16..31 high, spawned normal-first on the only worker. */
static void prio_body(void *a) {
  (void)a;
  gr_taskgroup g;
  gr_taskgroup_init(&g, prio_pool);
  for (int i = 0; i < 16; i++)
    if (gr_spawn_prio(&g, GR_PRIO_NORMAL, prio_task, (void *)(intptr_t)i) != GR_OK) abort();
  for (int i = 16; i < 32; i++)
    if (gr_spawn_prio(&g, GR_PRIO_HIGH, prio_task, (void *)(intptr_t)i) != GR_OK) abort();
  if (gr_taskgroup_wait(&g) != GR_OK) abort();
}

static gr_taskgroup gate_group;
static _Atomic int gate_open, gate_started;
static void gate_task(void *a) {
  (void)a;
  atomic_store(&gate_started, 1);
  while (!atomic_load(&gate_open))
    sched_yield();
}

static void priorities(void **state) {
  (void)state;
  /* Inside the pool: the worker takes its high tasks before its normal ones. */
  prio_pool = make_pool(1);
  atomic_store(&prio_seq, 0);
  run_on_worker(prio_pool, prio_body, NULL);
  assert_int_equal(atomic_load(&prio_seq), 32);
  for (int i = 0; i < 16; i++)
    assert_true(prio_order[i] >= 16);
  for (int i = 16; i < 32; i++)
    assert_true(prio_order[i] < 16);

  /* From outside: while the only worker is held by a gate task, queue normal then high tasks;
   * once the gate opens the worker takes the high ones first. This thread does not help. */
  atomic_store(&prio_seq, 0);
  atomic_store(&gate_open, 0);
  atomic_store(&gate_started, 0);
  gr_taskgroup_init(&gate_group, prio_pool);
  assert_int_equal(gr_spawn(&gate_group, gate_task, NULL), GR_OK);
  while (!atomic_load(&gate_started))
    sleep_ms(1);
  gr_taskgroup g;
  gr_taskgroup_init(&g, prio_pool);
  for (int i = 0; i < 16; i++)
    assert_int_equal(gr_spawn_prio(&g, GR_PRIO_NORMAL, prio_task, (void *)(intptr_t)i), GR_OK);
  for (int i = 16; i < 32; i++)
    assert_int_equal(gr_spawn_prio(&g, GR_PRIO_HIGH, prio_task, (void *)(intptr_t)i), GR_OK);
  atomic_store(&gate_open, 1);
  while (atomic_load(&prio_seq) < 32)
    sleep_ms(1);
  assert_int_equal(gr_taskgroup_wait(&g), GR_OK);
  assert_int_equal(gr_taskgroup_wait(&gate_group), GR_OK);
  for (int i = 0; i < 16; i++)
    assert_int_equal(prio_order[i], 16 + i); /* FIFO within a level */
  for (int i = 16; i < 32; i++)
    assert_int_equal(prio_order[i], i - 16);
  assert_int_equal(gr_pool_destroy(prio_pool), GR_OK);
}

/* ---- parallel_for ------------------------------------------------------------------------ */

typedef struct {
  _Atomic int *hits;
  size_t base, grain;
  _Atomic int bad_chunk;
} pfor_arg;

static void pfor_body(size_t lo, size_t hi, void *a) {
  pfor_arg *pa = a;
  if (lo >= hi || (pa->grain && hi - lo > pa->grain)) atomic_store(&pa->bad_chunk, 1);
  for (size_t i = lo; i < hi; i++)
    atomic_fetch_add(&pa->hits[i - pa->base], 1);
}

static gr_pool *pfor_pool;
static void pfor_check(size_t base, size_t n, size_t grain) {
  _Atomic int *hits = calloc(n + 1, sizeof *hits);
  if (!hits) abort();
  pfor_arg pa = {hits, base, grain, 0};
  if (gr_parallel_for(pfor_pool, base, base + n, grain, pfor_body, &pa) != GR_OK) abort();
  for (size_t i = 0; i < n; i++)
    if (atomic_load(&hits[i]) != 1) {
      fprintf(stderr, "n=%zu grain=%zu: index %zu hit %d times\n", n, grain, base + i,
              atomic_load(&hits[i]));
      abort();
    }
  if (atomic_load(&pa.bad_chunk)) abort();
  free(hits);
}

static const size_t pfor_sizes[] = {0, 1, 2, 3, 7, 100, 1001, 4099};
static const size_t pfor_grains[] = {0, 1, 3, 7, 64, 5000};

static void pfor_all(void *a) {
  (void)a;
  for (size_t i = 0; i < sizeof pfor_sizes / sizeof pfor_sizes[0]; i++)
    for (size_t j = 0; j < sizeof pfor_grains / sizeof pfor_grains[0]; j++)
      pfor_check(17, pfor_sizes[i], pfor_grains[j]);
}

static void parallel_for_covers_once(void **state) {
  (void)state;
  for (int nt = 1; nt <= 4; nt *= 2) {
    pfor_pool = make_pool(nt);
    pfor_all(NULL);                           /* from outside the pool */
    run_on_worker(pfor_pool, pfor_all, NULL); /* from inside a task */
    assert_int_equal(gr_pool_destroy(pfor_pool), GR_OK);
  }
}

/* ---- an external thread's wait helps ----------------------------------------------------- */

static _Atomic int ext_ran_outside;
static void note_thread(void *a) {
  (void)a;
  if (gr_worker_id() < 0) atomic_fetch_add(&ext_ran_outside, 1);
}

static void external_wait_helps(void **state) {
  (void)state;
  gr_pool *p = make_pool(1);
  assert_int_equal(gr_worker_id(), -1);
  /* Hold the only worker; the 100 tasks can only finish if this thread runs them itself. */
  atomic_store(&gate_open, 0);
  atomic_store(&gate_started, 0);
  gr_taskgroup_init(&gate_group, p);
  assert_int_equal(gr_spawn(&gate_group, gate_task, NULL), GR_OK);
  while (!atomic_load(&gate_started))
    sleep_ms(1);
  gr_taskgroup g;
  gr_taskgroup_init(&g, p);
  atomic_store(&ext_ran_outside, 0);
  for (int i = 0; i < 100; i++)
    assert_int_equal(gr_spawn(&g, note_thread, NULL), GR_OK);
  assert_int_equal(gr_taskgroup_wait(&g), GR_OK);
  assert_int_equal(atomic_load(&ext_ran_outside), 100);
  atomic_store(&gate_open, 1);
  assert_int_equal(gr_taskgroup_wait(&gate_group), GR_OK);
  assert_int_equal(gr_pool_destroy(p), GR_OK);
}

/* ---- destroy with work in flight --------------------------------------------------------- */

static gr_pool *fly_pool;
static _Atomic long fly_done;
static gr_taskgroup fly_group;
static void fly_leaf(void *a) {
  (void)a;
  for (volatile int i = 0; i < 2000; i++) {
  }
  atomic_fetch_add(&fly_done, 1);
}
static void fly_parent(void *a) {
  (void)a;
  /* Fire and forget into the outer group: nobody waits for these but gr_pool_destroy. */
  for (int i = 0; i < 20; i++)
    if (gr_spawn(&fly_group, fly_leaf, NULL) != GR_OK) abort();
  atomic_fetch_add(&fly_done, 1);
}

static void destroy_with_work_in_flight(void **state) {
  (void)state;
  fly_pool = make_pool(2);
  atomic_store(&fly_done, 0);
  gr_taskgroup_init(&fly_group, fly_pool);
  for (int i = 0; i < 200; i++)
    assert_int_equal(gr_spawn(&fly_group, fly_parent, NULL), GR_OK);
  assert_int_equal(gr_pool_destroy(fly_pool), GR_OK);
  assert_int_equal(atomic_load(&fly_done), 200 * 21);
  /* The pool is gone: its group is now invalid to use. */
  assert_int_equal(gr_taskgroup_wait(&fly_group), GR_ERR_INVALID);
  assert_non_null(strstr(gr_last_error(), "gr_taskgroup_wait"));
  assert_int_equal(gr_spawn(&fly_group, fly_leaf, NULL), GR_ERR_INVALID);
  assert_int_equal(gr_parallel_for(fly_pool, 0, 10, 1, pfor_body, NULL), GR_ERR_INVALID);
  assert_int_equal(gr_pool_destroy(fly_pool), GR_ERR_INVALID);
}

/* ---- several external threads at once (external slots, injection queue) ----------------- */

static _Atomic int ext_errors;
static void *ext_thread(void *a) {
  (void)a;
  for (int it = 0; it < 30; it++) {
    fib_arg f[12];
    gr_taskgroup g;
    gr_taskgroup_init(&g, fib_pool);
    for (int i = 0; i < 12; i++) {
      f[i].n = 8 + i % 5;
      f[i].r = -1;
      if (gr_spawn(&g, fib_task, &f[i]) != GR_OK) atomic_fetch_add(&ext_errors, 1);
    }
    if (gr_taskgroup_wait(&g) != GR_OK) atomic_fetch_add(&ext_errors, 1);
    for (int i = 0; i < 12; i++)
      if (f[i].r != fib_ref(f[i].n)) atomic_fetch_add(&ext_errors, 1);
  }
  return NULL;
}

static void concurrent_external_threads(void **state) {
  (void)state;
  /* More external threads (12) than external slots (8): some help without a slot. */
  fib_pool = make_pool(2);
  pthread_t th[12];
  for (int i = 0; i < 12; i++)
    assert_int_equal(pthread_create(&th[i], NULL, ext_thread, NULL), 0);
  for (int i = 0; i < 12; i++)
    pthread_join(th[i], NULL);
  assert_int_equal(atomic_load(&ext_errors), 0);
  assert_true(gr__pool_quiescent(fib_pool));
  assert_int_equal(gr_pool_destroy(fib_pool), GR_OK);
}

/* ---- two pools: a task of one waits for work in the other ------------------------------- */

static gr_pool *pool_a, *pool_b;
static _Atomic int cross_ran, cross_bad_state;
static void cross_leaf(void *a) {
  (void)a;
  atomic_fetch_add(&cross_ran, 1);
}
static void cross_task(void *a) {
  (void)a;
  gr_taskgroup gb;
  gr_taskgroup_init(&gb, pool_b);
  for (int i = 0; i < 100; i++)
    if (gr_spawn(&gb, cross_leaf, NULL) != GR_OK) abort();
  if (gr_taskgroup_wait(&gb) != GR_OK) abort();
  /* Destroying one's own pool from inside would wait for itself. */
  if (gr_pool_destroy(pool_a) != GR_ERR_STATE) atomic_store(&cross_bad_state, 1);
}

static void two_pools(void **state) {
  (void)state;
  pool_a = make_pool(2);
  pool_b = make_pool(2);
  atomic_store(&cross_ran, 0);
  gr_taskgroup ga;
  gr_taskgroup_init(&ga, pool_a);
  for (int i = 0; i < 8; i++)
    assert_int_equal(gr_spawn(&ga, cross_task, NULL), GR_OK);
  assert_int_equal(gr_taskgroup_wait(&ga), GR_OK);
  assert_int_equal(atomic_load(&cross_ran), 800);
  assert_int_equal(atomic_load(&cross_bad_state), 0);
  assert_int_equal(gr_pool_destroy(pool_b), GR_OK);
  assert_int_equal(gr_pool_destroy(pool_a), GR_OK);
}

/* ---- bad input --------------------------------------------------------------------------- */

static void bad_input(void **state) {
  (void)state;
  gr_pool_config cfg;
  gr_pool_config_init(&cfg);
  gr_pool *p = NULL;
  assert_int_equal(gr_pool_create(&cfg, NULL), GR_ERR_INVALID);
  cfg.nthreads = -1;
  assert_int_equal(gr_pool_create(&cfg, &p), GR_ERR_INVALID);
  assert_non_null(strstr(gr_last_error(), "nthreads -1"));
  gr_pool_config_init(&cfg);
  cfg.pin = 7;
  assert_int_equal(gr_pool_create(&cfg, &p), GR_ERR_INVALID);
  gr_pool_config_init(&cfg);
  cfg.priorities = 3;
  assert_int_equal(gr_pool_create(&cfg, &p), GR_ERR_INVALID);
  assert_null(p);

  p = make_pool(2);
  gr_taskgroup g;
  gr_taskgroup_init(&g, p);
  assert_int_equal(gr_spawn(&g, NULL, NULL), GR_ERR_INVALID);
  assert_non_null(strstr(gr_last_error(), "gr_spawn: fn is NULL"));
  assert_int_equal(gr_spawn(NULL, count_task, NULL), GR_ERR_INVALID);
  assert_int_equal(gr_spawn_prio(&g, 5, count_task, NULL), GR_ERR_INVALID);
  assert_non_null(strstr(gr_last_error(), "priority 5"));
  gr_taskgroup junk;
  memset(&junk, 0, sizeof junk);
  assert_int_equal(gr_spawn(&junk, count_task, NULL), GR_ERR_INVALID);
  assert_int_equal(gr_taskgroup_wait(&junk), GR_ERR_INVALID);
  assert_int_equal(gr_taskgroup_wait(NULL), GR_ERR_INVALID);
  gr_taskgroup nopool;
  gr_taskgroup_init(&nopool, NULL);
  assert_int_equal(gr_spawn(&nopool, count_task, NULL), GR_ERR_INVALID);
  assert_int_equal(gr_parallel_for(NULL, 0, 1, 1, pfor_body, NULL), GR_ERR_INVALID);
  assert_int_equal(gr_parallel_for(p, 0, 1, 1, NULL, NULL), GR_ERR_INVALID);
  assert_int_equal(gr_parallel_for(p, 5, 1, 1, pfor_body, NULL), GR_ERR_INVALID);
  assert_non_null(strstr(gr_last_error(), "begin 5 is after end 1"));
  assert_int_equal(gr_pool_destroy(NULL), GR_ERR_INVALID);
  assert_int_equal(gr_taskgroup_wait(&g), GR_OK); /* nothing spawned */
  assert_int_equal(gr_pool_destroy(p), GR_OK);
  assert_int_equal(gr_pool_nthreads(NULL), -1);
}

/* ---- worker ids, sizing and pinning ------------------------------------------------------ */

/* Cores in this thread's affinity mask, counted from sysfs (independently of hwloc). */
static int cores_in_mask(const cpu_set_t *cs, int *core_of_cpu, int ncpu_max) {
  int ids[1024];
  int n = 0;
  for (int c = 0; c < CPU_SETSIZE && c < ncpu_max; c++) {
    core_of_cpu[c] = -1;
    char path[128];
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/core_id", c);
    FILE *f = fopen(path, "r");
    int core = c, pkg = 0;
    if (f) {
      if (fscanf(f, "%d", &core) != 1) core = c;
      fclose(f);
      snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/physical_package_id", c);
      f = fopen(path, "r");
      if (f) {
        if (fscanf(f, "%d", &pkg) != 1) pkg = 0;
        fclose(f);
      }
    } else if (access("/sys/devices/system/cpu", F_OK) == 0 && c >= 1024) {
      break;
    }
    int id = pkg * 100000 + core;
    core_of_cpu[c] = id;
    if (!CPU_ISSET(c, cs)) continue;
    int seen = 0;
    for (int k = 0; k < n; k++)
      seen |= ids[k] == id;
    if (!seen && n < 1024) ids[n++] = id;
  }
  return n;
}

static int core_of_cpu[CPU_SETSIZE];
static _Atomic int pin_bad, pin_checked;
static void pin_body(size_t lo, size_t hi, void *a) {
  (void)lo;
  (void)hi;
  (void)a;
  if (gr_worker_id() < 0) {
    /* This (unpinned) thread helps too. It holds its first chunk until a worker has checked one,
     * so the workers get chunks however the run is scheduled (bounded: the assertion on
     * pin_checked then fails instead of the test hanging). */
    for (long i = 0; i < 1000000 && atomic_load(&pin_checked) == 0; i++) {
      struct timespec ts = {0, 10000}; /* 10 us, at most ~10 s in all */
      nanosleep(&ts, NULL);
    }
    return;
  }
  cpu_set_t cs;
  if (sched_getaffinity(0, sizeof cs, &cs) != 0) return;
  int core = -2;
  for (int c = 0; c < CPU_SETSIZE; c++)
    if (CPU_ISSET(c, &cs)) {
      if (core == -2)
        core = core_of_cpu[c];
      else if (core_of_cpu[c] != core)
        atomic_store(&pin_bad, 1);
    }
  atomic_fetch_add(&pin_checked, 1);
}

static _Atomic int id_bad;
static int id_n;
static void id_body(size_t lo, size_t hi, void *a) {
  (void)lo;
  (void)hi;
  (void)a;
  int id = gr_worker_id();
  if (id < -1 || id >= id_n) atomic_store(&id_bad, 1);
}

static void sizing_and_pinning(void **state) {
  (void)state;
  cpu_set_t orig;
  assert_int_equal(sched_getaffinity(0, sizeof orig, &orig), 0);
  int ncores = cores_in_mask(&orig, core_of_cpu, CPU_SETSIZE);
  assert_true(ncores >= 1);

  gr_pool_config cfg;
  gr_pool_config_init(&cfg);
  assert_int_equal(cfg.nthreads, 0);
  cfg.pin = 0;
  gr_pool *p;
  assert_int_equal(gr_pool_create(&cfg, &p), GR_OK);
  assert_int_equal(gr_pool_nthreads(p), ncores);
  id_n = ncores;
  assert_int_equal(gr_parallel_for(p, 0, 1000, 1, id_body, NULL), GR_OK);
  assert_int_equal(atomic_load(&id_bad), 0);
  assert_int_equal(gr_pool_destroy(p), GR_OK);

  /* A process restricted to one CPU gets one worker with nthreads = 0 (no oversubscription). */
  int first = -1;
  for (int c = 0; c < CPU_SETSIZE && first < 0; c++)
    if (CPU_ISSET(c, &orig)) first = c;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  assert_int_equal(sched_setaffinity(0, sizeof one, &one), 0);
  assert_int_equal(gr_pool_create(&cfg, &p), GR_OK);
  int n1 = gr_pool_nthreads(p);
  assert_int_equal(gr_pool_destroy(p), GR_OK);
  assert_int_equal(sched_setaffinity(0, sizeof orig, &orig), 0);
  assert_int_equal(n1, 1);

  /* The plan's cpuset from gpurun bounds the pool too, read by gr_pool_create from the
   * environment. */
  char cpus[32];
  snprintf(cpus, sizeof cpus, "%d", first);
  setenv(GR_PLAN_VAR_VERSION, GR_PLAN_VERSION, 1);
  setenv(GR_PLAN_VAR_LOCAL_RANK, "0", 1);
  setenv(GR_PLAN_VAR_LOCAL_SIZE, "1", 1);
  setenv(GR_PLAN_VAR_CPUS, cpus, 1);
  assert_int_equal(gr_pool_create(&cfg, &p), GR_OK);
  n1 = gr_pool_nthreads(p);
  assert_int_equal(gr_pool_destroy(p), GR_OK);
  assert_int_equal(n1, 1);
  /* A plan the reader refuses bounds nothing, as gr_init ignores it too. */
  setenv(GR_PLAN_VAR_VERSION, "99", 1);
  assert_int_equal(gr_pool_create(&cfg, &p), GR_OK);
  int nrefused = gr_pool_nthreads(p);
  assert_int_equal(gr_pool_destroy(p), GR_OK);
  assert_int_equal(nrefused, ncores);
  unsetenv(GR_PLAN_VAR_VERSION);
  unsetenv(GR_PLAN_VAR_LOCAL_RANK);
  unsetenv(GR_PLAN_VAR_LOCAL_SIZE);
  unsetenv(GR_PLAN_VAR_CPUS);

  /* Handed over, as gr_init hands over the plan it read: the environment has none. */
  char v[32], cv[48];
  snprintf(v, sizeof v, "%s=%s", GR_PLAN_VAR_VERSION, GR_PLAN_VERSION);
  snprintf(cv, sizeof cv, "%s=%s", GR_PLAN_VAR_CPUS, cpus);
  char *penv[] = {v, GR_PLAN_VAR_LOCAL_RANK "=0", GR_PLAN_VAR_LOCAL_SIZE "=1", cv, NULL};
  gr_plan plan;
  assert_int_equal(gr__plan_parse(penv, &plan), GR_OK);
  assert_int_equal(plan.from_plan, 1);
  assert_int_equal(gr__pool_create_planned(&cfg, &plan, &p), GR_OK);
  n1 = gr_pool_nthreads(p);
  assert_int_equal(gr_pool_destroy(p), GR_OK);
  assert_int_equal(n1, 1);
  /* pin -1 under a plan pins: the worker's affinity is the plan's one CPU's core, not the
   * creating thread's (several cores, when it has them). */
  gr_pool_config dflt;
  gr_pool_config_init(&dflt);
  dflt.nthreads = 2;
  assert_int_equal(gr__pool_create_planned(&dflt, &plan, &p), GR_OK);
  atomic_store(&pin_bad, 0);
  atomic_store(&pin_checked, 0);
  assert_int_equal(gr_parallel_for(p, 0, 4096, 1, pin_body, NULL), GR_OK);
  assert_int_equal(atomic_load(&pin_bad), 0);
  assert_true(atomic_load(&pin_checked) > 0);
  assert_int_equal(gr_pool_destroy(p), GR_OK);

  /* Pinned: every worker's affinity lies within one core. */
  cfg.pin = 1;
  assert_int_equal(gr_pool_create(&cfg, &p), GR_OK);
  atomic_store(&pin_bad, 0);
  atomic_store(&pin_checked, 0);
  assert_int_equal(gr_parallel_for(p, 0, 4096, 1, pin_body, NULL), GR_OK);
  assert_int_equal(atomic_load(&pin_bad), 0);
  /* pin_bad == 0 proves nothing unless a worker looked at its affinity at all */
  assert_true(atomic_load(&pin_checked) > 0);
  assert_int_equal(gr_pool_destroy(p), GR_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(fib_known_answers),
      cmocka_unit_test(tree_sum_known_answers),
      cmocka_unit_test(nested_groups),
      cmocka_unit_test(cancellation),
      cmocka_unit_test(priorities),
      cmocka_unit_test(parallel_for_covers_once),
      cmocka_unit_test(external_wait_helps),
      cmocka_unit_test(destroy_with_work_in_flight),
      cmocka_unit_test(concurrent_external_threads),
      cmocka_unit_test(two_pools),
      cmocka_unit_test(bad_input),
      cmocka_unit_test(sizing_and_pinning),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  /* Asked for the asymmetric barrier (test_pool_asym) where membarrier is unavailable, the pools
   * ran with the fence pair: what this run was for did not run. */
  const char *fence = getenv("GPURUN_POOL_FENCE");
  if (failed == 0 && fence && strcmp(fence, "asym") == 0 && !gr__deque_asym_available()) {
    printf("SKIP: GPURUN_POOL_FENCE=asym, but membarrier is unavailable: the pools used the fence "
           "pair\n");
    return 77;
  }
  return failed;
}
