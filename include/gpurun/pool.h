/* gpurun task pool: work-stealing workers inside one process (one Chase-Lev deque per worker).
 * See gr_pool_create(3), gr_spawn(3) and gr_parallel_for(3). This header needs no MPI, CUDA or
 * hwloc headers. */
#ifndef GPURUN_POOL_H
#define GPURUN_POOL_H

#include <gpurun/status.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gr_pool gr_pool;

/* See gr_pool_create(3). */
typedef struct {
  int nthreads;      /* workers, 0..4096; 0 = one per core of the creating thread's cpuset */
  int pin;           /* 1 = pin workers to cores, 0 = no, -1 = default: on under gpurun */
  int priorities;    /* priority levels, 1 or 2 (default 2) */
  size_t stack_size; /* bytes per worker; 0 = GR_POOL_DEFAULT_STACK */
} gr_pool_config;

/* Priorities of gr_spawn_prio; see gr_spawn(3). */
enum { GR_PRIO_NORMAL = 0, GR_PRIO_HIGH = 1 };

/* Worker stack sizes; see gr_pool_create(3). */
#define GR_POOL_DEFAULT_STACK ((size_t)64 << 20)
#define GR_POOL_MIN_STACK ((size_t)256 << 10)
#define GR_POOL_MAX_STACK ((size_t)64 << 30)

/* A set of tasks that can be waited for together; may live on the stack; its fields are private.
 * See gr_spawn(3). */
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

/* Defaults: nthreads 0, pin -1, priorities 2, stack_size 0. See gr_pool_config_init(3). */
GR_API void gr_pool_config_init(gr_pool_config *cfg);
/* Start the workers; cfg NULL means the defaults. See gr_pool_create(3). */
GR_API gr_status gr_pool_create(const gr_pool_config *cfg, gr_pool **out);
/* Wait for outstanding work, join the workers, free the pool. See gr_pool_destroy(3). */
GR_API gr_status gr_pool_destroy(gr_pool *p);
/* Number of workers; -1 for NULL. See gr_pool_nthreads(3). */
GR_API int gr_pool_nthreads(const gr_pool *p);

/* Prepare g for tasks of p. See gr_taskgroup_init(3). */
GR_API void gr_taskgroup_init(gr_taskgroup *g, gr_pool *p);
/* Run fn(arg) as a task of g (at a priority); arg must stay valid until gr_taskgroup_wait(g)
 * returns. See gr_spawn(3). */
GR_API gr_status gr_spawn(gr_taskgroup *g, void (*fn)(void *arg), void *arg);
GR_API gr_status gr_spawn_prio(gr_taskgroup *g, int priority, void (*fn)(void *), void *arg);
/* Wait until every task of g finished, running tasks meanwhile. See gr_taskgroup_wait(3). */
GR_API gr_status gr_taskgroup_wait(gr_taskgroup *g);
/* Skip the tasks of g not yet started. See gr_taskgroup_cancel(3). */
GR_API void gr_taskgroup_cancel(gr_taskgroup *g);
/* body(lo, hi, arg) over [begin, end) in chunks of at most grain. See gr_parallel_for(3). */
GR_API gr_status gr_parallel_for(gr_pool *p, size_t begin, size_t end, size_t grain,
                                 void (*body)(size_t lo, size_t hi, void *arg), void *arg);
/* Index of the calling worker in its pool, -1 outside any pool. See gr_worker_id(3). */
GR_API int gr_worker_id(void);

#ifdef __cplusplus
}
#endif
#endif
