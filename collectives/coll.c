/* The collectives front end, communicator side: configuration (gr_comm_config_init), the
 * communicator life cycle (create, split, destroy, abort) with the agreement at creation, its
 * accessors and the counters' read-out. What every file asks of a communicator (its checks, the
 * abort, error details, deadlines, names) is comm_base.c's, MPI requests (the bounded wait, the
 * requests given up on) comm_wait.c's: both call nothing above them. The calls themselves
 * (argument checks, the check mode, groups, the wait loop that enforces the timeout and records
 * the flight recorder and counters) are in the front end's call files (gr_front.h). Backends only
 * start and progress work (gr_coll.h). */
#include "gr_mpi_family.h"
#include "gr_coll.h"
#include "gr_front.h"
#include "gr_mpi_error.h"

#include "gr_config.h"
#include "gr_device.h"
#include "gr_dtype.h"
#include "gr_param.h"
#include "gr_error.h"
#include "gr_flight.h"
#include "gr_live.h"
#include "gr_observe.h"
#include "gr_log.h"
#include "gr_path.h"
#include "gr_agree.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- configuration ------------------------------------------------------------------------ */

GR_API void gr_comm_config_init(gr_comm_config *cfg) {
  if (!cfg) return;
  memset(cfg, 0, sizeof *cfg);
  cfg->backend = GR_BACKEND_AUTO;
  cfg->timeout_s = gr__param_seconds(GR_PARAM_TIMEOUT);
  cfg->check = gr__param_bool(GR_PARAM_CHECK);
}

/* GPURUN_COLL_ALGO, this rank's setting (gr__coll_algo): the one place that reads it (the
 * registry, gr_param.h, parses it and says once when a word is unknown: then auto). */
static int algo_setting(void) {
  switch (gr__param_word(GR_PARAM_COLL_ALGO)) {
  case GR_COLL_ALGO_MPI:
    return GR__COLL_ALGO_MPI;
  case GR_COLL_ALGO_FLAT:
    return GR__COLL_ALGO_FLAT;
  case GR_COLL_ALGO_HIER:
    return GR__COLL_ALGO_HIER;
  case GR_COLL_ALGO_HIER_ML:
    return GR__COLL_ALGO_HIER_ML;
  default:
    return GR__COLL_ALGO_AUTO; /* auto and shm */
  }
}

/* ---- life cycle --------------------------------------------------------------------------- */

gr_status gr__comm_basics(gr_comm *c, MPI_Comm m, const char *what, int *rank, int *size) {
  const char *call = "MPI_Comm_set_errhandler";
  int rc = MPI_Comm_set_errhandler(m, MPI_ERRORS_RETURN);
  if (rc == MPI_SUCCESS && (rc = MPI_Comm_rank(m, rank)) != MPI_SUCCESS) call = "MPI_Comm_rank";
  if (rc == MPI_SUCCESS && (rc = MPI_Comm_size(m, size)) != MPI_SUCCESS) call = "MPI_Comm_size";
  if (rc == MPI_SUCCESS) return GR_OK;
  char named[128];
  snprintf(named, sizeof named, "%s on %s", call, what);
  return gr__comm_mpi_err(c, rc, named);
}

/* c->mpi is set and owned: errors return (every communicator the library creates does: no MPI
 * error of ours reaches a fatal handler), rank and size, this rank's in MPI_COMM_WORLD. A refusal
 * (only an invalid communicator gets one) leaves its sentence in c->err. */
static gr_status comm_basics(gr_comm *c) {
  GR_CHECK(gr__comm_basics(c, c->mpi, "the communicator", &c->rank, &c->size));
  int rc = MPI_Comm_rank(MPI_COMM_WORLD, &c->world_rank);
  return rc == MPI_SUCCESS ? GR_OK : gr__comm_mpi_err(c, rc, "MPI_Comm_rank on MPI_COMM_WORLD");
}

/* The sweep of the request registry (request.c, sequencer.c) that a gr__mpi_wait runs while it
 * waits (comm_wait.c): the rank's other requests move too (MPI's progress rule). */
