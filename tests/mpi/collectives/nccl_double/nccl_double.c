/* NCCL TEST DOUBLE (test-only, never installed, never chosen by a user build).
 *
 * The NCCL and CUDA runtime entry points collectives/backend_nccl.c calls, implemented over MPI
 * and host memory, so that the NCCL backend's own logic (bootstrap by MPI_Bcast of the unique id,
 * non-blocking init/split/finalize, groups, alltoall by grouped send/recv, stream ordering,
 * staging of host buffers, error mapping, timeout and abort) runs in CI on machines without a GPU,
 * under the same exact-result tests as the MPI backend. It proves our glue, not NCCL: NCCL's
 * algorithms, kernels and transports never run here.
 *
 * Model: "device memory" is malloc'ed memory registered in a list (so cudaPointerGetAttributes can
 * tell it from host memory, and the collectives refuse host pointers as NCCL would); a stream is a
 * FIFO of items (copies, NCCL operations) progressed by cudaStreamQuery/Synchronize and
 * ncclCommGetAsyncError; an NCCL operation becomes MPI non-blocking requests when it reaches the
 * head of its stream. Non-blocking communicators report ncclInProgress for a couple of polls after
 * init/split, and while finalizing until their work has drained.
 * Devices: each process sees one fake GPU (device 0). GRDBL_GPUS="B0,B1,..." gives world rank r
 * the GPU with PCI bus id B(r mod count), e.g. "0000:1b:00.0,0000:1b:00.0" puts two ranks on one
 * GPU (--ranks-per-gpu 2, MPS); "0000:1b:00.0/mig1" is a MIG instance of that GPU, which reports
 * its parent's bus id as real CUDA does. Unset: every rank has a GPU of its own. Like NCCL 2.28,
 * ncclCommInitRankConfig refuses two ranks on one GPU of one host with ncclInvalidUsage "Duplicate
 * GPU detected : rank X and rank Y both on CUDA device <busId as hex>" (init.cc, initTransportsRank).
 * Bootstrap: over all of MPI_COMM_WORLD when the communicator is the world in world order, else
 * point to point on MPI_COMM_WORLD through the process that made the unique id (it must take part,
 * as rank 0), then MPI_Comm_create_group over the members.
 * Profiler plugin: like NCCL 2.28 (src/plugin/profiler.cc), the double loads the plugin
 * NCCL_PROFILER_PLUGIN names (unset: libnccl-profiler.so; "none": no plugin), takes its table
 * ncclProfiler_v5, else ncclProfiler_v4 (GRDBL_PROFILER_V4=1: v4 only, as NCCL 2.23-2.25 would),
 * calls init for every communicator made (commHash the same on every member), at each launch of a
 * plan (an operation outside a group, or ncclGroupEnd) the Group event and each task's Coll or P2p
 * event, started and stopped back to back as hostStreamPlanTask does (colls first, then p2ps;
 * AllGather and Broadcast counted in bytes of ncclInt8 as NCCL's collTaskAppend does), a KernelCh
 * event per task (one channel) from the moment its "kernel" starts (the operation reaches the
 * head of its stream) until it finishes (recordEventState KernelChStop, then stopEvent), and
 * finalize when the communicator is destroyed or aborted; the last finalize closes the library.
 * Only the events the mask init returned asks for are made (NCCL's gating); the API events
 * (GroupApi, CollApi, P2pApi, KernelLaunch) and the proxy's (ProxyOp, ProxyStep, ProxyCtrl,
 * NetPlugin) are not modelled, nor versions 1 to 3.
 * Limits: a group's operations go to the first operation's stream. */
#include "nccl.h"

#include <dlfcn.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "gr_dtype.h"
/* NCCL's profiler plugin interface, the copy gpurun's plugin is built with */
#include "../../../../ncclprof/gr_np_abi.h"

/* ---- memory ------------------------------------------------------------------------------- */

typedef struct alloc {
  char *p;
  size_t n;
  int pinned;
  int nccl; /* ncclMemAlloc's: ncclMemFree frees it, cudaFree refuses it */
  struct alloc *next;
} alloc;
static alloc *allocs;
static cudaError_t last_cuda;

static alloc *find(const void *p) {
  for (alloc *a = allocs; a; a = a->next)
    if ((const char *)p >= a->p && (const char *)p < a->p + (a->n ? a->n : 1)) return a;
  return NULL;
}

static cudaError_t do_alloc(void **p, size_t bytes, int pinned, int nccl) {
  alloc *a = calloc(1, sizeof *a);
  if (!p || !a) return free(a), cudaErrorInvalidValue;
  /* device memory on pages of its own, as a GPU's allocations never share a page with the host
   * heap (gr_mem_register refuses pages that overlap memory already registered or allocated) */
  void *q = NULL;
  size_t room = ((bytes ? bytes : 1) + 4095) & ~(size_t)4095;
  if (pinned ? (q = malloc(bytes ? bytes : 1)) == NULL : posix_memalign(&q, 4096, room) != 0)
    return free(a), last_cuda = cudaErrorMemoryAllocation;
  a->p = q;
  memset(a->p, 0xA5, bytes); /* uninitialised device memory is not zero */
  a->n = bytes;
  a->pinned = pinned;
  a->nccl = nccl;
  a->next = allocs;
  allocs = a;
  *p = a->p;
  return cudaSuccess;
}

static cudaError_t do_free(void *p, int pinned, int nccl) {
  if (!p) return cudaSuccess;
  for (alloc **q = &allocs; *q; q = &(*q)->next)
    if ((*q)->p == p && (*q)->pinned == pinned && (*q)->nccl == nccl) {
      alloc *a = *q;
      *q = a->next;
      free(a->p);
      free(a);
      return cudaSuccess;
    }
  return last_cuda = cudaErrorInvalidValue;
}

/* ---- devices ------------------------------------------------------------------------------ */

/* This rank's entry of GRDBL_GPUS, or a bus id of its own ("0000:<world rank + 1>:00.0"). A MIG
 * suffix ("/migN") is dropped: the instance reports its parent GPU's bus id. Hostile input (too
 * long, characters outside a bus id) is refused. */
static cudaError_t my_bus_id(char *out, size_t len) {
  int wrank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
  const char *env = getenv("GRDBL_GPUS");
  char id[64];
  if (!env || !*env) {
    snprintf(id, sizeof id, "0000:%02x:00.0", (wrank + 1) & 0xff);
  } else {
    int n = 1;
    for (const char *p = env; *p; p++)
      n += *p == ',';
    int want = wrank % n;
    const char *p = env;
    for (int i = 0; i < want; i++)
      p = strchr(p, ',') + 1;
    size_t l = strcspn(p, ",/");
    if (l == 0 || l >= sizeof id || strspn(p, "0123456789abcdefABCDEF:.") < l)
      return last_cuda = cudaErrorInvalidValue;
    memcpy(id, p, l);
    id[l] = 0;
  }
  if (strlen(id) >= len) return last_cuda = cudaErrorInvalidValue;
  snprintf(out, len, "%s", id);
  return cudaSuccess;
}

