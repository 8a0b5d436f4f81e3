/* Distributed task pool: public API, the per-rank task queue and the run loop.
 * The protocol (steals, lifelines, termination) is in dpool_comm.c. */
#include "dpool_impl.h"

#include "gr_error.h"
#include "gr_log.h"
#include "gr_param.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define GR_DPOOL_MAGIC 0x44504f4cu /* "DPOL" */
#define GR_DPOOL_MAX_FNS 4096

static void sleep_us(int us) {
  if (us <= 0) return;
  struct timespec ts = {us / 1000000, (long)(us % 1000000) * 1000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* ---- queue ------------------------------------------------------------------------------- */

gr__dtask *gr__dp_task_new(int id, const void *payload, size_t len) {
  gr__dtask *t = malloc(sizeof *t + (len ? len : 1));
  if (!t) return NULL;
  t->id = id;
  t->len = (uint32_t)len;
  if (len) memcpy(t->data, payload, len);
  return t;
}

int gr__dp_queue_push(gr_dpool *dp, gr__dtask *t) {
  if (dp->count == dp->cap) {
    size_t ncap = dp->cap ? 2 * dp->cap : 256;
    gr__dtask **nr = malloc(ncap * sizeof *nr);
    if (!nr) return -1;
    for (size_t i = 0; i < dp->count; i++)
      nr[i] = dp->ring[(dp->head + i) & (dp->cap - 1)];
    free(dp->ring);
    dp->ring = nr;
    dp->cap = ncap;
    dp->head = 0;
  }
  dp->ring[(dp->head + dp->count) & (dp->cap - 1)] = t;
  dp->count++;
  return 0;
}

gr__dtask *gr__dp_queue_pop_new(gr_dpool *dp) {
  if (dp->count == 0) return NULL;
  dp->count--;
  return dp->ring[(dp->head + dp->count) & (dp->cap - 1)];
}

gr__dtask *gr__dp_queue_pop_old(gr_dpool *dp) {
  if (dp->count == 0) return NULL;
  gr__dtask *t = dp->ring[dp->head];
  dp->head = (dp->head + 1) & (dp->cap - 1);
  dp->count--;
  return t;
}

/* Pushes made by a task go to a batch on the running thread's stack and reach the queue in one
 * locked section with the task's completion and the next pop: one lock round trip per task
 * instead of one per push plus two: the mutex is the dpool's hot spot. */
#define GR__DP_BATCH 64
typedef struct {
  gr_dpool *dp;
  int n;
  gr__dtask *v[GR__DP_BATCH];
} gr__dp_batch;
static _Thread_local gr__dp_batch *tl_batch;
static void flush_locked(gr_dpool *dp, gr__dp_batch *b);

/* ---- config and lifecycle ------------------------------------------------------------------ */

void gr_dpool_config_init(gr_dpool_config *cfg) {
  if (!cfg) return;
  memset(cfg, 0, sizeof *cfg);
  cfg->size = (uint32_t)sizeof *cfg;
  cfg->magic = GR_DPOOL_CONFIG_MAGIC;
  cfg->steal = 1;
  cfg->random_steals = 2;
  cfg->lifelines = 1;
  cfg->poll_interval_us = 50;
  cfg->backoff_max_us = 1000;
  cfg->max_chunk = 1024;
  /* GPURUN_TIMEOUT as the collectives read it; beyond 1e9 s (31 years) the pool's longest */
  double t = gr__param_seconds(GR_PARAM_TIMEOUT);
  cfg->timeout_s = t > 1e9 ? 1e9 : t;
}

static gr_status check_config(const gr_dpool_config *c) {
  static const char *call = "gr_dpool_create";
  if (c->magic != GR_DPOOL_CONFIG_MAGIC || c->size != sizeof *c)
    return gr__fail(GR_ERR_INVALID, call,
                    "cfg was not set up with gr_dpool_config_init (magic 0x%x, size %u)",
                    (unsigned)c->magic, (unsigned)c->size);
  if (c->steal != 0 && c->steal != 1)
    return gr__fail(GR_ERR_INVALID, call, "cfg->steal %d: expected 0 or 1", c->steal);
  if (c->lifelines != 0 && c->lifelines != 1)
    return gr__fail(GR_ERR_INVALID, call, "cfg->lifelines %d: expected 0 or 1", c->lifelines);
  if (c->random_steals < 1 || c->random_steals > 1000000)
    return gr__fail(GR_ERR_INVALID, call, "cfg->random_steals %d: expected 1..1000000",
                    c->random_steals);
  if (c->poll_interval_us < 1 || c->poll_interval_us > 100000)
    return gr__fail(GR_ERR_INVALID, call, "cfg->poll_interval_us %d: expected 1..100000",
                    c->poll_interval_us);
  if (c->backoff_max_us < 0 || c->backoff_max_us > 1000000)
    return gr__fail(GR_ERR_INVALID, call, "cfg->backoff_max_us %d: expected 0..1000000",
                    c->backoff_max_us);
  if (c->max_chunk < 1 || c->max_chunk > (1 << 20))
    return gr__fail(GR_ERR_INVALID, call, "cfg->max_chunk %d: expected 1..1048576", c->max_chunk);
  if (!(c->timeout_s >= 0 && c->timeout_s <= 1e9)) /* NaN fails too */
    return gr__fail(GR_ERR_INVALID, call, "cfg->timeout_s %g: expected 0 (none) .. 1e9 seconds",
                    c->timeout_s);
  return GR_OK;
}

static int valid(const gr_dpool *dp) { return dp && dp->magic == GR_DPOOL_MAGIC; }

gr_status gr_dpool_create(MPI_Comm comm, gr_pool *local, const gr_dpool_config *cfg,
                          gr_dpool **out) {
  static const char *call = "gr_dpool_create";
  if (!out) return gr__fail(GR_ERR_INVALID, call, "out is NULL");
  *out = NULL;
  if (comm == MPI_COMM_NULL) return gr__fail(GR_ERR_INVALID, call, "comm is MPI_COMM_NULL");
  gr_dpool_config defaults;
  gr_dpool_config_init(&defaults);
  if (!cfg) cfg = &defaults;
  GR_CHECK(check_config(cfg));
  int inited = 0, finalized = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&finalized);
  if (!inited || finalized)
    return gr__fail(GR_ERR_STATE, call, "MPI is %s", finalized ? "finalized" : "not initialised");
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);
  if (local && level == MPI_THREAD_SINGLE)
    GR_LOG_ONCE(GR_LOG_WARN, "gr_dpool_create: MPI runs at MPI_THREAD_SINGLE but a local pool adds "
                             "threads; they never call MPI (the dpool funnels all MPI calls "
                             "through gr_dpool_run's thread), ask for MPI_THREAD_FUNNELED");

  gr_dpool *dp = calloc(1, sizeof *dp);
  if (!dp) return gr__fail(GR_ERR_NOMEM, call, "no memory for the dpool");
  dp->cfg = *cfg;
  dp->local = local;
  gr__array_init(&dp->fns, sizeof(gr_dtask_fn));
  gr__array_init(&dp->sends, sizeof(gr__dp_send));
  if (pthread_mutex_init(&dp->mu, NULL) != 0) {
    free(dp);
    return gr__fail(GR_ERR_SYSTEM, call, "pthread_mutex_init failed");
  }
  /* Non-blocking, so that with a timeout a rank that never calls gr_dpool_create cannot hold
   * the others here for ever; the wait names the ranks that did not come (dpool_create_wait.c). */
  MPI_Request dup_req;
  int rc = MPI_Comm_idup(comm, &dp->comm, &dup_req);
  if (rc == MPI_SUCCESS) {
    gr_status st = gr__dp_create_wait(comm, &dup_req, cfg->timeout_s);
    if (st == GR_ERR_TIMEOUT || st == GR_ERR_NOMEM) {
      /* The duplication stays pending in MPI and writes dp->comm when it completes: dp is
       * abandoned (kept, never freed). */
      gr__dp_abandon(dp);
      return gr__fail(st, call, "%s", gr_last_error());
    }
    if (st != GR_OK) {
      pthread_mutex_destroy(&dp->mu);
      free(dp);
      return gr__fail(st, call, "%s", gr_last_error());
    }
  }
  if (rc != MPI_SUCCESS) {
    pthread_mutex_destroy(&dp->mu);
    free(dp);
    return gr__fail(GR_ERR_MPI, call, "MPI_Comm_idup failed (MPI error %d)", rc);
  }
  MPI_Comm_rank(dp->comm, &dp->rank);
  MPI_Comm_size(dp->comm, &dp->size);
  dp->rng = cfg->seed ? cfg->seed * 2654435761u + (unsigned)dp->rank
                      : 0x9e3779b9u ^ ((unsigned)dp->rank * 2246822519u + 1u);
  if (gr__dp_comm_init(dp) != GR_OK) {
    MPI_Comm_free(&dp->comm);
    pthread_mutex_destroy(&dp->mu);
    free(dp);
    return gr__fail(GR_ERR_NOMEM, call, "no memory for the lifeline tables");
  }
  dp->magic = GR_DPOOL_MAGIC;
  *out = dp;
  return GR_OK;
}