static void sweep_requests(void) {
  if (gr__requests_outstanding()) gr__requests_sweep(NULL);
}

gr_comm *gr__comm_new(MPI_Comm mpi, const gr__comm_cfg *cfg) {
  gr_comm *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  gr__mpi_wait_sweep(sweep_requests); /* before any request on c can exist */
  c->magic = GR__COMM_MAGIC;
  gr__fork_watch();
  c->fork_gen = gr__fork_gen();
  c->pid = (int)getpid();
  c->mpi = mpi;
  c->side_mpi = MPI_COMM_NULL;
  c->timeout_s = cfg->timeout_s;
  c->check = cfg->check;
  c->algo = cfg->algo;
  c->gpu_buffers = cfg->gpu_buffers;
  c->ops = cfg->ops;
  if (mpi != MPI_COMM_NULL && comm_basics(c) != GR_OK) {
    /* the callers own mpi again on NULL; the sentence has no record left to live in */
    GR_WARN("collectives: a communicator of the library's own is not made: %s", c->err);
    c->mpi = MPI_COMM_NULL;
    gr__comm_free(c);
    return NULL;
  }
  return c;
}

void gr__comm_free(gr_comm *c) {
  if (c->flight) gr__flight_release(c->flight);
  int gone = gr__mpi_gone(); /* after MPI_Finalize only memory can be released */
  /* a request given up on still runs on them: kept until it completes (gr__mpi_abandon); one
   * that cannot be kept (out of memory) is left unfreed rather than freed under the request */
  if (!gone && gr__mpi_lost(c)) {
    MPI_Comm *m[2] = {&c->side_mpi, &c->mpi};
    for (int i = 0; i < 2; i++)
      if (!gr__mpi_keep_comm(c, m[i])) *m[i] = MPI_COMM_NULL;
  }
  gr__mpi_lost_seal(c);
  /* a release with nobody left to tell (the record goes with it): a warning */
  MPI_Comm *m[2] = {&c->side_mpi, &c->mpi};
  for (int i = 0; i < 2 && !gone; i++) {
    int rc = *m[i] != MPI_COMM_NULL ? MPI_Comm_free(m[i]) : MPI_SUCCESS;
    if (rc != MPI_SUCCESS) {
      char s[MPI_MAX_ERROR_STRING];
      GR_WARN("collectives: communicator %s: MPI_Comm_free of its %s failed: %s", c->id,
              i ? "duplicate" : "side duplicate", gr__mpi_strerror(rc, s));
    }
  }
  free(c->inband_buf);
  c->magic = 0;
  free(c);
}

/* A communicator of the public API: the configuration asked for, this rank's GPURUN_COLL_ALGO
 * (agreed in agree_uid), whether buffers may be device pointers (gpus: the caller's probe, so
 * that a sentence it recorded before stands). */
static gr_status comm_alloc(const gr_comm_config *cfg, int gpus, gr_comm **out) {
  gr__comm_cfg cc = {cfg->timeout_s, cfg->check, algo_setting(), gpus, NULL};
  *out = gr__comm_new(MPI_COMM_NULL, &cc);
  return *out ? GR_OK : GR_ERR_NOMEM;
}

static void comm_free(gr_comm *c) { gr__comm_free(c); }

/* ---- agreement at creation ---------------------------------------------------------------- */

/* What decides an algorithm, a tag or a path must be the same on every rank: whether a timeout is
 * set (blocking MPI routines or gpurun's own algorithms), check mode (an extra exchange before
 * every call) and the backend. Each rank contributes its view and its local verdict on its own
 * arguments; one agreement round (gr__agree, MAX: each setting's ON and OFF fields hold the
 * highest rank with it and without it, -1 for none) tells every rank the same thing, so all succeed
 * or all fail. */
enum {
  AG_BAD,
  AG_BAD_RANK,
  AG_TIMEOUT_ON,
  AG_TIMEOUT_OFF,
  AG_CHECK_ON,
  AG_CHECK_OFF,
  AG_GPU_NONE,
  AG_NCCL_RANK,
  AG_MPI_RANK,
  AG_N
};

