/* The collectives front end, communicator side: configuration (gr_comm_config_init), the
 * communicator life cycle (create, split, destroy, abort) and its accessors, the communicator checks
 * every call starts with, error sentences, the clocks and deadlines, and the counters' read-out.
 * The calls themselves (argument checks, the check mode, groups, the wait loop that enforces the
 * timeout and records the flight recorder and counters) are in calls.c. Backends only start and
 * progress work (gr_coll.h). */
#include "gr_coll.h"

#include "gr_config.h"
#include "gr_device.h"
#include "gr_dtype.h"
#include "gr_error.h"
#include "gr_flight.h"
#include "gr_log.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const kind_names[GR__NKINDS] = {
    "allreduce", "broadcast", "reduce", "allgather", "reduce_scatter", "alltoall", "send", "recv",
    "barrier"};

const char *gr__kind_name(gr__kind k) { return (unsigned)k < GR__NKINDS ? kind_names[k] : "?"; }
const char *gr__coll_stats_op_name(int i) {
  return i >= 0 && i < GR_COLL_STATS_NOPS ? kind_names[i] : NULL;
}

double gr__wall_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
double gr__mono_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
double gr__deadline(double timeout_s) { return timeout_s > 0 ? gr__mono_now() + timeout_s : 0.0; }
int gr__past(double deadline) { return deadline > 0 && gr__mono_now() > deadline; }

void gr__call_sides(const gr__call *k, size_t *sb, size_t *rb) {
  size_t n = k->count * gr__dtype_size(k->dtype), P = (size_t)k->comm->size;
  int root = k->root == k->comm->rank;
  *sb = *rb = 0;
  switch (k->kind) {
  case GR__ALLREDUCE: *sb = *rb = n; break;
  case GR__BROADCAST: *sb = root ? n : 0; *rb = n; break;
  case GR__REDUCE: *sb = n; *rb = root ? n : 0; break;
  case GR__ALLGATHER: *sb = n; *rb = n * P; break;
  case GR__REDUCE_SCATTER: *sb = n * P; *rb = n; break;
  case GR__ALLTOALL: *sb = *rb = n * P; break;
  case GR__SEND: *sb = n; break;
  case GR__RECV: *rb = n; break;
  default: break;
  }
}

gr_status gr__comm_err(gr_comm *c, gr_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->err, sizeof c->err, fmt, ap);
  va_end(ap);
  return st;
}

static gr_status mpi_err(gr_comm *c, int rc, const char *what) {
  char s[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, s, &len) != MPI_SUCCESS) snprintf(s, sizeof s, "error %d", rc);
  return gr__comm_err(c, GR_ERR_MPI, "%s failed: %s", what, s);
}

