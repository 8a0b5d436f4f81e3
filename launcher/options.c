/* gpurun's options: one table gives each option its long name, GPURUN_* variable and config key,
 * so that the three sources cannot drift apart. Precedence: config < environment < argv. */
#include "gr_launcher.h"

#include "gr_param.h"
#include "gr_parse.h"
#include "gr_strbuf.h"
#include "gr_supervise.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

const char *gr__real_getenv(void *ctx, const char *name) {
  (void)ctx;
  return getenv(name);
}

const char *gr__policy_name(gr__policy p) {
  switch (p) {
  case GR__POLICY_CLOSEST:
    return "closest";
  case GR__POLICY_SPREAD:
    return "spread";
  case GR__POLICY_COMPACT:
    return "compact";
  case GR__POLICY_NONE:
    return "none";
  case GR__POLICY_LEAST_LOADED:
    return "least-loaded";
  }
  return "?";
}

const char *gr__health_mode_name(int mode) {
  return mode == GR__HEALTH_OFF ? "off" : mode == GR__HEALTH_AVOID ? "avoid" : "warn";
}

const char *gr__priority_name(int level) {
  return level == GR__PRIO_LOW ? "low" : level == GR__PRIO_HIGH ? "high" : "normal";
}

typedef enum {
  T_FLAG,
  T_INT,
  T_STR,
  T_POLICY,
  T_FORMAT,
  T_SIZE,
  T_SECONDS,
  T_MONITOR,
  T_OMP,
  T_VISIBLE,
  T_HEALTH,
  T_PRIORITY,
  T_WORD /* a word of the variable's vocabulary (gr_param.h), stored as its value */
} opt_type;

typedef struct {
  const char *name; /* long option, config key */
  char short_name;
  int param; /* its GPURUN_* variable (gr_param.h), NO_ENV: command line only */
  opt_type type;
  size_t off;
  int min; /* T_INT lower bound */
  const char *help;
} opt_def;

