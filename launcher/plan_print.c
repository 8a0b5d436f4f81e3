/* Showing the plan: the -v line, the --dry-run text/JSON and the --topo table. */
#include "gr_launcher.h"

#include "gr_escape.h" /* gr__esc_json: the one JSON string escaper */
#include "gr_strbuf.h"

#include <stdlib.h>

void gr__print_rank_line(FILE *f, const gr__node *n, const gr__node_plan *p, int rank,
                         const char *host, const gr__options *o) {
  const gr__rank_plan *rp = &p->ranks[rank];
  char *cpus = gr__bitmap_list(rp->cpuset), *numa = gr__bitmap_list(rp->nodeset);
  /* build the line first: one fputs, so that ranks' lines do not interleave */
  char line[1024];
  gr__strbuf sb;
  gr__strbuf_init_fixed(&sb, line, sizeof line);
  gr__strbuf_appendf(&sb, "gpurun: rank %d/%d on %s: ", rank, p->local_size, host ? host : "?");
  if (rp->ngpus == 0)
    gr__strbuf_appendf(&sb, "no GPU");
  else {
    gr__strbuf_appendf(&sb, "GPU%s ", rp->ngpus > 1 ? "s" : "");
    for (int i = 0; i < rp->ngpus; i++)
      gr__strbuf_appendf(&sb, "%s%d %s", i ? ", " : "", n->gpus[rp->gpu[i]].index,
                         n->gpus[rp->gpu[i]].pci);
  }
  gr__strbuf_appendf(&sb, ", %s %s (NUMA %s)", p->smt ? "PUs" : "cores", cpus ? cpus : "?",
                     numa ? numa : "?");
  gr__strbuf_appendf(&sb, ", NIC %s", rp->nic >= 0 ? n->nics[rp->nic].name : "none");
  if (rp->sharers > 1 && rp->ngpus > 0) {
    /* the values the rank's environment gets: the one list gr__plan_env builds */
    gr__envlist e;
    if (gr__plan_env(n, p, rank, o, &e) == GR_OK) {
      const char *pct = gr__envlist_get(&e, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE");
      const char *lim = gr__envlist_get(&e, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT");
      gr__strbuf_appendf(&sb, ", GPU shared by %d ranks (MPS %s%% of SMs, memory %s)", rp->sharers,
                         pct ? pct : "?", lim ? lim : "unlimited");
      gr__envlist_free(&e);
    }
  } else if (o && o->gpu_mem_limit && rp->ngpus > 0) {
    gr__strbuf_appendf(&sb, ", GPU memory limit %lluM", o->gpu_mem_limit >> 20);
  }
  if (p->policy == GR__POLICY_NONE) gr__strbuf_appendf(&sb, " [policy none: not bound]");
  gr__strbuf_appendf(&sb, "\n");
  fputs(line, f);
  free(cpus), free(numa);
}

void gr__print_json(FILE *f, const gr__node *n, const gr__node_plan *p, int first, int last,
                    const gr__options *o, const char *host) {
  fprintf(f, "{\n  \"plan_version\": %s,\n  \"node\": ", GR_PLAN_VERSION);
  gr__esc_json(f, host ? host : "");
  fprintf(f, ",\n  \"topology\": ");
  if (o && o->topology[0])
    gr__esc_json(f, o->topology);
  else
    fputs("\"live\"", f);
  fprintf(f,
          ",\n  \"local_size\": %d,\n  \"policy\": \"%s\",\n  \"smt\": %s,\n  \"node_gpus\": %d,\n"
          "  \"node_cores\": %d,\n  \"gpu_links\": ",
          p->local_size, gr__policy_name(p->policy), p->smt ? "true" : "false", n->ngpus,
          p->ncores_total);
  if (n->link)
    gr__esc_json(f, n->link_name);
  else
    fputs("null", f);
  fputs(",\n  \"ranks\": [", f);
  for (int r = first; r <= last; r++) {
    const gr__rank_plan *rp = &p->ranks[r];
    fprintf(f, "%s\n    {\"local_rank\": %d, \"gpus\": [", r == first ? "" : ",", r);
    for (int i = 0; i < rp->ngpus; i++) {
      const gr__gpu *g = &n->gpus[rp->gpu[i]];
      fprintf(f, "%s{\"index\": %d, \"pci\": ", i ? ", " : "", g->index);
      gr__esc_json(f, g->pci);
      fputs(", \"name\": ", f);
      gr__esc_json(f, g->name);
      fputc('}', f);
    }
    char *cpus = gr__bitmap_list(rp->cpuset);
    fputs("], \"cpus\": ", f);
    gr__esc_json(f, cpus ? cpus : "");
    free(cpus);
    fputs(", \"numa\": [", f);
    unsigned idx;
    int fst = 1;
    hwloc_bitmap_foreach_begin(idx, rp->nodeset) {
      fprintf(f, "%s%u", fst ? "" : ", ", idx);
      fst = 0;
    }
    hwloc_bitmap_foreach_end();
    fputs("], \"nic\": ", f);
    if (rp->nic >= 0)
      gr__esc_json(f, n->nics[rp->nic].name);
    else
      fputs("null", f);
    fprintf(f, ", \"gpu_sharers\": %d,\n     \"env\": {", rp->sharers);
    gr__envlist e;
    if (gr__plan_env(n, p, r, o, &e) == GR_OK) {
      for (int i = 0; i < e.n; i++) {
        fputs(i ? ", " : "", f);
        gr__esc_json(f, e.name[i]);
        fputs(": ", f);
        gr__esc_json(f, e.value[i]);
      }
      gr__envlist_free(&e);
    }
    fputs("}}", f);
  }
  fputs("\n  ],\n  \"warnings\": [", f);
  for (int i = 0; i < p->nwarn; i++) {
    fputs(i ? ", " : "", f);
    gr__esc_json(f, p->warn[i]);
  }
  fputs("]\n}\n", f);
}

/* One block per NUMA node: its cores, the GPUs and NICs attached there, and the ranks on it. */
void gr__print_topo(FILE *f, const gr__node *n, const gr__node_plan *p) {
  int nn = hwloc_get_nbobjs_by_type(n->topo, HWLOC_OBJ_NUMANODE);
  fprintf(f, "node: %d GPUs, %d NICs, %d cores allowed, %d NUMA nodes%s%s\n", n->ngpus, n->nnics,
          p->ncores_total, nn, n->link ? ", GPU links from " : "", n->link ? n->link_name : "");
  char *gshown = calloc((size_t)n->ngpus + 1, 1), *nshown = calloc((size_t)n->nnics + 1, 1);
  for (int i = 0; i < nn; i++) {
    hwloc_obj_t numa = hwloc_get_obj_by_type(n->topo, HWLOC_OBJ_NUMANODE, (unsigned)i);
    hwloc_bitmap_t cs = hwloc_bitmap_alloc();
    hwloc_bitmap_and(cs, numa->cpuset, n->allowed);
    char *l = gr__bitmap_list(cs);
    fprintf(f, "NUMA %u  PUs %s\n", numa->os_index, l && *l ? l : "(none allowed)");
    free(l);
    for (int g = 0; g < n->ngpus; g++) {
      hwloc_obj_t loc = n->gpus[g].locality;
      if (gshown && !gshown[g] && loc && hwloc_bitmap_intersects(loc->cpuset, numa->cpuset)) {
        gshown[g] = 1;
        fprintf(f, "  GPU %-3d %-13s %-28.28s ranks", n->gpus[g].index, n->gpus[g].pci,
                n->gpus[g].name);
        for (int r = 0; r < p->local_size; r++)
          for (int k = 0; k < p->ranks[r].ngpus; k++)
            if (p->ranks[r].gpu[k] == g) fprintf(f, " %d", r);
        fputc('\n', f);
      }
    }
    for (int c = 0; c < n->nnics; c++) {
      hwloc_obj_t loc = n->nics[c].locality;
      if (nshown && !nshown[c] && loc && hwloc_bitmap_intersects(loc->cpuset, numa->cpuset)) {
        nshown[c] = 1;
        fprintf(f, "  NIC %-13s %-32s ranks", n->nics[c].name, "");
        for (int r = 0; r < p->local_size; r++)
          if (p->ranks[r].nic == c) fprintf(f, " %d", r);
        fputc('\n', f);
      }
    }
    for (int r = 0; r < p->local_size; r++)
      if (hwloc_bitmap_intersects(p->ranks[r].cpuset, numa->cpuset)) {
        hwloc_bitmap_and(cs, p->ranks[r].cpuset, numa->cpuset);
        l = gr__bitmap_list(cs);
        fprintf(f, "  rank %-4d PUs %s\n", r, l ? l : "?");
        free(l);
      }
    hwloc_bitmap_free(cs);
  }
  free(gshown), free(nshown);
  for (int i = 0; i < p->nwarn; i++)
    fprintf(f, "warning: %s\n", p->warn[i]);
}
