/* The pool's counts under concurrency (review findings F3/F4): statistics are complete once a
 * wait returned, gr__pool_quiescent never says idle while a task runs, and a thread that did not
 * initialise a group can wait for it. Stress loops, bounded by count and by time. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <gpurun/pool.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "fib_tasks.h"
#include "gr_pool.h"
#include "gr_test_clock.h"

static gr_pool *make_pool(int nthreads) {
  gr_pool_config cfg;
  gr_pool_config_init(&cfg);
  cfg.nthreads = nthreads;
  cfg.pin = 0;
  gr_pool *p = NULL;
  assert_int_equal(gr_pool_create(&cfg, &p), GR_OK);
  return p;
}

/* ---- statistics after a wait ------------------------------------------------------------- */

/* Spawns below a fib(n) task: each call with n >= 2 spawns fib(n-1) and runs fib(n-2) inline. */
static uint64_t fib_spawns(int n) {
  if (n < 2) return 0;
  return 1 + fib_spawns(n - 1) + fib_spawns(n - 2);
}

/* Every task a wait covered is in the statistics when the wait returns (the failure was
 * `run < spawned` right after a wait: a thief bumped its finish counter after the group's). */
static void stats_complete_after_wait(void **state) {
  (void)state;
  int threads[] = {2, 4, 8};
  for (int i = 0; i < 3; i++) {
    fib_pool = make_pool(threads[i]);
    uint64_t expect = 0;
    double t_end = gr_test_now() + 1.0;
    for (int it = 0; it < 150 && gr_test_now() < t_end; it++) {
      fib_arg f = {12, -1};
      gr_taskgroup g;
      gr_taskgroup_init(&g, fib_pool);
      assert_int_equal(gr_spawn(&g, fib_task, &f), GR_OK);
      assert_int_equal(gr_taskgroup_wait(&g), GR_OK);
      assert_int_equal(f.r, fib_ref(12));
      expect += 1 + fib_spawns(12);
      gr__pool_stats st;
      gr__pool_get_stats(fib_pool, &st);
      assert_int_equal(st.spawned, expect);
      assert_int_equal(st.run, expect);
      assert_true(gr__pool_quiescent(fib_pool));
    }
    assert_int_equal(gr_pool_destroy(fib_pool), GR_OK);
  }
}

/* ---- quiescence while a task runs -------------------------------------------------------- */

/* One long task keeps spawning no-op children (which idle workers steal at once) and waiting for
 * them; meanwhile this thread polls. While that task is seen running before and after a call,
 * the pool is not quiescent; and a finish count read before a spawn count never exceeds it. */
static gr_pool *q_pool;
static _Atomic int q_live, q_stop;

static void noop_task(void *a) { (void)a; }

static void spawner_task(void *a) {
  (void)a;
  atomic_store(&q_live, 1);
  while (!atomic_load(&q_stop)) {
    gr_taskgroup g;
    gr_taskgroup_init(&g, q_pool);
    for (int k = 0; k < 64; k++)
      if (gr_spawn(&g, noop_task, NULL) != GR_OK) abort();
    if (gr_taskgroup_wait(&g) != GR_OK) abort();
  }
  atomic_store(&q_live, 0);
}

static void quiescent_not_while_running(void **state) {
  (void)state;
  int threads[] = {2, 4};
  for (int i = 0; i < 2; i++) {
    q_pool = make_pool(threads[i]);
    atomic_store(&q_live, 0);
    atomic_store(&q_stop, 0);
    gr_taskgroup g;
    gr_taskgroup_init(&g, q_pool);
    assert_int_equal(gr_spawn(&g, spawner_task, NULL), GR_OK);
    while (!atomic_load(&q_live))
      sched_yield();
    long polls = 0, early = 0, over = 0;
    double t_end = gr_test_now() + 1.0;
    while (polls < 2000000 && gr_test_now() < t_end) {
      /* spawner_task runs once: live before and after means it ran throughout the call. */
      int before = atomic_load(&q_live);
      int q = gr__pool_quiescent(q_pool);
      int after = atomic_load(&q_live);
      if (before && after && q) early++;
      gr__pool_stats s1, s2;
      gr__pool_get_stats(q_pool, &s1);
      gr__pool_get_stats(q_pool, &s2);
      if (s1.run > s2.spawned) over++;
      polls++;
    }
    atomic_store(&q_stop, 1);
    assert_int_equal(gr_taskgroup_wait(&g), GR_OK);
    assert_int_equal(early, 0);
    assert_int_equal(over, 0);
    assert_true(gr__pool_quiescent(q_pool));
    assert_int_equal(gr_pool_destroy(q_pool), GR_OK);
  }
}

/* ---- a group waited for by a thread that did not initialise it ---------------------------- */

enum { NW_TASKS = 48 };
static gr_pool *nw_pool;
static _Atomic(gr_taskgroup *) nw_group;
static _Atomic int nw_ran[NW_TASKS];
static _Atomic int nw_bad;

static void nw_leaf(void *a) {
  _Atomic int *flag = a;
  /* Long enough for thieves to take some (loads the compiler cannot drop; nw_bad is never 2). */
  for (unsigned k = 0; k < 2000; k++)
    if (atomic_load_explicit(&nw_bad, memory_order_relaxed) == 2) break;
  atomic_store(flag, 1);
}

/* On a worker: initialise g (this worker owns it), spawn every task, hand g over, then help. */
static void nw_owner(void *a) {
  (void)a;
  gr_taskgroup g;
  gr_taskgroup_init(&g, nw_pool);
  for (int k = 0; k < NW_TASKS; k++)
    if (gr_spawn(&g, nw_leaf, (void *)&nw_ran[k]) != GR_OK) abort();
  atomic_store_explicit(&nw_group, &g, memory_order_release);
  if (gr_taskgroup_wait(&g) != GR_OK) abort();
  /* g lives on this stack: keep it until the other waiter is through. */
  while (atomic_load_explicit(&nw_group, memory_order_acquire) != NULL)
    sched_yield();
}

static void *nw_waiter(void *a) {
  (void)a;
  gr_taskgroup *g;
  while ((g = atomic_load_explicit(&nw_group, memory_order_acquire)) == NULL)
    sched_yield();
  if (gr_taskgroup_wait(g) != GR_OK) atomic_store(&nw_bad, 1);
  for (int k = 0; k < NW_TASKS; k++)
    if (!atomic_load(&nw_ran[k])) atomic_store(&nw_bad, 1);
  atomic_store_explicit(&nw_group, NULL, memory_order_release);
  return NULL;
}

static void non_owner_waits(void **state) {
  (void)state;
  nw_pool = make_pool(4);
  double t_end = gr_test_now() + 2.0;
  for (int it = 0; it < 200 && gr_test_now() < t_end; it++) {
    for (int k = 0; k < NW_TASKS; k++)
      atomic_store(&nw_ran[k], 0);
    atomic_store(&nw_group, NULL);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, nw_waiter, NULL), 0);
    gr_taskgroup outer;
    gr_taskgroup_init(&outer, nw_pool);
    assert_int_equal(gr_spawn(&outer, nw_owner, NULL), GR_OK);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(gr_taskgroup_wait(&outer), GR_OK);
    assert_int_equal(atomic_load(&nw_bad), 0);
  }
  assert_int_equal(gr_pool_destroy(nw_pool), GR_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(stats_complete_after_wait),
      cmocka_unit_test(quiescent_not_while_running),
      cmocka_unit_test(non_owner_waits),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
