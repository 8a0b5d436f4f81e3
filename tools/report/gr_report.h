/* gpurun-report: a job's monitor files -> summary table, JSON, SVG timeline, straggler names.
 * Data model and the steps, each testable on fixture files.
 *
 *   job_load.c   the CSVs, counters files and end records -> gr__rpt_job, its summary, the slowest rank
 *   json_read.c  JSON text (gr_json_read.h)        -> a tree, for the counters and flight dumps
 *   waitfor.c    the flight-recorder dumps         -> stuck calls, wait-for chains
 *   output.c     gr__rpt_job                       -> the table, report.json, report.svg
 *   main.c       options, exit code */
#ifndef GR_REPORT_H
#define GR_REPORT_H

#include "gr_array.h"

#include <gpurun/status.h>
#include <stdio.h>

/* Input bounds. A CSV line over GR__RPT_MAX_LINE bytes is skipped with file:line; each CSV file may
 * bring at most GR__RPT_MAX_SERIES_PER_FILE series (GPUs), a job GR__RPT_MAX_SERIES; a counters file at
 * most GR__RPT_MAX_COUNTERS_FILE bytes, a flight dump GR__RPT_MAX_FLIGHT_FILE. Numbers are finite and in a
 * plausible range per column, else taken as missing (with file:line). */
#define GR__RPT_MAX_LINE 65536
#define GR__RPT_MAX_LINE_STR "65536"
#define GR__RPT_MAX_SERIES_PER_FILE 64
#define GR__RPT_MAX_SERIES 8192
#define GR__RPT_MAX_COUNTERS_FILE (1u << 20)
#define GR__RPT_MAX_FLIGHT_FILE (16u << 20)
/* The SVG draws at most this many buckets per series and chart: each bucket's minimum and maximum
 * (an envelope), so that any job size gives a file a renderer opens. */
#define GR__RPT_SVG_BUCKETS 400

/* One CSV row's metrics; NAN where the column was empty. */
enum {
  GR__RPT_M_GPU_UTIL,
  GR__RPT_M_MEM_USED,
  GR__RPT_M_MEM_TOTAL,
  GR__RPT_M_TEMP,
  GR__RPT_M_POWER,
  GR__RPT_M_SM_CLOCK,
  GR__RPT_M_CPU_UTIL,
  GR__RPT_M_RSS,
  GR__RPT_M_RANK_SM,   /* shared GPU: this rank's process tree's SM share (NVML per-process) */
  GR__RPT_M_OTHERS_SM, /* shared GPU: everyone else's */
  GR__RPT_M_CPU_STEAL, /* the rank's cores' time the hypervisor gave to other guests, % */
  GR__RPT_M_COUNT
};

typedef struct {
  char node[128];
  int local_rank, rank;
  char gpu[32]; /* PCI bus id, or "-" for the CPU-only series */
  int n, cap;
  double *t; /* Unix seconds */
  double *m[GR__RPT_M_COUNT];
  unsigned long long throttle_any; /* OR of throttle reasons seen */
  double ecc_max;
  /* summary */
  double t_first, t_last;
  double util_mean, util_max, mem_peak, mem_total, temp_max, energy_j;
  double cpu_mean, cpu_max, rss_peak;
  double rank_sm_mean, others_sm_mean; /* NAN unless the GPU had per-process rows */
  double steal_mean, steal_max; /* cpu_steal over the samples with it (%); NAN without the column */
  double cpu_time_s; /* the program's CPU seconds at its last row (cpu_time_s), NAN without */
  double cpu_t0, cpu_s0, cpu_t1; /* the first row with cpu_time_s: time, value; the last's time */
  char state;                    /* the program's state letter at its last row, 0 without */
  int nstates, nstopped;         /* rows with a state letter; of them, stopped (T or t) */
} gr__rpt_series;

/* How a rank's program ended: its supervisor's end record (base/gr_end_record.h). */
enum { GR__RPT_END_EXIT, GR__RPT_END_SIGNAL, GR__RPT_END_UNSEEN };
typedef struct {
  char node[128];
  int local_rank, rank;
  int how;             /* GR__RPT_END_* */
  int code, sig, core; /* exit status; signal number and whether a core was dumped */
  char sig_name[16];   /* "KILL", from the record when it is plain capitals and digits, else "" */
  int time_limit;      /* 0 not reached, 1 its SIGTERM sent, 2 its SIGKILL too */
  double start, end, cpu_s; /* Unix s, Unix s, CPU s; NAN unknown */
} gr__rpt_end;

