/* The GPUs a scheduler already gave this task, read from the environment, and how every local
 * task's GPUs follow from them. Pure apart from the environment lookup.
 *
 * Variables: NVIDIA nodes read CUDA_VISIBLE_DEVICES; AMD nodes the first present of
 * ROCR_VISIBLE_DEVICES, GPU_DEVICE_ORDINAL, HIP_VISIBLE_DEVICES, CUDA_VISIBLE_DEVICES. Entries are
 * ordinals or UUIDs (GPU-..., a unique prefix is enough, MIG-...), resolved through the
 * NVIDIAUUID / AMDUUID info hwloc gives each GPU. A negative ordinal ends the list (as in CUDA).
 * Slurm's SLURM_STEP_GPUS (else SLURM_JOB_GPUS) holds node-wide indexes of the GPUs the step
 * holds on this node: the pool the node's tasks share. Node-wide indexes are PCI bus order.
 * Ordinals are node-wide when they are all in that list and one is not below its length, and
 * relative to it (Slurm with ConstrainDevices=yes) otherwise; when both readings fit, relative
 * is assumed, and -v says so.
 *
 * Then: the task sees the whole pool -> the plan spreads the local tasks over the pool, as on a
 * whole node. Without a Slurm list and outside srun (no SLURM_LOCALID), the list is taken to be
 * the same for every local task (mpirun passes one environment): that list is the pool. Under
 * srun, the task holds a part of the pool -> it holds exactly that part; the other local
 * tasks are assumed to hold the pool's GPUs in blocks of the same size in local-rank order (Slurm's
 * --gpus-per-task binding, "task 0 gets the first N"), anchored at this task's own block (the
 * step's GPUs need not start at GPU 0); when this task's GPUs are not contiguous or cannot be its
 * block, the others are assumed to hold blocks of the rest of the pool, in order.
 * Slurm's per-task binding exports in SLURM_STEP_GPUS only the task's own GPUs, fewer than
 * SLURM_GPUS_ON_NODE: then that list names the task's GPUs node-wide, the visible-devices
 * ordinals only name them (relative or not), and the pool is the whole node.
 *
 * Never widens access: an empty list, "-1" or "NoDevFiles" is a CPU-only task (the variable stays
 * as it is); an entry that names no GPU of this node (or of the step) is an error; the variable
 * exported later keeps the form given (a UUID stays a UUID). With no GPU visible to hwloc at all
 * nothing can be checked: the variable is kept and the plan is CPU-only. */
#include "gr_launcher.h"

#include "gr_parse.h"
#include "gr_strbuf.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static void note(gr__visible *v, const char *fmt, ...) GR_PRINTF(2, 3);
static void note(gr__visible *v, const char *fmt, ...) {
  gr__strbuf sb;
  gr__strbuf_init_tail(&sb, v->note, sizeof v->note);
  if (gr__strbuf_len(&sb) + 1 >= sizeof v->note) return;
  va_list ap;
  va_start(ap, fmt);
  gr__strbuf_vappendf(&sb, fmt, ap);
  va_end(ap);
}

/* The GPU's UUID as CUDA / ROCm spell it ("GPU-..."), "" when hwloc does not know it. */
static void gpu_uuid(const gr__gpu *g, char *out, size_t len) {
  out[0] = 0;
  /* a whole function: any of its OS devices; a partition: its own device only */
  int whole = g->pcidev && g->partition == 0;
  hwloc_obj_t first = whole ? g->pcidev->io_first_child : g->osdev;
  for (hwloc_obj_t c = first; c; c = whole ? c->next_sibling : NULL) {
    if (c->type != HWLOC_OBJ_OS_DEVICE) continue;
    const char *u = hwloc_obj_get_info_by_name(c, "NVIDIAUUID");
    if (u) {
      snprintf(out, len, "%s", u);
      return;
    }
    u = hwloc_obj_get_info_by_name(c, "AMDUUID");
    if (u) {
      snprintf(out, len, "%s%s", strncasecmp(u, "GPU-", 4) ? "GPU-" : "", u);
      return;
    }
  }
}