cudaError_t cudaDeviceGetPCIBusId(char *bus_id, int len, int device) {
  if (!bus_id || len <= 0 || device != 0) return last_cuda = cudaErrorInvalidValue;
  return my_bus_id(bus_id, (size_t)len);
}

/* NCCL's busIdToInt64: the hex digits of the bus id, as one number. */
static long bus_id_number(const char *id) {
  long v = 0;
  for (const char *p = id; *p; p++) {
    if (*p == ':' || *p == '.') continue;
    int d = *p >= '0' && *p <= '9'   ? *p - '0'
            : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10
            : *p >= 'A' && *p <= 'F' ? *p - 'A' + 10
                                     : -1;
    if (d < 0) break;
    v = v * 16 + d;
  }
  return v;
}

cudaError_t cudaGetDeviceCount(int *n) {
  if (!n) return cudaErrorInvalidValue;
  *n = 1;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int *d) {
  if (d) *d = 0;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int d) { return d == 0 ? cudaSuccess : cudaErrorInvalidValue; }
cudaError_t cudaMalloc(void **p, size_t bytes) { return do_alloc(p, bytes, 0, 0); }
cudaError_t cudaFree(void *p) { return do_free(p, 0, 0); }
cudaError_t cudaMallocHost(void **p, size_t bytes) { return do_alloc(p, bytes, 1, 0); }
cudaError_t cudaFreeHost(void *p) { return do_free(p, 1, 0); }

cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *at, const void *p) {
  if (!at) return cudaErrorInvalidValue;
  alloc *a = find(p);
  at->type = !a          ? cudaMemoryTypeUnregistered
             : a->pinned ? cudaMemoryTypeHost
                         : cudaMemoryTypeDevice;
  at->device = 0;
  at->devicePointer = a && !a->pinned ? (void *)p : NULL;
  at->hostPointer = a && a->pinned ? (void *)p : NULL;
  return cudaSuccess;
}

const char *cudaGetErrorString(cudaError_t e) {
  switch (e) {
  case cudaSuccess:
    return "no error (double)";
  case cudaErrorInvalidValue:
    return "invalid argument (double)";
  case cudaErrorMemoryAllocation:
    return "out of memory (double)";
  case cudaErrorNotReady:
    return "device not ready (double)";
  default:
    return "unknown error (double)";
  }
}
cudaError_t cudaGetLastError(void) {
  cudaError_t e = last_cuda;
  last_cuda = cudaSuccess;
  return e;
}

/* ---- communicators ------------------------------------------------------------------------ */

struct grdbl_comm {
  MPI_Comm mpi;
  int rank, size;
  int polls_in_progress; /* non-blocking: report ncclInProgress this many more times */
  int finalizing;
  int nonblocking; /* config blocking = 0: window registration reports ncclInProgress first */
  ncclResult_t async;
  uint64_t hash;   /* NCCL's commHash: the same on every member */
  int nsplits;     /* splits made from it so far (the children's hashes) */
  void *prof_ctx;  /* the profiler plugin's context (init), NULL: none */
  uint64_t seq[8]; /* NCCL's comm->seqNumber[func]: per kind of collective */
  MPI_Op half_ops[4], bf16_ops[4], native_ops[4];
  char err[256];
};
static char global_err[256];
static ncclResult_t fail_next_init = ncclSuccess;

void grdbl_fail_next_init(ncclResult_t r) { fail_next_init = r; }

static ncclResult_t set_err(ncclComm_t c, ncclResult_t r, const char *fmt, const char *arg)
    __attribute__((format(printf, 3, 0)));
static ncclResult_t set_err(ncclComm_t c, ncclResult_t r, const char *fmt, const char *arg) {
  char *b = c ? c->err : global_err;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
  snprintf(b, 256, fmt, arg);
#pragma GCC diagnostic pop
  return r;
}

#define HOP_(name, dt, op)                                                                         \
  static void name(void *in, void *io, int *len, MPI_Datatype *t) {                                \
    (void)t;                                                                                       \
    gr__reduce_host(dt, op, io, in, (size_t)*len);                                                 \
  }
HOP_(h_sum, GR_FLOAT16, GR_SUM)
HOP_(h_prod, GR_FLOAT16, GR_PROD)
HOP_(h_min, GR_FLOAT16, GR_MIN)
HOP_(h_max, GR_FLOAT16, GR_MAX)
HOP_(b_sum, GR_BFLOAT16, GR_SUM)
HOP_(b_prod, GR_BFLOAT16, GR_PROD)
HOP_(b_min, GR_BFLOAT16, GR_MIN)
HOP_(b_max, GR_BFLOAT16, GR_MAX)

/* The native types reduce with gpurun's kernels too (wrapping integers, NaN-propagating MIN/MAX):
 * Open MPI's built-in ops saturate 8-bit sums and drop NaNs, which NCCL's kernels do not do. */
static gr_dtype native(MPI_Datatype t) {
  return t == MPI_INT8_T     ? GR_INT8
         : t == MPI_UINT8_T  ? GR_UINT8
         : t == MPI_INT32_T  ? GR_INT32
         : t == MPI_UINT32_T ? GR_UINT32
         : t == MPI_INT64_T  ? GR_INT64
         : t == MPI_UINT64_T ? GR_UINT64
         : t == MPI_FLOAT    ? GR_FLOAT32
                             : GR_FLOAT64;
}
#define NOP_(name, op)                                                                             \
  static void name(void *in, void *io, int *len, MPI_Datatype *t) {                                \
    gr__reduce_host(native(*t), op, io, in, (size_t)*len);                                         \
  }
NOP_(n_sum, GR_SUM)
NOP_(n_prod, GR_PROD)
NOP_(n_min, GR_MIN)
NOP_(n_max, GR_MAX)

static ncclComm_t comm_new(MPI_Comm mpi) {
  ncclComm_t c = calloc(1, sizeof *c);
  c->mpi = mpi;
  MPI_Comm_rank(mpi, &c->rank);
  MPI_Comm_size(mpi, &c->size);
  MPI_User_function *h[4] = {h_sum, h_prod, h_min, h_max}, *b[4] = {b_sum, b_prod, b_min, b_max};
  MPI_User_function *nat[4] = {n_sum, n_prod, n_min, n_max};
  for (int i = 0; i < 4; i++) {
    MPI_Op_create(h[i], 1, &c->half_ops[i]);
    MPI_Op_create(b[i], 1, &c->bf16_ops[i]);
    MPI_Op_create(nat[i], 1, &c->native_ops[i]);
  }
  return c;
}

/* ---- the profiler plugin (NCCL 2.28: src/plugin/profiler.cc, plugin_open.cc) ---------------- */

