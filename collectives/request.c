/* Non-blocking requests: a gr_request is a handle on a call in the sequencer (sequencer.c,
 * gr_sequencer.h). Its start is the sequencer's submit, gr_test drives it one turn, gr_wait drives
 * it to the end. What is left here is what the handle itself decides: a rank that cannot hand out
 * a request (req NULL, inside a group), the barrier's form of that, and the arguments of gr_test
 * and gr_wait. */
#include "gr_front.h"

#include "gr_error.h"

#include <stddef.h>
#include <stdlib.h>

/* A rank that cannot hand out a request (req NULL, or the call inside a group) is a refusing rank
 * like any other: the others started theirs and wait for its part, so it starts one of its own as
 * a refusal and waits for it here, then returns its own error (the others' waits name it). */
gr_status gr__request_start(const char *fn, gr__call *k, gr_request **out) {
  return gr__request_start_fused(fn, k, GR_OK, NULL, out);
}

gr_status gr__request_start_fused(const char *fn, gr__call *k, gr_status bad, gr__fused *m,
                                  gr_request **out) {
  if (out) *out = NULL;
  gr_status alive = gr__check_alive(fn, k->comm);
  if (alive != GR_OK) {
    free(m);
    return alive;
  }
  gr_status unret = GR_OK;
  if (!out) {
    unret = gr__fail(GR_ERR_INVALID, fn, "req is NULL");
    k->fe_refused = GR__ARG_REQ;
  } else if (gr__group_depth() > 0) {
    unret = gr__fail(GR_ERR_STATE, fn, "non-blocking calls cannot be part of a group");
    k->fe_refused = GR__ARG_GROUPED;
  }
  gr_request *q = NULL;
  if (unret != GR_OK && k->kind == GR__BARRIER) {
    /* A barrier has nothing to refuse but the request itself: this rank makes the barrier as a
     * request of its own (the others' match it, a blocking one would not on MPI), waits for it
     * and returns its own error; the others' barriers complete. */
    char own[GR__ERRLEN];
    gr__own_sentence(own, sizeof own, fn);
    k->fe_refused = GR__ARG_NONE;
    GR_CHECK(gr__seq_submit(fn, k, GR_OK, m, &q));
    GR_CHECK(gr_wait(&q));
    return gr__fail(unret, fn, "%s", own);
  }
  gr_status st = gr__seq_submit(fn, k, unret != GR_OK ? unret : bad, m, &q);
  if (unret == GR_OK) {
    *out = q;
    return st;
  }
  return st == GR_OK && q ? gr_wait(&q) : st;
}

/* One turn of the drive loop: moves the calls before it, then this one as far as it goes without
 * waiting (every 16th test also every communicator this thread uses, MPI's progress rule). */
GR_API gr_status gr_test(gr_request **req, int *done) {
  if (!req || !*req || !done)
    return gr__fail(GR_ERR_INVALID, "gr_test", "req, *req or done is NULL");
  gr_status st = gr__seq_request("gr_test", *req, 1, done);
  if (*done) *req = NULL;
  return st;
}

GR_API gr_status gr_wait(gr_request **req) {
  if (!req || !*req) return gr__fail(GR_ERR_INVALID, "gr_wait", "req or *req is NULL");
  int done = 0; /* waited for: the backend may work at full speed and sleep (gr_coll.h) */
  gr_status st = gr__seq_request("gr_wait", *req, 0, &done);
  if (done) *req = NULL;
  return st;
}
