/* The work-stealing task pool: workers with Chase-Lev deques (gr_deque.h), per-slot task free
 * lists, help-while-waiting, and futex sleep when idle.
 *
 * Slots. The pool has nworkers worker slots plus GR__EXT_SLOTS slots that external threads (not
 * workers) borrow while they are inside gr_taskgroup_wait, so that the tasks they run spawn into a
 * deque of their own rather than through a lock. Each slot has one deque per priority, a task free
 * list and counters; only the thread holding the slot pushes/pops its deques, allocates from its
 * free list and writes its counters. A slot changes hands only through `claimed` (acquire/release).
 *
 * External spawns (a thread holding no slot of this pool) go to a mutex-protected FIFO per
 * priority, the injection queue; workers look at it before stealing. Those task descriptors come
 * from malloc: the external path is cold by design.
 *
 * Task descriptors come from the spawning slot's free list and always return to it: the slot
 * holder frees locally, any other thread pushes onto the slot's lock-free `free_remote` stack, which
 * the holder takes whole with one exchange when its local list runs dry (push-only Treiber stack
 * plus take-all has no ABA problem). Memory is reclaimed at gr_pool_destroy.
 *
 * Sleeping. An idle worker spins (trying to steal), then yields, then sleeps on the futex word
 * `epoch` with a timeout. Announcing sleep is nsleeping++ (seq_cst RMW) followed by a re-check for
 * work. A spawn that makes a deque non-empty reads nsleeping with a seq_cst RMW too, so one side
 * always sees the other, and wakes one sleeper; a spawn onto a non-empty deque reads it relaxed
 * (anyone going to sleep later sees the older items, or, if thieves emptied the deque meanwhile,
 * those thieves are awake; a locked instruction per spawn would cost more than the rest of it).
 * At most one wake-one is in flight (`waking`); a woken worker or waiter that finds work passes
 * the wake-up on. Injection, group completion by another thread and shutdown wake with seq_cst on
 * both sides.
 *
 * Two kinds of sleepers on two futex words, so that no event wakes every thread: idle workers
 * sleep on `epoch`, threads waiting for a group (gr_taskgroup_wait) on `wepoch`. New work wakes
 * one sleeper (an idle worker when there is one, else a waiter); a group's completion wakes the
 * waiters only; shutdown wakes all. A sleeper registers in its class's count before `nsleeping`,
 * so a waker that sees it in `nsleeping` also sees which word it sleeps on. Waiters sleep with the
 * timeout GR__SLEEP_MS; of the idle workers only one at a time (the `sentinel`) does, the others
 * sleep until woken: with the timeout on every worker, 1024 idle workers used 40% of a core and
 * 4096 more than one core, waking 20 times a second each to scan every deque. The sentinel's
 * timeout is the safety net; when it then finds work it passes a wake-up on like a woken worker.
 *
 * Group counts. The common case is a worker that initialises a group, spawns into it and waits for
 * it (fib, tree recursion); most of those tasks it pops and runs itself. Such spawns and finishes
 * are counted in owner-only fields with plain stores; only a task finished by another thread (a
 * steal) or spawned by another thread costs a locked instruction. */
#include "gr_pool_impl.h"

#include "gr_error.h"
#include "gr_log.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

_Thread_local gr__slot *gr__tl_slot;
#define tl_slot gr__tl_slot
static _Thread_local int tl_worker_id = -1;

/* Stack guard. Each taskgroup wait that runs a task nests it on the waiting thread's stack, so a
 * deep enough recursion of spawn-and-wait runs off the end of the stack. Spawning from a task is
 * refused (GR_ERR_NOMEM) once less than a reserve is left: with no new task the recursion cannot
 * go deeper, and the reserve covers the one task a waiter near the limit may still pick up.
 * tl_stack_floor is the lowest stack address + the reserve, set when a thread first holds a
 * slot (a worker at start, an external thread in its first wait); 0 = no check. */
static _Thread_local uintptr_t tl_stack_floor;
static _Thread_local size_t tl_stack_size;
static _Thread_local int tl_stack_known;