typedef struct {
  char node[128];
  int local_rank, rank;
  double coll_time_s, coll_wait_s, coll_bytes, coll_calls;
  double pool_steals, pool_idle_s;
  int have_coll, have_pool;
  char receipt[256]; /* gr_init's placement receipt when it differed from the plan, else "" */
  char priority[8];  /* gpurun --priority: "low", "normal", "high"; "" not recorded */
} gr__rpt_counters;

typedef struct {
  gr_array s;    /* gr__rpt_series, sorted by rank, node, local rank, GPU once loaded */
  gr_array c;    /* gr__rpt_counters, in the order the files were read */
  gr_array e;    /* gr__rpt_end, sorted by end time once loaded */
  double t0, t1; /* job span over all samples */
  int slowest;   /* index into s of the flagged series' rank, -1 none */
  int slowest_rank;
  const char *slowest_why;
  char slowest_why_buf[256]; /* slowest_why's text when it carries figures */
} gr__rpt_job;

/* Errors: a call that fails returns a gr_status and records one sentence with gr__fail_msg
 * (gr_error.h, the library's thread-local buffer; names and paths in it escaped for the
 * terminal); main() prints "gpurun-report: <sentence>" once. A file that is skipped (bad name,
 * unreadable, not JSON) or a bad line is a warning printed where it is found, not an error. */

/* An empty job: no series, no counters, no slowest rank. gr__rpt_load starts here, and so must a
 * job first given to gr__rpt_load_csv or gr__rpt_load_counters. */
void gr__rpt_job_init(gr__rpt_job *job);
/* Series I and counters I of the job; the caller keeps I below the count. */
#define GR__RPT_SERIES(job, i) GR_ARRAY_AT(&(job)->s, gr__rpt_series, i)
#define GR__RPT_COUNTERS(job, i) GR_ARRAY_AT(&(job)->c, gr__rpt_counters, i)
#define GR__RPT_END(job, i) GR_ARRAY_AT(&(job)->e, gr__rpt_end, i)
/* The counts: series at most GR__RPT_MAX_SERIES, counters one a file, so ints. */
static inline int gr__rpt_nseries(const gr__rpt_job *job) { return (int)job->s.count; }
static inline int gr__rpt_ncounters(const gr__rpt_job *job) { return (int)job->c.count; }
static inline int gr__rpt_nends(const gr__rpt_job *job) { return (int)job->e.count; }

/* Loads every *.csv, *.counters.json and *.end.json in dir: GR_OK, GR_ERR_SYSTEM when dir cannot
 * be read, GR_ERR_NOMEM. */
gr_status gr__rpt_load(const char *dir, gr__rpt_job *job);
/* Loads one CSV file (exposed for tests); GR_OK or GR_ERR_NOMEM. */
gr_status gr__rpt_load_csv(const char *path, gr__rpt_job *job);
gr_status gr__rpt_load_counters(const char *path, gr__rpt_job *job);
/* Loads one end record (exposed for tests); GR_OK (a bad file is skipped with a warning) or
 * GR_ERR_NOMEM. */
gr_status gr__rpt_load_end(const char *path, gr__rpt_job *job);
/* The counters of the rank a series belongs to, NULL when it wrote none. */
const gr__rpt_counters *gr__rpt_counters_for(const gr__rpt_job *job, const gr__rpt_series *s);
/* Whether two series belong to the same rank. */
int gr__rpt_same_rank(const gr__rpt_series *a, const gr__rpt_series *b);
/* Fills the summary fields and the slowest rank. */
void gr__rpt_summarize(gr__rpt_job *job);
void gr__rpt_free(gr__rpt_job *job);
/* Trapezoid integral of y(t) over the points where y is defined (NAN skipped). */
double gr__rpt_integrate(const double *t, const double *y, int n);

void gr__rpt_print_table(const gr__rpt_job *job, FILE *out);
/* Written whole or not at all (a temporary file renamed into place; a symlink or special file at
 * path is refused). check_dir: also refuse a directory that is not this user's or that others can
 * write (the default outputs inside a job directory). GR_OK; GR_ERR_SYSTEM ("cannot write PATH:
 * reason") or GR_ERR_NOMEM with the sentence recorded. */
