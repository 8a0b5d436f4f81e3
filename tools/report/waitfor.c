/* Reading the collectives' flight-recorder dumps (flight.<rank>.json): for each communicator, the
 * collective some ranks are stuck in and the ranks that never entered it; then the wait-for
 * chains across communicators and point-to-point calls, to the rank at the end of each chain. */
#include "gr_report.h"

#include "gr_json_read.h"

#include "gr_array.h"
#include "gr_error.h"
#include "gr_escape.h"
#include "gr_flight_format.h"
#include "gr_safefile.h"
#include "gr_waitfor.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
  int rank, size;
  const char *node, *reason;
  gr__rpt_json *doc;
} dump;

/* Ranks beyond this (from a hostile dump) are not believed. */
#define MAX_RANK 10000000

static void ranks_str(FILE *s, const int *r, int n) {
  for (int i = 0; i < n;) {
    int j = i;
    while (j + 1 < n && r[j + 1] == r[j] + 1)
      j++;
    fprintf(s, "%s%d", i ? "," : "", r[i]);
    if (j > i) fprintf(s, "%s%d", j == i + 1 ? "," : "-", r[j]);
    i = j + 1;
  }
}

static void ranks_json(FILE *s, const int *r, int n) {
  fputc('[', s);
  for (int i = 0; i < n; i++)
    fprintf(s, "%s%d", i ? ", " : "", r[i]);
  fputc(']', s);
}

static const char *str_or(const gr__rpt_json *v, const char *key, const char *dflt) {
  const char *s = gr__rpt_json_str(v, key);
  return s ? s : dflt;
}

static const gr__rpt_json *comm_of(const dump *d, const char *id) {
  const gr__rpt_json *comms = gr__rpt_json_get(d->doc, GR_FL_COMMS);
  if (!comms || comms->type != GR__RPT_JSON_ARR) return NULL;
  for (const gr__rpt_json *c = comms->child; c; c = c->next) {
    const char *cid = gr__rpt_json_str(c, GR_FL_COMM_ID);
    if (cid && !strcmp(cid, id)) return c;
  }
  return NULL;
}

/* A communicator's human name from any dump that lists it ("name"), else NULL (dumps from before
 * names existed: the id was the name). */
static const char *name_of(const dump *d, int nd, const char *id) {
  for (int i = 0; i < nd; i++) {
    const gr__rpt_json *c = comm_of(&d[i], id);
    const char *n = c ? gr__rpt_json_str(c, GR_FL_COMM_NAME) : NULL;
    if (n) return n;
  }
  return NULL;
}

/* "NAME[ID]", or the id alone where no dump names it, for the terminal. */
static void put_comm(FILE *out, const dump *d, int nd, const char *id) {
  const char *name = name_of(d, nd, id);
  if (name && strcmp(name, id)) {
    gr__esc_term(out, name);
    fputc('[', out);
    gr__esc_term(out, id);
    fputc(']', out);
  } else
    gr__esc_term(out, id);
}

static int is_p2p(const gr__rpt_json *call) {
  const char *op = gr__rpt_json_str(call, GR_FL_OP);
  return op && (!strcmp(op, GR_FL_OP_SEND) || !strcmp(op, GR_FL_OP_RECV));
}

/* A collective's position on its communicator, the same on every member: cseq; dumps from before
 * cseq existed only have seq (right when the communicator carries no send/recv). -1 for p2p. */
static double coll_key(const gr__rpt_json *call) {
  if (is_p2p(call)) return -1;
  const gr__rpt_json *k = gr__rpt_json_get(call, GR_FL_CSEQ);
  if (k && k->type == GR__RPT_JSON_NUM) return k->num;
  return gr__rpt_json_num(call, GR_FL_SEQ, -1);
}

static int in_call(const gr__rpt_json *call) {
  const char *st = gr__rpt_json_str(call, GR_FL_STATE);
  /* "timeout": the recorder marks the call it gave up on before dumping; it is still the call
   * this rank waited in. */
  return st && (!strcmp(st, GR_FL_STATE_RUNNING) || !strcmp(st, GR_FL_STATE_TIMEOUT));
}