typedef struct {
  gr_status bad;   /* this rank's own verdict on its arguments (its sentence is recorded) */
  gr_backend want; /* what this rank asked for: AUTO, NCCL or MPI */
  const gr__coll_ops *fixed; /* a given backend table (the NCCL test double), else NULL */
  int has_gpu;
} create_view;

static gr_status agree(gr_comm *c, const char *fn, const create_view *v, gr_backend *chosen) {
  int me = c->rank;
  int64_t x[AG_N] = {0};
  x[AG_BAD] = (int)v->bad;
  x[AG_BAD_RANK] = v->bad != GR_OK ? me : -1;
  x[AG_TIMEOUT_ON] = c->timeout_s > 0 ? me : -1;
  x[AG_TIMEOUT_OFF] = c->timeout_s > 0 ? -1 : me;
  x[AG_CHECK_ON] = c->check ? me : -1;
  x[AG_CHECK_OFF] = c->check ? -1 : me;
  x[AG_GPU_NONE] = v->has_gpu ? -1 : me;
  int64_t all[AG_N];
  gr_status st = gr__agree(c, "the configuration", GR__AGREE_MAX, x, all, AG_N);
  if (st != GR_OK) return v->bad != GR_OK ? v->bad : gr__fail(st, fn, "%s", c->err);
  if (v->bad != GR_OK) return v->bad; /* this rank's own sentence stands */
  if (all[AG_BAD] != GR_OK)
    return gr__fail((gr_status)all[AG_BAD], fn,
                    "rank %d refused its own arguments (see its "
                    "error); no rank created the communicator",
                    (int)all[AG_BAD_RANK]);
  if (all[AG_TIMEOUT_ON] >= 0 && all[AG_TIMEOUT_OFF] >= 0)
    return gr__fail(GR_ERR_MISMATCH, fn,
                    "the timeout (cfg->timeout_s, GPURUN_TIMEOUT) is set on "
                    "rank %d but not on rank %d; it decides the algorithms, so every rank of the "
                    "communicator must set one or none",
                    (int)all[AG_TIMEOUT_ON], (int)all[AG_TIMEOUT_OFF]);
  if (all[AG_CHECK_ON] >= 0 && all[AG_CHECK_OFF] >= 0)
    return gr__fail(GR_ERR_MISMATCH, fn,
                    "check mode (cfg->check, GPURUN_CHECK) is on on rank %d "
                    "but off on rank %d; every rank of the communicator must use the same",
                    (int)all[AG_CHECK_ON], (int)all[AG_CHECK_OFF]);
  /* The backend each rank would use, now that every rank knows whether all have a GPU. */
  gr_backend b = v->want;
  if (v->fixed)
    b = v->fixed->kind;
  else if (b == GR_BACKEND_AUTO)
    b = GPURUN_HAVE_NCCL && all[AG_GPU_NONE] < 0 ? GR_BACKEND_NCCL : GR_BACKEND_MPI;
  int64_t y[2] = {b == GR_BACKEND_NCCL ? me : -1, b == GR_BACKEND_NCCL ? -1 : me}, ball[2];
  st = gr__agree(c, "the backend", GR__AGREE_MAX, y, ball, 2);
  if (st != GR_OK) return gr__fail(st, fn, "%s", c->err);
  if (ball[0] >= 0 && ball[1] >= 0)
    return gr__fail(GR_ERR_MISMATCH, fn,
                    "rank %d would use the NCCL backend and rank %d the MPI "
                    "backend (cfg->backend differs, or a rank has no GPU); every rank of the "
                    "communicator must use the same",
                    (int)ball[0], (int)ball[1]);
  if (v->want == GR_BACKEND_AUTO && !v->fixed) {
    if (b == GR_BACKEND_MPI)
      GR_LOG_ONCE(GR_LOG_INFO, "collectives: MPI backend (%s)",
                  GPURUN_HAVE_NCCL
                      ? (v->has_gpu ? "another rank has no usable GPU" : "no usable GPU")
                      : "built without NCCL");
    else
      GR_LOG_ONCE(GR_LOG_INFO, "collectives: NCCL backend (every rank has a GPU)");
  }
  *chosen = b;
  return GR_OK;
}

