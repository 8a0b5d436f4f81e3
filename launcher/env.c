/* The environment one rank's program gets: the plan contract (GPURUN_*, read back by base/plan.c;
 * docs/architecture.md, "Contracts") and the conventional variables CUDA, ROCm, OpenMP and
 * UCX read. Pure: builds a list, sets nothing. */
#include "gr_launcher.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

char *gr__bitmap_list(hwloc_const_bitmap_t b) {
  char *s = NULL;
  if (hwloc_bitmap_list_asprintf(&s, b) < 0) return NULL;
  return s;
}

static gr_status add(gr__envlist *e, const char *name, const char *fmt, ...) GR_PRINTF(3, 4);
static gr_status add(gr__envlist *e, const char *name, const char *fmt, ...) {
  if (e->n >= GR__MAX_ENV) return GR_ERR_INTERNAL;
  va_list ap;
  va_start(ap, fmt);
  char *v = NULL;
  int rc = vasprintf(&v, fmt, ap);
  va_end(ap);
  if (rc < 0) return GR_ERR_NOMEM;
  e->name[e->n] = strdup(name);
  if (!e->name[e->n]) {
    free(v);
    return GR_ERR_NOMEM;
  }
  e->value[e->n++] = v;
  return GR_OK;
}

/* A growing string; on allocation failure it stays NULL and the caller reports it. */
typedef struct {
  char *s;
  size_t len, cap;
} sbuf;

static void sb_add(sbuf *b, const char *fmt, ...) GR_PRINTF(2, 3);
static void sb_add(sbuf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int need = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (need < 0) return;
  if (b->len + (size_t)need + 1 > b->cap) {
    size_t cap = (b->cap ? b->cap * 2 : 64) + (size_t)need;
    char *ns = realloc(b->s, cap);
    if (!ns) return;
    b->s = ns;
    b->cap = cap;
  }
  va_start(ap, fmt);
  vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
  va_end(ap);
  b->len += (size_t)need;
}

