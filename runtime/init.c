/* gr_init / gr_finalize: MPI, the plan, the device, the world communicator, the default pool, and
 * the counters file at the end. The one piece of process-wide state of the runtime lives here. */
#include <gpurun/runtime.h>

#include "gr_clock.h"
#include "gr_coll.h"
#include "gr_config.h"
#include "gr_counters.h"
#include "gr_observe.h"
#include "gr_device.h"
#include "gr_error.h"
#include "gr_fork.h"
#include "gr_mpi_error.h"
#include "gr_mpi_family.h"
#include "gr_log.h"
#include "gr_param.h"
#include "gr_plan.h"
#include "gr_pool.h"
#include "gr_priority.h"
#include "gr_receipt.h"

#include <hwloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if GPURUN_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

extern char **environ;

enum { ST_NEVER, ST_UP, ST_DOWN };

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int state = ST_NEVER; /* guarded by lock; read atomically by gr_initialized */
static int we_initialised_mpi;
static gr_comm *world;
static gr_pool *pool;
static gr_rank_info_t info;
static double t_init;
static unsigned init_gen; /* the process generation gr_init ran in (gr_fork.h) */
static int init_pid;
static char job[128];

static const char *thread_level_name(int level) {
  switch (level) {
  case MPI_THREAD_SINGLE:
    return "MPI_THREAD_SINGLE";
  case MPI_THREAD_FUNNELED:
    return "MPI_THREAD_FUNNELED";
  case MPI_THREAD_SERIALIZED:
    return "MPI_THREAD_SERIALIZED";
  case MPI_THREAD_MULTIPLE:
    return "MPI_THREAD_MULTIPLE";
  default:
    return "unknown";
  }
}

static gr_status mpi_fail(int rc, const char *what) {
  char msg[MPI_MAX_ERROR_STRING];
  return gr__fail(GR_ERR_MPI, "gr_init", "%s: %s", what, gr__mpi_strerror(rc, msg));
}

/* Without a plan: local rank and size from the ranks that share this node's memory. */
static gr_status local_from_mpi(gr_rank_info_t *r) {
  MPI_Comm node;
  int rc = MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, r->rank, MPI_INFO_NULL, &node);
  if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)");
  MPI_Comm_rank(node, &r->local_rank);
  MPI_Comm_size(node, &r->local_size);
  MPI_Comm_free(&node);
  return GR_OK;
}

/* Without a plan: the cpuset this process is bound to (hwloc), and its NUMA node when it has one.
 */
static void cpus_from_hwloc(gr_rank_info_t *r) {
  hwloc_topology_t topo;
  if (hwloc_topology_init(&topo) != 0) return;
  if (hwloc_topology_load(topo) == 0) {
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    if (set && hwloc_get_cpubind(topo, set, HWLOC_CPUBIND_PROCESS) == 0 &&
        !hwloc_bitmap_iszero(set)) {
      if (hwloc_bitmap_list_snprintf(r->cpus, sizeof r->cpus, set) >= (int)sizeof r->cpus)
        r->cpus[0] = '\0'; /* does not fit: better none than a cut list */
      hwloc_bitmap_t nodes = hwloc_bitmap_alloc();
      if (nodes) {
        hwloc_cpuset_to_nodeset(topo, set, nodes);
        if (hwloc_bitmap_weight(nodes) == 1) r->numa = hwloc_bitmap_first(nodes);
        hwloc_bitmap_free(nodes);
      }
    }
    hwloc_bitmap_free(set);
  }
  hwloc_topology_destroy(topo);
}

