/* Loading a job's CSVs, counters and end records, and the per-series summary. */
#include "gr_report.h"

#include "gr_json_read.h"

#include "gr_counters_format.h"
#include "gr_end_record.h"
#include "gr_error.h"
#include "gr_escape.h"
#include "gr_monitor_csv.h"
#include "gr_parse.h"
#include "gr_safefile.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

static double finite_in(double v, double lo, double hi, double dflt);

static const char *const metric_cols[GR__RPT_M_COUNT] = {
    GR_CSV_GPU_UTIL,     GR_CSV_MEM_USED_MIB,   GR_CSV_MEM_TOTAL_MIB, GR_CSV_TEMP_C,
    GR_CSV_POWER_W,      GR_CSV_SM_CLOCK_MHZ,   GR_CSV_CPU_UTIL,      GR_CSV_RSS_MIB,
    GR_CSV_RANK_SM_UTIL, GR_CSV_OTHERS_SM_UTIL, GR_CSV_CPU_STEAL};

static int ends_with(const char *s, const char *suffix) {
  size_t a = strlen(s), b = strlen(suffix);
  return a >= b && !strcmp(s + a - b, suffix);
}

/* "<node>.<local_rank><suffix>": the node may itself contain dots, so split at the last one. */
static int parse_name(const char *base, const char *suffix, char *node, size_t cap,
                      int *local_rank) {
  size_t len = strlen(base) - strlen(suffix);
  char tmp[512];
  if (len >= sizeof tmp) return -1;
  memcpy(tmp, base, len);
  tmp[len] = '\0';
  char *dot = strrchr(tmp, '.');
  if (!dot || dot == tmp) return -1;
  int lr;
  if (gr__parse_int(dot + 1, 0, INT_MAX, &lr) != GR_OK) return -1;
  *dot = '\0';
  size_t nl = (size_t)(dot - tmp);
  if (nl >= cap) return -1;
  memcpy(node, tmp, nl + 1);
  *local_rank = lr;
  return 0;
}

static gr__rpt_series *series_for(gr__rpt_job *job, const char *node, int local_rank, int rank,
                                  const char *gpu) {
  for (int i = 0; i < gr__rpt_nseries(job); i++) {
    gr__rpt_series *s = &GR__RPT_SERIES(job, i);
    if (s->local_rank == local_rank && !strcmp(s->node, node) && !strcmp(s->gpu, gpu)) return s;
  }
  if (gr__array_push(&job->s, NULL) != GR_OK) return NULL;
  gr__rpt_series *s = &GR__RPT_SERIES(job, gr__rpt_nseries(job) - 1);
  snprintf(s->node, sizeof s->node, "%s", node);
  snprintf(s->gpu, sizeof s->gpu, "%s", gpu);
  s->local_rank = local_rank;
  s->rank = rank;
  s->cpu_time_s = NAN;
  return s;
}

static int push(gr__rpt_series *s, double t, const double *m) {
  if (s->n == s->cap) {
    int cap = s->cap ? s->cap * 2 : 64;
    double *nt = realloc(s->t, (size_t)cap * sizeof *nt);
    if (!nt) return -1;
    s->t = nt;
    for (int k = 0; k < GR__RPT_M_COUNT; k++) {
      double *nm = realloc(s->m[k], (size_t)cap * sizeof *nm);
      if (!nm) return -1;
      s->m[k] = nm;
    }
    s->cap = cap;
  }
  s->t[s->n] = t;
  for (int k = 0; k < GR__RPT_M_COUNT; k++)
    s->m[k][s->n] = m[k];
  s->n++;
  return 0;
}

/* Splits line in place at commas, keeping empty fields. */
static int split(char *line, char **f, int max) {
  int n = 0;
  for (char *p = line; n < max;) {
    f[n++] = p;
    char *c = strchr(p, ',');
    if (!c) break;
    *c = '\0';
    p = c + 1;
  }
  return n;
}

/* A number field: empty is "no value" (NAN, fine); anything else must be a whole, finite number
 * within [lo, hi], else *bad is set and NAN returned. */
