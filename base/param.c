/* The GPURUN_* variables, declared once: the table, the parsers, the bad-value sentence and the
 * help text (see gr_param.h). */
#include "gr_param.h"

#include "gr_log.h"
#include "gr_parse.h"
#include "gr_plan.h"
#include "gr_strbuf.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- vocabularies ------------------------------------------------------------------------- */

static const gr_param_word log_words[] = {{"error", GR_LOG_ERROR, 0},  {"warn", GR_LOG_WARN, 0},
                                          {"info", GR_LOG_INFO, 0},    {"debug", GR_LOG_DEBUG, 0},
                                          {"warning", GR_LOG_WARN, 1}, {"0", GR_LOG_ERROR, 1},
                                          {"1", GR_LOG_WARN, 1},       {"2", GR_LOG_INFO, 1},
                                          {"3", GR_LOG_DEBUG, 1},      {NULL, 0, 0}};
static const gr_param_word algo_words[] = {{"auto", GR_COLL_ALGO_AUTO, 0},
                                           {"shm", GR_COLL_ALGO_SHM, 0},
                                           {"hier", GR_COLL_ALGO_HIER, 0},
                                           {"hier-ml", GR_COLL_ALGO_HIER_ML, 0},
                                           {"flat", GR_COLL_ALGO_FLAT, 0},
                                           {"mpi", GR_COLL_ALGO_MPI, 0},
                                           /* rows of the MPI backend's table that may be
                                            * selected by name (collectives/path.c; the test
                                            * test_path_table checks that the two agree) */
                                           {"pair", GR_COLL_ALGO_ROW, 0},
                                           {"rd", GR_COLL_ALGO_ROW, 0},
                                           {"rabenseifner", GR_COLL_ALGO_ROW, 0},
                                           {"ring", GR_COLL_ALGO_ROW, 0},
                                           {NULL, 0, 0}};
static const gr_param_word segment_words[] = {
    {"memfd", GR_SHM_SEGMENT_MEMFD, 0}, {"posix", GR_SHM_SEGMENT_POSIX, 0}, {NULL, 0, 0}};
static const gr_param_word private_words[] = {{"auto", GR_SHM_PRIVATE_AUTO, 0},
                                              {"single", GR_SHM_PRIVATE_SINGLE, 0},
                                              {"slots", GR_SHM_PRIVATE_SLOTS, 0},
                                              {NULL, 0, 0}};
static const gr_param_word verify_words[] = {{"warn", GR_VERIFY_WARN, 0},
                                             {"strict", GR_VERIFY_STRICT, 0},
                                             {"off", GR_VERIFY_OFF, 0},
                                             {NULL, 0, 0}};
static const gr_param_word fence_words[] = {
    {"pair", GR_POOL_FENCE_PAIR, 0}, {"asym", GR_POOL_FENCE_ASYM, 0}, {NULL, 0, 0}};
static const gr_param_word priority_words[] = {{"normal", GR_PRIORITY_NORMAL, 0},
                                               {"low", GR_PRIORITY_LOW, 0},
                                               {"high", GR_PRIORITY_HIGH, 0},
                                               {NULL, 0, 0}};
static const gr_param_word trace_words[] = {
    {"auto", GR_TRACE_AUTO, 0}, {"mpi", GR_TRACE_MPI, 0}, {"none", GR_TRACE_NONE, 0}, {NULL, 0, 0}};
static const gr_param_word on_hang_words[] = {
    {"report", GR_ON_HANG_REPORT, 0}, {"abort", GR_ON_HANG_ABORT, 0}, {NULL, 0, 0}};
/* gpurun's own vocabularies (options.c maps the words; listed here for the help text) */
static const gr_param_word format_words[] = {{"text", 0, 0}, {"json", 1, 0}, {NULL, 0, 0}};
static const gr_param_word policy_words[] = {{"closest", 0, 0},      {"spread", 1, 0},
                                             {"compact", 2, 0},      {"none", 3, 0},
                                             {"least-loaded", 4, 0}, {NULL, 0, 0}};
static const gr_param_word omp_words[] = {{"keep", 0, 0}, {"set", 1, 0}, {NULL, 0, 0}};
static const gr_param_word visible_words[] = {
    {"own", 0, 0}, {"own-first", 1, 0}, {"all", 2, 0}, {NULL, 0, 0}};
