/* gpurun's NCCL profiler plugin, libgpurun-nccl-profiler.so (ncclprof/README.md). NCCL dlopens
 * the file NCCL_PROFILER_PLUGIN names, takes the table ncclProfiler_v5 (else ncclProfiler_v4), and
 * calls init for every communicator it makes, startEvent/stopEvent/recordEventState for the events
 * the mask init returned asks for, and finalize when the communicator goes. This file turns each
 * collective and send/receive task into a flight record (observe/gr_flight.h) on a recorder per
 * NCCL communicator, so that the flight dumps and the live state gpurun-top reads show NCCL
 * programs as they show libgpurun's and the MPI layer's.
 *
 * What a record's times mean (NCCL 2.28: src/enqueue.cc hostStreamPlanTask, src/transport/
 * profiler.cc profilerProxyProgress):
 *   start  NCCL handed the task's kernel plan to the GPU: the Coll/P2p event's start, on the thread
 *          that launched the plan (inside ncclAllReduce, or ncclGroupEnd for a group), or on
 *          CUDA's callback thread for a captured graph. Not when the GPU began: the host runs
 *          ahead of the GPU, so a record may be running long before its kernel starts.
 *   end    the GPU finished the task on every channel it used: the last of its KernelCh events
 *          stopped (NCCL's proxy thread saw the kernel's completion counter), or a kernel of a later
 *          plan of the same communicator started (a communicator's kernels run in launch order).
 *          NCCL's own stopEvent of a task only says it was enqueued and ends nothing here.
 * So a record stays running while the GPU has not finished it: a rank whose peers never arrive
 * shows the collective it is stuck in, and one that never launched it shows its last one done.
 * Numbers: seq counts the records of the communicator on this rank (tasks in plan order, the same
 * order on every rank for collectives); cseq the collectives among them, the same number for the
 * same collective on every member. NCCL's own seqNumber counts per kind of collective
 * (comm->seqNumber[func]) and so is not a number over the communicator; it is not used.
 *
 * Threads: init/finalize and the task events come from the application's threads (or CUDA's
 * callback thread), KernelCh events from NCCL's proxy thread; a mutex per communicator orders
 * them. The recorder itself is lock-free (gr_flight.h). */
#include "gr_np_abi.h"

#include "gr_clock.h"
#include "gr_error.h"
#include "gr_flight.h"
#include "gr_jobdir.h"
#include "gr_live.h"
#include "gr_log.h"
#include "gr_param.h"
#include "gr_parse.h"
#include "gr_watchdog.h"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

/* ---- the world: rank, size and job from the environment ------------------------------------ */

static int env_int(const char *const *vars, size_t n) {
  for (size_t i = 0; i < n; i++) {
    int v;
    if (gr__parse_int(getenv(vars[i]), 0, (1 << 30) - 1, &v) == GR_OK) return v;
  }
  return -1;
}

static int world_size_hint = 1; /* the first communicator's size when the environment says none */

int gr__np_world_rank(void) {
  int r = gr__process_rank();
  return r < 0 ? 0 : r;
}

int gr__np_world_size(void) {
  static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE",      "PMIX_SIZE",
                                     "SLURM_NTASKS",         "FLUX_JOB_SIZE", "WORLD_SIZE"};
  int n = env_int(vars, sizeof vars / sizeof vars[0]);
  return n > 0 ? n : world_size_hint;
}

/* ---- the plugin's state ---------------------------------------------------------------------- */

enum { ASIDE_UNDECIDED, ASIDE_NO, ASIDE_YES };
static pthread_mutex_t start_mu = PTHREAD_MUTEX_INITIALIZER;
static int aside = ASIDE_UNDECIDED; /* decided at the first init, for the process */
static char job[128];
static pthread_t poller;
static int poller_on;

#define MAGIC_TASK 0x6e707461u /* "npta" */
#define MAGIC_KCH 0x6e706b63u  /* "npkc" */
#define MAGIC_GROUP 0x6e706772u

typedef struct np_comm np_comm;

/* A collective or send/receive task: its record, and how far its kernel got. Tasks live in a ring
 * of their communicator, so that a handle NCCL gives back late (a KernelCh event of a task
 * finished meanwhile) always points at memory of ours: seq tells whether the slot still holds
 * that task. */
