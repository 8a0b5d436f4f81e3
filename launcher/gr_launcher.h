/* Internal: gpurun's launcher core. Everything here except bind.c and main.c is side-effect free
 * (apart from reading files named by the user), so placement is testable on recorded XML.
 *
 *   options.c      argv + GPURUN_* env + --config FILE  -> gr__options
 *   whoami.c       launcher environment                 -> local rank / size
 *   topo.c         hwloc (live or XML)                  -> gr__node (GPUs, NICs, links)
 *   node_plan.c    node + size + options                -> gr__node_plan (one row per local rank)
 *   env.c          plan row                             -> variables to export
 *   plan_print.c   plan                                 -> text / JSON
 *   bind.c         plan row                             -> hwloc cpubind/membind (thin)
 */
#ifndef GR_LAUNCHER_H
#define GR_LAUNCHER_H

#include <gpurun/limits.h>
#include <gpurun/status.h>
#include "gr_error.h"
#include "gr_param.h"
#include "gr_plan.h" /* the plan contract: variable names, GR_PLAN_VERSION */
#include <hwloc.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

/* Environment lookup, so that tests and the fuzzer can pass a fake environment. */
typedef const char *(*gr__getenv_fn)(void *ctx, const char *name);
const char *gr__real_getenv(void *ctx, const char *name);

/* ---- options ---------------------------------------------------------------------------- */
typedef enum {
  GR__POLICY_CLOSEST = 0,
  GR__POLICY_SPREAD,
  GR__POLICY_COMPACT,
  GR__POLICY_NONE,
  GR__POLICY_LEAST_LOADED /* closest over the GPUs other tenants use least (least_loaded.c) */
} gr__policy;
const char *gr__policy_name(gr__policy p);

typedef struct {
  int verbose, dry_run, all, json, topo_view, smt, help, help_env, version;
  gr__policy policy;
  int gpus_per_rank;                /* 0: automatic */
  int ranks_per_gpu;                /* 0: automatic */
  unsigned long long gpu_mem_limit; /* bytes per rank; 0: fair share when known */
  int monitor;                      /* 1: supervise and sample */
  double monitor_interval;          /* seconds */
  double time_limit;                /* seconds; 0: none */
  int local_rank, local_size;       /* -1: from the launcher's environment */
  char topology[1024];              /* "" live */
  char config[1024];
  char prometheus[1024]; /* "" off; else node-exporter textfile directory (--monitor) */
  int gpu_health;        /* GR__HEALTH_OFF|WARN|AVOID (default WARN) */
  int prog;              /* argv index of the program; argc when none */
  int prog_python; /* the program is a Python interpreter or torchrun (torchenv.c: rank 0's host
                      not found is then an error; for other programs MASTER_* are left unset) */
  char master_addr[1024]; /* torch.distributed MASTER_ADDR; "" derive (torchenv.c) */
  int master_port;        /* 0: derive from the job id */
  int omp_set;    /* --omp=set: export OMP_* even over the user's own (default: keep the user's) */
  int visible;    /* --visible-devices: GR__VISIBLE_OWN, _OWN_FIRST, _ALL */
  int priority;   /* --priority: GR__PRIO_NORMAL (default), _LOW, _HIGH */
  int trace;      /* --trace: GR_TRACE_AUTO (default: on under --monitor), _MPI, _NONE */
  double timeout; /* --timeout: GPURUN_TIMEOUT for the program; 0: not given */
  int on_hang;    /* --on-hang: GR_ON_HANG_REPORT (default), _ABORT */
} gr__options;

enum { GR__VISIBLE_OWN = 0, GR__VISIBLE_OWN_FIRST, GR__VISIBLE_ALL };

/* Errors: every launcher call that can fail returns a gr_status and records one sentence with
 * gr__fail_msg (gr_error.h: the library's thread-local buffer, read with gr_last_error()); main()
 * prints "gpurun: <sentence>" once and picks the exit code. Sentences quote user input, so control
 * characters become '?' (gr__fail_msg) to keep them one printable line. */

/* ---- the MPI layer (trace.c) -----------------------------------------------------------
 * Whether the program's MPI calls are recorded (--trace=mpi, or --monitor with --trace=auto):
 * then libgpurun-mpi.so goes first in LD_PRELOAD, NCCL_PROFILER_PLUGIN names gpurun's NCCL plugin
 * (where the user names none and it is installed), and GPURUN_TRACE, GPURUN_TIMEOUT and
 * GPURUN_ON_HANG are exported for them. The layer stands aside by itself in a process that is not
 * an MPI program of its family (it says why, at info). A statically linked program cannot take
 * it, nor one whose dependencies name the other family's MPI library (a layer built for MPICH
 * would cut Open MPI's 64-bit handles to 32 bits): a notice, and the program runs untraced.
 * GR_OK, or GR_ERR_NOT_FOUND when --trace=mpi was asked and the layer's file is missing (a
 * sentence naming where it looked). */
