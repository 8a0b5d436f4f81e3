/* The launcher -> runtime plan contract, read from the environment. */
#include "gr_plan.h"

#include "gr_error.h"
#include "gr_parse.h"

#include <errno.h>
#include <hwloc.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *gr__env_lookup(char *const *envp, const char *name) {
  size_t n = strlen(name);
  for (char *const *e = envp; e && *e; e++)
    if (!strncmp(*e, name, n) && (*e)[n] == '=') return *e + n + 1;
  return NULL;
}

static void no_plan(gr_plan *out) {
  out->from_plan = 0;
  out->local_rank = out->local_size = -1;
  out->ngpus = 0;
  memset(out->gpus, 0, sizeof out->gpus);
  out->cpus[0] = '\0';
  out->numa = -1;
  out->nic[0] = '\0';
  out->numa_nodes[0] = '\0';
  out->bound = -1;
}

/* 1 when WORD is one of LIST's comma-separated words. */
static int has_word(const char *list, const char *word) {
  size_t n = strlen(word);
  for (const char *p = list; p && *p;) {
    size_t len = strcspn(p, ",");
    if (len == n && strncmp(p, word, n) == 0) return 1;
    p += len + (p[len] == ',');
  }
  return 0;
}

static gr_status bad(gr_plan *out, const char *var, const char *val, const char *what) {
  no_plan(out);
  /* a long value is cut, so that the reason after it survives the message buffer */
  return gr__fail(GR_ERR_INVALID, "gr_init", "plan from gpurun: %s='%.80s%s' %s", var, val,
                  strlen(val) > 80 ? "..." : "", what);
}

gr_status gr__plan_parse(char *const *envp, gr_plan *out) {
  no_plan(out);
  const char *ver = gr__env_lookup(envp, GR_PLAN_VAR_VERSION);
  if (!ver) return GR_OK;
  char *end;
  long major = strtol(ver, &end, 10);
  if (end == ver || (*end && *end != '.') || major != GR_PLAN_MAJOR)
    return gr__fail(GR_ERR_INVALID, "gr_init",
                    "plan from gpurun: " GR_PLAN_VAR_VERSION "=%s is not a version %d.x plan "
                    "this runtime reads (mixed gpurun and libgpurun versions?)",
                    ver, GR_PLAN_MAJOR);

  const char *lr = gr__env_lookup(envp, GR_PLAN_VAR_LOCAL_RANK);
  const char *ls = gr__env_lookup(envp, GR_PLAN_VAR_LOCAL_SIZE);
  int local_rank, local_size;
  if (gr__parse_int(lr, INT_MIN, INT_MAX, &local_rank) != GR_OK)
    return bad(out, GR_PLAN_VAR_LOCAL_RANK, lr ? lr : "(unset)", "is not an integer");
  if (gr__parse_int(ls, INT_MIN, INT_MAX, &local_size) != GR_OK || local_size < 1)
    return bad(out, GR_PLAN_VAR_LOCAL_SIZE, ls ? ls : "(unset)", "is not a positive integer");
  if (local_rank < 0 || local_rank >= local_size) {
    char msg[160];
    snprintf(msg, sizeof msg,
             GR_PLAN_VAR_LOCAL_RANK "=%d is outside [0, %d) (" GR_PLAN_VAR_LOCAL_SIZE ")",
             local_rank, local_size);
    no_plan(out);
    return gr__fail(GR_ERR_INVALID, "gr_init", "plan from gpurun: %s", msg);
  }

  gr_plan tmp = *out;
  const char *gpus = gr__env_lookup(envp, GR_PLAN_VAR_GPUS);
  if (gpus && *gpus) {
    const char *p = gpus;
    while (*p) {
      size_t len = strcspn(p, ",");
      if (len == 0 || len >= sizeof tmp.gpus[0])
        return bad(out, GR_PLAN_VAR_GPUS, gpus, "holds an empty or over-long PCI id");
      if (tmp.ngpus == GR_MAX_RANK_GPUS) {
        char what[80];
        snprintf(what, sizeof what, "lists more GPUs than a rank may use (%d)", GR_MAX_RANK_GPUS);
        return bad(out, GR_PLAN_VAR_GPUS, gpus, what);
      }
      memcpy(tmp.gpus[tmp.ngpus], p, len);
      tmp.gpus[tmp.ngpus][len] = '\0';
      tmp.ngpus++;
      p += len;
      if (*p == ',') p++;
    }
  }
  const char *cpus = gr__env_lookup(envp, GR_PLAN_VAR_CPUS);
  if (cpus && *cpus) {
    if (strlen(cpus) >= sizeof tmp.cpus)
      return bad(out, GR_PLAN_VAR_CPUS, cpus, "is longer than 255 characters");
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    int ok = set && hwloc_bitmap_list_sscanf(set, cpus) == 0 && !hwloc_bitmap_iszero(set) &&
             hwloc_bitmap_last(set) >= 0; /* an infinite set ("0-") is not a cpuset */
    hwloc_bitmap_free(set);
    if (!ok) return bad(out, GR_PLAN_VAR_CPUS, cpus, "is not a cpuset list (e.g. 0-13,28-41)");
    snprintf(tmp.cpus, sizeof tmp.cpus, "%s", cpus);
  }
  const char *numa = gr__env_lookup(envp, GR_PLAN_VAR_NUMA);
  if (numa && *numa) {
    /* A list when the rank spans NUMA nodes: the first is the one reported. */
    char first[32];
    size_t len = strcspn(numa, ",");
    if (len >= sizeof first) return bad(out, GR_PLAN_VAR_NUMA, numa, "is not a NUMA node list");
    memcpy(first, numa, len);
    first[len] = '\0';
    if (gr__parse_int(first, INT_MIN, INT_MAX, &tmp.numa) != GR_OK || tmp.numa < 0)
      return bad(out, GR_PLAN_VAR_NUMA, numa, "is not a NUMA node list");
    if (strlen(numa) >= sizeof tmp.numa_nodes)
      return bad(out, GR_PLAN_VAR_NUMA, numa, "is longer than 1023 characters");
    snprintf(tmp.numa_nodes, sizeof tmp.numa_nodes, "%s", numa);
  }
  const char *nic = gr__env_lookup(envp, GR_PLAN_VAR_NIC);
  if (nic && *nic) {
    if (strlen(nic) >= sizeof tmp.nic)
      return bad(out, GR_PLAN_VAR_NIC, nic, "is longer than 63 characters");
    snprintf(tmp.nic, sizeof tmp.nic, "%s", nic);
  }
  const char *bound = gr__env_lookup(envp, GR_PLAN_VAR_BOUND);
  if (bound)
    tmp.bound = (has_word(bound, GR_PLAN_BOUND_CPU_WORD) ? GR_PLAN_BOUND_CPU : 0) |
                (has_word(bound, GR_PLAN_BOUND_MEM_WORD) ? GR_PLAN_BOUND_MEM : 0);
  tmp.local_rank = local_rank;
  tmp.local_size = local_size;
  tmp.from_plan = 1;
  *out = tmp;
  return GR_OK;
}