static void stack_bounds_init(void) {
  if (tl_stack_known) return;
  tl_stack_known = 1;
  pthread_attr_t a;
  if (pthread_getattr_np(pthread_self(), &a) != 0) return;
  void *lo = NULL;
  size_t size = 0;
  if (pthread_attr_getstack(&a, &lo, &size) == 0 && lo != NULL && size > 0) {
    size_t reserve = size / 16 > GR__STACK_RESERVE_MIN ? size / 16 : GR__STACK_RESERVE_MIN;
    if (reserve < size) {
      tl_stack_floor = (uintptr_t)lo + reserve;
      tl_stack_size = size;
    }
  }
  pthread_attr_destroy(&a);
}

static GR__NOINLINE gr_status stack_exhausted(const char *call, uintptr_t sp) {
  size_t size = tl_stack_size;
  size_t reserve = size / 16 > GR__STACK_RESERVE_MIN ? size / 16 : GR__STACK_RESERVE_MIN;
  size_t left = sp > tl_stack_floor - reserve ? sp - (tl_stack_floor - reserve) : 0;
  char who[48];
  if (tl_worker_id >= 0)
    snprintf(who, sizeof who, "worker %d", tl_worker_id);
  else
    snprintf(who, sizeof who, "the waiting thread (not a worker)");
  return gr__fail(GR_ERR_NOMEM, call,
                  "tasks nested too deeply: %s has %zu KiB of its %zu KiB stack left, below the "
                  "%zu KiB reserve (%s)", who, left >> 10, size >> 10, reserve >> 10,
                  tl_worker_id >= 0 ? "raise gr_pool_config.stack_size"
                                    : "its stack is its own: wait from a task, or give it more");
}

/* ---- small helpers ----------------------------------------------------------------------- */

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

static inline uint64_t rng_next(uint64_t *s) {
  uint64_t x = *s; /* xorshift64 */
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return *s = x;
}

static inline void counter_bump(_Atomic uint64_t *c, uint64_t by) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + by,
                        memory_order_release);
}