gr_status gr_dpool_register(gr_dpool *dp, gr_dtask_fn fn, int *id) {
  static const char *call = "gr_dpool_register";
  if (!valid(dp)) return gr__fail(GR_ERR_INVALID, call, "dp is NULL or not a dpool");
  if (!fn) return gr__fail(GR_ERR_INVALID, call, "fn is NULL");
  if (!id) return gr__fail(GR_ERR_INVALID, call, "id is NULL");
  if (dp->running) return gr__fail(GR_ERR_STATE, call, "called during gr_dpool_run");
  if (dp->runs > 0)
    return gr__fail(GR_ERR_STATE, call,
                    "called after the first gr_dpool_run (registrations are "
                    "checked across ranks there and fixed from then on)");
  if (dp->fns.count >= (size_t)GR_DPOOL_MAX_FNS)
    return gr__fail(GR_ERR_INVALID, call, "more than %d task functions", GR_DPOOL_MAX_FNS);
  if (gr__array_push(&dp->fns, &fn) != GR_OK) return gr__fail(GR_ERR_NOMEM, call, "no memory");
  *id = (int)dp->fns.count - 1;
  return GR_OK;
}

static gr_status check_push(const char *call, gr_dpool *dp, int id, const void *payload,
                            size_t len) {
  if (!valid(dp)) return gr__fail(GR_ERR_INVALID, call, "dp is NULL or not a dpool");
  if (id < 0 || (size_t)id >= dp->fns.count)
    return gr__fail(GR_ERR_INVALID, call, "id %d: expected 0..%d (registered functions)", id,
                    (int)dp->fns.count - 1);
  if (len > GR_DPOOL_MAX_PAYLOAD)
    return gr__fail(GR_ERR_INVALID, call, "len %zu exceeds GR_DPOOL_MAX_PAYLOAD (%u)", len,
                    (unsigned)GR_DPOOL_MAX_PAYLOAD);
  if (len && !payload) return gr__fail(GR_ERR_INVALID, call, "payload is NULL with len %zu", len);
  return GR_OK;
}