/* Highest collective key of any call, and of one in progress; the call in progress itself. */
static void scan(const gr__rpt_json *comm, double *max_any, double *max_running,
                 const gr__rpt_json **running) {
  *max_any = -1;
  *max_running = -1;
  *running = NULL;
  const gr__rpt_json *calls = gr__rpt_json_get(comm, GR_FL_COMM_CALLS);
  if (!calls || calls->type != GR__RPT_JSON_ARR) return;
  for (const gr__rpt_json *c = calls->child; c; c = c->next) {
    double key = coll_key(c);
    if (key < 0) continue;
    if (key > *max_any) *max_any = key;
    if (in_call(c) && key > *max_running) {
      *max_running = key;
      *running = c;
    }
  }
}

static const gr__rpt_json *call_with_key(const gr__rpt_json *comm, double key) {
  const gr__rpt_json *calls = gr__rpt_json_get(comm, GR_FL_COMM_CALLS);
  for (const gr__rpt_json *c = calls && calls->type == GR__RPT_JSON_ARR ? calls->child : NULL; c;
       c = c->next)
    if (coll_key(c) == key) return c;
  return NULL;
}

static int cmp_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}
static int cmp_dump(const void *a, const void *b) {
  return cmp_int(&((const dump *)a)->rank, &((const dump *)b)->rank);
}

static int dump_of_rank(const dump *d, int nd, int rank) {
  int lo = 0, hi = nd - 1;
  while (lo <= hi) {
    int mid = (lo + hi) / 2;
    if (d[mid].rank == rank) return mid;
    if (d[mid].rank < rank)
      lo = mid + 1;
    else
      hi = mid - 1;
  }
  return -1;
}

/* ---- per communicator: the collective some members wait in, and who never entered it ---- */

