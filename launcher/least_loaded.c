/* --policy least-loaded: on a node shared without a scheduler, take the GPUs other tenants use
 * least (device memory in use, then utilisation, from NVML), then plan over them as --policy
 * closest does (the cores, memory and NIC next to each GPU). All local ranks pick from local rank
 * 0's readings (gr__snapshot_share); when those cannot be shared, all plan by closest. */
#include "gr_launcher.h"

#include "gr_health.h"
#include "gr_strbuf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static ssize_t produce(void *ctx, char *buf, size_t cap) {
  const gr__node *n = ctx;
  const char **pci = calloc((size_t)n->ngpus, sizeof *pci);
  double *mem = calloc((size_t)n->ngpus, sizeof *mem),
         *util = calloc((size_t)n->ngpus, sizeof *util);
  ssize_t rc = -1;
  if (pci && mem && util) {
    for (int g = 0; g < n->ngpus; g++)
      pci[g] = n->gpus[g].pci;
    gr__gpu_load_read(pci, n->ngpus, mem, util);
    gr__strbuf sb;
    gr__strbuf_init_fixed(&sb, buf, cap);
    for (int g = 0; g < n->ngpus; g++)
      gr__strbuf_appendf(&sb, "%.1f %.0f\n", mem[g], util[g]);
    if (!sb.truncated) rc = (ssize_t)gr__strbuf_len(&sb);
  }
  free(pci);
  free(mem);
  free(util);
  return rc;
}

typedef struct {
  int pos;
  double mem, util;
} load;

/* Unknown (-1) sorts last; ties keep PCI order. */
static int by_load(const void *a, const void *b) {
  const load *x = a, *y = b;
  double xm = x->mem < 0 ? INFINITY : x->mem, ym = y->mem < 0 ? INFINITY : y->mem;
  double xu = x->util < 0 ? INFINITY : x->util, yu = y->util < 0 ? INFINITY : y->util;
  if (xm != ym) return xm < ym ? -1 : 1;
  if (xu != yu) return xu < yu ? -1 : 1;
  return x->pos - y->pos;
}

void gr__least_loaded(gr__node *n, int local_rank, int local_size, const gr__node_plan_opts *po,
                      gr__node_plan *notes) {
  if (n->ngpus <= 1) return;
  int want = local_size;
  if (po->gpus_per_rank > 0)
    want = local_size * po->gpus_per_rank;
  else if (po->ranks_per_gpu > 0)
    want = (local_size + po->ranks_per_gpu - 1) / po->ranks_per_gpu;
  if (want >= n->ngpus) return; /* every GPU is needed anyway */
  size_t cap = (size_t)n->ngpus * 48 + 1;
  char *text = malloc(cap);
  load *l = calloc((size_t)n->ngpus, sizeof *l);
  if (!text || !l) {
    free(text);
    free(l);
    return;
  }
  /* Loads change from one reading to the next, so ranks that cannot share one reading must not
   * each take their own: all of them then plan by closest over every GPU, which needs none. */
  ssize_t len = gr__snapshot_share("load", n, local_rank, local_size,
                                   "--policy least-loaded plans by closest over every GPU", produce,
                                   n, text, cap);
  const char *p = len > 0 ? text : "";
  int known = 0;
  for (int g = 0; g < n->ngpus; g++) {
    l[g].pos = g;
    l[g].mem = l[g].util = -1;
    char *end;
    double m = strtod(p, &end);
    if (end != p) {
      double u = strtod(end, &end);
      if (isfinite(m) && isfinite(u)) l[g].mem = m, l[g].util = u, known += m >= 0;
    }
    const char *nl = strchr(p, '\n');
    p = nl ? nl + 1 : p + strlen(p);
  }
  free(text);
  if (len < 0 && notes && notes->nwarn < GR__MAX_WARN)
    snprintf(notes->warn[notes->nwarn++], sizeof notes->warn[0],
             "least-loaded: no load snapshot shared with the other local ranks; closest over "
             "every GPU");
  if (!known) { /* no NVML or no shared readings: nothing to choose by; closest over every GPU */
    free(l);
    return;
  }
  qsort(l, (size_t)n->ngpus, sizeof *l, by_load);
  char keep[4096], note[200];
  int *chosen = calloc((size_t)n->ngpus, sizeof *chosen);
  for (int i = 0; chosen && i < want; i++)
    chosen[l[i].pos] = 1;
  gr__strbuf kb, nb;
  gr__strbuf_init_fixed(&kb, keep, sizeof keep);
  gr__strbuf_init_fixed(&nb, note, sizeof note);
  gr__strbuf_appendf(&nb, "least-loaded: GPUs");
  for (int g = 0; chosen && g < n->ngpus; g++) /* PCI order, so that closest keeps affinity */
    if (chosen[g]) {
      gr__strbuf_appendf(&kb, "%s%d", gr__strbuf_len(&kb) ? "," : "", g);
      gr__strbuf_appendf(&nb, " %d", n->gpus[g].index);
    }
  gr__strbuf_appendf(&nb, " of %d (least memory in use, then utilisation)", n->ngpus);
  if (chosen) gr__node_restrict(n, keep, NULL, 0);
  if (notes && notes->nwarn < GR__MAX_WARN)
    snprintf(notes->warn[notes->nwarn++], sizeof notes->warn[0], "%s", note);
  free(chosen);
  free(l);
}