gr_status gr_dpool_push(gr_dpool *dp, int id, const void *payload, size_t len) {
  static const char *call = "gr_dpool_push";
  GR_CHECK(check_push(call, dp, id, payload, len));
  gr__dtask *t = gr__dp_task_new(id, payload, len);
  if (!t) return gr__fail(GR_ERR_NOMEM, call, "no memory for a task of %zu bytes", len);
  gr__dp_batch *b = tl_batch;
  if (b && b->dp == dp) { /* inside a task of this dpool */
    if (b->n == GR__DP_BATCH) {
      pthread_mutex_lock(&dp->mu);
      flush_locked(dp, b);
      pthread_mutex_unlock(&dp->mu);
    }
    b->v[b->n++] = t;
    return GR_OK;
  }
  pthread_mutex_lock(&dp->mu);
  int rc = gr__dp_queue_push(dp, t);
  if (rc == 0) dp->tasks_pushed++;
  pthread_mutex_unlock(&dp->mu);
  if (rc != 0) {
    free(t);
    return gr__fail(GR_ERR_NOMEM, call, "no memory to grow the task queue");
  }
  return GR_OK;
}

gr_status gr_dpool_push_to(gr_dpool *dp, int rank, int id, const void *payload, size_t len) {
  static const char *call = "gr_dpool_push_to";
  GR_CHECK(check_push(call, dp, id, payload, len));
  if (rank < 0 || rank >= dp->size)
    return gr__fail(GR_ERR_INVALID, call, "rank %d: expected 0..%d", rank, dp->size - 1);
  if (rank == dp->rank) {
    gr_status st = gr_dpool_push(dp, id, payload, len);
    return st == GR_OK ? GR_OK : gr__fail(st, call, "%s", gr_last_error());
  }
  gr__dtask *t = gr__dp_task_new(id, payload, len);
  gr__dp_out *o = malloc(sizeof *o);
  if (!t || !o) {
    free(t);
    free(o);
    return gr__fail(GR_ERR_NOMEM, call, "no memory for a task of %zu bytes", len);
  }
  o->rank = rank;
  o->task = t;
  pthread_mutex_lock(&dp->mu);
  gr__list_push_back(&dp->outbox, &o->node);
  dp->tasks_pushed++;
  pthread_mutex_unlock(&dp->mu);
  return GR_OK;
}

