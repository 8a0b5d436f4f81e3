/* The sequencer (issue 40; gr_sequencer.h): per communicator the one ordered queue of calls, the
 * phases of a call (verdict, choose row and post, test, naming, settle) and the one drive loop
 * that moves them, with the deadline, the flight recorder's signal and MPI's progress rule in one
 * place. A request (request.c) is a handle on a call here; a blocking call (run.c) and a group
 * (group.c) post their calls themselves and drive them with the same loop; the queue is drained
 * by it before every call that posts on c->mpi (gr__requests_drain). */
#include "gr_sequencer.h"

#include "gr_dtype.h"
#include "gr_error.h"
#include "gr_flight.h"
#include "gr_mpi_error.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- a call in the sequencer ---------------------------------------------------------------- */

/* A request's start never waits for the other ranks: a non-blocking collective is local (MPI's
 * rule, and programs that post, then exchange point to point, then wait rely on it). How a refusal
 * reaches the others (coll.h, Errors):
 * - the shared-memory descriptor (ROUTE_CALL) and check mode (whose fingerprint exchange makes the
 *   start collective) as for blocking calls: the refusing rank's start returns GR_ERR_INVALID at
 *   once, the others' requests fail at their start (check mode) or their wait;
 * - the MPI algorithms (ROUTE_AGREE): the start returns a request on every rank, the refusing
 *   rank's included, and every rank's wait returns GR_ERR_INVALID naming the lowest refusing rank
 *   and argument. Two forms, chosen from what every rank knows alike:
 *     in band   (allreduces that gr__inband() takes: up to 64 KiB on host buffers) as
 *               gr__run_inband: the data call runs at once on a copy (pack) with one more element,
 *               the refusal flag (a refusing rank contributes zeros and the flag); the result is
 *               copied to recv when the flag is clear. No extra round. After a refusal every rank
 *               sends its verdict word to every other point to point over c->side_mpi, tagged with
 *               the request's in-band number (no collective: the ranks get there in the order they
 *               wait, which may differ), and the MAX names the lowest refusing rank (NAMING);
 *     deferred  (everything else) the start posts the 4-byte verdict, MPI_Iallreduce (MAX) on
 *               c->side_mpi (VERDICT), and the data call is posted once the verdict is in and
 *               clear, not at all otherwise: one more 4-byte round before the data, paid inside
 *               the wait. The verdicts have a communicator of their own because they are posted at
 *               the starts while the data calls are posted later, from inside other calls: each
 *               keeps one order on every rank that way.
 * Data calls are posted in start order on every rank: c's queue (c->defer) holds the requests not
 * yet posted, only its head may post, and a request started while it is not empty queues behind it
 * whatever its route (QUEUED). Every blocking call, group, gr_allreduce_multi and gr_comm_split on
 * c drains it first (gr__requests_drain), so that they follow the requests' data calls on every
 * rank. The request's deadline, from its start, covers the verdict.
 * - NCCL (ROUTE_CALL, gr__seq_carried_verdict): as the deferred form, on c->side_mpi too, where
 *   the refusing rank's call posts its own verdict: that rank's start joins the call as a
 *   blocking one (gr__join_refused) and returns GR_ERR_INVALID once the verdict is in; the
 *   others' requests wait in VERDICT and QUEUED, and NCCL sees only calls nobody refused, in start
 *   order. A blocking call on NCCL posts its verdict inside the call (gr__run_one), on c->side_mpi
 *   as well: every rank posts the verdicts there in the order of its calls, while the ranks that
 *   share a GPU post their MPI stages on c->mpi (nccl_share.c) only once a verdict is in, at a
 *   moment that differs from rank to rank. A verdict that never arrives ends as that call's
 *   timeout.
 * Point-to-point requests (gr_isend, gr_irecv) are not collective: no verdict, no check-mode
 * fingerprint; on MPI no place in the queue (MPI matches them by peer and tag, whatever the
 * collectives do), on NCCL a place like any call's (gr__seq_in_line); a refusal is this rank's
 * alone, as gr_send's. */
enum { REQ_QUEUED, REQ_POSTED };

struct gr_request {
  gr__call k;    /* the backend keeps state in here: a request never moves once started */
  gr__call user; /* in band: the call as the user made it (k is its in-band form) */
  const char *fn;
  double t0, deadline;
  gr_list_node defer;    /* in c's queue (c->defer) while REQ_QUEUED */
  struct reg_entry *reg; /* c's entry in the registry, from the start to the completion */
  gr_list_node live;     /* in reg->live until completed */
  int state;
  gr_status bad;       /* this rank's own refusal (GR_ERR_INVALID), its sentence in own */
  int arg;             /* this rank's refusal (gr__arg), GR__ARG_NONE */
  int verdict;         /* deferred: a verdict was posted; v[1] is everyone's once vdone */
  int vdone;           /* v[1] is in (-1: the MPI call failed) */
  int *v;              /* v[0] this rank's word, v[1] the MAX: heap, abandoned if never in */
  MPI_Request vreq;    /* the verdict's MPI_Iallreduce */
  unsigned char *pack; /* in band: the data call's buffer (inband_bytes); NULL otherwise */
  gr__fused *fused;    /* gr_iallreduce_multi: the packed call's buffer and the pieces */
  _Alignas(16) unsigned char small[64]; /* pack when it fits: no allocation for small calls */
  uint64_t no;   /* in band: the communicator's in-band request number (the naming tag) */
  int naming;    /* in band, a rank refused: the words are being exchanged (names_in) */
  int names_err; /* that exchange failed (out of memory, MPI) */
  int *names;    /* every rank's verdict word by rank; names[size] is this rank's sent one */
  MPI_Request *name_reqs;
  int nname_reqs;
  /* why the verdict or the naming failed: the MPI call (fail_rc its code), or out of memory
   * (fail_rc MPI_SUCCESS); request_outcome's sentence */
  const char *fail_what;
  int fail_rc;
  int data_done;  /* the data call finished, failed to post, or is never posted */
  int data_quiet; /* given up on, its backend's forget said nothing writes its buffers any more */
  unsigned turns; /* turns of the drive loop on it, across drives (every 16th sweeps) */
  gr_status data_st;
  char own[GR__ERRLEN];      /* this rank's own refusal, after "rank R: fn: " */
  char post_err[GR__ERRLEN]; /* the backend's detail of a failed post, for the wait's sentence */
};