static int per_comm(dump *d, int nd, FILE *out, FILE *js) {
  gr_array id_list = GR_ARRAY_INIT(const char *);
  int findings = 0;
  for (int i = 0; i < nd; i++) {
    const gr__rpt_json *comms = gr__rpt_json_get(d[i].doc, GR_FL_COMMS);
    for (const gr__rpt_json *c = comms && comms->type == GR__RPT_JSON_ARR ? comms->child : NULL; c;
         c = c->next) {
      const char *id = gr__rpt_json_str(c, GR_FL_COMM_ID);
      int seen = 0;
      for (size_t k = 0; id && k < id_list.count && !seen; k++)
        seen = !strcmp(GR_ARRAY_AT(&id_list, const char *, k), id);
      if (!id || seen || id_list.count >= 4096) continue;
      if (gr__array_push(&id_list, &id) != GR_OK) break;
    }
  }
  const char **ids = id_list.data;
  int nids = (int)id_list.count;
  int *waiting = malloc((size_t)nd * sizeof *waiting),
      *missing = malloc((size_t)nd * sizeof *missing);
  gr_array nodump_list = GR_ARRAY_INIT(int); /* emptied for each communicator */
  for (int k = 0; k < nids && waiting && missing; k++) {
    const char *id = ids[k];
    double stuck = -1;
    const gr__rpt_json *stuck_call = NULL;
    int comm_size = 0, members = 0;
    const char *backend = "?";
    for (int i = 0; i < nd; i++) {
      const gr__rpt_json *c = comm_of(&d[i], id);
      if (!c) continue;
      members++;
      double sz = gr__rpt_json_num(c, GR_FL_COMM_SIZE, comm_size);
      if (sz >= 0 && sz <= MAX_RANK) comm_size = (int)sz;
      backend = str_or(c, GR_FL_COMM_BACKEND, backend);
      double any, run;
      const gr__rpt_json *rcall;
      scan(c, &any, &run, &rcall);
      if (run > stuck) {
        stuck = run;
        stuck_call = rcall;
      }
    }
    fputs("  comm ", out);
    put_comm(out, d, nd, id);
    fputs(" (", out);
    gr__esc_term(out, backend);
    fputs("): ", out);
    if (stuck < 0) {
      fputs("no collective in progress\n", out);
      continue;
    }
    int nw = 0, nm = 0;
    for (int i = 0; i < nd; i++) {
      const gr__rpt_json *c = comm_of(&d[i], id);
      if (!c) continue;
      double any, run;
      const gr__rpt_json *rcall;
      scan(c, &any, &run, &rcall);
      if (any < stuck)
        missing[nm++] = d[i].rank;
      else
        waiting[nw++] = d[i].rank;
    }
    qsort(waiting, (size_t)nw, sizeof *waiting, cmp_int);
    qsort(missing, (size_t)nm, sizeof *missing, cmp_int);
    /* World members that left no dump: died, or were never asked to dump. */
    nodump_list.count = 0;
    const char *cname = name_of(d, nd, id);
    int world = !strcmp(cname ? cname : id, GR_FL_WORLD); /* every rank of the job is a member */
    if (world && comm_size > 0) {
      for (int r = 0; r < comm_size; r++) {
        if (dump_of_rank(d, nd, r) >= 0) continue;
        if (gr__array_push(&nodump_list, &r) != GR_OK) break;
      }
    }
    const int *nodump = nodump_list.data;
    int nn = (int)nodump_list.count;
    const char *op = str_or(stuck_call, GR_FL_OP, "?");
    const char *dtype = str_or(stuck_call, GR_FL_DTYPE, "?");
    double count = gr__rpt_json_num(stuck_call, GR_FL_COUNT, -1);
    fputs("rank(s) ", out);
    ranks_str(out, waiting, nw);
    fputs(" wait in ", out);
    gr__esc_term(out, op);
    fprintf(out, " #%.0f (count %.0f ", stuck, count);
    gr__esc_term(out, dtype);
    fputc(')', out);
    if (nm) {
      fputs("; NEVER ENTERED by rank(s) ", out);
      ranks_str(out, missing, nm);
      /* What the first laggard last did, to say where it is. */
      int i = dump_of_rank(d, nd, missing[0]);
      const gr__rpt_json *c = i >= 0 ? comm_of(&d[i], id) : NULL;
      double any = -1, run;
      const gr__rpt_json *rcall;
      if (c) scan(c, &any, &run, &rcall);
      const gr__rpt_json *last = c ? call_with_key(c, any) : NULL;
      if (last) {
        fprintf(out, " (rank %d's last collective: ", missing[0]);
        gr__esc_term(out, str_or(last, GR_FL_OP, "?"));
        fprintf(out, " #%.0f, ", any);
        gr__esc_term(out, str_or(last, GR_FL_STATE, "?"));
        fputc(')', out);
      } else {
        fprintf(out, " (rank %d made no collective call on it)", missing[0]);
      }
    }
    if (nn) {
      fputs("; no dump from rank(s) ", out);
      ranks_str(out, nodump, nn);
      fputs(" (dead, or never reached the dump)", out);
    } else if (!world && comm_size > members) {
      fprintf(out, "; %d of its %d member(s) left no dump", comm_size - members, comm_size);
    }
    fputc('\n', out);

    fprintf(js, "%s{\"comm\": ", findings ? ", " : "");
    gr__esc_json(js, id);
    const char *name = name_of(d, nd, id);
    fputs(", \"name\": ", js);
    gr__esc_json(js, name ? name : id);
    fputs(", \"backend\": ", js);
    gr__esc_json(js, backend);
    fprintf(js, ", \"seq\": %.0f, \"op\": ", stuck);
    gr__esc_json(js, op);
    fputs(", \"waiting\": ", js);
    ranks_json(js, waiting, nw);
    fputs(", \"never_entered\": ", js);
    ranks_json(js, missing, nm);
    fputs(", \"no_dump\": ", js);
    ranks_json(js, nodump, nn);
    fputs("}", js);
    findings++;
  }
  gr__array_free(&nodump_list);
  free(waiting);
  free(missing);
  gr__array_free(&id_list);
  return findings;
}

/* ---- wait-for chains (the analysis: tools/waitfor, gr_waitfor.h) ---- */

static const char *const end_words[] = {
    [GR__WF_END_NO_DATA] = "left no dump (dead, stopped, or never reached the dump)",
    [GR__WF_END_NOT_WAITING] =
        "is in no collective call (computing, or stopped outside gpurun's calls)",
    [GR__WF_END_UNNAMED] = "waits for a member that left no dump and cannot be named",
    [GR__WF_END_ALL_IN] = "waits in a collective every member with a dump has entered",
    [GR__WF_END_CYCLE] = "is in a wait-for cycle (deadlock)"};