typedef struct {
  unsigned magic;
  np_comm *c;
  uint64_t seq, plan; /* seq: the record's number (1, 2, ...; 0: slot never used) */
  int slot;           /* the flight recorder's */
  int channels;       /* KernelCh events that finish it: its nChannels, at least 1 */
  int ch_done;        /* its KernelCh events stopped */
  int done;
} np_task;

typedef struct {
  unsigned magic;
  np_task *t;
  uint64_t seq;
} np_kch;

typedef struct {
  unsigned magic;
  np_comm *c;
  uint64_t plan;
} np_group;

/* Tasks a communicator holds at once; a task still unfinished NTASKS tasks later loses its slot
 * (its flight record went long before: the recorder keeps GR__FLIGHT_N). */
#define NTASKS 1024

struct np_comm {
  pthread_mutex_t mu;
  gr__flight *f;
  uint64_t nrec;       /* records begun */
  uint64_t nplan;      /* kernel plans (groups) seen */
  uint64_t first_open; /* no task before this seq is unfinished */
  np_task ring[NTASKS];
};

/* ---- observability's start --------------------------------------------------------------------- */

/* The dump SIGUSR1 asks for happens where a thread polls for it: libgpurun's and the MPI layer's
 * calls do, a plugin has no call to poll in (a hung rank makes no events), so a thread does. */
static void *poll_signal(void *arg) {
  (void)arg;
  for (;;) {
    struct timespec ts = {0, 100 * 1000 * 1000};
    nanosleep(&ts, NULL);
    gr__flight_poll();
  }
  return NULL;
}

/* 1 when the live file of this rank in the job directory was written by this process: another
 * recorder of the process (libgpurun's, started before its NCCL communicator) publishes already. */
static int live_file_is_mine(void) {
  const char *root = gr__param_str(GR_PARAM_MONITOR_DIR);
  if (!root || !*root) return 0;
  char path[4096], buf[512];
  snprintf(path, sizeof path, "%s/%s/live.%d", root, job, gr__np_world_rank());
  FILE *f = fopen(path, "re");
  if (!f) return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  char want[32];
  snprintf(want, sizeof want, "\npid %d\n", (int)getpid());
  return strstr(buf, want) != NULL;
}

/* Why this process records nothing, or NULL. libgpurun's NCCL backend: its gr_* calls record
 * themselves into the same files. A program linked with libgpurun.so, or statically with one
 * that calls gr_init, exports gr_init; one linked statically that never calls gr_init (its first
 * communicator starts the recorder) exports nothing to look for, but has published its live file
 * already when the live state is on. Not seen: such a program without the live state, or with the
 * MPI layer preloaded (ncclprof/README.md). */
static const char *stand_aside_reason(void) {
  /* (with the MPI layer loaded, the live file may be the layer's: not a sign then) */
  int layer = dlsym(RTLD_DEFAULT, "gr_mpi_layer_stand_aside") != NULL;
  if (dlsym(RTLD_DEFAULT, "gr_init") || (!layer && live_file_is_mine()))
    return "the program links libgpurun, whose calls record themselves (its NCCL calls are not "
           "recorded again)";
  return NULL;
}

/* The watchdog's view of the plugin (GPURUN_TIMEOUT): a record the GPU has not finished is a call
 * the process is inside; the oldest communicator's latest such record is the one it names (an
 * older record still unfinished behind it on the same communicator only delays the verdict). A
 * rank past the timeout ends with the job's hang status: the plugin has no NCCL handle to abort
 * with, and the launcher (mpirun, srun, torchrun) ends the other ranks when one exits. */
static int longest_running(gr__inside *out) {
  gr__flight_now now[GR_LIVE_MAX_COMMS];
  int n = gr__flight_latest(now, GR_LIVE_MAX_COMMS), found = 0;
  for (int i = 0; i < n; i++) {
    if (!now[i].calls || now[i].end > 0 || !now[i].op || (found && now[i].start >= out->since))
      continue;
    found = 1;
    out->op = now[i].op;
    out->seq = now[i].seq;
    out->since = now[i].start;
    _Static_assert(sizeof out->comm_id == sizeof now[i].id, "id sizes");
    _Static_assert(sizeof out->comm_name == sizeof now[i].name, "name sizes");
    memcpy(out->comm_id, now[i].id, sizeof out->comm_id);
    memcpy(out->comm_name, now[i].name, sizeof out->comm_name);
    out->comm_id[sizeof out->comm_id - 1] = out->comm_name[sizeof out->comm_name - 1] = '\0';
  }
  return found;
}

