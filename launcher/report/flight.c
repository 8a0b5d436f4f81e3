/* Reading the collectives' flight-recorder dumps (flight.<rank>.json): for each communicator, the
 * call some ranks are stuck in, and the ranks that never entered it. */
#include "report.h"

#include "json.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  int rank, size;
  char node[128], reason[32];
  grj *doc;
} dump;

/* Appends s to a growing string. */
typedef struct {
  char *p;
  size_t len, cap;
} str;

static void sput(str *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#include <stdarg.h>
static void sput(str *s, const char *fmt, ...) {
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(s->p ? s->p + s->len : NULL, s->p ? s->cap - s->len : 0, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if (s->p && (size_t)n < s->cap - s->len) {
      s->len += (size_t)n;
      return;
    }
    size_t cap = (s->cap ? s->cap * 2 : 256) + (size_t)n;
    char *np = realloc(s->p, cap);
    if (!np) return;
    s->p = np;
    s->cap = cap;
  }
}

/* "0-3,5,7" from a sorted list. */
static void ranks_str(str *s, const int *r, int n) {
  for (int i = 0; i < n;) {
    int j = i;
    while (j + 1 < n && r[j + 1] == r[j] + 1)
      j++;
    sput(s, "%s%d", i ? "," : "", r[i]);
    if (j > i) sput(s, "%s%d", j == i + 1 ? "," : "-", r[j]);
    i = j + 1;
  }
}

static void ranks_json(str *s, const int *r, int n) {
  sput(s, "[");
  for (int i = 0; i < n; i++)
    sput(s, "%s%d", i ? ", " : "", r[i]);
  sput(s, "]");
}

static const grj *comm_of(const dump *d, const char *id) {
  const grj *comms = grj_get(d->doc, "comms");
  if (!comms || comms->type != GRJ_ARR) return NULL;
  for (const grj *c = comms->child; c; c = c->next) {
    const char *cid = grj_str(c, "id");
    if (cid && !strcmp(cid, id)) return c;
  }
  return NULL;
}

/* Highest seq of any call, and of a running one; the running call itself. */
static void scan(const grj *comm, double *max_any, double *max_running, const grj **running) {
  *max_any = -1;
  *max_running = -1;
  *running = NULL;
  const grj *calls = grj_get(comm, "calls");
  if (!calls || calls->type != GRJ_ARR) return;
  for (const grj *c = calls->child; c; c = c->next) {
    double seq = grj_num(c, "seq", -1);
    if (seq > *max_any) *max_any = seq;
    const char *st = grj_str(c, "state");
    /* "timeout": the recorder marks the call it gave up on before dumping; it is still the call
     * this rank waited in. */
    if (st && (!strcmp(st, "running") || !strcmp(st, "timeout")) && seq > *max_running) {
      *max_running = seq;
      *running = c;
    }
  }
}

static const grj *call_with_seq(const grj *comm, double seq) {
  const grj *calls = grj_get(comm, "calls");
  for (const grj *c = calls ? calls->child : NULL; c; c = c->next)
    if (grj_num(c, "seq", -1) == seq) return c;
  return NULL;
}

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }
static int cmp_dump(const void *a, const void *b) {
  return ((const dump *)a)->rank - ((const dump *)b)->rank;
}