/* ---- the process's communicators with outstanding requests ---------------------------------
 *
 * MPI's progress rule, which gr_test(3) promises: testing or waiting for any request moves every
 * outstanding call of the process, not only those on the request's own communicator. A rank that
 * waits on B while its peer waits inside a call on A that this rank has not posted yet (a deferred
 * data call whose verdict is in, a gated MPI call, a multi-leader step, a call that moves only when
 * tested) must post or move it, or both wait until their timeouts.
 *
 * So every communicator with requests outstanding has an entry here, from its first request's start
 * to its last one's completion: its requests not yet completed (live) and the thread that uses it
 * (owner). A sweep (gr__requests_sweep: every 16th turn of the drive loop, whatever it drives, and
 * of gr__mpi_wait) moves, on every communicator the sweeping thread owns, the queue's posts
 * (defer_advance), the data calls of its other requests (their backend test, which never blocks
 * for a request nobody waits on) and the backend's progress op. Communicators another thread uses are left to that thread: the threading rule is "a
 * communicator is used by one thread at a time; a request may be waited for on another thread", and
 * the other thread may be inside a call on it that takes no lock here (gr_allreduce_multi,
 * gr_comm_split, gr_mem_alloc), so it is never moved from here.
 *
 * Ownership changes hands under the entry's mutex (use): a thread that starts or tests a request,
 * drains, or makes a blocking call on a communicator with requests outstanding first claims it
 * (reg_claim: one relaxed load when it is already the owner; else it takes use, which a sweep
 * holds while it moves that communicator, and writes itself in). A sweep only ever try-locks use,
 * so it never waits for another thread, and moves an entry only while it holds use and is its
 * owner; the owner's own changes to live need no lock (no other thread reads it), and the previous
 * owner's last sweep happens before the claim through use.
 *
 * Entries are never freed: one whose communicator has no request left is marked free (c NULL, under
 * use) and reused by the next communicator that starts one, so a sweep walks the list without a
 * lock (it only grows; reg_lock orders the allocations). The blocking calls pay one relaxed load
 * of their communicator's pending count (gr__run_one), one of its queue's head (gr__seq_empty) and,
 * every 16th turn of the drive loop, one of gr__requests_comms; nothing more while no request is
 * outstanding. */
typedef struct reg_entry {
  struct reg_entry *next; /* the list only grows (reg_head, reg_lock) */
  pthread_mutex_t use;    /* held to change owner or c, and by a sweep that moves c */
  gr_comm *c;             /* atomic; NULL: free */
  const void *owner;      /* atomic; the thread that last claimed c (its token) */
  int taken;              /* allocated to a communicator (under reg_lock) */
  gr_list live;           /* c's requests not completed, oldest first (the owner's) */
} reg_entry;

static reg_entry *reg_head; /* atomic */
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
int gr__requests_comms; /* atomic: communicators with requests outstanding (gr_front.h) */
static _Thread_local char thread_token; /* its address names the calling thread */

static const void *self(void) { return &thread_token; }

/* c's entry, NULL when c has no request outstanding. Only c's user looks for c, and only it
 * writes c into an entry or out of it, so the answer is stable for the caller. */
static reg_entry *reg_find(const gr_comm *c) {
  for (reg_entry *e = __atomic_load_n(&reg_head, __ATOMIC_ACQUIRE); e; e = e->next)
    if (__atomic_load_n(&e->c, __ATOMIC_RELAXED) == c) return e;
  return NULL;
}

/* This thread uses e's communicator from now on: no other thread's sweep moves it any more, and the
 * one that may be moving it now has finished when this returns. */
static void reg_own(reg_entry *e) {
  if (__atomic_load_n(&e->owner, __ATOMIC_RELAXED) == self()) return;
  pthread_mutex_lock(&e->use);
  __atomic_store_n(&e->owner, self(), __ATOMIC_RELAXED);
  pthread_mutex_unlock(&e->use);
}

void gr__requests_claim(gr_comm *c) {
  reg_entry *e = reg_find(c);
  if (e) reg_own(e);
}

/* An entry for c, owned by this thread (c has none: its first outstanding request). NULL when out
 * of memory: the request then runs unregistered (moved by its own tests only, as before). */
static reg_entry *reg_add(gr_comm *c) {
  pthread_mutex_lock(&reg_lock);
  reg_entry *e = __atomic_load_n(&reg_head, __ATOMIC_ACQUIRE);
  while (e && e->taken)
    e = e->next;
  if (!e && (e = calloc(1, sizeof *e))) {
    if (pthread_mutex_init(&e->use, NULL) != 0) { /* as out of memory */
      free(e);
      e = NULL;
    } else {
      e->next = reg_head;
      __atomic_store_n(&reg_head, e, __ATOMIC_RELEASE);
    }
  }
  if (e) e->taken = 1;
  pthread_mutex_unlock(&reg_lock);
  if (!e) return NULL;
  pthread_mutex_lock(&e->use);
  e->live.head = e->live.tail = NULL;
  __atomic_store_n(&e->owner, self(), __ATOMIC_RELAXED);
  __atomic_store_n(&e->c, c, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&e->use);
  __atomic_add_fetch(&gr__requests_comms, 1, __ATOMIC_RELAXED);
  return e;
}

/* q is outstanding on its communicator (the caller owns the entry). */
static void reg_link(gr_request *q) {
  gr_comm *c = q->k.comm;
  reg_entry *e = reg_find(c);
  if (!e) e = reg_add(c);
  q->reg = e;
  if (e) gr__list_push_back(&e->live, &q->live);
}

/* q is completed; its communicator's entry is freed with its last request. */
static void reg_unlink(gr_request *q) {
  reg_entry *e = q->reg;
  if (!e) return;
  gr__list_remove(&e->live, &q->live);
  q->reg = NULL;
  if (!gr__list_empty(&e->live)) return;
  pthread_mutex_lock(&e->use); /* a sweep of another thread may be looking at it */
  __atomic_store_n(&e->c, NULL, __ATOMIC_RELAXED);
  __atomic_store_n(&e->owner, NULL, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&e->use);
  pthread_mutex_lock(&reg_lock);
  e->taken = 0;
  pthread_mutex_unlock(&reg_lock);
  __atomic_sub_fetch(&gr__requests_comms, 1, __ATOMIC_RELAXED);
}