static void exit_process(int code) {
  fflush(NULL);
  _exit(code);
}

static const gr__watchdog_ops watchdog_ops = {"NCCL", longest_running, exit_process};

/* Once, at the first communicator: decide, then start the flight recorder and the live state. */
static int started(uint64_t comm_hash, int nranks) {
  pthread_mutex_lock(&start_mu);
  if (aside == ASIDE_UNDECIDED) {
    /* torch's launchers set RANK, which the base does not read */
    static const char *const rvars[] = {"RANK"};
    if (gr__process_rank() < 0) {
      int r = env_int(rvars, 1);
      if (r >= 0) gr__set_process_rank(r);
    }
    world_size_hint = nranks > 0 ? nranks : 1;
    if (gr__monitor_job_from_env(job, sizeof job) != 0) /* no launcher's id: the first comm's */
      snprintf(job, sizeof job, "nccl-%016llx", (unsigned long long)comm_hash);
    const char *why = stand_aside_reason();
    if (why) {
      aside = ASIDE_YES;
      GR_INFO("the NCCL profiler plugin stands aside: %s", why);
    } else {
      aside = ASIDE_NO;
      /* The MPI layer, when preloaded into an MPI program that calls NCCL (nccl-tests), records
       * the MPI calls into a flight recorder and live file of its own, under the same names:
       * one publisher per rank, and a GPU program's NCCL calls are what it waits in. */
      void (*mpi_aside)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "gr_mpi_layer_stand_aside");
      if (mpi_aside) mpi_aside();
      gr__flight_arm(job);
      gr__live_setup(job);
      if (GR_LOG_ENABLED(GR_LOG_DEBUG) || gr__param_bool(GR_PARAM_FLIGHT)) {
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        poller_on = pthread_create(&poller, NULL, poll_signal, NULL) == 0;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (poller_on) pthread_detach(poller);
      }
      gr__watchdog_start(job, gr__np_world_rank(), gr__np_world_size(), &watchdog_ops);
      GR_DEBUG("the NCCL profiler plugin records this rank's NCCL calls (job %s)", job);
    }
  }
  int on = aside == ASIDE_NO;
  pthread_mutex_unlock(&start_mu);
  return on;
}

/* ---- names ----------------------------------------------------------------------------------- */

