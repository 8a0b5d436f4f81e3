/* Internal: the Chase-Lev work-stealing deque (one owner pushes and pops at the bottom, any thread
 * steals from the top).
 *
 * Algorithm: D. Chase and Y. Lev, "Dynamic circular work-stealing deque", SPAA 2005, with the C11
 * memory orders of N. M. Le, A. Pop, A. Cohen and F. Zappa Nardelli, "Correct and efficient
 * work-stealing for weak memory models", PPoPP 2013, plus the published fix to that paper's
 * figure: after growing, the owner reloads the array, and the new array is published with a
 * release store that thieves read with acquire (the paper used relaxed, which lets a thief see
 * the new array pointer before its contents).
 *
 * The paper's fence+relaxed pairs are written as ordered accesses so that ThreadSanitizer, which
 * does not model standalone fences, sees the same happens-before edges. On x86-64 they compile to
 * the same instructions (a seq_cst store is the xchg the fence would have been):
 *   push:  fence(release); store(bottom, relaxed)     -> store(bottom, release)
 *   pop:   store(bottom, relaxed); fence(seq_cst)     -> store(bottom, seq_cst), load(top, seq_cst)
 *   steal: load(top, acquire); fence(seq_cst); load(bottom, acquire)
 *                                                       -> load(top, seq_cst); load(bottom, seq_cst)
 * Every store to bottom is release or stronger, so a thief that reads any bottom value also sees
 * the task descriptors pushed before it.
 *
 * Asymmetric mode (d->asym, chosen at init and fixed for the deque's life). The seq_cst store in
 * pop is a locked instruction (~17-20 ns on the shared development VMs, more than the rest of a
 * spawn/pop pair) paid on every pop, while the fence it pairs with in steal is paid only on
 * steals, which are rare. In asymmetric mode pop orders its bottom store before its top load
 * with a compiler barrier only, and steal replaces its fence by membarrier(2)
 * MEMBARRIER_CMD_PRIVATE_EXPEDITED, which makes every running thread of the process execute a
 * full barrier (the asymmetric Dekker of liburcu; for work stealing, cf. Morrison and Afek,
 * "Fence-free work stealing on bounded TSO processors", ASPLOS 2014). Why it suffices: a thief
 * that wins index i = b-1 while the owner pops i without the last-item CAS must have read
 * top == i before its barrier, while the owner read top < i earlier still, so the owner's bottom
 * store preceded the barrier and the thief's later load of bottom sees <= i: empty. Thieves skip
 * the barrier when a cheap first look finds the deque empty, so idle spinning costs the owner
 * nothing. The cost moves to the steal: an IPI to every core running a thread of the process, so
 * on wide nodes with frequent steals it can lose. Hence opt-in: the pool uses it only with
 * GPURUN_POOL_FENCE=asym (and a kernel that has the command); the unit tests run both modes.
 *
 * Indices are signed 64-bit and never wrap in practice. Slots are _Atomic so a thief's read racing
 * with the owner's overwrite of a recycled slot is defined (the thief's CAS on top then fails).
 * A grown-out-of array is never freed while the deque lives: a thief may still be reading it. It
 * goes on a retired list freed by gr__deque_fini (total retired memory < the live array's). */
#ifndef GR_DEQUE_H
#define GR_DEQUE_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define GR__CACHE_LINE 64

typedef struct gr__deque_array {
  int64_t mask;                    /* capacity - 1; capacity is a power of two */
  struct gr__deque_array *retired; /* the arrays this one replaced (owner only) */
  _Atomic(void *) slot[];
} gr__deque_array;

typedef struct gr__deque {
  alignas(GR__CACHE_LINE) _Atomic int64_t top;    /* thieves CAS this */
  alignas(GR__CACHE_LINE) _Atomic int64_t bottom; /* owner writes this */
  _Atomic(gr__deque_array *) array;
  int asym; /* constant after init: see "Asymmetric mode" */
  char pad_[GR__CACHE_LINE - sizeof(int64_t) - sizeof(void *) - sizeof(int)];
} gr__deque;

/* Result of a steal: an item, a deque that looked empty, or a lost race (worth retrying). */
typedef enum { GR__STEAL_OK = 0, GR__STEAL_EMPTY, GR__STEAL_RETRY } gr__steal_result;