/* ---- identity ------------------------------------------------------------------------------ */

/* Communicator creations this process took part in (atomic: threads may create at once). */
static uint32_t creations;

/* The job-unique id, agreed among the members: the lowest member's world rank L and that rank's
 * own number for this creation N, "L.N". N is unique within the process L, and L is a member, so
 * no two communicators of the job share L.N, whoever else belongs to them. name is the human one;
 * c->id, which every message uses, is "NAME[L.N]". The same round (MIN and MAX) agrees on
 * GPURUN_COLL_ALGO: its mode (c->algo), where the lowest setting wins, said once when the ranks'
 * differ; and the row it names in ops' table (c->algo_row, gr_path.h, Selection by name), selected
 * where the lowest and the highest are the same (gr__paths_create says once where they are not). */
static gr_status agree_uid(gr_comm *c, const char *fn, const char *name, const gr__coll_ops *ops) {
  uint32_t n = __atomic_add_fetch(&creations, 1, __ATOMIC_RELAXED);
  int64_t mine[3] = {(int64_t)c->world_rank * ((int64_t)1 << 32) + n, c->algo,
                     ops ? gr__path_named_row(ops->paths) : 0},
          low[6];
  gr_status st = gr__agree(c, "the communicator's id", GR__AGREE_MINMAX, mine, low, 3);
  if (st != GR_OK) return gr__fail(st, fn, "%s", c->err);
  /* low: the lowest id, setting and row, then the highest id (unused), setting and row */
  snprintf(c->uid, sizeof c->uid, "%lld.%lld", (long long)(low[0] >> 32),
           (long long)(low[0] & 0xffffffff));
  snprintf(c->name, sizeof c->name, "%s", name);
  snprintf(c->id, sizeof c->id, "%s[%s]", c->name, c->uid);
  c->algo = (int)low[1];
  c->algo_row = low[2] == low[5] ? (int)low[2] : -1;
  c->algo_row_agreed = 1;
  if (low[1] != low[4])
    GR_LOG_ONCE(GR_LOG_WARN,
                "collectives: GPURUN_COLL_ALGO differs between the ranks of "
                "communicator %s (from %s to %s); all use %s",
                c->id, gr__coll_algo_name((int)low[1]), gr__coll_algo_name((int)low[4]),
                gr__coll_algo_name((int)low[1]));
  return GR_OK;
}

/* After the agreement: the side duplicate in check mode (its fingerprints), observability (started here, over the new
 * communicator, in a program that calls neither gr_init nor names its job), the flight recorder. */
static gr_status comm_finish(gr_comm *c, const char *fn) {
  gr__live_create_step(GR_LIVE_STEP_SETUP);
  if (c->check) {
    int rc = MPI_Comm_dup(c->mpi, &c->side_mpi); /* check mode's use of it (gr_coll.h) */
    if (rc != MPI_SUCCESS)
      return gr__fail(gr__comm_mpi_err(c, rc, "MPI_Comm_dup"), fn, "%s", c->err);
  }
  gr__observe_start_over(c->mpi);
  c->flight = gr__flight_new(c->uid, c->world_rank, c->size, c->ops->name);
  gr__flight_name(c->flight, c->name);
  return GR_OK;
}

/* After the backend's create and the communicator's paths (gr_path.h): the side duplicate for the
 * verdicts the sequencer posts at requests' starts, only where some collective kind needs one
 * (no check mode, two ranks or more, a backend that joins refusals, and either a path that agrees
 * on a verdict before the call, ROUTE_AGREE, such as the MPI algorithms off the shared-memory
 * path, or a backend whose carried refusals are verdicts in front of the call,
 * GR__CAP_VERDICT_IN_FRONT: NCCL, whose blocking calls post theirs there too). The same choice on
 * every rank: check mode, size, backend and the paths are agreed. */