static void end(gr__call *k, gr__flight_state fs, double t0) { gr__end_share(k, fs, t0, 1.0); }

static void defer_push(gr_comm *c, gr_request *q) { gr__list_push_back(&c->defer, &q->defer); }

static gr_request *defer_first(gr_comm *c) {
  return c->defer.head ? GR_LIST_ENTRY(c->defer.head, gr_request, defer) : NULL;
}

static void defer_unlink(gr_comm *c, gr_request *q) {
  if (gr__list_linked(&c->defer, &q->defer)) gr__list_remove(&c->defer, &q->defer);
}

/* 1 once q needs no verdict or its verdict is in. Never blocks. (Plain MPI_Test: one MPI_INT on
 * every rank cannot fail the way gr__mpi_test guards against.) */
static int verdict_in(gr_request *q) {
  if (!q->verdict || q->vdone) return 1;
  int flag = 0;
  int rc = MPI_Test(&q->vreq, &flag, MPI_STATUS_IGNORE);
  if (rc != MPI_SUCCESS) {
    q->v[1] = -1, flag = 1;
    q->fail_what = "MPI_Iallreduce (MPI_Test)", q->fail_rc = rc;
  }
  q->vdone = flag;
  return flag;
}

/* In band, after a refusal: this rank's word to every other rank, theirs from every other. */
static void names_start(gr_request *q) {
  gr_comm *c = q->k.comm;
  int P = c->size, n = 0;
  q->naming = 1;
  q->names = malloc(sizeof *q->names * ((size_t)P + 1));
  q->name_reqs = malloc(sizeof *q->name_reqs * 2 * (size_t)P);
  if (!q->names || !q->name_reqs) {
    q->names_err = 1;
    q->fail_what = "out of memory for the exchange naming the refusing rank";
    return;
  }
  int *ub = NULL, has = 0;
  if (MPI_Comm_get_attr(c->side_mpi, MPI_TAG_UB, &ub, &has) != MPI_SUCCESS)
    has = 0; /* the standard's smallest MPI_TAG_UB below */
  int tag = (int)(q->no % (uint64_t)(has && ub && *ub > 0 ? *ub : 32767));
  q->names[P] = gr__verdict_word(c, q->arg);
  for (int r = 0; r < P; r++) {
    q->names[r] = r == c->rank ? q->names[P] : 0;
    if (r == c->rank) continue;
    int rc = MPI_Irecv(&q->names[r], 1, MPI_INT, r, tag, c->side_mpi, &q->name_reqs[n]);
    if (rc == MPI_SUCCESS)
      n++;
    else
      q->names_err = 1, q->fail_what = "MPI_Irecv (naming the refusing rank)", q->fail_rc = rc;
    rc = MPI_Isend(&q->names[P], 1, MPI_INT, r, tag, c->side_mpi, &q->name_reqs[n]);
    if (rc == MPI_SUCCESS)
      n++;
    else
      q->names_err = 1, q->fail_what = "MPI_Isend (naming the refusing rank)", q->fail_rc = rc;
  }
  q->nname_reqs = n;
}

/* 1 once the words are in (or the exchange failed). Never blocks. */
static int names_in(gr_request *q) {
  if (!q->naming) names_start(q);
  if (!q->names || !q->name_reqs) return 1;
  int flag = 0;
  int rc = MPI_Testall(q->nname_reqs, q->name_reqs, &flag, MPI_STATUSES_IGNORE);
  if (rc != MPI_SUCCESS) {
    q->names_err = flag = 1;
    q->fail_what = "MPI_Testall (naming the refusing rank)", q->fail_rc = rc;
  }
  if (flag) q->nname_reqs = 0;
  return flag;
}

/* The POSTED phase's entry: the backend's post chooses the row (k.path) and starts the call; a
 * verdict that says a rank refused posts nothing, on every rank alike. */
static void post_data(gr_request *q) {
  gr__call *k = &q->k;
  gr_comm *c = k->comm;
  q->state = REQ_POSTED;
  if (q->verdict && q->v[1] != 0) { /* refused somewhere: nobody posts it */
    q->data_done = 1;
    return;
  }
  k->blocking_ok = 0;
  c->err[0] = '\0';
  int done = 0;
  gr_status st = c->ops->post(k, &done);
  if (st != GR_OK) snprintf(q->post_err, sizeof q->post_err, "%s", c->err);
  q->data_done = done || st != GR_OK;
  q->data_st = st;
}

/* Post the data calls of c's queue, oldest first, up to the first whose verdict is not in (a
 * deferred one; the others post at once). Never blocks. */
static void defer_advance(gr_comm *c) {
  gr_request *q;
  while ((q = defer_first(c))) {
    if (!verdict_in(q)) return;
    gr__list_remove(&c->defer, &q->defer);
    post_data(q);
  }
}

/* One test of q's running data call (posted, not finished); never blocks unless q is waited for
 * (k.fe_waiting: gr_wait's own request). */
static void data_test(gr_request *q) {
  gr__call *k = &q->k;
  gr_comm *c = k->comm;
  int d = 0;
  c->err[0] = '\0';
  gr_status s = c->ops->test(k, &d);
  if (s != GR_OK) snprintf(q->post_err, sizeof q->post_err, "%s", c->err);
  q->data_done = d || s != GR_OK;
  q->data_st = s;
}

/* Move e's communicator (this thread owns it and holds e->use): its deferred posts, the data
 * calls of its requests other than skip, and the backend's calls that move only when tested. */
static void reg_move(reg_entry *e, const gr_request *skip) {
  gr_comm *c = e->c;
  if (c->aborted) return; /* its requests' own tests end them */
  if (!gr__list_empty(&c->defer)) defer_advance(c);
  GR_LIST_FOREACH(it, tmp, &e->live) {
    gr_request *r = GR_LIST_ENTRY(it, gr_request, live);
    if (r != skip && r->state == REQ_POSTED && !r->data_done) data_test(r);
  }
  if (c->ops->progress) c->ops->progress(c);
}