/* The rank's first visible GPU becomes the current device; none means CPU mode. */
static void select_device(gr_rank_info_t *r) {
  int n = 0;
  if (gr__cuda_device_count(&n) != GR_OK) {
    GR_LOG_ONCE(GR_LOG_INFO, "no GPU (%s): CPU mode, collectives on the MPI backend",
                gr_last_error());
    if (r->ngpus)
      GR_INFO("the plan gave this rank %d GPU(s) (%s...) but none is usable", r->ngpus, r->gpus[0]);
    r->ngpus = 0; /* CPU mode: the rank uses no GPU, whatever the plan hoped */
    return;
  }
#if GPURUN_HAVE_CUDA
  /* The plan's first GPU, found by PCI bus id (with gpurun --visible-devices all it need not be
   * device 0); device 0 when no plan or no match. */
  int dev = 0;
  unsigned pd, pb, pdev, pf;
  if (r->from_plan && r->ngpus > 0 && sscanf(r->gpus[0], "%x:%x:%x.%x", &pd, &pb, &pdev, &pf) == 4)
    for (int d = 0; d < n; d++) {
      char bus[32];
      unsigned cd, cb, cdev, cf;
      if (cudaDeviceGetPCIBusId(bus, (int)sizeof bus, d) == cudaSuccess &&
          sscanf(bus, "%x:%x:%x.%x", &cd, &cb, &cdev, &cf) == 4 && cd == pd && cb == pb &&
          cdev == pdev && cf == pf) {
        dev = d;
        break;
      }
    }
  cudaError_t e = cudaSetDevice(dev);
  if (e != cudaSuccess) {
    GR_WARN("cudaSetDevice(%d): %s; continuing in CPU mode", dev, cudaGetErrorString(e));
    return;
  }
  if (!r->from_plan) {
    /* No plan: report every GPU this process sees, by PCI id. */
    r->ngpus = 0;
    for (int d = 0; d < n && r->ngpus < GR_MAX_RANK_GPUS; d++)
      if (cudaDeviceGetPCIBusId(r->gpus[r->ngpus], (int)sizeof r->gpus[0], d) == cudaSuccess)
        r->ngpus++;
  }
  GR_INFO("using GPU %s (CUDA device %d of %d visible)", r->ngpus ? r->gpus[0] : "?", dev, n);
#endif
}

/* One job directory name for the counters, the flight recorder and the live state, agreed on by
 * all ranks and handed to observability before the world communicator exists. */
static void agree_on_job(void) {
  gr__job_agree(MPI_COMM_WORLD, job, sizeof job);
  gr__observe_start(job);
}

static void teardown(void) {
  if (pool) gr_pool_destroy(pool);
  pool = NULL;
  if (world) gr_comm_destroy(world);
  world = NULL;
}

