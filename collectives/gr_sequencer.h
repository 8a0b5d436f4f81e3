/* The sequencer (sequencer.c, issue 40): per communicator the one ordered queue of calls, the
 * phases a call moves through and the one drive loop that moves them. Private to the front end
 * (gr_front.h includes it; nothing outside collectives/ but the tests does).
 *
 * A call's phases, in order (a request shows them, gr__seq_phase_of; a blocking call passes them
 * inside one gr__run_one and a grouped one inside gr_group_end):
 *   VERDICT  the 4-byte verdict its row's refusal route needs (ROUTE_AGREE, deferred form, and
 *            ROUTE_CALL on NCCL, gr__seq_carried_verdict: both over c->side_mpi) is posted and not
 *            in; the call waits in its communicator's queue;
 *   QUEUED   its verdict is in (or it needs none) but an older call of the queue has not posted:
 *            only the head of the queue posts, so every rank posts a communicator's calls in one
 *            order;
 *   POSTED   the backend's post chose its row (gr__path_choose, k.path) and started it; its test
 *            moves it;
 *   NAMING   in band, the flag said a rank refused: every rank's verdict word is being exchanged
 *            to name the lowest refusing rank;
 *   SETTLED  the outcome is in: the next turn records it (flight recorder, counters), words its
 *            sentence and releases the call.
 * A call nobody refused goes VERDICT/QUEUED -> POSTED -> SETTLED; a refused one never reaches
 * POSTED (deferred: nothing is posted anywhere) or posts the in-band form and goes through
 * NAMING; either way nothing of the user's changes.
 *
 * The drive loop (gr__seq_drive) owns, for every kind of waiting: the turns, the deadline, the
 * flight recorder's signal and MPI's progress rule (the calls before the one driven move first:
 * its communicator's queue, then, every 16th turn, every communicator this thread uses with
 * requests outstanding, the registry). */
#ifndef GR_SEQUENCER_H
#define GR_SEQUENCER_H

#include "gr_front.h"

typedef enum {
  GR__SEQ_VERDICT,
  GR__SEQ_QUEUED,
  GR__SEQ_POSTED,
  GR__SEQ_NAMING,
  GR__SEQ_SETTLED,
} gr__seq_phase;

/* What a drive works towards. */
typedef enum {
  GR__SEQ_UNTIL_CALLS,   /* posted calls k[0..n) (a blocking call, a group's): each settled */
  GR__SEQ_UNTIL_REQUEST, /* a request: settled and released */
  GR__SEQ_UNTIL_DRAINED, /* c's queue: every call in it posted (or given up) */
} gr__seq_until_kind;

typedef struct {
  gr__seq_until_kind kind;
  gr_comm *c;          /* DRAINED: the communicator */
  const char *fn;      /* DRAINED, CALLS: the caller, named in the sentences (not y->fn) */
  gr_request *q;       /* REQUEST */
  const loop_style *y; /* CALLS: how the outcomes are worded */
  gr__call *k;         /* CALLS */
  size_t n, left;      /* CALLS: how many, how many not settled */
  int *done;           /* CALLS: done[i] = 1 once k[i] is settled */
  double t0, share;    /* CALLS: the start (monotonic) and each call's share of the time */
  gr_status first;     /* CALLS: the first failure, whose sentence stands */
  double deadline;     /* CALLS: 0 = none (a request keeps its own; DRAINED: the head's) */
  unsigned turns;      /* CALLS, DRAINED: turns so far (a request counts its own across drives) */
} gr__seq_until;

/* Drive towards u for at most budget turns (0: until it is reached or its deadline passes). Each
 * turn moves the calls before the target and then the target; every 16th turn, and the last one
 * of a budget, checks the deadline and serves the flight recorder's signal; every 16th turn also
 * sweeps the registry. *finished = 1 once u is reached (or failed, or timed out: past the deadline
 * every unsettled call is forgotten, recorded as timed out and its communicator aborted); the
 * status is then the target's first failure's (sentence recorded), else GR_OK. A request that
 * finished is released: the caller forgets its handle. */