int rpt_flight(const char *dir, FILE *out, char **json) {
  *json = NULL;
  struct dirent **ents;
  int n = scandir(dir, &ents, NULL, alphasort);
  if (n < 0) return 0;
  dump *d = NULL;
  int nd = 0, rc = 0;
  for (int i = 0; i < n; i++) {
    const char *name = ents[i]->d_name;
    size_t len = strlen(name);
    if (rc == 0 && !strncmp(name, "flight.", 7) && len > 12 && !strcmp(name + len - 5, ".json")) {
      char path[4096];
      snprintf(path, sizeof path, "%s/%s", dir, name);
      size_t at = 0;
      grj *doc = grj_parse_file(path, &at);
      if (!doc) {
        fprintf(stderr, "gpurun-report: %s does not parse as JSON (byte %zu)\n", path, at);
        rc = -1;
      } else {
        dump *nd2 = realloc(d, (size_t)(nd + 1) * sizeof *d);
        if (!nd2) {
          grj_free(doc);
          rc = -1;
        } else {
          d = nd2;
          dump *x = &d[nd++];
          memset(x, 0, sizeof *x);
          x->doc = doc;
          x->rank = (int)grj_num(doc, "rank", -1);
          x->size = (int)grj_num(doc, "size", 0);
          snprintf(x->node, sizeof x->node, "%s",
                   grj_str(doc, "node") ? grj_str(doc, "node") : "?");
          snprintf(x->reason, sizeof x->reason, "%s",
                   grj_str(doc, "reason") ? grj_str(doc, "reason") : "?");
        }
      }
    }
    free(ents[i]);
  }
  free(ents);
  if (rc != 0 || nd == 0) {
    for (int i = 0; i < nd; i++)
      grj_free(d[i].doc);
    free(d);
    return rc != 0 ? -1 : 0;
  }
  qsort(d, (size_t)nd, sizeof *d, cmp_dump);

  /* Communicator ids in order of first appearance. */
  const char *ids[256];
  int nids = 0;
  for (int i = 0; i < nd; i++) {
    const grj *comms = grj_get(d[i].doc, "comms");
    for (const grj *c = comms && comms->type == GRJ_ARR ? comms->child : NULL; c; c = c->next) {
      const char *id = grj_str(c, "id");
      int seen = 0;
      for (int k = 0; id && k < nids; k++)
        seen |= !strcmp(ids[k], id);
      if (id && !seen && nids < 256) ids[nids++] = id;
    }
  }

  fprintf(out, "\nflight recorder: %d dump(s)", nd);
  for (int i = 0; i < nd; i++)
    fprintf(out, "%s rank %d (%s)", i ? "," : ":", d[i].rank, d[i].reason);
  fputc('\n', out);

  str js = {0};
  sput(&js, "[");
  int findings = 0;
  int *waiting = malloc((size_t)nd * sizeof *waiting),
      *missing = malloc((size_t)nd * sizeof *missing);
  for (int k = 0; k < nids && waiting && missing; k++) {
    const char *id = ids[k];
    double stuck = -1;
    const grj *stuck_call = NULL;
    int comm_size = 0, members = 0;
    const char *backend = "?";
    for (int i = 0; i < nd; i++) {
      const grj *c = comm_of(&d[i], id);
      if (!c) continue;
      members++;
      comm_size = (int)grj_num(c, "size", comm_size);
      if (grj_str(c, "backend")) backend = grj_str(c, "backend");
      double any, run;
      const grj *rcall;
      scan(c, &any, &run, &rcall);
      if (run > stuck) {
        stuck = run;
        stuck_call = rcall;
      }
    }
    if (stuck < 0) {
      fprintf(out, "  comm %s (%s): no call in progress\n", id, backend);
      continue;
    }
    int nw = 0, nm = 0;
    for (int i = 0; i < nd; i++) {
      const grj *c = comm_of(&d[i], id);
      if (!c) continue;
      double any, run;
      const grj *rcall;
      scan(c, &any, &run, &rcall);
      if (any < stuck)
        missing[nm++] = d[i].rank;
      else
        waiting[nw++] = d[i].rank;
    }
    qsort(waiting, (size_t)nw, sizeof *waiting, cmp_int);
    qsort(missing, (size_t)nm, sizeof *missing, cmp_int);
    /* World members that left no dump: died, or were never asked to dump. */
    int nodump[1024], nn = 0;
    if (!strcmp(id, "world") && comm_size > 0) {
      for (int r = 0; r < comm_size && nn < 1024; r++) {
        int have = 0;
        for (int i = 0; i < nd; i++)
          have |= d[i].rank == r;
        if (!have) nodump[nn++] = r;
      }
    }
    const char *op = grj_str(stuck_call, "op") ? grj_str(stuck_call, "op") : "?";
    const char *dtype = grj_str(stuck_call, "dtype") ? grj_str(stuck_call, "dtype") : "?";
    double count = grj_num(stuck_call, "count", -1);
    str line = {0};
    sput(&line, "  comm %s (%s): rank(s) ", id, backend);
    ranks_str(&line, waiting, nw);
    sput(&line, " wait in %s #%.0f (count %.0f %s)", op, stuck, count, dtype);
    if (nm) {
      sput(&line, "; NEVER ENTERED by rank(s) ");
      ranks_str(&line, missing, nm);
      /* What the first laggard last did, to say where it is. */
      for (int i = 0; i < nd; i++) {
        if (d[i].rank != missing[0]) continue;
        const grj *c = comm_of(&d[i], id);
        double any, run;
        const grj *rcall;
        scan(c, &any, &run, &rcall);
        const grj *last = call_with_seq(c, any);
        if (last)
          sput(&line, " (rank %d's last call: %s #%.0f, %s)", missing[0],
               grj_str(last, "op") ? grj_str(last, "op") : "?", any,
               grj_str(last, "state") ? grj_str(last, "state") : "?");
        else
          sput(&line, " (rank %d made no call on it)", missing[0]);
      }
    }
    if (nn) {
      sput(&line, "; no dump from rank(s) ");
      ranks_str(&line, nodump, nn);
      sput(&line, " (dead, or never reached the dump)");
    } else if (strcmp(id, "world") && comm_size > members) {
      sput(&line, "; %d of its %d member(s) left no dump", comm_size - members, comm_size);
    }
    fprintf(out, "%s\n", line.p ? line.p : "");
    free(line.p);

    sput(&js,
         "%s{\"comm\": \"%s\", \"backend\": \"%s\", \"seq\": %.0f, \"op\": \"%s\", \"waiting\": ",
         findings ? ", " : "", id, backend, stuck, op);
    ranks_json(&js, waiting, nw);
    sput(&js, ", \"never_entered\": ");
    ranks_json(&js, missing, nm);
    sput(&js, ", \"no_dump\": ");
    ranks_json(&js, nodump, nn);
    sput(&js, "}");
    findings++;
  }
  sput(&js, "]");
  free(waiting);
  free(missing);
  *json = js.p;
  for (int i = 0; i < nd; i++)
    grj_free(d[i].doc);
  free(d);
  return nd;
}
