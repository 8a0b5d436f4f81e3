/* The environment one rank's program gets: the plan contract (GPURUN_*, read back by base/plan.c;
 * docs/architecture.md, "Contracts") and the conventional variables CUDA, ROCm, OpenMP and
 * UCX read. Pure: builds a list, sets nothing. */
#include "gr_launcher.h"
#include "gr_strbuf.h"

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

/* The most text one list variable may take (a rank's GPUs, cores, NUMA nodes or NICs). */
#define ENV_LIST_MAX ((size_t)1 << 20)

/* The list's text, or none when it is empty. */
static const char *text_or(const gr__strbuf *b, const char *none) {
  return gr__strbuf_len(b) ? gr__strbuf_str(b) : none;
}

gr_status gr__plan_env(const gr__node *n, const gr__node_plan *p, int rank, const gr__options *o,
                       gr__envlist *e) {
  memset(e, 0, sizeof *e);
  const gr__rank_plan *rp = &p->ranks[rank];
  gr_status st = GR_OK;
  gr__strbuf gpus, ord, numa, places, mem;
  gr__strbuf_init_heap(&gpus, ENV_LIST_MAX);
  gr__strbuf_init_heap(&ord, ENV_LIST_MAX);
  gr__strbuf_init_heap(&numa, ENV_LIST_MAX);
  gr__strbuf_init_heap(&places, ENV_LIST_MAX);
  gr__strbuf_init_heap(&mem, ENV_LIST_MAX);
  int amd = 0;
  for (int i = 0; i < rp->ngpus; i++) {
    const gr__gpu *g = &n->gpus[rp->gpu[i]];
    gr__strbuf_appendf(&gpus, "%s%s", i ? "," : "", g->pci);
    gr__strbuf_appendf(&ord, "%s%d", i ? "," : "", g->index);
    if (g->vendor == 0x1002) amd = 1;
  }
  int first = 1;
  unsigned idx;
  hwloc_bitmap_foreach_begin(idx, rp->nodeset) {
    gr__strbuf_appendf(&numa, "%s%u", first ? "" : ",", idx);
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
    gr__strbuf_appendf(&places, "%s{%s}", first ? "" : ",", l ? l : "");
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
  if (gpus.truncated || numa.truncated || places.truncated) {
    st = GR_ERR_NOMEM;
    goto out;
  }
  ADD(GR_PLAN_VAR_VERSION, "%s", GR_PLAN_VERSION);
  ADD(GR_PLAN_VAR_LOCAL_RANK, "%d", rank);
  ADD(GR_PLAN_VAR_LOCAL_SIZE, "%d", p->local_size);
  ADD(GR_PLAN_VAR_GPUS, "%s", gr__strbuf_str(&gpus));
  ADD(GR_PLAN_VAR_CPUS, "%s", cpus ? cpus : "");
  ADD(GR_PLAN_VAR_NUMA, "%s", gr__strbuf_str(&numa));
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
  ADD("OMP_PLACES", "%s", text_or(&places, "cores"));
  ADD("OMP_PROC_BIND", "close");
  if (rp->nic >= 0) {
    /* every NIC of the rank; NCCL's list exact ('=') so that mlx5_1 does not also pick mlx5_10 */
    gr__strbuf ucx, hca;
    gr__strbuf_init_heap(&ucx, ENV_LIST_MAX);
    gr__strbuf_init_heap(&hca, ENV_LIST_MAX);
    for (int i = 0; i < rp->nnics; i++) {
      const gr__nic *c = &n->nics[rp->nics[i]];
      gr__strbuf_appendf(&ucx, "%s%s", i ? "," : "", c->ucx);
      if (c->osdev && c->osdev->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS)
        gr__strbuf_appendf(&hca, "%s%s", gr__strbuf_len(&hca) ? "," : "=", c->ucx);
    }
    st = ucx.truncated || hca.truncated ? GR_ERR_NOMEM : GR_OK;
    if (st == GR_OK) st = add(e, "UCX_NET_DEVICES", "%s", text_or(&ucx, n->nics[rp->nic].ucx));
    if (st == GR_OK && gr__strbuf_len(&hca)) st = add(e, "NCCL_IB_HCA", "%s", gr__strbuf_str(&hca));
    gr__strbuf_free(&ucx), gr__strbuf_free(&hca);
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
      if (lim)
        gr__strbuf_appendf(&mem, "%s%d=%lluM", gr__strbuf_len(&mem) ? "," : "", dev,
                           lim >> 20 ? lim >> 20 : 1);
    }
    if (mem.truncated) {
      st = GR_ERR_NOMEM;
      goto out;
    }
    if (gr__strbuf_len(&mem)) ADD("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "%s", gr__strbuf_str(&mem));
  }
#undef ADD
  GR_CHECK_GOTO(gr__torch_env_add(o, rank, e), st, out); /* RANK, MASTER_ADDR...: torchenv.c */
out:
  gr__strbuf_free(&gpus), gr__strbuf_free(&ord), gr__strbuf_free(&numa);
  gr__strbuf_free(&places), gr__strbuf_free(&mem), free(cpus);
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
