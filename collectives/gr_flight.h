/* Internal: the flight recorder (file keys: gr_flight_format.h, docs/formats.md). Each
 * communicator keeps its last GR__FLIGHT_N calls; the records
 * of every communicator of the process are written as one JSON file,
 *   $GPURUN_MONITOR_DIR/<job>/flight.<world_rank>.json   (directory default ./gpurun-monitor)
 * on a timeout, on SIGUSR1 (only when GPURUN_FLIGHT=1 or GPURUN_LOG=debug installed the handler)
 * and at exit under GPURUN_LOG=debug. gpurun-report reads these files; the schema is fixed:
 * {"rank", "size", "node", "reason": "timeout|signal|exit",
 *  "comms": [{"id", "name", "rank", "size", "backend",
 *             "calls": [{"seq", "op", "count", "dtype", "root", "peer", "tag" (send/recv only),
 *                        "start", "end" (null while unfinished), "cseq",
 *                        "state": "running|done|failed|timeout"}]}]}
 * seq numbers every call of this rank on the communicator; cseq only its collectives (null for
 * send/recv), so that the same cseq is the same collective on every member; peer is the
 * send/recv partner's rank in the communicator and tag its MPI tag; id is job-unique (agreed at
 * creation, coll.c), name the human one ("world", "split-1:0"). The file is written through
 * gr_safefile.h and its strings through gr__esc_json.
 * The signal handler only sets a flag; the dump happens at the next collective call or inside a
 * call's wait loop (where a hung rank sits), never in the handler. */
#ifndef GR_FLIGHT_H
#define GR_FLIGHT_H

#include "gr_flight_format.h"
#include "gr_live_file.h" /* GR_LIVE_MAX_WAITS */

#include <gpurun/status.h>
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#define GR__FLIGHT_N 64

typedef enum { GR__FL_RUNNING, GR__FL_DONE, GR__FL_FAILED, GR__FL_TIMEOUT } gr__flight_state;
typedef struct gr__flight gr__flight;

/* Once, from gr__observe_start (gr_observe.h) with the job id the dumps file under: read
 * GPURUN_FLIGHT/GPURUN_LOG, install the SIGUSR1 handler and the exit dump if asked. */
void gr__flight_arm(const char *job);

gr__flight *gr__flight_new(const char *id, int rank, int size, const char *backend);
/* Unregister and free, or keep it for the exit dump when that is on. */
void gr__flight_release(gr__flight *f);
/* The communicator's human name (gr_flight_format.h, GR_FL_COMM_NAME); the id until set. */
void gr__flight_name(gr__flight *f, const char *name);
/* peer and tag: a send's or receive's partner (rank in the communicator) and MPI tag, else -1. */
int gr__flight_begin(gr__flight *f, uint64_t seq, int kind, size_t count, int dtype, int root,
                     int peer, int tag, double start);
void gr__flight_end(gr__flight *f, int slot, uint64_t seq, gr__flight_state st, double end);

/* Dump now if SIGUSR1 arrived since the last look (cheap: one load when it did not). */
void gr__flight_poll(void);
/* The live state's view (collectives/live.c): each communicator's latest call. */
typedef struct {
  char id[32], name[32], backend[8];
  int rank, size;
  uint64_t seq, calls; /* the latest call's number; calls made on it so far (0: none yet) */
  const char *op;      /* static name; NULL when no call yet */
  size_t count;
  double start, end; /* seconds since the epoch; end 0 while running */
  gr__flight_state state;
  double busy_s; /* seconds inside finished calls */
  int nwaits;    /* unfinished sends and receives, newest first (GR_LIVE_MAX_WAITS at most) */
  struct {
    int recv, peer, tag; /* recv 1: a receive; peer: rank in the communicator */
  } waits[GR_LIVE_MAX_WAITS];
} gr__flight_now;
/* Copies up to max communicators' latest calls into out (creation order); returns how many. */
int gr__flight_latest(gr__flight_now *out, int max);

/* Write the file: GR_OK and the path written, or the sentence recorded ("flight recorder: out of
 * memory", "flight recorder: not written: ..."): the caller warns with it. */
gr_status gr__flight_dump(const char *reason, char *path, size_t path_len);

#endif