static struct {
  int status; /* 0: not tried yet, 1: loaded, -1: none (NCCL's profilerPluginStatus) */
  int refs;
  void *lib;
  const gr_np_profiler_v5 *v5;
  const gr_np_profiler_v4 *v4;
} prof;
static int prof_mask; /* ncclProfilerEventMask: the plugin's init sets it, one for the process */

static void prof_logger(int level, unsigned long flags, const char *file, int line, const char *fmt,
                        ...) {
  (void)level, (void)flags, (void)file, (void)line, (void)fmt;
}

/* openPluginLib: the name as given, else libnccl-profiler-<name>.so for a bare name; unset or
 * empty: libnccl-profiler.so. */
static void *prof_open(const char *name) {
  char lib[512];
  if (name && *name)
    snprintf(lib, sizeof lib, "%s", name);
  else
    snprintf(lib, sizeof lib, "libnccl-profiler.so");
  void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  size_t n = name ? strlen(name) : 0;
  if (!h && n && !strchr(name, '/') &&
      (strncmp(name, "lib", 3) || n < 3 || strcmp(name + n - 3, ".so"))) {
    snprintf(lib, sizeof lib, "libnccl-profiler-%s.so", name);
    h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  }
  return h;
}

/* ncclProfilerPluginLoad: once per process while loaded; a reference per communicator. */
static void prof_load(void) {
  if (prof.status < 0) return;
  if (prof.status > 0) {
    prof.refs++;
    return;
  }
  const char *name = getenv("NCCL_PROFILER_PLUGIN");
  if (name && !strcasecmp(name, "none")) {
    prof.status = -1;
    return;
  }
  prof.lib = prof_open(name);
  if (prof.lib) {
    const char *v4only = getenv("GRDBL_PROFILER_V4");
    if (!v4only || strcmp(v4only, "1")) prof.v5 = dlsym(prof.lib, "ncclProfiler_v5");
    if (!prof.v5) prof.v4 = dlsym(prof.lib, "ncclProfiler_v4");
  }
  if (!prof.v5 && !prof.v4) {
    if (prof.lib) dlclose(prof.lib);
    prof.lib = NULL;
    prof.status = -1;
    return;
  }
  prof.status = 1;
  prof.refs = 1;
}

/* ncclProfilerPluginInit, for a communicator just made. */
static void prof_init(ncclComm_t c) {
  prof_load();
  if (prof.status <= 0) return;
  int err = prof.v5 ? prof.v5->init(&c->prof_ctx, c->hash, &prof_mask, NULL, 1, c->size, c->rank,
                                    prof_logger)
                    : prof.v4->init(&c->prof_ctx, &prof_mask, NULL, c->hash, 1, c->size, c->rank,
                                    prof_logger);
  if (err) c->prof_ctx = NULL; /* "Continue without profiler" */
}

/* ncclProfilerPluginFinalize (commFree, for destroy and abort), then the unload. */
static void prof_finalize(ncclComm_t c) {
  if (prof.status <= 0) return;
  if (c->prof_ctx) {
    if (prof.v5)
      prof.v5->finalize(c->prof_ctx);
    else
      prof.v4->finalize(c->prof_ctx);
    c->prof_ctx = NULL;
  }
  if (--prof.refs == 0) {
    dlclose(prof.lib);
    prof.lib = NULL;
    prof.v5 = NULL;
    prof.v4 = NULL;
    prof.status = 0;
  }
}

/* startEvent through the table found; v4 as NCCL's profiler_v4.cc converts: a task's parent is its
 * group. */
static void *prof_start(ncclComm_t c, gr_np_descr_v5 *d) {
  void *h = NULL;
  if (prof.status <= 0) return NULL;
  if (prof.v5) {
    prof.v5->startEvent(c->prof_ctx, &h, d);
    return h;
  }
  gr_np_descr_v4 e;
  memset(&e, 0, sizeof e);
  e.type = (uint8_t)d->type;
  e.parentObj = d->parentObj;
  e.rank = d->rank;
  if (d->type == gr_npColl) {
    e.coll.seqNumber = d->coll.seqNumber;
    e.coll.func = d->coll.func;
    e.coll.sendBuff = d->coll.sendBuff;
    e.coll.recvBuff = d->coll.recvBuff;
    e.coll.count = d->coll.count;
    e.coll.root = d->coll.root;
    e.coll.datatype = d->coll.datatype;
    e.coll.nChannels = d->coll.nChannels;
    e.coll.nWarps = d->coll.nWarps;
    e.coll.algo = d->coll.algo;
    e.coll.proto = d->coll.proto;
    e.parentObj = d->coll.parentGroup;
  } else if (d->type == gr_npP2p) {
    e.p2p.func = d->p2p.func;
    e.p2p.buff = d->p2p.buff;
    e.p2p.count = d->p2p.count;
    e.p2p.datatype = d->p2p.datatype;
    e.p2p.peer = d->p2p.peer;
    e.p2p.nChannels = d->p2p.nChannels;
    e.parentObj = d->p2p.parentGroup;
  } else if (d->type == gr_npKernelCh) {
    e.kernelCh.channelId = d->kernelCh.channelId;
    e.kernelCh.pTimer = d->kernelCh.pTimer;
  }
  prof.v4->startEvent(c->prof_ctx, &h, &e);
  return h;
}
static void prof_stop(void *h) {
  if (!h || prof.status <= 0) return;
  if (prof.v5)
    prof.v5->stopEvent(h);
  else
    prof.v4->stopEvent(h);
}
static void prof_record(void *h, int state, gr_np_state_args *a) {
  if (!h || prof.status <= 0) return;
  if (prof.v5)
    prof.v5->recordEventState(h, state, a);
  else
    prof.v4->recordEventState(h, state, a);
}

static uint64_t gpu_timer(void) { /* the kernel's globaltimer: nanoseconds */
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int version_override;
void grdbl_set_version(int v) { version_override = v; }

ncclResult_t ncclGetVersion(int *v) {
  if (v)
    *v = version_override ? version_override : NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH);
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
  if (!id) return ncclInvalidArgument;
  unsigned long long seed = (unsigned long long)getpid() * 0x9e3779b97f4a7c15ull ^ (uintptr_t)id;
  for (int i = 0; i < NCCL_UNIQUE_ID_BYTES; i++) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    id->internal[i] = (char)(seed >> 56);
  }
  int wrank = 0; /* the bootstrap root, as NCCL's id holds rank 0's address */
  MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
  memcpy(id->internal, &wrank, sizeof wrank);
  return ncclSuccess;
}

static uint64_t id_hash(const ncclUniqueId *id) {
  uint64_t h = 1469598103934665603ull;
  for (int i = 0; i < NCCL_UNIQUE_ID_BYTES; i++)
    h = (h ^ (unsigned char)id->internal[i]) * 1099511628211ull;
  return h;
}

/* The members of a communicator over a subset of the world: each sends (world rank, rank, id hash)
 * to the id's maker, which answers with the world ranks in rank order. NULL comm on failure. */
