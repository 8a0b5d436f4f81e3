/* The task pool's life cycle: configuration, sizing and pinning from the process's cpuset (hwloc),
 * creation, destruction (after the outstanding work), the registry of live pools, statistics and
 * quiescence. The scheduling itself is in pool.c. */
#include "gr_pool_impl.h"

#include "gr_error.h"
#include "gr_log.h"
#include "gr_param.h"
#include "gr_plan.h"

#include <errno.h>
#include <hwloc.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define tl_slot gr__tl_slot

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

int gr__pool_registry_has(const gr_pool *p) {
  int found = 0;
  pthread_mutex_lock(&registry_lock);
  for (gr_pool *q = registry; q; q = q->reg_next)
    if (q == p) found = 1;
  pthread_mutex_unlock(&registry_lock);
  return found;
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

/* Double collect. A task's spawn is counted before it is pushed (so before any thread can run it)
 * and its finish after it ran, so every finish summed into f has its spawn in s2, read later; a
 * task spawned before the call and unfinished is in s2 but not in f, so f < s2. The counters only
 * grow, except that a spawn whose push failed for lack of memory is taken back: that only ever
 * over-counts spawns, never hides one. */
int gr__pool_quiescent(gr_pool *p) {
  uint64_t s1 = sum_spawned(p);
  uint64_t f = sum_finished(p);
  uint64_t s2 = sum_spawned(p);
  return s1 == s2 && f == s1;
}

int gr__pool_asym(const gr_pool *p) { return p->asym; }

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
  cfg->stack_size = 0;
}

GR_API int gr_pool_nthreads(const gr_pool *p) { return p ? p->nworkers : -1; }

/* The cores (as cpusets restricted to the allowed PUs) of the process's allowed cpuset. */
typedef struct {
  hwloc_topology_t topo;
  hwloc_bitmap_t *core_sets;
  int ncores;
} cpu_layout;

static void layout_free(cpu_layout *l) {
  for (int i = 0; i < l->ncores; i++)
    hwloc_bitmap_free(l->core_sets[i]);
  free(l->core_sets);
  if (l->topo) hwloc_topology_destroy(l->topo);
  memset(l, 0, sizeof *l);
}

/* plan: the rank's plan as gr__plan_parse read it (cpus "" without one). */
static int layout_load(cpu_layout *l, const gr_plan *plan) {
  memset(l, 0, sizeof *l);
  if (hwloc_topology_init(&l->topo) != 0) {
    l->topo = NULL;
    return -1;
  }
  if (hwloc_topology_load(l->topo) != 0) goto fail;
  hwloc_bitmap_t allowed = hwloc_bitmap_alloc();
  if (!allowed) goto fail;
  /* The creating thread's binding, as OpenMP runtimes use the initial thread's: a launcher binds
   * the process before exec so every thread inherits it, while the whole-process union would also
   * count helper threads (MPI progress, sanitizer runtimes) that were bound differently. */
  if (hwloc_get_cpubind(l->topo, allowed, HWLOC_CPUBIND_THREAD) != 0 &&
      hwloc_get_cpubind(l->topo, allowed, HWLOC_CPUBIND_PROCESS) != 0)
    hwloc_bitmap_copy(allowed, hwloc_topology_get_allowed_cpuset(l->topo));
  hwloc_bitmap_and(allowed, allowed, hwloc_topology_get_allowed_cpuset(l->topo));
  /* Under gpurun the plan's cpuset (a list like "0-3,8-11", checked by the reader) also bounds
   * the pool, in case the launcher could not bind the process. Ignored when it leaves nothing. */
  if (plan->cpus[0]) {
    hwloc_bitmap_t ps = hwloc_bitmap_alloc();
    if (ps && hwloc_bitmap_list_sscanf(ps, plan->cpus) == 0 && hwloc_bitmap_intersects(ps, allowed))
      hwloc_bitmap_and(allowed, allowed, ps);
    else
      GR_LOG_ONCE(GR_LOG_WARN,
                  "gr_pool_create: ignoring the plan's cpuset " GR_PLAN_VAR_CPUS "='%s' (disjoint "
                  "from this thread's binding)",
                  plan->cpus);
    hwloc_bitmap_free(ps);
  }
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
  gr__pool_wake_all(p);
  for (int i = 0; i < p->nstarted; i++)
    pthread_join(p->slots[i].thread, NULL);
  p->nstarted = 0;
}

