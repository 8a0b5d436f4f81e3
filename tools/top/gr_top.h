/* gpurun-top: a live view of a running job from its job directory (the ranks' live.<rank> files
 * and the supervisor's <node>.<local_rank>.csv samples). job.c loads and analyses, view.c draws,
 * main.c runs the terminal. */
#ifndef GR_TOP_H
#define GR_TOP_H

#include "gr_array.h"
#include "gr_clock.h"
#include "gr_live_file.h"
#include "gr_parse.h"

#include <stdio.h>

#define GR__TOP_MAX_GPUS 8
#define GR__TOP_MAX_RANK (1 << 20) /* rank numbers above this in a file are ignored */

typedef struct {
  char pci[32];
  double util, mem_used_mib, mem_total_mib, temp_c, power_w; /* < 0: unknown */
  long long throttle;                                        /* -1 unknown */
  double rank_sm, others_sm; /* the rank's and everyone else's SM share; < 0 unknown */
} gr__top_gpu;

/* The MPI layer's per-peer waits of one rank (its live file's mpi_waited line, see
 * observe/gr_live.h): seconds blocked on each peer's sends and receives since the rank started,
 * the largest first. n 0: no line, or one that does not parse. */
#define GR__TOP_MAX_WAITED 8
typedef struct {
  int n;
  int peer[GR__TOP_MAX_WAITED];
  double s[GR__TOP_MAX_WAITED];
} gr__top_waited;

/* The late line's window: per-peer waits are compared with the frame about this many seconds
 * older (by the ranks' file times); the first frame compares with the start. */
#define GR__TOP_LATE_WINDOW 10.0
#define GR__TOP_LATE_HIST 16 /* frames kept for the window, at least a tenth of it apart */

/* One frame's per-peer waits: a row per rank that had them, in rank order. */
typedef struct {
  int rank;
  double time; /* the rank's file time */
  gr__top_waited w;
} gr__top_wrow;
typedef struct {
  double time; /* the newest file time among its rows */
  size_t n;
  gr__top_wrow *rows;
} gr__top_wframe;

typedef struct {
  int rank;
  int have_live, have_csv;
  gr__top_waited waited; /* from the live file's mpi_waited line */
  gr__live live;
  double age_s;    /* now - live.time */
  char proc_state; /* same host: /proc/<pid>/stat state (R, S, D, T, Z...), 'X' gone, 0 unknown */
  char host[GR_LIVE_HOST_BYTES];
  int local_rank;
  int ngpus;
  gr__top_gpu gpu[GR__TOP_MAX_GPUS];
  double cpu_pct, rss_mib; /* from the CSV when present, else from the live file; < 0 unknown */
  int blocker;             /* 1: the rank the others wait for */
} gr__top_rank;

typedef struct {
  char dir[1024], job[256];
  double now;     /* wall clock of the load */
  double hang_s;  /* waits at least this long count as a hang */
  gr_array r;     /* gr__top_rank: the ranks present (sorted by rank) */
  gr_array index; /* int: rank -> row in r, -1 none; a rank at or past its count has none */
  int world;      /* the job's size as the files say (max of size fields, ranks seen) */
  int nlive;
  char verdict[1024]; /* "" when nobody waits long; else who waits for whom */
  char late[256]; /* "" unless one rank spends clearly less time waiting in MPI (the late one) */
  int nhist;      /* earlier frames' per-peer waits, oldest first (the late line's window) */
  gr__top_wframe hist[GR__TOP_LATE_HIST];
} gr__top_job;

/* An empty job: no ranks, dir and job "". Every job starts here before gr__top_load. */
void gr__top_job_init(gr__top_job *job);
/* Row I of the job, I below gr__top_nranks(job). */
#define GR__TOP_ROW(job, i) GR_ARRAY_AT(&(job)->r, gr__top_rank, i)
/* The rows present; at most GR__TOP_MAX_RANK + 1, so an int. */
static inline int gr__top_nranks(const gr__top_job *job) { return (int)job->r.count; }

/* Resolve DIR to a job directory: DIR itself when it holds live.* or *.csv files, else its newest
 * subdirectory that does. 0, or -1 with a sentence in err. */
int gr__top_find_job(const char *dir, char *out, size_t cap, char *err, size_t errlen);
/* (Re)load every rank's state from job->dir and analyse it. 0, or -1 when the directory cannot be
 * read. */
int gr__top_load(gr__top_job *job);
void gr__top_free(gr__top_job *job);
/* Fill job->verdict and each rank's blocker flag from the loaded state (called by gr__top_load). */
void gr__top_analyse(gr__top_job *job);

/* Parse the mpi_waited line of a live file's text (len bytes, need not be terminated) of the
 * given rank into out: "mpi_waited R:S,R:S,..." with at most GR__TOP_MAX_WAITED items, R a rank
 * other than rank, no rank twice, S finite seconds in [0, 1e12). A line that breaks any of these
 * counts as absent (out->n 0): the file may be hostile. 0 when a line was taken, else -1. */
int gr__top_parse_waited(const char *text, size_t len, int rank, gr__top_waited *out);

/* Render one frame into f: header, verdict, column titles, then rows first..first+max_rows-1
 * (max_rows < 0: all). width: cut lines to this many columns (0: no cut). Returns the number of
 * table rows (for scrolling). */
int gr__top_render(FILE *f, const gr__top_job *job, int first, int max_rows, int width,
                   double interval);
/* Number of table rows the job draws (one per GPU of each rank, at least one per rank). */
int gr__top_rows(const gr__top_job *job);

#endif
