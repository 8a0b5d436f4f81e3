/* Internal: every GPURUN_* variable a user may set, declared once. base/param.c holds the table
 * (name, type, default, one line of doc, who reads it), one parser per type and the one sentence
 * for a bad value; `gpurun --help-env` and the ENVIRONMENT section of gpurun(1) are printed from
 * it. The plan contract's variables (gr_plan.h) are listed as "set by gpurun" for the help text;
 * their names stay gr_plan.h's and they are read through gr_plan.h's reader. Base layer: no MPI. */
#ifndef GR_PARAM_H
#define GR_PARAM_H

#include <stddef.h>
#include <stdio.h>

typedef enum {
  GR_PARAM_BOOL,    /* 1/yes/true/on, 0/no/false/off (any case, blanks around ignored) */
  GR_PARAM_SECONDS, /* a finite number >= the entry's lo, optional 's' */
  GR_PARAM_SIZE,    /* bytes, optional K, M, G or T (powers of 1024), optional B */
  GR_PARAM_INT,     /* a decimal integer in [lo, hi] */
  GR_PARAM_WORD,    /* one word of the entry's vocabulary (any case) */
  GR_PARAM_STRING,  /* any text: a path, a host, an id */
  GR_PARAM_PLAN     /* written by gpurun for the program (gr_plan.h); not a setting */
} gr_param_type;

/* The variables, in the table's order. */
typedef enum {
  /* read by the library and the programs */
  GR_PARAM_LOG,
  GR_PARAM_TIMEOUT,
  GR_PARAM_CHECK,
  GR_PARAM_COLL_ALGO,
  GR_PARAM_SHM_SEGMENT,
  GR_PARAM_SHM_CMA,
  GR_PARAM_SHM_PRIVATE,
  GR_PARAM_NCCL_SHARE,
  GR_PARAM_FLIGHT,
  GR_PARAM_LIVE,
  GR_PARAM_LIVE_INTERVAL,
  GR_PARAM_MONITOR_DIR,
  GR_PARAM_MONITOR_GROUP,
  GR_PARAM_JOB_ID,
  GR_PARAM_NVML_LIBRARY,
  GR_PARAM_VERIFY,
  GR_PARAM_POOL_FENCE,
  GR_PARAM_LIB,
  GR_PARAM_PREFIX,
  GR_PARAM_TRACE,
  GR_PARAM_ON_HANG,
  GR_PARAM_TRACE_LIB,
  /* gpurun's options (launcher/options.c parses them; a bad value is a usage error) */
  GR_PARAM_VERBOSE,
  GR_PARAM_DRY_RUN,
  GR_PARAM_FORMAT,
  GR_PARAM_TOPOLOGY,
  GR_PARAM_POLICY,
  GR_PARAM_GPUS_PER_RANK,
  GR_PARAM_RANKS_PER_GPU,
  GR_PARAM_GPU_MEM_LIMIT,
  GR_PARAM_SMT,
  GR_PARAM_OMP,
  GR_PARAM_VISIBLE_DEVICES,
  GR_PARAM_MONITOR,
  GR_PARAM_TIME_LIMIT,
  GR_PARAM_MASTER_ADDR,
  GR_PARAM_MASTER_PORT,
  GR_PARAM_PROMETHEUS,
  GR_PARAM_GPU_HEALTH,
  GR_PARAM_PRIORITY,
  GR_PARAM_CONFIG,
  /* the plan contract, set by gpurun */
  GR_PARAM_PLAN_VERSION,
  GR_PARAM_LOCAL_RANK,
  GR_PARAM_LOCAL_SIZE,
  GR_PARAM_GPUS,
  GR_PARAM_CPUS,
  GR_PARAM_NUMA,
  GR_PARAM_NIC,
  GR_PARAM_PLAN_PID,
  GR_PARAM_BOUND,
  GR_PARAM_COUNT
} gr_param_id;