void gr__requests_sweep(const gr_request *skip) {
  for (reg_entry *e = __atomic_load_n(&reg_head, __ATOMIC_ACQUIRE); e; e = e->next) {
    if (!__atomic_load_n(&e->c, __ATOMIC_RELAXED) ||
        __atomic_load_n(&e->owner, __ATOMIC_RELAXED) != self())
      continue; /* free, or another thread's (a stale look: checked again under use) */
    if (pthread_mutex_trylock(&e->use) != 0) continue; /* being claimed: no longer ours */
    if (__atomic_load_n(&e->c, __ATOMIC_RELAXED) &&
        __atomic_load_n(&e->owner, __ATOMIC_RELAXED) == self())
      reg_move(e, skip);
    pthread_mutex_unlock(&e->use);
  }
}

/* Release q; buffers MPI may still write (a verdict not in, a data call not finished) are
 * abandoned rather than freed. */
static void request_free(gr_request *q) {
  gr_comm *c = q->k.comm;
  if (q->v) {
    if (q->verdict && !q->vdone) /* the verdict's request runs on: v goes with it */
      gr__mpi_abandon(c, &q->vreq, q->v, NULL);
    else
      free(q->v);
  }
  /* The data call's buffers are still written where it was posted, not finished, and its
   * backend's forget did not say they are quiet. */
  int busy = q->state == REQ_POSTED && !q->data_done && !q->data_quiet;
  if (q->fused) { /* the backend reads and writes fused->pack unless the call runs in band */
    if (busy && !q->pack)
      gr__abandon(q->fused);
    else
      free(q->fused);
  }
  int keep = 0; /* q itself holds the pack MPI may still write */
  if (q->pack) {
    if (!busy)
      free(q->pack == q->small ? NULL : q->pack);
    else if (q->pack == q->small)
      keep = 1;
    else
      gr__abandon(q->pack);
  }
  if (q->names) {
    if (q->nname_reqs) { /* its receives may still complete */
      for (int i = 0; i < q->nname_reqs; i++)
        gr__mpi_abandon(c, &q->name_reqs[i], NULL, NULL);
      gr__abandon(q->names);
    } else {
      free(q->names);
    }
  }
  free(q->name_reqs);
  if (keep)
    gr__abandon(q);
  else
    free(q);
}

/* SETTLED: data call and verdict are in: the outcome. A refusal anywhere (all ranks see the same verdict)
 * ends the request as a refused blocking call ends: GR_ERR_INVALID, not counted, recv untouched. */
static gr_status request_outcome(gr_request *q) {
  gr__call *k = &q->k;
  gr_comm *c = k->comm;
  int all = q->verdict ? q->v[1] : 0;
  if (q->naming) {
    for (int r = 0; r < c->size && !q->names_err; r++)
      all = q->names[r] > all ? q->names[r] : all;
    if (q->names_err) all = -1;
  }
  if (q->naming && all == 0) {
    end(k, GR__FL_FAILED, q->t0);
    return gr__fail(GR_ERR_INTERNAL, q->fn, "a refusal was signalled but not agreed");
  }
  if (all != 0) {
    gr_status st;
    char s[MPI_MAX_ERROR_STRING];
    if (all < 0 && q->fail_rc == MPI_SUCCESS)
      st = gr__fail(GR_ERR_NOMEM, q->fn, "the agreement on the arguments: %s",
                    q->fail_what ? q->fail_what : "out of memory");
    else if (all < 0)
      st = gr__fail(GR_ERR_MPI, q->fn, "the agreement on the arguments: %s failed: %s",
                    q->fail_what, gr__mpi_strerror(q->fail_rc, s));
    else if (q->bad != GR_OK)
      st = gr__fail(q->bad, q->fn, "%s", q->own);
    else {
      char what[96];
      snprintf(what, sizeof what, "%s(count=%zu)", gr__kind_name(shown(k)->kind), shown_count(k));
      st = gr__verdict_fail(q->fn, c, all, what);
    }
    if (all > 0) k->fe_refused = all & 0xff; /* not a call anyone made: no counters */
    end(k, GR__FL_FAILED, q->t0);
    return st;
  }
  const loop_style y = {q->fn, "", 1, 0};
  if (q->data_st != GR_OK) {
    snprintf(c->err, sizeof c->err, "%s", q->post_err);
    return gr__settle(&y, k, q->data_st, q->t0, 1.0, 1);
  }
  if (q->pack && q->user.count)
    memcpy(q->user.recv, q->pack, q->user.count * gr__dtype_size(q->user.dtype));
  if (q->fused) {
    const gr__fused *m = q->fused;
    gr__fused_unpack(m->recv, m->pack, m->counts, m->nbufs, m->es);
  }
  return gr__settle(&y, k, GR_OK, q->t0, 1.0, 1);
}

static gr_status request_timeout(gr_request *q) {
  gr__call *k = &q->k;
  gr_comm *c = k->comm;
  const char *what = "";
  if (q->state == REQ_QUEUED) {
    defer_unlink(c, q);
    what = "the agreement on the arguments before";
  } else if (!q->data_done) {
    q->data_quiet = c->ops->forget(k);
  } else {
    what = "the agreement on the arguments of";
  }
  end(k, GR__FL_TIMEOUT, q->t0);
  return gr__timed_out(q->fn, k, what);
}

/* Start k as a request in *out; unret (GR_OK, or why this rank cannot hand out a request, its
 * sentence recorded and k->fe_refused set) makes it a refusal whatever gr__validate says. */
