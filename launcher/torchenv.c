/* The torch.distributed "env://" contract (what torchrun exports) from whichever launcher started
 * us: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT.
 * A variable that is already set is never replaced, so users and outer tools keep the last word.
 * Pure apart from reading the environment through a getter: tests pass fake environments. */
#include "gr_hydra.h"
#include "gr_launcher.h"

#include "gr_parse.h"
#include "gr_strbuf.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- Slurm hostlists ------------------------------------------------------------------------ */

#define HL_MAX_GROUPS 8 /* bracket groups in one entry: "r[1-2]-n[01-04]" has 2 */
#define HL_MAX_HOSTS 1000000000L

static int is_host_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_';
}

/* One "lo" or "lo-hi" item inside brackets; digits only, at most 9 of them, lo <= hi. */
static int hl_range(const char *s, const char *end, long *lo, long *hi, int *width) {
  const char *dash = memchr(s, '-', (size_t)(end - s));
  const char *lo_end = dash ? dash : end;
  if (lo_end == s || lo_end - s > 9) return -1;
  long v = 0;
  for (const char *c = s; c < lo_end; c++) {
    if (*c < '0' || *c > '9') return -1;
    v = v * 10 + (*c - '0');
  }
  *lo = *hi = v;
  *width = (int)(lo_end - s);
  if (!dash) return 0;
  if (dash + 1 == end || end - dash - 1 > 9) return -1;
  v = 0;
  for (const char *c = dash + 1; c < end; c++) {
    if (*c < '0' || *c > '9') return -1;
    v = v * 10 + (*c - '0');
  }
  if (v < *lo) return -1;
  *hi = v;
  return 0;
}

/* Number of hosts in the bracket body [s, end), or -1 when malformed. */
static long hl_group_count(const char *s, const char *end) {
  long n = 0;
  while (s < end) {
    const char *comma = memchr(s, ',', (size_t)(end - s));
    const char *item_end = comma ? comma : end;
    long lo, hi;
    int w;
    if (hl_range(s, item_end, &lo, &hi, &w)) return -1;
    n += hi - lo + 1;
    if (n > HL_MAX_HOSTS) return -1;
    if (!comma) return n;
    s = comma + 1;
    if (s == end) return -1; /* trailing comma */
  }
  return -1; /* empty brackets */
}

/* Appends the idx-th host of the bracket body to out; 0 ok. */
static int hl_group_nth(const char *s, const char *end, long idx, gr__strbuf *out) {
  while (s < end) {
    const char *comma = memchr(s, ',', (size_t)(end - s));
    const char *item_end = comma ? comma : end;
    long lo, hi;
    int w;
    if (hl_range(s, item_end, &lo, &hi, &w)) return -1;
    if (idx <= hi - lo) {
      gr__strbuf_appendf(out, "%0*ld", w, lo + idx);
      return out->truncated ? -1 : 0;
    }
    idx -= hi - lo + 1;
    if (!comma) break;
    s = comma + 1;
  }
  return -1;
}

/* One entry (no top-level comma): its host count, or -1. Literal text must be host characters;
 * brackets do not nest. When out is non-NULL, writes the idx-th host (the last group varies
 * fastest, as Slurm expands "r[1-2]-n[1-2]" to r1-n1,r1-n2,r2-n1,r2-n2). */
