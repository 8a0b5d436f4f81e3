/* Internal: the plan contract between gpurun and the runtime (docs/architecture.md, "Contracts"):
 * the GPURUN_* variables launcher/env.c writes and base/plan.c reads into a gr_plan. Both sides
 * take the names, the version and the limit from here. Part of the MPI-free base: no MPI, no
 * runtime types. Pure: the environment comes in as an envp-style array, nothing is changed. */
#ifndef GR_PLAN_H
#define GR_PLAN_H

#include <gpurun/limits.h>
#include <gpurun/status.h>

/* The plan version: gpurun writes GR_PLAN_VERSION; the runtime reads any "GR_PLAN_MAJOR" or
 * "GR_PLAN_MAJOR.x". One number, so writer and reader cannot disagree. */
#define GR_PLAN_MAJOR 1
#define GR__PLAN_STR2(x) #x
#define GR__PLAN_STR(x) GR__PLAN_STR2(x)
#define GR_PLAN_VERSION GR__PLAN_STR(GR_PLAN_MAJOR)

/* The variables (writer: launcher/env.c and main.c; reader: gr__plan_parse, the one place the
 * runtime looks them up; gr_init hands the gr_plan it reads to the receipt and the pool). */
#define GR_PLAN_VAR_VERSION "GPURUN_PLAN_VERSION"
#define GR_PLAN_VAR_LOCAL_RANK "GPURUN_LOCAL_RANK"
#define GR_PLAN_VAR_LOCAL_SIZE "GPURUN_LOCAL_SIZE"
#define GR_PLAN_VAR_GPUS "GPURUN_GPUS" /* PCI bus ids, comma-separated, at most GR_MAX_RANK_GPUS */
#define GR_PLAN_VAR_CPUS "GPURUN_CPUS" /* cpuset, hwloc list syntax of OS indexes */
#define GR_PLAN_VAR_NUMA "GPURUN_NUMA" /* NUMA node list; the first is the rank's */
#define GR_PLAN_VAR_NIC "GPURUN_NIC"   /* nearest NIC name, "" none */
/* Beside the plan: the pid of the gpurun that made it (whoami.c tells an inherited plan from its
 * own) and what it bound, comma-separated words (the receipt checks those): the cpuset
 * (GR_PLAN_BOUND_CPU), the memory policy on the NUMA nodes (GR_PLAN_BOUND_MEM). */
#define GR_PLAN_VAR_PLAN_PID "GPURUN_PLAN_PID"
#define GR_PLAN_VAR_BOUND "GPURUN_BOUND"
#define GR_PLAN_BOUND_CPU_WORD "cpu"
#define GR_PLAN_BOUND_MEM_WORD "mem"
enum { GR_PLAN_BOUND_CPU = 1, GR_PLAN_BOUND_MEM = 2 };

/* What the plan says about one rank: the plan part of the public gr_rank_info_t (same fields,
 * same sizes; gr_init copies it over), then what only the runtime's own checks use. */
typedef struct {
  int from_plan;              /* 1 when read from gpurun's plan */
  int local_rank, local_size; /* on this node */
  int ngpus;
  char gpus[GR_MAX_RANK_GPUS][16]; /* PCI bus ids, "0000:c3:00.0" */
  char cpus[256];                  /* cpuset, hwloc list syntax ("0-13") */
  int numa;                        /* NUMA node (OS index), -1 unknown */
  char nic[64];                    /* "mlx5_3", "" none */
  char numa_nodes[1024];           /* the whole NUMA node list ("1,3"), "" none */
  int bound;                       /* GR_PLAN_BOUND_* bits from GPURUN_BOUND; -1 unset */
} gr_plan;

/* Value of NAME in a NULL-terminated "NAME=VALUE" array; NULL when absent. */
const char *gr__env_lookup(char *const *envp, const char *name);

/* Fills *out from envp. Without GPURUN_PLAN_VERSION: GR_OK, from_plan 0,
 * local_rank/local_size -1, no GPUs, cpus "", numa -1, nic "", numa_nodes "", bound -1 (the caller
 * asks MPI and hwloc). A plan that is present but wrong (unknown major version, local rank outside
 * [0, local size), a number that does not parse, more than GR_MAX_RANK_GPUS GPUs, an id or list
 * too long, a cpuset that does not parse) returns GR_ERR_INVALID with a sentence naming the
 * variable and value, and leaves *out as without a plan. Words of GPURUN_BOUND other than
 * GR_PLAN_BOUND_*_WORD are ignored. */
gr_status gr__plan_parse(char *const *envp, gr_plan *out);

#endif