/* Position of the node GPU a UUID token names: -1 none, -2 ambiguous. MIG-GPU-<uuid>/g/c (the
 * old form) names its parent GPU; *parent says so. */
static int find_uuid(const gr__node *n, const char *tok, int *parent) {
  *parent = 0;
  char want[64];
  snprintf(want, sizeof want, "%s", tok);
  if (strncasecmp(tok, "MIG-GPU-", 8) == 0) {
    snprintf(want, sizeof want, "%s", tok + 4);
    want[strcspn(want, "/")] = 0;
    *parent = 1;
  }
  size_t wl = strlen(want);
  if (wl <= 4) return -1;
  int hit = -1;
  for (int g = 0; g < n->ngpus; g++) {
    char u[64];
    gpu_uuid(&n->gpus[g], u, sizeof u);
    if (u[0] && strlen(u) >= wl && strncasecmp(u, want, wl) == 0) {
      if (hit >= 0) return -2;
      hit = g;
    }
  }
  return hit;
}

static int cmp_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

/* "0,1,4-5" -> node positions (sorted, distinct); -1 with a message when malformed. */
static int parse_slurm_list(const char *var, const char *s, int ngpus, int *out) {
  int m = 0;
  const char *p = s;
  while (*p) {
    char *end;
    if (!isdigit((unsigned char)*p)) goto bad;
    errno = 0;
    long a = strtol(p, &end, 10), b = a;
    if (errno) goto bad;
    if (*end == '-') {
      if (!isdigit((unsigned char)end[1])) goto bad;
      b = strtol(end + 1, &end, 10);
      if (errno || b < a) goto bad;
    }
    for (long i = a; i <= b; i++) {
      if (i >= ngpus) {
        gr__fail_msg(GR_ERR_INVALID,
                     "%s=%.60s names GPU %ld, this node has %d (indexes in PCI bus order)", var, s,
                     i, ngpus);
        return -1;
      }
      int dup = 0;
      for (int j = 0; j < m; j++)
        dup |= out[j] == (int)i;
      if (!dup) out[m++] = (int)i;
    }
    p = end;
    if (*p == ',') {
      p++;
      if (!*p) goto bad;
    } else if (*p)
      goto bad;
  }
  qsort(out, (size_t)m, sizeof *out, cmp_int);
  return m;
bad:
  gr__fail_msg(GR_ERR_INVALID, "%s=%.60s is not a list of GPU indexes", var, s);
  return -1;
}

/* Keeps the GPUs with keep[position] set; returns the new position of each old one (-1 gone). */
static void restrict_to(gr__node *n, const char *keep, int *newpos) {
  int w = 0;
  for (int i = 0; i < n->ngpus; i++)
    newpos[i] = keep[i] ? w++ : -1;
  gr__node_keep(n, keep);
}

typedef struct {
  char tok[64];
  int pos; /* node position before restriction */
} entry;