static gr_status begin_request(const char *fn, gr__call *k, gr_request **out, gr_status unret) {
  gr_comm *c = k->comm;
  if (__atomic_load_n(&c->pending, __ATOMIC_RELAXED) > 0) gr__requests_claim(c);
  gr_status bad = unret != GR_OK ? unret : gr__validate(fn, k);
  int route = gr__refusal_route(k);
  int agree = route == ROUTE_AGREE && c->side_mpi != MPI_COMM_NULL;
  int carried = route == ROUTE_CALL && gr__seq_carried_verdict(c); /* NCCL */
  int coll = is_collective(k->kind);
  if (bad != GR_OK && !agree) {
    if (c->check && coll) return gr__exchange_fingerprint(fn, k, bad);
    if (route != ROUTE_CALL) return bad;
    char own[GR__ERRLEN];
    gr__own_sentence(own, sizeof own, fn);
    GR_CHECK(gr__requests_drain(fn, c)); /* the refusing rank's descriptor-only call is blocking */
    gr__fail(bad, fn, "%s", own);
    return gr__join_refused(fn, k, bad, ROUTE_CALL);
  }
  gr_request *q = calloc(1, sizeof *q);
  if (!q) return gr__fail(GR_ERR_NOMEM, fn, "out of memory");
  if (bad != GR_OK) gr__own_sentence(q->own, sizeof q->own, fn);
  gr__flight_poll();
  if (c->check && coll) {
    gr_status st = gr__exchange_fingerprint(fn, k, GR_OK);
    if (st != GR_OK) {
      free(q);
      return st;
    }
  }
  q->k = *k;
  q->fn = fn;
  q->bad = bad;
  q->vreq = MPI_REQUEST_NULL;
  q->state = REQ_QUEUED;
  int arg = bad == GR_OK ? GR__ARG_NONE : k->fe_refused ? k->fe_refused : GR__ARG_BUFFERS;
  q->arg = arg;
  if (agree && gr__inband(k)) {
    size_t bytes = gr__inband_bytes(k);
    q->pack = bytes <= sizeof q->small ? q->small : malloc(bytes);
    if (!q->pack) {
      free(q);
      return gr__fail(GR_ERR_NOMEM, fn, "out of memory (%zu bytes)", bytes);
    }
    q->user = *k;
    gr__inband_pack(&q->user, arg, q->pack, &q->k);
    q->no = c->req_inband++;
  }
  k = &q->k;
  k->fe_request = 1;
  k->fe_refused = GR__ARG_NONE; /* the backend posts this call with its data (or a copy) */
  if ((agree && !q->pack) || carried) {
    q->v = malloc(2 * sizeof *q->v);
    if (!q->v) {
      free(q);
      return gr__fail(GR_ERR_NOMEM, fn, "out of memory");
    }
    q->v[0] = gr__verdict_word(c, arg);
    q->v[1] = 0;
    int rc = MPI_Iallreduce(&q->v[0], &q->v[1], 1, MPI_INT, MPI_MAX, c->side_mpi, &q->vreq);
    if (rc != MPI_SUCCESS) {
      char s[MPI_MAX_ERROR_STRING];
      free(q->v), free(q);
      return gr__fail(GR_ERR_MPI, fn, "the agreement on the arguments: MPI_Iallreduce failed: %s",
                      gr__mpi_strerror(rc, s));
    }
    q->verdict = 1;
  }
  gr__begin(k);
  q->t0 = gr__mono_now();
  q->deadline = c->timeout_s > 0 ? q->t0 + c->timeout_s : 0.0;
  int line = gr__seq_in_line(k);
  if (line && !gr__list_empty(&c->defer)) defer_advance(c);
  if (line && (!gr__list_empty(&c->defer) || q->verdict)) {
    defer_push(c, q);
  } else {
    post_data(q);
    if (q->data_st != GR_OK) { /* nothing else in flight: fail the start */
      const loop_style y = {fn, "", 1, 0};
      snprintf(c->err, sizeof c->err, "%s", q->post_err);
      gr_status st = gr__settle(&y, k, q->data_st, q->t0, 1.0, 1);
      request_free(q);
      return st;
    }
  }
  __atomic_add_fetch(&c->pending, 1, __ATOMIC_ACQ_REL);
  reg_link(q);
  *out = q;
  return GR_OK;
}

gr_status gr__seq_submit(const char *fn, gr__call *k, gr_status unret, gr__fused *m,
                         gr_request **out) {
  gr_request *q = NULL;
  gr_status st = begin_request(fn, k, &q, unret);
  if (q)
    q->fused = m;
  else
    free(m); /* nothing was posted on it */
  *out = q;
  return st;
}

/* ---- phases as the tests see them ------------------------------------------------------------ */

gr__seq_phase gr__seq_phase_of(const gr_request *q) {
  if (q->state == REQ_QUEUED) return q->verdict && !q->vdone ? GR__SEQ_VERDICT : GR__SEQ_QUEUED;
  if (!q->data_done) return GR__SEQ_POSTED;
  if (q->naming && q->nname_reqs && !q->names_err) return GR__SEQ_NAMING;
  return GR__SEQ_SETTLED;
}

const gr__call *gr__seq_call_of(const gr_request *q) { return &q->k; }

/* ---- one turn of each kind of target ---------------------------------------------------------- */

/* q is finished: out of the registry and the communicator's count, released. */
static void request_release(gr_request *q) {
  gr_comm *c = q->k.comm;
  reg_unlink(q);
  __atomic_sub_fetch(&c->pending, 1, __ATOMIC_ACQ_REL);
  request_free(q);
}

/* One turn of q: the calls before it in c's queue post as far as they can, then q moves through
 * its phases as far as it can without waiting. 1 once it is settled (*st its outcome). */
static int request_turn(gr_request *q, gr_status *st) {
  gr__call *k = &q->k;
  gr_comm *c = k->comm;
  if (c->aborted) {
    if (q->state == REQ_QUEUED)
      defer_unlink(c, q);
    else if (!q->data_done)
      q->data_quiet = c->ops->forget(k);
    end(k, GR__FL_FAILED, q->t0);
    *st = gr__fail(GR_ERR_ABORTED, q->fn, "communicator %s was aborted before %s #%llu finished",
                   c->id, gr__kind_name(shown(k)->kind), (unsigned long long)k->seq);
    return 1;
  }
  if (!gr__list_empty(&c->defer)) defer_advance(c); /* VERDICT, QUEUED -> POSTED, oldest first */
  if (q->state == REQ_POSTED && !q->data_done) data_test(q); /* POSTED */
  int ready = q->state == REQ_POSTED && q->data_done && verdict_in(q);
  if (ready && q->pack && q->data_st == GR_OK && !gr__inband_clear(&q->k))
    ready = names_in(q); /* NAMING: a rank refused: which? */
  /* Waiting for others' words (or a verdict) here, this rank must still move the calls that
   * only their owner's tests move: another rank may wait inside one of them before it gets to
   * this request (gpurun's own allreduces; a small broadcast travels as one). */
  if (!ready && (q->state != REQ_POSTED || q->data_done) && c->ops->progress) c->ops->progress(c);
  if (!ready) return 0;
  *st = request_outcome(q); /* SETTLED */
  return 1;
}