static void wake_word(_Atomic uint32_t *word, int n) {
  atomic_fetch_add_explicit(word, 1, memory_order_seq_cst);
  syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

/* Every sleeper, both kinds (shutdown; work made visible some other way). */
static void wake_all(gr_pool *p) {
  wake_word(&p->epoch, INT_MAX);
  wake_word(&p->wepoch, INT_MAX);
}

/* One sleeper for new work: an idle worker if one is asleep, else a waiter (which helps). The
 * caller has seen nsleeping > 0 with a seq_cst access; each sleeper counted itself in nidle or
 * nwaitsleep before nsleeping, so the class of the sleeper it saw is visible here. */
static void wake_one(gr_pool *p) {
  if (atomic_load_explicit(&p->nidle, memory_order_seq_cst) > 0)
    wake_word(&p->epoch, 1);
  else
    wake_word(&p->wepoch, 1);
}

void gr__pool_wake_all(gr_pool *p) { wake_all(p); }

/* After a push to a deque: wake one sleeper if there is one and no wake-up is already on its way.
 * A push onto an empty deque reads nsleeping with a seq_cst RMW: with the sleeper's seq_cst
 * increment before its re-check, one of the two sees the other (no missed wake-up). Pushes onto a
 * non-empty deque read it relaxed: whoever idles from now on sees that deque's older items.
 * Passing a wake-up on (a woken worker or waiter that found work) uses the RMW too (was_empty =
 * 1): a thread registering as sleeper at the same moment is either seen here or re-checks for
 * work after this point. It happens once per wake-up, so the locked instruction costs nothing. */
static inline void notify_work(gr_pool *p, int was_empty) {
  int sleepers = was_empty ? atomic_fetch_add_explicit(&p->nsleeping, 0, memory_order_seq_cst)
                           : atomic_load_explicit(&p->nsleeping, memory_order_relaxed);
  if (GR__UNLIKELY(sleepers > 0) &&
      !atomic_load_explicit(&p->waking, memory_order_relaxed) &&
      !atomic_exchange_explicit(&p->waking, 1, memory_order_relaxed))
    wake_one(p);
}

/* ---- task descriptors -------------------------------------------------------------------- */

static gr__task *task_alloc(gr__slot *s) {
  gr__task *t = s->free_local;
  if (GR__LIKELY(t != NULL)) {
    s->free_local = t->next;
    return t;
  }
  t = atomic_exchange_explicit(&s->free_remote, NULL, memory_order_acquire);
  if (t) {
    s->free_local = t->next;
    return t;
  }
  gr__chunk *c = aligned_alloc(GR__CACHE_LINE, (sizeof(gr__chunk) + GR__CACHE_LINE - 1) /
                                                   GR__CACHE_LINE * GR__CACHE_LINE);
  if (!c) return NULL;
  c->next = s->chunks;
  s->chunks = c;
  for (int i = 0; i < GR__CHUNK_TASKS; i++) {
    c->tasks[i].owner = s->index;
    c->tasks[i].next = i + 1 < GR__CHUNK_TASKS ? &c->tasks[i + 1] : NULL;
  }
  s->free_local = &c->tasks[1];
  return &c->tasks[0];
}

/* cur: the slot the calling thread holds in p, or NULL. */
static inline void task_free(gr_pool *p, gr__slot *cur, gr__task *t) {
  if (GR__UNLIKELY(t->owner == GR__TASK_HEAP)) {
    free(t);
  } else if (GR__LIKELY(cur != NULL && t->owner == cur->index)) {
    t->next = cur->free_local;
    cur->free_local = t;
  } else {
    gr__slot *o = &p->slots[t->owner];
    gr__task *h = atomic_load_explicit(&o->free_remote, memory_order_relaxed);
    do {
      t->next = h;
    } while (!atomic_compare_exchange_weak_explicit(&o->free_remote, &h, t, memory_order_release,
                                                    memory_order_relaxed));
  }
}

/* ---- finding and running work ------------------------------------------------------------ */

static gr__task *inject_take(gr_pool *p) {
  gr__task *t = NULL;
  pthread_mutex_lock(&p->inject_lock);
  for (int prio = GR_PRIO_HIGH; prio >= GR_PRIO_NORMAL && !t; prio--) {
    t = p->inj_head[prio];
    if (t) {
      p->inj_head[prio] = t->next;
      if (!t->next) p->inj_tail[prio] = NULL;
      atomic_fetch_sub_explicit(&p->ninject, 1, memory_order_relaxed);
    }
  }
  pthread_mutex_unlock(&p->inject_lock);
  return t;
}

static inline gr__task *pop_own(gr_pool *p, gr__slot *s) {
  if (GR__UNLIKELY(atomic_load_explicit(&p->nhigh, memory_order_relaxed) > 0) &&
      gr__deque_nonempty(&s->dq[GR_PRIO_HIGH])) {
    gr__task *t = gr__deque_pop(&s->dq[GR_PRIO_HIGH]);
    if (t) {
      atomic_fetch_sub_explicit(&p->nhigh, 1, memory_order_relaxed);
      return t;
    }
  }
  return gr__deque_pop(&s->dq[GR_PRIO_NORMAL]);
}

static int nvictims(gr_pool *p) {
  return p->nworkers + atomic_load_explicit(&p->ext_hw, memory_order_relaxed);
}

/* One round of looking elsewhere: high-priority deques (all of them), then the injection queue,
 * then one random victim's normal deque. self may be NULL (a thread holding no slot). */
static gr__task *steal_one(gr_pool *p, gr__slot *self, uint64_t *rng) {
  int n = nvictims(p);
  void *x;
  if (atomic_load_explicit(&p->nhigh, memory_order_relaxed) > 0) {
    int start = (int)(rng_next(rng) % (uint64_t)n);
    for (int k = 0; k < n; k++) {
      gr__slot *v = &p->slots[(start + k) % n];
      if (v == self) continue;
      if (gr__deque_steal(&v->dq[GR_PRIO_HIGH], &x) == GR__STEAL_OK) {
        atomic_fetch_sub_explicit(&p->nhigh, 1, memory_order_relaxed);
        if (self) counter_bump(&self->nsteals, 1);
        return x;
      }
    }
  }
  if (atomic_load_explicit(&p->ninject, memory_order_relaxed) > 0) {
    gr__task *t = inject_take(p);
    if (t) return t;
  }
  int vi = (int)(rng_next(rng) % (uint64_t)n);
  gr__slot *v = &p->slots[vi];
  if (v == self) {
    if (n == 1) return NULL;
    v = &p->slots[(vi + 1) % n];
  }
  if (gr__deque_steal(&v->dq[GR_PRIO_NORMAL], &x) == GR__STEAL_OK) {
    if (self) counter_bump(&self->nsteals, 1);
    return x;
  }
  return NULL;
}

/* Whether any work is visible anywhere (the re-check before sleeping). */
static int work_visible(gr_pool *p) {
  if (atomic_load_explicit(&p->ninject, memory_order_seq_cst) > 0) return 1;
  int n = nvictims(p);
  for (int i = 0; i < n; i++)
    if (gr__deque_nonempty(&p->slots[i].dq[0]) || gr__deque_nonempty(&p->slots[i].dq[1]))
      return 1;
  return 0;
}

static void pfor_range(gr_pool *p, gr_taskgroup *g, void *ctx, size_t lo, size_t hi);

static inline void run_task(gr_pool *p, gr__slot *s, gr__task *t) {
  gr_taskgroup *g = t->group;
  if (!__atomic_load_n(&g->cancelled, __ATOMIC_RELAXED)) {
    if (t->kind == KIND_FN)
      t->fn(t->arg);
    else
      pfor_range(p, g, t->arg, t->lo, t->hi);
  }
  int local = t->local;
  task_free(p, s, t);
  /* Counted finished before the group learns of it: a thread that saw the group complete (its
   * wait returned) then sees every finish in the pool statistics (the release here, the group
   * count's release/seq_cst below, the waiter's acquire). */
  if (s)
    counter_bump(&s->nfinished, 1);
  else
    atomic_fetch_add_explicit(&p->ext_finished, 1, memory_order_release);
  /* The count update is the last touch of g: a waiter may return and drop g right after it. */
  if (local && g->owner == (void *)s)
    __atomic_store_n(&g->done_local, __atomic_load_n(&g->done_local, __ATOMIC_RELAXED) + 1,
                     __ATOMIC_RELEASE);
  else if (local)
    __atomic_add_fetch(&g->done_remote, 1, __ATOMIC_SEQ_CST);
  else
    __atomic_sub_fetch(&g->pending, 1, __ATOMIC_SEQ_CST);
  if (GR__UNLIKELY(atomic_load_explicit(&p->nwaitsleep, memory_order_seq_cst) > 0))
    wake_word(&p->wepoch, INT_MAX); /* the waiters only: idle workers sleep on */
}

/* Whether every task spawned into g so far has finished. Order of the loads: the done counts
 * first, then spawned_local, then pending. A thread other than the owner that sees a finish (the
 * acquire/seq_cst loads) then sees the owner's spawns made before that task's, so spawned_local
 * can be stale only by spawns later than every finish it counted and s == d cannot hide a
 * pending task (read the other way round, a stale spawned_local could equal a fresher done
 * count). The owner reads its own writes either way. The remote counts come before `pending`: a
 * stolen task of the owner that spawned into g bumped `pending` before its own finish bumped
 * `done_remote`, so seeing the latter means seeing the former. */
static inline int group_done(gr_taskgroup *g) {
  int64_t d = __atomic_load_n(&g->done_local, __ATOMIC_ACQUIRE);
  d += __atomic_load_n(&g->done_remote, __ATOMIC_SEQ_CST);
  int64_t s = __atomic_load_n(&g->spawned_local, __ATOMIC_RELAXED);
  return s == d && __atomic_load_n(&g->pending, __ATOMIC_SEQ_CST) == 0;
}

/* Sleep on the futex until work appears, the group g (if any) completes, shutdown, or (waiters and
 * the sentinel idle worker only) timeout. Returns 1 when woken (or the wait was pointless), 0 on
 * timeout. */
static int idle_sleep(gr_pool *p, gr__slot *s, gr_taskgroup *g) {
  _Atomic uint32_t *word = g ? &p->wepoch : &p->epoch;
  _Atomic int *klass = g ? &p->nwaitsleep : &p->nidle;
  uint32_t e = atomic_load_explicit(word, memory_order_acquire);
  atomic_fetch_add_explicit(klass, 1, memory_order_seq_cst);
  atomic_fetch_add_explicit(&p->nsleeping, 1, memory_order_seq_cst);
  int timed = 1, sentinel = 0;
  if (!g) {
    int zero = 0;
    sentinel = atomic_load_explicit(&p->sentinel, memory_order_relaxed) == 0 &&
               atomic_compare_exchange_strong_explicit(&p->sentinel, &zero, 1,
                                                       memory_order_relaxed, memory_order_relaxed);
    timed = sentinel;
  }
  int woken = 1;
  if (!atomic_load_explicit(&p->stop, memory_order_seq_cst) && !work_visible(p) &&
      !(g && group_done(g))) {
    struct timespec ts = {0, GR__SLEEP_MS * 1000000L};
    uint64_t t0 = gr__mono_ns();
    long r = syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, e, timed ? &ts : NULL, NULL, 0);
    woken = !(r != 0 && errno == ETIMEDOUT);
    uint64_t dt = gr__mono_ns() - t0;
    if (s) {
      counter_bump(&s->nsleeps, 1);
      counter_bump(&s->idle_ns, dt);
    } else {
      atomic_fetch_add_explicit(&p->ext_sleeps, 1, memory_order_relaxed);
      atomic_fetch_add_explicit(&p->ext_idle_ns, dt, memory_order_relaxed);
    }
  }
  if (sentinel) atomic_store_explicit(&p->sentinel, 0, memory_order_relaxed);
  atomic_fetch_sub_explicit(klass, 1, memory_order_seq_cst);
  atomic_fetch_sub_explicit(&p->nsleeping, 1, memory_order_seq_cst);
  atomic_store_explicit(&p->waking, 0, memory_order_relaxed);
  return woken;
}

