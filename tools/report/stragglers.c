/* gpurun-report: which ranks arrive last at collectives (gr_report.h), from the MPI layer's call
 * statistics (base/gr_mpistats_format.h). A rank that arrives last spends the least time inside
 * a blocking collective, and every other rank waits for it: per collective number joined across
 * the members' files, the rank with the shortest time is the last to arrive and each rank's lag is
 * the longest time minus its own. No clock common to the nodes is needed. */
#include "gr_report.h"
#include "gr_stragglers.h"

#include "gr_escape.h"
#include "gr_error.h"
#include "gr_json_read.h"
#include "gr_median.h"
#include "gr_mpistats_format.h"
#include "gr_parse.h"

#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_FILE                                                                                   \
  (4u << 20) /* a ring of 1024 numbers per communicator, 16 communicators: far less */
#define MAX_RANKS 65536
#define MAX_COMMS 64

typedef struct {
  int rank;  /* world rank (the file's) */
  int crank; /* its rank in the communicator */
  int npeers;
  double *waited_on;   /* seconds blocked on each peer (communicator ranks), NULL when absent */
  double calls, mpi_s; /* on this communicator */
  unsigned long long first;
  int n;
  double *durs; /* n numbers from first; NAN: not a blocking collective */
} member;

typedef struct {
  char id[32], name[32];
  int size, nm;
  member m[64]; /* the first 64 members found; more are counted, not joined */
  int extra;
  /* the analysis (analyse_comm) */
  int joined;                      /* blocking collectives every member's ring holds */
  int last[64];                    /* how often each member arrived last */
  double lag_sum[64], lag_max[64]; /* seconds after the first arrival */
  int waited_for;                  /* world rank the others waited for, -1 none stands out */
  int most; /* the rank they waited for most, by a tenth at least but not standing out; -1 */
  char waited[320], arrival[200]; /* the two verdict lines */
} comm;

struct gr__rpt_arrivals {
  int n;
  comm c[MAX_COMMS];
};

static comm *find_comm(comm *c, int *nc, const char *id, const char *name, int size) {
  for (int i = 0; i < *nc; i++)
    if (!strcmp(c[i].id, id) && c[i].size == size) return &c[i];
  if (*nc >= MAX_COMMS) return NULL;
  comm *n = &c[(*nc)++];
  memset(n, 0, sizeof *n);
  snprintf(n->id, sizeof n->id, "%s", id);
  snprintf(n->name, sizeof n->name, "%s", name ? name : id);
  n->size = size;
  return n;
}

/* Joins one parsed mpistats file (name: for the warnings) into the communicators; frees doc. */
static void load_doc(gr__rpt_json *doc, const char *name, comm *cs, int *nc, FILE *warn) {
  double wr = gr__rpt_json_num(doc, GR_MS_RANK, -1);
  const gr__rpt_json *comms = gr__rpt_json_get(doc, GR_MS_COMMS);
  if (!(wr >= 0 && wr < MAX_RANKS) || !comms || comms->type != GR__RPT_JSON_ARR) {
    fprintf(warn, "gpurun-report: warning: %s skipped: no rank or communicators\n", name);
    gr__rpt_json_free(doc);
    return;
  }
  for (const gr__rpt_json *c = comms->child; c; c = c->next) {
    const char *id = gr__rpt_json_str(c, GR_MS_ID), *nm = gr__rpt_json_str(c, GR_MS_NAME);
    double size = gr__rpt_json_num(c, GR_MS_SIZE, -1), first = gr__rpt_json_num(c, GR_MS_FIRST, 0);
    const gr__rpt_json *durs = gr__rpt_json_get(c, GR_MS_DURS);
    if (!id || strlen(id) >= 32 || !(size >= 2 && size < MAX_RANKS) ||
        !(first >= 0 && first < 1e18))
      continue;
    comm *g = find_comm(cs, nc, id, nm, (int)size);
    if (!g) continue;
    if (g->nm >= (int)(sizeof g->m / sizeof g->m[0])) {
      g->extra++;
      continue;
    }
    member *m = &g->m[g->nm];
    memset(m, 0, sizeof *m);
    m->rank = (int)wr;
    double cr = gr__rpt_json_num(c, GR_MS_RANK, -1);
    m->crank = cr >= 0 && cr < size ? (int)cr : -1;
    const gr__rpt_json *wo = gr__rpt_json_get(c, GR_MS_WAITED_ON);
    int np = 0;
    for (const gr__rpt_json *d = wo && wo->type == GR__RPT_JSON_ARR ? wo->child : NULL;
         d && np < GR_MPISTATS_MAX_PEERS; d = d->next)
      np++;
    if (np && np <= (int)size && (m->waited_on = calloc((size_t)np, sizeof *m->waited_on))) {
      int k = 0;
      for (const gr__rpt_json *d = wo->child; d && k < np; d = d->next, k++)
        m->waited_on[k] = d->type == GR__RPT_JSON_NUM && d->num >= 0 && d->num < 1e9 ? d->num : 0;
      m->npeers = np;
    }
    m->calls = gr__rpt_json_num(c, GR_MS_CALLS, 0);
    m->mpi_s = gr__rpt_json_num(c, GR_MS_MPI_S, 0);
    if (!(m->mpi_s >= 0 && m->mpi_s < 1e9)) m->mpi_s = 0; /* 1e308 twice: an infinite median */
    m->first = (unsigned long long)first;
    int n = 0;
    for (const gr__rpt_json *d = durs && durs->type == GR__RPT_JSON_ARR ? durs->child : NULL;
         d && n < GR_MPISTATS_RING; d = d->next)
      n++;
    m->durs = n ? malloc((size_t)n * sizeof *m->durs) : NULL;
    if (n && !m->durs) continue;
    int k = 0;
    for (const gr__rpt_json *d = n ? durs->child : NULL; d && k < n; d = d->next, k++)
      m->durs[k] = d->type == GR__RPT_JSON_NUM && d->num >= 0 && d->num < 1e9 ? d->num : NAN;
    m->n = n;
    g->nm++;
  }
  gr__rpt_json_free(doc);
}