static const char *const end_kinds[] = {[GR__WF_END_NO_DATA] = "no_dump",
                                        [GR__WF_END_NOT_WAITING] = "not_waiting",
                                        [GR__WF_END_UNNAMED] = "unnamed_member",
                                        [GR__WF_END_ALL_IN] = "all_entered",
                                        [GR__WF_END_CYCLE] = "cycle"};

/* One communicator line of one dump, for the table of communicators. */
typedef struct {
  const char *id;
  const gr__rpt_json *comm;
  int dump, pos; /* the dump, and the line's place among that dump's lines with an id */
} cline;

static int cmp_cline(const void *a, const void *b) {
  const cline *x = a, *y = b;
  int c = strcmp(x->id, y->id);
  if (c) return c;
  if (x->dump != y->dump) return (x->dump > y->dump) - (x->dump < y->dump);
  return (x->pos > y->pos) - (x->pos < y->pos);
}

/* The dumps in the analysis' terms: every dump a rank with data; the communicators by id (the
 * size the last dump in rank order gives; over the world when a dump names it so, or its id is
 * the world's); each line a member with the highest collective it entered there; each rank's
 * latest call in progress (a "timeout" call too: the recorder marks the call it gave up on), a
 * send's or receive's peer as a world rank. */
typedef struct {
  gr__wf_rank *ranks;
  gr__wf_comm *comms;
  gr__wf_member *members;
  cline *lines;
  int *first;     /* per communicator: its first line in lines; [ncomms] = nlines */
  int *line_comm; /* per dump and line with an id (at dump_line[dump] + pos): the communicator */
  int *dump_line; /* per dump: where its lines start in line_comm */
  int *peer;      /* per dump: the world rank of its send's or receive's peer */
  const gr__rpt_json **call; /* per dump: the call it waits in, NULL none */
  const char **comm_id;      /* per dump: that call's communicator id */
  int ncomms, nlines;
} wdesc;

static void wdesc_free(wdesc *x) {
  free(x->ranks);
  free(x->comms);
  free(x->members);
  free(x->lines);
  free(x->first);
  free(x->line_comm);
  free(x->dump_line);
  free(x->peer);
  free(x->call);
  free(x->comm_id);
}