gr_status gr__seq_drive(gr__seq_until *u, unsigned budget, int *finished);

/* The posted calls k[0..n) whose done[i] is 0, driven until each is settled (blocking calls and
 * groups): first is a failure the caller met already (while posting), whose sentence stands. */
gr_status gr__seq_drive_calls(const loop_style *y, gr__call *k, size_t n, int *done, double t0,
                              double deadline, double share, gr_status first);

/* Submit k as a request (its start): the verdict where its route needs one, then its place in
 * c's queue or its post at once. unret (GR_OK, or why this rank cannot hand out a request, its
 * sentence recorded and k->fe_refused set) makes it a refusal whatever gr__validate says; m (a
 * fused call's pack, or NULL) is owned by the request from here on, freed on every path. *out is
 * the request, or NULL where the start failed or this rank's refusal ended at its start. */
gr_status gr__seq_submit(const char *fn, gr__call *k, gr_status unret, gr__fused *m,
                         gr_request **out);

/* Drive q (gr_test: budget 1; gr_wait: 0, which also marks it waited for, k.fe_waiting: the
 * backend may block and sleep). This thread claims q's communicator first. *done = 1 once it
 * finished: q is released then and its status returned. A forked child's call is refused here,
 * before anything of q is touched. */
gr_status gr__seq_request(const char *fn, gr_request *q, unsigned budget, int *done);

/* Where q stands (tests), and its call (the backend's path, the seq). */
gr__seq_phase gr__seq_phase_of(const gr_request *q);
const gr__call *gr__seq_call_of(const gr_request *q);

/* Whether k keeps its place in its communicator's queue (a request started while the queue is not
 * empty queues behind it; a blocking call or a group drains it first): every collective, and on
 * NCCL point-to-point calls too. NCCL runs every call of a communicator in one order, sends and
 * receives included, so a send must not overtake an older collective whose verdict is still on its
 * way; MPI matches point-to-point calls by peer and tag, so there they post at once. */
static inline int gr__seq_in_line(const gr__call *k) {
  return is_collective(k->kind) || (k->comm->ops->caps & GR__CAP_P2P_IN_LINE);
}

/* Whether a refusal carried with the call (ROUTE_CALL) travels as a verdict the sequencer posts in
 * front of it, over c->side_mpi (a request's in its VERDICT phase, a blocking call's inside the
 * call, the refusing rank's in its join): on a backend whose rows cannot carry it in the call
 * (GR__CAP_VERDICT_IN_FRONT: NCCL's stream, docs/architecture.md); the shared-memory descriptor
 * carries its own. Every rank posts these verdicts in the order of its calls and nothing else
 * collective goes on c->side_mpi there, so they match whatever the backend posts on c->mpi later
 * (nccl_share.c's MPI stages, posted when the verdict is in). */
static inline int gr__seq_carried_verdict(const gr_comm *c) {
  return (c->ops->caps & GR__CAP_VERDICT_IN_FRONT) != 0;
}

/* Whether c's queue is empty: the blocking path's one look at the sequencer (a load). */
static inline int gr__seq_empty(const gr_comm *c) { return gr__list_empty(&c->defer); }

/* The process's communicators with requests outstanding (the registry, sequencer.c): how many
 * (atomic; read relaxed by the loops, whose cost while none is outstanding is that load), a sweep
 * that moves every call of those this thread uses (the queue's posts, the other requests' data
 * calls, the backend's progress; skip: a request the caller tests itself), and the claim a thread
 * makes on a communicator with requests outstanding before it uses it (no other thread's sweep
 * moves it afterwards). Neither ever blocks for long. gr__requests_drain (gr_coll.h) is the
 * DRAINED drive. */
extern int gr__requests_comms;
static inline int gr__requests_outstanding(void) {
  return __atomic_load_n(&gr__requests_comms, __ATOMIC_RELAXED) > 0;
}
void gr__requests_sweep(const gr_request *skip);
void gr__requests_claim(gr_comm *c);

#endif