static double field_num(const char *s, double lo, double hi, int *bad) {
  if (!s || !*s) return NAN;
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (end == s || *end || errno == ERANGE || !isfinite(v) || v < lo || v > hi) {
    *bad = 1;
    return NAN;
  }
  return v;
}

/* Plausible ranges per metric: a value outside is corrupt or hostile input, not a measurement. */
static const double metric_lo[GR__RPT_M_COUNT] = {0, 0, 0, -100, 0, 0, 0, 0, 0, 0, 0};
/* rank_sm_util/others_sm_util sum several processes' shares: bounded loosely; cpu_steal is a share
 * of the cores' time, steal included: at most 100 */
static const double metric_hi[GR__RPT_M_COUNT] = {100, 1e9,  1e9,  300,  1e5, 1e6,
                                                  100, 1e12, 1000, 1000, 100};

/* Per-file complaints: the first of each kind with file:line, then a count at the end. */
enum { P_LONG, P_FIELDS, P_NUMBER, P_GPU, P_SERIES, P_NKINDS };
static const char *const problem_text[P_NKINDS] = {
    "line longer than " GR__RPT_MAX_LINE_STR " bytes; skipped",
    "wrong number of fields; row skipped", "number not finite or out of range; taken as missing",
    "gpu field longer than 31 bytes; row skipped",
    "too many distinct series (GPUs) in one file; row skipped"};

typedef struct {
  const char *file;
  long count[P_NKINDS];
} problems;

static void problem(problems *p, int kind, long line) {
  if (p->count[kind]++ == 0) {
    fputs("gpurun-report: ", stderr);
    gr__esc_term(stderr, p->file);
    fprintf(stderr, ":%ld: %s\n", line, problem_text[kind]);
  }
}

static void problems_summary(const problems *p) {
  for (int k = 0; k < P_NKINDS; k++)
    if (p->count[k] > 1) {
      fputs("gpurun-report: ", stderr);
      gr__esc_term(stderr, p->file);
      fprintf(stderr, ": %ld lines in all: %s\n", p->count[k], problem_text[k]);
    }
}

/* Reads one line of any length; a line over GR__RPT_MAX_LINE is consumed and reported as too long
 * (*len set to (size_t)-1). Returns 0 at end of file. */
static int read_line(FILE *f, char **buf, size_t *cap, size_t *len) {
  ssize_t n = getline(buf, cap, f);
  if (n < 0) return 0;
  *len = (size_t)n > GR__RPT_MAX_LINE ? (size_t)-1 : (size_t)n;
  return 1;
}

