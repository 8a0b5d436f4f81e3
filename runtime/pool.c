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
 * `epoch` with a timeout. Announcing sleep is nsleeping++ (seq_cst) followed by a re-check for
 * work; a spawner reads nsleeping after its push and wakes one sleeper. That push-side check is
 * relaxed on purpose (a fence per spawn would cost ~10 ns on the hot path): in the rare interleaving
 * where both sides miss each other the sleeper stays asleep until its timeout (GR__SLEEP_MS), which
 * costs parallelism, never progress, because the spawning worker runs its own deque before it
 * idles. Wake-ups that progress depends on are sequentially consistent on both sides: injection
 * (ninject / nsleeping), group completion (pending / nwaitsleep), and shutdown (stop + epoch). */
#include "gr_pool.h"

#include "gr_deque.h"
#include "gr_error.h"
#include "gr_log.h"

#include <errno.h>
#include <hwloc.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define GR__EXT_SLOTS 8
#define GR__MAX_THREADS 4096
#define GR__POOL_MAGIC 0x67725031u
#define GR__GROUP_MAGIC 0x67725447u
#define GR__TASK_HEAP UINT32_MAX
#define GR__CHUNK_TASKS 64
#define GR__SPIN_ROUNDS 128  /* steal attempts with a pause between, before yielding */
#define GR__YIELD_ROUNDS 32  /* steal attempts with sched_yield between, before sleeping */
#define GR__SLEEP_MS 50      /* futex timeout: bounds the cost of a missed (relaxed) wake-up */

#if defined(__GNUC__)
#define GR__LIKELY(x) __builtin_expect(!!(x), 1)
#define GR__UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define GR__LIKELY(x) (x)
#define GR__UNLIKELY(x) (x)
#endif

enum { KIND_FN = 0, KIND_RANGE = 1 };

typedef struct gr__task {
  alignas(GR__CACHE_LINE) void (*fn)(void *); /* one line each: no false sharing between thieves */
  void *arg;
  gr_taskgroup *group;
  struct gr__task *next; /* free lists and the injection queue */
  size_t lo, hi;         /* KIND_RANGE: the sub-range of a parallel_for */
  uint32_t owner;        /* index of the slot whose free list it belongs to, or GR__TASK_HEAP */
  uint8_t prio;
  uint8_t kind;
} gr__task;

typedef struct gr__chunk {
  struct gr__chunk *next;
  gr__task tasks[GR__CHUNK_TASKS];
} gr__chunk;

typedef struct gr__slot {
  gr__deque dq[2]; /* [GR_PRIO_NORMAL], [GR_PRIO_HIGH] */
  /* Holder only. */
  alignas(GR__CACHE_LINE) gr__task *free_local;
  gr__chunk *chunks;
  uint64_t rng;
  gr_pool *pool;
  uint32_t index;
  int is_worker;
  pthread_t thread;
  /* Written by the holder only (load + 1, store), read by anyone. */
  _Atomic uint64_t nspawned, nfinished, nsteals, nsleeps, idle_ns;
  /* Other threads give back this slot's descriptors here. */
  alignas(GR__CACHE_LINE) _Atomic(gr__task *) free_remote;
  _Atomic int claimed; /* external slots: 1 while a waiting thread holds it */
} gr__slot;

struct gr_pool {
  uint32_t magic;
  int nworkers;
  int priorities;
  int nstarted;
  gr__slot *slots; /* nworkers + GR__EXT_SLOTS */
  struct gr_pool *reg_next;
  /* Written on sleep transitions only; read by every spawn. */
  alignas(GR__CACHE_LINE) _Atomic uint32_t epoch; /* futex word */
  _Atomic int nsleeping;
  _Atomic int nwaitsleep; /* sleepers that wait for a group (woken when any group completes) */
  _Atomic int waking;     /* a wake-one is in flight: later spawns need not make the syscall */
  _Atomic int stop;
  _Atomic int ext_hw; /* external slots ever claimed: thieves look at [0, nworkers + ext_hw) */
  alignas(GR__CACHE_LINE) _Atomic int64_t nhigh; /* high-priority tasks queued in deques */
  alignas(GR__CACHE_LINE) _Atomic int ninject;   /* tasks in the injection queue */
  _Atomic uint64_t ext_spawned, ext_finished, ext_sleeps, ext_idle_ns;
  pthread_mutex_t inject_lock;
  gr__task *inj_head[2], *inj_tail[2];
};

