/* Internal: hooks into the task pool for the rest of the runtime (the cross-rank pool in
 * particular). The public API is include/gpurun/pool.h. */
#ifndef GR_POOL_H
#define GR_POOL_H

#include <gpurun/pool.h>
#include <stdint.h>

#include "gr_plan.h"

/* gr_pool_create with the rank's plan as gr__plan_parse read it (gr_init hands over its own):
 * the plan's cpuset bounds the pool and pin -1 pins under a plan. gr_pool_create reads the plan
 * from the environment itself, at each call. */
gr_status gr__pool_create_planned(const gr_pool_config *cfg, const gr_plan *plan, gr_pool **out);

/* Cumulative counters, summed over the pool's workers and the slots external threads borrow while
 * they wait. Each is monotonic; read together they are a snapshot taken over a short interval,
 * not an instant. */
typedef struct {
  uint64_t spawned;  /* tasks spawned into this pool (workers, waiting threads, external) */
  uint64_t run;      /* tasks finished (run, or skipped because their group was cancelled);
                          * after gr_taskgroup_wait(g) returns, includes every task of g */
  uint64_t steals;   /* successful steals from another slot's deque */
  uint64_t injected; /* tasks spawned by a thread outside the pool (through the locked queue) */
  uint64_t sleeps;   /* times a worker or waiter went to sleep on the futex */
  uint64_t idle_ns;  /* time spent asleep on the futex, all threads together */
} gr__pool_stats;

void gr__pool_get_stats(gr_pool *p, gr__pool_stats *out);

/* 1 when no task of the pool is queued or running (every spawned task has finished), else 0.
 * Exact when no thread spawns concurrently; with concurrent spawns it may say 0 spuriously but
 * never says 1 while a task that was spawned before the call began is unfinished (a task counts
 * as finished once its function returned; the pool may still be updating its group's count). */
int gr__pool_quiescent(gr_pool *p);

/* Wake every sleeping worker and waiter (e.g. after making work visible some other way). */
void gr__pool_wake_all(gr_pool *p);

/* 1 when p's deques use the asymmetric barrier (membarrier) instead of the seq_cst fence pair. */
int gr__pool_asym(const gr_pool *p);

#endif
