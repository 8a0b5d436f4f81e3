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

#include <dirent.h>
#include <fcntl.h>
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

/* ---- wait-for chains ---- */

typedef struct {
  const gr__rpt_json *call; /* the call this rank waits in, NULL when in none */
  const char *comm;
  gr_array targets; /* int: world ranks it waits for; -1: a member of comm that cannot be named */
  int end;          /* memo: index into ends, -1 not yet known */
} wnode;

enum { END_NO_DUMP, END_NOT_WAITING, END_UNNAMED, END_ALL_IN, END_CYCLE };
static const char *const end_words[] = {
    "left no dump (dead, stopped, or never reached the dump)",
    "is in no collective call (computing, or stopped outside gpurun's calls)",
    "waits for a member that left no dump and cannot be named",
    "waits in a collective every member with a dump has entered",
    "is in a wait-for cycle (deadlock)"};

typedef struct {
  int rank, kind;
} wend;

/* The world rank of rank peer of communicator id, -1 when no dump says. */
static int world_rank_of(const dump *d, int nd, const char *id, double peer) {
  if (!(peer >= 0 && peer <= MAX_RANK)) return -1;
  const char *name = name_of(d, nd, id);
  if (!strcmp(name ? name : id, GR_FL_WORLD)) return (int)peer;
  for (int i = 0; i < nd; i++) {
    const gr__rpt_json *c = comm_of(&d[i], id);
    if (c && gr__rpt_json_num(c, GR_FL_COMM_RANK, -1) == peer) return d[i].rank;
  }
  return -1;
}

static void add_target(wnode *w, int r) {
  (void)gr__array_push(&w->targets, &r); /* a target lost for want of memory: not named */
}

/* What dump i waits for: its latest call in progress on any communicator. */
static void wait_of(const dump *d, int nd, int i, wnode *w) {
  memset(w, 0, sizeof *w);
  gr__array_init(&w->targets, sizeof(int));
  w->end = -1;
  const gr__rpt_json *comms = gr__rpt_json_get(d[i].doc, GR_FL_COMMS);
  double best = -1;
  for (const gr__rpt_json *c = comms && comms->type == GR__RPT_JSON_ARR ? comms->child : NULL; c;
       c = c->next) {
    const gr__rpt_json *calls = gr__rpt_json_get(c, GR_FL_COMM_CALLS);
    for (const gr__rpt_json *k = calls && calls->type == GR__RPT_JSON_ARR ? calls->child : NULL; k;
         k = k->next) {
      double start = gr__rpt_json_num(k, GR_FL_START, 0);
      if (in_call(k) && gr__rpt_json_str(c, GR_FL_COMM_ID) && start >= best) {
        best = start;
        w->call = k;
        w->comm = gr__rpt_json_str(c, GR_FL_COMM_ID);
      }
    }
  }
  if (!w->call) return;
  if (is_p2p(w->call)) {
    add_target(w, world_rank_of(d, nd, w->comm, gr__rpt_json_num(w->call, GR_FL_PEER, -1)));
    return;
  }
  double key = coll_key(w->call);
  int members = 0, size = 0;
  for (int j = 0; j < nd; j++) {
    const gr__rpt_json *c = comm_of(&d[j], w->comm);
    if (!c) continue;
    members++;
    double sz = gr__rpt_json_num(c, GR_FL_COMM_SIZE, 0);
    if (sz >= 0 && sz <= MAX_RANK) size = (int)sz;
    double any, run;
    const gr__rpt_json *rc;
    scan(c, &any, &run, &rc);
    if (any < key) add_target(w, d[j].rank);
  }
  if (w->targets.count) return;
  const char *name = name_of(d, nd, w->comm);
  if (!strcmp(name ? name : w->comm, GR_FL_WORLD)) { /* every rank of the job is a member */
    for (int r = 0; r < size; r++)
      if (dump_of_rank(d, nd, r) < 0) add_target(w, r);
  } else if (size > members) {
    add_target(w, -1);
  }
}