/* Run tasks (own deque first, then elsewhere) until g has no pending task. Never blocks for long:
 * when there is nothing to run it sleeps only until work appears or g completes. */
static void help_wait(gr_pool *p, gr__slot *s, gr_taskgroup *g) {
  uint64_t local_rng = (uint64_t)(uintptr_t)g | 1;
  uint64_t *rng = s ? &s->rng : &local_rng;
  unsigned idle = 0;
  int woke = 0;
  while (!group_done(g)) {
    gr__task *t = s ? pop_own(p, s) : NULL;
    if (!t) t = steal_one(p, s, rng);
    if (t) {
      /* As in gr__pool_worker_main: the wake-up in flight may have been ours; pass it on. */
      if (GR__UNLIKELY(woke)) {
        woke = 0;
        notify_work(p, 1);
      }
      run_task(p, s, t);
      idle = 0;
    } else if (idle < GR__SPIN_ROUNDS) {
      idle++;
      cpu_relax();
    } else if (idle < GR__SPIN_ROUNDS + GR__YIELD_ROUNDS) {
      idle++;
      sched_yield();
    } else {
      /* Woken or timed out: either way, if work turns up now, pass a wake-up on. */
      idle = idle_sleep(p, s, g) ? GR__SPIN_ROUNDS : idle;
      woke = 1;
    }
  }
  /* Woken (perhaps by a spawn's wake-one) but leaving because g completed: the wake-up may have
   * been meant for work that is still queued, and idle workers do not time out; pass it on. */
  if (GR__UNLIKELY(woke) && work_visible(p)) notify_work(p, 1);
}