gr_status gr__visible_apply(gr__node *n, int local_rank, int local_size, gr__getenv_fn get,
                            void *ctx, gr__visible *v) {
  memset(v, 0, sizeof *v);
  v->local_size = local_size;
  int G = n->ngpus;
  int amd = G > 0 && n->gpus[0].vendor == 0x1002;
  static const char *const nv_vars[] = {"CUDA_VISIBLE_DEVICES"};
  static const char *const amd_vars[] = {"ROCR_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL",
                                         "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"};
  const char *const *vars = amd ? amd_vars : nv_vars;
  size_t nvars = amd ? 4 : 1;
  const char *var = NULL, *val = NULL;
  for (size_t i = 0; i < nvars && !val; i++)
    if ((val = get(ctx, vars[i])) != NULL) var = vars[i];
  const char *svar = "SLURM_STEP_GPUS", *sval = get(ctx, svar);
  if (!sval) sval = get(ctx, svar = "SLURM_JOB_GPUS");
  if (sval && !*sval) sval = NULL;
  if (!val && !sval) return GR_OK;
  if (G == 0) {
    if (val) note(v, "%s=%.60s kept as it is: hwloc sees no GPU on this node", var, val);
    return GR_OK;
  }
  gr_status st = GR_OK;
  int *pool = calloc((size_t)G + 1, sizeof *pool), *newpos = calloc((size_t)G + 1, sizeof(int));
  char *keep = calloc((size_t)G + 1, 1);
  entry *ent = NULL;
  if (!pool || !newpos || !keep) {
    st = GR_ERR_NOMEM;
    goto out;
  }
  int npool = G;
  for (int g = 0; g < G; g++)
    pool[g] = g;
  if (sval) {
    npool = parse_slurm_list(svar, sval, G, pool);
    if (npool < 0) {
      st = GR_ERR_INVALID;
      goto out;
    }
  }
  /* Slurm's per-task binding (--gpus-per-task, --gpu-bind): the list holds only this task's GPUs,
   * fewer than the step has here (SLURM_GPUS_ON_NODE). Then the list says which GPUs, node-wide,
   * and the ordinals of the visible-devices variable (node-wide, or relative under
   * ConstrainDevices) only how to name them; the other tasks hold the node's other GPUs. */
  int per_task = 0;
  {
    int gon;
    if (sval && val && gr__parse_int(get(ctx, "SLURM_GPUS_ON_NODE"), 0, INT_MAX, &gon) == GR_OK &&
        gon > npool)
      per_task = 1;
  }
  if (!val) { /* Slurm's list alone: the pool, planned freely */
    for (int i = 0; i < npool; i++)
      keep[pool[i]] = 1;
    restrict_to(n, keep, newpos);
    note(v, "%s=%.60s: planning over those %d GPU%s", svar, sval, npool, npool == 1 ? "" : "s");
    goto out;
  }
  snprintf(n->gpu_var, sizeof n->gpu_var, "%s", var);

  /* this task's entries */
  size_t vl = strlen(val);
  ent = calloc(vl / 2 + 2, sizeof *ent);
  if (!ent) {
    st = GR_ERR_NOMEM;
    goto out;
  }
  int ne = 0, ords = 0, uuids = 0, unresolved = 0, relative = 0;
  const char *p = val;
  int cpu_only = vl == 0 || strcmp(val, "NoDevFiles") == 0;
  while (!cpu_only && *p) {
    size_t len = strcspn(p, ",");
    const char *a = p, *b = p + len;
    while (a < b && isspace((unsigned char)*a))
      a++;
    while (b > a && isspace((unsigned char)b[-1]))
      b--;
    if (a == b || (size_t)(b - a) >= sizeof ent[0].tok) {
      st = gr__fail_msg(GR_ERR_INVALID, "%s=%.60s has an %s entry", var, val,
                        a == b ? "empty" : "over-long");
      goto out;
    }
    entry *e = &ent[ne];
    memcpy(e->tok, a, (size_t)(b - a));
    e->tok[b - a] = 0;
    char *end;
    errno = 0;
    long o = strtol(e->tok, &end, 10);
    if (*end == 0 && !errno) {
      if (o < 0) break; /* CUDA: an invalid ordinal hides itself and every later entry */
      if (o >= G) {
        st = gr__fail_msg(GR_ERR_INVALID, "%s=%.60s: GPU %ld does not exist on this node (%d GPUs)",
                          var, val, o, G);
        goto out;
      }
      e->pos = (int)o;
      ords++;
    } else if (strncasecmp(e->tok, "GPU-", 4) == 0 || strncasecmp(e->tok, "MIG-", 4) == 0) {
      int parent = 0;
      e->pos = find_uuid(n, e->tok, &parent);
      if (e->pos == -2) {
        st = gr__fail_msg(GR_ERR_INVALID, "%s=%.60s: %s matches several GPUs of this node", var,
                          val, e->tok);
        goto out;
      }
      if (e->pos < 0 && strncasecmp(e->tok, "MIG-", 4) == 0) {
        unresolved++; /* a MIG instance hwloc does not list: which GPU is unknown */
        p += len + (p[len] == ',');
        continue;
      }
      if (e->pos < 0) {
        st = gr__fail_msg(GR_ERR_INVALID, "%s=%.60s: %s names no GPU of this node", var, val,
                          e->tok);
        goto out;
      }
      if (parent) note(v, "%s is taken as its parent GPU; ", e->tok);
      uuids++;
    } else {
      st = gr__fail_msg(GR_ERR_INVALID,
                        "%s=%.60s: '%s' is neither a GPU ordinal nor a GPU-/MIG- UUID", var, val,
                        e->tok);
      goto out;
    }
    ne++;
    p += len;
    if (*p == ',') {
      p++;
      if (!*p) {
        st = gr__fail_msg(GR_ERR_INVALID, "%s=%.60s has an empty entry", var, val);
        goto out;
      }
    }
  }
  if (unresolved) {
    /* never guess a MIG instance's GPU: keep the variable, place cores only */
    n->gpu_var[0] = 0;
    memset(keep, 0, (size_t)G);
    restrict_to(n, keep, newpos);
    note(v, "%s=%.60s kept as it is: hwloc does not list its MIG instance, placing cores only", var,
         val);
    goto out;
  }
  if (ne == 0) {
    n->gpu_var[0] = 0;
    memset(keep, 0, (size_t)G);
    restrict_to(n, keep, newpos);
    note(v, "%s=%.60s kept as it is: no GPU for this task, placing cores only", var, val);
    goto out;
  }
  if (per_task) {
    if (uuids || ne != npool) {
      st = gr__fail_msg(GR_ERR_INVALID, "%s=%.60s does not name the %d GPU%s of %s=%.60s", var, val,
                        npool, npool == 1 ? "" : "s", svar, sval);
      goto out;
    }
    /* the i-th smallest ordinal names the i-th GPU of the list */
    int *o = calloc((size_t)ne, sizeof *o);
    if (!o) {
      st = GR_ERR_NOMEM;
      goto out;
    }
    for (int i = 0; i < ne; i++)
      o[i] = ent[i].pos;
    qsort(o, (size_t)ne, sizeof *o, cmp_int);
    for (int i = 0; i < ne; i++)
      for (int j = 0; j < ne; j++)
        if (ent[i].pos == o[j]) {
          ent[i].pos = pool[j];
          break;
        }
    free(o);
    note(v, "%s=%.60s names this task's GPUs (fewer than SLURM_GPUS_ON_NODE); ", svar, sval);
    for (int g = 0; g < G; g++) /* the other tasks hold the node's other GPUs */
      pool[g] = g;
    npool = G;
  }
  /* ordinals: node-wide, or relative to Slurm's list */
  if (sval && ords && !per_task) {
    int all_in = 1, all_below = 1, differ = 0;
    for (int i = 0; i < ne; i++) {
      if (!isdigit((unsigned char)ent[i].tok[0])) continue;
      int in = 0;
      for (int j = 0; j < npool; j++)
        in |= pool[j] == ent[i].pos;
      all_in &= in;
      all_below &= ent[i].pos < npool;
      if (ent[i].pos < npool) differ |= pool[ent[i].pos] != ent[i].pos;
    }
    if (!all_in && !all_below) {
      st = gr__fail_msg(GR_ERR_INVALID,
                        "%s=%.60s names GPUs outside %s=%.60s, as node-wide indexes and as "
                        "positions in it",
                        var, val, svar, sval);
      goto out;
    }
    if (all_below && (!all_in || differ)) {
      relative = 1;
      for (int i = 0; i < ne; i++)
        if (isdigit((unsigned char)ent[i].tok[0])) ent[i].pos = pool[ent[i].pos];
      note(v, "%s ordinals read as positions in %s=%.60s (Slurm ConstrainDevices)%s; ", var, svar,
           sval, all_in ? ", assumed: they also fit as node-wide indexes" : "");
    }
  }
  for (int i = 0; i < ne; i++) {
    int in = 0;
    for (int j = 0; j < npool; j++)
      in |= pool[j] == ent[i].pos;
    if (!in) {
      st = gr__fail_msg(GR_ERR_INVALID, "%s=%.60s: %s is not among %s=%.60s", var, val, ent[i].tok,
                        svar, sval);
      goto out;
    }
    for (int j = 0; j < i; j++)
      if (ent[j].pos == ent[i].pos) {
        st = gr__fail_msg(GR_ERR_INVALID, "%s=%.60s names GPU %d twice", var, val, ent[i].pos);
        goto out;
      }
  }
  if (ne > GR__MAX_RANK_GPUS) {
    st = gr__fail_msg(GR_ERR_INVALID, "%s=%.60s names %d GPUs, more than a rank may use (%d)", var,
                      val, ne, GR__MAX_RANK_GPUS);
    goto out;
  }
  int whole_pool = ne == npool;
  if (!sval && !whole_pool && !get(ctx, "SLURM_LOCALID")) {
    /* No scheduler says the tasks differ (mpirun): the list is the job's, the same for every
     * local task, and the pool to plan over. (A per-rank wrapper that already chose one GPU per
     * rank would make rank 0's list look like this too; every rank must read it alike.) */
    for (int i = 0; i < ne; i++)
      pool[i] = ent[i].pos;
    npool = ne;
    qsort(pool, (size_t)npool, sizeof *pool, cmp_int);
    whole_pool = 1;
  }
  for (int i = 0; i < npool; i++)
    keep[pool[i]] = 1;
  for (int i = 0; i < ne; i++)
    snprintf(n->gpus[ent[i].pos].token, sizeof n->gpus[0].token, "%s", ent[i].tok);
  restrict_to(n, keep, newpos);
  /* the other tasks' GPUs in the same form, so that --all shows what they were given */
  for (int g = 0; g < n->ngpus; g++)
    if (!n->gpus[g].token[0]) {
      if (relative && !uuids)
        snprintf(n->gpus[g].token, sizeof n->gpus[g].token, "%d", g);
      else if (uuids && !ords)
        gpu_uuid(&n->gpus[g], n->gpus[g].token, sizeof n->gpus[g].token);
    }
  if (whole_pool) {
    note(v,
         "%s=%.60s: this task sees %s%d GPU%s; assumed every local task sees them, planning "
         "the node's tasks over them",
         var, val, sval ? "the step's " : "", ne, ne == 1 ? "" : "s");
    goto out;
  }
  /* this task holds a part of the pool: fixed holdings */
  int k = ne;
  n->pinned = 1;
  int *mine = calloc((size_t)k, sizeof *mine);
  v->fixed = malloc((size_t)local_size * (size_t)k * sizeof *v->fixed);
  if (!mine || !v->fixed) {
    free(mine);
    st = GR_ERR_NOMEM;
    goto out;
  }
  v->k = k;
  for (int i = 0; i < k; i++)
    mine[i] = newpos[ent[i].pos];
  qsort(mine, (size_t)k, sizeof *mine, cmp_int);
  /* new positions are the pool's order. Blocks of k in local-rank order anchored at this task's
   * own (contiguous) GPUs: task t holds [start + t*k, start + (t+1)*k) */
  long long start = (long long)mine[0] - (long long)local_rank * k;
  int block = start >= 0;
  for (int i = 0; block && i < k; i++)
    block = mine[i] == mine[0] + i;
  int next = 0;
  for (int t = 0; t < local_size; t++) {
    int *row = &v->fixed[(size_t)t * (size_t)k];
    for (int i = 0; i < k; i++)
      row[i] = -1;
    if (t == local_rank) {
      memcpy(row, mine, (size_t)k * sizeof *mine);
      continue;
    }
    if (block) {
      if (start + (long long)(t + 1) * k <= npool)
        for (int i = 0; i < k; i++)
          row[i] = (int)(start + (long long)t * k + i);
      continue;
    }
    for (int i = 0; i < k; i++) { /* the next free GPUs of the pool, skipping this task's */
      int taken;
      do {
        taken = 0;
        for (int j = 0; j < k; j++)
          taken |= mine[j] == next;
        if (taken) next++;
      } while (taken);
      if (next < npool) row[i] = next++;
    }
  }
  free(mine);
  note(v,
       "%s=%.60s (local task %d of %d) holds %d of %s%d GPU%s; assumed the other local tasks "
       "hold %d each, %s",
       var, val, local_rank, local_size, k, sval && !per_task ? "the step's " : "the node's ",
       npool, npool == 1 ? "" : "s", k,
       block ? "in local-rank order (Slurm --gpus-per-task)" : "from the rest, in order");
out:
  free(pool), free(newpos), free(keep), free(ent);
  if (st != GR_OK) gr__visible_free(v);
  return st;
}