static gr_status req_dup(gr_comm *c, const char *fn) {
  const gr__coll_ops *o = c->ops;
  if (c->check || c->size < 2 || !(o->caps & GR__CAP_JOIN_REFUSALS)) return GR_OK;
  int agrees = (o->caps & GR__CAP_VERDICT_IN_FRONT) != 0;
  for (int kind = 0; kind < GR__NKINDS && !agrees; kind++)
    agrees = kind != GR__SEND && kind != GR__RECV && kind != GR__BARRIER &&
             gr__path_refusal(c, (gr__kind)kind) == GR__REFUSAL_AGREED;
  if (!agrees) return GR_OK;
  gr__live_create_step(GR_LIVE_STEP_REQDUP);
  int rc = MPI_Comm_dup(c->mpi, &c->side_mpi); /* the verdicts' use of it (gr_coll.h) */
  if (rc != MPI_SUCCESS) {
    c->side_mpi = MPI_COMM_NULL;
    return gr__fail(gr__comm_mpi_err(c, rc, "MPI_Comm_dup"), fn, "%s", c->err);
  }
  rc = MPI_Comm_set_errhandler(c->side_mpi, MPI_ERRORS_RETURN); /* freed with c on failure */
  if (rc != MPI_SUCCESS)
    return gr__fail(gr__comm_mpi_err(c, rc, "MPI_Comm_set_errhandler on the verdicts' duplicate"),
                    fn, "%s", c->err);
  return GR_OK;
}

#if GPURUN_HAVE_NCCL
#define NCCL_OPS_ (&gr__coll_ops_nccl)
#else
#define NCCL_OPS_ NULL
#endif