void *gr__pool_worker_main(void *arg) {
  gr__slot *s = arg;
  gr_pool *p = s->pool;
  tl_slot = s;
  tl_worker_id = (int)s->index;
  stack_bounds_init();
  unsigned idle = 0;
  int woke = 0;
  for (;;) {
    gr__task *t = pop_own(p, s);
    if (!t) t = steal_one(p, s, &s->rng);
    if (t) {
      /* Just woken and found work: there may be more for the other sleepers (one wake-up is in
       * flight at a time, see notify_work). */
      if (woke) {
        woke = 0;
        notify_work(p, 1);
      }
      run_task(p, s, t);
      idle = 0;
      continue;
    }
    if (atomic_load_explicit(&p->stop, memory_order_acquire)) break;
    if (idle < GR__SPIN_ROUNDS) {
      idle++;
      cpu_relax();
    } else if (idle < GR__SPIN_ROUNDS + GR__YIELD_ROUNDS) {
      idle++;
      sched_yield();
    } else {
      /* Woken: spin again briefly (work tends to come in bursts); timed out: straight back.
       * Either way, work found next passes a wake-up on (the sentinel's timeout is the safety
       * net for a wake-up that went to a thread that found the work gone). */
      idle = idle_sleep(p, s, NULL) ? GR__SPIN_ROUNDS / 2 : idle;
      woke = 1;
    }
  }
  tl_slot = NULL;
  tl_worker_id = -1;
  return NULL;
}