void gr__visible_free(gr__visible *v) {
  free(v->fixed);
  v->fixed = NULL;
  v->k = 0;
}

/* own: the rank's GPUs. own-first: those, then every other GPU this task may see (not under
 * per-task binding: the scheduler gave the task only its own), so that device 0 is the rank's and
 * CUDA IPC / peer access to the others still works. all: every GPU the task may see, in PCI order. */
static int visible_list(const gr__node *n, const gr__rank_plan *rp, int mode, int *out) {
  int m = 0;
  if (mode == GR__VISIBLE_ALL && !n->pinned) {
    for (int g = 0; g < n->ngpus; g++)
      out[m++] = g;
    return m;
  }
  for (int i = 0; i < rp->ngpus; i++)
    out[m++] = rp->gpu[i];
  if (mode == GR__VISIBLE_OWN_FIRST && !n->pinned)
    for (int g = 0; g < n->ngpus; g++) {
      int own = 0;
      for (int i = 0; i < rp->ngpus && !own; i++)
        own = rp->gpu[i] == g;
      if (!own) out[m++] = g;
    }
  return m;
}

int gr__visible_ordinal(const gr__node *n, const gr__rank_plan *rp, int mode, int i) {
  if (mode != GR__VISIBLE_ALL || n->pinned) return i; /* own GPUs come first */
  return rp->gpu[i];                                  /* all: PCI order = node position */
}

