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
  int nthreads;   /* workers; 0 = one per core of the process's allowed cpuset */
  int pin;        /* 1 = pin worker i to core i of the allowed cpuset; -1 = default (on under gpurun) */
  int priorities; /* number of priority levels, 1 or 2 (default 2: GR_PRIO_HIGH and GR_PRIO_NORMAL) */
} gr_pool_config;

enum { GR_PRIO_NORMAL = 0, GR_PRIO_HIGH = 1 };

/* A set of tasks that can be waited for together. It may live on the caller's stack; its fields
 * are private. Initialise with gr_taskgroup_init before use. */
typedef struct gr_taskgroup {
  gr_pool *pool;         /* private */
  void *owner;           /* private: the worker that initialised the group, or NULL */
  int64_t spawned_local; /* private: spawns by the owner (written by the owner only) */
  int64_t done_local;    /* private: owner's spawns the owner finished (written by the owner only) */
  int64_t done_remote;   /* private: owner's spawns other threads finished (atomic) */
  int64_t pending;       /* private: other threads' spawns not yet finished (atomic) */
  int cancelled;         /* private (atomic) */
  uint32_t magic;        /* private */
} gr_taskgroup;

GR_API void gr_pool_config_init(gr_pool_config *cfg);
GR_API gr_status gr_pool_create(const gr_pool_config *cfg, gr_pool **out);
/* Waits for outstanding work, joins the workers and frees the pool. */
GR_API gr_status gr_pool_destroy(gr_pool *p);
GR_API int gr_pool_nthreads(const gr_pool *p);

GR_API void gr_taskgroup_init(gr_taskgroup *g, gr_pool *p);
/* Spawn fn(arg) in group g. Callable from inside a task (nested parallelism) and from the thread
 * that owns g outside the pool. arg is the caller's: it must stay valid until gr_taskgroup_wait(g)
 * returns. */
GR_API gr_status gr_spawn(gr_taskgroup *g, void (*fn)(void *arg), void *arg);
GR_API gr_status gr_spawn_prio(gr_taskgroup *g, int priority, void (*fn)(void *), void *arg);
/* Wait until every task of g finished; the waiting thread runs other tasks meanwhile. */
GR_API gr_status gr_taskgroup_wait(gr_taskgroup *g);
/* Tasks of g not yet started are skipped; running ones finish. */
GR_API void gr_taskgroup_cancel(gr_taskgroup *g);
/* body(lo, hi, arg) over [begin, end) in chunks of at most grain (0 = automatic); returns when
 * all chunks ran. */
GR_API gr_status gr_parallel_for(gr_pool *p, size_t begin, size_t end, size_t grain,
                                 void (*body)(size_t lo, size_t hi, void *arg), void *arg);
/* Index of the calling worker in its pool, -1 outside any pool. */
GR_API int gr_worker_id(void);

#ifdef __cplusplus
}
#endif
#endif