#define OFF(f) offsetof(gr__options, f)
#define NO_ENV (-1)
static const opt_def opts[] = {
    {"verbose", 'v', GR_PARAM_VERBOSE, T_FLAG, OFF(verbose), 0,
     "print each rank's placement to stderr"},
    {"dry-run", 'n', GR_PARAM_DRY_RUN, T_FLAG, OFF(dry_run), 0, "print this rank's plan and exit"},
    {"all", 0, NO_ENV, T_FLAG, OFF(all), 0, "with --dry-run/--topo: the whole node"},
    {"format", 0, GR_PARAM_FORMAT, T_FORMAT, OFF(json), 0, "text|json output of --dry-run"},
    {"topo", 0, NO_ENV, T_FLAG, OFF(topo_view), 0,
     "draw the node with each rank's placement, exit"},
    {"topology", 0, GR_PARAM_TOPOLOGY, T_STR, OFF(topology), 0,
     "FILE.xml: plan for a recorded node"},
    {"policy", 0, GR_PARAM_POLICY, T_POLICY, OFF(policy), 0,
     "closest|spread|compact|none|least-loaded"},
    {"gpus-per-rank", 0, GR_PARAM_GPUS_PER_RANK, T_INT, OFF(gpus_per_rank), 1,
     "N GPUs for each rank"},
    {"ranks-per-gpu", 0, GR_PARAM_RANKS_PER_GPU, T_INT, OFF(ranks_per_gpu), 1,
     "N ranks share each GPU (MPS)"},
    {"gpu-mem-limit", 0, GR_PARAM_GPU_MEM_LIMIT, T_SIZE, OFF(gpu_mem_limit), 0,
     "SIZE of GPU memory per rank (MPS)"},
    {"smt", 0, GR_PARAM_SMT, T_FLAG, OFF(smt), 0, "bind to all hardware threads of the cores"},
    {"omp", 0, GR_PARAM_OMP, T_OMP, OFF(omp_set), 0, "keep|set the user's own OMP_* (keep)"},
    {"visible-devices", 0, GR_PARAM_VISIBLE_DEVICES, T_VISIBLE, OFF(visible), 0,
     "own|own-first|all GPUs the program sees (own)"},
    {"local-rank", 0, NO_ENV, T_INT, OFF(local_rank), 0, "N: this rank's index on the node"},
    {"local-size", 0, NO_ENV, T_INT, OFF(local_size), 1, "N: ranks on the node"},
    {"monitor", 0, GR_PARAM_MONITOR, T_MONITOR, OFF(monitor), 0,
     "supervise, sample telemetry (default 1 s)"},
    {"time-limit", 0, GR_PARAM_TIME_LIMIT, T_SECONDS, OFF(time_limit), 0,
     "SECONDS, then SIGTERM/SIGKILL"},
    {"master-addr", 0, GR_PARAM_MASTER_ADDR, T_STR, OFF(master_addr), 0,
     "host S of rank 0 (torch MASTER_ADDR)"},
    {"master-port", 0, GR_PARAM_MASTER_PORT, T_INT, OFF(master_port), 1,
     "port N (torch MASTER_PORT; default from job id)"},
    {"prometheus", 0, GR_PARAM_PROMETHEUS, T_STR, OFF(prometheus), 0,
     "DIR: latest samples for node-exporter (implies --monitor)"},
    {"gpu-health", 0, GR_PARAM_GPU_HEALTH, T_HEALTH, OFF(gpu_health), 0,
     "off|warn|avoid unhealthy GPUs at launch (default warn)"},
    {"priority", 0, GR_PARAM_PRIORITY, T_PRIORITY, OFF(priority), 0,
     "low|normal|high: CPU niceness and gr_stream priority"},
    {"trace", 0, GR_PARAM_TRACE, T_WORD, OFF(trace), 0,
     "auto|mpi|none: record the program's MPI calls (auto: with --monitor)"},
    {"timeout", 0, GR_PARAM_TIMEOUT, T_SECONDS, OFF(timeout), 0,
     "SECONDS a call may wait (gpurun's calls; MPI calls when traced)"},
    {"on-hang", 0, GR_PARAM_ON_HANG, T_WORD, OFF(on_hang), 0,
     "report|abort when a traced MPI call passes --timeout (report)"},
    {"config", 0, GR_PARAM_CONFIG, T_STR, OFF(config), 0, "FILE of key = value lines"},
    {"help", 'h', NO_ENV, T_FLAG, OFF(help), 0, "this text"},
    {"help-env", 0, NO_ENV, T_FLAG, OFF(help_env), 0, "the GPURUN_* variables: type, default, use"},
    {"version", 0, NO_ENV, T_FLAG, OFF(version), 0, "print the version"},
};
#define NOPTS (sizeof opts / sizeof opts[0])

void gr__options_init(gr__options *o) {
  memset(o, 0, sizeof *o);
  o->policy = GR__POLICY_CLOSEST;
  o->local_rank = o->local_size = -1;
  o->monitor_interval = 1.0;
}

/* Seconds in [0, 1e9] (gr_param.h's grammar). */
static int parse_seconds(const char *s, double *out) { return gr__parse_seconds(s, 0, 1e9, out); }

/* A boolean (gr_param.h's spellings); an empty value is no. */
static int parse_bool(const char *s, int *out) {
  int b = *s ? gr__parse_bool(s) : 0;
  if (b < 0) return -1;
  *out = b;
  return 0;
}

/* The option's variable name, NULL for a command-line-only option. */
static const char *env_of(const opt_def *d) {
  return d->param == NO_ENV ? NULL : gr__param_name((gr_param_id)d->param);
}

/* Stores value (may be NULL for a flag given bare) into the option. `origin` names the source
 * for messages ("--policy", "GPURUN_POLICY", "gpurun.conf:3: policy"). */
