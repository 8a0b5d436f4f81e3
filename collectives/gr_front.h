/* What the files of the collectives front end share (calls.c, validate.c, run.c, refuse.c,
 * fused.c, request.c, group.c, sequencer.c): nothing outside the front end includes it. */
#ifndef GR_FRONT_H
#define GR_FRONT_H

#include "gr_coll.h"
#include "gr_flight.h"
#include "gr_path.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Whether a call of kind k involves every rank of its communicator (not point to point). */
static inline int is_collective(gr__kind k) { return k != GR__SEND && k != GR__RECV; }

/* How a refusal reaches the other ranks without check mode (gr__refusal_route, refuse.c). */
enum { ROUTE_NONE, ROUTE_CALL, ROUTE_AGREE, ROUTE_VERDICT /* ROUTE_AGREE, never in band */ };

/* The call as the user made it (what records, counters and sentences show). */
static inline const gr__call *shown(const gr__call *k) { return k->fe_shown ? k->fe_shown : k; }
static inline size_t shown_count(const gr__call *k) { return shown(k)->count; }

#define CALL_INIT(kind_, comm_)                                                                    \
  { .kind = (kind_), .comm = (comm_), .root = -1, .flight_slot = -1 }

/* ---- argument checks and check mode (validate.c) --------------------------------------------- */

/* kind GR__NKINDS: the summary of one rank's group on one communicator (count = number of
 * collectives, hash over their fingerprints in order, bad = any of its calls refused). */
#define KIND_GROUP GR__NKINDS
typedef struct {
  uint64_t seq, count, hash;
  int32_t kind, dtype, op, root, inplace, bad;
} fingerprint;

/* One exchange in flight: everybody's fingerprints, then this rank's at all[size] (on the heap:
 * after a timeout MPI may still read or write them, so they are abandoned, not freed). */
typedef struct {
  fingerprint *all;
  MPI_Request req;
  int rc;
} exchange;

gr_status gr__validate(const char *fn, gr__call *k);
int32_t gr__inplace_form(const gr__call *k);
fingerprint gr__fingerprint_of(const gr__call *k, gr_status bad);
uint64_t gr__fnv(uint64_t h, uint64_t x);
gr_status gr__exchange_post(const char *fn, gr_comm *c, exchange *x, fingerprint f);
gr_status gr__exchange_verdict(const char *fn, gr_comm *c, exchange *x, gr_status bad);
gr_status gr__exchange_fingerprint(const char *fn, gr__call *k, gr_status bad);

/* ---- execution (run.c: records, counters, sentences; the blocking path is the sequencer's) ---- */

/* How a path words its outcomes (the sentences each path has always given). */
typedef struct {
  const char *fn;
  const char *timeout_what; /* "" (a call, a request) or "grouped" */
  int name_backend;         /* failure sentences name the backend (single calls and requests) */
  int backend_timeout;      /* a backend's own GR_ERR_TIMEOUT is this call's timeout (blocking) */
} loop_style;

/* MPI requests given up on (comm_wait.c, "MPI requests given up on"): a request a timed-out call
 * leaves running is handed over with the private buffers it writes (*req becomes MPI_REQUEST_NULL;
 * the buffers are freed once it completed, never while it may write them); gr__mpi_lost says
 * whether some of c's still run (then its MPI objects must not be freed: keep hands a communicator
 * or an op over, to be freed once they completed, 0 when it could not be kept); gr__mpi_lost_seal
 * hands c's lost requests to its kept record as c's record is freed (gr__comm_free); gr__mpi_reap
 * tests them and frees what nothing uses any more (every destroy, and MPI_Finalize through
 * MPI_COMM_SELF). */
void gr__mpi_abandon(gr_comm *c, MPI_Request *req, void *buf0, void *buf1);
int gr__mpi_lost(const gr_comm *c);
int gr__mpi_keep_comm(const gr_comm *c, MPI_Comm *m);
int gr__mpi_keep_op(const gr_comm *c, MPI_Op *op);
void gr__mpi_lost_seal(const gr_comm *c);
void gr__mpi_reap(void);
/* The sweep a gr__mpi_wait runs every 16th turn (comm_wait.c): the request registry's, handed
 * over by the life cycle (coll.c) as it builds a communicator, so that the wait, below every other
 * file, calls none of them by name. */
void gr__mpi_wait_sweep(void (*sweep)(void));
void gr__begin(gr__call *k);
void gr__end_share(gr__call *k, gr__flight_state fs, double t0, double share);
gr_status gr__timed_out(const char *fn, gr__call *k, const char *what);
/* The sequencer's (sequencer.c): a call's outcome st (from post or test) recorded (flight
 * recorder, counters) and, with say, worded (without, only counted: an earlier sentence stands);
 * and the blocking path, k posted from the caller's stack and driven to its end (checked: an inner
 * run, the in-band form or a refusal, after the outer call's checks). */
gr_status gr__settle(const loop_style *y, gr__call *k, gr_status st, double t0, double share,
                     int say);
gr_status gr__run_one(const char *fn, gr__call *k, int checked);
/* Also the sequencer's, since they run a call (refuse.c keeps only the arithmetic): k in its
 * in-band form (gr__inband; arg: this rank's refusal, its buffers then untouched), and the
 * refusing rank's part in a call it refused (bad, k->fe_refused) on the route given: the
 * agreement, the in-band form or, carried (ROUTE_CALL), the call posted without data; then bad
 * with this rank's own sentence, or the timeout. */
