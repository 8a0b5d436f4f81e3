/* Execution of a call: its flight record and counters, the timeout's sentence, and the one progress
 * loop that tests posted calls until each is settled (single calls, groups). */
#include "gr_front.h"

#include "gr_dtype.h"
#include "gr_error.h"
#include "gr_flight.h"
#include "gr_log.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Buffers a timed-out MPI request may still use (a collective request cannot be cancelled): kept
 * reachable for the rest of the process, never freed, so that a late write lands in memory nobody
 * else owns. Few: a timeout aborts the communicator. */
void gr__abandon(void *p) {
  static struct abandoned {
    struct abandoned *next;
    void *p;
  } * list;
  static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  struct abandoned *a = malloc(sizeof *a);
  if (!a) return; /* then it is merely leaked */
  a->p = p;
  pthread_mutex_lock(&lock);
  a->next = list;
  list = a;
  pthread_mutex_unlock(&lock);
}

/* ---- execution ---------------------------------------------------------------------------- */

static size_t call_bytes(const gr__call *k) {
  const gr__call *u = shown(k);
  if (u->kind == GR__BARRIER) return 0;
  size_t b = u->count * gr__dtype_size(u->dtype);
  return u->kind == GR__ALLTOALL || u->kind == GR__REDUCE_SCATTER ? b * (size_t)u->comm->size : b;
}

void gr__begin(gr__call *k) {
  gr_comm *c = k->comm;
  const gr__call *u = shown(k);
  k->seq = ++c->seq;
  k->t_start = gr__wall_now();
  int peer = u->kind == GR__SEND || u->kind == GR__RECV;
  k->flight_slot = gr__flight_begin(
      c->flight, k->seq, (int)u->kind, u->count, u->kind == GR__BARRIER ? -1 : (int)u->dtype,
      peer ? -1 : u->root, peer ? u->root : -1, peer ? GR__P2P_TAG : -1, k->t_start);
}

/* share: the part of the elapsed time charged to this call in the counters. A call of a group of
 * n is charged 1/n of its time, so that the calls of a group, which all run during one
 * gr_group_end, add up to no more than the time spent in it. */
void gr__end_share(gr__call *k, gr__flight_state fs, double t0, double share) {
  gr_comm *c = k->comm;
  double t1 = gr__mono_now();
  gr__flight_end(c->flight, k->flight_slot, k->seq, fs, k->t_start + (t1 - t0));
  if (k->fe_refused) return; /* this rank's refusal joining the exchange: not a call it made */
  gr__kind kind = shown(k)->kind;
  c->stats.calls[kind]++;
  c->stats.bytes[kind] += call_bytes(k);
  c->stats.seconds[kind] += (t1 - t0) * share;
  if (fs == GR__FL_FAILED) c->stats.failures++;
  if (fs == GR__FL_TIMEOUT) c->stats.timeouts++;
}

gr_status gr__timed_out(const char *fn, gr__call *k, const char *what) {
  gr_comm *c = k->comm;
  char path[1024] = "";
  if (gr__flight_dump("timeout", path, sizeof path) != GR_OK) {
    GR_WARN("%s", gr_last_error());
    snprintf(path, sizeof path, "not written");
  }
  char gone[GR__ERRLEN - 32];
  if (!c->err[0] && c->ops->gone && c->ops->gone(c, gone, sizeof gone) > 0)
    snprintf(c->err, sizeof c->err, "on this node %s", gone);
  gr__comm_abort_internal(c);
  return gr__fail(
      GR_ERR_TIMEOUT, fn,
      "%s%s%s #%llu (count=%zu, dtype=%s) on communicator %s "
      "(rank %d of %d, %s backend) did not complete within %g s%s%s%s; the communicator is "
      "now aborted (flight recorder: %s)",
      what, what[0] ? " " : "", gr__kind_name(shown(k)->kind), (unsigned long long)k->seq,
      shown_count(k), shown(k)->kind == GR__BARRIER ? "none" : gr__dtype_name(shown(k)->dtype),
      c->id, c->rank, c->size, c->ops->name, c->timeout_s, c->err[0] ? " (" : "", c->err,
      c->err[0] ? ")" : "", path);
}

/* ---- the one progress loop ------------------------------------------------------------ */

/* A call's outcome st (from post or test): its flight record and counters, and (say) the sentence;
 * without say the failure is only counted (an earlier one's sentence stands). */