/* ---- spawning ---------------------------------------------------------------------------- */

static gr_status spawn_external(gr_pool *p, gr_taskgroup *g, int prio, uint8_t kind,
                                void (*fn)(void *), void *arg, size_t lo, size_t hi,
                                const char *call) {
  if (!gr__pool_registry_has(p))
    return gr__fail(GR_ERR_INVALID, call, "group %p belongs to pool %p, which was destroyed",
                    (void *)g, (void *)p);
  if (p->priorities < 2) prio = GR_PRIO_NORMAL;
  gr__task *t = aligned_alloc(GR__CACHE_LINE, sizeof *t);
  if (!t) return gr__fail(GR_ERR_NOMEM, call, "out of memory for a task descriptor");
  *t = (gr__task){.fn = fn, .arg = arg, .group = g, .next = NULL, .lo = lo, .hi = hi,
                  .owner = GR__TASK_HEAP, .prio = (uint8_t)prio, .kind = kind, .local = 0};
  __atomic_add_fetch(&g->pending, 1, __ATOMIC_RELAXED);
  pthread_mutex_lock(&p->inject_lock);
  if (p->inj_tail[prio])
    p->inj_tail[prio]->next = t;
  else
    p->inj_head[prio] = t;
  p->inj_tail[prio] = t;
  atomic_fetch_add_explicit(&p->ext_spawned, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&p->ninject, 1, memory_order_seq_cst);
  pthread_mutex_unlock(&p->inject_lock);
  if (atomic_load_explicit(&p->nsleeping, memory_order_seq_cst) > 0) wake_one(p);
  return GR_OK;
}

static inline gr_status spawn_common(gr_pool *p, gr_taskgroup *g, int prio, uint8_t kind,
                                     void (*fn)(void *), void *arg, size_t lo, size_t hi,
                                     const char *call) {
  gr__slot *s = tl_slot;
  if (GR__UNLIKELY(s == NULL || s->pool != p))
    return spawn_external(p, g, prio, kind, fn, arg, lo, hi, call);
  uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
  if (GR__UNLIKELY(sp < tl_stack_floor)) return stack_exhausted(call, sp);
  gr__task *t = task_alloc(s);
  if (GR__UNLIKELY(!t)) return gr__fail(GR_ERR_NOMEM, call, "out of memory for a task descriptor");
  t->fn = fn;
  t->arg = arg;
  t->group = g;
  t->lo = lo;
  t->hi = hi;
  t->prio = (uint8_t)prio;
  t->kind = kind;
  /* The owner counts its own spawns without a locked instruction; see group_done. */
  t->local = g->owner == (void *)s;
  if (t->local)
    __atomic_store_n(&g->spawned_local, __atomic_load_n(&g->spawned_local, __ATOMIC_RELAXED) + 1,
                     __ATOMIC_RELAXED);
  else
    __atomic_add_fetch(&g->pending, 1, __ATOMIC_RELAXED);
  if (prio == GR_PRIO_HIGH) atomic_fetch_add_explicit(&p->nhigh, 1, memory_order_relaxed);
  /* Counted before the push (whose release publishes it): a thief may run and count the task's
   * finish as soon as it is in the deque, and gr__pool_quiescent relies on every finish it sums
   * having its spawn counted already. Holder-only counter: no locked instruction. */
  counter_bump(&s->nspawned, 1);
  int was_empty = gr__deque_push(&s->dq[prio], t);
  if (GR__UNLIKELY(was_empty < 0)) {
    /* Never pushed, so never finished: undo (a reader only ever over-counts spawns). */
    atomic_store_explicit(&s->nspawned,
                          atomic_load_explicit(&s->nspawned, memory_order_relaxed) - 1,
                          memory_order_release);
    if (prio == GR_PRIO_HIGH) atomic_fetch_sub_explicit(&p->nhigh, 1, memory_order_relaxed);
    if (t->local)
      __atomic_store_n(&g->spawned_local, g->spawned_local - 1, __ATOMIC_RELAXED);
    else
      __atomic_sub_fetch(&g->pending, 1, __ATOMIC_RELAXED);
    task_free(p, s, t);
    return gr__fail(GR_ERR_NOMEM, call, "out of memory growing the deque");
  }
  notify_work(p, was_empty);
  return GR_OK;
}