static int describe(const dump *d, int nd, wdesc *x) {
  memset(x, 0, sizeof *x);
  gr_array lines = GR_ARRAY_INIT(cline);
  size_t n = (size_t)nd + 1;
  x->dump_line = malloc(n * sizeof *x->dump_line);
  x->ranks = calloc(n, sizeof *x->ranks);
  x->peer = malloc(n * sizeof *x->peer);
  x->call = calloc(n, sizeof *x->call);
  x->comm_id = calloc(n, sizeof *x->comm_id);
  if (!x->dump_line || !x->ranks || !x->peer || !x->call || !x->comm_id) return -1;
  for (int i = 0; i < nd; i++) {
    x->dump_line[i] = (int)lines.count;
    const gr__rpt_json *comms = gr__rpt_json_get(d[i].doc, GR_FL_COMMS);
    int pos = 0;
    for (const gr__rpt_json *c = comms && comms->type == GR__RPT_JSON_ARR ? comms->child : NULL; c;
         c = c->next) {
      const char *id = gr__rpt_json_str(c, GR_FL_COMM_ID);
      if (!id) continue;
      cline l = {id, c, i, pos++};
      if (lines.count >= INT_MAX / 2 || gr__array_push(&lines, &l) != GR_OK) {
        gr__array_free(&lines);
        return -1;
      }
    }
  }
  x->lines = lines.data;
  x->nlines = (int)lines.count;
  if (x->nlines > 1) qsort(x->lines, (size_t)x->nlines, sizeof *x->lines, cmp_cline);
  size_t nl = (size_t)x->nlines + 1;
  x->first = malloc(nl * sizeof *x->first);
  x->line_comm = malloc(nl * sizeof *x->line_comm);
  x->comms = calloc(nl, sizeof *x->comms);
  x->members = calloc(nl, sizeof *x->members);
  if (!x->first || !x->line_comm || !x->comms || !x->members) return -1;
  for (int k = 0; k < x->nlines; k++) {
    const cline *l = &x->lines[k];
    if (!k || strcmp(l->id, x->lines[k - 1].id)) {
      x->first[x->ncomms] = k;
      const char *name = NULL; /* a dump's name for it, else the id */
      for (int j = k; j < x->nlines && !strcmp(x->lines[j].id, l->id) && !name; j++)
        name = gr__rpt_json_str(x->lines[j].comm, GR_FL_COMM_NAME);
      x->comms[x->ncomms++].world = !strcmp(name ? name : l->id, GR_FL_WORLD);
    }
    int c = x->ncomms - 1;
    double sz = gr__rpt_json_num(l->comm, GR_FL_COMM_SIZE, 0);
    if (sz >= 0 && sz <= MAX_RANK) x->comms[c].size = (int)sz;
    double any, run;
    const gr__rpt_json *rcall;
    scan(l->comm, &any, &run, &rcall);
    x->members[k] = (gr__wf_member){l->dump, c, any};
    x->line_comm[x->dump_line[l->dump] + l->pos] = c;
  }
  x->first[x->ncomms] = x->nlines;
  for (int i = 0; i < nd; i++) {
    gr__wf_rank *r = &x->ranks[i];
    r->rank = d[i].rank;
    r->have = 1;
    r->comm = -1;
    /* its latest call in progress on any communicator with an id */
    const gr__rpt_json *comms = gr__rpt_json_get(d[i].doc, GR_FL_COMMS);
    double best = -1;
    int pos = 0;
    for (const gr__rpt_json *c = comms && comms->type == GR__RPT_JSON_ARR ? comms->child : NULL; c;
         c = c->next) {
      const char *id = gr__rpt_json_str(c, GR_FL_COMM_ID);
      if (!id) continue;
      const gr__rpt_json *calls = gr__rpt_json_get(c, GR_FL_COMM_CALLS);
      for (const gr__rpt_json *k = calls && calls->type == GR__RPT_JSON_ARR ? calls->child : NULL;
           k; k = k->next) {
        double start = gr__rpt_json_num(k, GR_FL_START, 0);
        if (in_call(k) && start >= best) {
          best = start;
          x->call[i] = k;
          x->comm_id[i] = id;
          r->comm = x->line_comm[x->dump_line[i] + pos];
        }
      }
      pos++;
    }
    if (!x->call[i]) continue;
    r->p2p = is_p2p(x->call[i]);
    r->pos = coll_key(x->call[i]);
    if (!r->p2p) continue;
    /* the peer's world rank: itself on the world, else the dump whose line has that rank */
    double peer = gr__rpt_json_num(x->call[i], GR_FL_PEER, -1);
    x->peer[i] = -1;
    if (peer >= 0 && peer <= MAX_RANK && x->comms[r->comm].world)
      x->peer[i] = (int)peer;
    else if (peer >= 0 && peer <= MAX_RANK)
      for (int k = x->first[r->comm]; k < x->first[r->comm + 1] && x->peer[i] < 0; k++)
        if (gr__rpt_json_num(x->lines[k].comm, GR_FL_COMM_RANK, -1) == peer)
          x->peer[i] = d[x->lines[k].dump].rank;
    r->peers = &x->peer[i];
    r->npeers = 1;
  }
  return 0;
}