/* ---- running tasks ---------------------------------------------------------------------------- */

/* Caller holds mu. A queue that cannot grow loses the tasks: the run then fails with NOMEM. */
static void flush_locked(gr_dpool *dp, gr__dp_batch *b) {
  for (int i = 0; i < b->n; i++) {
    if (gr__dp_queue_push(dp, b->v[i]) != 0) {
      free(b->v[i]);
      dp->oom = 1;
    }
  }
  dp->tasks_pushed += (uint64_t)b->n;
  b->n = 0;
}

/* Take the newest task and count it as running, atomically, so that the rank never looks passive
 * between the pop and the task's own pushes. */
static gr__dtask *take(gr_dpool *dp) {
  pthread_mutex_lock(&dp->mu);
  gr__dtask *t = gr__dp_queue_pop_new(dp);
  if (t) {
    dp->busy++;
    dp->tasks_run++;
  }
  pthread_mutex_unlock(&dp->mu);
  return t;
}

/* Run t (taken with take()), then publish its pushes, count it done and, when want_next, take
 * the next task, all under one lock. */
static gr__dtask *run_and_next(gr_dpool *dp, gr__dtask *t, int want_next) {
  gr__dp_batch b;
  b.dp = dp;
  b.n = 0;
  gr__dp_batch *saved = tl_batch;
  tl_batch = &b;
  GR_ARRAY_AT(&dp->fns, gr_dtask_fn, t->id)(dp, t->data, t->len, dp->cfg.ctx);
  tl_batch = saved;
  free(t);
  pthread_mutex_lock(&dp->mu);
  flush_locked(dp, &b);
  dp->busy--;
  gr__dtask *next = want_next ? gr__dp_queue_pop_new(dp) : NULL;
  if (next) {
    dp->busy++;
    dp->tasks_run++;
  }
  pthread_mutex_unlock(&dp->mu);
  return next;
}

static size_t queued(gr_dpool *dp) {
  pthread_mutex_lock(&dp->mu);
  size_t n = dp->count;
  pthread_mutex_unlock(&dp->mu);
  return n;
}

/* Idle sleep: grows 1, 2, 4 ... backoff_max_us while nothing arrives, back to 0 on any message.
 * Sleeping rather than spinning matters when ranks outnumber cores. */
static int next_sleep(const gr_dpool *dp, int cur, int got) {
  if (got) return 0;
  int n = cur ? 2 * cur : 1;
  return n > dp->cfg.backoff_max_us ? dp->cfg.backoff_max_us : n;
}