/* ---- SETTLED, for calls posted outside the queue ---------------------------------------------- */

/* A call's outcome that needs a sentence (a failure, said). */
static gr_status settle_say(const loop_style *y, const char *fn, gr__call *k, gr_status st,
                            int timeout) {
  gr_comm *c = k->comm;
  if (timeout) return gr__timed_out(fn, k, y->timeout_what);
  if (y->name_backend)
    return gr__fail(st, fn, "%s #%llu on communicator %s (%s backend): %s",
                    gr__kind_name(shown(k)->kind), (unsigned long long)k->seq, c->id, c->ops->name,
                    c->err);
  return gr__fail(st, fn, "%s #%llu on communicator %s: %s", gr__kind_name(shown(k)->kind),
                  (unsigned long long)k->seq, c->id, c->err);
}

/* A call's outcome st (from post or test): its flight record and counters, and (say) the sentence;
 * without say the failure is only counted (an earlier one's sentence stands). Inline here: the
 * blocking path settles every call through it. */
static inline gr_status settle(const loop_style *y, const char *fn, gr__call *k, gr_status st,
                               double t0, double share, int say) {
  int timeout = st == GR_ERR_TIMEOUT && y->backend_timeout;
  gr__end_share(k, st == GR_OK ? GR__FL_DONE : timeout ? GR__FL_TIMEOUT : GR__FL_FAILED, t0, share);
  if (st == GR_OK || !say) return st;
  return settle_say(y, fn, k, st, timeout);
}

gr_status gr__settle(const loop_style *y, gr__call *k, gr_status st, double t0, double share,
                     int say) {
  return settle(y, y->fn, k, st, t0, share, say);
}

/* One turn of posted calls: each unsettled one tested once, settled when it finished. */
static inline int calls_turn(gr__seq_until *u) {
  for (size_t i = 0; i < u->n; i++) {
    if (u->done[i]) continue;
    gr_status st = u->k[i].comm->ops->test(&u->k[i], &u->done[i]);
    if (st != GR_OK || u->done[i]) {
      u->done[i] = 1;
      u->left--;
      st = settle(u->y, u->fn, &u->k[i], st, u->t0, u->share, u->first == GR_OK);
      if (u->first == GR_OK) u->first = st;
    }
  }
  return u->left == 0;
}

/* Past the deadline: the target's unsettled calls are given up on, recorded as timed out and their
 * communicators aborted. Returns the first one's sentence. (Scalars, not the target: the blocking
 * path's target then lives in registers.) */
static gr_status expire_calls(const loop_style *y, const char *fn, gr__call *k, size_t n, int *done,
                              double t0, double share) {
  gr_status st = GR_OK;
  for (size_t i = 0; i < n; i++) {
    if (done[i]) continue;
    done[i] = 1;
    /* The answer is not kept: these calls' buffers are their callers', which keep on a timeout
     * what they own (gr__run_inband's buffer, a group's or a fused call's pack go to gr__abandon),
     * as the program keeps its own until the communicator is destroyed. */
    (void)k[i].comm->ops->forget(&k[i]);
    gr__end_share(&k[i], GR__FL_TIMEOUT, t0, share);
    if (st == GR_OK) st = gr__timed_out(fn, &k[i], y->timeout_what);
    gr__comm_abort_internal(k[i].comm);
  }
  return st;
}

static gr_status expire_request(gr_request *q) {
  gr_status st = request_timeout(q);
  request_release(q);
  return st;
}

static gr_status expire_drain(const char *fn, gr_comm *c) {
  gr_request *q = defer_first(c);
  c->err[0] = '\0'; /* q's own wait then returns GR_ERR_ABORTED */
  return gr__timed_out(fn, &q->k, "the agreement on the arguments of the pending request");
}

static inline int past_deadline(const gr__seq_until *u, gr__seq_until_kind kind) {
  double d = u->deadline;
  if (kind == GR__SEQ_UNTIL_REQUEST) d = u->q->deadline;
  if (kind == GR__SEQ_UNTIL_DRAINED) {
    const gr_request *q = defer_first(u->c);
    d = q ? q->deadline : 0.0;
  }
  return d > 0 && gr__mono_now() > d;
}

/* ---- the drive loop ---------------------------------------------------------------------------- */

/* The one loop, written once; the compiler makes one copy per kind of target (kind is a constant
 * at each use), so that the blocking path's copy costs what its own loop did. */
static inline __attribute__((always_inline)) gr_status
drive(gr__seq_until *u, unsigned budget, int *finished, gr__seq_until_kind kind) {
  *finished = 0;
  for (unsigned n = 1;; n++) {
    gr_status st = GR_OK;
    int reached;
    unsigned turn;
    if (kind == GR__SEQ_UNTIL_REQUEST) {
      turn = ++u->q->turns;
      reached = request_turn(u->q, &st);
      if (reached) request_release(u->q);
    } else if (kind == GR__SEQ_UNTIL_DRAINED) {
      turn = ++u->turns;
      defer_advance(u->c);
      reached = gr__list_empty(&u->c->defer);
      if (!reached && u->c->aborted) st = gr__check_alive(u->fn, u->c), reached = 1;
    } else {
      turn = ++u->turns;
      reached = calls_turn(u);
      st = u->first;
    }
    if (reached) {
      *finished = 1;
      return st;
    }
    int last = budget && n >= budget, sixteenth = (turn & 15) == 0;
    if (sixteenth || last) {
      if (past_deadline(u, kind)) {
        *finished = 1;
        if (kind == GR__SEQ_UNTIL_REQUEST) return expire_request(u->q);
        if (kind == GR__SEQ_UNTIL_DRAINED) return expire_drain(u->fn, u->c);
        u->left = 0;
        return expire_calls(u->y, u->fn, u->k, u->n, u->done, u->t0, u->share);
      }
      gr__flight_poll();
      /* A peer may wait in a call of this rank's elsewhere (a queued post, a call that moves only
       * when tested, on this communicator or another) before it gets to this one: MPI's progress
       * rule. A request is tested by its own turns, so the sweep leaves it out. */
      if (sixteenth && gr__requests_outstanding())
        gr__requests_sweep(kind == GR__SEQ_UNTIL_REQUEST ? u->q : NULL);
    }
    if (last) return GR_OK;
  }
}