static int kind_of(const char *func) {
  if (!func) return -1;
#define NP_KIND(name, cls)                                                                         \
  if (!strcmp(func, #name)) return GR__NCCL_##name;
  GR__NCCL_CALLS(NP_KIND)
#undef NP_KIND
  return -1;
}

/* NCCL's datatype names (src/collectives.cc ncclDatatypeToString); -1 for those gpurun has no
 * type for (fp8, "Unknown", which NCCL 2.28 also says for ncclUint8). */
static int dtype_of(const char *name) {
  static const struct {
    const char *n;
    gr_dtype t;
  } map[] = {{"ncclInt8", GR_INT8},       {"ncclUint8", GR_UINT8},
             {"ncclInt32", GR_INT32},     {"ncclUint32", GR_UINT32},
             {"ncclInt64", GR_INT64},     {"ncclUint64", GR_UINT64},
             {"ncclFloat16", GR_FLOAT16}, {"ncclBfloat16", GR_BFLOAT16},
             {"ncclFloat32", GR_FLOAT32}, {"ncclFloat64", GR_FLOAT64}};
  for (size_t i = 0; name && i < sizeof map / sizeof map[0]; i++)
    if (!strcmp(name, map[i].n)) return (int)map[i].t;
  return -1;
}

/* ---- tasks ------------------------------------------------------------------------------------- */

static np_task *task_at(np_comm *c, uint64_t seq) { return &c->ring[(seq - 1) % NTASKS]; }

/* Under c->mu. */
static void task_finish(np_comm *c, np_task *t, double now) {
  if (t->done) return;
  t->done = 1;
  gr__flight_end(c->f, t->slot, t->seq, GR__FL_DONE, now);
}

/* The common part of a v5 or v4 task descriptor. */
typedef struct {
  const char *func, *datatype;
  size_t count;
  int root, peer, channels;
  void *group; /* the plan's group event (our np_group), or NULL */
} task_descr;

static np_task *task_start(np_comm *c, const task_descr *d) {
  int kind = kind_of(d->func);
  if (kind < 0) return NULL;
  const np_group *g = d->group;
  int p2p = gr__kind_is_p2p(kind);
  int rooted = kind == GR__NCCL_Broadcast || kind == GR__NCCL_Reduce || kind == GR__NCCL_Gather ||
               kind == GR__NCCL_Scatter;
  double now = gr__wall_now();
  pthread_mutex_lock(&c->mu);
  uint64_t seq = ++c->nrec;
  np_task *t = task_at(c, seq);
  t->magic = MAGIC_TASK;
  t->c = c;
  t->seq = seq;
  t->plan = g && g->magic == MAGIC_GROUP && g->c == c ? g->plan : ++c->nplan;
  t->channels = d->channels > 0 ? d->channels : 1;
  t->ch_done = 0;
  t->done = 0;
  t->slot = gr__flight_begin(c->f, seq, kind, d->count, dtype_of(d->datatype),
                             rooted ? d->root : -1, p2p ? d->peer : -1, -1, now);
  if (c->first_open + NTASKS <= seq) c->first_open = seq - NTASKS + 1;
  pthread_mutex_unlock(&c->mu);
  return t;
}

static np_kch *kernel_start(np_task *t) {
  if (!t || t->magic != MAGIC_TASK) return NULL;
  np_kch *k = malloc(sizeof *k);
  if (!k) return NULL;
  np_comm *c = t->c;
  double now = gr__wall_now();
  pthread_mutex_lock(&c->mu);
  k->magic = MAGIC_KCH;
  k->t = t;
  k->seq = t->seq;
  /* a kernel of a later plan runs: every earlier plan's kernel has finished */
  for (uint64_t s = c->first_open; s && s < t->seq; s++) {
    np_task *o = task_at(c, s);
    if (o->seq == s && o->plan < t->plan) task_finish(c, o, now);
  }
  while (c->first_open && c->first_open <= c->nrec && task_at(c, c->first_open)->done)
    c->first_open++;
  pthread_mutex_unlock(&c->mu);
  return k;
}

static void kernel_stop(np_kch *k) {
  np_task *t = k->t;
  np_comm *c = t->c;
  double now = gr__wall_now();
  pthread_mutex_lock(&c->mu);
  if (t->seq == k->seq && ++t->ch_done >= t->channels) task_finish(c, t, now);
  pthread_mutex_unlock(&c->mu);
  k->magic = 0;
  free(k);
}

/* ---- the interface ----------------------------------------------------------------------------- */

/* Events asked for: the plans (groups, so that a plan's tasks are told apart from the next plan's),
 * their tasks, and the kernel's channels (their end). */
#define MASK (gr_npGroup | gr_npColl | gr_npP2p | gr_npKernelCh)

static gr_np_result np_init(void **context, uint64_t comm_hash, int *mask, const char *name,
                            int nnodes, int nranks, int rank) {
  (void)nnodes;
  *context = NULL;
  if (!started(comm_hash, nranks)) {
    /* NCCL's mask is one for the process: no events at all */
    *mask = 0;
    return 0;
  }
  np_comm *c = calloc(1, sizeof *c);
  if (!c) return 2; /* ncclSystemError: NCCL goes on without the plugin for this communicator */
  pthread_mutex_init(&c->mu, NULL);
  c->first_open = 1;
  char id[32];
  /* NCCL's commHash: the same on every member, and another for every communicator */
  snprintf(id, sizeof id, "n%016llx", (unsigned long long)comm_hash);
  c->f = gr__flight_new(id, rank, nranks, "nccl");
  if (c->f) gr__flight_name(c->f, name && *name ? name : id);
  *mask = MASK;
  *context = c;
  return 0;
}

static gr_np_result np_init_v5(void **context, uint64_t comm_hash, int *mask, const char *name,
                               int nnodes, int nranks, int rank, gr_np_logger logfn) {
  (void)logfn;
  return np_init(context, comm_hash, mask, name, nnodes, nranks, rank);
}

static gr_np_result np_init_v4(void **context, int *mask, const char *name, uint64_t comm_hash,
                               int nnodes, int nranks, int rank, gr_np_logger logfn) {
  (void)logfn;
  return np_init(context, comm_hash, mask, name, nnodes, nranks, rank);
}

static void *group_start(np_comm *c) {
  np_group *g = malloc(sizeof *g);
  if (!g) return NULL;
  g->magic = MAGIC_GROUP;
  g->c = c;
  pthread_mutex_lock(&c->mu);
  g->plan = ++c->nplan;
  pthread_mutex_unlock(&c->mu);
  return g;
}

static gr_np_result np_start_v5(void *context, void **handle, gr_np_descr_v5 *e) {
  *handle = NULL;
  np_comm *c = context;
  if (!c || !e) return 0;
  if (e->type == gr_npGroup) {
    *handle = group_start(c);
  } else if (e->type == gr_npColl) {
    task_descr d = {e->coll.func, e->coll.datatype,  e->coll.count,      e->coll.root,
                    -1,           e->coll.nChannels, e->coll.parentGroup};
    *handle = task_start(c, &d);
  } else if (e->type == gr_npP2p) {
    task_descr d = {e->p2p.func, e->p2p.datatype,  e->p2p.count,      -1,
                    e->p2p.peer, e->p2p.nChannels, e->p2p.parentGroup};
    *handle = task_start(c, &d);
  } else if (e->type == gr_npKernelCh) {
    *handle = kernel_start(e->parentObj);
  }
  return 0;
}

static gr_np_result np_start_v4(void *context, void **handle, gr_np_descr_v4 *e) {
  *handle = NULL;
  np_comm *c = context;
  if (!c || !e) return 0;
  if (e->type == gr_npGroup) {
    *handle = group_start(c);
  } else if (e->type == gr_npColl) {
    task_descr d = {e->coll.func, e->coll.datatype,  e->coll.count, e->coll.root,
                    -1,           e->coll.nChannels, e->parentObj};
    *handle = task_start(c, &d);
  } else if (e->type == gr_npP2p) {
    task_descr d = {e->p2p.func, e->p2p.datatype,  e->p2p.count, -1,
                    e->p2p.peer, e->p2p.nChannels, e->parentObj};
    *handle = task_start(c, &d);
  } else if (e->type == gr_npKernelCh) {
    *handle = kernel_start(e->parentObj);
  }
  return 0;
}

static gr_np_result np_stop(void *handle) {
  if (!handle) return 0;
  unsigned magic = *(unsigned *)handle;
  if (magic == MAGIC_KCH) { /* a task's stop says it was enqueued: nothing ends */
    kernel_stop(handle);
  } else if (magic == MAGIC_GROUP) {
    ((np_group *)handle)->magic = 0;
    free(handle);
  }
  return 0;
}

/* KernelChStop carries the GPU's timer; the record's end is the host's clock at stopEvent, the
 * only clock the other records use. */
static gr_np_result np_record(void *handle, int state, gr_np_state_args *args) {
  (void)handle;
  (void)state;
  (void)args;
  return 0;
}

/* NCCL's last call for the communicator (destroy or abort): a record still running (an aborted
 * communicator's) stays as it is in an exit dump, and the recorder leaves the live state. */
static gr_np_result np_finalize(void *context) {
  np_comm *c = context;
  if (!c) return 0;
  gr__flight_release(c->f);
  pthread_mutex_destroy(&c->mu);
  free(c);
  return 0;
}

EXPORT const gr_np_profiler_v5 ncclProfiler_v5 = {"gpurun", np_init_v5, np_start_v5,
                                                  np_stop,  np_record,  np_finalize};
EXPORT const gr_np_profiler_v4 ncclProfiler_v4 = {"gpurun", np_init_v4, np_start_v4,
                                                  np_stop,  np_record,  np_finalize};