static long hl_entry(const char *s, const char *end, long idx, char *out, size_t outlen) {
  const char *open[HL_MAX_GROUPS], *close[HL_MAX_GROUPS];
  long count[HL_MAX_GROUPS];
  int ng = 0;
  long total = 1;
  if (s == end) return -1;
  for (const char *c = s; c < end; c++) {
    if (*c == '[') {
      const char *cl = memchr(c, ']', (size_t)(end - c));
      if (!cl || ng == HL_MAX_GROUPS) return -1;
      for (const char *d = c + 1; d < cl; d++)
        if (*d == '[') return -1;
      long n = hl_group_count(c + 1, cl);
      if (n < 1 || total > HL_MAX_HOSTS / n) return -1;
      total *= n;
      open[ng] = c + 1, close[ng] = cl, count[ng++] = n;
      c = cl;
    } else if (!is_host_char(*c)) {
      return -1;
    }
  }
  if (!out) return total;
  if (idx < 0 || idx >= total || outlen == 0) return -1;
  long digit[HL_MAX_GROUPS];
  for (int g = ng - 1; g >= 0; g--) {
    digit[g] = idx % count[g];
    idx /= count[g];
  }
  gr__strbuf sb;
  gr__strbuf_init_fixed(&sb, out, outlen);
  int g = 0;
  for (const char *c = s; c < end; c++) {
    if (*c == '[') {
      if (hl_group_nth(open[g], close[g], digit[g], &sb)) return -1;
      c = close[g++];
    } else {
      gr__strbuf_putc(&sb, *c);
      if (sb.truncated) return -1;
    }
  }
  return total;
}

/* Calls fn on each top-level entry; stops at the first nonzero return. -1 when the list has an
 * empty entry or unbalanced brackets. */
static long hl_walk(const char *list, long idx, char *out, size_t outlen, long *total) {
  if (!list || !*list) return -1;
  *total = 0;
  int found = out == NULL;
  const char *s = list;
  for (;;) {
    const char *e = s;
    int depth = 0;
    while (*e && (depth || *e != ',')) {
      if (*e == '[') depth++;
      if (*e == ']' && --depth < 0) return -1;
      e++;
    }
    if (depth) return -1;
    long n = hl_entry(s, e, 0, NULL, 0);
    if (n < 0 || *total > HL_MAX_HOSTS - n) return -1;
    if (!found && idx < *total + n) {
      if (hl_entry(s, e, idx - *total, out, outlen) < 0) return -1;
      found = 1;
    }
    *total += n;
    if (!*e) break;
    s = e + 1;
  }
  return found ? 0 : -1;
}

long gr__hostlist_count(const char *list) {
  long total;
  return hl_walk(list, 0, NULL, 0, &total) ? -1 : total;
}

int gr__hostlist_nth(const char *list, long idx, char *out, size_t outlen) {
  long total;
  if (out && outlen) out[0] = 0;
  if (!out || outlen == 0 || idx < 0) return -1;
  int rc = (int)hl_walk(list, idx, out, outlen, &total);
  if (rc) out[0] = 0;
  return rc;
}

/* ---- the contract --------------------------------------------------------------------------- */

/* 10000 + FNV-1a(job id) mod 20000: below Linux's ephemeral range (32768+), the same on every rank
 * of a job, and different for jobs (or steps) that share a node. */
int gr__torch_port(const char *job) {
  uint32_t h = 2166136261u;
  for (const unsigned char *c = (const unsigned char *)job; *c; c++)
    h = (h ^ *c) * 16777619u;
  return 10000 + (int)(h % 20000u);
}

/* A host name or an IP address that we will hand to torch: host characters, ':' and brackets
 * for IPv6; nothing a shell or a URL would read differently. */
static int valid_addr(const char *a) {
  size_t n = strlen(a);
  if (n == 0 || n >= sizeof(((gr__torch_env_t *)0)->master_addr)) return 0;
  for (const char *c = a; *c; c++)
    if (!is_host_char(*c) && *c != ':' && *c != '[' && *c != ']') return 0;
  return 1;
}

/* Open MPI (ORTE) tells every rank mpirun's address ("JOBID;tcp://A,B:PORT;tcp6://..."), and, in
 * its local daemon's URI, whether the rank runs on mpirun's node. Rank 0 runs there in the usual
 * batch layout (mpirun on the allocation's first node, rank 0 mapped first). */