gr_status gr__mpi_wait(gr_comm *c, MPI_Request *req, double deadline) {
  for (unsigned spin = 0;; spin++) {
    int flag = 0;
    int rc = MPI_Test(req, &flag, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return mpi_err(c, rc, "MPI_Test");
    if (flag) return GR_OK;
    if ((spin & 15) == 0) {
      if (gr__past(deadline)) return gr__comm_err(c, GR_ERR_TIMEOUT, "MPI request did not complete");
      gr__flight_poll();
    }
  }
}

/* ---- configuration ------------------------------------------------------------------------ */

GR_API void gr_comm_config_init(gr_comm_config *cfg) {
  if (!cfg) return;
  memset(cfg, 0, sizeof *cfg);
  cfg->backend = GR_BACKEND_AUTO;
  const char *t = getenv("GPURUN_TIMEOUT");
  if (t && *t) {
    char *end;
    double v = strtod(t, &end);
    if (*end == '\0' && v >= 0 && isfinite(v))
      cfg->timeout_s = v;
    else
      GR_LOG_ONCE(GR_LOG_WARN, "GPURUN_TIMEOUT=%s is not a number of seconds >= 0; no timeout", t);
  }
  const char *k = getenv("GPURUN_CHECK");
  cfg->check = k && *k && strcmp(k, "0") != 0;
}

/* ---- life cycle --------------------------------------------------------------------------- */

static gr_status comm_alloc(const gr_comm_config *cfg, gr_comm **out) {
  gr_comm *c = calloc(1, sizeof *c);
  if (!c) return GR_ERR_NOMEM;
  c->magic = GR__COMM_MAGIC;
  c->mpi = c->check_mpi = MPI_COMM_NULL;
  c->timeout_s = cfg->timeout_s;
  c->check = cfg->check;
  char why[160];
  c->gpu_buffers = gr__cuda_device_count(why, sizeof why) > 0;
  *out = c;
  return GR_OK;
}

static void comm_free(gr_comm *c) {
  if (c->flight) gr__flight_release(c->flight);
  if (c->check_mpi != MPI_COMM_NULL) MPI_Comm_free(&c->check_mpi);
  if (c->mpi != MPI_COMM_NULL) MPI_Comm_free(&c->mpi);
  c->magic = 0;
  free(c);
}

/* c->mpi is set and owned: fill the rest, then let the backend set up. */
static gr_status comm_finish(gr_comm *c, const char *fn) {
  MPI_Comm_set_errhandler(c->mpi, MPI_ERRORS_RETURN);
  MPI_Comm_rank(c->mpi, &c->rank);
  MPI_Comm_size(c->mpi, &c->size);
  MPI_Comm_rank(MPI_COMM_WORLD, &c->world_rank);
  if (c->check) {
    int rc = MPI_Comm_dup(c->mpi, &c->check_mpi);
    if (rc != MPI_SUCCESS) return gr__fail(mpi_err(c, rc, "MPI_Comm_dup"), fn, "%s", c->err);
  }
  gr__flight_setup(c->mpi);
  c->flight = gr__flight_new(c->id, c->world_rank, c->size, c->ops->name);
  return GR_OK;
}

gr_status gr__comm_create_ops(MPI_Comm mpi, const gr_comm_config *cfg, const gr__coll_ops *ops,
                              gr_comm **out) {
  static const char fn[] = "gr_comm_create";
  gr_comm *c;
  if (comm_alloc(cfg, &c) != GR_OK) return gr__fail(GR_ERR_NOMEM, fn, "out of memory");
  c->ops = ops;
  int cmp = MPI_UNEQUAL;
  MPI_Comm_compare(mpi, MPI_COMM_WORLD, &cmp);
  if (cmp == MPI_IDENT || cmp == MPI_CONGRUENT)
    snprintf(c->id, sizeof c->id, "world");
  else
    snprintf(c->id, sizeof c->id, "comm-%p", (void *)c); /* unique, if not agreed across ranks */
  int rc = MPI_Comm_dup(mpi, &c->mpi);
  if (rc != MPI_SUCCESS) {
    gr_status st = mpi_err(c, rc, "MPI_Comm_dup");
    c->mpi = MPI_COMM_NULL;
    st = gr__fail(st, fn, "%s", c->err);
    comm_free(c);
    return st;
  }
  gr_status st = comm_finish(c, fn);
  if (st == GR_OK) {
    st = ops->create(c, gr__deadline(c->timeout_s));
    if (st != GR_OK) st = gr__fail(st, fn, "%s backend: %s", ops->name, c->err);
  }
  if (st != GR_OK) {
    comm_free(c);
    return st;
  }
  GR_DEBUG("communicator %s: rank %d of %d, backend %s, timeout %g s, check %d", c->id, c->rank,
           c->size, ops->name, c->timeout_s, c->check);
  *out = c;
  return GR_OK;
}

GR_API gr_status gr_comm_create(MPI_Comm mpi, const gr_comm_config *cfg, gr_comm **out) {
  static const char fn[] = "gr_comm_create";
  if (!out) return gr__fail(GR_ERR_INVALID, fn, "out is NULL");
  *out = NULL;
  int inited = 0, finalized = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&finalized);
  if (!inited || finalized)
    return gr__fail(GR_ERR_STATE, fn, "MPI is %s", finalized ? "already finalized" : "not initialized");
  if (mpi == MPI_COMM_NULL) return gr__fail(GR_ERR_INVALID, fn, "mpi is MPI_COMM_NULL");
  gr_comm_config def;
  gr_comm_config_init(&def);
  if (!cfg) cfg = &def;
  if (cfg->backend != GR_BACKEND_AUTO && cfg->backend != GR_BACKEND_NCCL &&
      cfg->backend != GR_BACKEND_MPI)
    return gr__fail(GR_ERR_INVALID, fn, "cfg->backend %d is not GR_BACKEND_AUTO, _NCCL or _MPI",
                    (int)cfg->backend);
  if (!(cfg->timeout_s >= 0) || !isfinite(cfg->timeout_s))
    return gr__fail(GR_ERR_INVALID, fn, "cfg->timeout_s %g must be a finite number >= 0 (0 = none)",
                    cfg->timeout_s);
  gr_backend b = cfg->backend;
  char why[160] = "";
  int ngpu = gr__cuda_device_count(why, sizeof why);
#if GPURUN_HAVE_NCCL
  if (b == GR_BACKEND_AUTO) {
    /* NCCL only when every rank has a GPU: one rank without one would fail NCCL's init. */
    int mine = ngpu > 0, all = 0;
    int rc = MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, mpi);
    if (rc != MPI_SUCCESS) return gr__fail(GR_ERR_MPI, fn, "MPI_Allreduce (backend choice) failed");
    b = all ? GR_BACKEND_NCCL : GR_BACKEND_MPI;
    if (b == GR_BACKEND_MPI)
      GR_LOG_ONCE(GR_LOG_INFO, "collectives: MPI backend (%s)",
                  mine ? "another rank has no usable GPU" : why);
    else
      GR_LOG_ONCE(GR_LOG_INFO, "collectives: NCCL backend (%d GPU(s) visible)", ngpu);
  }
  const gr__coll_ops *ops = b == GR_BACKEND_NCCL ? &gr__coll_ops_nccl : &gr__coll_ops_mpi;