gr_status gr__trace_setup(const gr__options *o, const char *prog);
/* The layer's file: GPURUN_TRACE_LIB, else libgpurun-mpi.so beside gpurun's library directory
 * (<prefix>/bin/../lib*), else the build tree's. NULL when none exists. */
const char *gr__trace_lib(char *buf, size_t cap);

/* ---- which MPI library a program uses (elf_needed.c) ------------------------------------------
 * The MPI family whose library soname is: "openmpi" (libmpi.so.N), "mpich" (libmpich.so.N: MPICH
 * and its kin), else NULL. */
const char *gr__elf_mpi_family(const char *soname);
/* The first MPI library in file's dynamic dependencies, read from the ELF files breadth first
 * (never run): 1 with its soname and the object that needs it (file's own name or a library's),
 * 0 where none is found (a static or non-ELF file, a dependency it cannot find). Not thread-safe. */
int gr__elf_mpi_lib(const char *file, char *soname, size_t cap, char *via, size_t vcap);

/* fopen for reading that refuses what is not a regular file (FIFO, directory, device), recording
 * "WHAT PATH: ..."; NULL then (open_regular.c). */
FILE *gr__open_regular(const char *path, const char *what);

void gr__options_init(gr__options *o);
/* Applies, in increasing precedence: the config file (--config or GPURUN_CONFIG), GPURUN_*
 * variables, then argv. On a usage error returns GR_ERR_INVALID with the reason recorded. */
gr_status gr__options_parse(gr__options *o, int argc, char *const argv[], gr__getenv_fn get,
                            void *ctx);
/* The config grammar ("key = value", '#' comments) on a buffer; used by parse and the fuzzer. */
gr_status gr__options_config_text(gr__options *o, const char *text, size_t len, const char *origin);
/* Sizes ("4G", "512M", "1024" bytes, "1.5G") are parsed by gr__parse_size (gr_param.h). */
void gr__options_usage(FILE *f);

/* ---- who am I --------------------------------------------------------------------------- */
typedef struct {
  int local_rank, local_size;
  const char *source; /* "options", "GPURUN", "Open MPI", "Slurm", ...; "none" */
  int inherited;      /* the plan's local rank and size were set by another gpurun process
                         (GR_PLAN_VAR_PLAN_PID): they rank below every real launcher's variables */
} gr__whoami_t;

/* MPICH's Hydra as a node-local launch identity (base/gr_hydra.h): "PID.STARTTIME" of the launch's
 * hydra_pmi_proxy on this node (an ancestor of every rank it starts); 0, or -1 without one. */
int gr__hydra_launch(char *out, size_t cap);

/* Fills w from the first launcher whose variables are present. GR_ERR_INVALID (the sentence says
 * which variable) when a present variable does not parse, or the rank is not below the size. */
gr_status gr__whoami(const gr__options *o, gr__getenv_fn get, void *ctx, gr__whoami_t *w);
/* Slurm's compressed per-node task counts, "2(x3),1": the count of node `nodeid`; -1 if malformed.
 */
int gr__slurm_tasks_on_node(const char *spec, int nodeid);

/* ---- the node --------------------------------------------------------------------------- */
#define GR__MAX_SKIPPED 4
typedef struct {
  int index;    /* ordinal in PCI bus order among the node's GPUs (CUDA_DEVICE_ORDER=PCI_BUS_ID) */
  char pci[20]; /* "0000:34:00.0" ("" when hwloc shows no PCI device) */
  char name[80];
  unsigned vendor;              /* PCI vendor id, 0 when unknown */
  int partition;                /* index of this partition on its PCI function (several rsmi/MIG) */
  unsigned long long mem_bytes; /* 0 when unknown */
  hwloc_obj_t pcidev, osdev;    /* either may be NULL */
  hwloc_obj_t locality;         /* non-I/O ancestor with allowed PUs */
  char token[64]; /* how the scheduler named it (visible.c): exported as given; "" -> index */
} gr__gpu;

typedef struct {
  char name[64]; /* mlx5_0, hsi0, rdmap197s0 */
  char ucx[72];  /* UCX_NET_DEVICES form: mlx5_0:1 */
  hwloc_obj_t pcidev, osdev;
  hwloc_obj_t locality;
} gr__nic;

