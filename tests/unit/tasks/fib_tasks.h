/* Test helper shared by the pool tests: fib with a task at every call, and its reference.
 * fib_task spawns fib(n-1) into a group of fib_pool, runs fib(n-2) inline and waits. */
#ifndef POOL_TEST_FIB_H
#define POOL_TEST_FIB_H

#include <gpurun/pool.h>
#include <stdlib.h>

static gr_pool *fib_pool;
typedef struct {
  int n;
  long r;
} fib_arg;

static void fib_task(void *a) {
  fib_arg *f = a;
  if (f->n < 2) {
    f->r = f->n;
    return;
  }
  fib_arg x = {f->n - 1, 0}, y = {f->n - 2, 0};
  gr_taskgroup g;
  gr_taskgroup_init(&g, fib_pool);
  if (gr_spawn(&g, fib_task, &x) != GR_OK) abort();
  fib_task(&y);
  if (gr_taskgroup_wait(&g) != GR_OK) abort();
  f->r = x.r + y.r;
}

/* fib(n) by iteration: the independent answer. */
static long fib_ref(int n) {
  long a = 0, b = 1;
  for (int i = 0; i < n; i++) {
    long t = a + b;
    a = b;
    b = t;
  }
  return a;
}

#endif