gr_status gr__seq_drive(gr__seq_until *u, unsigned budget, int *finished) {
  switch (u->kind) {
  case GR__SEQ_UNTIL_REQUEST:
    return drive(u, budget, finished, GR__SEQ_UNTIL_REQUEST);
  case GR__SEQ_UNTIL_DRAINED:
    return drive(u, budget, finished, GR__SEQ_UNTIL_DRAINED);
  default:
    return drive(u, budget, finished, GR__SEQ_UNTIL_CALLS);
  }
}

static inline __attribute__((always_inline)) gr_status
drive_calls(const loop_style *y, const char *fn, gr__call *k, size_t n, int *done, double t0,
            double deadline, double share, gr_status first) {
  gr__seq_until u;
  u.kind = GR__SEQ_UNTIL_CALLS, u.y = y, u.fn = fn, u.k = k, u.n = n, u.done = done, u.t0 = t0;
  u.share = share, u.first = first, u.deadline = deadline, u.turns = 0, u.left = 0;
  for (size_t i = 0; i < n; i++)
    u.left += !done[i];
  if (u.left == 0) return first;
  int finished;
  return drive(&u, 0, &finished, GR__SEQ_UNTIL_CALLS);
}

gr_status gr__seq_drive_calls(const loop_style *y, gr__call *k, size_t n, int *done, double t0,
                              double deadline, double share, gr_status first) {
  return drive_calls(y, y->fn, k, n, done, t0, deadline, share, first);
}

/* ---- the blocking path: a call posted from the caller's stack, never queued -------------------- */

/* ROUTE_CALL on NCCL (gr__seq_carried_verdict): k's verdict (arg: this rank's refusal, or none)
 * over c->side_mpi, where the requests' verdicts go at their starts (a refusing rank's request
 * start joins here, so both must use one communicator), waited for inside the call (begun, its
 * deadline). GR_OK when nobody refused: then
 * the call is posted. Otherwise k is settled here: refused somewhere (GR_ERR_INVALID naming the
 * lowest refusing rank, nothing posted anywhere), MPI's failure, or the timeout (the verdict given
 * up on, its words left to MPI, the communicator aborted). Out of line: the MPI paths never
 * come here. */
static __attribute__((noinline)) gr_status carried_verdict(const loop_style *y, const char *fn,
                                                           gr__call *k, int arg, double t0,
                                                           double deadline) {
  gr_comm *c = k->comm;
  int *v = malloc(2 * sizeof *v); /* handed to MPI's lost requests after a timeout */
  if (!v) {
    return settle(y, fn, k, gr__comm_err(c, GR_ERR_NOMEM, "out of memory"), t0, 1.0, 1);
  }
  v[0] = gr__verdict_word(c, arg);
  v[1] = 0;
  MPI_Request req = MPI_REQUEST_NULL;
  int rc = MPI_Iallreduce(&v[0], &v[1], 1, MPI_INT, MPI_MAX, c->side_mpi, &req);
  /* a failure's detail in c->err: MPI_Iallreduce's here, MPI_Test's from the wait */
  gr_status st = rc == MPI_SUCCESS ? gr__mpi_wait(c, &req, deadline)
                                   : gr__comm_mpi_err(c, rc, "MPI_Iallreduce");
  if (st == GR_ERR_TIMEOUT) {
    gr__mpi_abandon(c, &req, v, NULL);
    gr__end_share(k, GR__FL_TIMEOUT, t0, 1.0);
    st = gr__timed_out(fn, k, y->timeout_what);
    gr__comm_abort_internal(c);
    return st;
  }
  int all = v[1];
  free(v);
  if (st != GR_OK)
    st = gr__comm_err(c, GR_ERR_MPI, "the refusal verdict's %s", c->err);
  else if (all != 0)
    st = gr__comm_err(
        c, GR_ERR_INVALID,
        "rank %d of communicator %s rejected its own %s in %s(count=%zu); no rank sent anything",
        0xfffff - ((all >> 8) & 0xfffff), c->id, gr__arg_name(all & 0xff), gr__kind_name(k->kind),
        k->count);
  return st == GR_OK ? GR_OK : settle(y, fn, k, st, t0, 1.0, 1);
}

/* k begun, posted and driven to its end; carried: after its verdict (arg), NCCL's ROUTE_CALL.
 * Written once, one copy per value of carried (a constant at each use). */
static inline __attribute__((always_inline)) gr_status run_begun(const char *fn, gr__call *k,
                                                                 int carried, int arg) {
  gr_comm *c = k->comm;
  gr__begin(k);
  double t0 = gr__mono_now(), deadline = c->timeout_s > 0 ? t0 + c->timeout_s : 0.0;
  k->blocking_ok = c->timeout_s <= 0;
  int done = 0;
  c->err[0] = '\0';
  /* How its outcomes are worded, the caller's name apart (fn, passed as is: nothing to build) */
  static const loop_style y = {NULL, "", 1, 1};
  if (carried) GR_CHECK(carried_verdict(&y, fn, k, arg, t0, deadline));
  gr_status st = c->ops->post(k, &done);
  if (st != GR_OK || done) return settle(&y, fn, k, st, t0, 1.0, 1);
  return drive_calls(&y, fn, k, 1, &done, t0, deadline, 1.0, GR_OK); /* n = 1: folded */
}

/* NCCL's blocking calls (ROUTE_CALL, gr__seq_carried_verdict): out of line, so that the other
 * paths' calls pay one comparison for them. */
static __attribute__((noinline)) gr_status run_carried(const char *fn, gr__call *k, int arg) {
  return run_begun(fn, k, 1, arg);
}