/* local == NULL: tasks run here, and MPI is polled every `batch` tasks, batch = poll interval /
 * estimated time per task (cheap tasks: large batches; long tasks: every task). The estimate
 * follows a faster measurement at once but rises at most 10% per poll: a batch during which the
 * rank was descheduled (oversubscribed nodes) looks slow, and trusting it would shrink batches to
 * one task and spend the CPU on MPI_Iprobe. */
static gr_status run_inline(gr_dpool *dp) {
  const double target = 1e-6 * dp->cfg.poll_interval_us;
  long batch = 1;
  double est = target; /* seconds per task */
  double last_poll = gr__mono_now();
  int slp = 0;
  for (;;) {
    double iter_start = gr__mono_now();
    long k = 0;
    gr__dtask *t = take(dp);
    while (t) {
      k++;
      t = run_and_next(dp, t, k < batch);
    }
    int got = 0;
    GR_CHECK(gr__dp_progress(dp, &got));
    double now = gr__mono_now();
    if (k > 0) {
      double per = (now - last_poll) / (double)k;
      est = per < est ? per : (per < 1.1 * est ? per : 1.1 * est);
      double b = target / (est > 1e-9 ? est : 1e-9);
      batch = b < 1 ? 1 : b > (double)(1L << 20) ? (1L << 20) : (long)b;
    }
    last_poll = now;
    if (dp->terminated) return GR_OK;
    if (k < batch && queued(dp) == 0) { /* idle */
      slp = next_sleep(dp, slp, got);
      sleep_us(slp);
      if (k == 0) dp->st.idle_s += gr__mono_now() - iter_start;
    } else {
      slp = 0;
    }
  }
}

/* local != NULL: the pool's workers run tasks; this thread only polls MPI (it is the dpool's
 * communication thread, and the only one that calls MPI). */
static _Thread_local int tl_in_loop; /* this thread is inside a worker_loop */

/* The loops are ordinary tasks of the local pool, so a thread that helps while it waits on a
 * taskgroup (gr_taskgroup_wait inside a dpool task, or inside an application task) may pick one
 * up. Nested inside a dpool task, a loop that ran until stop_workers would never let that task
 * return, and the run could never terminate (review F2): a nested loop returns at once. The
 * other loops, and the one below it on this thread, still run the dpool's tasks. */
static void worker_loop(void *arg) {
  gr_dpool *dp = arg;
  if (tl_in_loop) return;
  tl_in_loop = 1;
  int slp = 0;
  for (;;) {
    /* stop_workers comes with an empty queue after termination, or with tasks left after a
     * failed run (a silent rank): then the queue is abandoned, not worked off. */
    if (__atomic_load_n(&dp->stop_workers, __ATOMIC_ACQUIRE)) break;
    gr__dtask *t = take(dp);
    if (t) {
      while (t)
        t = run_and_next(dp, t, !__atomic_load_n(&dp->stop_workers, __ATOMIC_ACQUIRE));
      slp = 0;
      continue;
    }
    slp = slp ? (slp < 256 ? 2 * slp : slp) : 1;
    if (slp < 4)
      sched_yield();
    else
      sleep_us(slp);
  }
  tl_in_loop = 0;
}