static int ompi_hnp_host(const char *uri, char *out, size_t outlen) {
  const char *t = uri ? strstr(uri, ";tcp://") : NULL;
  if (!t) return -1;
  t += 7;
  size_t n = strcspn(t, ",:;");
  if (n == 0 || n >= outlen) return -1;
  for (size_t i = 0; i < n; i++)
    if (!((t[i] >= '0' && t[i] <= '9') || t[i] == '.')) return -1;
  memcpy(out, t, n);
  out[n] = 0;
  return 0;
}

typedef struct {
  const char *name, *rank, *size, *job;
} launcher_vars;

gr_status gr__torch_env_derive(const gr__options *o, gr__getenv_fn get, void *ctx,
                               gr__torch_env_t *t) {
  memset(t, 0, sizeof *t);
  t->group_rank = -1;
  t->nnodes = -1;
  gr__whoami_t w;
  GR_CHECK(gr__whoami(o, get, ctx, &w));
  t->local_rank = w.local_rank;
  t->local_size = w.local_size;
  /* Open MPI before Slurm (mpirun inside a batch step inherits SLURM_PROCID=0), Slurm before
   * Hydra (srun --mpi=pmi2 sets PMI_RANK too): the order of gr__whoami */
  static const launcher_vars L[] = {
      {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_MCA_ess_base_jobid"},
      {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_JOB_ID"},
      {"PALS", "PALS_RANKID", "PMI_SIZE", "PALS_APID"}, /* before Hydra: Cray PMI sets PMI_RANK */
      {"MPICH/Hydra", "PMI_RANK", "PMI_SIZE", "PMI_JOBID"},
      {"Flux", "FLUX_TASK_RANK", "FLUX_JOB_SIZE", "FLUX_JOB_ID"},
  };
  const launcher_vars *l = NULL;
  /* Hydra (its MPI_LOCALRANKID, which srun never sets) inside an allocation starts its ranks
   * through srun steps of one task per node: their SLURM_PROCID is the proxy's, PMI_RANK theirs */
  if (get(ctx, "MPI_LOCALRANKID") && get(ctx, "PMI_RANK")) l = &L[3];
  for (size_t i = 0; !l && i < sizeof L / sizeof L[0]; i++)
    if (get(ctx, L[i].rank)) l = &L[i];
  char job[128] = "";
  if (!l) {
    /* no launcher: one process, as torchrun --nproc-per-node=1 on one host */
    t->source = "none";
    t->rank = t->local_rank;
    t->size = t->local_size;
    t->group_rank = 0;
    t->nnodes = 1;
  } else {
    t->source = l->name;
    const char *size_var = l->size;
    const char *r = get(ctx, l->rank), *s = get(ctx, size_var);
    if (gr__parse_int(r, 0, INT_MAX, &t->rank))
      return gr__fail_msg(GR_ERR_INVALID, "%s=%.40s is not a rank", l->rank, r);
    if (!s && strcmp(l->name, "Slurm") == 0) s = get(ctx, size_var = "SLURM_NPROCS");
    if (!s || gr__parse_int(s, 0, INT_MAX, &t->size) || t->size < 1)
      return gr__fail_msg(GR_ERR_INVALID,
                          "%s is set but %s=%.40s is not a size (needed for WORLD_SIZE)", l->rank,
                          size_var, s ? s : "(unset)");
    if (t->rank >= t->size)
      return gr__fail_msg(GR_ERR_INVALID, "%s=%d is not below %s=%d", l->rank, t->rank, size_var,
                          t->size);
    const char *j = get(ctx, l->job);
    if (!j && strcmp(l->name, "Open MPI") == 0) j = get(ctx, "PMIX_NAMESPACE");
    if (j) snprintf(job, sizeof job, "%.100s", j);
    /* Hydra outside Slurm sets no job id: its mpiexec's control address names the launch, the
     * same on every node (MASTER_PORT per launch) */
    if (!j && strcmp(l->name, "MPICH/Hydra") == 0) gr__hydra_job(job, sizeof job);
    if (j && strcmp(l->name, "Slurm") == 0) {
      const char *step = get(ctx, "SLURM_STEP_ID");
      snprintf(job, sizeof job, "%.60s.%.60s", j, step ? step : "batch");
    }
    if (strcmp(l->name, "Slurm") == 0 && !get(ctx, "SLURM_STEP_ID")) {
      /* The batch script itself (no srun step): SLURM_NTASKS and SLURM_TASKS_PER_NODE describe
       * the job, but this is one process; a WORLD_SIZE of the job's tasks would leave torch
       * waiting for ranks that never start. */
      t->source = "Slurm batch step";
      t->rank = t->local_rank = 0;
      t->size = t->local_size = 1;
    }
    const char *nn = NULL, *nid = NULL;
    if (strcmp(l->name, "Open MPI") == 0) nn = get(ctx, "OMPI_MCA_orte_num_nodes");
    if (strcmp(l->name, "Slurm") == 0) {
      nn = get(ctx, "SLURM_STEP_NUM_NODES");
      if (!nn) nn = get(ctx, "SLURM_NNODES");
      nid = get(ctx, "SLURM_NODEID");
    }
    if (strcmp(l->name, "PALS") == 0) nid = get(ctx, "PALS_NODEID");
    if (strcmp(l->name, "Flux") == 0) nn = get(ctx, "FLUX_JOB_NNODES");
    if (nn && (gr__parse_int(nn, 0, INT_MAX, &t->nnodes) || t->nnodes < 1)) t->nnodes = -1;
    if (nid && gr__parse_int(nid, 0, INT_MAX, &t->group_rank)) t->group_rank = -1;
  }
  if (t->size == t->local_size) t->nnodes = 1; /* every rank is on this node */
  if (t->nnodes == 1) t->group_rank = 0;
  /* Block layouts (each launcher's default) put node k's ranks at k*local_size...: the node index
   * follows when every node holds the same count. Otherwise GROUP_RANK stays unset. */
  if (t->group_rank < 0 && t->nnodes > 1 && t->size == t->nnodes * t->local_size &&
      (t->rank - t->local_rank) % t->local_size == 0)
    t->group_rank = (t->rank - t->local_rank) / t->local_size;

  /* MASTER_ADDR: rank 0's host */
  const char *why = NULL;
  const char *given = o && o->master_addr[0] ? o->master_addr : NULL;
  if (given) {
    if (!valid_addr(given))
      return gr__fail_msg(GR_ERR_INVALID, "--master-addr '%.60s' is not a host name or address",
                          given);
    snprintf(t->master_addr, sizeof t->master_addr, "%s", given);
  } else if (get(ctx, "MASTER_ADDR")) {
    t->master_addr[0] = 0; /* the user's; nothing to derive */
  } else if (l && strcmp(l->name, "Slurm") == 0) {
    const char *var = "SLURM_STEP_NODELIST";
    const char *list = get(ctx, var);
    if (!list) list = get(ctx, var = "SLURM_JOB_NODELIST");
    if (!list) list = get(ctx, var = "SLURM_NODELIST");
    if (!list)
      why = "Slurm set no SLURM_STEP_NODELIST or SLURM_JOB_NODELIST";
    else if (gr__hostlist_nth(list, 0, t->master_addr, sizeof t->master_addr))
      return gr__fail_msg(GR_ERR_INVALID, "%s=%.80s is not a Slurm hostlist (give --master-addr)",
                          var, list);
  } else if (t->nnodes == 1) {
    snprintf(t->master_addr, sizeof t->master_addr, "127.0.0.1");
  } else if (l && strcmp(l->name, "Open MPI") == 0) {
    const char *hnp = get(ctx, "OMPI_MCA_orte_hnp_uri");
    const char *mine = get(ctx, "OMPI_MCA_orte_local_daemon_uri");
    if (ompi_hnp_host(hnp, t->master_addr, sizeof t->master_addr))
      why = "Open MPI did not tell mpirun's address (OMPI_MCA_orte_hnp_uri)";
    else if (t->rank == 0 && (!mine || strcmp(mine, hnp) != 0))
      why = "rank 0 does not run on mpirun's node, the only host Open MPI names";
  } else {
    why = l ? "this launcher does not name rank 0's host on a multi-node job"
            : "no launcher variables name the hosts";
  }
  t->master_port = o && o->master_port > 0 ? o->master_port
                   : job[0]                ? gr__torch_port(job)
                                           : 29500; /* torch's default */
  if (t->master_port > 65535)
    return gr__fail_msg(GR_ERR_INVALID, "--master-port %d is not below 65536", t->master_port);
  if (why) {
    t->master_addr[0] = '\0';
    return gr__fail_msg(GR_ERR_NOT_FOUND,
                        "cannot find MASTER_ADDR for torch.distributed: %s (%s): give "
                        "--master-addr HOST or set MASTER_ADDR",
                        why, t->source);
  }
  return GR_OK;
}

gr_status gr__torch_env(const gr__options *o, gr__getenv_fn get, void *ctx, int local_rank,
                        gr__envlist *e) {
  /* --dry-run/--topo --all print the node's plan, the same on every rank: this process's own
   * contract has no place there */
  if (o && o->all) return GR_OK;
  gr__torch_env_t t;
  gr_status st = gr__torch_env_derive(o, get, ctx, &t);
  int no_master = 0;
  if (st == GR_ERR_NOT_FOUND && !(o && o->prog_python)) {
    no_master = 1; /* not a Python program: export the rest, no MASTER_* */
    gr_clear_error();
  } else if (st != GR_OK) {
    return st;
  }
  if (local_rank != t.local_rank) return GR_OK; /* a row that is not this process's */
  char v[7][32];
  const char *name[7] = {"RANK",       "WORLD_SIZE",  "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                         "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT"};
  const char *val[7] = {v[0],
                        v[1],
                        v[2],
                        v[3],
                        t.group_rank >= 0 ? v[4] : NULL,
                        t.master_addr[0] ? t.master_addr : NULL,
                        no_master ? NULL : v[6]};
  snprintf(v[0], sizeof v[0], "%d", t.rank);
  snprintf(v[1], sizeof v[1], "%d", t.size);
  snprintf(v[2], sizeof v[2], "%d", t.local_rank);
  snprintf(v[3], sizeof v[3], "%d", t.local_size);
  snprintf(v[4], sizeof v[4], "%d", t.group_rank);
  snprintf(v[6], sizeof v[6], "%d", t.master_port);
  for (int i = 0; i < 7; i++) {
    if (!val[i] || get(ctx, name[i])) continue; /* already set: the user's value stays */
    if (e->n >= GR__MAX_ENV) return gr__fail_msg(GR_ERR_INTERNAL, "too many variables to export");
    e->name[e->n] = strdup(name[i]);
    e->value[e->n] = strdup(val[i]);
    if (!e->name[e->n] || !e->value[e->n]) {
      free(e->name[e->n]);
      free(e->value[e->n]);
      return gr__fail_msg(GR_ERR_NOMEM, "out of memory");
    }
    e->n++;
  }
  return GR_OK;
}

gr_status gr__torch_env_add(const gr__options *o, int local_rank, gr__envlist *e) {
  gr_status st = gr__torch_env(o, gr__real_getenv, NULL, local_rank, e);
  if (st == GR_OK) return GR_OK;
  /* the library's form ("rank R: gpurun: ..."), which main() prints as it is */
  char sentence[1024];
  snprintf(sentence, sizeof sentence, "%s", gr_last_error());
  return gr__fail(st, "gpurun", "%s", sentence);
}