static gr_status apply(gr__options *o, const opt_def *d, const char *value, const char *origin) {
  char *base = (char *)o;
  switch (d->type) {
  case T_FLAG: {
    int b = 1;
    if (value && parse_bool(value, &b))
      return gr__fail_msg(GR_ERR_INVALID, "%s: expected yes or no, got '%s'", origin, value);
    *(int *)(base + d->off) = b;
    return GR_OK;
  }
  case T_INT: {
    int v;
    if (!value) return gr__fail_msg(GR_ERR_INVALID, "%s needs a value", origin);
    if (gr__parse_int(value, d->min, 1000000, &v) != GR_OK)
      return gr__fail_msg(GR_ERR_INVALID, "%s: expected an integer >= %d, got '%s'", origin, d->min,
                          value);
    *(int *)(base + d->off) = v;
    return GR_OK;
  }
  case T_STR: {
    if (!value || !*value) return gr__fail_msg(GR_ERR_INVALID, "%s needs a value", origin);
    size_t cap = sizeof o->topology;
    if (strlen(value) >= cap) return gr__fail_msg(GR_ERR_INVALID, "%s: value too long", origin);
    memcpy(base + d->off, value, strlen(value) + 1);
    return GR_OK;
  }
  case T_POLICY: {
    if (!value) return gr__fail_msg(GR_ERR_INVALID, "%s needs a value", origin);
    for (int p = GR__POLICY_CLOSEST; p <= GR__POLICY_LEAST_LOADED; p++)
      if (strcmp(value, gr__policy_name((gr__policy)p)) == 0)
        return o->policy = (gr__policy)p, GR_OK;
    return gr__fail_msg(GR_ERR_INVALID,
                        "%s: unknown policy '%s' (closest, spread, compact, none, least-loaded)",
                        origin, value);
  }
  case T_FORMAT: {
    if (!value) return gr__fail_msg(GR_ERR_INVALID, "%s needs a value", origin);
    if (strcmp(value, "json") == 0)
      o->json = 1;
    else if (strcmp(value, "text") == 0)
      o->json = 0;
    else
      return gr__fail_msg(GR_ERR_INVALID, "%s: unknown format '%s' (text, json)", origin, value);
    return GR_OK;
  }
  case T_SIZE: {
    unsigned long long v;
    if (!value || gr__parse_size(value, &v) || v == 0)
      return gr__fail_msg(GR_ERR_INVALID, "%s: expected a size like 8G or 512M, got '%s'", origin,
                          value ? value : "");
    o->gpu_mem_limit = v;
    return GR_OK;
  }
  case T_SECONDS: {
    double v;
    if (!value || parse_seconds(value, &v))
      return gr__fail_msg(GR_ERR_INVALID, "%s: expected seconds, got '%s'", origin,
                          value ? value : "");
    *(double *)(base + d->off) = v;
    return GR_OK;
  }
  case T_WORD: {
    const gr_param_def *def = gr__param_def(d->param);
    for (const gr_param_word *w = def->words; w && w->word; w++)
      if (value && strcmp(value, w->word) == 0) return *(int *)(base + d->off) = w->value, GR_OK;
    char list[128] = "";
    gr__strbuf sb;
    gr__strbuf_init_fixed(&sb, list, sizeof list);
    for (const gr_param_word *w = def->words; w && w->word; w++)
      if (!w->alias) gr__strbuf_appendf(&sb, "%s%s", gr__strbuf_len(&sb) ? ", " : "", w->word);
    return gr__fail_msg(GR_ERR_INVALID, "%s: expected %s, got '%s'", origin, list,
                        value ? value : "");
  }
  case T_OMP: {
    if (value && strcmp(value, "keep") == 0) return o->omp_set = 0, GR_OK;
    if (value && strcmp(value, "set") == 0) return o->omp_set = 1, GR_OK;
    return gr__fail_msg(GR_ERR_INVALID, "%s: expected keep or set, got '%s'", origin,
                        value ? value : "");
  }
  case T_VISIBLE: {
    static const char *const modes[] = {"own", "own-first", "all"};
    for (int m = 0; m < 3; m++)
      if (value && strcmp(value, modes[m]) == 0) return o->visible = m, GR_OK;
    return gr__fail_msg(GR_ERR_INVALID, "%s: expected own, own-first or all, got '%s'", origin,
                        value ? value : "");
  }
  case T_HEALTH: {
    for (int m = GR__HEALTH_WARN; m <= GR__HEALTH_AVOID; m++)
      if (value && strcmp(value, gr__health_mode_name(m)) == 0) return o->gpu_health = m, GR_OK;
    return gr__fail_msg(GR_ERR_INVALID, "%s: expected off, warn or avoid, got '%s'", origin,
                        value ? value : "");
  }
  case T_PRIORITY: {
    for (int l = GR__PRIO_NORMAL; l <= GR__PRIO_HIGH; l++)
      if (value && strcmp(value, gr__priority_name(l)) == 0) return o->priority = l, GR_OK;
    return gr__fail_msg(GR_ERR_INVALID, "%s: expected low, normal or high, got '%s'", origin,
                        value ? value : "");
  }
  case T_MONITOR: {
    /* GPURUN_MONITOR=0/no turns it off; =1/yes on at the default interval; =2.5 on at 2.5 s. */
    int b;
    double v;
    if (!value || !*value) return o->monitor = 1, GR_OK;
    if (parse_bool(value, &b) == 0 && strcmp(value, "1") != 0) return o->monitor = b, GR_OK;
    if (parse_seconds(value, &v) || v <= 0)
      return gr__fail_msg(GR_ERR_INVALID, "%s: expected an interval in seconds > 0, got '%s'",
                          origin, value);
    if (v < GR_MONITOR_MIN_INTERVAL_S)
      return gr__fail_msg(GR_ERR_INVALID, "%s: interval %s s is below the floor of %g s", origin,
                          value, GR_MONITOR_MIN_INTERVAL_S);
    o->monitor = 1;
    o->monitor_interval = v;
    return GR_OK;
  }
  }
  return gr__fail_msg(GR_ERR_INVALID, "%s: internal error", origin);
}