static void load_file(int dirfd, const char *name, comm *cs, int *nc, FILE *warn) {
  gr__rpt_json *doc = NULL;
  size_t at = 0;
  if (gr__rpt_json_parse_file_at(dirfd, name, MAX_FILE, &at, &doc) != GR_OK) {
    char esc[256];
    fprintf(warn, "gpurun-report: warning: %s skipped: %s\n", name,
            gr__esc_term_str(esc, sizeof esc, gr_last_error()));
    return;
  }
  load_doc(doc, name, cs, nc, warn);
}

/* The time member m spent inside collective number num, NAN when it has none. */
static double dur_of(const member *m, unsigned long long num) {
  if (num < m->first || num - m->first >= (unsigned long long)m->n) return NAN;
  return m->durs[num - m->first];
}

/* The rank the others wait for. First from the time each member was blocked on each peer in sends,
 * receives and the waits that completed them (the layer's waited_on): summed over the others, the
 * slow rank has the most, and it is named when that is at least 1.5 times the median of the
 * others' totals. A code without point to point falls back on the time inside MPI on the
 * communicator (as mpiP reads it): the slow rank computes while the others wait, so it has the
 * least, named at two thirds of the others' median or less. Both catch a rank slowed between
 * the collectives, which the arrivals at collectives alone miss in a halo exchange. */
static void slowest_by_wait(comm *g) {
  g->waited_for = g->most = -1;
  /* first, whom the others were blocked on in sends, receives and their waits */
  double by[64] = {0}, total = 0;
  int have = 0;
  for (int i = 0; i < g->nm; i++)
    for (int j = 0; j < g->nm; j++)
      if (i != j && g->m[i].waited_on && g->m[j].crank >= 0 && g->m[j].crank < g->m[i].npeers) {
        by[j] += g->m[i].waited_on[g->m[j].crank];
        have = 1;
      }
  if (have) {
    int top = 0;
    double rest[64];
    int n = 0;
    for (int j = 0; j < g->nm; j++) {
      total += by[j];
      if (by[j] > by[top]) top = j;
    }
    for (int j = 0; j < g->nm; j++)
      if (j != top) rest[n++] = by[j];
    double med = gr__median(rest, n);
    if (by[top] > 0 && by[top] >= 1.1 * med) g->most = g->m[top].rank; /* a lead, if small */
    if (by[top] > 0 && by[top] >= 1.5 * med && by[top] >= 0.001) {
      g->waited_for = g->m[top].rank;
      snprintf(g->waited, sizeof g->waited,
               "waited for: rank %d, the others blocked on it %.3f s in sends and receives "
               "(a median of %.3f s on each other rank)",
               g->m[top].rank, by[top], med);
      return;
    }
    if (total > 0.001) {
      snprintf(g->waited, sizeof g->waited,
               "waited for: no rank stands out in sends and receives (at most %.3f s on "
               "rank %d, a median of %.3f s)",
               by[top], g->m[top].rank, med);
      return;
    }
  }
  /* a code without point to point: the time inside MPI on the communicator */
  int low = 0;
  for (int i = 1; i < g->nm; i++)
    if (g->m[i].mpi_s < g->m[low].mpi_s) low = i;
  double others[64];
  int n = 0;
  for (int i = 0; i < g->nm; i++)
    if (i != low) others[n++] = g->m[i].mpi_s;
  if (!n) return;
  double med = gr__median(others, n);
  if (g->m[low].mpi_s * 1.1 <= med) g->most = g->m[low].rank;
  if (med > 0 && g->m[low].mpi_s <= med * 2.0 / 3.0) {
    g->waited_for = g->m[low].rank;
    snprintf(g->waited, sizeof g->waited,
             "waited for: rank %d, inside MPI %.3f s against a median of %.3f s for the "
             "others (they wait for it)",
             g->m[low].rank, g->m[low].mpi_s, med);
  } else
    snprintf(g->waited, sizeof g->waited,
             "waited for: no rank stands out (inside MPI %.3f s at least, a median of %.3f s "
             "for the others)",
             g->m[low].mpi_s, med);
}

