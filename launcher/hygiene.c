/* What gpurun inherits and must respect: a launcher's own CPU binding (replaced by the plan) versus
 * a mask the user or a cgroup set (the plan stays within it, see main.c), and the user's OMP_*. */
#include "gr_launcher.h"

#include "gr_strbuf.h"

#include <stdlib.h>
#include <string.h>

const char *gr__launcher_bound(gr__getenv_fn get, void *ctx) {
  const char *v = get(ctx, "OMPI_MCA_orte_bound_at_launch");
  if (v && strcmp(v, "1") == 0) return "Open MPI";
  v = get(ctx, "SLURM_CPU_BIND_TYPE");
  if (v && *v && strncmp(v, "none", 4) != 0) return "Slurm";
  return NULL;
}

void gr__envlist_keep_user_omp(gr__envlist *e, const gr__options *o, gr__getenv_fn get, void *ctx,
                               char *kept, size_t keptlen) {
  gr__strbuf sb;
  gr__strbuf_init_fixed(&sb, kept, kept ? keptlen : 0);
  if (o && o->omp_set) return;
  int w = 0;
  for (int i = 0; i < e->n; i++) {
    if (strncmp(e->name[i], "OMP_", 4) == 0 && get(ctx, e->name[i])) {
      size_t l = gr__strbuf_len(&sb);
      gr__strbuf_appendf(&sb, "%s%s=%.40s", l ? ", " : "", e->name[i], get(ctx, e->name[i]));
      for (char *c = sb.cap ? kept + l : NULL; c && *c; c++) /* the value goes to a terminal */
        if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
      free(e->name[i]);
      free(e->value[i]);
      continue;
    }
    e->name[w] = e->name[i];
    e->value[w++] = e->value[i];
  }
  e->n = w;
}