/* GR_OK (a file that cannot be used is skipped with a warning), or GR_ERR_NOMEM recorded. */
static gr_status load_csv_at(int dirfd, const char *name, const char *shown, gr__rpt_job *job) {
  const char *base = strrchr(name, '/');
  base = base ? base + 1 : name;
  char node[128];
  int local_rank;
  if (parse_name(base, GR_MONITOR_CSV_SUFFIX, node, sizeof node, &local_rank) != 0) {
    fputs("gpurun-report: ", stderr);
    gr__esc_term(stderr, shown);
    fputs(": not named <node>.<local_rank>" GR_MONITOR_CSV_SUFFIX "; skipped\n", stderr);
    return GR_OK;
  }
  int fd;
  gr_status ost = gr__file_open_read(dirfd, name, &fd);
  FILE *f = ost == GR_OK ? fdopen(fd, "r") : NULL;
  if (!f) {
    if (fd >= 0) close(fd);
    fputs("gpurun-report: ", stderr);
    gr__esc_term(stderr, shown);
    fputs(": ", stderr);
    gr__esc_term(stderr, ost == GR_OK ? strerror(errno) : gr_last_error());
    fputs("; skipped\n", stderr);
    return GR_OK;
  }
  problems pr = {shown, {0}};
  char *line = NULL;
  size_t cap = 0, len = 0;
  char *fields[64];
  int col_time = -1, col_rank = -1, col_gpu = -1, col_thr = -1, col_ecc = -1, col_cpu_s = -1,
      col_state = -1, col_m[GR__RPT_M_COUNT];
  for (int k = 0; k < GR__RPT_M_COUNT; k++)
    col_m[k] = -1;
  if (!read_line(f, &line, &cap, &len)) {
    free(line);
    fclose(f);
    return GR_OK; /* empty file: a rank that never sampled */
  }
  if (len == (size_t)-1) {
    problem(&pr, P_LONG, 1);
    free(line);
    fclose(f);
    return GR_OK;
  }
  line[strcspn(line, "\r\n")] = '\0';
  int nh = split(line, fields, 64);
  for (int i = 0; i < nh; i++) {
    if (!strcmp(fields[i], GR_CSV_TIME))
      col_time = i;
    else if (!strcmp(fields[i], GR_CSV_RANK))
      col_rank = i;
    else if (!strcmp(fields[i], GR_CSV_GPU))
      col_gpu = i;
    else if (!strcmp(fields[i], GR_CSV_THROTTLE))
      col_thr = i;
    else if (!strcmp(fields[i], GR_CSV_ECC_UNCORRECTED))
      col_ecc = i;
    else if (!strcmp(fields[i], GR_CSV_CPU_TIME_S))
      col_cpu_s = i;
    else if (!strcmp(fields[i], GR_CSV_STATE))
      col_state = i;
    for (int k = 0; k < GR__RPT_M_COUNT; k++)
      if (!strcmp(fields[i], metric_cols[k])) col_m[k] = i;
  }
  if (col_time < 0) {
    fputs("gpurun-report: ", stderr);
    gr__esc_term(stderr, shown);
    fputs(":1: no 'time' column in the header; skipped\n", stderr);
    free(line);
    fclose(f);
    return 0;
  }
  int file_series = 0;
  gr_status rc = GR_OK;
  for (long lineno = 2; read_line(f, &line, &cap, &len); lineno++) {
    if (len == (size_t)-1) {
      problem(&pr, P_LONG, lineno);
      continue;
    }
    if (len == 0 || line[len - 1] != '\n') break; /* a cut last line is not data */
    line[strcspn(line, "\r\n")] = '\0';
    int nf = split(line, fields, 64);
    if (nf != nh) {
      problem(&pr, P_FIELDS, lineno);
      continue;
    }
    int bad = 0;
    double t = field_num(fields[col_time], 0, 1e11, &bad);
    if (isnan(t)) {
      problem(&pr, bad ? P_NUMBER : P_FIELDS, lineno);
      continue;
    }
    int rank = -1;
    if (col_rank >= 0) {
      double r = field_num(fields[col_rank], -1, 1e7, &bad);
      rank = isnan(r) ? -1 : (int)r;
    }
    const char *gpu = col_gpu >= 0 && *fields[col_gpu] ? fields[col_gpu] : "-";
    if (strlen(gpu) >= sizeof GR__RPT_SERIES(job, 0).gpu) {
      problem(&pr, P_GPU, lineno);
      continue;
    }
    double m[GR__RPT_M_COUNT];
    for (int k = 0; k < GR__RPT_M_COUNT; k++)
      m[k] = col_m[k] >= 0 ? field_num(fields[col_m[k]], metric_lo[k], metric_hi[k], &bad) : NAN;
    double ecc = col_ecc >= 0 ? field_num(fields[col_ecc], 0, 1e15, &bad) : NAN;
    double cpu_s = col_cpu_s >= 0 ? field_num(fields[col_cpu_s], 0, 1e12, &bad) : NAN;
    if (bad) problem(&pr, P_NUMBER, lineno);
    int before = gr__rpt_nseries(job);
    gr__rpt_series *s = NULL;
    for (int i = 0; i < gr__rpt_nseries(job) && !s; i++)
      if (GR__RPT_SERIES(job, i).local_rank == local_rank &&
          !strcmp(GR__RPT_SERIES(job, i).node, node) && !strcmp(GR__RPT_SERIES(job, i).gpu, gpu))
        s = &GR__RPT_SERIES(job, i);
    if (!s && (file_series >= GR__RPT_MAX_SERIES_PER_FILE ||
               gr__rpt_nseries(job) >= GR__RPT_MAX_SERIES)) {
      problem(&pr, P_SERIES, lineno);
      continue;
    }
    if (!s) s = series_for(job, node, local_rank, rank, gpu);
    if (gr__rpt_nseries(job) > before) file_series++;
    if (!s || push(s, t, m) != 0) {
      char esc[512];
      rc = gr__fail_msg(GR_ERR_NOMEM, "out of memory loading %s",
                        gr__esc_term_str(esc, sizeof esc, shown));
      break;
    }
    if (col_thr >= 0 && *fields[col_thr]) s->throttle_any |= strtoull(fields[col_thr], NULL, 0);
    if (!isnan(ecc) && ecc > s->ecc_max) s->ecc_max = ecc;
    /* the program's own columns: the last row's (a state is one letter, else not taken) */
    if (!isnan(cpu_s)) {
      if (isnan(s->cpu_time_s)) s->cpu_t0 = t, s->cpu_s0 = cpu_s;
      s->cpu_time_s = cpu_s;
      s->cpu_t1 = t;
    }
    if (col_state >= 0) {
      const char *st = fields[col_state];
      s->state = st[0] >= 'A' && st[0] <= 'z' && !st[1] ? st[0] : 0;
      if (s->state) s->nstates++;
      if (s->state == 'T' || s->state == 't') s->nstopped++;
    }
  }
  problems_summary(&pr);
  free(line);
  fclose(f);
  return rc;
}