static const opt_def *find_long(const char *name, size_t len) {
  for (size_t i = 0; i < NOPTS; i++)
    if (strlen(opts[i].name) == len && strncmp(opts[i].name, name, len) == 0) return &opts[i];
  return NULL;
}

gr_status gr__options_config_text(gr__options *o, const char *text, size_t len,
                                  const char *origin) {
  size_t pos = 0;
  int lineno = 0;
  char line[2048];
  while (pos < len) {
    size_t end = pos;
    while (end < len && text[end] != '\n')
      end++;
    lineno++;
    size_t l = end - pos;
    if (l >= sizeof line)
      return gr__fail_msg(GR_ERR_INVALID, "%s:%d: line too long", origin, lineno);
    memcpy(line, text + pos, l);
    line[l] = 0;
    pos = end + 1;
    if (memchr(line, 0, l))
      return gr__fail_msg(GR_ERR_INVALID, "%s:%d: NUL byte in line", origin, lineno);
    char *hash = strchr(line, '#');
    if (hash) *hash = 0;
    char *s = line;
    while (isspace((unsigned char)*s))
      s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
      *--e = 0;
    if (!*s) continue;
    char *eq = strchr(s, '=');
    if (!eq)
      return gr__fail_msg(GR_ERR_INVALID, "%s:%d: expected 'key = value', got '%.60s'", origin,
                          lineno, s);
    char *k_end = eq;
    while (k_end > s && isspace((unsigned char)k_end[-1]))
      k_end--;
    char *v = eq + 1;
    while (isspace((unsigned char)*v))
      v++;
    const opt_def *d = find_long(s, (size_t)(k_end - s));
    if (!d || !env_of(d) || strcmp(d->name, "config") == 0) {
      *k_end = 0;
      return gr__fail_msg(GR_ERR_INVALID, "%s:%d: unknown key '%.60s'", origin, lineno, s);
    }
    char where[128];
    snprintf(where, sizeof where, "%.60s:%d: %s", origin, lineno, d->name);
    GR_CHECK(apply(o, d, v, where));
  }
  return GR_OK;
}