static int wait_for(dump *d, int nd, FILE *out, FILE *js) {
  wdesc x = {0};
  gr__wf *w = NULL;
  unsigned char *waited = calloc((size_t)nd + 1, 1);
  int nends = 0, waiters = 0;
  if (!waited || describe(d, nd, &x) != 0) {
    fprintf(stderr, "gpurun-report: out of memory for the wait-for analysis\n");
    goto out;
  }
  gr__wf_input in = {x.ranks, nd, x.comms, x.ncomms, x.members, x.nlines};
  if (gr__wf_analyse(&in, &w) != GR_OK) {
    fprintf(stderr, "gpurun-report: %s\n", gr_last_error());
    goto out;
  }
  const gr__wf_end *ends = gr__wf_ends(w, &nends);
  for (int i = 0; i < nd; i++)
    waiters += gr__wf_waiting(w, i);
  if (!waiters) goto out;
  fputs("  wait-for:\n", out);
  for (int i = 0; i < nd; i++) {
    if (!gr__wf_waiting(w, i)) continue;
    int nt;
    const int *t = gr__wf_targets(w, i, &nt);
    fprintf(out, "    rank %d waits in ", d[i].rank);
    gr__esc_term(out, str_or(x.call[i], GR_FL_OP, "?"));
    fputs(" on ", out);
    put_comm(out, d, nd, x.comm_id[i]);
    fprintf(out, " (seq %.0f) for ", gr__rpt_json_num(x.call[i], GR_FL_SEQ, -1));
    if (!nt) fputs("no one it can name", out);
    for (int k = 0; k < nt; k++) {
      if (t[k] >= 0)
        fprintf(out, "%srank %d", k ? ", " : "", t[k]);
      else
        fprintf(out, "%san unnamed member", k ? ", " : "");
    }
    fputc('\n', out);
    /* waited for: the first rank another waiting rank waits for */
    int next = nt && t[0] >= 0 ? gr__wf_row_of(w, t[0]) : -1;
    if (next >= 0 && next != i) waited[next] = 1;
  }
  /* The chains as an operator reads them: from each waiting rank that no other rank waits for
   * (every rank when all of them are waited for: a cycle), along the first target at each step. */
  int heads = 0;
  for (int pass = 0; pass < 2 && !heads; pass++)
    for (int i = 0; i < nd; i++) {
      if (!gr__wf_waiting(w, i) || (pass == 0 && waited[i])) continue;
      heads++;
      const gr__wf_end *e = &ends[gr__wf_end_of(w, i)];
      fprintf(out, "    chain: %d", d[i].rank);
      int cur = i;
      for (int steps = 0; steps < nd; steps++) {
        int nt;
        const int *t = gr__wf_targets(w, cur, &nt);
        int r = gr__wf_waiting(w, cur) && nt ? t[0] : -1;
        int next = r >= 0 ? gr__wf_row_of(w, r) : -1;
        if (r >= 0) fprintf(out, " -> %d", r); /* a cycle is printed back to where it started */
        if (next < 0 || next == i || e->rank == r) break;
        cur = next;
      }
      fprintf(out, ": rank %d %s\n", e->rank, end_words[e->kind]);
      if (pass == 1) break; /* one line for a cycle */
    }
  fputs("  at the end of the wait-for chain(s): ", out);
  for (int k = 0; k < nends; k++)
    fprintf(out, "%srank %d, which %s", k ? "; " : "", ends[k].rank, end_words[ends[k].kind]);
  fputc('\n', out);

  fputs("{\"edges\": [", js);
  int first = 1;
  for (int i = 0; i < nd; i++) {
    if (!gr__wf_waiting(w, i)) continue;
    int nt;
    const int *t = gr__wf_targets(w, i, &nt);
    fprintf(js, "%s{\"rank\": %d, \"op\": ", first ? "" : ", ", d[i].rank);
    gr__esc_json(js, str_or(x.call[i], GR_FL_OP, "?"));
    fputs(", \"comm\": ", js);
    gr__esc_json(js, x.comm_id[i]);
    fprintf(js, ", \"seq\": %.0f, \"waits_for\": ", gr__rpt_json_num(x.call[i], GR_FL_SEQ, -1));
    ranks_json(js, t, nt);
    fputc('}', js);
    first = 0;
  }
  fputs("], \"ends\": [", js);
  for (int k = 0; k < nends; k++)
    fprintf(js, "%s{\"rank\": %d, \"why\": \"%s\", \"dump\": %s}", k ? ", " : "", ends[k].rank,
            end_kinds[ends[k].kind], ends[k].kind == GR__WF_END_NO_DATA ? "false" : "true");
  fputs("]}", js);
out:
  if (!waiters) nends = 0; /* no rank waits: "null" */
  gr__wf_free(w);
  wdesc_free(&x);
  free(waited);
  return nends;
}

/* ---- loading ---- */