typedef struct {
  hwloc_topology_t topo;
  int foreign; /* loaded from a file: do not bind */
  int ngpus, nnics;
  gr__gpu *gpus;
  gr__nic *nics;
  double *link; /* ngpus x ngpus effective GPU-GPU bandwidth, NULL without a matrix */
  char link_name[32];
  hwloc_const_cpuset_t allowed;
  hwloc_bitmap_t allowed_own; /* allowed narrowed by an inherited CPU mask, or NULL */
  char gpu_var[32]; /* the variable the scheduler named GPUs in; "" none (export by vendor) */
  int pinned;       /* each task holds exactly the GPUs it was given: show it no others */
  /* PCI functions that look like GPUs and are not (a BMC's display): one sentence each for -v */
  char skipped[GR__MAX_SKIPPED][160];
  int nskipped, nskipped_more;
} gr__node;

/* xml: a file, or NULL/"" for the live machine. */
gr_status gr__node_load(gr__node *n, const char *xml);
/* Keep only the GPUs a launcher restricted us to (CUDA_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES, as
 * ordinals in PCI order). Ignored (with a note in note, return 0) for UUID forms. */
int gr__node_restrict(gr__node *n, const char *visible, char *note, size_t notelen);
/* Narrows the node to the PUs of mask (an inherited taskset / cpuset); 1 when it changed, 0 when
 * the mask holds all allowed PUs, none of them, or is empty. */
int gr__node_bound(gr__node *n, hwloc_const_cpuset_t mask);
/* Keeps the GPUs whose keep[position] is set (node-wide .index unchanged), links recomputed. */
void gr__node_keep(gr__node *n, const char *keep);
void gr__node_free(gr__node *n);
/* Classification helpers, shared with the tests' independent checks only by name. */
int gr__is_gpu_pcidev(hwloc_obj_t pci);
/* The nearest common ancestor of two objects, I/O objects included (hwloc's helper compares
 * depths, which I/O objects do not have); NULL when they share none. */
hwloc_obj_t gr__io_common_ancestor(hwloc_obj_t a, hwloc_obj_t b);
/* The model of a known server-management (BMC) display chip of a GPU vendor, NULL otherwise. */
const char *gr__bmc_display_name(hwloc_obj_t pci);

/* ---- the scheduler's GPUs (visible.c) ---------------------------------------------------- */
typedef struct {
  int local_size, k; /* fixed: local_size x k node GPU positions, -1 for none */
  int *fixed;        /* NULL: plan the GPUs freely over the node's (restricted) GPUs */
  char note[400];    /* what was read and what was assumed, for -v; "" nothing read */
} gr__visible;

/* Reads the GPU variables of the environment (see visible.c for the rules), restricts the node
 * to the GPUs this node's tasks may use, records the form to export them in, and says which GPUs
 * every local task holds. GR_ERR_INVALID with a one-line reason for an entry that names no GPU
 * of this node (the caller exits 2). */
gr_status gr__visible_apply(gr__node *n, int local_rank, int local_size, gr__getenv_fn get,
                            void *ctx, gr__visible *v);
void gr__visible_free(gr__visible *v);

/* ---- the plan --------------------------------------------------------------------------- */
#define GR__MAX_RANK_GPUS GR_MAX_RANK_GPUS /* the runtime reads what the launcher writes */
#define GR__MAX_WARN 8
#define GR__MAX_RANK_NICS 16

typedef struct {
  int local_rank;
  int ngpus;
  int *gpu;                    /* ngpus indexes into node->gpus (in gr__node_plan's gpu_store) */
  int sharers;                 /* ranks sharing this rank's GPU(s), 1 = exclusive */
  int share_index;             /* this rank's position among them */
  hwloc_bitmap_t cpuset;       /* PUs */
  hwloc_bitmap_t nodeset;      /* NUMA nodes */
  int nic;                     /* index into node->nics, -1 none: the rank's own (the plan's) */
  int nnics;                   /* NICs for the rank's traffic: nics[0] == nic, then one nearest */
  int nics[GR__MAX_RANK_NICS]; /* to each of its GPUs in another NIC domain */
} gr__rank_plan;

typedef struct {
  int local_size;
  gr__policy policy;
  int smt;
  int ncores_total;
  gr__rank_plan *ranks;
  int *gpu_store; /* local_size x (GPUs per rank) */
  int nwarn;
  char warn[GR__MAX_WARN][200];
} gr__node_plan;