GR_API gr_status gr_init(int *argc, char ***argv) {
  static const char fn[] = "gr_init";
  pthread_mutex_lock(&lock);
  if (state != ST_NEVER) {
    int was = state;
    pthread_mutex_unlock(&lock);
    return gr__fail(GR_ERR_STATE, fn,
                    was == ST_UP ? "gpurun is already initialised (call gr_finalize first)"
                                 : "called after gr_finalize; the runtime cannot be started twice "
                                   "(MPI cannot be re-initialised)");
  }
  gr_status st = gr__mpi_family_check(fn); /* before any handle reaches the running MPI */
  if (st != GR_OK) {
    pthread_mutex_unlock(&lock);
    return st;
  }
  int inited = 0, finalized = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&finalized);
  if (finalized) {
    pthread_mutex_unlock(&lock);
    return gr__fail(GR_ERR_STATE, fn, "MPI is already finalized");
  }
  int provided = MPI_THREAD_SINGLE;
  if (!inited) {
    int rc = MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
    if (rc != MPI_SUCCESS) {
      pthread_mutex_unlock(&lock);
      return mpi_fail(rc, "MPI_Init_thread");
    }
    we_initialised_mpi = 1;
  } else {
    MPI_Query_thread(&provided);
  }
  memset(&info, 0, sizeof info);
  MPI_Comm_rank(MPI_COMM_WORLD, &info.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &info.size);
  gr__set_process_rank(info.rank);
  if (provided < MPI_THREAD_MULTIPLE)
    GR_INFO("MPI%s gives %s, not MPI_THREAD_MULTIPLE: call gpurun collectives from one thread at a "
            "time",
            inited ? " (initialised by the program)" : "", thread_level_name(provided));
  else
    GR_INFO("MPI %s thread level %s", inited ? "initialised by the program," : "initialised,",
            thread_level_name(provided));
  if (gethostname(info.node, sizeof info.node) != 0)
    snprintf(info.node, sizeof info.node, "localhost");
  info.node[sizeof info.node - 1] = '\0';

  /* The plan, read once here: its gr_rank_info_t part is copied over field by field, and the
   * receipt and the default pool below take it as it is. */
  gr_plan plan;
  _Static_assert(sizeof plan.gpus == sizeof info.gpus && sizeof plan.cpus == sizeof info.cpus &&
                     sizeof plan.nic == sizeof info.nic,
                 "gr_plan and gr_rank_info_t disagree on a field size");
  memset(&plan, 0, sizeof plan);
  if (gr__plan_parse(environ, &plan) != GR_OK) {
    /* A broken plan must not pass silently, but the program can still run without it. */
    GR_WARN("%s; ignoring gpurun's plan", gr_last_error());
  }
  info.from_plan = plan.from_plan;
  info.local_rank = plan.local_rank;
  info.local_size = plan.local_size;
  info.ngpus = plan.ngpus;
  memcpy(info.gpus, plan.gpus, sizeof info.gpus);
  memcpy(info.cpus, plan.cpus, sizeof info.cpus);
  info.numa = plan.numa;
  memcpy(info.nic, plan.nic, sizeof info.nic);
  if (!info.from_plan) {
    GR_INFO("no gpurun plan (" GR_PLAN_VAR_VERSION " unset): local rank from MPI, cpuset from "
            "hwloc");
    GR_CHECK_GOTO(local_from_mpi(&info), st, fail);
    cpus_from_hwloc(&info);
  }
  select_device(&info);
  /* gpurun --priority: gr_stream_create's level, the counters' field */
  gr__priority_set(gr__param_word(GR_PARAM_PRIORITY));
  /* The receipt: what this process got against the plan. GPURUN_VERIFY=strict makes a
   * difference an error, =off skips the check, =warn (the default) warns. */
  {
    int verify = gr__param_word(GR_PARAM_VERIFY);
    if (verify != GR_VERIFY_OFF) {
      if (gr__receipt_check(&info, &plan, environ) > 0) {
        if (verify == GR_VERIFY_STRICT) {
          st = gr__fail_msg(GR_ERR_MISMATCH,
                            "placement differs from gpurun's plan (GPURUN_VERIFY=strict): %s",
                            info.receipt);
          goto fail;
        }
        GR_WARN("rank %d: placement differs from gpurun's plan: %s", info.rank, info.receipt);
      }
    } else
      info.receipt_differs = -1;
  }
  agree_on_job();

  GR_CHECK_GOTO(gr_comm_create(MPI_COMM_WORLD, NULL, &world), st, fail);
  info.backend = gr_comm_backend(world);

  gr_pool_config pc;
  gr_pool_config_init(&pc);
  /* nthreads 0: the pool takes one worker per core of this process's cpuset - the rank's share
   * under mpirun/gpurun binding (and, in the pool, intersected with the plan's cpuset). */
  pc.nthreads = 0;
  GR_CHECK_GOTO(gr__pool_create_planned(&pc, &plan, &pool), st, fail);

  t_init = gr__mono_now();
  gr__fork_watch();
  init_gen = gr__fork_gen();
  init_pid = (int)getpid();
  __atomic_store_n(&state, ST_UP, __ATOMIC_RELEASE);
  GR_INFO("rank %d of %d, local %d of %d on %s, %d GPU(s), cpus '%s', pool of %d, backend %s",
          info.rank, info.size, info.local_rank, info.local_size, info.node, info.ngpus, info.cpus,
          gr_pool_nthreads(pool), info.backend == GR_BACKEND_NCCL ? "nccl" : "mpi");
  pthread_mutex_unlock(&lock);
  return GR_OK;

fail:
  /* The failing step recorded its sentence; re-record it under gr_init's name (kept here first:
   * the teardown may record sentences of its own). */
  {
    char why[1024];
    snprintf(why, sizeof why, "%s", gr_last_error());
    teardown();
    if (we_initialised_mpi) {
      MPI_Finalize();
      we_initialised_mpi = 0;
      __atomic_store_n(&state, ST_DOWN, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&lock);
    return gr__fail(st, fn, "%s", why);
  }
}

