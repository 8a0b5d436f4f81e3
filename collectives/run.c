/* Execution of a call: its flight record and counters, and the timeout's sentence. The phases of a
 * call and the loop that drives them, the blocking path's included, are the sequencer's
 * (sequencer.c). */
#include "gr_front.h"

#include "gr_dtype.h"
#include "gr_error.h"
#include "gr_flight.h"
#include "gr_log.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    gr__comm_err(c, GR_ERR_TIMEOUT, "on this node %s", gone);
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
