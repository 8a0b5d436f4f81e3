/* The Chase-Lev deque's cold paths: creation, growth and teardown (the hot paths are inline in
 * gr_deque.h). */
#include "gr_deque.h"

#include <linux/membarrier.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static pthread_once_t asym_once = PTHREAD_ONCE_INIT;
static int asym_ok;

static void asym_register(void) {
  long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
  if (cmds < 0 || !(cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED)) return;
  if (syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) != 0) return;
  /* One trial: the command must work before any deque relies on it. */
  asym_ok = syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0;
}

int gr__deque_asym_available(void) {
  pthread_once(&asym_once, asym_register);
  return asym_ok;
}

void gr__deque_heavy_barrier(void) {
  /* Registered and tested by gr__deque_asym_available: it cannot fail afterwards. */
  syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
}

static gr__deque_array *array_new(int64_t capacity) {
  gr__deque_array *a = malloc(sizeof *a + (size_t)capacity * sizeof a->slot[0]);
  if (!a) return NULL;
  a->mask = capacity - 1;
  a->retired = NULL;
  for (int64_t i = 0; i < capacity; i++)
    atomic_init(&a->slot[i], NULL);
  return a;
}

int gr__deque_init(gr__deque *d, int log2_capacity, int asym) {
  if (log2_capacity < 1) log2_capacity = 1;
  if (log2_capacity > 40) return -1;
  gr__deque_array *a = array_new((int64_t)1 << log2_capacity);
  if (!a) return -1;
  atomic_init(&d->top, 0);
  atomic_init(&d->bottom, 0);
  atomic_init(&d->array, a);
  d->asym = asym;
  return 0;
}

void gr__deque_fini(gr__deque *d) {
  gr__deque_array *a = atomic_load_explicit(&d->array, memory_order_relaxed);
  while (a) {
    gr__deque_array *next = a->retired;
    free(a);
    a = next;
  }
  atomic_store_explicit(&d->array, NULL, memory_order_relaxed);
}

gr__deque_array *gr__deque_grow(gr__deque *d, gr__deque_array *a, int64_t t, int64_t b) {
  int64_t capacity = (a->mask + 1) * 2;
  gr__deque_array *n = array_new(capacity);
  if (!n) return NULL;
  for (int64_t i = t; i < b; i++)
    atomic_store_explicit(&n->slot[i & n->mask],
                          atomic_load_explicit(&a->slot[i & a->mask], memory_order_relaxed),
                          memory_order_relaxed);
  /* Thieves may still hold a: keep it (chained from its successor) until gr__deque_fini. */
  n->retired = a;
  /* Release: a thief that loads n (acquire) sees the copied slots. */
  atomic_store_explicit(&d->array, n, memory_order_release);
  return n;
}