static gr_status run_pool(gr_dpool *dp) {
  gr_taskgroup g;
  gr_taskgroup_init(&g, dp->local);
  int nw = gr_pool_nthreads(dp->local);
  if (nw < 1) nw = 1;
  __atomic_store_n(&dp->stop_workers, 0, __ATOMIC_RELEASE);
  gr_status st = GR_OK;
  int spawned = 0;
  for (int i = 0; i < nw; i++) {
    st = gr_spawn(&g, worker_loop, dp);
    if (st != GR_OK) break;
    spawned++;
  }
  int slp = 0, busy_slp = 0;
  while (st == GR_OK && spawned > 0) {
    int got = 0;
    st = gr__dp_progress(dp, &got);
    if (st != GR_OK || dp->terminated) break;
    int idle = 0;
    pthread_mutex_lock(&dp->mu);
    idle = dp->count == 0 && dp->busy == 0;
    pthread_mutex_unlock(&dp->mu);
    double t0 = gr__mono_now();
    if (idle) {
      slp = next_sleep(dp, slp, got);
      sleep_us(slp);
      dp->st.idle_s += gr__mono_now() - t0;
    } else {
      /* busy workers: poll every poll_interval, stretched up to 8x while nothing arrives */
      int lo = dp->cfg.poll_interval_us;
      busy_slp = got ? 0 : (busy_slp < lo ? lo : (busy_slp < 8 * lo ? 2 * busy_slp : busy_slp));
      slp = 0;
      sleep_us(busy_slp);
    }
  }
  __atomic_store_n(&dp->stop_workers, 1, __ATOMIC_RELEASE);
  gr_status wst = gr_taskgroup_wait(&g);
  if (st == GR_OK && spawned == 0) st = GR_ERR_INTERNAL;
  return st != GR_OK ? st : wst;
}

/* ---- agreeing on the registrations (first run) --------------------------------------------- */

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++)
    h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

/* Identity of the registered functions that does not depend on load addresses: per function the
 * base name of its module and its offset there (dladdr); the raw address where dladdr knows
 * nothing (a static, non-PIE program: the same on every rank). */
static uint64_t registrations_hash(const gr_dpool *dp) {
  uint64_t h = 1469598103934665603ull;
  int nfns = (int)dp->fns.count;
  h = fnv(h, &nfns, sizeof nfns);
  for (int i = 0; i < nfns; i++) {
    Dl_info info;
    gr_dtask_fn fn = GR_ARRAY_AT(&dp->fns, gr_dtask_fn, i);
    uintptr_t off = (uintptr_t)fn;
    /* A function pointer as a data pointer for dladdr: POSIX requires that conversion to work. */
    void *addr;
    memcpy(&addr, &fn, sizeof addr);
    if (dladdr(addr, &info) != 0 && info.dli_fbase != NULL) {
      off -= (uintptr_t)info.dli_fbase;
      const char *name = info.dli_fname ? info.dli_fname : "";
      const char *slash = strrchr(name, '/');
      name = slash ? slash + 1 : name;
      h = fnv(h, name, strlen(name) + 1);
    }
    h = fnv(h, &off, sizeof off);
  }
  return h;
}

/* Every rank learns every rank's (count, hash); all see the same table, so all reach the same
 * verdict. Bounded by the timeout (a rank that never enters the run). */