typedef struct {
  gr__policy policy;
  int gpus_per_rank, ranks_per_gpu, smt;
  const gr__visible *vis; /* NULL, or GPUs the scheduler fixed per task (vis->fixed) */
} gr__node_plan_opts;

/* Deterministic: the same node and options give the same plan on every local rank. */
gr_status gr__node_plan_compute(const gr__node *n, int local_size, const gr__node_plan_opts *po,
                                gr__node_plan *p);
void gr__node_plan_free(gr__node_plan *p);
/* How near NIC nic is to GPU g and its local cores, on the scale the plan picks NICs by: 0 behind
 * the GPU's PCIe switch, 1 on its NUMA node, 2 in its package, 3 elsewhere. */
int gr__gpu_nic_level(const gr__node *n, int g, const gr__nic *nic);

/* ---- node-local snapshots (snapshot.c) --------------------------------------------------- */
/* Writes the snapshot text into buf (at most cap bytes); returns its length or -1. */
typedef ssize_t (*gr__snapshot_fn)(void *ctx, char *buf, size_t cap);
/* The same text on every local rank of one launch: local rank 0 produces and publishes it, the
 * others read it (snapshot.c says where, and when a file is trusted: same launch, same GPUs, this
 * user's own directory). Alone on the node, or without a launch id in the environment, each
 * produces its own (a local rank other than 0 says so). When the directory cannot be used (another
 * user took its name), every local rank finds that at once: local rank 0 says so, and each follows
 * unshared, the caller's rule without readings (returns -1; unshared is its words for the
 * warning), or produces its own when unshared is NULL. The same rule holds when local rank 0
 * cannot write the snapshot (it follows unshared too) and when the others find none within 10 s.
 * Returns the length in buf, or -1. */
ssize_t gr__snapshot_share(const char *kind, const gr__node *n, int local_rank, int local_size,
                           const char *unshared, gr__snapshot_fn produce, void *ctx, char *buf,
                           size_t cap);

/* ---- least-loaded GPUs (least_loaded.c) ---------------------------------------------------- */
/* --policy least-loaded: keeps in n the GPUs the job needs that other tenants use least (NVML
 * memory in use, then utilisation; local rank 0's readings for every local rank) and notes which
 * in notes->warn. Without NVML, or when local rank 0's readings cannot be shared, nothing changes
 * (closest over every GPU) and the latter is noted. */
void gr__least_loaded(gr__node *n, int local_rank, int local_size, const gr__node_plan_opts *po,
                      gr__node_plan *notes);

/* ---- GPU health gate (health_gate.c) ----------------------------------------------------- */
enum { GR__HEALTH_WARN = 0, GR__HEALTH_OFF, GR__HEALTH_AVOID };
const char *gr__health_mode_name(int mode);
/* Judges the node's GPUs (NVML, shared by local rank 0 through a snapshot file) before planning:
 * warn: local rank 0 prints one line per unhealthy GPU; avoid: also removes them from n. Each
 * unhealthy GPU becomes a line in notes->warn (the plan's warnings, also in the JSON). GR_OK, or
 * GR_ERR_INVALID with the reasons recorded when avoid leaves no GPU (the caller exits 2). */
gr_status gr__health_gate(gr__node *n, int mode, int local_rank, int local_size,
                          gr__node_plan *notes);

/* ---- priority (priority.c) ------------------------------------------------------------- */
enum { GR__PRIO_NORMAL = 0, GR__PRIO_LOW, GR__PRIO_HIGH };
const char *gr__priority_name(int level);
/* The niceness of each level: low runs at this or nicer, high at this or less nice. */
#define GR__PRIO_LOW_NICE 10
#define GR__PRIO_HIGH_NICE (-5)
/* Applies the level's CPU niceness to this process (the program inherits it through exec or the
 * supervisor's fork). GR_OK, or GR_ERR_SYSTEM with the reason recorded (raising priority needs
 * CAP_SYS_NICE or RLIMIT_NICE): the caller warns and runs the program anyway. */
gr_status gr__priority_apply(int level);

/* ---- output ----------------------------------------------------------------------------- */
#define GR__MAX_ENV 32
typedef struct {
  int n;
  char *name[GR__MAX_ENV];
  char *value[GR__MAX_ENV];
} gr__envlist;

/* The variables for one rank (plan contract + conventional ones). */
gr_status gr__plan_env(const gr__node *n, const gr__node_plan *p, int rank, const gr__options *o,
                       gr__envlist *e);
void gr__envlist_free(gr__envlist *e);
/* The value of NAME in e; NULL when e has none. */
const char *gr__envlist_get(const gr__envlist *e, const char *name);
/* The variable that gives a rank its GPUs and its value (malloc'd), in the form the scheduler
 * used; *var NULL when there is nothing to export (no GPU seen, or the variable is kept). */