/* Values of the word variables the library reads (the index of the word's meaning). */
enum {
  GR_COLL_ALGO_AUTO,
  GR_COLL_ALGO_SHM,
  GR_COLL_ALGO_HIER,
  GR_COLL_ALGO_FLAT,
  GR_COLL_ALGO_MPI,
  GR_COLL_ALGO_HIER_ML,
  GR_COLL_ALGO_ROW /* a row of the MPI backend's table by its name (collectives/gr_path.h) */
};
enum { GR_SHM_SEGMENT_MEMFD, GR_SHM_SEGMENT_POSIX };
enum { GR_SHM_PRIVATE_AUTO, GR_SHM_PRIVATE_SINGLE, GR_SHM_PRIVATE_SLOTS };
enum { GR_VERIFY_WARN, GR_VERIFY_STRICT, GR_VERIFY_OFF };
enum { GR_POOL_FENCE_PAIR, GR_POOL_FENCE_ASYM };
enum { GR_PRIORITY_NORMAL, GR_PRIORITY_LOW, GR_PRIORITY_HIGH };
enum { GR_TRACE_AUTO, GR_TRACE_MPI, GR_TRACE_NONE };
enum { GR_ON_HANG_REPORT, GR_ON_HANG_ABORT };

/* One word of a vocabulary: its meaning, and whether it is an alias (accepted, not listed). */
typedef struct {
  const char *word;
  int value;
  int alias;
} gr_param_word;

typedef struct {
  const char *name;
  gr_param_type type;
  const char *def;            /* the default, in the type's own syntax ("" for none) */
  const char *def_note;       /* what the default means, or NULL ("no timeout") */
  double lo, hi;              /* GR_PARAM_SECONDS and GR_PARAM_INT: the accepted range */
  const gr_param_word *words; /* GR_PARAM_WORD: the vocabulary, ended by a NULL word */
  const char *reader;         /* the layer or program that reads it */
  const char *doc;            /* one line */
} gr_param_def;

typedef union {
  int b;                /* GR_PARAM_BOOL: 0 or 1 */
  double s;             /* GR_PARAM_SECONDS */
  unsigned long long z; /* GR_PARAM_SIZE */
  long long i;          /* GR_PARAM_INT */
  int w;                /* GR_PARAM_WORD: the word's value */
  const char *t;        /* GR_PARAM_STRING, GR_PARAM_PLAN: the text, NULL when unset or empty */
} gr_param_value;

/* The table's entry for id (NULL outside the table). */
const gr_param_def *gr__param_def(int id);
const char *gr__param_name(gr_param_id id);

/* The variable as set: NULL when unset or empty. Read on every call. */
const char *gr__param_raw(gr_param_id id);
/* Parses text as id's type into *out: 0, or -1 when it is not a value of that type and range. */
int gr__param_parse(gr_param_id id, const char *text, gr_param_value *out);
/* id's default (the table's def parsed). */
gr_param_value gr__param_default(gr_param_id id);
/* The one sentence for a bad value: "NAME=VALUE is not WHAT; using DEFAULT" (the value cut to 40
 * bytes). */
void gr__param_bad_sentence(gr_param_id id, const char *text, char *out, size_t cap);

/* The value now: the variable parsed, the default when it is unset or empty, and for a bad value
 * the default and a warning with the sentence above, once per variable per process. Read on
 * every call (tests and benchmarks change variables between calls). */
gr_param_value gr__param_get(gr_param_id id);
int gr__param_bool(gr_param_id id);
double gr__param_seconds(gr_param_id id);
int gr__param_word(gr_param_id id);
/* GR_PARAM_STRING: the text, or the default when unset or empty (NULL when that is ""). */
const char *gr__param_str(gr_param_id id);

/* The parsers, for text from any source (options, config files). Each accepts blanks around the
 * value and returns 0, or -1 leaving *out untouched. */
int gr__parse_bool(const char *s); /* 1, 0, or -1 for none of the spellings */
int gr__parse_seconds(const char *s, double lo, double hi, double *out);
int gr__parse_size(const char *s, unsigned long long *out);
int gr__parse_word(const char *s, const gr_param_word *words, int *out);
/* A boolean variable by name (GR_PARAM_BOOL's rules and warning): def when unset or empty. */
int gr__env_bool(const char *name, int def);

/* The table for people: `gpurun --help-env` (text) and gpurun(1)'s ENVIRONMENT section (roff). */
void gr__param_help(FILE *f);
void gr__param_man(FILE *f);

#endif