static const gr_param_word health_words[] = {
    {"off", 0, 0}, {"warn", 1, 0}, {"avoid", 2, 0}, {NULL, 0, 0}};

/* ---- the table ---------------------------------------------------------------------------- */

#define B(n, d, r, doc) [GR_PARAM_##n] = {"GPURUN_" #n, GR_PARAM_BOOL, d, NULL, 0, 0, NULL, r, doc}
#define S(n, d, note, lo, hi, r, doc)                                                              \
  [GR_PARAM_##n] = {"GPURUN_" #n, GR_PARAM_SECONDS, d, note, lo, hi, NULL, r, doc}
#define W(n, d, w, r, doc) [GR_PARAM_##n] = {"GPURUN_" #n, GR_PARAM_WORD, d, NULL, 0, 0, w, r, doc}
#define T(n, d, note, r, doc)                                                                      \
  [GR_PARAM_##n] = {"GPURUN_" #n, GR_PARAM_STRING, d, note, 0, 0, NULL, r, doc}
#define I(n, d, note, lo, hi, r, doc)                                                              \
  [GR_PARAM_##n] = {"GPURUN_" #n, GR_PARAM_INT, d, note, lo, hi, NULL, r, doc}
#define P(id, name, doc)                                                                           \
  [GR_PARAM_##id] = {name, GR_PARAM_PLAN, "", NULL, 0, 0, NULL, "gpurun", doc}

static const gr_param_def table[GR_PARAM_COUNT] = {
    W(LOG, "warn", log_words, "every program", "how much gpurun says on stderr"),
    S(TIMEOUT, "0", "no timeout", 0, INFINITY, "collectives, tasks, the MPI layer",
      "seconds a collective call, a distributed pool or (through the MPI layer) any MPI call "
      "waits"),
    B(CHECK, "off", "collectives",
      "check mode: every collective call first compares its arguments across the ranks"),
    W(COLL_ALGO, "auto", algo_words, "collectives",
      "the path of a collective: auto, node shared memory, hierarchical, hierarchical with the "
      "multi-leader allreduce, flat, MPI algorithms, or one MPI algorithm's row by name"),
    W(SHM_SEGMENT, "memfd", segment_words, "collectives",
      "how the node's shared-memory segment is made (posix: the fallback, for tests)"),
    B(SHM_CMA, "on", "collectives",
      "single-copy transfers between node-mates (process_vm_readv/writev) from 16 KiB to a "
      "crossover per kind"),
    W(SHM_PRIVATE, "auto", private_words, "collectives",
      "private buffers on one node: single copy or the slots per size, measured (auto), or forced"),
    B(NCCL_SHARE, "on", "collectives",
      "ranks that share a GPU are grouped for NCCL (off: NCCL refuses them)"),
    B(FLIGHT, "off", "collectives",
      "SIGUSR1 dumps the flight recorder (always on at GPURUN_LOG=debug)"),
    B(LIVE, "on", "collectives",
      "the live-state file gpurun-top reads, while GPURUN_MONITOR_DIR is set"),
    S(LIVE_INTERVAL, "0.25", NULL, 0.01, 3600, "collectives",
      "seconds between two live-state files"),
    T(MONITOR_DIR, "", "unset", "supervisor, runtime, collectives, gpurun-top",
      "root of the job directories (the supervisor sets it; gpurun-monitor when unset)"),
    B(MONITOR_GROUP, "off", "base", "job directories and files readable by the group (0750)"),
    T(JOB_ID, "", "the scheduler's", "base",
      "the job's id, naming its job directory (the supervisor and gr_init set it)"),
    T(NVML_LIBRARY, "libnvidia-ml.so.1", NULL, "monitor, gpurun-doctor",
      "the NVML library loaded with dlopen"),
    W(VERIFY, "warn", verify_words, "runtime",
      "gr_init's check of the placement against gpurun's plan: warn, error, or skip"),
    W(POOL_FENCE, "pair", fence_words, "tasks",
      "the deques' fence: the fence pair, or membarrier's asymmetric barrier"),
    T(LIB, "", "found by the package", "the Python package",
      "the libgpurun file the package loads (that file only)"),
    T(PREFIX, "", "none", "the Python package's setup.py",
      "install prefix of libgpurun recorded in the package at pip install"),
    W(TRACE, "auto", trace_words, "gpurun (--trace), the MPI layer",
      "record the program's MPI calls (libgpurun-mpi.so): auto is on under --monitor"),
    W(ON_HANG, "report", on_hang_words, "gpurun (--on-hang), the MPI layer",
      "an MPI call past GPURUN_TIMEOUT: dump and name the missing ranks, or also end the job"),
    T(TRACE_LIB, "", "beside gpurun", "gpurun",
      "the MPI layer's file gpurun preloads (libgpurun-mpi.so)"),
    B(VERBOSE, "off", "gpurun (--verbose)", "print each rank's placement to stderr"),
    B(DRY_RUN, "off", "gpurun (--dry-run)", "print this rank's plan and exit"),
    W(FORMAT, "text", format_words, "gpurun (--format)", "output of --dry-run"),
    T(TOPOLOGY, "", "this node", "gpurun (--topology)", "FILE.xml: plan for a recorded node"),
    W(POLICY, "closest", policy_words, "gpurun (--policy)", "how GPUs are given to ranks"),
    I(GPUS_PER_RANK, "1", NULL, 1, 1000000, "gpurun (--gpus-per-rank)", "GPUs for each rank"),
    I(RANKS_PER_GPU, "1", NULL, 1, 1000000, "gpurun (--ranks-per-gpu)",
      "ranks that share each GPU (MPS)"),
    [GR_PARAM_GPU_MEM_LIMIT] = {"GPURUN_GPU_MEM_LIMIT", GR_PARAM_SIZE, "", "none", 0, 0, NULL,
                                "gpurun (--gpu-mem-limit)", "GPU memory per rank (MPS)"},
    B(SMT, "off", "gpurun (--smt)", "bind to all hardware threads of the cores"),
    W(OMP, "keep", omp_words, "gpurun (--omp)", "keep or set the user's own OMP_* variables"),
    W(VISIBLE_DEVICES, "own", visible_words, "gpurun (--visible-devices)",
      "which GPUs the program sees"),
    T(MONITOR, "", "off", "gpurun (--monitor)",
      "yes, no, or SECONDS: supervise and sample telemetry (default 1 s)"),
    S(TIME_LIMIT, "0", "none", 0, 1e9, "gpurun (--time-limit)",
      "seconds, then SIGTERM and SIGKILL"),
    T(MASTER_ADDR, "", "rank 0's host", "gpurun (--master-addr)", "torch's MASTER_ADDR"),
    I(MASTER_PORT, "", "from the job id", 1, 1000000, "gpurun (--master-port)",
      "torch's MASTER_PORT"),
    T(PROMETHEUS, "", "none", "gpurun (--prometheus)",
      "DIR: latest samples for node-exporter (implies --monitor)"),
    W(GPU_HEALTH, "warn", health_words, "gpurun (--gpu-health)",
      "what to do with unhealthy GPUs at launch"),
    W(PRIORITY, "normal", priority_words, "gpurun (--priority), runtime",
      "CPU niceness and gr_stream priority (gpurun exports the level)"),
    T(CONFIG, "", "none", "gpurun (--config)", "FILE of key = value lines"),
    P(PLAN_VERSION, GR_PLAN_VAR_VERSION, "the plan's version"),
    P(LOCAL_RANK, GR_PLAN_VAR_LOCAL_RANK, "this rank's index on the node"),
    P(LOCAL_SIZE, GR_PLAN_VAR_LOCAL_SIZE, "ranks on the node"),
    P(GPUS, GR_PLAN_VAR_GPUS, "the rank's GPUs, PCI bus ids"),
    P(CPUS, GR_PLAN_VAR_CPUS, "the rank's cpuset"),
    P(NUMA, GR_PLAN_VAR_NUMA, "the rank's NUMA nodes"),
    P(NIC, GR_PLAN_VAR_NIC, "the nearest NIC"),
    P(PLAN_PID, GR_PLAN_VAR_PLAN_PID, "the process id of the gpurun that made the plan"),
    P(BOUND, GR_PLAN_VAR_BOUND, "what gpurun bound: cpu, mem"),
};

#undef B
#undef S
#undef W
#undef T
#undef I
#undef P

const gr_param_def *gr__param_def(int id) {
  return id >= 0 && id < GR_PARAM_COUNT ? &table[id] : NULL;
}

const char *gr__param_name(gr_param_id id) {
  const gr_param_def *d = gr__param_def((int)id);
  return d ? d->name : "GPURUN_?";
}

const char *gr__param_raw(gr_param_id id) {
  const gr_param_def *d = gr__param_def((int)id);
  const char *v = d ? getenv(d->name) : NULL;
  return v && *v ? v : NULL;
}

/* ---- parsers ------------------------------------------------------------------------------ */

/* s without the blanks around it, in buf (NULL when it does not fit). */
static const char *trimmed(const char *s, char *buf, size_t cap) {
  if (!s) return NULL;
  while (isspace((unsigned char)*s))
    s++;
  size_t n = strlen(s);
  while (n > 0 && isspace((unsigned char)s[n - 1]))
    n--;
  if (n >= cap) return NULL;
  memcpy(buf, s, n);
  buf[n] = '\0';
  return buf;
}

int gr__parse_bool(const char *s) {
  static const char *const on[] = {"1", "yes", "true", "on"}, *const off[] = {"0", "no", "false",
                                                                              "off"};
  char buf[16];
  s = trimmed(s, buf, sizeof buf);
  if (!s) return -1;
  for (int i = 0; i < 4; i++) {
    if (strcasecmp(s, on[i]) == 0) return 1;
    if (strcasecmp(s, off[i]) == 0) return 0;
  }
  return -1;
}

int gr__parse_seconds(const char *s, double lo, double hi, double *out) {
  char buf[128];
  s = trimmed(s, buf, sizeof buf);
  if (!s || !*s) return -1;
  char *end;
  double v = strtod(s, &end);
  if (end == s || !isfinite(v)) return -1; /* an overflow is inf; an underflow is 0 or subnormal */
  if (*end == 's') end++;
  if (*end || !(v >= lo) || !(v <= hi)) return -1;
  *out = v;
  return 0;
}

int gr__parse_size(const char *s, unsigned long long *out) {
  char buf[128];
  s = trimmed(s, buf, sizeof buf);
  if (!s || !*s) return -1;
  char *end;
  double v = strtod(s, &end);
  if (end == s || !(v >= 0) || !isfinite(v)) return -1;
  double mul = 1;
  const char *units = "KMGT";
  const char *u = *end ? strchr(units, toupper((unsigned char)*end)) : NULL;
  if (u) {
    for (const char *k = units; k <= u; k++)
      mul *= 1024.0;
    end++;
    if (*end == 'B' || *end == 'b') end++;
  }
  if (*end) return -1;
  v *= mul;
  if (!(v < 18446744073709551616.0)) return -1; /* 2^64: beyond unsigned long long */
  *out = (unsigned long long)v;
  return 0;
}

int gr__parse_word(const char *s, const gr_param_word *words, int *out) {
  char buf[64];
  s = trimmed(s, buf, sizeof buf);
  if (!s || !words) return -1;
  for (const gr_param_word *w = words; w->word; w++)
    if (strcasecmp(s, w->word) == 0) return *out = w->value, 0;
  return -1;
}

int gr__param_parse(gr_param_id id, const char *text, gr_param_value *out) {
  const gr_param_def *d = gr__param_def((int)id);
  if (!d || !text) return -1;
  gr_param_value v;
  memset(&v, 0, sizeof v);
  switch (d->type) {
  case GR_PARAM_BOOL:
    if ((v.b = gr__parse_bool(text)) < 0) return -1;
    break;
  case GR_PARAM_SECONDS:
    if (gr__parse_seconds(text, d->lo, d->hi, &v.s) != 0) return -1;
    break;
  case GR_PARAM_SIZE:
    if (gr__parse_size(text, &v.z) != 0) return -1;
    break;
  case GR_PARAM_INT: {
    char buf[64];
    const char *t = trimmed(text, buf, sizeof buf);
    if (gr__parse_ll(t, (long long)d->lo, (long long)d->hi, &v.i) != GR_OK) return -1;
    break;
  }
  case GR_PARAM_WORD:
    if (gr__parse_word(text, d->words, &v.w) != 0) return -1;
    break;
  case GR_PARAM_STRING:
  case GR_PARAM_PLAN:
    v.t = *text ? text : NULL;
    break;
  }
  *out = v;
  return 0;
}

gr_param_value gr__param_default(gr_param_id id) {
  gr_param_value v;
  memset(&v, 0, sizeof v);
  const gr_param_def *d = gr__param_def((int)id);
  if (d && d->def[0] && gr__param_parse(id, d->def, &v) != 0) memset(&v, 0, sizeof v);
  return v;
}

/* ---- the bad-value sentence --------------------------------------------------------------- */

/* "a number of seconds >= 0", "one of auto, shm, ...": what a value of d must be. */
static void what(const gr_param_def *d, gr__strbuf *sb) {
  switch (d->type) {
  case GR_PARAM_BOOL:
    gr__strbuf_appendf(sb, "a boolean (0/1/yes/no/true/false/on/off)");
    return;
  case GR_PARAM_SECONDS:
    if (isinf(d->hi))
      gr__strbuf_appendf(sb, "a number of seconds >= %g", d->lo);
    else
      gr__strbuf_appendf(sb, "a number of seconds in [%g, %g]", d->lo, d->hi);
    return;
  case GR_PARAM_SIZE:
    gr__strbuf_appendf(sb, "a size (a number, then K, M, G or T)");
    return;
  case GR_PARAM_INT:
    gr__strbuf_appendf(sb, "an integer in [%.0f, %.0f]", d->lo, d->hi);
    return;
  case GR_PARAM_WORD: {
    gr__strbuf_appendf(sb, "one of ");
    int first = 1;
    for (const gr_param_word *w = d->words; w && w->word; w++) {
      if (w->alias) continue;
      gr__strbuf_appendf(sb, "%s%s", first ? "" : ", ", w->word);
      first = 0;
    }
    return;
  }
  case GR_PARAM_STRING:
  case GR_PARAM_PLAN:
    break;
  }
  gr__strbuf_appendf(sb, "a value");
}

/* The default as people read it: "0 (no timeout)", "auto", "unset". */
static void shown_default(const gr_param_def *d, gr__strbuf *sb) {
  if (d->def[0] && d->def_note)
    gr__strbuf_appendf(sb, "%s (%s)", d->def, d->def_note);
  else if (d->def[0])
    gr__strbuf_appendf(sb, "%s", d->def);
  else
    gr__strbuf_appendf(sb, "%s", d->def_note ? d->def_note : "none");
}

void gr__param_bad_sentence(gr_param_id id, const char *text, char *out, size_t cap) {
  if (!cap) return;
  const gr_param_def *d = gr__param_def((int)id);
  if (!d) {
    snprintf(out, cap, "unknown variable");
    return;
  }
  if (!text) text = "";
  size_t n = strlen(text);
  gr__strbuf sb;
  gr__strbuf_init_fixed(&sb, out, cap);
  gr__strbuf_appendf(&sb, "%s=%.40s%s is not ", d->name, text, n > 40 ? "..." : "");
  what(d, &sb);
  gr__strbuf_appendf(&sb, "; using ");
  shown_default(d, &sb);
}

/* ---- reading ------------------------------------------------------------------------------ */

static int warned[GR_PARAM_COUNT];

gr_param_value gr__param_get(gr_param_id id) {
  const char *raw = gr__param_raw(id);
  gr_param_value v;
  if (raw && gr__param_parse(id, raw, &v) == 0) return v;
  if (raw && id >= 0 && id < GR_PARAM_COUNT &&
      !__atomic_exchange_n(&warned[id], 1, __ATOMIC_RELAXED)) {
    char why[512];
    gr__param_bad_sentence(id, raw, why, sizeof why);
    GR_WARN("%s", why);
  }
  return gr__param_default(id);
}

int gr__param_bool(gr_param_id id) { return gr__param_get(id).b; }
double gr__param_seconds(gr_param_id id) { return gr__param_get(id).s; }
int gr__param_word(gr_param_id id) { return gr__param_get(id).w; }

const char *gr__param_str(gr_param_id id) {
  const char *raw = gr__param_raw(id);
  if (raw) return raw;
  const gr_param_def *d = gr__param_def((int)id);
  return d && d->def[0] ? d->def : NULL;
}

/* A boolean by name with the default given: GR_PARAM_BOOL's rules for a variable outside the
 * table (the table's own go through gr__param_bool). */
int gr__env_bool(const char *name, int def) {
  const char *v = getenv(name);
  if (!v || !*v) return def;
  int b = gr__parse_bool(v);
  if (b >= 0) return b;
  /* Warn once per name: the variables are read at every gr_comm_create. */
  static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  static char seen_names[16][48];
  int seen = 0;
  pthread_mutex_lock(&lock);
  for (int k = 0; k < 16 && !seen; k++) {
    if (!seen_names[k][0]) {
      snprintf(seen_names[k], sizeof seen_names[k], "%s", name);
      break;
    }
    seen = strncmp(seen_names[k], name, sizeof seen_names[k] - 1) == 0;
  }
  pthread_mutex_unlock(&lock);
  if (!seen)
    GR_WARN("%s=%.40s%s is not a boolean (0/1/yes/no/true/false/on/off); using %s", name, v,
            strlen(v) > 40 ? "..." : "", def ? "on" : "off");
  return def;
}

/* ---- help --------------------------------------------------------------------------------- */

static const char *type_name(const gr_param_def *d) {
  static const char *const names[] = {"boolean", "seconds", "size",         "integer",
                                      "word",    "text",    "set by gpurun"};
  return names[d->type];
}

/* "auto|shm|hier|hier-ml|flat|mpi" for a word variable, else the type's name. */
static void type_text(const gr_param_def *d, char *out, size_t cap) {
  if (d->type != GR_PARAM_WORD) {
    snprintf(out, cap, "%s", type_name(d));
    return;
  }
  gr__strbuf sb;
  gr__strbuf_init_fixed(&sb, out, cap);
  for (const gr_param_word *w = d->words; w->word; w++)
    if (!w->alias) gr__strbuf_appendf(&sb, "%s%s", gr__strbuf_len(&sb) ? "|" : "", w->word);
}

/* shown_default into out (cap bytes). */
static void default_text(const gr_param_def *d, char *out, size_t cap) {
  gr__strbuf sb;
  gr__strbuf_init_fixed(&sb, out, cap);
  shown_default(d, &sb);
}

void gr__param_help(FILE *f) {
  fprintf(f, "gpurun's GPURUN_* variables: name, type, default; who reads it: what it does.\n\n");
  for (int i = 0; i < GR_PARAM_COUNT; i++) {
    const gr_param_def *d = &table[i];
    char type[96], def[96] = "";
    type_text(d, type, sizeof type);
    if (d->type == GR_PARAM_PLAN) {
      fprintf(f, "  %-24s set by gpurun for the program\n      %s\n", d->name, d->doc);
      continue;
    }
    default_text(d, def, sizeof def);
    fprintf(f, "  %-24s %s, default %s\n      %s: %s\n", d->name, type, def, d->reader, d->doc);
  }
}

/* roff: backslashes doubled, '-' as \-, a leading '.' or '\'' guarded. */
static void roff(FILE *f, const char *s) {
  if (*s == '.' || *s == '\'') fputs("\\&", f);
  for (; *s; s++) {
    if (*s == '\\')
      fputs("\\e", f);
    else if (*s == '-')
      fputs("\\-", f);
    else
      fputc(*s, f);
  }
}

void gr__param_man(FILE *f) {
  for (int i = 0; i < GR_PARAM_COUNT; i++) {
    const gr_param_def *d = &table[i];
    char type[96], def[96] = "";
    type_text(d, type, sizeof type);
    fputs(".TP\n.B ", f);
    roff(f, d->name);
    fputs("\n", f);
    if (d->type == GR_PARAM_PLAN) {
      fputs("Set by gpurun for the program: ", f);
    } else {
      default_text(d, def, sizeof def);
      roff(f, type);
      fputs(", default ", f);
      roff(f, def);
      fputs("; ", f);
      roff(f, d->reader);
      fputs(": ", f);
    }
    roff(f, d->doc);
    fputs(".\n", f);
  }
}