static gr_status agree_registrations(gr_dpool *dp) {
  static const char *call = "gr_dpool_run";
  int64_t mine[2] = {(int64_t)dp->fns.count, (int64_t)registrations_hash(dp)};
  int64_t *all = malloc((size_t)dp->size * sizeof mine);
  if (!all) return gr__fail(GR_ERR_NOMEM, call, "no memory for the registration check");
  /* who arrives, so that a timeout can name who did not (dpool_arrive.c) */
  gr__dp_arrivals arr = {0, 0, NULL};
  if (dp->size > 1 && (gr__dp_arrivals_post(dp, &arr, GR__DP_TAG_ARRIVE_REG) != GR_OK ||
                       gr__dp_arrivals_send(dp, &arr) != GR_OK))
    gr__dp_arrivals_abandon(&arr); /* then the timeout cannot name anyone: still bounded */
  MPI_Request req;
  int rc = MPI_Iallgather(mine, 2, MPI_INT64_T, all, 2, MPI_INT64_T, dp->comm, &req);
  if (rc != MPI_SUCCESS) {
    gr__dp_arrivals_abandon(&arr);
    free(all);
    return gr__fail(GR_ERR_MPI, call, "MPI_Iallgather of the registrations failed (MPI error %d)",
                    rc);
  }
  double deadline = gr__dp_deadline(dp);
  int done = 0, slp = 0;
  while (!done) {
    rc = MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
      gr__dp_arrivals_abandon(&arr);
      free(all);
      return gr__fail(GR_ERR_MPI, call,
                      "MPI_Test on the registration check failed (MPI error "
                      "%d)",
                      rc);
    }
    if (done) break;
    if (gr__mono_now() > deadline) {
      /* The collective stays pending in MPI and may still write into `all`. */
      gr__dp_abandon(all);
      dp->coll_pending = 1;
      char who[160];
      int n = gr__dp_arrivals_missing(&arr, who, sizeof who);
      gr__dp_arrivals_abandon(&arr);
      if (n)
        return gr__fail(GR_ERR_TIMEOUT, call,
                        "rank%s %s did not enter the first run within %g s "
                        "(timeout_s / GPURUN_TIMEOUT; the registration check)",
                        n > 1 ? "s" : "", who, dp->cfg.timeout_s);
      return gr__fail(GR_ERR_TIMEOUT, call,
                      "not every rank entered the first run within %g s "
                      "(timeout_s / GPURUN_TIMEOUT; the registration check)",
                      dp->cfg.timeout_s);
    }
    slp = slp ? (slp < 1000 ? 2 * slp : slp) : 1;
    sleep_us(slp);
  }
  gr_status st = gr__dp_arrivals_finish(&arr); /* everyone arrived: all messages are sent */
  if (st != GR_OK) {
    free(all);
    return gr__fail(st, call, "completing the arrival messages of the registration check failed");
  }
  for (int r = 0; r < dp->size; r++) {
    if (all[2 * r] == all[0] && all[2 * r + 1] == all[1]) continue;
    st = gr__fail(GR_ERR_MISMATCH, call,
                  "task functions are registered differently on the "
                  "ranks: rank %d has %lld (identity %016llx), rank 0 has %lld (identity "
                  "%016llx); register the same functions in the same order on every rank",
                  r, (long long)all[2 * r], (unsigned long long)all[2 * r + 1], (long long)all[0],
                  (unsigned long long)all[1]);
    break;
  }
  free(all);
  return st;
}

gr_status gr_dpool_run(gr_dpool *dp) {
  static const char *call = "gr_dpool_run";
  if (!valid(dp)) return gr__fail(GR_ERR_INVALID, call, "dp is NULL or not a dpool");
  if (dp->running) return gr__fail(GR_ERR_STATE, call, "already running (called from a task?)");
  int level = MPI_THREAD_SINGLE, is_main = 1;
  MPI_Query_thread(&level);
  MPI_Is_thread_main(&is_main);
  if (level < MPI_THREAD_SERIALIZED && !is_main)
    return gr__fail(GR_ERR_STATE, call,
                    "called from a thread other than MPI's main thread, with MPI at thread level "
                    "%d (< MPI_THREAD_SERIALIZED)",
                    level);
  if (dp->broken)
    return gr__fail(GR_ERR_STATE, call, "a previous run failed; the dpool can only be destroyed");
  if (!dp->agreed) {
    gr_status ast = agree_registrations(dp);
    if (ast != GR_OK) {
      dp->broken = 1;
      return ast;
    }
    dp->agreed = 1;
  }
  dp->running = 1;
  double t0 = gr__mono_now();
  gr__dp_run_begin(dp);
  gr_status st = GR_OK;
  /* before any rank can reach this run's barrier (dpool_arrive.c) */
  if (dp->size > 1) st = gr__dp_arrivals_post(dp, &dp->bar_arr, GR__DP_TAG_ARRIVE + dp->tag_off);
  if (st == GR_OK) st = dp->local ? run_pool(dp) : run_inline(dp);
  if (st == GR_OK) st = gr__dp_drain(dp);
  if (st == GR_OK)
    st = gr__dp_arrivals_finish(&dp->bar_arr);
  else
    gr__dp_arrivals_abandon(&dp->bar_arr);
  /* A run that failed before its drain completed leaves messages behind: no further runs. Out of
   * memory in a task is reported after a clean drain: the dpool stays usable. */
  if (st != GR_OK) dp->broken = 1;
  if (st == GR_OK && dp->oom) st = GR_ERR_NOMEM;
  dp->oom = 0;
  dp->st.run_s += gr__mono_now() - t0;
  dp->running = 0;
  if (st == GR_ERR_TIMEOUT) {
    if (dp->silent < 0 && dp->missing[0])
      return gr__fail(st, call,
                      "rank%s %s did not reach the run's final barrier within %g s "
                      "(timeout_s / GPURUN_TIMEOUT): stopped after termination",
                      strchr(dp->missing, ',') || strstr(dp->missing, "more") ? "s" : "",
                      dp->missing, dp->cfg.timeout_s);
    if (dp->silent < 0)
      return gr__fail(st, call,
                      "the run's final barrier did not complete within %g s "
                      "(timeout_s / GPURUN_TIMEOUT): a rank stopped after termination",
                      dp->cfg.timeout_s);
    if (dp->silent_reporter == dp->rank)
      return gr__fail(st, call, "rank %d did not answer within %g s (timeout_s / GPURUN_TIMEOUT)",
                      dp->silent, dp->cfg.timeout_s);
    return gr__fail(st, call,
                    "rank %d did not answer within %g s (timeout_s / GPURUN_TIMEOUT; "
                    "noticed by rank %d)",
                    dp->silent, dp->cfg.timeout_s, dp->silent_reporter);
  }
  if (st != GR_OK) return gr__fail(st, call, "communication failed: %s", gr_strerror(st));
  return GR_OK;
}