gr_status gr__visible_env(const gr__node *n, const gr__rank_plan *rp, int mode, const char **var,
                          char **value) {
  *var = NULL;
  *value = NULL;
  if (n->ngpus == 0) return GR_OK;
  int amd = 0;
  for (int i = 0; i < rp->ngpus; i++)
    amd |= n->gpus[rp->gpu[i]].vendor == 0x1002;
  if (rp->ngpus == 0) amd = n->gpus[0].vendor == 0x1002;
  int *list = malloc(((size_t)n->ngpus + (size_t)rp->ngpus + 1) * sizeof *list);
  if (!list) return GR_ERR_NOMEM;
  gr__strbuf sb;
  gr__strbuf_init_heap(&sb, (size_t)1 << 20);
  int m = visible_list(n, rp, mode, list);
  for (int i = 0; i < m; i++) {
    const gr__gpu *g = &n->gpus[list[i]];
    if (g->token[0])
      gr__strbuf_appendf(&sb, "%s%s", i ? "," : "", g->token);
    else
      gr__strbuf_appendf(&sb, "%s%d", i ? "," : "", g->index);
  }
  free(list);
  char *s = sb.truncated ? NULL : gr__strbuf_release(&sb, NULL);
  if (!s && !sb.truncated) s = strdup("");
  gr__strbuf_free(&sb);
  if (!s) return GR_ERR_NOMEM;
  *var = n->gpu_var[0] ? n->gpu_var : amd ? "ROCR_VISIBLE_DEVICES" : "CUDA_VISIBLE_DEVICES";
  *value = s;
  return GR_OK;
}
