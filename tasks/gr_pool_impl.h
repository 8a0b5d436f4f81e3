/* Internal to the task pool (pool.c: scheduling; pool_setup.c: creation, destruction, sizing,
 * statistics). Not for the rest of the runtime: that uses gr_pool.h. */
#ifndef GR_POOL_IMPL_H
#define GR_POOL_IMPL_H

#include "gr_clock.h"
#include "gr_deque.h"
#include "gr_pool.h"

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#define GR__EXT_SLOTS 8
#define GR__MAX_THREADS 4096
#define GR__POOL_MAGIC 0x67725031u
#define GR__GROUP_MAGIC 0x67725447u
#define GR__TASK_HEAP UINT32_MAX
#define GR__CHUNK_TASKS 64
#define GR__SPIN_ROUNDS 128  /* steal attempts with a pause between, before yielding */
#define GR__YIELD_ROUNDS 32  /* steal attempts with sched_yield between, before sleeping */
#define GR__STACK_RESERVE_MIN ((size_t)128 << 10) /* see the stack guard in pool.c */
#define GR__SLEEP_MS 50      /* futex timeout: a safety net; wake-ups that matter are not missed */

#if defined(__GNUC__)
#define GR__LIKELY(x) __builtin_expect(!!(x), 1)
#define GR__UNLIKELY(x) __builtin_expect(!!(x), 0)
#define GR__NOINLINE __attribute__((noinline, cold))
#else
#define GR__NOINLINE
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
  uint8_t local; /* counted in group->spawned_local (spawned by the group's owner) */
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
  int asym; /* deques in asymmetric-barrier mode (gr_deque.h) */
  gr__slot *slots; /* nworkers + GR__EXT_SLOTS */
  struct gr_pool *reg_next;
  size_t stack_size; /* of each worker */
  /* Written on sleep transitions only; read by every spawn. Two futex words, so that a group's
   * completion wakes the threads waiting for groups and never the idle workers. */
  alignas(GR__CACHE_LINE) _Atomic uint32_t epoch; /* futex word of idle workers */
  _Atomic uint32_t wepoch; /* futex word of waiters (threads in gr_taskgroup_wait) */
  _Atomic int nsleeping;   /* all sleepers, idle workers and waiters */
  _Atomic int nidle;       /* idle workers asleep (on epoch) */
  _Atomic int nwaitsleep;  /* waiters asleep (on wepoch; woken when any group completes) */
  _Atomic int waking;      /* a wake-one is in flight: later spawns need not make the syscall */
  _Atomic int sentinel;    /* an idle worker sleeps with the safety-net timeout; the others don't */
  _Atomic int stop;
  _Atomic int ext_hw; /* external slots ever claimed: thieves look at [0, nworkers + ext_hw) */
  alignas(GR__CACHE_LINE) _Atomic int64_t nhigh; /* high-priority tasks queued in deques */
  alignas(GR__CACHE_LINE) _Atomic int ninject;   /* tasks in the injection queue */
  _Atomic uint64_t ext_spawned, ext_finished, ext_sleeps, ext_idle_ns;
  pthread_mutex_t inject_lock;
  gr__task *inj_head[2], *inj_tail[2];
};

/* The slot the calling thread holds (a worker's own, or an external slot borrowed while waiting),
 * in whichever pool; NULL for a thread that holds none. */
extern _Thread_local gr__slot *gr__tl_slot;

void *gr__pool_worker_main(void *slot);
/* Whether p is a live pool (created and not destroyed). Takes a lock: cold paths only. */
int gr__pool_registry_has(const gr_pool *p);

#endif