static gr_status load_config(gr__options *o, const char *path) {
  FILE *f = gr__open_regular(path, "--config");
  if (!f) return GR_ERR_INVALID;
  char *buf = NULL;
  size_t len = 0, cap = 0;
  for (;;) {
    if (len == cap) {
      if (cap >= (1u << 20)) {
        free(buf);
        fclose(f);
        return gr__fail_msg(GR_ERR_INVALID, "--config %s: larger than 1 MiB", path);
      }
      cap = cap ? 2 * cap : 4096;
      char *nb = realloc(buf, cap);
      if (!nb) {
        free(buf);
        fclose(f);
        return gr__fail_msg(GR_ERR_INVALID, "--config %s: out of memory", path);
      }
      buf = nb;
    }
    size_t got = fread(buf + len, 1, cap - len, f);
    len += got;
    if (got == 0) break;
  }
  fclose(f);
  char origin[1024];
  snprintf(origin, sizeof origin, "%s", path);
  gr_status st = gr__options_config_text(o, buf ? buf : "", len, origin);
  free(buf);
  return st;
}

/* Walks argv; for each option calls apply() when `do_apply`, else only finds --config. */
static gr_status walk_argv(gr__options *o, int argc, char *const argv[], int do_apply) {
  int i = 1;
  for (; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--") == 0) {
      i++;
      break;
    }
    if (a[0] != '-' || a[1] == 0) break; /* the program */
    const opt_def *d = NULL;
    const char *value = NULL;
    int inline_value = 0;
    char origin[96];
    if (a[1] == '-') {
      const char *name = a + 2, *eq = strchr(name, '=');
      d = find_long(name, eq ? (size_t)(eq - name) : strlen(name));
      if (!d) return gr__fail_msg(GR_ERR_INVALID, "unknown option '%.60s' (see gpurun --help)", a);
      if (eq) value = eq + 1, inline_value = 1;
      snprintf(origin, sizeof origin, "--%s", d->name);
    } else {
      for (size_t k = 0; k < NOPTS; k++)
        if (opts[k].short_name && opts[k].short_name == a[1] && a[2] == 0) d = &opts[k];
      if (!d) return gr__fail_msg(GR_ERR_INVALID, "unknown option '%.60s' (see gpurun --help)", a);
      snprintf(origin, sizeof origin, "-%c", d->short_name);
    }
    if (d->type == T_FLAG || d->type == T_MONITOR) {
      /* a flag's value only inline: --smt=no */
    } else if (!inline_value) {
      if (i + 1 >= argc) return gr__fail_msg(GR_ERR_INVALID, "%s needs a value", origin);
      value = argv[++i];
    }
    if (do_apply) {
      if (d->type == T_MONITOR && !inline_value) value = NULL;
      GR_CHECK(apply(o, d, value, origin));
    } else if (strcmp(d->name, "config") == 0) {
      GR_CHECK(apply(o, d, value, origin));
    }
  }
  o->prog = i;
  if (i < argc && argv[i]) {
    const char *base = strrchr(argv[i], '/');
    base = base ? base + 1 : argv[i];
    o->prog_python = strncmp(base, "python", 6) == 0 || strcmp(base, "torchrun") == 0;
  }
  return GR_OK;
}