gr_status gr__visible_env(const gr__node *n, const gr__rank_plan *rp, int mode, const char **var,
                          char **value);
/* Position of the rank's i-th GPU in the list gr__visible_env exports under `mode` (the device
 * ordinal the program sees it at). */
int gr__visible_ordinal(const gr__node *n, const gr__rank_plan *rp, int mode, int i);

/* "gpurun: rank 3/8 on n01: GPU 3 0000:c3:00.0, cores 42-55 (NUMA 3), NIC mlx5_3" */
void gr__print_rank_line(FILE *f, const gr__node *n, const gr__node_plan *p, int rank,
                         const char *host, const gr__options *o);
/* JSON document for ranks [first, last]. */
void gr__print_json(FILE *f, const gr__node *n, const gr__node_plan *p, int first, int last,
                    const gr__options *o, const char *host);
/* A table of the node with every rank's placement. */
void gr__print_topo(FILE *f, const gr__node *n, const gr__node_plan *p);
/* hwloc list syntax of OS indexes of a bitmap, malloc'd. */
char *gr__bitmap_list(hwloc_const_bitmap_t b);

/* ---- the inherited environment (hygiene.c) ------------------------------------------------ */
/* The launcher that already bound this process to CPUs ("Open MPI", "Slurm"), NULL when none says
 * so: its per-rank binding is what gpurun replaces, not a mask the plan must stay within. */
const char *gr__launcher_bound(gr__getenv_fn get, void *ctx);
/* Drops from e the OMP_* variables the user already set (unless o->omp_set); their names go to
 * kept (comma-separated) for -v. */
void gr__envlist_keep_user_omp(gr__envlist *e, const gr__options *o, gr__getenv_fn get, void *ctx,
                               char *kept, size_t keptlen);

/* ---- apply (side effects) --------------------------------------------------------------- */
/* Binds CPU and memory; GR_OK, or a failure with the reason recorded (the caller warns and goes
 * on): GR_ERR_UNSUPPORTED for a topology from a file, GR_ERR_SYSTEM when hwloc refuses.
 * *bound says what was applied (GR_PLAN_BOUND_CPU | GR_PLAN_BOUND_MEM), exported as
 * GR_PLAN_VAR_BOUND for the runtime's placement receipt. */
gr_status gr__bind(const gr__node *n, const gr__node_plan *p, int rank, int *bound);

/* ---- torch.distributed env:// contract (torchenv.c) --------------------------------------- */
typedef struct {
  const char *source;         /* launcher the global rank came from; "none" */
  int rank, size;             /* RANK, WORLD_SIZE */
  int local_rank, local_size; /* LOCAL_RANK, LOCAL_WORLD_SIZE (as gr__whoami) */
  int group_rank;             /* GROUP_RANK (node index); -1 unknown: not exported */
  int nnodes;                 /* -1 unknown */
  char master_addr[256];      /* "" when MASTER_ADDR is already set */
  int master_port;
} gr__torch_env_t;
/* Derives the contract; GR_ERR_INVALID naming the variable that does not parse; GR_ERR_NOT_FOUND
 * with a one-line reason naming --master-addr when rank 0's host cannot be found (everything but
 * master_addr and master_port is filled in then). */
gr_status gr__torch_env_derive(const gr__options *o, gr__getenv_fn get, void *ctx,
                               gr__torch_env_t *t);
/* Appends the contract's variables that are not already set to e (nothing for a row other than
 * this process's own local rank). Rank 0's host not found: an error for a Python program
 * (o->prog_python), else the contract without MASTER_ADDR/MASTER_PORT: a C program on a
 * multi-node job must not fail over a variable only torch.distributed reads. */
gr_status gr__torch_env(const gr__options *o, gr__getenv_fn get, void *ctx, int local_rank,
                        gr__envlist *e);
/* The same on the real environment; a failure is recorded for gr_last_error(). env.c calls it. */
gr_status gr__torch_env_add(const gr__options *o, int local_rank, gr__envlist *e);
/* Slurm hostlists ("gpu[01-03,07],login1"): the number of hosts, or -1 when malformed; the
 * idx-th host into out (0, or -1 when malformed, out of range or longer than outlen). */
long gr__hostlist_count(const char *list);
int gr__hostlist_nth(const char *list, long idx, char *out, size_t outlen);
/* 10000 + FNV-1a(job) mod 20000. */
int gr__torch_port(const char *job);

#endif