static void write_counters(void) {
  const char *dir = gr__param_str(GR_PARAM_MONITOR_DIR);
  if (!dir) return;
  gr_coll_stats cs;
  int have_coll = world && gr__coll_stats_get(world, &cs) == GR_OK;
  gr__pool_stats ps;
  if (pool) gr__pool_get_stats(pool, &ps);
  if (gr__counters_write(dir, &info, job, gr__priority_level_name(), gr__mono_now() - t_init,
                         have_coll ? &cs : NULL, pool ? &ps : NULL,
                         pool ? gr_pool_nthreads(pool) : 0) != GR_OK)
    GR_WARN("monitor: counters not written: %s", gr_last_error());
}

GR_API gr_status gr_finalize(void) {
  static const char fn[] = "gr_finalize";
  pthread_mutex_lock(&lock);
  if (state != ST_UP) {
    int was = state;
    pthread_mutex_unlock(&lock);
    return gr__fail(GR_ERR_STATE, fn,
                    was == ST_NEVER ? "gpurun is not initialised (call gr_init first)"
                                    : "gpurun is already finalized");
  }
  if (!gr__fork_mine(init_gen)) { /* the parent's MPI, pool and communicators */
    pthread_mutex_unlock(&lock);
    return gr__fail(GR_ERR_STATE, fn,
                    "gr_init ran in process %d; this process is a child of fork() and cannot "
                    "finalize what the parent initialised; nothing was done",
                    init_pid);
  }
  /* Requests on the world communicator still outstanding: refuse before anything is finalized
   * (the counters, the pool, the world, MPI), so that the gr_wait the sentence advises still
   * works and a later gr_finalize does the whole job. */
  long pending = world ? __atomic_load_n(&world->pending, __ATOMIC_ACQUIRE) : 0;
  if (pending > 0) {
    char id[sizeof world->id];
    snprintf(id, sizeof id, "%s", world->id);
    pthread_mutex_unlock(&lock);
    return gr__fail(GR_ERR_STATE, fn,
                    "the world communicator %s has %ld request(s) or grouped call(s) outstanding; "
                    "complete them (gr_wait, gr_group_end), then call gr_finalize again; nothing "
                    "was finalized",
                    id, pending);
  }
  write_counters();
  __atomic_store_n(&state, ST_DOWN, __ATOMIC_RELEASE);
  gr_status st = GR_OK;
  int mpi_gone = 0;
  MPI_Finalized(&mpi_gone);
  if (pool) {
    gr_status s = gr_pool_destroy(pool);
    if (s != GR_OK && st == GR_OK) st = s;
    pool = NULL;
  }
  if (world) {
    gr_status s = gr_comm_destroy(world);
    if (s != GR_OK && st == GR_OK) st = s;
    world = NULL;
  }
  if (we_initialised_mpi) {
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin) MPI_Finalize();
    we_initialised_mpi = 0;
  }
  pthread_mutex_unlock(&lock);
  if (mpi_gone)
    return gr__fail(GR_ERR_STATE, fn,
                    "the program called MPI_Finalize before gr_finalize: gpurun "
                    "released its pool and memory but not its MPI communicators (call gr_finalize "
                    "before MPI_Finalize)");
  if (st != GR_OK) {
    char why[1024];
    snprintf(why, sizeof why, "%s", gr_last_error());
    return gr__fail(st, fn, "%s", why);
  }
  return GR_OK;
}

GR_API int gr_initialized(void) { return __atomic_load_n(&state, __ATOMIC_ACQUIRE) == ST_UP; }

GR_API gr_comm *gr_world(void) { return gr_initialized() ? world : NULL; }

GR_API gr_pool *gr_default_pool(void) { return gr_initialized() ? pool : NULL; }

GR_API gr_status gr_rank_info(gr_rank_info_t *out) {
  static const char fn[] = "gr_rank_info";
  if (!out) return gr__fail(GR_ERR_INVALID, fn, "out is NULL");
  int s = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
  if (s != ST_UP)
    return gr__fail(GR_ERR_STATE, fn,
                    s == ST_NEVER ? "gpurun is not initialised (call gr_init first)"
                                  : "called after gr_finalize");
  *out = info;
  return GR_OK;
}

GR_API size_t gr_rank_info_sizeof(void) { return sizeof(gr_rank_info_t); }