gr_status gr__rpt_write_json(const gr__rpt_job *job, const char *path, const char *flight_json,
                             const char *wait_json, int check_dir);
gr_status gr__rpt_write_svg(const gr__rpt_job *job, const char *path, int check_dir);

/* Reads flight.<rank>.json in dir; writes a human summary to out, a JSON array (malloc'd) of
 * per-communicator findings to *json (NULL when there are no dumps) and, when wait_json is not
 * NULL, the wait-for analysis to *wait_json: {"edges": [{"rank", "op", "comm", "seq",
 * "waits_for": [world ranks, -1 unnamed]}], "ends": [{"rank", "why", "dump"}]} or null when no
 * rank waits. Each waiting rank's chain is followed (point-to-point peer, or the members that have
 * not entered the collective) to its end: a rank that left no dump, one in no call, or a cycle.
 * The number of dumps read goes to *ndumps. GR_OK; GR_ERR_INVALID for a dump that does not parse
 * or names no valid rank, GR_ERR_SYSTEM when dir cannot be opened, GR_ERR_NOMEM (sentence recorded,
 * nothing written to out). */
gr_status gr__rpt_flight(const char *dir, FILE *out, char **json, char **wait_json, int *ndumps);

/* The MPI layer's call statistics (mpistats.<rank>.json, base/gr_mpistats_format.h), joined per
 * communicator (stragglers.c): how often each rank arrives last at a blocking collective and by
 * how much, and whom the others waited for. */
typedef struct gr__rpt_arrivals gr__rpt_arrivals;

/* Reads every mpistats file in dir (those that do not parse are skipped with a warning on
 * stderr) and analyses each communicator. *out: NULL on failure (free with
 * gr__rpt_arrivals_free). GR_OK, or the directory's error. */
gr_status gr__rpt_arrivals_load(const char *dir, gr__rpt_arrivals **out);

/* 1 when the statistics cover the world communicator (2 ranks or more), with *rank the world
 * rank the others waited for there, -1 when no rank stands out, and *most (when not NULL) the
 * rank they waited for most, by a tenth or more of the others' median, even when it does not
 * stand out, -1 when none; 0 without them. */
int gr__rpt_arrivals_world(const gr__rpt_arrivals *a, int *rank, int *most);

/* Each communicator's table and verdicts ("Arrivals at the collectives of ..."); on the world,
 * what job's samples saw on the rank the others waited for (gr__rpt_print_why; job may be
 * NULL). */
void gr__rpt_arrivals_print(const gr__rpt_arrivals *a, const gr__rpt_job *job, FILE *out);
void gr__rpt_arrivals_free(gr__rpt_arrivals *a);

/* What the monitor saw on rank, the one the others waited for (its program's share of the wall
 * time on a CPU against the others', samples that found it stopped, its cores' busy share, the
 * share of their time the hypervisor took (steal) where it stands out, its GPU's throttling and
 * co-tenants), as a line "  on rank R: ...", then the other ranks its samples found stopped; with
 * rank -1 (no rank named) only those (why.c). Nothing printed without samples. */
void gr__rpt_print_why(const gr__rpt_job *job, int rank, FILE *out);

/* The rank the monitor's samples single out, -1 none (why.c): the one rank found stopped in at
 * least a tenth of its samples and twice as often as any other, else the one whose program ran on
 * a CPU for at most two thirds of the others' median share. *why: a static phrase with its
 * evidence written into buf. */
int gr__rpt_monitor_suspect(const gr__rpt_job *job, char *buf, size_t cap);

/* The rank whose program ran on a CPU for the least share of the wall time (its CPU time over
 * the time between its first and last samples), with that share and the median of the others';
 * -1 with fewer than two ranks sampled (why.c). */
int gr__rpt_monitor_least_cpu(const gr__rpt_job *job, double *mine, double *median);

/* The slowest rank where the MPI layer's statistics cover the world (gr__rpt_arrivals_world),
 * replacing the guess from the CSVs and counters: the rank the others waited for when it stands
 * out; else the monitor's suspect (gr__rpt_monitor_suspect), said with its evidence and whether
 * it is also the one waited for most; else the one waited for most (most: by a tenth at least)
 * when its program also ran on a CPU for less of the wall time than the others' median, two
 * weak signals from independent sources agreeing; else none, said so. */
void gr__rpt_set_slowest_from_mpi(gr__rpt_job *job, int rank, int most);

#endif
