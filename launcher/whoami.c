/* Local rank and local size from whichever launcher started us. The first launcher whose rank
 * variable is present wins; a present variable that does not parse is an error, never a guess. */
#include "gr_launcher.h"

#include "gr_hydra.h"
#include "gr_parse.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* "2(x3),1" = 2,2,2,1. Returns the count for nodeid, -1 if malformed or out of range. */
int gr__slurm_tasks_on_node(const char *spec, int nodeid) {
  if (!spec || nodeid < 0) return -1;
  const char *s = spec;
  long node = 0;
  int result = -1;
  for (;;) {
    char *end;
    if (*s < '0' || *s > '9') return -1;
    errno = 0;
    long count = strtol(s, &end, 10);
    if (errno || count > INT_MAX) return -1;
    s = end;
    long rep = 1;
    if (*s == '(') {
      if (s[1] != 'x' || s[2] < '0' || s[2] > '9') return -1;
      rep = strtol(s + 2, &end, 10);
      if (errno || rep < 1 || rep > INT_MAX || *end != ')') return -1;
      s = end + 1;
    }
    /* the whole string is validated, so a malformed tail fails the same on every node */
    if (result < 0 && nodeid < node + rep) result = (int)count;
    node += rep;
    if (node > INT_MAX) return -1;
    if (*s == 0) break;
    if (*s != ',') return -1;
    s++;
  }
  return result;
}

int gr__hydra_launch(char *out, size_t cap) {
  int pid;
  unsigned long long start;
  if (gr__hydra_proxy(&pid, &start) != 0) return -1;
  int n = snprintf(out, cap, "%d.%llu", pid, start);
  return n > 0 && (size_t)n < cap ? 0 : -1;
}

typedef struct {
  const char *source, *rank_var, *size_var;
} simple_launcher;

/* Open MPI and Hydra before Slurm: an mpirun or mpiexec inside an allocation starts its ranks
 * through srun steps of one task per node (Hydra's proxies), so the ranks inherit SLURM_LOCALID=0
 * and one task per node; only the MPI launcher's own variables count them. srun never sets these. */
