/* Internal: reading the plan gpurun exported (the GPURUN_* variables launcher/env.c writes;
 * docs/architecture.md, "Contracts") into a gr_rank_info_t. Pure: the environment comes in as an
 * envp-style array, nothing is changed. */
#ifndef GR_PLAN_H
#define GR_PLAN_H

#include <gpurun/runtime.h>

/* The plan major version this runtime reads (GPURUN_PLAN_VERSION "1" or "1.x"). */
#define GR_PLAN_MAJOR 1

/* Value of NAME in a NULL-terminated "NAME=VALUE" array; NULL when absent. */
const char *gr__env_lookup(char *const *envp, const char *name);

/* Fills the plan part of *out (local rank/size, GPUs, cpus, NUMA, NIC, from_plan) from envp and
 * leaves rank, size, node and backend alone. Without GPURUN_PLAN_VERSION: GR_OK, from_plan 0,
 * local_rank/local_size -1, no GPUs, cpus "", numa -1, nic "" (the caller asks MPI and hwloc).
 * A plan that is present but wrong (unknown major version, local rank outside [0, local size),
 * a number that does not parse, more than GR_MAX_RANK_GPUS GPUs, an id or list too long, a cpuset
 * that does not parse) returns GR_ERR_INVALID with a sentence naming the variable and value, and
 * leaves *out's plan fields as without a plan. */
gr_status gr__plan_parse(char *const *envp, gr_rank_info_t *out);

#endif