static ncclResult_t bootstrap_subset(int nranks, const ncclUniqueId *id, int rank, MPI_Comm *out) {
  *out = MPI_COMM_NULL;
  int root, wrank;
  memcpy(&root, id->internal, sizeof root);
  MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
  uint64_t h = id_hash(id);
  int tag = 20000 + (int)(h % 10000u);
  int *world = malloc(sizeof *world * (size_t)nranks);
  if (!world) return set_err(NULL, ncclSystemError, "%s", "out of memory");
  if (rank == 0) {
    if (root != wrank) {
      free(world);
      return set_err(NULL, ncclInvalidUsage, "%s",
                     "the double needs rank 0 to be the process that "
                     "made the unique id");
    }
    for (int i = 0; i < nranks; i++)
      world[i] = -1;
    world[0] = wrank;
    for (int i = 1; i < nranks; i++) {
      long long m[3];
      MPI_Recv(m, 3, MPI_LONG_LONG, MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      if (m[1] <= 0 || m[1] >= nranks || world[m[1]] >= 0 || (uint64_t)m[2] != h) {
        free(world);
        return set_err(NULL, ncclInvalidUsage, "%s",
                       "bad bootstrap message (ranks passed "
                       "different unique ids or counts)");
      }
      world[m[1]] = (int)m[0];
    }
    for (int i = 1; i < nranks; i++)
      MPI_Send(world, nranks, MPI_INT, world[i], tag, MPI_COMM_WORLD);
  } else {
    long long m[3] = {wrank, rank, (long long)h};
    MPI_Send(m, 3, MPI_LONG_LONG, root, tag, MPI_COMM_WORLD);
    MPI_Recv(world, nranks, MPI_INT, root, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  MPI_Group wg, g;
  MPI_Comm_group(MPI_COMM_WORLD, &wg);
  MPI_Group_incl(wg, nranks, world, &g);
  MPI_Comm_create_group(MPI_COMM_WORLD, g, tag, out);
  MPI_Group_free(&g);
  MPI_Group_free(&wg);
  free(world);
  return ncclSuccess;
}

/* NCCL's check after its first bootstrap allgather: no two ranks on one GPU of one host. */
static ncclResult_t duplicate_gpu(MPI_Comm m, int rank, char *why, size_t len) {
  struct {
    long host, bus;
  } me = {0, 0}, *all;
  char name[MPI_MAX_PROCESSOR_NAME], bus[64];
  int nl = 0, size;
  MPI_Get_processor_name(name, &nl);
  for (int i = 0; i < nl; i++)
    me.host = me.host * 131 + (unsigned char)name[i];
  if (my_bus_id(bus, sizeof bus) != cudaSuccess) {
    snprintf(why, len, "GRDBL_GPUS has a bad entry for this rank");
    return ncclUnhandledCudaError;
  }
  me.bus = bus_id_number(bus);
  MPI_Comm_size(m, &size);
  all = malloc(sizeof *all * (size_t)size);
  if (!all) return ncclSystemError;
  MPI_Allgather(&me, 2, MPI_LONG, all, 2, MPI_LONG, m);
  ncclResult_t r = ncclSuccess;
  for (int i = 0; i < size && r == ncclSuccess; i++)
    if (i != rank && all[i].host == me.host && all[i].bus == me.bus) {
      snprintf(why, len, "Duplicate GPU detected : rank %d and rank %d both on CUDA device %lx",
               rank, i, me.bus);
      r = ncclInvalidUsage;
    }
  free(all);
  return r;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *out, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t *cfg) {
  if (!out) return set_err(NULL, ncclInvalidArgument, "%s", "comm is NULL");
  *out = NULL;
  if (fail_next_init != ncclSuccess) {
    ncclResult_t r = fail_next_init;
    fail_next_init = ncclSuccess;
    return set_err(NULL, r, "%s", "injected failure (test hook)");
  }
  int wsize, wrank;
  MPI_Comm_size(MPI_COMM_WORLD, &wsize);
  MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
  if (nranks < 1 || rank < 0 || rank >= nranks || nranks > wsize)
    return set_err(NULL, ncclInvalidArgument, "%s", "nranks or rank out of range");
  MPI_Comm dup = MPI_COMM_NULL;
  if (nranks == wsize && rank == wrank) {
    /* All ranks must hold the same id: that is what our MPI_Bcast bootstrap has to deliver. */
    uint64_t h = id_hash(&id);
    uint64_t lo, hi;
    MPI_Allreduce(&h, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&h, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    if (lo != hi) return set_err(NULL, ncclInvalidUsage, "%s", "ranks passed different unique ids");
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  } else {
    ncclResult_t r = bootstrap_subset(nranks, &id, rank, &dup);
    if (r != ncclSuccess) return r;
  }
  char why[256];
  ncclResult_t dup_gpu = duplicate_gpu(dup, rank, why, sizeof why);
  ncclComm_t c = comm_new(dup);
  c->nonblocking = cfg && cfg->blocking == 0;
  if (dup_gpu != ncclSuccess) {
    snprintf(c->err, sizeof c->err, "%s", why);
    snprintf(global_err, sizeof global_err, "%s", why);
    if (cfg && cfg->blocking == 0) { /* non-blocking: the error comes from ncclCommGetAsyncError */
      c->async = dup_gpu;
      c->polls_in_progress = 1;
      *out = c;
      return ncclInProgress;
    }
    for (int i = 0; i < 4; i++)
      MPI_Op_free(&c->half_ops[i]), MPI_Op_free(&c->bf16_ops[i]), MPI_Op_free(&c->native_ops[i]);
    MPI_Comm_free(&c->mpi);
    free(c);
    return dup_gpu;
  }
  *out = c;
  c->hash = id_hash(&id); /* NCCL's commHash: a hash of the unique id */
  prof_init(c);
  if (cfg && cfg->blocking == 0) {
    c->polls_in_progress = 2;
    return ncclInProgress;
  }
  return ncclSuccess;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *out,
                           ncclConfig_t *cfg) {
  if (!comm || !out) return set_err(comm, ncclInvalidArgument, "%s", "comm or newcomm is NULL");
  MPI_Comm nm;
  MPI_Comm_split(comm->mpi, color == NCCL_SPLIT_NOCOLOR ? MPI_UNDEFINED : color, key, &nm);
  *out = nm == MPI_COMM_NULL ? NULL : comm_new(nm);
  uint64_t h = (comm->hash ^ (uint64_t)(uint32_t)color * 0x9e3779b97f4a7c15ull) * 1099511628211ull +
               (uint64_t)++comm->nsplits;
  if (*out) {
    (*out)->nonblocking = cfg && cfg->blocking == 0;
    (*out)->hash = h;
    prof_init(*out);
  }
  if (cfg && cfg->blocking == 0) {
    comm->polls_in_progress = 1;
    if (*out) (*out)->polls_in_progress = 1;
    return ncclInProgress;
  }
  return ncclSuccess;
}

/* ---- streams ------------------------------------------------------------------------------ */

typedef enum { K_ALLREDUCE, K_BCAST, K_REDUCE, K_ALLGATHER, K_REDSCAT, K_SEND, K_RECV } okind;
typedef struct {
  okind kind;
  const void *s;
  void *r;
  size_t n;
  ncclDataType_t t;
  ncclRedOp_t op;
  int root;
  ncclComm_t comm;
  void *tmp;
  void *ev, *kch; /* the profiler's task event (Coll/P2p) and KernelCh event, or NULL */
} nop;

typedef struct item {
  int is_copy;
  void *dst;
  const void *src;
  size_t bytes;
  nop *ops;
  int nops;
  MPI_Request *reqs;
  int started;
  struct item *next;
} item;

struct grdbl_stream {
  item *head, *tail;
  struct grdbl_stream *next;
};
static struct grdbl_stream default_stream;
static struct grdbl_stream *streams = &default_stream;

static struct grdbl_stream *S(cudaStream_t s) { return s ? s : &default_stream; }

static void push(struct grdbl_stream *s, item *it) {
  if (s->tail)
    s->tail->next = it;
  else
    s->head = it;
  s->tail = it;
}

static size_t esize(ncclDataType_t t) {
  static const size_t z[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};
  return z[t];
}
static gr_dtype grt(ncclDataType_t t) {
  static const gr_dtype m[] = {GR_INT8,   GR_UINT8,   GR_INT32,   GR_UINT32,  GR_INT64,
                               GR_UINT64, GR_FLOAT16, GR_FLOAT32, GR_FLOAT64, GR_BFLOAT16};
  return m[t];
}
static MPI_Datatype mtype(ncclDataType_t t) {
  switch (t) {
  case ncclInt8:
    return MPI_INT8_T;
  case ncclUint8:
    return MPI_UINT8_T;
  case ncclInt32:
    return MPI_INT32_T;
  case ncclUint32:
    return MPI_UINT32_T;
  case ncclInt64:
    return MPI_INT64_T;
  case ncclUint64:
    return MPI_UINT64_T;
  case ncclFloat32:
    return MPI_FLOAT;
  case ncclFloat64:
    return MPI_DOUBLE;
  default:
    return MPI_UINT16_T;
  }
}
static MPI_Op mop(ncclComm_t c, ncclDataType_t t, ncclRedOp_t op) {
  int i = op == ncclProd ? 1 : op == ncclMin ? 2 : op == ncclMax ? 3 : 0;
  if (t == ncclFloat16) return c->half_ops[i];
  if (t == ncclBfloat16) return c->bf16_ops[i];
  return c->native_ops[i];
}

static void kernel_events(item *it, int stop);

static void start(item *it) {
  it->started = 1;
  if (it->is_copy) {
    memmove(it->dst, it->src, it->bytes);
    return;
  }
  kernel_events(it, 0);
  it->reqs = malloc(sizeof *it->reqs * (size_t)it->nops);
  for (int i = 0; i < it->nops; i++) {
    nop *o = &it->ops[i];
    ncclComm_t c = o->comm;
    int n = (int)o->n;
    size_t es = esize(o->t), bytes = o->n * es;
    MPI_Datatype dt = mtype(o->t);
    MPI_Request *q = &it->reqs[i];
    switch (o->kind) {
    case K_ALLREDUCE:
      MPI_Iallreduce(o->s == o->r ? MPI_IN_PLACE : o->s, o->r, n, dt, mop(c, o->t, o->op), c->mpi,
                     q);
      break;
    case K_BCAST:
      if (c->rank == o->root && o->s != o->r) memmove(o->r, o->s, bytes);
      MPI_Ibcast(o->r, n, dt, o->root, c->mpi, q);
      break;
    case K_REDUCE:
      MPI_Ireduce(c->rank == o->root && o->s == o->r ? MPI_IN_PLACE : o->s, o->r, n, dt,
                  mop(c, o->t, o->op), o->root, c->mpi, q);
      break;
    case K_ALLGATHER:
      MPI_Iallgather(o->s == (char *)o->r + (size_t)c->rank * bytes ? MPI_IN_PLACE : o->s, n, dt,
                     o->r, n, dt, c->mpi, q);
      break;
    case K_REDSCAT: {
      const void *s = o->s;
      if (o->r == (const char *)o->s + (size_t)c->rank * bytes) {
        o->tmp = malloc(bytes * (size_t)c->size + 1);
        memcpy(o->tmp, o->s, bytes * (size_t)c->size);
        s = o->tmp;
      }
      MPI_Ireduce_scatter_block(s, o->r, n, dt, mop(c, o->t, o->op), c->mpi, q);
      break;
    }
    case K_SEND:
      MPI_Isend(o->s, n, dt, o->root, 7, c->mpi, q);
      break;
    case K_RECV:
      MPI_Irecv(o->r, n, dt, o->root, 7, c->mpi, q);
      break;
    }
  }
}

static int finished(item *it) {
  if (it->is_copy) return 1;
  int flag = 0;
  MPI_Testall(it->nops, it->reqs, &flag, MPI_STATUSES_IGNORE);
  if (!flag) return 0;
  for (int i = 0; i < it->nops; i++) {
    nop *o = &it->ops[i];
    int here = o->kind == K_ALLREDUCE || o->kind == K_REDSCAT ||
               (o->kind == K_REDUCE && o->comm->rank == o->root);
    if (o->op == ncclAvg && here) gr__avg_divide(grt(o->t), o->r, o->n, o->comm->size);
    free(o->tmp);
  }
  kernel_events(it, 1);
  return 1;
}

/* The "kernel" of a plan: its tasks' KernelCh events (one channel each), started when the item
 * starts and stopped when it finishes (NCCL's profiler proxy sees the kernel's counters). */
static void kernel_events(item *it, int stop) {
  for (int i = 0; i < it->nops; i++) {
    nop *o = &it->ops[i];
    if (!stop && o->ev && (prof_mask & gr_npKernelCh)) {
      gr_np_descr_v5 d;
      memset(&d, 0, sizeof d);
      d.type = gr_npKernelCh;
      d.parentObj = o->ev;
      d.rank = o->comm->rank;
      d.kernelCh.channelId = 0;
      d.kernelCh.pTimer = gpu_timer();
      o->kch = prof_start(o->comm, &d);
    } else if (stop && o->kch) {
      gr_np_state_args a;
      memset(&a, 0, sizeof a);
      a.kernelCh.pTimer = gpu_timer();
      prof_record(o->kch, gr_npKernelChStop, &a);
      prof_stop(o->kch);
      o->kch = NULL;
    }
  }
}

/* hostStreamPlanTask for the plan it holds, at its launch: per communicator a Group event, its
 * tasks' Coll (seqNumber: the communicator's count of that kind, then one more) and P2p events,
 * started and stopped back to back (stop: enqueued), then the groups stopped. */
static void plan_events(item *it) {
  static const char *const fname[] = {"AllReduce",     "Broadcast", "Reduce", "AllGather",
                                      "ReduceScatter", "Send",      "Recv"};
  static const char *const tname[] = {"ncclInt8",    "Unknown",     "ncclInt32",   "ncclUint32",
                                      "ncclInt64",   "ncclUint64",  "ncclFloat16", "ncclFloat32",
                                      "ncclFloat64", "ncclBfloat16"};
  const int task_mask =
      gr_npColl | gr_npP2p | gr_npProxyOp | gr_npProxyStep | gr_npKernelCh | gr_npNetPlugin;
  if (prof.status <= 0 || !(prof_mask & (gr_npGroup | task_mask))) return;
  ncclComm_t comms[16];
  void *groups[16];
  int ng = 0;
  for (int i = 0; i < it->nops && ng < 16; i++) {
    ncclComm_t c = it->ops[i].comm;
    int seen = 0;
    for (int g = 0; g < ng; g++)
      seen |= comms[g] == c;
    if (seen || !c->prof_ctx) continue;
    gr_np_descr_v5 d;
    memset(&d, 0, sizeof d);
    d.type = gr_npGroup;
    comms[ng] = c;
    groups[ng++] = prof_start(c, &d);
  }
  for (int pass = 0; pass < 2; pass++) /* the collectives, then the sends and receives */
    for (int i = 0; i < it->nops; i++) {
      nop *o = &it->ops[i];
      int p2p = o->kind == K_SEND || o->kind == K_RECV;
      if (p2p != pass || !o->comm->prof_ctx) continue;
      void *group = NULL;
      for (int g = 0; g < ng; g++)
        if (comms[g] == o->comm) group = groups[g];
      gr_np_descr_v5 d;
      memset(&d, 0, sizeof d);
      d.rank = o->comm->rank;
      if (!p2p && (prof_mask & (task_mask & ~gr_npP2p))) {
        int bytes = o->kind == K_ALLGATHER || o->kind == K_BCAST;
        d.type = gr_npColl;
        d.coll.seqNumber = o->comm->seq[o->kind]++;
        d.coll.func = fname[o->kind];
        d.coll.sendBuff = o->s;
        d.coll.recvBuff = o->r;
        d.coll.count = bytes ? o->n * esize(o->t) : o->n;
        d.coll.root = o->root < 0 ? 0 : o->root;
        d.coll.datatype = bytes ? "ncclInt8" : tname[o->t];
        d.coll.nChannels = 1;
        d.coll.nWarps = 16;
        d.coll.algo = "RING";
        d.coll.proto = "SIMPLE";
        d.coll.parentGroup = group;
        o->ev = prof_start(o->comm, &d);
      } else if (p2p && (prof_mask & (task_mask & ~gr_npColl))) {
        d.type = gr_npP2p;
        d.p2p.func = fname[o->kind];
        d.p2p.buff = o->kind == K_SEND ? (void *)o->s : o->r;
        d.p2p.datatype = tname[o->t];
        d.p2p.count = o->n;
        d.p2p.peer = o->root;
        d.p2p.nChannels = 1;
        d.p2p.parentGroup = group;
        o->ev = prof_start(o->comm, &d);
      }
    }
  for (int pass = 0; pass < 2; pass++)
    for (int i = 0; i < it->nops; i++)
      if ((it->ops[i].kind == K_SEND || it->ops[i].kind == K_RECV) == pass)
        prof_stop(it->ops[i].ev);
  for (int g = 0; g < ng; g++)
    prof_stop(groups[g]);
}

static void item_free(item *it) {
  free(it->ops);
  free(it->reqs);
  free(it);
}

/* Run the stream as far as it goes without waiting. 1 when empty. */
static int progress(struct grdbl_stream *s) {
  while (s->head) {
    item *it = s->head;
    if (!it->started) start(it);
    if (!finished(it)) return 0;
    s->head = it->next;
    if (!s->head) s->tail = NULL;
    item_free(it);
  }
  return 1;
}

static int uses(const item *it, ncclComm_t c) {
  for (int i = 0; i < it->nops; i++)
    if (it->ops[i].comm == c) return 1;
  return 0;
}

cudaError_t cudaStreamCreate(cudaStream_t *s) {
  if (!s) return cudaErrorInvalidValue;
  struct grdbl_stream *n = calloc(1, sizeof *n);
  n->next = default_stream.next;
  default_stream.next = n;
  *s = n;
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
  if (!s || s == &default_stream) return cudaErrorInvalidValue;
  while (!progress(s)) {
  }
  for (struct grdbl_stream *p = &default_stream; p; p = p->next)
    if (p->next == s) p->next = s->next;
  free(s);
  return cudaSuccess;
}
/* A GPU runs every stream on its own, whichever one the host polls: a query moves them all (a
 * receive on one stream may wait for a peer's send that its own poll of another stream started). */
static void progress_all(void) {
  for (struct grdbl_stream *o = streams; o; o = o->next)
    progress(o);
}
cudaError_t cudaStreamQuery(cudaStream_t s) {
  progress_all();
  return progress(S(s)) ? cudaSuccess : cudaErrorNotReady;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  while (!progress(S(s))) {
  }
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind,
                            cudaStream_t s) {
  int dev_dst = find(dst) && !find(dst)->pinned, dev_src = find(src) && !find(src)->pinned;
  int ok = kind == cudaMemcpyDefault || (kind == cudaMemcpyHostToDevice && dev_dst && !dev_src) ||
           (kind == cudaMemcpyDeviceToHost && dev_src && !dev_dst) ||
           (kind == cudaMemcpyDeviceToDevice && dev_src && dev_dst) ||
           (kind == cudaMemcpyHostToHost && !dev_src && !dev_dst);
  if (!ok || (bytes && (!dst || !src))) return last_cuda = cudaErrorInvalidValue;
  item *it = calloc(1, sizeof *it);
  it->is_copy = 1;
  it->dst = dst;
  it->src = src;
  it->bytes = bytes;
  push(S(s), it);
  progress(S(s));
  return cudaSuccess;
}
/* Device memory only, like CUDA's; synchronous with the host here (nothing else runs on it). */
cudaError_t cudaMemset(void *p, int value, size_t bytes) {
  alloc *a = bytes ? find(p) : NULL;
  if (bytes && (!a || a->pinned || (const char *)p + bytes > a->p + a->n))
    return last_cuda = cudaErrorInvalidValue;
  if (bytes) memset(p, value, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind) {
  cudaError_t e = cudaMemcpyAsync(dst, src, bytes, kind, NULL);
  if (e == cudaSuccess) cudaStreamSynchronize(NULL);
  return e;
}

/* ---- operations and groups ---------------------------------------------------------------- */

static int group_depth;
static nop *gops;
static int gn, gcap;
static cudaStream_t gstream;

static ncclResult_t enqueue(nop o, cudaStream_t st) {
  ncclComm_t c = o.comm;
  if (!c) return set_err(NULL, ncclInvalidArgument, "%s", "comm is NULL");
  if (c->finalizing) return set_err(c, ncclInvalidUsage, "%s", "communicator is finalizing");
  if ((unsigned)o.t > ncclBfloat16) return set_err(c, ncclInvalidArgument, "%s", "bad datatype");
  size_t bytes = o.n * esize(o.t);
  /* NCCL needs device memory: a host pointer here means our staging missed it. */
  int needs_s = o.kind != K_RECV && (o.kind != K_BCAST || c->rank == o.root);
  int needs_r = o.kind != K_SEND && (o.kind != K_REDUCE || c->rank == o.root);
  if (bytes && needs_s && (!find(o.s) || find(o.s)->pinned))
    return set_err(c, ncclInvalidArgument, "sendbuff %s is not device memory",
                   o.kind == K_SEND ? "(send)" : "");
  if (bytes && needs_r && (!find(o.r) || find(o.r)->pinned))
    return set_err(c, ncclInvalidArgument, "recvbuff %s is not device memory",
                   o.kind == K_RECV ? "(recv)" : "");
  if (o.kind == K_BCAST || o.kind == K_REDUCE || o.kind == K_SEND || o.kind == K_RECV)
    if (o.root < 0 || o.root >= c->size)
      return set_err(c, ncclInvalidArgument, "%s", "root/peer out of range");
  if (group_depth > 0) {
    if (gn == gcap) {
      gcap = gcap ? 2 * gcap : 16;
      gops = realloc(gops, sizeof *gops * (size_t)gcap);
    }
    if (gn == 0) gstream = st;
    gops[gn++] = o;
    return ncclSuccess;
  }
  item *it = calloc(1, sizeof *it);
  it->ops = malloc(sizeof *it->ops);
  it->ops[0] = o;
  it->nops = 1;
  plan_events(it);
  push(S(st), it);
  progress(S(st));
  return ncclSuccess;
}

ncclResult_t ncclGroupStart(void) {
  group_depth++;
  return ncclSuccess;
}
ncclResult_t ncclGroupEnd(void) {
  if (group_depth == 0)
    return set_err(NULL, ncclInvalidUsage, "%s", "ncclGroupEnd without ncclGroupStart");
  if (--group_depth > 0 || gn == 0) return ncclSuccess;
  item *it = calloc(1, sizeof *it);
  it->ops = gops;
  it->nops = gn;
  gops = NULL;
  gn = gcap = 0;
  plan_events(it);
  push(S(gstream), it);
  progress(S(gstream));
  return ncclSuccess;
}

#define OP_(k, s_, r_, n_, t_, op_, root_)                                                         \
  enqueue((nop){k, s_, r_, n_, t_, op_, root_, comm, NULL, NULL, NULL}, st)
ncclResult_t ncclAllReduce(const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t st) {
  return OP_(K_ALLREDUCE, s, r, n, t, op, -1);
}
ncclResult_t ncclBroadcast(const void *s, void *r, size_t n, ncclDataType_t t, int root,
                           ncclComm_t comm, cudaStream_t st) {
  return OP_(K_BCAST, s, r, n, t, ncclSum, root);
}
ncclResult_t ncclReduce(const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op,
                        int root, ncclComm_t comm, cudaStream_t st) {
  return OP_(K_REDUCE, s, r, n, t, op, root);
}
ncclResult_t ncclAllGather(const void *s, void *r, size_t n, ncclDataType_t t, ncclComm_t comm,
                           cudaStream_t st) {
  return OP_(K_ALLGATHER, s, r, n, t, ncclSum, -1);
}
ncclResult_t ncclReduceScatter(const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op,
                               ncclComm_t comm, cudaStream_t st) {
  return OP_(K_REDSCAT, s, r, n, t, op, -1);
}
ncclResult_t ncclSend(const void *s, size_t n, ncclDataType_t t, int peer, ncclComm_t comm,
                      cudaStream_t st) {
  return OP_(K_SEND, s, NULL, n, t, ncclSum, peer);
}
ncclResult_t ncclRecv(void *r, size_t n, ncclDataType_t t, int peer, ncclComm_t comm,
                      cudaStream_t st) {
  return OP_(K_RECV, NULL, r, n, t, ncclSum, peer);
}

/* ---- NCCL's memory, registrations and windows -------------------------------------------- */

/* ncclMemAlloc gives device memory of its own kind (cudaFree refuses it, as real CUDA refuses
 * memory of the cuMem API); registrations and windows are a table of (communicator, range),
 * handed out as pointers into it. Like NCCL, an unknown pointer or handle (freed or deregistered
 * already, another communicator's) is ncclInvalidArgument; windows need ncclMemAlloc's memory and
 * the same size on every rank (the registration is collective: an MPI_Allreduce on the
 * communicator, so that a rank's bad arguments fail every rank's call instead of hanging it);
 * destroy and abort drop what is left, destroy counting it. */
struct grdbl_reg {
  ncclComm_t comm;
  char *p;
  size_t n;
  int window;
  struct grdbl_reg *next;
};
static struct grdbl_reg *regs;
static int left_at_destroy;
static ncclResult_t fail_next_mem_alloc = ncclSuccess, fail_next_window = ncclSuccess;

void grdbl_fail_next_mem_alloc(ncclResult_t r) { fail_next_mem_alloc = r; }
void grdbl_fail_next_window(ncclResult_t r) { fail_next_window = r; }

/* The allocation that holds all of [p, p + n) as device memory, or NULL. */
static alloc *device_range(const void *p, size_t n) {
  alloc *a = p ? find(p) : NULL;
  if (!a || a->pinned || (const char *)p + n > a->p + a->n) return NULL;
  return a;
}

static int regs_drop(ncclComm_t c) {
  int n = 0;
  for (struct grdbl_reg **q = &regs; *q;)
    if ((*q)->comm == c) {
      struct grdbl_reg *r = *q;
      *q = r->next;
      free(r);
      n++;
    } else {
      q = &(*q)->next;
    }
  return n;
}

static ncclResult_t reg_add(ncclComm_t c, void *p, size_t n, int window, struct grdbl_reg **out) {
  struct grdbl_reg *r = calloc(1, sizeof *r);
  if (!r) return set_err(c, ncclSystemError, "%s", "out of memory");
  r->comm = c;
  r->p = p;
  r->n = n;
  r->window = window;
  r->next = regs;
  regs = r;
  *out = r;
  return ncclSuccess;
}

static ncclResult_t reg_remove(ncclComm_t c, const void *h, int window, const char *fn) {
  for (struct grdbl_reg **q = &regs; *q; q = &(*q)->next)
    if (*q == h && (*q)->comm == c && (*q)->window == window) {
      struct grdbl_reg *r = *q;
      *q = r->next;
      free(r);
      return ncclSuccess;
    }
  return set_err(c, ncclInvalidArgument,
                 "%s: the handle is not registered on this communicator (deregistered already, "
                 "or another communicator's)",
                 fn);
}

ncclResult_t ncclMemAlloc(void **ptr, size_t size) {
  if (!ptr || !size)
    return set_err(NULL, ncclInvalidArgument, "%s", "ncclMemAlloc: ptr NULL or size 0");
  *ptr = NULL;
  if (fail_next_mem_alloc != ncclSuccess) {
    ncclResult_t r = fail_next_mem_alloc;
    fail_next_mem_alloc = ncclSuccess;
    return set_err(NULL, r, "%s", "ncclMemAlloc: injected failure (test hook)");
  }
  if (do_alloc(ptr, size, 0, 1) != cudaSuccess)
    return set_err(NULL, ncclUnhandledCudaError, "%s", "ncclMemAlloc: out of device memory");
  return ncclSuccess;
}

ncclResult_t ncclMemFree(void *ptr) {
  if (!ptr) return ncclSuccess;
  if (do_free(ptr, 0, 1) != cudaSuccess) {
    last_cuda = cudaSuccess;
    return set_err(NULL, ncclInvalidArgument, "%s",
                   "ncclMemFree: not memory from ncclMemAlloc (freed already?)");
  }
  return ncclSuccess;
}

ncclResult_t ncclCommRegister(const ncclComm_t comm, void *buff, size_t size, void **handle) {
  if (!comm || !handle) return set_err(comm, ncclInvalidArgument, "%s", "comm or handle is NULL");
  *handle = NULL;
  if (!size || !device_range(buff, size))
    return set_err(comm, ncclInvalidArgument, "%s",
                   "ncclCommRegister: the buffer is not device memory");
  struct grdbl_reg *r = NULL;
  ncclResult_t rc = reg_add(comm, buff, size, 0, &r);
  if (rc == ncclSuccess) *handle = r;
  return rc;
}

ncclResult_t ncclCommDeregister(const ncclComm_t comm, void *handle) {
  if (!comm) return set_err(comm, ncclInvalidArgument, "%s", "comm is NULL");
  return reg_remove(comm, handle, 0, "ncclCommDeregister");
}

ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win,
                                    int winFlags) {
  if (!comm || !win) return set_err(comm, ncclInvalidArgument, "%s", "comm or win is NULL");
  *win = NULL;
  alloc *a = device_range(buff, size);
  long long mine[3] = {size && a && a->nccl && (winFlags & ~NCCL_WIN_COLL_SYMMETRIC) == 0,
                       (long long)size, -(long long)size},
            all[3];
  MPI_Allreduce(mine, all, 3, MPI_LONG_LONG, MPI_MIN, comm->mpi);
  if (!mine[0])
    return set_err(comm, ncclInvalidArgument, "%s",
                   "ncclCommWindowRegister: the buffer is not memory from ncclMemAlloc");
  if (!all[0])
    return set_err(comm, ncclInvalidArgument, "%s",
                   "ncclCommWindowRegister: another rank passed a bad buffer");
  if (all[1] != -all[2])
    return set_err(comm, ncclInvalidArgument, "%s",
                   "ncclCommWindowRegister: the ranks' window sizes differ");
  if (fail_next_window != ncclSuccess) {
    ncclResult_t r = fail_next_window;
    fail_next_window = ncclSuccess;
    return set_err(comm, r, "%s", "ncclCommWindowRegister: injected failure (test hook)");
  }
  struct grdbl_reg *r = NULL;
  ncclResult_t rc = reg_add(comm, buff, size, 1, &r);
  if (rc != ncclSuccess) return rc;
  *win = r;
  if (comm->nonblocking) {
    comm->polls_in_progress = 1;
    return ncclInProgress;
  }
  return ncclSuccess;
}

ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  if (!comm) return set_err(comm, ncclInvalidArgument, "%s", "comm is NULL");
  return reg_remove(comm, win, 1, "ncclCommWindowDeregister");
}

grdbl_mem_counts grdbl_mem_census(void) {
  grdbl_mem_counts k = {0, 0, 0, 0, left_at_destroy};
  for (const alloc *a = allocs; a; a = a->next) {
    k.device_allocs += !a->pinned;
    k.nccl_allocs += a->nccl;
  }
  for (const struct grdbl_reg *r = regs; r; r = r->next) {
    k.registrations += !r->window;
    k.windows += r->window;
  }
  return k;
}

/* ---- state, teardown ---------------------------------------------------------------------- */

static int busy(ncclComm_t c) {
  int any = 0;
  for (struct grdbl_stream *s = streams; s; s = s->next) {
    progress(s);
    for (item *it = s->head; it; it = it->next)
      any |= uses(it, c);
  }
  return any;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t *async) {
  if (!c || !async) return ncclInvalidArgument;
  if (c->polls_in_progress > 0) {
    c->polls_in_progress--;
    *async = ncclInProgress;
  } else if (c->finalizing) {
    *async = busy(c) ? ncclInProgress : ncclSuccess;
  } else {
    progress_all();
    *async = c->async;
  }
  return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t c) {
  if (!c) return ncclInvalidArgument;
  c->finalizing = 1;
  return ncclInProgress;
}

static void comm_free(ncclComm_t c, int clean) {
  prof_finalize(c);
  if (clean)
    for (int i = 0; i < 4; i++)
      MPI_Op_free(&c->half_ops[i]), MPI_Op_free(&c->bf16_ops[i]), MPI_Op_free(&c->native_ops[i]);
  MPI_Comm_free(&c->mpi); /* MPI defers this past any request still pending */
  free(c);
}

ncclResult_t ncclCommDestroy(ncclComm_t c) {
  if (!c) return ncclInvalidArgument;
  if (busy(c)) return set_err(c, ncclInvalidUsage, "%s", "destroy with work pending");
  left_at_destroy += regs_drop(c);
  comm_free(c, 1);
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t c) {
  if (!c) return ncclSuccess;
  /* Drop this communicator's queued work; its MPI requests can never be cancelled and leak. */
  for (struct grdbl_stream *s = streams; s; s = s->next) {
    item **p = &s->head, *last = NULL;
    while (*p) {
      item *it = *p;
      if (uses(it, c)) {
        *p = it->next;
        for (int i = 0; i < it->nops; i++)
          free(it->ops[i].tmp);
        item_free(it); /* the request handles are copies: MPI keeps its own */
      } else {
        last = it;
        p = &it->next;
      }
    }
    s->tail = last;
  }
  regs_drop(c);
  comm_free(c, 0);
  return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t r) {
  static const char *const s[] = {"no error",
                                  "unhandled cuda error",
                                  "unhandled system error",
                                  "internal error",
                                  "invalid argument",
                                  "invalid usage",
                                  "remote process exited or there was a network error",
                                  "NCCL operation in progress"};
  return (unsigned)r < ncclNumResults ? s[r] : "unknown result code";
}
const char *ncclGetLastError(ncclComm_t c) { return c ? c->err : global_err; }