/* Joins the members' rings per collective number (the shortest time inside is the last arrival,
 * each lag the longest time minus the member's own) and states both verdicts. */
static void analyse_comm(comm *g) {
  g->waited_for = g->most = -1;
  if (g->nm < 2) return;
  /* Only the numbers every member's ring holds can be joined: their common range, at most a ring
   * long (a file's first may be anything below 1e18; their union could take years to walk). */
  unsigned long long lo = 0, hi = 0;
  int rings = 1; /* every member has one: a member without a ring joins nothing */
  for (int i = 0; i < g->nm && rings; i++) {
    unsigned long long f = g->m[i].first, l = f + (unsigned long long)g->m[i].n - 1;
    rings = g->m[i].n > 0;
    if (i == 0 || f > lo) lo = f;
    if (i == 0 || l < hi) hi = l;
  }
  for (unsigned long long num = lo; rings && lo <= hi && num <= hi; num++) {
    double d[64], dmax = -1, dmin = INFINITY;
    int who = -1, all = 1;
    for (int i = 0; i < g->nm && all; i++) {
      d[i] = dur_of(&g->m[i], num);
      if (isnan(d[i])) all = 0;
      if (d[i] > dmax) dmax = d[i];
      if (d[i] < dmin) dmin = d[i], who = i;
    }
    if (!all || who < 0) continue;
    g->joined++;
    if (dmax > dmin) g->last[who]++; /* all alike: nobody was waited for */
    for (int i = 0; i < g->nm; i++) {
      double lag = dmax - d[i];
      g->lag_sum[i] += lag;
      if (lag > g->lag_max[i]) g->lag_max[i] = lag;
    }
  }
  slowest_by_wait(g);
  if (!g->joined) return;
  /* Named when it arrives last clearly more often than a fair share (1 of the members) */
  int worst = 0;
  for (int i = 0; i < g->nm; i++)
    if (g->last[i] > g->last[worst]) worst = i;
  double share = (double)g->last[worst] / g->joined, fair = 1.0 / g->nm;
  if (g->last[worst] >= 3 && share >= 1.5 * fair)
    snprintf(g->arrival, sizeof g->arrival,
             "last to arrive: rank %d, in %.0f%% of the collectives (a fair share is %.0f%%), "
             "%.3f ms after the first on average",
             g->m[worst].rank, 100.0 * share, 100.0 * fair, 1e3 * g->lag_sum[worst] / g->joined);
  else
    snprintf(g->arrival, sizeof g->arrival,
             "last to arrive: no rank stands out (the most often: rank %d, %.0f%%)",
             g->m[worst].rank, 100.0 * share);
}