gr_status gr__run_inband(const char *fn, gr__call *k, int arg);
gr_status gr__join_refused(const char *fn, gr__call *k, gr_status bad, int route);

/* ---- refusals without check mode (refuse.c) -------------------------------------------------- */

/* A call that a rank refuses locally (gr__validate) is still collective: the refusing rank joins
 * the call's exchange and every rank fails it, naming that rank and the argument, so that nobody is
 * left inside the call. How the refusal travels is the path's (gr_path.h, gr__path_refusal: the
 * first of the communicator's paths serving the kind, from what every rank knows alike):
 *   ROUTE_CALL   carried with the call (GR__REFUSAL_CARRIED): in the shared-memory descriptor,
 *                where every rank checks every peer's before touching data, or, on a backend with
 *                GR__CAP_VERDICT_IN_FRONT (NCCL), as the verdict the sequencer posts in front of
 *                the call over c->side_mpi and waits for before the backend's post
 *                (gr__seq_carried_verdict); the refusing rank joins with the call without data
 *                (the descriptor) or with its verdict alone (nothing reaches the backend);
 *   ROUTE_AGREE  agreed before (GR__REFUSAL_AGREED): every rank first agrees on a verdict (one
 *                4-byte MPI_Iallreduce, MAX, bounded by the timeout), or carries it in band
 *                (gr__inband): the MPI algorithms, and groups;
 *   ROUTE_NONE   nothing is exchanged: check mode (its fingerprint exchange does it), one rank,
 *                point-to-point and the barrier (nothing to refuse). */
static inline int gr__refusal_route(const gr__call *k) {
  const gr_comm *c = k->comm;
  if (c->check || c->size < 2 || !is_collective(k->kind) || k->kind == GR__BARRIER ||
      !(c->ops->caps & GR__CAP_JOIN_REFUSALS))
    return ROUTE_NONE;
  switch (gr__path_refusal(c, k->kind)) {
  case GR__REFUSAL_CARRIED:
    return ROUTE_CALL;
  case GR__REFUSAL_AGREED:
    return ROUTE_AGREE;
  default:
    return ROUTE_NONE;
  }
}
void gr__own_sentence(char *buf, size_t len, const char *fn);
int gr__verdict_word(const gr_comm *c, int arg);
gr_status gr__verdict_fail(const char *fn, const gr_comm *c, int all, const char *what);
gr_status gr__agree_call(const char *fn, gr__call *k, int arg);
int gr__inband(const gr__call *k);
size_t gr__inband_bytes(const gr__call *k);
void gr__inband_pack(const gr__call *k, int arg, unsigned char *p, gr__call *j);
int gr__inband_clear(const gr__call *j);

/* ---- non-blocking requests (request.c: a thin handle over the sequencer) --------------------- */

gr_status gr__request_start(const char *fn, gr__call *k, gr_request **out);
/* A fused allreduce's request (gr_iallreduce_multi): the packed buffer its call runs on and where
 * the pieces go once it is done; one allocation, owned by the request from its start on. */
typedef struct {
  size_t nbufs, es;
  void **recv;         /* nbufs pointers */
  size_t *counts;      /* nbufs counts */
  unsigned char *pack; /* the call's send and recv */
} gr__fused;
/* The fused call's pieces of es bytes per element, one after the other in pack: gathered from
 * send (gr__fused_pack) and scattered back to recv (gr__fused_unpack). */
static inline void gr__fused_pack(unsigned char *pack, const void *const *send,
                                  const size_t *counts, size_t nbufs, size_t es) {
  for (size_t i = 0, off = 0; i < nbufs; off += counts[i++] * es)
    if (counts[i]) memcpy(pack + off, send[i], counts[i] * es);
}
static inline void gr__fused_unpack(void *const *recv, const unsigned char *pack,
                                    const size_t *counts, size_t nbufs, size_t es) {
  for (size_t i = 0, off = 0; i < nbufs; off += counts[i++] * es)
    if (counts[i]) memcpy(recv[i], pack + off, counts[i] * es);
}
/* gr__request_start for a fused call: k runs on m->pack; bad (GR_OK, or this rank's refusal of
 * the buffers, its sentence recorded and k->fe_refused set) makes it a refusal. m is freed or
 * handed to the request on every path; the request copies the pieces out when it succeeds. */
gr_status gr__request_start_fused(const char *fn, gr__call *k, gr_status bad, gr__fused *m,
                                  gr_request **out);

/* ---- groups (group.c) ------------------------------------------------------------------------ */

/* How deep this thread is inside gr_group_start/gr_group_end (0: not in a group). */
extern _Thread_local int gr__group_depth_now; /* group.c's; read through gr__group_depth */
static inline int gr__group_depth(void) { return gr__group_depth_now; }
/* Queue a copy of k for this thread's gr_group_end. */
gr_status gr__group_queue(const char *fn, const gr__call *k);

/* The sequencer: the ordered queue, the phases, the drive loop and the registry. */
#include "gr_sequencer.h"

#endif