gr_status gr__rpt_load_csv(const char *path, gr__rpt_job *job) {
  return load_csv_at(AT_FDCWD, path, path, job);
}

/* A JSON file of the job directory, or NULL after one warning naming it (it is skipped). */
static gr__rpt_json *parse_or_skip(int dirfd, const char *name, size_t max, const char *shown) {
  size_t at = 0;
  gr__rpt_json *doc = NULL;
  if (gr__rpt_json_parse_file_at(dirfd, name, max, &at, &doc) == GR_OK) return doc;
  fputs("gpurun-report: ", stderr);
  gr__esc_term(stderr, shown);
  fputs(": ", stderr);
  gr__esc_term(stderr, gr_last_error());
  fputs("; skipped\n", stderr);
  return NULL;
}

static gr_status load_counters_at(int dirfd, const char *name, const char *shown,
                                  gr__rpt_job *job) {
  const char *base = strrchr(name, '/');
  base = base ? base + 1 : name;
  gr__rpt_json *doc = parse_or_skip(dirfd, name, GR__RPT_MAX_COUNTERS_FILE, shown);
  if (!doc) return GR_OK;
  gr__rpt_counters c;
  memset(&c, 0, sizeof c);
  if (parse_name(base, GR_COUNTERS_SUFFIX, c.node, sizeof c.node, &c.local_rank) != 0) {
    snprintf(c.node, sizeof c.node, "%s",
             gr__rpt_json_str(doc, GR_CTR_NODE) ? gr__rpt_json_str(doc, GR_CTR_NODE) : "?");
    c.local_rank = (int)finite_in(gr__rpt_json_num(doc, GR_CTR_LOCAL_RANK, -1), -1, 1e7, -1);
  }
  c.rank = (int)finite_in(gr__rpt_json_num(doc, GR_CTR_RANK, -1), -1, 1e7, -1);
  const gr__rpt_json *coll = gr__rpt_json_get(doc, GR_CTR_COLLECTIVES);
  if (coll && coll->type == GR__RPT_JSON_OBJ) {
    c.have_coll = 1;
    for (const gr__rpt_json *op = coll->child; op; op = op->next) {
      c.coll_calls += finite_in(gr__rpt_json_num(op, GR_CTR_OP_CALLS, 0), 0, 1e15, 0);
      c.coll_bytes += finite_in(gr__rpt_json_num(op, GR_CTR_OP_BYTES, 0), 0, 1e20, 0);
      double t = finite_in(gr__rpt_json_num(op, GR_CTR_OP_TIME_S, 0), 0, 1e9, 0);
      c.coll_time_s += t;
      /* The runtime counts wall time inside a call, waiting for peers included; a separate
       * wait figure is used when a writer provides one. */
      c.coll_wait_s += finite_in(gr__rpt_json_num(op, GR_CTR_OP_WAIT_S, t), 0, 1e9, t);
    }
  }
  /* the placement receipt: another job's file, so only printable characters are kept */
  const char *receipt = gr__rpt_json_str(doc, GR_CTR_RECEIPT);
  if (receipt) {
    snprintf(c.receipt, sizeof c.receipt, "%s", receipt);
    for (char *p = c.receipt; *p; p++)
      if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = '?';
  }
  /* the rank's priority: one of the three levels, anything else is not recorded */
  const char *prio = gr__rpt_json_str(doc, GR_CTR_PRIORITY);
  if (prio && (!strcmp(prio, "low") || !strcmp(prio, "normal") || !strcmp(prio, "high")))
    snprintf(c.priority, sizeof c.priority, "%s", prio);
  const gr__rpt_json *pool = gr__rpt_json_get(doc, GR_CTR_POOL);
  if (pool && pool->type == GR__RPT_JSON_OBJ) {
    c.have_pool = 1;
    c.pool_steals = finite_in(gr__rpt_json_num(pool, GR_CTR_POOL_STEALS, 0), 0, 1e18, 0);
    c.pool_idle_s = finite_in(gr__rpt_json_num(pool, GR_CTR_POOL_IDLE_S, 0), 0, 1e12, 0);
  }
  gr__rpt_json_free(doc);
  if (gr__array_push(&job->c, &c) != GR_OK) {
    char esc[512];
    return gr__fail_msg(GR_ERR_NOMEM, "out of memory loading %s",
                        gr__esc_term_str(esc, sizeof esc, shown));
  }
  return GR_OK;
}