gr_status gr__run_one(const char *fn, gr__call *k, int checked) {
  gr_comm *c = k->comm;
  /* c used by this thread while requests are outstanding on it: no other thread's sweep moves
   * them from here on (the registry). The blocking calls' one cost of the registry: this load. An
   * inner run (checked: the in-band form, a refusal) follows an outer call's claim. */
  if (!checked && __atomic_load_n(&c->pending, __ATOMIC_RELAXED) > 0) gr__requests_claim(c);
  gr__flight_poll();
  if (!checked && is_collective(k->kind)) {
    int route = gr__refusal_route(k); /* ROUTE_NONE in check mode */
    if (route == ROUTE_CALL) {
      if (gr__seq_carried_verdict(c)) return run_carried(fn, k, GR__ARG_NONE);
    } else if (route == ROUTE_AGREE) {
      if (gr__inband(k)) return gr__run_inband(fn, k, GR__ARG_NONE);
      GR_CHECK(gr__agree_call(fn, k, GR__ARG_NONE));
    } else if (c->check) {
      GR_CHECK(gr__exchange_fingerprint(fn, k, GR_OK));
    }
  } else if (checked) {
    /* On NCCL a checked ROUTE_CALL collective is the refusing rank's (gr__join_refused): its
     * verdict says so. */
    if (gr__seq_carried_verdict(c) && is_collective(k->kind) && gr__refusal_route(k) == ROUTE_CALL)
      return run_carried(fn, k, k->fe_refused ? k->fe_refused : GR__ARG_BUFFERS);
  } else if (!gr__seq_empty(c) && gr__seq_in_line(k)) {
    GR_CHECK(gr__requests_drain(fn, c)); /* NCCL's point-to-point: after the queued calls */
  }
  return run_begun(fn, k, 0, GR__ARG_NONE);
}

/* ---- refusals that run a call: the in-band form and the refusing rank's part ----------------
 * (refuse.c keeps the arithmetic they use: the verdict word, the agreement, the in-band pack.) */

/* k in its in-band form; arg is this rank's refusal (its buffers are then not touched). */
gr_status gr__run_inband(const char *fn, gr__call *k, int arg) {
  size_t n = k->count * gr__dtype_size(k->dtype), bytes = gr__inband_bytes(k);
  gr_comm *c = k->comm;
  _Alignas(16) unsigned char small[256];
  /* With a timeout MPI may still write the buffer after this returns: then it is not the stack
   * but the communicator's own buffer, kept from call to call and given up after a timeout. */
  unsigned char *p = small;
  if (bytes > sizeof small || c->timeout_s > 0) {
    if (c->inband_cap < bytes) {
      free(c->inband_buf);
      c->inband_cap = 0;
      c->inband_buf = malloc(bytes);
      if (!c->inband_buf) return gr__fail(GR_ERR_NOMEM, fn, "out of memory (%zu bytes)", bytes);
      c->inband_cap = bytes;
    }
    p = c->inband_buf;
  }
  gr__call j;
  gr__inband_pack(k, arg, p, &j);
  gr_status st = gr__run_one(fn, &j, 1);
  if (st == GR_OK) {
    if (!gr__inband_clear(&j)) { /* somebody refused: all learn who in one more round */
      st = gr__agree_call(fn, k, arg);
      if (st == GR_OK) st = gr__fail(GR_ERR_INTERNAL, fn, "a refusal was signalled but not agreed");
    } else if (n) {
      memcpy(k->recv, p, n);
    }
  }
  if (p != small && st == GR_ERR_TIMEOUT) { /* MPI may still write it */
    gr__abandon(p);
    c->inband_buf = NULL;
    c->inband_cap = 0;
  }
  return st;
}

/* This rank refused k (bad, k->fe_refused): join the exchange on the route given, then return bad
 * with this rank's own sentence (or the timeout). */
gr_status gr__join_refused(const char *fn, gr__call *k, gr_status bad, int route) {
  if (route == ROUTE_NONE) return bad;
  char own[GR__ERRLEN];
  gr__own_sentence(own, sizeof own, fn);
  gr_status st;
  int arg = k->fe_refused ? k->fe_refused : GR__ARG_BUFFERS;
  if (route == ROUTE_AGREE || route == ROUTE_VERDICT) {
    st = route == ROUTE_AGREE && gr__inband(k) ? gr__run_inband(fn, k, arg)
                                               : gr__agree_call(fn, k, arg);
  } else {
    k->send = NULL, k->recv = NULL; /* the backend posts the descriptor only */
    st = gr__run_one(fn, k, 1);
  }
  if (st == GR_ERR_TIMEOUT || st == GR_ERR_ABORTED || st == GR_ERR_NOMEM) return st;
  return gr__fail(bad, fn, "%s", own);
}

gr_status gr__requests_drain(const char *fn, gr_comm *c) {
  if (__atomic_load_n(&c->pending, __ATOMIC_RELAXED) > 0) gr__requests_claim(c);
  if (gr__list_empty(&c->defer)) return GR_OK;
  gr__seq_until u = {.kind = GR__SEQ_UNTIL_DRAINED, .c = c, .fn = fn};
  int finished;
  return gr__seq_drive(&u, 0, &finished);
}

gr_status gr__seq_request(const char *fn, gr_request *q, unsigned budget, int *done) {
  gr__call *k = &q->k;
  gr_comm *c = k->comm;
  *done = 0;
  if (!gr__fork_mine(c->fork_gen)) /* the parent's request: nothing of it may move here */
    return gr__fail(GR_ERR_STATE, fn,
                    "%s #%llu on communicator %s was started by process %d; this process is a "
                    "child of fork() and cannot test or wait for it; nothing was done",
                    gr__kind_name(k->kind), (unsigned long long)k->seq, c->id, c->pid);
  if (q->reg) reg_own(q->reg); /* this thread uses c now (a sweep elsewhere leaves it alone) */
  /* Waited for: the backend may work at full speed and sleep (gr_coll.h). Written after the claim:
   * until then the sweep of the thread that started q may be testing it. */
  if (budget == 0) k->fe_waiting = 1;
  gr__seq_until u = {.kind = GR__SEQ_UNTIL_REQUEST, .q = q};
  return gr__seq_drive(&u, budget, done);
}