/* log2_capacity: initial capacity is 1 << log2_capacity. asym: 1 for asymmetric mode (the caller
 * must have had gr__deque_asym_available() return 1). Returns 0, or -1 when out of memory. */
int gr__deque_init(gr__deque *d, int log2_capacity, int asym);
/* Registers the process for membarrier's private expedited command (once); 1 when usable. */
int gr__deque_asym_available(void);
/* The thief's side of the asymmetric barrier. */
void gr__deque_heavy_barrier(void);
/* Frees the live and every retired array. No thread may use d any more. */
void gr__deque_fini(gr__deque *d);
/* Owner only: doubles the array, copying [t, b). Returns the new array, NULL when out of memory. */
gr__deque_array *gr__deque_grow(gr__deque *d, gr__deque_array *a, int64_t t, int64_t b);

/* Owner only. Returns 1 when the deque looked empty before the push (as far as the owner can
 * tell: thieves may have emptied it since), 0 otherwise, or -1 when it had to grow and could not. */
static inline int gr__deque_push(gr__deque *d, void *x) {
  int64_t b = atomic_load_explicit(&d->bottom, memory_order_relaxed);
  int64_t t = atomic_load_explicit(&d->top, memory_order_acquire);
  gr__deque_array *a = atomic_load_explicit(&d->array, memory_order_relaxed);
  if (b - t > a->mask) {
    a = gr__deque_grow(d, a, t, b);
    if (!a) return -1;
  }
  atomic_store_explicit(&a->slot[b & a->mask], x, memory_order_relaxed);
  atomic_store_explicit(&d->bottom, b + 1, memory_order_release);
  return b == t;
}

/* Owner only. The newest item, or NULL when empty. */
static inline void *gr__deque_pop(gr__deque *d) {
  int64_t b = atomic_load_explicit(&d->bottom, memory_order_relaxed) - 1;
  gr__deque_array *a = atomic_load_explicit(&d->array, memory_order_relaxed);
  int64_t t;
  if (d->asym) {
    atomic_store_explicit(&d->bottom, b, memory_order_release);
    atomic_signal_fence(
        memory_order_seq_cst); /* the compiler keeps the order; thieves membarrier */
    t = atomic_load_explicit(&d->top, memory_order_acquire);
  } else {
    atomic_store_explicit(&d->bottom, b, memory_order_seq_cst);
    t = atomic_load_explicit(&d->top, memory_order_seq_cst);
  }
  void *x = NULL;
  if (t <= b) {
    x = atomic_load_explicit(&a->slot[b & a->mask], memory_order_relaxed);
    if (t == b) {
      /* Last item: race the thieves for it. */
      if (!atomic_compare_exchange_strong_explicit(&d->top, &t, t + 1, memory_order_seq_cst,
                                                   memory_order_relaxed))
        x = NULL;
      atomic_store_explicit(&d->bottom, b + 1, memory_order_release);
    }
  } else {
    atomic_store_explicit(&d->bottom, b + 1, memory_order_release);
  }
  return x;
}

/* Any thread. */
static inline gr__steal_result gr__deque_steal(gr__deque *d, void **out) {
  int64_t t = atomic_load_explicit(&d->top, memory_order_seq_cst);
  int64_t b = atomic_load_explicit(&d->bottom, memory_order_seq_cst);
  if (t >= b) return GR__STEAL_EMPTY;
  if (d->asym) {
    gr__deque_heavy_barrier();
    b = atomic_load_explicit(&d->bottom, memory_order_seq_cst);
    if (t >= b) return GR__STEAL_EMPTY;
  }
  gr__deque_array *a = atomic_load_explicit(&d->array, memory_order_acquire);
  void *x = atomic_load_explicit(&a->slot[t & a->mask], memory_order_relaxed);
  if (!atomic_compare_exchange_strong_explicit(&d->top, &t, t + 1, memory_order_seq_cst,
                                               memory_order_relaxed))
    return GR__STEAL_RETRY;
  *out = x;
  return GR__STEAL_OK;
}

/* Any thread: a hint (may be stale by the time it returns) whether the deque holds items. */
static inline int gr__deque_nonempty(gr__deque *d) {
  int64_t t = atomic_load_explicit(&d->top, memory_order_relaxed);
  int64_t b = atomic_load_explicit(&d->bottom, memory_order_relaxed);
  return b > t;
}

#endif