static int wait_for(dump *d, int nd, FILE *out, FILE *js) {
  wnode *w = calloc((size_t)nd, sizeof *w);
  wend *ends = calloc((size_t)nd + 1, sizeof *ends);
  int *path = malloc(((size_t)nd + 1) * sizeof *path);
  int *onpath = calloc((size_t)nd, sizeof *onpath);
  int nends = 0, waiters = 0;
  if (!w || !ends || !path || !onpath) goto out;
  for (int i = 0; i < nd; i++) {
    wait_of(d, nd, i, &w[i]);
    waiters += w[i].call != NULL;
  }
  if (!waiters) goto out;
  fputs("  wait-for:\n", out);
  for (int i = 0; i < nd; i++) {
    if (!w[i].call) continue;
    fprintf(out, "    rank %d waits in ", d[i].rank);
    gr__esc_term(out, str_or(w[i].call, GR_FL_OP, "?"));
    fputs(" on ", out);
    put_comm(out, d, nd, w[i].comm);
    fprintf(out, " (seq %.0f) for ", gr__rpt_json_num(w[i].call, GR_FL_SEQ, -1));
    if (!w[i].targets.count) fputs("no one it can name", out);
    for (size_t t = 0; t < w[i].targets.count; t++) {
      if (GR_ARRAY_AT(&w[i].targets, int, t) >= 0)
        fprintf(out, "%srank %d", t ? ", " : "", GR_ARRAY_AT(&w[i].targets, int, t));
      else
        fprintf(out, "%san unnamed member", t ? ", " : "");
    }
    fputc('\n', out);
  }
  /* Follow each chain (first target at each step) to its end; ends are memoised per dump, so the
   * whole walk is linear in the number of dumps. */
  for (int i = 0; i < nd; i++) {
    if (!w[i].call || w[i].end >= 0) continue;
    int np = 0, cur = i, end = -1;
    wend e = {-1, 0};
    for (;;) {
      if (onpath[cur]) {
        e = (wend){d[cur].rank, END_CYCLE};
        break;
      }
      if (w[cur].end >= 0) {
        end = w[cur].end;
        break;
      }
      onpath[cur] = 1;
      path[np++] = cur;
      if (!w[cur].call) {
        e = (wend){d[cur].rank, END_NOT_WAITING};
        break;
      }
      if (!w[cur].targets.count) {
        e = (wend){d[cur].rank, END_ALL_IN};
        break;
      }
      int t = GR_ARRAY_AT(&w[cur].targets, int, 0);
      if (t < 0) {
        e = (wend){d[cur].rank, END_UNNAMED};
        break;
      }
      int next = dump_of_rank(d, nd, t);
      if (next < 0) {
        e = (wend){t, END_NO_DUMP};
        break;
      }
      cur = next;
    }
    if (end < 0) {
      for (end = 0; end < nends; end++)
        if (ends[end].rank == e.rank && ends[end].kind == e.kind) break;
      if (end == nends) ends[nends++] = e;
    }
    for (int k = 0; k < np; k++) {
      w[path[k]].end = end;
      onpath[path[k]] = 0;
    }
  }
  /* The chains as an operator reads them: from each waiting rank that no other rank waits for
   * (every rank when all of them are waited for: a cycle), along the first target at each step. */
  int heads = 0;
  for (int pass = 0; pass < 2 && !heads; pass++)
    for (int i = 0; i < nd; i++) {
      if (!w[i].call) continue;
      int waited = 0;
      for (int j = 0; j < nd && !waited && pass == 0; j++)
        waited = j != i && w[j].call && w[j].targets.count &&
                 GR_ARRAY_AT(&w[j].targets, int, 0) == d[i].rank;
      if (waited) continue;
      heads++;
      fprintf(out, "    chain: %d", d[i].rank);
      int cur = i;
      for (int steps = 0; steps < nd; steps++) {
        int t = w[cur].call && w[cur].targets.count ? GR_ARRAY_AT(&w[cur].targets, int, 0) : -1;
        int next = t >= 0 ? dump_of_rank(d, nd, t) : -1;
        if (t >= 0) fprintf(out, " -> %d", t); /* a cycle is printed back to where it started */
        if (next < 0 || next == i || ends[w[i].end].rank == t) break;
        cur = next;
      }
      fprintf(out, ": rank %d %s\n", ends[w[i].end].rank, end_words[ends[w[i].end].kind]);
      if (pass == 1) break; /* one line for a cycle */
    }
  fputs("  at the end of the wait-for chain(s): ", out);
  for (int k = 0; k < nends; k++)
    fprintf(out, "%srank %d, which %s", k ? "; " : "", ends[k].rank, end_words[ends[k].kind]);
  fputc('\n', out);

  fputs("{\"edges\": [", js);
  int first = 1;
  for (int i = 0; i < nd; i++) {
    if (!w[i].call) continue;
    fprintf(js, "%s{\"rank\": %d, \"op\": ", first ? "" : ", ", d[i].rank);
    gr__esc_json(js, str_or(w[i].call, GR_FL_OP, "?"));
    fputs(", \"comm\": ", js);
    gr__esc_json(js, w[i].comm);
    fprintf(js, ", \"seq\": %.0f, \"waits_for\": ", gr__rpt_json_num(w[i].call, GR_FL_SEQ, -1));
    ranks_json(js, w[i].targets.data, (int)w[i].targets.count);
    fputc('}', js);
    first = 0;
  }
  fputs("], \"ends\": [", js);
  static const char *const kinds[] = {"no_dump", "not_waiting", "unnamed_member", "all_entered",
                                      "cycle"};
  for (int k = 0; k < nends; k++)
    fprintf(js, "%s{\"rank\": %d, \"why\": \"%s\", \"dump\": %s}", k ? ", " : "", ends[k].rank,
            kinds[ends[k].kind], ends[k].kind == END_NO_DUMP ? "false" : "true");
  fputs("]}", js);
out:
  if (w)
    for (int i = 0; i < nd; i++)
      gr__array_free(&w[i].targets);
  free(w);
  free(ends);
  free(path);
  free(onpath);
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