GR_API gr_status gr_pool_create(const gr_pool_config *cfg, gr_pool **out) {
  gr_plan plan;
  if (gr__plan_parse(environ, &plan) != GR_OK)
    GR_LOG_ONCE(GR_LOG_WARN, "gr_pool_create: %s; ignoring gpurun's plan", gr_last_error());
  return gr__pool_create_planned(cfg, &plan, out);
}

gr_status gr__pool_create_planned(const gr_pool_config *cfg, const gr_plan *plan, gr_pool **out) {
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
  if (c.stack_size != 0 && (c.stack_size < GR_POOL_MIN_STACK || c.stack_size > GR_POOL_MAX_STACK))
    return gr__fail(GR_ERR_INVALID, call, "stack_size %zu is outside [%zu, %zu] (0 = default)",
                    c.stack_size, GR_POOL_MIN_STACK, GR_POOL_MAX_STACK);
  size_t stack_size = c.stack_size ? c.stack_size : GR_POOL_DEFAULT_STACK;
  if (c.pin == -1) c.pin = plan->from_plan;

  cpu_layout l;
  int have_layout = layout_load(&l, plan) == 0;
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
  p->stack_size = stack_size;
  pthread_mutex_init(&p->inject_lock, NULL);
  int nslots = nthreads + GR__EXT_SLOTS;
  p->slots = aligned_alloc(GR__CACHE_LINE, (size_t)nslots * sizeof(gr__slot));
  gr_status st = GR_OK;
  if (!p->slots) {
    st = gr__fail(GR_ERR_NOMEM, call, "out of memory for %d slots", nslots);
    goto fail;
  }
  memset(p->slots, 0, (size_t)nslots * sizeof(gr__slot));
  /* The deques' fence mode (see gr_deque.h): the Le et al. fence pair unless asked for the
   * asymmetric barrier and the kernel has it. Not the default: each steal then interrupts every
   * core running a thread of the process, which does not scale to wide nodes with frequent steals. */
  int want_asym = gr__param_word(GR_PARAM_POOL_FENCE) == GR_POOL_FENCE_ASYM;
  int asym = want_asym && gr__deque_asym_available();
  if (want_asym && !asym)
    GR_LOG_ONCE(GR_LOG_WARN, "gr_pool_create: GPURUN_POOL_FENCE=asym but membarrier's private "
                             "expedited command is unavailable; using the fence pair");
  p->asym = asym;
  uint64_t seed = gr__mono_ns() ^ (uint64_t)(uintptr_t)p;
  for (int i = 0; i < nslots; i++) {
    gr__slot *s = &p->slots[i];
    s->pool = p;
    s->index = (uint32_t)i;
    s->is_worker = i < nthreads;
    s->rng = (seed + 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1)) | 1;
    for (int d = 0; d < 2; d++)
      if (gr__deque_init(&s->dq[d], 8, asym) != 0) {
        st = gr__fail(GR_ERR_NOMEM, call, "out of memory for the deques");
        goto fail;
      }
  }
  /* The stack is mapped, not touched: only pages deep nesting reaches cost memory. */
  pthread_attr_t attr;
  int arc = pthread_attr_init(&attr);
  if (arc == 0 && (arc = pthread_attr_setstacksize(&attr, stack_size)) != 0)
    pthread_attr_destroy(&attr);
  if (arc != 0) {
    st = gr__fail(GR_ERR_SYSTEM, call, "pthread_attr_setstacksize(%zu): %s", stack_size,
                  strerror(arc));
    goto fail;
  }
  for (int i = 0; i < nthreads; i++) {
    gr__slot *s = &p->slots[i];
    int rc = pthread_create(&s->thread, &attr, gr__pool_worker_main, s);
    if (rc != 0) {
      pthread_attr_destroy(&attr);
      st = gr__fail(GR_ERR_SYSTEM, call, "pthread_create for worker %d of %d (stack_size %zu): %s",
                    i, nthreads, stack_size, strerror(rc));
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
  pthread_attr_destroy(&attr);
  if (have_layout) layout_free(&l);
  registry_add(p);
  GR_DEBUG("pool %p: %d workers, pin %d, %d priorities, %s deques, %zu-byte stacks", (void *)p,
           nthreads, c.pin, c.priorities, asym ? "asymmetric-barrier" : "seq_cst-fence",
           stack_size);
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
  if (!gr__pool_registry_has(p))
    return gr__fail(GR_ERR_INVALID, call, "pool %p is not a live pool (destroyed twice?)",
                    (void *)p);
  wait_quiescent(p);
  registry_remove(p); /* from here external spawns and waits on p fail */
  wait_quiescent(p);  /* anything that slipped in before the removal */
  stop_workers(p);
  pool_free(p);
  return GR_OK;
}