static void print_comm(const comm *g, const gr__rpt_job *job, FILE *out) {
  if (g->nm < 2 || (!g->joined && !g->waited[0])) return;
  char id[80], name[80];
  gr__esc_term_str(id, sizeof id, g->id);
  gr__esc_term_str(name, sizeof name, g->name);
  fprintf(out,
          "\nArrivals at the collectives of %s[%s], %d ranks (%d with call statistics%s), %d "
          "blocking collectives joined:\n",
          name, id, g->size, g->nm, g->extra ? ", more not joined" : "", g->joined);
  int nj = g->joined ? g->joined : 1; /* the table's shares and means: 0 without any */
  fprintf(out, "  %5s %7s %6s %12s %12s %10s\n", "RANK", "LAST", "LAST%", "LAG mean ms",
          "LAG max ms", "IN MPI s");
  for (int i = 0; i < g->nm; i++)
    fprintf(out, "  %5d %7d %5.1f%% %12.3f %12.3f %10.3f\n", g->m[i].rank, g->last[i],
            100.0 * g->last[i] / nj, 1e3 * g->lag_sum[i] / nj, 1e3 * g->lag_max[i], g->m[i].mpi_s);
  if (g->waited[0]) fprintf(out, "  %s\n", g->waited);
  if (job && !strcmp(g->id, GR_MPISTATS_WORLD_ID)) gr__rpt_print_why(job, g->waited_for, out);
  if (g->arrival[0]) fprintf(out, "  %s\n", g->arrival);
}

static int by_rank(const void *a, const void *b) {
  int x = ((const member *)a)->rank, y = ((const member *)b)->rank;
  return (x > y) - (x < y);
}

/* Sorts each communicator's members by rank (readdir's order is any) and analyses it. */
static void analyse_all(gr__rpt_arrivals *a) {
  for (int i = 0; i < a->n; i++) {
    qsort(a->c[i].m, (size_t)a->c[i].nm, sizeof a->c[i].m[0], by_rank);
    analyse_comm(&a->c[i]);
  }
}

gr_status gr__rpt_arrivals_load(const char *dir, gr__rpt_arrivals **out) {
  *out = NULL;
  int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirfd < 0) return gr__fail_msg(GR_ERR_NOT_FOUND, "cannot open %s", dir);
  DIR *d = fdopendir(dup(dirfd));
  if (!d) {
    close(dirfd);
    return gr__fail_msg(GR_ERR_SYSTEM, "cannot read %s", dir);
  }
  gr__rpt_arrivals *a = calloc(1, sizeof *a);
  struct dirent *e;
  while (a && (e = readdir(d))) {
    const char *name = e->d_name;
    size_t len = strlen(name), pl = sizeof GR_MPISTATS_PREFIX - 1,
           sl = sizeof GR_MPISTATS_SUFFIX - 1;
    if (len <= pl + sl || strncmp(name, GR_MPISTATS_PREFIX, pl) ||
        strcmp(name + len - sl, GR_MPISTATS_SUFFIX))
      continue;
    load_file(dirfd, name, a->c, &a->n, stderr);
  }
  closedir(d);
  close(dirfd);
  if (!a) return gr__fail_msg(GR_ERR_NOMEM, "arrival statistics: out of memory");
  analyse_all(a);
  *out = a;
  return GR_OK;
}

gr_status gr__rpt_arrivals_parse(const char *const *texts, int n, FILE *warn,
                                 gr__rpt_arrivals **out) {
  *out = NULL;
  gr__rpt_arrivals *a = calloc(1, sizeof *a);
  if (!a) return gr__fail_msg(GR_ERR_NOMEM, "arrival statistics: out of memory");
  for (int i = 0; i < n; i++) {
    char name[32];
    snprintf(name, sizeof name, "text %d", i);
    size_t at = 0;
    gr__rpt_json *doc = strlen(texts[i]) <= MAX_FILE ? gr__rpt_json_parse(texts[i], &at) : NULL;
    if (doc)
      load_doc(doc, name, a->c, &a->n, warn);
    else
      fprintf(warn, "gpurun-report: warning: %s skipped: not valid JSON at byte %zu\n", name, at);
  }
  analyse_all(a);
  *out = a;
  return GR_OK;
}

int gr__rpt_arrivals_world(const gr__rpt_arrivals *a, int *rank, int *most) {
  for (int i = 0; a && i < a->n; i++)
    if (!strcmp(a->c[i].id, GR_MPISTATS_WORLD_ID) && a->c[i].nm >= 2) {
      *rank = a->c[i].waited_for;
      if (most) *most = a->c[i].most;
      return 1;
    }
  return 0;
}

void gr__rpt_arrivals_print(const gr__rpt_arrivals *a, const gr__rpt_job *job, FILE *out) {
  for (int i = 0; a && i < a->n; i++)
    print_comm(&a->c[i], job, out);
}

void gr__rpt_arrivals_free(gr__rpt_arrivals *a) {
  for (int i = 0; a && i < a->n; i++)
    for (int k = 0; k < a->c[i].nm; k++) {
      free(a->c[i].m[k].durs);
      free(a->c[i].m[k].waited_on);
    }
  free(a);
}