static const simple_launcher simple[] = {
    {"GPURUN", GR_PLAN_VAR_LOCAL_RANK, GR_PLAN_VAR_LOCAL_SIZE},
    {"Open MPI", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"MPICH/Hydra", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
};
static const simple_launcher later[] = {
    {"MVAPICH", "MV2_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_SIZE"},
    {"PALS", "PALS_LOCAL_RANKID", "PALS_LOCAL_SIZE"},
};

static gr_status from_pair(const simple_launcher *l, gr__getenv_fn get, void *ctx, gr__whoami_t *w,
                           int *found) {
  const char *r = get(ctx, l->rank_var);
  *found = 0;
  if (!r) return GR_OK;
  *found = 1;
  const char *s = get(ctx, l->size_var);
  if (gr__parse_int(r, 0, INT_MAX, &w->local_rank))
    return gr__fail_msg(GR_ERR_INVALID, "%s=%.40s is not a rank", l->rank_var, r);
  if (!s) return gr__fail_msg(GR_ERR_INVALID, "%s is set but %s is not", l->rank_var, l->size_var);
  if (gr__parse_int(s, 0, INT_MAX, &w->local_size) || w->local_size < 1)
    return gr__fail_msg(GR_ERR_INVALID, "%s=%.40s is not a size", l->size_var, s);
  w->source = l->source;
  return GR_OK;
}

static gr_status from_slurm(gr__getenv_fn get, void *ctx, gr__whoami_t *w, int *found) {
  const char *r = get(ctx, "SLURM_LOCALID");
  *found = 0;
  if (!r) return GR_OK;
  *found = 1;
  if (gr__parse_int(r, 0, INT_MAX, &w->local_rank))
    return gr__fail_msg(GR_ERR_INVALID, "SLURM_LOCALID=%.40s is not a rank", r);
  const char *var = "SLURM_STEP_TASKS_PER_NODE";
  const char *spec = get(ctx, var);
  if (!spec) spec = get(ctx, var = "SLURM_TASKS_PER_NODE");
  if (!spec)
    return gr__fail_msg(GR_ERR_INVALID,
                        "SLURM_LOCALID is set but SLURM_STEP_TASKS_PER_NODE is not");
  int nodeid = 0;
  const char *nid = get(ctx, "SLURM_NODEID");
  if (nid && gr__parse_int(nid, 0, INT_MAX, &nodeid))
    return gr__fail_msg(GR_ERR_INVALID, "SLURM_NODEID=%.40s is not a node index", nid);
  int n = gr__slurm_tasks_on_node(spec, nodeid);
  if (n < 1)
    return gr__fail_msg(GR_ERR_INVALID, "%s=%.60s has no task count for node %d", var, spec,
                        nodeid);
  w->local_size = n;
  w->source = "Slurm";
  return GR_OK;
}

static gr_status from_flux(gr__getenv_fn get, void *ctx, gr__whoami_t *w, int *found) {
  const char *r = get(ctx, "FLUX_TASK_LOCAL_ID");
  *found = 0;
  if (!r) return GR_OK;
  *found = 1;
  if (gr__parse_int(r, 0, INT_MAX, &w->local_rank))
    return gr__fail_msg(GR_ERR_INVALID, "FLUX_TASK_LOCAL_ID=%.40s is not a rank", r);
  /* Flux exports no per-node count; the job's size over its node count is exact for the usual
   * even layouts, and rounded up otherwise (only the last node can then have fewer). */
  int size = 0, nnodes = 1;
  const char *js = get(ctx, "FLUX_JOB_SIZE"), *nn = get(ctx, "FLUX_JOB_NNODES");
  if (!js || gr__parse_int(js, 0, INT_MAX, &size) || size < 1)
    return gr__fail_msg(GR_ERR_INVALID,
                        "FLUX_TASK_LOCAL_ID is set but FLUX_JOB_SIZE=%.40s is not a size",
                        js ? js : "(unset)");
  if (nn && (gr__parse_int(nn, 0, INT_MAX, &nnodes) || nnodes < 1))
    return gr__fail_msg(GR_ERR_INVALID, "FLUX_JOB_NNODES=%.40s is not a node count", nn);
  w->local_size = (size + nnodes - 1) / nnodes;
  w->source = "Flux";
  return GR_OK;
}

/* gpurun exports GR_PLAN_VAR_PLAN_PID with its own pid beside the plan's local rank and size: a
 * program it runs (the same pid after exec) reads them as its own; a gpurun further down (a script
 * that runs `mpirun gpurun` again) sees another pid, so they are an outer job's, not this
 * launch's. A marker that does not parse is not ours either. */
static int inherited_gpurun(gr__getenv_fn get, void *ctx) {
  const char *m = get(ctx, GR_PLAN_VAR_PLAN_PID);
  int pid;
  return m && (gr__parse_int(m, 0, INT_MAX, &pid) != GR_OK || pid != (int)getpid());
}

gr_status gr__whoami(const gr__options *o, gr__getenv_fn get, void *ctx, gr__whoami_t *w) {
  int found = 0;
  w->local_rank = 0;
  w->local_size = 1;
  w->source = "none";
  w->inherited = get(ctx, GR_PLAN_VAR_LOCAL_RANK) && inherited_gpurun(get, ctx);
  if (o && o->local_rank >= 0) {
    w->local_rank = o->local_rank;
    w->local_size = o->local_size;
    w->source = "options";
    found = 1;
  }
  for (size_t i = w->inherited ? 1 : 0; !found && i < sizeof simple / sizeof simple[0]; i++)
    GR_CHECK(from_pair(&simple[i], get, ctx, w, &found));
  if (!found) GR_CHECK(from_slurm(get, ctx, w, &found));
  for (size_t i = 0; !found && i < sizeof later / sizeof later[0]; i++)
    GR_CHECK(from_pair(&later[i], get, ctx, w, &found));
  if (!found) GR_CHECK(from_flux(get, ctx, w, &found));
  /* an outer gpurun's variables, when no launcher of this level says anything */
  if (!found && w->inherited) GR_CHECK(from_pair(&simple[0], get, ctx, w, &found));
  if (!found) {
    w->local_rank = 0;
    w->local_size = 1;
    w->source = "none";
  }
  if (w->local_rank >= w->local_size)
    return gr__fail_msg(GR_ERR_INVALID, "local rank %d is not below the local size %d (from %s)",
                        w->local_rank, w->local_size, w->source);
  return GR_OK;
}
