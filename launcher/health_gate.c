/* The launch-time GPU health gate (--gpu-health off|warn|avoid). All local ranks must judge the
 * same readings, or two ranks could plan around different GPUs: local rank 0 reads NVML and
 * publishes its verdicts through gr__snapshot_share (snapshot.c); the others read them. The
 * snapshot stays in $TMPDIR/gpurun-<uid> (a few hundred bytes per launch, removed after ten
 * minutes); without NVML nobody waits. When it cannot be shared each rank judges alone: health is
 * a state (errors counted, a slowdown active), not a load: separate readings agree unless a GPU
 * changes state in between. */
#include "gr_launcher.h"

#include "gr_health.h"
#include "gr_jobdir.h"
#include "gr_strbuf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The snapshot text: "<-1|0|1> <reason>" per GPU, in the node's order. */
static ssize_t produce(void *ctx, char *buf, size_t cap) {
  const gr__node *n = ctx;
  gr__gpu_health *h = calloc((size_t)n->ngpus, sizeof *h);
  if (!h) return -1;
  const char **pci = calloc((size_t)n->ngpus, sizeof *pci);
  if (!pci) {
    free(h);
    return -1;
  }
  for (int g = 0; g < n->ngpus; g++)
    pci[g] = n->gpus[g].pci;
  gr__gpu_health_read(pci, n->ngpus, h);
  gr__strbuf sb;
  gr__strbuf_init_fixed(&sb, buf, cap);
  for (int g = 0; g < n->ngpus; g++)
    gr__strbuf_appendf(&sb, "%d %s\n", h[g].known ? h[g].unhealthy : -1, h[g].why);
  free(pci);
  free(h);
  return sb.truncated ? -1 : (ssize_t)gr__strbuf_len(&sb);
}

/* Back from the text (it may come from a file): one line per GPU, printable ASCII kept. */
static int parse(const char *text, gr__gpu_health *h, int n) {
  const char *p = text;
  for (int i = 0; i < n; i++) {
    if (!*p) return -1;
    const char *nl = strchr(p, '\n');
    size_t len = nl ? (size_t)(nl - p) : strlen(p);
    memset(&h[i], 0, sizeof h[i]);
    if (len >= 2 && p[0] == '1' && p[1] == ' ')
      h[i].known = h[i].unhealthy = 1;
    else if (len >= 1 && p[0] == '0')
      h[i].known = 1;
    else if (!(len >= 2 && p[0] == '-' && p[1] == '1'))
      return -1;
    const char *why = memchr(p, ' ', len);
    for (size_t k = 0; why && why + 1 + k < p + len && k + 1 < sizeof h[i].why; k++)
      h[i].why[k] = why[1 + k] >= 32 && why[1 + k] < 127 ? why[1 + k] : '?';
    p = nl ? nl + 1 : p + len;
  }
  return 0;
}

gr_status gr__health_gate(gr__node *n, int mode, int local_rank, int local_size,
                          gr__node_plan *notes) {
  if (mode == GR__HEALTH_OFF || n->ngpus == 0) return GR_OK;
  gr__gpu_health *h = calloc((size_t)n->ngpus, sizeof *h);
  size_t cap = (size_t)n->ngpus * (GR_HEALTH_WHY + 8) + 1;
  char *text = malloc(cap);
  if (!h || !text) {
    free(h);
    free(text);
    return GR_OK;
  }
  /* Without NVML here there is none for local rank 0 either: nothing to share or wait for. */
  ssize_t len =
      local_rank != 0 && !gr__nvml_loadable()
          ? produce(n, text, cap)
          : gr__snapshot_share("health", n, local_rank, local_size, NULL, produce, n, text, cap);
  if (len < 0 || parse(text, h, n->ngpus) != 0) memset(h, 0, (size_t)n->ngpus * sizeof *h);
  free(text);
  char keep[4096];
  gr__strbuf kb;
  gr__strbuf_init_fixed(&kb, keep, sizeof keep);
  int healthy = 0;
  gr_status rc = GR_OK;
  for (int g = 0; g < n->ngpus; g++) {
    if (!h[g].unhealthy) {
      if (gr__strbuf_len(&kb) + 8 < sizeof keep)
        gr__strbuf_appendf(&kb, "%s%d", gr__strbuf_len(&kb) ? "," : "", g);
      healthy++;
      continue;
    }
    char line[300];
    snprintf(line, sizeof line, "GPU %d %s %s: %s", n->gpus[g].index, n->gpus[g].pci,
             mode == GR__HEALTH_AVOID ? "avoided" : "is unhealthy", h[g].why);
    if (local_rank == 0) fprintf(stderr, "gpurun: warning: %s\n", line);
    if (notes && notes->nwarn < GR__MAX_WARN)
      snprintf(notes->warn[notes->nwarn++], sizeof notes->warn[0], "%.199s", line);
  }
  if (mode == GR__HEALTH_AVOID && healthy < n->ngpus) {
    if (!healthy) {
      char err[1024];
      gr__strbuf eb;
      gr__strbuf_init_fixed(&eb, err, sizeof err);
      gr__strbuf_appendf(&eb, "--gpu-health avoid: no healthy GPU left:");
      for (int g = 0; g < n->ngpus; g++)
        gr__strbuf_appendf(&eb, "%s GPU %d %s: %s", g ? ";" : "", n->gpus[g].index, n->gpus[g].pci,
                           h[g].why);
      rc = gr__fail_msg(GR_ERR_INVALID, "%s", err);
    } else {
      gr__node_restrict(n, keep, NULL, 0);
    }
  }
  free(h);
  return rc;
}