gr_status gr__plan_env(const gr__node *n, const gr__node_plan *p, int rank, const gr__options *o,
                       gr__envlist *e) {
  memset(e, 0, sizeof *e);
  const gr__rank_plan *rp = &p->ranks[rank];
  gr_status st = GR_OK;
  sbuf gpus = {0}, ord = {0}, numa = {0}, places = {0}, mem = {0};
  int amd = 0;
  for (int i = 0; i < rp->ngpus; i++) {
    const gr__gpu *g = &n->gpus[rp->gpu[i]];
    sb_add(&gpus, "%s%s", i ? "," : "", g->pci);
    sb_add(&ord, "%s%d", i ? "," : "", g->index);
    if (g->vendor == 0x1002) amd = 1;
  }
  int first = 1;
  unsigned idx;
  hwloc_bitmap_foreach_begin(idx, rp->nodeset) {
    sb_add(&numa, "%s%u", first ? "" : ",", idx);
    first = 0;
  }
  hwloc_bitmap_foreach_end();
  /* OMP_PLACES: one place per core (its PUs under --smt) */
  first = 1;
  hwloc_bitmap_t left = hwloc_bitmap_dup(rp->cpuset);
  int nplaces = 0;
  while (left && !hwloc_bitmap_iszero(left)) {
    int pu = hwloc_bitmap_first(left);
    hwloc_obj_t pu_obj = hwloc_get_pu_obj_by_os_index(n->topo, (unsigned)pu);
    hwloc_obj_t core =
        pu_obj ? hwloc_get_ancestor_obj_by_type(n->topo, HWLOC_OBJ_CORE, pu_obj) : NULL;
    hwloc_bitmap_t place = hwloc_bitmap_alloc();
    if (core)
      hwloc_bitmap_and(place, core->cpuset, left);
    else
      hwloc_bitmap_only(place, (unsigned)pu);
    char *l = gr__bitmap_list(place);
    sb_add(&places, "%s{%s}", first ? "" : ",", l ? l : "");
    free(l);
    hwloc_bitmap_andnot(left, left, place);
    hwloc_bitmap_free(place);
    first = 0;
    nplaces++;
  }
  hwloc_bitmap_free(left);
  char *cpus = gr__bitmap_list(rp->cpuset);
  int threads = p->local_size > p->ncores_total ? 1 : hwloc_bitmap_weight(rp->cpuset);
  if (threads < 1) threads = 1;

#define ADD(...) GR_CHECK_GOTO(add(e, __VA_ARGS__), st, out)
  ADD(GR_PLAN_VAR_VERSION, "%s", GR_PLAN_VERSION);
  ADD(GR_PLAN_VAR_LOCAL_RANK, "%d", rank);
  ADD(GR_PLAN_VAR_LOCAL_SIZE, "%d", p->local_size);
  ADD(GR_PLAN_VAR_GPUS, "%s", gpus.s ? gpus.s : "");
  ADD(GR_PLAN_VAR_CPUS, "%s", cpus ? cpus : "");
  ADD(GR_PLAN_VAR_NUMA, "%s", numa.s ? numa.s : "");
  ADD(GR_PLAN_VAR_NIC, "%s", rp->nic >= 0 ? n->nics[rp->nic].name : "");
  {
    /* the GPUs in the form the scheduler named them (visible.c) */
    const char *gvar = NULL;
    char *gval = NULL;
    GR_CHECK_GOTO(gr__visible_env(n, rp, o ? o->visible : GR__VISIBLE_OWN, &gvar, &gval), st, out);
    if (gvar) {
      st = add(e, gvar, "%s", gval);
      free(gval);
      if (st != GR_OK) goto out;
      if (strcmp(gvar, "CUDA_VISIBLE_DEVICES") == 0 && !amd) ADD("CUDA_DEVICE_ORDER", "PCI_BUS_ID");
    }
  }
  ADD("OMP_NUM_THREADS", "%d", threads);
  ADD("OMP_PLACES", "%s", places.s ? places.s : "cores");
  ADD("OMP_PROC_BIND", "close");
  if (rp->nic >= 0) {
    /* every NIC of the rank; NCCL's list exact ('=') so that mlx5_1 does not also pick mlx5_10 */
    sbuf ucx = {0}, hca = {0};
    for (int i = 0; i < rp->nnics; i++) {
      const gr__nic *c = &n->nics[rp->nics[i]];
      sb_add(&ucx, "%s%s", i ? "," : "", c->ucx);
      if (c->osdev && c->osdev->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS)
        sb_add(&hca, "%s%s", hca.len ? "," : "=", c->ucx);
    }
    st = add(e, "UCX_NET_DEVICES", "%s", ucx.s ? ucx.s : n->nics[rp->nic].ucx);
    if (st == GR_OK && hca.s) st = add(e, "NCCL_IB_HCA", "%s", hca.s);
    free(ucx.s), free(hca.s);
    if (st != GR_OK) goto out;
  }
  /* GPUs shared through MPS: an even share of the SMs and of the memory for each rank */
  if (rp->ngpus > 0 && (rp->sharers > 1 || (o && o->gpu_mem_limit))) {
    if (rp->sharers > 1) {
      int pct = 100 / rp->sharers;
      ADD("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "%d", pct < 1 ? 1 : pct);
    }
    for (int i = 0; i < rp->ngpus; i++) {
      unsigned long long lim = o && o->gpu_mem_limit
                                   ? o->gpu_mem_limit
                                   : n->gpus[rp->gpu[i]].mem_bytes / (unsigned)rp->sharers;
      int dev = gr__visible_ordinal(n, rp, o ? o->visible : GR__VISIBLE_OWN, i);
      if (lim) sb_add(&mem, "%s%d=%lluM", mem.len ? "," : "", dev, lim >> 20 ? lim >> 20 : 1);
    }
    if (mem.s) ADD("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "%s", mem.s);
  }
#undef ADD
  GR_CHECK_GOTO(gr__torch_env_add(o, rank, e), st, out); /* RANK, MASTER_ADDR...: torchenv.c */
out:
  free(gpus.s), free(ord.s), free(numa.s), free(places.s), free(mem.s), free(cpus);
  if (st != GR_OK) gr__envlist_free(e);
  return st;
}

const char *gr__envlist_get(const gr__envlist *e, const char *name) {
  for (int i = 0; i < e->n; i++)
    if (strcmp(e->name[i], name) == 0) return e->value[i];
  return NULL;
}

void gr__envlist_free(gr__envlist *e) {
  for (int i = 0; i < e->n; i++) {
    free(e->name[i]);
    free(e->value[i]);
  }
  e->n = 0;
}