/* The creation's steps; create_over() below shows the rank inside them in the live state. */
static gr_status create_steps(MPI_Comm mpi, int world, const gr_comm_config *cfg, create_view *v,
                              gr_comm **out) {
  static const char fn[] = "gr_comm_create";
  gr_comm *c;
  gr_comm_config safe = {GR_BACKEND_AUTO, 0, 0};
  if (comm_alloc(v->bad == GR_OK ? cfg : &safe, v->has_gpu, &c) != GR_OK)
    return gr__fail(GR_ERR_NOMEM, fn,
                    "out of memory"); /* cannot join: the peers' timeout ends it */
  if (v->bad != GR_OK) c->check = cfg->check != 0, c->timeout_s = 0;
  snprintf(c->id, sizeof c->id, "%s", world ? GR_FL_WORLD : "comm"); /* until agree_uid */
  int rc = MPI_Comm_dup(mpi, &c->mpi);
  if (rc != MPI_SUCCESS) {
    gr_status st = gr__comm_mpi_err(c, rc, "MPI_Comm_dup");
    c->mpi = MPI_COMM_NULL;
    st = gr__fail(st, fn, "%s", c->err);
    comm_free(c);
    return st;
  }
  gr_status st = comm_basics(c);
  if (st != GR_OK) { /* before the agreement: the peers' timeout ends theirs, as a failed dup's */
    st = gr__fail(st, fn, "%s", c->err);
    comm_free(c);
    return st;
  }
  gr_backend b = GR_BACKEND_MPI;
  gr__live_create_step(GR_LIVE_STEP_AGREE);
  st = agree(c, fn, v, &b);
  const gr__coll_ops *ops = v->fixed               ? v->fixed
                            : b == GR_BACKEND_NCCL ? NCCL_OPS_
                                                   : &gr__coll_ops_mpi;
  if (st == GR_OK) st = agree_uid(c, fn, world ? GR_FL_WORLD : "comm", ops);
  if (st == GR_OK && !ops) st = gr__fail(GR_ERR_INTERNAL, fn, "no NCCL backend in this build");
  if (st == GR_OK) {
    c->ops = ops;
    st = comm_finish(c, fn);
  }
  if (st == GR_OK) {
    gr__live_create_step(GR_LIVE_STEP_INIT); /* the backend may say more */
    st = ops->create(c, gr__deadline(c->timeout_s));
    if (st == GR_OK && (st = gr__paths_create(c)) != GR_OK)
      ops->destroy(c, gr__deadline(c->timeout_s));
    if (st != GR_OK) st = gr__fail(st, fn, "%s backend: %s", ops->name, c->err);
    if (st == GR_OK && (st = req_dup(c, fn)) != GR_OK) {
      gr__paths_destroy(c);
      ops->destroy(c, gr__deadline(c->timeout_s));
    }
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

/* Collective over mpi from its first step (the duplicate) on: a rank waits here for the others,
 * so the live state says so (gpurun-top names the ranks that have not come) until it returns. The
 * live state is started first where the job id needs no talk (always under gr_init or gpurun). */
static gr_status create_over(MPI_Comm mpi, const gr_comm_config *cfg, create_view *v,
                             gr_comm **out) {
  int cmp = MPI_UNEQUAL, rank = 0, size = 1;
  const char *call = "MPI_Comm_compare";
  int rc = MPI_Comm_compare(mpi, MPI_COMM_WORLD, &cmp);
  if (rc == MPI_SUCCESS && (rc = MPI_Comm_rank(mpi, &rank)) != MPI_SUCCESS) call = "MPI_Comm_rank";
  if (rc == MPI_SUCCESS && (rc = MPI_Comm_size(mpi, &size)) != MPI_SUCCESS) call = "MPI_Comm_size";
  if (rc != MPI_SUCCESS) { /* an invalid mpi: its duplicate would fail on this rank alike */
    char s[MPI_MAX_ERROR_STRING];
    return gr__fail(GR_ERR_MPI, "gr_comm_create", "%s on mpi failed: %s", call,
                    gr__mpi_strerror(rc, s));
  }
  int world = cmp == MPI_IDENT || cmp == MPI_CONGRUENT;
  gr__observe_start_from_env();
  gr__live_create_begin(GR_LIVE_CALL_CREATE, GR_LIVE_STEP_DUP,
                        world ? GR_LIVE_OVER_WORLD : GR_LIVE_OVER_MPI, rank, size);
  gr_status st = create_steps(mpi, world, cfg, v, out);
  gr__live_create_end();
  return st;
}

/* The local checks a rank can fail on its own; the rank then still joins the agreement, so that
 * every rank fails instead of the others waiting for it. */
static gr_status check_config(const char *fn, const gr_comm_config *cfg) {
  if (cfg->backend != GR_BACKEND_AUTO && cfg->backend != GR_BACKEND_NCCL &&
      cfg->backend != GR_BACKEND_MPI)
    return gr__fail(GR_ERR_INVALID, fn, "cfg->backend %d is not GR_BACKEND_AUTO, _NCCL or _MPI",
                    (int)cfg->backend);
  if (!(cfg->timeout_s >= 0) || !isfinite(cfg->timeout_s))
    return gr__fail(GR_ERR_INVALID, fn, "cfg->timeout_s %g must be a finite number >= 0 (0 = none)",
                    cfg->timeout_s);
  if (!GPURUN_HAVE_NCCL && cfg->backend == GR_BACKEND_NCCL)
    return gr__fail(GR_ERR_UNSUPPORTED, fn,
                    "cfg->backend is GR_BACKEND_NCCL but this gpurun was built without NCCL");
  return GR_OK;
}

gr_status gr__comm_create_ops(MPI_Comm mpi, const gr_comm_config *cfg, const gr__coll_ops *ops,
                              gr_comm **out) {
  static const char fn[] = "gr_comm_create";
  *out = NULL;
  create_view v = {GR_OK, GR_BACKEND_AUTO, ops, 1};
  if (!(cfg->timeout_s >= 0) || !isfinite(cfg->timeout_s))
    v.bad = gr__fail(GR_ERR_INVALID, fn,
                     "cfg->timeout_s %g must be a finite number >= 0 (0 = "
                     "none)",
                     cfg->timeout_s);
  return create_over(mpi, cfg, &v, out);
}

GR_API gr_status gr_comm_create(MPI_Comm mpi, const gr_comm_config *cfg, gr_comm **out) {
  static const char fn[] = "gr_comm_create";
  /* These cannot take part in a collective at all; a rank failing them leaves the others waiting
   * in the agreement until their timeout. */
  if (!out) return gr__fail(GR_ERR_INVALID, fn, "out is NULL");
  *out = NULL;
  GR_CHECK(gr__mpi_family_check(fn)); /* before mpi reaches the running MPI */
  int inited = 0, finalized = 0;
  int rc = MPI_Initialized(&inited);
  if (rc == MPI_SUCCESS) rc = MPI_Finalized(&finalized);
  if (rc != MPI_SUCCESS) {
    char s[MPI_MAX_ERROR_STRING];
    return gr__fail(GR_ERR_STATE, fn, "asking MPI whether it is initialized failed: %s",
                    gr__mpi_strerror(rc, s));
  }
  if (!inited || finalized)
    return gr__fail(GR_ERR_STATE, fn, "MPI is %s",
                    finalized ? "already finalized" : "not initialized");
  if (mpi == MPI_COMM_NULL) return gr__fail(GR_ERR_INVALID, fn, "mpi is MPI_COMM_NULL");
  gr_comm_config def;
  gr_comm_config_init(&def);
  if (!cfg) cfg = &def;
  /* the probe first: a bad argument's sentence, recorded by check_config, must stand */
  int ndev = 0;
  gr_status dev = gr__cuda_device_count(&ndev);
  if (!GPURUN_HAVE_NCCL && cfg->backend == GR_BACKEND_AUTO)
    GR_LOG_ONCE(GR_LOG_INFO, "collectives: MPI backend (built without NCCL; %s)",
                dev == GR_OK ? "GPUs present" : gr_last_error());
  create_view v = {check_config(fn, cfg), cfg->backend, NULL, dev == GR_OK};
  return create_over(mpi, cfg, &v, out);
}

/* gr_comm_split's steps after the local checks; the caller shows the rank inside them. */
static gr_status split_steps(const char *fn, gr_comm *c, int color, int key, gr_comm **out) {
  MPI_Comm nm = MPI_COMM_NULL;
  int rc = MPI_Comm_split(c->mpi, color < 0 ? MPI_UNDEFINED : color, key, &nm);
  if (rc != MPI_SUCCESS)
    return gr__fail(gr__comm_mpi_err(c, rc, "MPI_Comm_split"), fn, "%s", c->err);
  int n = ++c->nsplits;
  gr_comm *child = NULL;
  gr_comm_config cfg = {GR_BACKEND_AUTO, c->timeout_s, c->check};
  if (nm != MPI_COMM_NULL) {
    if (comm_alloc(&cfg, c->gpu_buffers, &child) != GR_OK) {
      /* the split MPI just gave: its free fails only for an invalid handle, and out of memory
       * is the sentence either way */
      (void)MPI_Comm_free(&nm);
      return gr__fail(GR_ERR_NOMEM, fn, "out of memory");
    }
    child->ops = c->ops;
    child->mpi = nm;
    /* backend, timeout and check mode are the parent's: agreed already; GPURUN_COLL_ALGO (mode
     * and row) is this creation's, agreed in agree_uid. A failure here, before agree_uid, leaves
     * the child's other ranks to their timeout, as a failed split does. */
    gr_status bst = comm_basics(child);
    if (bst != GR_OK) {
      bst = gr__fail(bst, fn, "%s", child->err);
      comm_free(child);
      return bst;
    }
    /* the name says which split and which colour; the id tells apart what the name cannot */
    char name[sizeof child->name];
    if (strcmp(c->name, GR_FL_WORLD) == 0)
      snprintf(name, sizeof name, "split-%d:%d", n, color);
    else
      snprintf(name, sizeof name, "%.20s.%d:%d", c->name, n % 100000, color);
    snprintf(child->id, sizeof child->id, "%s", name);
    gr_status st = agree_uid(child, fn, name, child->ops);
    if (st == GR_OK) st = comm_finish(child, fn);
    if (st != GR_OK) {
      comm_free(child);
      return st;
    }
  }
  /* The backend split is collective over the parent (NCCL's is), so ranks without a color call it
   * too, with child NULL. */
  gr__live_create_step(GR_LIVE_STEP_INIT);
  gr_status st = c->ops->split(c, child, color, key, gr__deadline(c->timeout_s));
  if (st != GR_OK) {
    st = gr__fail(st, fn, "%s backend: %s", c->ops->name, c->err);
  } else if (child) {
    st = gr__paths_create(child);
    if (st != GR_OK) {
      st = gr__fail(st, fn, "%s backend: %s", c->ops->name, child->err);
      c->ops->destroy(child, gr__deadline(c->timeout_s));
    } else if ((st = req_dup(child, fn)) != GR_OK) {
      gr__paths_destroy(child);
      c->ops->destroy(child, gr__deadline(c->timeout_s));
    }
  }
  if (st != GR_OK) {
    if (child) comm_free(child);
    return st;
  }
  *out = child;
  return GR_OK;
}

GR_API gr_status gr_comm_split(gr_comm *c, int color, int key, gr_comm **out) {
  static const char fn[] = "gr_comm_split";
  if (!out) return gr__fail(GR_ERR_INVALID, fn, "out is NULL");
  *out = NULL;
  GR_CHECK(gr__check_alive(fn, c));
  GR_CHECK(gr__requests_drain(fn, c)); /* MPI_Comm_split is a collective on c->mpi */
  /* Collective over c from here on: shown in the live state like gr_comm_create. */
  gr__live_create_begin(GR_LIVE_CALL_SPLIT, GR_LIVE_STEP_SPLIT, c->uid, c->rank, c->size);
  gr_status st = split_steps(fn, c, color, key, out);
  gr__live_create_end();
  return st;
}

GR_API gr_status gr_comm_destroy(gr_comm *c) {
  static const char fn[] = "gr_comm_destroy";
  if (!c) return GR_OK; /* like free(NULL) */
  GR_CHECK(gr__check_comm(fn, c));
  long pending = __atomic_load_n(&c->pending, __ATOMIC_ACQUIRE);
  if (pending > 0)
    return gr__fail(GR_ERR_STATE, fn,
                    "communicator %s has %ld request(s) or grouped call(s) "
                    "outstanding; complete them (gr_wait, gr_group_end) before destroying it; "
                    "nothing was destroyed",
                    c->id, pending);
  if (gr__mpi_gone()) {
    /* The program called MPI_Finalize first: release our memory, touch no MPI object. */
    char id[sizeof c->id];
    snprintf(id, sizeof id, "%s", c->id);
    gr__mem_release_all(c);
    gr__paths_destroy(c);                           /* the rows' state, memory only */
    c->ops->destroy(c, gr__deadline(c->timeout_s)); /* the backends skip their MPI calls */
    comm_free(c);
    return gr__fail(GR_ERR_STATE, fn,
                    "MPI was finalized before communicator %s was destroyed; "
                    "its memory is released but its MPI objects cannot be (destroy communicators "
                    "before MPI_Finalize)",
                    id);
  }
  gr__mem_release_all(c);
  gr__paths_destroy(c); /* the rows' state (gr_path.h), then the backend's */
  gr_status st = c->ops->destroy(c, gr__deadline(c->timeout_s));
  if (st != GR_OK) st = gr__fail(st, fn, "%s backend: %s", c->ops->name, c->err);
  comm_free(c);
  gr__mpi_reap(); /* what earlier destroys kept and nothing uses any more */
  return st;
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

gr_status gr__coll_stats_get(const gr_comm *c, gr_coll_stats *out) {
  if (!c || c->magic != GR__COMM_MAGIC || !out) return GR_ERR_INVALID;
  *out = c->stats;
  return GR_OK;
}
