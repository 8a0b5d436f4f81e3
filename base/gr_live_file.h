/* Internal: the live-state file a rank publishes while it runs (observe/live.c writes it,
 * gpurun-top and the supervisor's Prometheus output read it).
 *
 * <GPURUN_MONITOR_DIR>/<job>/live.<world_rank>, replaced atomically (temp file + rename) every
 * GPURUN_LIVE_INTERVAL seconds (default 0.25) from the first communicator creation on, whether or
 * not anything changed: the file's time and beat are the rank's heartbeat (a rank whose file goes
 * silent for several intervals has stopped or died). Text, one "key value" per line, unknown keys
 * ignored (version 2; a reader takes version 1 files too, whose comm lines end at BUSY_S):
 *   gpurun-live 2
 *   rank 3 | size 4 | host n01 | pid 1234 | state running|exited
 *   time 1764500000.123        (seconds since the epoch, when written)
 *   beat 57                    (writes so far: one more every interval)
 *   interval 0.25 | cpu_pct 99.5 (busy share of one core since the last write) | rss_kib 12345
 *   mpi_s 12.5 | mpi_coll_s 3.25 | mpi_inside_since 1764500000.1 (written by the MPI layer only:
 *        seconds inside the MPI calls it records, all threads summed, a non-blocking call's start
 *        counted but not its request's life; of them inside blocking collectives, MPI_Barrier to
 *        MPI_Exscan; when the longest call a thread is inside now began, 0 when none)
 *   mpi_waited R:S,R:S,... (written by the MPI layer only: seconds this rank spent blocked in
 *        point-to-point waiting for world rank R, summed over its communicators, the 8 largest
 *        first; gpurun-top's parser is tools/top's, strict: a bad line counts as absent)
 *   comm ID RANK SIZE BACKEND SEQ OP COUNT STATE START END CALLS BUSY_S NAME WAITS
 *        (one line per communicator: its latest call; ID job-unique (agreed at creation), NAME
 *         the human name; OP "-" before the first; STATE running|done|failed|timeout; END 0 while
 *         running; BUSY_S seconds inside finished calls; WAITS the unfinished sends and receives,
 *         "-" or up to GR_LIVE_MAX_WAITS of "rPEER:TAG" (receive) / "sPEER:TAG" (send) joined by
 *         ',', PEER the partner's rank in the communicator, newest first)
 *   creating CALL STEP OVER RANK SIZE START   (a communicator creation in progress)
 * The file may come from another job or user: the parser bounds every field and keeps strings to
 * [A-Za-z0-9._:-] (anything else becomes '?'), so they are safe to print on a terminal. */
#ifndef GR_LIVE_FILE_H
#define GR_LIVE_FILE_H

#include "gr_flight_format.h"

#include <stddef.h>

#define GR_LIVE_MAX_COMMS 16
#define GR_LIVE_MAX_CREATING 4
#define GR_LIVE_MAX_WAITS 8
#define GR_LIVE_MAGIC "gpurun-live 2"
#define GR_LIVE_MAGIC_V1 "gpurun-live 1" /* still read */

/* "creating" lines: the calls and the steps of a communicator creation (docs/formats.md). */
#define GR_LIVE_CALL_CREATE "gr_comm_create"
#define GR_LIVE_CALL_SPLIT "gr_comm_split"
#define GR_LIVE_OVER_WORLD GR_FL_WORLD /* the world communicator's id */
#define GR_LIVE_OVER_MPI "mpi"
#define GR_LIVE_STEP_DUP "dup"       /* MPI_Comm_dup of the given communicator */
#define GR_LIVE_STEP_SPLIT "split"   /* MPI_Comm_split of the parent */
#define GR_LIVE_STEP_AGREE "agree"   /* agreement of the settings (timeout, check, backend) */
#define GR_LIVE_STEP_SETUP "setup"   /* check-mode duplicate, job id, flight recorder */
#define GR_LIVE_STEP_INIT "init"     /* the backend's set-up, before a finer step says more */
#define GR_LIVE_STEP_SHM "shm"       /* the node's shared-memory segment */
#define GR_LIVE_STEP_HIER "hier"     /* the node-leader hierarchy */
#define GR_LIVE_STEP_NCCL "nccl"     /* NCCL bootstrap and init (or split) */
#define GR_LIVE_STEP_REQDUP "reqdup" /* the duplicate for request verdicts */

typedef struct {
  char recv; /* 1: a receive, 0: a send */
  int peer, tag;
} gr__live_wait;

typedef struct {
  char id[32], name[40], backend[8], op[20], state[12]; /* name = id in a version-1 file */
  int rank, size;
  unsigned long long seq, count, calls;
  double start, end, busy_s;
  int nwaits;
  gr__live_wait waits[GR_LIVE_MAX_WAITS];
} gr__live_comm;

typedef struct {
  char call[16], step[12], over[32];
  int rank, size;
  double start;
} gr__live_creating;

/* A host name and its NUL: Linux allows 64 bytes (HOST_NAME_MAX), and gpurun-top compares the
 * whole name with its own to read a rank's process state. */
#define GR_LIVE_HOST_BYTES 65

typedef struct {
  int rank, size; /* -1 when absent */
  long pid;       /* 0 when absent */
  char host[GR_LIVE_HOST_BYTES], state[12];
  double time, interval, cpu_pct; /* cpu_pct -1 when absent */
  long long beat;                 /* -1 when absent (version 1) */
  long long rss_kib;              /* -1 when absent */
  int has_mpi;                    /* 1 when the three mpi_ lines were there (the MPI layer's) */
  double mpi_s, mpi_coll_s, mpi_inside_since; /* mpi_inside_since 0: outside a call */
  int ncomms;
  gr__live_comm comm[GR_LIVE_MAX_COMMS];
  int ncreating;
  gr__live_creating creating[GR_LIVE_MAX_CREATING];
} gr__live;

/* Parses len bytes of text (need not be NUL-terminated). 0 on success, -1 when it is not a
 * version-1 or -2 live file or names no rank. */
int gr__live_parse(const char *text, size_t len, gr__live *out);

/* Copies src into dst (cap bytes, always terminated), every byte outside [A-Za-z0-9._:-] as '?'. */
void gr__live_clean(char *dst, size_t cap, const char *src, size_t srclen);

#endif