static inline gr_status check_group(gr_taskgroup *g, const char *call) {
  if (GR__UNLIKELY(g == NULL)) return gr__fail(GR_ERR_INVALID, call, "group is NULL");
  if (GR__UNLIKELY(g->magic != GR__GROUP_MAGIC))
    return gr__fail(GR_ERR_INVALID, call, "group %p was not initialised with gr_taskgroup_init",
                    (void *)g);
  if (GR__UNLIKELY(g->pool == NULL))
    return gr__fail(GR_ERR_INVALID, call, "group %p has no pool (gr_taskgroup_init with NULL)",
                    (void *)g);
  return GR_OK;
}

GR_API gr_status gr_spawn_prio(gr_taskgroup *g, int priority, void (*fn)(void *), void *arg) {
  gr_status st = check_group(g, "gr_spawn");
  if (GR__UNLIKELY(st != GR_OK)) return st;
  if (GR__UNLIKELY(fn == NULL)) return gr__fail(GR_ERR_INVALID, "gr_spawn", "fn is NULL");
  if (GR__UNLIKELY(priority != GR_PRIO_NORMAL && priority != GR_PRIO_HIGH))
    return gr__fail(GR_ERR_INVALID, "gr_spawn", "priority %d is not GR_PRIO_NORMAL (0) or "
                    "GR_PRIO_HIGH (1)", priority);
  gr_pool *p = g->pool;
  /* A worker's own pool is alive; read p->priorities only there (spawn_external checks first). */
  gr__slot *s = tl_slot;
  if (s != NULL && s->pool == p && p->priorities < 2) priority = GR_PRIO_NORMAL;
  return spawn_common(p, g, priority, KIND_FN, fn, arg, 0, 0, "gr_spawn");
}

GR_API gr_status gr_spawn(gr_taskgroup *g, void (*fn)(void *arg), void *arg) {
  gr_status st = check_group(g, "gr_spawn");
  if (GR__UNLIKELY(st != GR_OK)) return st;
  if (GR__UNLIKELY(fn == NULL)) return gr__fail(GR_ERR_INVALID, "gr_spawn", "fn is NULL");
  return spawn_common(g->pool, g, GR_PRIO_NORMAL, KIND_FN, fn, arg, 0, 0, "gr_spawn");
}

/* ---- groups ------------------------------------------------------------------------------ */

GR_API void gr_taskgroup_init(gr_taskgroup *g, gr_pool *p) {
  if (!g) return;
  g->pool = p;
  /* Only a worker slot: an external slot may pass to another thread once its wait returns. */
  gr__slot *s = tl_slot;
  g->owner = s != NULL && s->pool == p && s->is_worker ? (void *)s : NULL;
  g->spawned_local = 0;
  g->done_local = 0;
  g->done_remote = 0;
  g->pending = 0;
  g->cancelled = 0;
  g->magic = GR__GROUP_MAGIC;
}

GR_API void gr_taskgroup_cancel(gr_taskgroup *g) {
  if (g && g->magic == GR__GROUP_MAGIC) __atomic_store_n(&g->cancelled, 1, __ATOMIC_RELAXED);
}

static gr__slot *ext_claim(gr_pool *p) {
  for (int i = 0; i < GR__EXT_SLOTS; i++) {
    gr__slot *s = &p->slots[p->nworkers + i];
    int zero = 0;
    if (atomic_load_explicit(&s->claimed, memory_order_relaxed) == 0 &&
        atomic_compare_exchange_strong_explicit(&s->claimed, &zero, 1, memory_order_acquire,
                                                memory_order_relaxed)) {
      int hw = atomic_load_explicit(&p->ext_hw, memory_order_relaxed);
      while (hw < i + 1 &&
             !atomic_compare_exchange_weak_explicit(&p->ext_hw, &hw, i + 1, memory_order_relaxed,
                                                    memory_order_relaxed)) {
      }
      return s;
    }
  }
  return NULL;
}