gr_status gr__rpt_flight(const char *dir, FILE *out, char **json, char **wait_json, int *ndumps) {
  *json = NULL;
  if (wait_json) *wait_json = NULL;
  *ndumps = 0;
  struct dirent **ents;
  int n = scandir(dir, &ents, NULL, alphasort);
  if (n < 0) return GR_OK; /* gr__rpt_load said why already */
  int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  gr_array dumps = GR_ARRAY_INIT(dump);
  char esc_dir[512], esc_name[512], esc_why[512];
  gr_status rc = GR_OK;
  if (dirfd < 0)
    rc = gr__fail_msg(GR_ERR_SYSTEM, "cannot open directory %s",
                      gr__esc_term_str(esc_dir, sizeof esc_dir, dir));
  for (int i = 0; i < n; i++) {
    const char *name = ents[i]->d_name;
    size_t len = strlen(name);
    if (rc == GR_OK && !strncmp(name, GR_FLIGHT_PREFIX, sizeof GR_FLIGHT_PREFIX - 1) && len > 12 &&
        !strcmp(name + len - (sizeof GR_FLIGHT_SUFFIX - 1), GR_FLIGHT_SUFFIX)) {
      size_t at = 0;
      gr__rpt_json *doc = NULL;
      gr__rpt_json_parse_file_at(dirfd, name, GR__RPT_MAX_FLIGHT_FILE, &at, &doc);
      double rank = doc ? gr__rpt_json_num(doc, GR_FL_RANK, -1) : -1;
      if (!doc || !(rank >= 0 && rank <= MAX_RANK)) {
        rc = gr__fail_msg(
            GR_ERR_INVALID, "%s/%s: %s", gr__esc_term_str(esc_dir, sizeof esc_dir, dir),
            gr__esc_term_str(esc_name, sizeof esc_name, name),
            gr__esc_term_str(esc_why, sizeof esc_why, doc ? "no valid \"rank\"" : gr_last_error()));
        gr__rpt_json_free(doc);
      } else {
        if (gr__array_push(&dumps, NULL) != GR_OK) {
          gr__rpt_json_free(doc);
          rc = gr__fail_msg(GR_ERR_NOMEM, "out of memory reading the flight dumps");
        } else {
          dump *x = &GR_ARRAY_AT(&dumps, dump, dumps.count - 1);
          x->doc = doc;
          x->rank = (int)rank;
          double sz = gr__rpt_json_num(doc, GR_FL_SIZE, 0);
          x->size = sz >= 0 && sz <= MAX_RANK ? (int)sz : 0;
          x->node = str_or(doc, GR_FL_NODE, "?");
          x->reason = str_or(doc, GR_FL_REASON, "?");
        }
      }
    }
    free(ents[i]);
  }
  free(ents);
  if (dirfd >= 0) close(dirfd);
  dump *d = dumps.data; /* owned by dumps: freed with gr__array_free */
  int nd = (int)dumps.count;
  if (rc != GR_OK || nd == 0) {
    for (int i = 0; i < nd; i++)
      gr__rpt_json_free(d[i].doc);
    gr__array_free(&dumps);
    return rc;
  }
  qsort(d, (size_t)nd, sizeof *d, cmp_dump);
  /* Two dumps claiming one rank: keep the first, say so. */
  int kept = 0;
  for (int i = 0; i < nd; i++) {
    if (kept && d[kept - 1].rank == d[i].rank) {
      fprintf(stderr, "gpurun-report: two flight dumps say rank %d; using one\n", d[i].rank);
      gr__rpt_json_free(d[i].doc);
      continue;
    }
    d[kept++] = d[i];
  }
  nd = kept;

  fprintf(out, "\nflight recorder: %d dump(s)", nd);
  for (int i = 0; i < nd; i++) {
    fprintf(out, "%s rank %d (", i ? "," : ":", d[i].rank);
    gr__esc_term(out, d[i].reason);
    fputc(')', out);
  }
  fputc('\n', out);

  size_t jl = 0;
  FILE *js = open_memstream(json, &jl);
  if (js) {
    fputc('[', js);
    per_comm(d, nd, out, js);
    fputc(']', js);
    fclose(js);
  }
  char *wj = NULL;
  size_t wl = 0;
  FILE *ws = open_memstream(&wj, &wl);
  if (ws) {
    if (wait_for(d, nd, out, ws) == 0) fputs("null", ws);
    fclose(ws);
  }
  if (wait_json)
    *wait_json = wj;
  else
    free(wj);
  for (int i = 0; i < nd; i++)
    gr__rpt_json_free(d[i].doc);
  gr__array_free(&dumps);
  *ndumps = nd;
  return GR_OK;
}