gr_status gr__rpt_load_counters(const char *path, gr__rpt_job *job) {
  return load_counters_at(AT_FDCWD, path, path, job);
}

/* One end record (gr_end_record.h); a file that does not parse is skipped with a warning. */
static gr_status load_end_at(int dirfd, const char *name, const char *shown, gr__rpt_job *job) {
  const char *base = strrchr(name, '/');
  base = base ? base + 1 : name;
  gr__rpt_json *doc = parse_or_skip(dirfd, name, GR_END_MAX_FILE, shown);
  if (!doc) return GR_OK;
  gr__rpt_end e;
  memset(&e, 0, sizeof e);
  if (parse_name(base, GR_END_SUFFIX, e.node, sizeof e.node, &e.local_rank) != 0) {
    const char *node = gr__rpt_json_str(doc, GR_END_KEY_NODE);
    snprintf(e.node, sizeof e.node, "%s", node ? node : "?");
    e.local_rank = (int)finite_in(gr__rpt_json_num(doc, GR_END_KEY_LOCAL_RANK, -1), -1, 1e7, -1);
  }
  e.rank = (int)finite_in(gr__rpt_json_num(doc, GR_END_KEY_RANK, -1), -1, 1e7, -1);
  const char *how = gr__rpt_json_str(doc, GR_END_KEY_HOW);
  e.how = how && !strcmp(how, GR_END_HOW_EXIT)     ? GR__RPT_END_EXIT
          : how && !strcmp(how, GR_END_HOW_SIGNAL) ? GR__RPT_END_SIGNAL
                                                   : GR__RPT_END_UNSEEN;
  e.code = (int)finite_in(gr__rpt_json_num(doc, GR_END_KEY_EXIT_CODE, 0), 0, 255, 0);
  e.sig = (int)finite_in(gr__rpt_json_num(doc, GR_END_KEY_SIGNAL, 0), 0, 128, 0);
  if (e.how == GR__RPT_END_SIGNAL && e.sig == 0) e.how = GR__RPT_END_UNSEEN;
  const gr__rpt_json *core = gr__rpt_json_get(doc, GR_END_KEY_CORE);
  e.core = core && core->type == GR__RPT_JSON_BOOL && core->num != 0;
  const char *sn = gr__rpt_json_str(doc, GR_END_KEY_SIGNAL_NAME);
  int plain = sn && *sn && strlen(sn) < sizeof e.sig_name;
  for (const char *p = sn; plain && *p; p++)
    plain = (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '+' || *p == '-';
  if (plain) snprintf(e.sig_name, sizeof e.sig_name, "%s", sn);
  const char *tl = gr__rpt_json_str(doc, GR_END_KEY_TIME_LIMIT);
  e.time_limit = tl && !strcmp(tl, GR_END_TL_KILL) ? 2 : tl && !strcmp(tl, GR_END_TL_TERM) ? 1 : 0;
  e.start = finite_in(gr__rpt_json_num(doc, GR_END_KEY_START, NAN), 0, 1e11, NAN);
  e.end = finite_in(gr__rpt_json_num(doc, GR_END_KEY_END, NAN), 0, 1e11, NAN);
  e.cpu_s = finite_in(gr__rpt_json_num(doc, GR_END_KEY_CPU_TIME_S, NAN), 0, 1e12, NAN);
  gr__rpt_json_free(doc);
  if (gr__array_push(&job->e, &e) != GR_OK) {
    char esc[512];
    return gr__fail_msg(GR_ERR_NOMEM, "out of memory loading %s",
                        gr__esc_term_str(esc, sizeof esc, shown));
  }
  return GR_OK;
}

gr_status gr__rpt_load_end(const char *path, gr__rpt_job *job) {
  return load_end_at(AT_FDCWD, path, path, job);
}

/* v when within [lo, hi], else dflt (a counters file another job wrote is input like any other). */
static double finite_in(double v, double lo, double hi, double dflt) {
  return isfinite(v) && v >= lo && v <= hi ? v : dflt;
}

static int cmp_series(const void *a, const void *b) {
  const gr__rpt_series *x = a, *y = b;
  if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
  int d = strcmp(x->node, y->node);
  if (d) return d;
  if (x->local_rank != y->local_rank) return x->local_rank < y->local_rank ? -1 : 1;
  return strcmp(x->gpu, y->gpu);
}

/* By end time (unknown last), then rank. */
static int cmp_end(const void *a, const void *b) {
  const gr__rpt_end *x = a, *y = b;
  int xu = isnan(x->end), yu = isnan(y->end);
  if (xu != yu) return xu - yu;
  if (!xu && x->end != y->end) return x->end < y->end ? -1 : 1;
  return (x->rank > y->rank) - (x->rank < y->rank);
}

void gr__rpt_job_init(gr__rpt_job *job) {
  memset(job, 0, sizeof *job);
  gr__array_init(&job->s, sizeof(gr__rpt_series));
  gr__array_init(&job->c, sizeof(gr__rpt_counters));
  gr__array_init(&job->e, sizeof(gr__rpt_end));
  job->slowest = -1;
  job->slowest_rank = -1;
}

gr_status gr__rpt_load(const char *dir, gr__rpt_job *job) {
  gr__rpt_job_init(job);
  struct dirent **ents;
  int n = scandir(dir, &ents, NULL, alphasort);
  char esc[512];
  if (n < 0)
    return gr__fail_msg(GR_ERR_SYSTEM, "cannot read directory %s",
                        gr__esc_term_str(esc, sizeof esc, dir));
  int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  gr_status rc = GR_OK;
  if (dirfd < 0)
    rc = gr__fail_msg(GR_ERR_SYSTEM, "cannot open directory %s",
                      gr__esc_term_str(esc, sizeof esc, dir));
  for (int i = 0; i < n; i++) {
    const char *name = ents[i]->d_name;
    char shown[4096];
    snprintf(shown, sizeof shown, "%s/%s", dir, name);
    if (rc == GR_OK && name[0] != '.' && ends_with(name, GR_MONITOR_CSV_SUFFIX))
      rc = load_csv_at(dirfd, name, shown, job);
    else if (rc == GR_OK && name[0] != '.' && ends_with(name, GR_COUNTERS_SUFFIX))
      rc = load_counters_at(dirfd, name, shown, job);
    else if (rc == GR_OK && name[0] != '.' && ends_with(name, GR_END_SUFFIX))
      rc = load_end_at(dirfd, name, shown, job);
    free(ents[i]);
  }
  free(ents);
  if (dirfd >= 0) close(dirfd);
  /* A rank that wrote counters but no samples (run without the supervisor) still gets a row. */
  for (int i = 0; rc == GR_OK && i < gr__rpt_ncounters(job); i++) {
    const gr__rpt_counters *c = &GR__RPT_COUNTERS(job, i);
    int found = 0;
    for (int k = 0; k < gr__rpt_nseries(job) && !found; k++)
      found = GR__RPT_SERIES(job, k).local_rank == c->local_rank &&
              !strcmp(GR__RPT_SERIES(job, k).node, c->node);
    if (!found && !series_for(job, c->node, c->local_rank, c->rank, "-"))
      rc = gr__fail_msg(GR_ERR_NOMEM, "out of memory loading %s",
                        gr__esc_term_str(esc, sizeof esc, dir));
  }
  if (job->s.count > 1) qsort(job->s.data, job->s.count, sizeof(gr__rpt_series), cmp_series);
  if (job->e.count > 1) qsort(job->e.data, job->e.count, sizeof(gr__rpt_end), cmp_end);
  return rc;
}

double gr__rpt_integrate(const double *t, const double *y, int n) {
  double sum = 0;
  int prev = -1;
  for (int i = 0; i < n; i++) {
    if (isnan(y[i])) continue;
    if (prev >= 0) sum += 0.5 * (y[i] + y[prev]) * (t[i] - t[prev]);
    prev = i;
  }
  return sum;
}

static void mean_max(const double *v, int n, double *mean, double *max) {
  double sum = 0;
  int k = 0;
  *max = NAN;
  for (int i = 0; i < n; i++) {
    if (isnan(v[i])) continue;
    sum += v[i];
    k++;
    if (isnan(*max) || v[i] > *max) *max = v[i];
  }
  *mean = k ? sum / k : NAN;
}

int gr__rpt_same_rank(const gr__rpt_series *a, const gr__rpt_series *b) {
  return a->local_rank == b->local_rank && !strcmp(a->node, b->node);
}

const gr__rpt_counters *gr__rpt_counters_for(const gr__rpt_job *job, const gr__rpt_series *s) {
  for (int i = 0; i < gr__rpt_ncounters(job); i++) {
    const gr__rpt_counters *c = &GR__RPT_COUNTERS(job, i);
    if ((c->local_rank == s->local_rank && !strcmp(c->node, s->node)) ||
        (s->rank >= 0 && c->rank == s->rank))
      return c;
  }
  return NULL;
}

void gr__rpt_summarize(gr__rpt_job *job) {
  job->t0 = INFINITY;
  job->t1 = -INFINITY;
  for (int i = 0; i < gr__rpt_nseries(job); i++) {
    gr__rpt_series *s = &GR__RPT_SERIES(job, i);
    double dummy;
    s->t_first = s->n ? s->t[0] : NAN;
    s->t_last = s->n ? s->t[s->n - 1] : NAN;
    if (s->n && s->t[0] < job->t0) job->t0 = s->t[0];
    if (s->n && s->t[s->n - 1] > job->t1) job->t1 = s->t[s->n - 1];
    mean_max(s->m[GR__RPT_M_GPU_UTIL], s->n, &s->util_mean, &s->util_max);
    mean_max(s->m[GR__RPT_M_MEM_USED], s->n, &dummy, &s->mem_peak);
    mean_max(s->m[GR__RPT_M_MEM_TOTAL], s->n, &dummy, &s->mem_total);
    mean_max(s->m[GR__RPT_M_TEMP], s->n, &dummy, &s->temp_max);
    mean_max(s->m[GR__RPT_M_CPU_UTIL], s->n, &s->cpu_mean, &s->cpu_max);
    mean_max(s->m[GR__RPT_M_RSS], s->n, &dummy, &s->rss_peak);
    mean_max(s->m[GR__RPT_M_RANK_SM], s->n, &s->rank_sm_mean, &dummy);
    mean_max(s->m[GR__RPT_M_OTHERS_SM], s->n, &s->others_sm_mean, &dummy);
    mean_max(s->m[GR__RPT_M_CPU_STEAL], s->n, &s->steal_mean, &s->steal_max);
    s->energy_j = strcmp(s->gpu, "-") ? gr__rpt_integrate(s->t, s->m[GR__RPT_M_POWER], s->n) : NAN;
  }
  if (!isfinite(job->t0)) job->t0 = job->t1 = 0; /* no samples at all */

  /* The straggler: with collective counters, the rank that waits least (everyone else waits for
   * it); without them, the rank whose program ran longest. Only meaningful with 2+ ranks. */
  int with_wait = 0;
  for (int i = 0; i < gr__rpt_ncounters(job); i++)
    with_wait += GR__RPT_COUNTERS(job, i).have_coll;
  int best = -1;
  double best_v = 0;
  for (int i = 0; i < gr__rpt_nseries(job); i++) {
    const gr__rpt_series *s = &GR__RPT_SERIES(job, i);
    const gr__rpt_counters *c = gr__rpt_counters_for(job, s);
    double v;
    if (with_wait >= 2) {
      if (!c || !c->have_coll) continue;
      v = -c->coll_wait_s;
    } else {
      v = s->t_last - s->t_first;
    }
    if (best < 0 || v > best_v) {
      best = i;
      best_v = v;
    }
  }
  int ranks = 0;
  for (int i = 0; i < gr__rpt_nseries(job); i++)
    if (i == 0 || !gr__rpt_same_rank(&GR__RPT_SERIES(job, i), &GR__RPT_SERIES(job, i - 1))) ranks++;
  if (ranks >= 2 && best >= 0) {
    job->slowest = best;
    job->slowest_rank = GR__RPT_SERIES(job, best).rank;
    job->slowest_why = with_wait >= 2 ? "waits least in collectives: the others wait for it"
                                      : "its program ran longest";
  }
}

static void flag_rank(gr__rpt_job *job, int rank, const char *why) {
  for (int i = 0; i < gr__rpt_nseries(job); i++)
    if (GR__RPT_SERIES(job, i).rank == rank) {
      job->slowest = i;
      job->slowest_rank = rank;
      job->slowest_why = why;
      return;
    }
}

void gr__rpt_set_slowest_from_mpi(gr__rpt_job *job, int rank, int most) {
  job->slowest = -1;
  job->slowest_rank = -1;
  job->slowest_why = "no rank stands out in the MPI calls or the monitor's samples (the arrivals "
                     "below)";
  if (rank >= 0) {
    flag_rank(job, rank, "the others waited for it in MPI (the arrivals below)");
    return;
  }
  char ev[160];
  int suspect = gr__rpt_monitor_suspect(job, ev, sizeof ev);
  if (suspect < 0) {
    double mine, med;
    if (most < 0 || gr__rpt_monitor_least_cpu(job, &mine, &med) != most || !(mine < med)) return;
    snprintf(job->slowest_why_buf, sizeof job->slowest_why_buf,
             "the others waited for it most in MPI, and its program ran on a CPU %.0f%% of the "
             "wall time against a median of %.0f%% for the others",
             100.0 * mine, 100.0 * med);
    flag_rank(job, most, job->slowest_why_buf);
    return;
  }
  snprintf(job->slowest_why_buf, sizeof job->slowest_why_buf,
           suspect == most ? "the others waited for it most in MPI, and the monitor saw it %s"
                           : "the monitor saw it %s; the MPI calls single out no rank",
           ev);
  flag_rank(job, suspect, job->slowest_why_buf);
}

void gr__rpt_free(gr__rpt_job *job) {
  for (int i = 0; i < gr__rpt_nseries(job); i++) {
    free(GR__RPT_SERIES(job, i).t);
    for (int k = 0; k < GR__RPT_M_COUNT; k++)
      free(GR__RPT_SERIES(job, i).m[k]);
  }
  gr__array_free(&job->s);
  gr__array_free(&job->c);
  gr__array_free(&job->e);
  gr__rpt_job_init(job);
}