#else
  if (b == GR_BACKEND_NCCL)
    return gr__fail(GR_ERR_UNSUPPORTED, fn,
                    "cfg->backend is GR_BACKEND_NCCL but this gpurun was built without NCCL");
  if (b == GR_BACKEND_AUTO)
    GR_LOG_ONCE(GR_LOG_INFO, "collectives: MPI backend (built without NCCL; %s)",
                ngpu > 0 ? "GPUs present" : why);
  const gr__coll_ops *ops = &gr__coll_ops_mpi;
#endif
  (void)ngpu;
  return gr__comm_create_ops(mpi, cfg, ops, out);
}

gr_status gr__check_comm(const char *fn, const gr_comm *c) {
  if (!c) return gr__fail(GR_ERR_INVALID, fn, "comm is NULL");
  if (c->magic != GR__COMM_MAGIC)
    return gr__fail(GR_ERR_INVALID, fn, "comm %p is not a live communicator (destroyed?)", (void *)c);
  return GR_OK;
}

gr_status gr__check_alive(const char *fn, const gr_comm *c) {
  GR_CHECK(gr__check_comm(fn, c));
  if (c->aborted)
    return gr__fail(GR_ERR_ABORTED, fn, "communicator %s was aborted (after a timeout or "
                    "gr_comm_abort); destroy it", c->id);
  return GR_OK;
}

GR_API gr_status gr_comm_split(gr_comm *c, int color, int key, gr_comm **out) {
  static const char fn[] = "gr_comm_split";
  if (!out) return gr__fail(GR_ERR_INVALID, fn, "out is NULL");
  *out = NULL;
  GR_CHECK(gr__check_alive(fn, c));
  MPI_Comm nm = MPI_COMM_NULL;
  int rc = MPI_Comm_split(c->mpi, color < 0 ? MPI_UNDEFINED : color, key, &nm);
  if (rc != MPI_SUCCESS) return gr__fail(mpi_err(c, rc, "MPI_Comm_split"), fn, "%s", c->err);
  int n = ++c->nsplits;
  gr_comm *child = NULL;
  gr_comm_config cfg = {GR_BACKEND_AUTO, c->timeout_s, c->check};
  if (nm != MPI_COMM_NULL) {
    if (comm_alloc(&cfg, &child) != GR_OK) {
      MPI_Comm_free(&nm);
      return gr__fail(GR_ERR_NOMEM, fn, "out of memory");
    }
    child->ops = c->ops;
    child->mpi = nm;
    if (strcmp(c->id, "world") == 0)
      snprintf(child->id, sizeof child->id, "split-%d", n);
    else
      snprintf(child->id, sizeof child->id, "%.16s.%d", c->id, n % 100000);
    gr_status st = comm_finish(child, fn);
    if (st != GR_OK) {
      comm_free(child);
      return st;
    }
  }
  /* The backend split is collective over the parent (NCCL's is), so ranks without a color call it
   * too, with child NULL. */
  gr_status st = c->ops->split(c, child, color, key, gr__deadline(c->timeout_s));
  if (st != GR_OK) {
    st = gr__fail(st, fn, "%s backend: %s", c->ops->name, c->err);
    if (child) comm_free(child);
    return st;
  }
  *out = child;
  return GR_OK;
}

GR_API gr_status gr_comm_destroy(gr_comm *c) {
  static const char fn[] = "gr_comm_destroy";
  if (!c) return GR_OK; /* like free(NULL) */
  GR_CHECK(gr__check_comm(fn, c));
  gr_status st = c->ops->destroy(c, gr__deadline(c->timeout_s));
  if (st != GR_OK) st = gr__fail(st, fn, "%s backend: %s", c->ops->name, c->err);
  comm_free(c);
  return st;
}

void gr__comm_abort_internal(gr_comm *c) {
  if (c->aborted) return;
  c->aborted = 1;
  c->ops->abort(c);
}

GR_API gr_status gr_comm_abort(gr_comm *c) {
  GR_CHECK(gr__check_comm("gr_comm_abort", c));
  gr__comm_abort_internal(c);
  return GR_OK;
}

GR_API int gr_comm_rank(const gr_comm *c) { return c && c->magic == GR__COMM_MAGIC ? c->rank : -1; }
GR_API int gr_comm_size(const gr_comm *c) { return c && c->magic == GR__COMM_MAGIC ? c->size : -1; }
GR_API gr_backend gr_comm_backend(const gr_comm *c) {
  return c && c->magic == GR__COMM_MAGIC ? c->ops->kind : GR_BACKEND_AUTO;
}

int gr__coll_stats_get(const gr_comm *c, gr_coll_stats *out) {
  if (!c || c->magic != GR__COMM_MAGIC || !out) return GR_ERR_INVALID;
  *out = c->stats;
  return GR_OK;
}

