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
 * send/recv and the MPI layer's waits), so that the same cseq is the same collective on every member; peer is the
 * send/recv partner's rank in the communicator and tag its MPI tag; id is job-unique (agreed at
 * creation, coll.c), name the human one ("world", "split-1:0"). The file is written through
 * gr_safefile.h and its strings through gr__esc_json.
 * The signal handler only sets a flag; the dump happens at the next collective call or inside a
 * call's wait loop (where a hung rank sits), never in the handler. */
#ifndef GR_FLIGHT_H
#define GR_FLIGHT_H

#include "gr_flight_format.h"
#include "gr_op_names.h" /* the kinds of record */
#include "gr_list.h"
#include "gr_live_file.h" /* GR_LIVE_MAX_WAITS */

#include <gpurun/status.h>
#include <mpi.h>
#include <signal.h>
#include <stdatomic.h>
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
/* gr__flight_begin(f, seq, kind, count, dtype, root, peer, tag, start) -> slot and
 * gr__flight_end(f, slot, seq, state, end): inline, below. peer and tag: a send's or receive's
 * partner (rank in the communicator) and MPI tag, else -1. */

/* Dump now if SIGUSR1 arrived since the last look (inline: one load when it did not). */
extern volatile sig_atomic_t gr__flight_sig_pending; /* set by the handler (flight.c) */
void gr__flight_poll_signal(void);
static inline void gr__flight_poll(void) {
  if (gr__flight_sig_pending) gr__flight_poll_signal();
}
/* The live state's view (observe/live.c): each communicator's latest call. */
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

/* ---- recording: inline, no lock --------------------------------------------------------------
 * A recorder is written by the calls of its communicator (one thread at a time, but a request's
 * end may be recorded on another thread than its begin) and read by gr__flight_latest (the live
 * publisher's thread) and gr__flight_dump (a timeout, the signal, the exit) without stopping the
 * writers. A begin takes the next record number with one atomic increment (f->n); record i lives
 * in slot i % GR__FLIGHT_N. Each slot is a seqlock: its word ver is odd while a writer is inside,
 * and idx says which record (i + 1; 0: none yet) it holds. The writers of one slot (a begin, and
 * the end of the call GR__FLIGHT_N records before it or a concurrent begin that wrapped) exclude
 * each other through ver; a reader copies the slot and keeps the copy when ver was even and
 * unchanged around it and idx is the record it wants (flight.c). Every field is an atomic word,
 * accessed relaxed inside the seqlock, so a reader's copy is never a data race. busy_s is summed
 * by concurrent ends with a compare-and-swap. */
typedef struct {
  _Atomic uint64_t ver; /* odd while written */
  _Atomic uint64_t idx; /* record number + 1 held here; 0: none */
  _Atomic uint64_t seq;
  _Atomic uint64_t cseq; /* the communicator's collective number (the same on all); 0: p2p */
  _Atomic uint64_t count;
  _Atomic int kind, dtype, root, peer, tag; /* peer, tag: point to point only (else -1) */
  _Atomic int state;                        /* gr__flight_state */
  _Atomic double start, end;
} gr__flight_slot;

struct gr__flight {
  char id[32], name[32]; /* name: under the registry's mutex (flight.c) */
  int rank, size;
  const char *backend;
  _Atomic uint64_t n;     /* records begun so far; record n is the next */
  _Atomic uint64_t ncoll; /* collective calls begun so far */
  _Atomic double busy_s;  /* seconds inside finished calls (the live state's running total) */
  gr__flight_slot ring[GR__FLIGHT_N];
  gr_list_node node; /* in the registry (flight.c) */
};

/* The slot's writer side: ver from even v to v + 1 (returns v), then to v + 2. A slot found busy
 * waits out of line (flight.c): only a writer of the same slot can hold it, for a few stores. */
uint64_t gr__flight_slot_wait(gr__flight_slot *s);
static inline uint64_t gr__flight_slot_enter(gr__flight_slot *s) {
  uint64_t v = atomic_load_explicit(&s->ver, memory_order_relaxed);
  if ((v & 1) || !atomic_compare_exchange_strong_explicit(&s->ver, &v, v + 1, memory_order_acquire,
                                                          memory_order_relaxed))
    v = gr__flight_slot_wait(s);
  /* the odd word before any field store, for a reader that sees one of them */
  atomic_thread_fence(memory_order_release);
  return v;
}
static inline void gr__flight_slot_leave(gr__flight_slot *s, uint64_t v) {
  atomic_store_explicit(&s->ver, v + 2, memory_order_release);
}

static inline int gr__flight_begin(gr__flight *f, uint64_t seq, int kind, size_t count, int dtype,
                                   int root, int peer, int tag, double start) {
  if (!f) return -1;
  uint64_t i = atomic_fetch_add_explicit(&f->n, 1, memory_order_relaxed);
  int p2p = gr__kind_is_p2p(kind);
  uint64_t cseq = gr__kind_is_collective(kind)
                      ? atomic_fetch_add_explicit(&f->ncoll, 1, memory_order_relaxed) + 1
                      : 0;
  int slot = (int)(i % GR__FLIGHT_N);
  gr__flight_slot *s = &f->ring[slot];
  uint64_t v = gr__flight_slot_enter(s);
  atomic_store_explicit(&s->idx, i + 1, memory_order_relaxed);
  atomic_store_explicit(&s->seq, seq, memory_order_relaxed);
  atomic_store_explicit(&s->cseq, cseq, memory_order_relaxed);
  atomic_store_explicit(&s->count, (uint64_t)count, memory_order_relaxed);
  atomic_store_explicit(&s->kind, kind, memory_order_relaxed);
  atomic_store_explicit(&s->dtype, dtype, memory_order_relaxed);
  atomic_store_explicit(&s->root, root, memory_order_relaxed);
  atomic_store_explicit(&s->peer, peer, memory_order_relaxed);
  atomic_store_explicit(&s->tag, p2p ? tag : -1, memory_order_relaxed);
  atomic_store_explicit(&s->state, (int)GR__FL_RUNNING, memory_order_relaxed);
  atomic_store_explicit(&s->start, start, memory_order_relaxed);
  atomic_store_explicit(&s->end, 0.0, memory_order_relaxed);
  gr__flight_slot_leave(s, v);
  return slot;
}

/* 1 when recorded, 0 when a newer call has taken the slot meanwhile (or no recorder). */
static inline int gr__flight_end(gr__flight *f, int slot, uint64_t seq, gr__flight_state st,
                                 double end) {
  if (!f || slot < 0) return 0;
  gr__flight_slot *s = &f->ring[slot];
  uint64_t v = gr__flight_slot_enter(s);
  double busy = 0.0;
  int mine = atomic_load_explicit(&s->seq, memory_order_relaxed) == seq;
  if (mine) {
    atomic_store_explicit(&s->state, (int)st, memory_order_relaxed);
    atomic_store_explicit(&s->end, end, memory_order_relaxed);
    double start = atomic_load_explicit(&s->start, memory_order_relaxed);
    if (end > start) busy = end - start;
  }
  gr__flight_slot_leave(s, v);
  if (busy > 0.0) {
    double b = atomic_load_explicit(&f->busy_s, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(&f->busy_s, &b, b + busy, memory_order_relaxed,
                                                  memory_order_relaxed)) {
    }
  }
  return mine;
}

#endif