gr_status gr__options_parse(gr__options *o, int argc, char *const argv[], gr__getenv_fn get,
                            void *ctx) {
  /* 1. where is the config file: argv wins over GPURUN_CONFIG */
  const char *cfg_var = gr__param_name(GR_PARAM_CONFIG);
  const char *cfg = get(ctx, cfg_var);
  if (cfg && *cfg) GR_CHECK(apply(o, find_long("config", 6), cfg, cfg_var));
  GR_CHECK(walk_argv(o, argc, argv, 0));
  if (o->config[0]) GR_CHECK(load_config(o, o->config));
  /* 2. environment */
  for (size_t k = 0; k < NOPTS; k++) {
    const char *var = env_of(&opts[k]);
    if (!var || strcmp(opts[k].name, "config") == 0) continue;
    const char *v = get(ctx, var);
    if (v) GR_CHECK(apply(o, &opts[k], v, var));
  }
  /* 3. command line */
  GR_CHECK(walk_argv(o, argc, argv, 1));

  /* conflicts */
  if (o->help || o->help_env || o->version) return GR_OK;
  if ((o->local_rank < 0) != (o->local_size < 0))
    return gr__fail_msg(GR_ERR_INVALID, "--local-rank and --local-size go together");
  if (o->local_rank >= 0 && o->local_rank >= o->local_size)
    return gr__fail_msg(GR_ERR_INVALID, "--local-rank %d is not below --local-size %d",
                        o->local_rank, o->local_size);
  if (o->gpus_per_rank > 1 && o->ranks_per_gpu > 1)
    return gr__fail_msg(GR_ERR_INVALID,
                        "--gpus-per-rank %d and --ranks-per-gpu %d conflict: choose one",
                        o->gpus_per_rank, o->ranks_per_gpu);
  if (o->all && !o->dry_run && !o->topo_view)
    return gr__fail_msg(GR_ERR_INVALID, "--all needs --dry-run or --topo");
  if (o->dry_run && o->topo_view)
    return gr__fail_msg(GR_ERR_INVALID, "--dry-run and --topo conflict: choose one");
  if (!o->dry_run && !o->topo_view && o->prog >= argc)
    return gr__fail_msg(GR_ERR_INVALID,
                        "no program to run (usage: gpurun [OPTIONS] [--] PROGRAM [ARGS...])");
  return GR_OK;
}

void gr__options_usage(FILE *f) {
  fputs("usage: gpurun [OPTIONS] [--] PROGRAM [ARGS...]\n"
        "Places this MPI rank on its GPUs, cores, memory and NIC, then runs PROGRAM.\n\n",
        f);
  for (size_t k = 0; k < NOPTS; k++) {
    char left[64];
    const char *arg = "";
    switch (opts[k].type) {
    case T_INT:
      arg = " N";
      break;
    case T_STR:
      arg = strcmp(opts[k].name, "config") == 0 || strcmp(opts[k].name, "topology") == 0 ? " FILE"
                                                                                         : " S";
      break;
    case T_POLICY:
      arg = " POLICY";
      break;
    case T_FORMAT:
      arg = " FMT";
      break;
    case T_SIZE:
      arg = " SIZE";
      break;
    case T_SECONDS:
      arg = " SECONDS";
      break;
    case T_MONITOR:
      arg = "[=SECONDS]";
      break;
    case T_OMP:
      arg = " keep|set";
      break;
    case T_VISIBLE:
      arg = " MODE";
      break;
    case T_PRIORITY:
      arg = " LEVEL";
      break;
    case T_WORD:
      arg = " WORD";
      break;
    default:
      break;
    }
    if (opts[k].short_name)
      snprintf(left, sizeof left, "-%c, --%s%s", opts[k].short_name, opts[k].name, arg);
    else
      snprintf(left, sizeof left, "    --%s%s", opts[k].name, arg);
    if (env_of(&opts[k]))
      fprintf(f, "  %-28s %s  [%s]\n", left, opts[k].help, env_of(&opts[k]));
    else
      fprintf(f, "  %-28s %s\n", left, opts[k].help);
  }
  fputs("\nConfig file keys are the long option names (key = value). See gpurun(1).\n", f);
}
