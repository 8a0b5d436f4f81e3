/* gpurun task pool: work-stealing workers inside one process (one Chase-Lev deque per worker).
 *
 * Typical use:
 *   gr_pool_config cfg; gr_pool_config_init(&cfg);
 *   gr_pool *p; gr_pool_create(&cfg, &p);
 *   gr_taskgroup g; gr_taskgroup_init(&g, p);
 *   gr_spawn(&g, work, arg); ...; gr_taskgroup_wait(&g);
 *   gr_pool_destroy(p);
 * This header needs no MPI, CUDA or hwloc headers. */
#ifndef GPURUN_POOL_H
#define GPURUN_POOL_H

#include <gpurun/status.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gr_pool gr_pool;

typedef struct {
  int nthreads;   /* workers, 0..4096; 0 = one per core of the creating thread's cpuset (hwloc;
                   * intersected with GPURUN_CPUS when set),
                   * never more (under mpirun/gpurun that cpuset is the rank's share) */
  int pin;        /* 1 = pin worker i to core i mod ncores of that cpuset; 0 = no; -1 = default:
                   * on when GPURUN_LOCAL_RANK is set (the process runs under gpurun) */
  int priorities; /* number of priority levels, 1 or 2 (default 2: GR_PRIO_HIGH and GR_PRIO_NORMAL);
                   * with 1, GR_PRIO_HIGH is accepted and treated as normal */
  size_t stack_size; /* bytes of stack per worker, 0 = the default, GR_POOL_DEFAULT_STACK
                      * (address space only: pages are touched as nested waits use them);
                      * otherwise GR_POOL_MIN_STACK .. GR_POOL_MAX_STACK. Each taskgroup nested
                      * in another's wait costs a few hundred bytes (see gr_spawn): the default
                      * holds several hundred thousand nested levels. */
} gr_pool_config;

enum { GR_PRIO_NORMAL = 0, GR_PRIO_HIGH = 1 };

#define GR_POOL_DEFAULT_STACK ((size_t)64 << 20)
#define GR_POOL_MIN_STACK ((size_t)256 << 10)
#define GR_POOL_MAX_STACK ((size_t)64 << 30)

/* A set of tasks that can be waited for together. It may live on the caller's stack; its fields
 * are private. Initialise with gr_taskgroup_init before use. */
typedef struct gr_taskgroup {
  gr_pool *pool;         /* private */
  void *owner;           /* private: the worker that initialised the group, or NULL */
  int64_t spawned_local; /* private: spawns by the owner (written by the owner only) */
  int64_t done_local;  /* private: owner's spawns the owner finished (written by the owner only) */
  int64_t done_remote; /* private: owner's spawns other threads finished (atomic) */
  int64_t pending;     /* private: other threads' spawns not yet finished (atomic) */
  int cancelled;       /* private (atomic) */
  uint32_t magic;      /* private */
} gr_taskgroup;

/* Defaults: nthreads 0, pin -1, priorities 2, stack_size 0 (the default size). */
GR_API void gr_pool_config_init(gr_pool_config *cfg);
/* cfg NULL means the defaults. GR_ERR_INVALID for a field out of range, GR_ERR_NOMEM,
 * GR_ERR_SYSTEM when a worker thread cannot be started (e.g. its stack cannot be mapped). Idle
 * workers spin briefly, yield, then sleep on a futex until work arrives: an idle pool uses no CPU
 * at any worker count (one sleeper at a time wakes every 50 ms as a safety net; a spawn wakes
 * one sleeper, never all of them). */
GR_API gr_status gr_pool_create(const gr_pool_config *cfg, gr_pool **out);
/* Waits for outstanding work (every task spawned so far, waited for or not), joins the workers and
 * frees the pool. Afterwards its groups are invalid: gr_spawn/gr_taskgroup_wait on them return
 * GR_ERR_INVALID. GR_ERR_STATE when called from a task of p; GR_ERR_INVALID for a pool that is
 * not live. No other thread may spawn into, wait on or otherwise use p while it is being
 * destroyed (tasks of p may keep spawning until they finish: that is the work destroy waits for). */
GR_API gr_status gr_pool_destroy(gr_pool *p);
/* Number of workers; -1 for NULL. */
GR_API int gr_pool_nthreads(const gr_pool *p);

GR_API void gr_taskgroup_init(gr_taskgroup *g, gr_pool *p);
/* Spawn fn(arg) in group g. Callable from inside a task (nested parallelism) and from any thread
 * outside the pool (its spawns go through a locked queue that workers serve first; from inside a
 * task they go to the worker's own deque). arg is the caller's: it must stay valid until
 * gr_taskgroup_wait(g) returns. GR_ERR_INVALID: g NULL or not initialised, g without pool, fn NULL,
 * priority not GR_PRIO_NORMAL/GR_PRIO_HIGH, g's pool destroyed; GR_ERR_NOMEM: out of memory, or
 * out of stack: the calling task runs with less than a reserve (1/16 of the thread's stack, at
 * least 128 KiB) left, because tasks are nested too deeply (each gr_taskgroup_wait that runs a
 * task nests it on the waiting thread's stack). The task is not spawned; the sentence names the
 * stack and gr_pool_config.stack_size. Tasks already spawned still run, so waits above return. */
GR_API gr_status gr_spawn(gr_taskgroup *g, void (*fn)(void *arg), void *arg);
GR_API gr_status gr_spawn_prio(gr_taskgroup *g, int priority, void (*fn)(void *), void *arg);
/* Wait until every task of g finished. The waiting thread runs tasks meanwhile (its own, then
 * stolen ones), so nested waits never deadlock and never block a worker; when there is nothing to
 * run it sleeps until work appears or g completes. A thread outside the pool helps too (it borrows
 * one of a few external slots, so while it waits the pool has one more thread running tasks).
 * Also resets g's cancellation: g can be reused. GR_ERR_INVALID for a bad g or a destroyed pool. */
GR_API gr_status gr_taskgroup_wait(gr_taskgroup *g);
/* Tasks of g not yet started are skipped (also ones spawned after the cancel, until the next
 * gr_taskgroup_wait(g) returns); running ones finish. Tasks they spawn into other groups are not
 * affected. */
GR_API void gr_taskgroup_cancel(gr_taskgroup *g);
/* body(lo, hi, arg) over [begin, end) in chunks of at most grain (0 = automatic: about 8 chunks
 * per worker) by recursive halving; returns when all chunks ran. Callable inside and outside tasks.
 * GR_ERR_INVALID: p NULL or destroyed, body NULL, begin > end. */
GR_API gr_status gr_parallel_for(gr_pool *p, size_t begin, size_t end, size_t grain,
                                 void (*body)(size_t lo, size_t hi, void *arg), void *arg);
/* Index of the calling worker in its pool, -1 outside any pool. */
GR_API int gr_worker_id(void);

#ifdef __cplusplus
}
#endif
#endif