gr_status gr_dpool_stats(const gr_dpool *dp, struct gr_dpool_stats *out) {
  static const char *call = "gr_dpool_stats";
  if (!valid(dp)) return gr__fail(GR_ERR_INVALID, call, "dp is NULL or not a dpool");
  if (!out) return gr__fail(GR_ERR_INVALID, call, "out is NULL");
  gr_dpool *m = (gr_dpool *)dp; /* the mutex only */
  pthread_mutex_lock(&m->mu);
  *out = dp->st;
  out->tasks_run = dp->tasks_run;
  out->tasks_pushed = dp->tasks_pushed;
  pthread_mutex_unlock(&m->mu);
  return GR_OK;
}

gr_status gr_dpool_stats_reset(gr_dpool *dp) {
  if (!valid(dp))
    return gr__fail(GR_ERR_INVALID, "gr_dpool_stats_reset", "dp is NULL or not a dpool");
  pthread_mutex_lock(&dp->mu);
  memset(&dp->st, 0, sizeof dp->st);
  dp->tasks_run = dp->tasks_pushed = 0;
  pthread_mutex_unlock(&dp->mu);
  return GR_OK;
}

int gr_dpool_rank(const gr_dpool *dp) { return valid(dp) ? dp->rank : -1; }
int gr_dpool_size(const gr_dpool *dp) { return valid(dp) ? dp->size : -1; }

gr_status gr_dpool_destroy(gr_dpool *dp) {
  static const char *call = "gr_dpool_destroy";
  if (!dp) return GR_OK;
  if (!valid(dp)) return gr__fail(GR_ERR_INVALID, call, "dp is not a dpool");
  if (dp->running) return gr__fail(GR_ERR_STATE, call, "called during gr_dpool_run");
  gr__dtask *t;
  while ((t = gr__dp_queue_pop_old(dp)) != NULL)
    free(t);
  gr_list_node *n;
  while ((n = gr__list_pop_front(&dp->outbox))) {
    gr__dp_out *o = GR_LIST_ENTRY(n, gr__dp_out, node);
    free(o->task);
    free(o);
  }
  gr__dp_comm_free(dp);
  /* A timed-out collective still pending: the communicator is left to MPI (freed with it at
   * MPI_Finalize), since a late rank's arrival would progress it on a freed one. */
  if (!dp->coll_pending) MPI_Comm_free(&dp->comm);
  pthread_mutex_destroy(&dp->mu);
  free(dp->ring);
  gr__array_free(&dp->fns);
  dp->magic = 0;
  free(dp);
  return GR_OK;
}