static _Thread_local gr__slot *tl_slot;
static _Thread_local int tl_worker_id = -1;

/* Live pools, so that a call on a destroyed pool from outside it is an error, not a crash. Only
 * the external (cold) paths look here; a worker's own pool is alive by construction. */
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static gr_pool *registry;

static void registry_add(gr_pool *p) {
  pthread_mutex_lock(&registry_lock);
  p->reg_next = registry;
  registry = p;
  pthread_mutex_unlock(&registry_lock);
}

static void registry_remove(gr_pool *p) {
  pthread_mutex_lock(&registry_lock);
  for (gr_pool **q = &registry; *q; q = &(*q)->reg_next)
    if (*q == p) {
      *q = p->reg_next;
      break;
    }
  pthread_mutex_unlock(&registry_lock);
}

static int registry_has(const gr_pool *p) {
  int found = 0;
  pthread_mutex_lock(&registry_lock);
  for (gr_pool *q = registry; q; q = q->reg_next)
    if (q == p) found = 1;
  pthread_mutex_unlock(&registry_lock);
  return found;
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

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void wake(gr_pool *p, int n) {
  atomic_fetch_add_explicit(&p->epoch, 1, memory_order_seq_cst);
  syscall(SYS_futex, &p->epoch, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

void gr__pool_wake_all(gr_pool *p) { wake(p, INT_MAX); }

/* After a push to a deque: wake one sleeper if there is one and no wake-up is already on its way. */
static inline void notify_work(gr_pool *p) {
  if (GR__UNLIKELY(atomic_load_explicit(&p->nsleeping, memory_order_relaxed) > 0) &&
      !atomic_load_explicit(&p->waking, memory_order_relaxed) &&
      !atomic_exchange_explicit(&p->waking, 1, memory_order_relaxed))
    wake(p, 1);
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
  if (atomic_load_explicit(&p->nhigh, memory_order_relaxed) > 0 &&
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

static void run_task(gr_pool *p, gr__slot *s, gr__task *t) {
  gr_taskgroup *g = t->group;
  if (!__atomic_load_n(&g->cancelled, __ATOMIC_RELAXED)) {
    if (t->kind == KIND_FN)
      t->fn(t->arg);
    else
      pfor_range(p, g, t->arg, t->lo, t->hi);
  }
  task_free(p, s, t);
  /* The last touch of g: its owner may return from the wait and drop it right after. */
  if (__atomic_sub_fetch(&g->pending, 1, __ATOMIC_SEQ_CST) == 0 &&
      atomic_load_explicit(&p->nwaitsleep, memory_order_seq_cst) > 0)
    wake(p, INT_MAX);
  if (s)
    counter_bump(&s->nfinished, 1);
  else
    atomic_fetch_add_explicit(&p->ext_finished, 1, memory_order_release);
}

/* Sleep on the futex until work appears, the group g (if any) completes, shutdown, or timeout.
 * Returns 1 when woken (or the wait was pointless), 0 on timeout. */
static int idle_sleep(gr_pool *p, gr__slot *s, gr_taskgroup *g) {
  uint32_t e = atomic_load_explicit(&p->epoch, memory_order_acquire);
  atomic_fetch_add_explicit(&p->nsleeping, 1, memory_order_seq_cst);
  if (g) atomic_fetch_add_explicit(&p->nwaitsleep, 1, memory_order_seq_cst);
  int woken = 1;
  if (!atomic_load_explicit(&p->stop, memory_order_seq_cst) && !work_visible(p) &&
      !(g && __atomic_load_n(&g->pending, __ATOMIC_SEQ_CST) == 0)) {
    struct timespec ts = {0, GR__SLEEP_MS * 1000000L};
    uint64_t t0 = now_ns();
    long r = syscall(SYS_futex, &p->epoch, FUTEX_WAIT_PRIVATE, e, &ts, NULL, 0);
    woken = !(r != 0 && errno == ETIMEDOUT);
    uint64_t dt = now_ns() - t0;
    if (s) {
      counter_bump(&s->nsleeps, 1);
      counter_bump(&s->idle_ns, dt);
    } else {
      atomic_fetch_add_explicit(&p->ext_sleeps, 1, memory_order_relaxed);
      atomic_fetch_add_explicit(&p->ext_idle_ns, dt, memory_order_relaxed);
    }
  }
  if (g) atomic_fetch_sub_explicit(&p->nwaitsleep, 1, memory_order_seq_cst);
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
  while (__atomic_load_n(&g->pending, __ATOMIC_ACQUIRE) != 0) {
    gr__task *t = s ? pop_own(p, s) : NULL;
    if (!t) t = steal_one(p, s, rng);
    if (t) {
      run_task(p, s, t);
      idle = 0;
    } else if (idle < GR__SPIN_ROUNDS) {
      idle++;
      cpu_relax();
    } else if (idle < GR__SPIN_ROUNDS + GR__YIELD_ROUNDS) {
      idle++;
      sched_yield();
    } else {
      idle = idle_sleep(p, s, g) ? GR__SPIN_ROUNDS : idle;
    }
  }
}

static void *worker_main(void *arg) {
  gr__slot *s = arg;
  gr_pool *p = s->pool;
  tl_slot = s;
  tl_worker_id = (int)s->index;
  unsigned idle = 0;
  for (;;) {
    gr__task *t = pop_own(p, s);
    if (!t) t = steal_one(p, s, &s->rng);
    if (t) {
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
      /* Woken: spin again briefly (work tends to come in bursts); timed out: straight back. */
      idle = idle_sleep(p, s, NULL) ? GR__SPIN_ROUNDS / 2 : idle;
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
  if (!registry_has(p))
    return gr__fail(GR_ERR_INVALID, call, "group %p belongs to pool %p, which was destroyed",
                    (void *)g, (void *)p);
  if (p->priorities < 2) prio = GR_PRIO_NORMAL;
  gr__task *t = aligned_alloc(GR__CACHE_LINE, sizeof *t);
  if (!t) return gr__fail(GR_ERR_NOMEM, call, "out of memory for a task descriptor");
  *t = (gr__task){.fn = fn, .arg = arg, .group = g, .next = NULL, .lo = lo, .hi = hi,
                  .owner = GR__TASK_HEAP, .prio = (uint8_t)prio, .kind = kind};
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
  if (atomic_load_explicit(&p->nsleeping, memory_order_seq_cst) > 0) wake(p, 1);
  return GR_OK;
}

static inline gr_status spawn_common(gr_pool *p, gr_taskgroup *g, int prio, uint8_t kind,
                                     void (*fn)(void *), void *arg, size_t lo, size_t hi,
                                     const char *call) {
  gr__slot *s = tl_slot;
  if (GR__UNLIKELY(s == NULL || s->pool != p))
    return spawn_external(p, g, prio, kind, fn, arg, lo, hi, call);
  gr__task *t = task_alloc(s);
  if (GR__UNLIKELY(!t)) return gr__fail(GR_ERR_NOMEM, call, "out of memory for a task descriptor");
  t->fn = fn;
  t->arg = arg;
  t->group = g;
  t->lo = lo;
  t->hi = hi;
  t->prio = (uint8_t)prio;
  t->kind = kind;
  __atomic_add_fetch(&g->pending, 1, __ATOMIC_RELAXED);
  if (prio == GR_PRIO_HIGH) atomic_fetch_add_explicit(&p->nhigh, 1, memory_order_relaxed);
  if (GR__UNLIKELY(gr__deque_push(&s->dq[prio], t) != 0)) {
    if (prio == GR_PRIO_HIGH) atomic_fetch_sub_explicit(&p->nhigh, 1, memory_order_relaxed);
    __atomic_sub_fetch(&g->pending, 1, __ATOMIC_RELAXED);
    task_free(p, s, t);
    return gr__fail(GR_ERR_NOMEM, call, "out of memory growing the deque");
  }
  counter_bump(&s->nspawned, 1);
  notify_work(p);
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
  if (leftover) wake(p, INT_MAX);
}

GR_API gr_status gr_taskgroup_wait(gr_taskgroup *g) {
  GR_CHECK(check_group(g, "gr_taskgroup_wait"));
  gr_pool *p = g->pool;
  gr__slot *s = tl_slot;
  if (s != NULL && s->pool == p) {
    if (__atomic_load_n(&g->pending, __ATOMIC_ACQUIRE) != 0) help_wait(p, s, g);
  } else {
    /* A thread outside this pool: borrow an external slot (or help without one). */
    if (!registry_has(p))
      return gr__fail(GR_ERR_INVALID, "gr_taskgroup_wait",
                      "group %p belongs to pool %p, which was destroyed", (void *)g, (void *)p);
    if (__atomic_load_n(&g->pending, __ATOMIC_ACQUIRE) != 0) {
      gr__slot *ext = ext_claim(p);
      tl_slot = ext;
      help_wait(p, ext, g);
      tl_slot = s;
      if (ext) ext_release(p, ext);
    }
  }
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
  if ((s == NULL || s->pool != p) && !registry_has(p))
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

int gr__pool_is_worker_of(const gr_pool *p) {
  return tl_slot != NULL && tl_slot->pool == p && tl_slot->is_worker;
}

int gr__pool_sleeping(gr_pool *p) {
  return atomic_load_explicit(&p->nsleeping, memory_order_relaxed);
}

/* ---- statistics and quiescence ----------------------------------------------------------- */

static uint64_t sum_spawned(gr_pool *p) {
  uint64_t n = atomic_load_explicit(&p->ext_spawned, memory_order_seq_cst);
  for (int i = 0; i < p->nworkers + GR__EXT_SLOTS; i++)
    n += atomic_load_explicit(&p->slots[i].nspawned, memory_order_seq_cst);
  return n;
}

static uint64_t sum_finished(gr_pool *p) {
  uint64_t n = atomic_load_explicit(&p->ext_finished, memory_order_seq_cst);
  for (int i = 0; i < p->nworkers + GR__EXT_SLOTS; i++)
    n += atomic_load_explicit(&p->slots[i].nfinished, memory_order_seq_cst);
  return n;
}

/* Double collect: every counter is monotonic and a task's spawn is counted before its finish, so
 * if the spawn sums before and after agree, the finish sum read in between counts only tasks
 * included in them, and equality means all of them finished. */
int gr__pool_quiescent(gr_pool *p) {
  uint64_t s1 = sum_spawned(p);
  uint64_t f = sum_finished(p);
  uint64_t s2 = sum_spawned(p);
  return s1 == s2 && f == s1;
}

void gr__pool_get_stats(gr_pool *p, gr__pool_stats *out) {
  memset(out, 0, sizeof *out);
  out->spawned = sum_spawned(p);
  out->run = sum_finished(p);
  out->injected = atomic_load_explicit(&p->ext_spawned, memory_order_relaxed);
  out->sleeps = atomic_load_explicit(&p->ext_sleeps, memory_order_relaxed);
  out->idle_ns = atomic_load_explicit(&p->ext_idle_ns, memory_order_relaxed);
  for (int i = 0; i < p->nworkers + GR__EXT_SLOTS; i++) {
    gr__slot *s = &p->slots[i];
    out->steals += atomic_load_explicit(&s->nsteals, memory_order_relaxed);
    out->sleeps += atomic_load_explicit(&s->nsleeps, memory_order_relaxed);
    out->idle_ns += atomic_load_explicit(&s->idle_ns, memory_order_relaxed);
  }
}

/* ---- creation and destruction ------------------------------------------------------------ */

GR_API void gr_pool_config_init(gr_pool_config *cfg) {
  if (!cfg) return;
  cfg->nthreads = 0;
  cfg->pin = -1;
  cfg->priorities = 2;
}

GR_API int gr_pool_nthreads(const gr_pool *p) { return p ? p->nworkers : -1; }

/* The cores (as cpusets restricted to the allowed PUs) of the process's allowed cpuset. */
typedef struct {
  hwloc_topology_t topo;
  hwloc_bitmap_t *core_sets;
  int ncores;
} cpu_layout;

static void layout_free(cpu_layout *l) {
  for (int i = 0; i < l->ncores; i++) hwloc_bitmap_free(l->core_sets[i]);
  free(l->core_sets);
  if (l->topo) hwloc_topology_destroy(l->topo);
  memset(l, 0, sizeof *l);
}

static int layout_load(cpu_layout *l) {
  memset(l, 0, sizeof *l);
  if (hwloc_topology_init(&l->topo) != 0) {
    l->topo = NULL;
    return -1;
  }
  if (hwloc_topology_load(l->topo) != 0) goto fail;
  hwloc_bitmap_t allowed = hwloc_bitmap_alloc();
  if (!allowed) goto fail;
  if (hwloc_get_cpubind(l->topo, allowed, HWLOC_CPUBIND_PROCESS) != 0 &&
      hwloc_get_cpubind(l->topo, allowed, HWLOC_CPUBIND_THREAD) != 0)
    hwloc_bitmap_copy(allowed, hwloc_topology_get_allowed_cpuset(l->topo));
  hwloc_bitmap_and(allowed, allowed, hwloc_topology_get_allowed_cpuset(l->topo));
  int total = hwloc_get_nbobjs_by_type(l->topo, HWLOC_OBJ_CORE);
  hwloc_obj_type_t type = HWLOC_OBJ_CORE;
  if (total <= 0) { /* no core level: count PUs */
    type = HWLOC_OBJ_PU;
    total = hwloc_get_nbobjs_by_type(l->topo, HWLOC_OBJ_PU);
  }
  l->core_sets = calloc(total > 0 ? (size_t)total : 1, sizeof *l->core_sets);
  if (!l->core_sets) {
    hwloc_bitmap_free(allowed);
    goto fail;
  }
  for (int i = 0; i < total; i++) {
    hwloc_obj_t o = hwloc_get_obj_by_type(l->topo, type, (unsigned)i);
    if (!o || !o->cpuset || !hwloc_bitmap_intersects(o->cpuset, allowed)) continue;
    hwloc_bitmap_t set = hwloc_bitmap_dup(o->cpuset);
    if (!set) continue;
    hwloc_bitmap_and(set, set, allowed);
    l->core_sets[l->ncores++] = set;
  }
  hwloc_bitmap_free(allowed);
  return l->ncores > 0 ? 0 : -1;
fail:
  layout_free(l);
  return -1;
}

static void pool_free(gr_pool *p) {
  if (p->slots) {
    for (int i = 0; i < p->nworkers + GR__EXT_SLOTS; i++) {
      gr__slot *s = &p->slots[i];
      for (int d = 0; d < 2; d++)
        if (atomic_load_explicit(&s->dq[d].array, memory_order_relaxed)) gr__deque_fini(&s->dq[d]);
      for (gr__chunk *c = s->chunks, *next; c; c = next) {
        next = c->next;
        free(c);
      }
    }
    free(p->slots);
  }
  pthread_mutex_destroy(&p->inject_lock);
  p->magic = 0;
  free(p);
}

static void stop_workers(gr_pool *p) {
  atomic_store_explicit(&p->stop, 1, memory_order_seq_cst);
  wake(p, INT_MAX);
  for (int i = 0; i < p->nstarted; i++) pthread_join(p->slots[i].thread, NULL);
  p->nstarted = 0;
}

GR_API gr_status gr_pool_create(const gr_pool_config *cfg, gr_pool **out) {
  static const char *call = "gr_pool_create";
  if (!out) return gr__fail(GR_ERR_INVALID, call, "out is NULL");
  *out = NULL;
  gr_pool_config c;
  gr_pool_config_init(&c);
  if (cfg) c = *cfg;
  if (c.nthreads < 0 || c.nthreads > GR__MAX_THREADS)
    return gr__fail(GR_ERR_INVALID, call, "nthreads %d is outside [0, %d]", c.nthreads,
                    GR__MAX_THREADS);
  if (c.pin < -1 || c.pin > 1)
    return gr__fail(GR_ERR_INVALID, call, "pin %d is not -1 (default), 0 or 1", c.pin);
  if (c.priorities < 1 || c.priorities > 2)
    return gr__fail(GR_ERR_INVALID, call, "priorities %d is not 1 or 2", c.priorities);
  if (c.pin == -1) {
    const char *lr = getenv("GPURUN_LOCAL_RANK");
    c.pin = lr && *lr ? 1 : 0;
  }

  cpu_layout l;
  int have_layout = layout_load(&l) == 0;
  if (!have_layout) {
    GR_LOG_ONCE(GR_LOG_WARN, "gr_pool_create: hwloc could not read the cpuset; %s",
                c.nthreads == 0 ? "using the online CPU count, not pinning" : "not pinning");
  }
  int nthreads = c.nthreads;
  if (nthreads == 0) {
    if (have_layout) {
      nthreads = l.ncores;
    } else {
      cpu_set_t cs;
      nthreads = sched_getaffinity(0, sizeof cs, &cs) == 0 ? CPU_COUNT(&cs) : 1;
      if (nthreads < 1) nthreads = 1;
    }
  }

  gr_pool *p = calloc(1, sizeof *p);
  if (!p) {
    if (have_layout) layout_free(&l);
    return gr__fail(GR_ERR_NOMEM, call, "out of memory for the pool");
  }
  p->magic = GR__POOL_MAGIC;
  p->nworkers = nthreads;
  p->priorities = c.priorities;
  pthread_mutex_init(&p->inject_lock, NULL);
  int nslots = nthreads + GR__EXT_SLOTS;
  p->slots = aligned_alloc(GR__CACHE_LINE, (size_t)nslots * sizeof(gr__slot));
  gr_status st = GR_OK;
  if (!p->slots) {
    st = gr__fail(GR_ERR_NOMEM, call, "out of memory for %d slots", nslots);
    goto fail;
  }
  memset(p->slots, 0, (size_t)nslots * sizeof(gr__slot));
  uint64_t seed = now_ns() ^ (uint64_t)(uintptr_t)p;
  for (int i = 0; i < nslots; i++) {
    gr__slot *s = &p->slots[i];
    s->pool = p;
    s->index = (uint32_t)i;
    s->is_worker = i < nthreads;
    s->rng = (seed + 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1)) | 1;
    for (int d = 0; d < 2; d++)
      if (gr__deque_init(&s->dq[d], 8) != 0) {
        st = gr__fail(GR_ERR_NOMEM, call, "out of memory for the deques");
        goto fail;
      }
  }
  for (int i = 0; i < nthreads; i++) {
    gr__slot *s = &p->slots[i];
    int rc = pthread_create(&s->thread, NULL, worker_main, s);
    if (rc != 0) {
      st = gr__fail(GR_ERR_SYSTEM, call, "pthread_create for worker %d of %d: %s", i, nthreads,
                    strerror(rc));
      goto fail;
    }
    p->nstarted++;
    char name[32];
    snprintf(name, sizeof name, "gpurun-w%d", i % 100000);
    name[15] = '\0'; /* the kernel's limit */
    pthread_setname_np(s->thread, name);
    if (c.pin && have_layout &&
        hwloc_set_thread_cpubind(l.topo, s->thread, l.core_sets[i % l.ncores], 0) != 0)
      GR_LOG_ONCE(GR_LOG_WARN, "gr_pool_create: could not pin worker %d: %s", i, strerror(errno));
  }
  if (have_layout) layout_free(&l);
  registry_add(p);
  GR_DEBUG("pool %p: %d workers, pin %d, %d priorities", (void *)p, nthreads, c.pin,
           c.priorities);
  *out = p;
  return GR_OK;
fail:
  if (have_layout) layout_free(&l);
  stop_workers(p);
  pool_free(p);
  return st;
}

static void wait_quiescent(gr_pool *p) {
  unsigned rounds = 0;
  while (!gr__pool_quiescent(p)) {
    if (++rounds < 64) {
      sched_yield();
    } else {
      struct timespec ts = {0, 200000};
      nanosleep(&ts, NULL);
    }
  }
}

GR_API gr_status gr_pool_destroy(gr_pool *p) {
  static const char *call = "gr_pool_destroy";
  if (!p) return gr__fail(GR_ERR_INVALID, call, "pool is NULL");
  if (tl_slot != NULL && tl_slot->pool == p)
    return gr__fail(GR_ERR_STATE, call, "called from a task of pool %p (it would wait for itself)",
                    (void *)p);
  if (!registry_has(p))
    return gr__fail(GR_ERR_INVALID, call, "pool %p is not a live pool (destroyed twice?)",
                    (void *)p);
  wait_quiescent(p);
  registry_remove(p); /* from here external spawns and waits on p fail */
  wait_quiescent(p);  /* anything that slipped in before the removal */
  stop_workers(p);
  pool_free(p);
  return GR_OK;
}