gr_status gr__settle(const loop_style *y, gr__call *k, gr_status st, double t0, double share,
                     int say) {
  gr_comm *c = k->comm;
  int timeout = st == GR_ERR_TIMEOUT && y->backend_timeout;
  gr__end_share(k, st == GR_OK ? GR__FL_DONE : timeout ? GR__FL_TIMEOUT : GR__FL_FAILED, t0, share);
  if (st == GR_OK || !say) return st;
  if (timeout) return gr__timed_out(y->fn, k, y->timeout_what);
  if (y->name_backend)
    return gr__fail(st, y->fn, "%s #%llu on communicator %s (%s backend): %s",
                    gr__kind_name(shown(k)->kind), (unsigned long long)k->seq, c->id, c->ops->name,
                    c->err);
  return gr__fail(st, y->fn, "%s #%llu on communicator %s: %s", gr__kind_name(shown(k)->kind),
                  (unsigned long long)k->seq, c->id, c->err);
}

/* Test the posted calls k[0..n) whose done[i] is 0 until all are settled (blocking calls and
 * groups; a request's gr_test sweeps its own call and verdict, with gr__settle() for the outcome).
 * first: a failure the caller met already (while posting), whose sentence stands.
 * Every 16th sweep checks the deadline (0 = none) and, before it, serves the flight recorder's
 * signal. Past the deadline every unsettled call is forgotten, recorded as timed out and its
 * communicator aborted; the first one's sentence is returned. Otherwise the first failure's
 * sentence (the others are still waited for: the peers wait for them too). done[i] = 1 once call i
 * is settled. */
gr_status gr__progress(const loop_style *y, gr__call *k, size_t n, int *done, double t0,
                       double deadline, double share, gr_status first) {
  size_t left = 0;
  for (size_t i = 0; i < n; i++)
    left += !done[i];
  for (unsigned spin = 0; left > 0; spin++) {
    for (size_t i = 0; i < n; i++) {
      if (done[i]) continue;
      gr_status st = k[i].comm->ops->test(&k[i], &done[i]);
      if (st != GR_OK || done[i]) {
        done[i] = 1;
        left--;
        st = gr__settle(y, &k[i], st, t0, share, first == GR_OK);
        if (first == GR_OK) first = st;
      }
    }
    if (left > 0 && (spin & 15) == 15) {
      if (deadline > 0 && gr__mono_now() > deadline) {
        gr_status st = GR_OK;
        for (size_t i = 0; i < n; i++) {
          if (done[i]) continue;
          done[i] = 1;
          k[i].comm->ops->forget(&k[i]);
          gr__end_share(&k[i], GR__FL_TIMEOUT, t0, share);
          if (st == GR_OK) st = gr__timed_out(y->fn, &k[i], y->timeout_what);
          gr__comm_abort_internal(k[i].comm);
        }
        return st;
      }
      gr__flight_poll();
      /* A peer may wait in a call of this rank's requests (a deferred post, a call that moves
       * only when tested) before it gets to this one: MPI's progress rule. */
      if (gr__requests_outstanding()) gr__requests_sweep(NULL);
    }
  }
  return first;
}

gr_status gr__run_one(const char *fn, gr__call *k, int checked) {
  gr_comm *c = k->comm;
  /* c used by this thread while requests are outstanding on it: no other thread's sweep moves
   * them from here on (request.c). The blocking calls' one cost of the registry: this load. An
   * inner run (checked: the in-band form, a refusal) follows an outer call's claim. */
  if (!checked && __atomic_load_n(&c->pending, __ATOMIC_RELAXED) > 0) gr__requests_claim(c);
  gr__flight_poll();
  if (!checked && is_collective(k->kind)) {
    if (c->check)
      GR_CHECK(gr__exchange_fingerprint(fn, k, GR_OK));
    else if (gr__refusal_route(k) == ROUTE_AGREE) {
      if (gr__inband(k)) return gr__run_inband(fn, k, GR__ARG_NONE);
      GR_CHECK(gr__agree_call(fn, k, GR__ARG_NONE));
    }
  }
  gr__begin(k);
  double t0 = gr__mono_now(), deadline = c->timeout_s > 0 ? t0 + c->timeout_s : 0.0;
  k->blocking_ok = c->timeout_s <= 0;
  int done = 0;
  c->err[0] = '\0';
  const loop_style y = {fn, "", 1, 1};
  gr_status st = c->ops->post(k, &done);
  if (st != GR_OK || done) return gr__settle(&y, k, st, t0, 1.0, 1);
  return gr__progress(&y, k, 1, &done, t0, deadline, 1.0, GR_OK);
}