static void ext_release(gr_pool *p, gr__slot *s) {
  /* Tasks spawned into a group that is not waited for here can be left behind: workers steal them
   * from the released slot (it stays in the victim range); make sure one is awake to look. */
  int leftover = gr__deque_nonempty(&s->dq[0]) || gr__deque_nonempty(&s->dq[1]);
  atomic_store_explicit(&s->claimed, 0, memory_order_release);
  if (leftover && atomic_fetch_add_explicit(&p->nsleeping, 0, memory_order_seq_cst) > 0)
    wake_one(p); /* it passes the wake-up on when there is more */
}

GR_API gr_status gr_taskgroup_wait(gr_taskgroup *g) {
  GR_CHECK(check_group(g, "gr_taskgroup_wait"));
  gr_pool *p = g->pool;
  gr__slot *s = tl_slot;
  if (s != NULL && s->pool == p) {
    /* Fast path: pop and run own tasks (usually g's) until g is done or the deque is empty. */
    while (!group_done(g)) {
      gr__task *t = pop_own(p, s);
      if (!t) {
        help_wait(p, s, g);
        break;
      }
      run_task(p, s, t);
    }
  } else {
    /* A thread outside this pool: borrow an external slot (or help without one). */
    if (!gr__pool_registry_has(p))
      return gr__fail(GR_ERR_INVALID, "gr_taskgroup_wait",
                      "group %p belongs to pool %p, which was destroyed", (void *)g, (void *)p);
    if (!group_done(g)) {
      stack_bounds_init();
      gr__slot *ext = ext_claim(p);
      tl_slot = ext;
      help_wait(p, ext, g);
      tl_slot = s;
      if (ext) ext_release(p, ext);
    }
  }
  if (GR__UNLIKELY(__atomic_load_n(&g->cancelled, __ATOMIC_RELAXED)))
    __atomic_store_n(&g->cancelled, 0, __ATOMIC_RELAXED);
  return GR_OK;
}

/* ---- parallel_for ------------------------------------------------------------------------ */

typedef struct {
  void (*body)(size_t lo, size_t hi, void *arg);
  void *arg;
  size_t grain;
} pfor_ctx;

/* Split [lo, hi) in halves, spawning the upper half, until it is at most grain long. */
static void pfor_range(gr_pool *p, gr_taskgroup *g, void *ctxp, size_t lo, size_t hi) {
  pfor_ctx *c = ctxp;
  while (hi - lo > c->grain) {
    size_t mid = lo + (hi - lo) / 2;
    if (spawn_common(p, g, GR_PRIO_NORMAL, KIND_RANGE, NULL, c, mid, hi, "gr_parallel_for") !=
        GR_OK) {
      pfor_range(p, g, ctxp, mid, hi); /* out of memory: do it here */
    }
    hi = mid;
  }
  c->body(lo, hi, c->arg);
}

GR_API gr_status gr_parallel_for(gr_pool *p, size_t begin, size_t end, size_t grain,
                                 void (*body)(size_t lo, size_t hi, void *arg), void *arg) {
  if (!p) return gr__fail(GR_ERR_INVALID, "gr_parallel_for", "pool is NULL");
  if (!body) return gr__fail(GR_ERR_INVALID, "gr_parallel_for", "body is NULL");
  if (begin > end)
    return gr__fail(GR_ERR_INVALID, "gr_parallel_for", "begin %zu is after end %zu", begin, end);
  gr__slot *s = tl_slot;
  if ((s == NULL || s->pool != p) && !gr__pool_registry_has(p))
    return gr__fail(GR_ERR_INVALID, "gr_parallel_for", "pool %p is not a live pool", (void *)p);
  if (p->magic != GR__POOL_MAGIC)
    return gr__fail(GR_ERR_INVALID, "gr_parallel_for", "pool %p is not a live pool", (void *)p);
  if (begin == end) return GR_OK;
  size_t n = end - begin;
  if (grain == 0) {
    grain = n / (8 * (size_t)p->nworkers);
    if (grain == 0) grain = 1;
  }
  pfor_ctx c = {body, arg, grain};
  gr_taskgroup g;
  gr_taskgroup_init(&g, p);
  gr_status st = spawn_common(p, &g, GR_PRIO_NORMAL, KIND_RANGE, NULL, &c, begin, end,
                              "gr_parallel_for");
  if (st != GR_OK) return st;
  return gr_taskgroup_wait(&g);
}

GR_API int gr_worker_id(void) { return tl_worker_id; }


