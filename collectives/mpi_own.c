/* What gpurun's own allreduces of the MPI backend share (gr_mpi_be.h): the call number and tags
 * of each (take_slot), the list of those in flight (progress_oldest), their start, progress and
 * cancellation, and the post, test and forget of their rows (path.c lists one per algorithm, each
 * algorithm in a file of its own). */
#include "gr_mpi_be.h"

#include "gr_error.h"

#include <stdlib.h>

typedef gr__mpi_be mpi_be;

/* The largest receive buffer a finished own allreduce leaves to the next call (b->spare). */
#define SPARE_MAX GR__MPI_RD_MAX_BYTES

/* ---- gpurun's own allreduces: tags, the list in flight ------------------------------------- */

static void live_remove(mpi_be *b, gr__mpi_ar *a) {
  if (!a->live) return;
  gr__list_remove(&b->live, &a->node);
  a->live = 0;
}

/* Progress; *done when the result is in a->buf. */
static gr_status ar_test(gr__mpi_ar *a, int *done) {
  if (a->phase == GR__MPI_AR_DONE) {
    *done = 1;
    return GR_OK;
  }
  return a->algo->test(a, done);
}

/* Take the next call number and its tag slot; first complete the call that last had the slot if
 * it is still in flight (see GR__MPI_TAG_BASE). */
static gr_status take_slot(gr__mpi_ar *a) {
  gr__call *k = a->k;
  gr_comm *c = k->comm;
  mpi_be *b = c->be;
  uint64_t n = b->rd_calls++;
  double deadline = gr__deadline(c->timeout_s);
  while (b->live.head &&
         GR_LIST_ENTRY(b->live.head, gr__mpi_ar, node)->callno + b->tag_slots <= n) {
    gr__mpi_ar *old = GR_LIST_ENTRY(b->live.head, gr__mpi_ar, node);
    int done = 0;
    for (unsigned spin = 0; !done; spin++) {
      gr_status st = ar_test(old, &done);
      if (st != GR_OK)
        return gr__comm_err(c, st,
                            "allreduce #%llu needs the tags of allreduce #%llu, %llu calls "
                            "earlier and still in flight, which failed: %s",
                            (unsigned long long)k->seq, (unsigned long long)old->k->seq,
                            (unsigned long long)b->tag_slots, c->err);
      if (!done && (spin & 15) == 15 && gr__past(deadline))
        return gr__comm_err(c, GR_ERR_TIMEOUT,
                            "allreduce #%llu needs the tags of allreduce #%llu, "
                            "which is still in flight (%llu own allreduces in flight on one "
                            "communicator) and did not complete in time",
                            (unsigned long long)k->seq, (unsigned long long)old->k->seq,
                            (unsigned long long)b->tag_slots);
    }
    live_remove(b, old); /* finished: its owner's next test completes it */
  }
  a->callno = n;
  a->tag = GR__MPI_TAG_BASE + (int)(n % b->tag_slots) * b->tags_per_slot;
  gr__list_push_back(&b->live, &a->node);
  a->live = 1;
  return GR_OK;
}

/* Start algo on the (staged) buffers: one allocation for its state and receive buffer, the spare
 * one a finished call left when it is big enough. */
static gr_status own_start(gr__call *k, const gr__mpi_algo *algo, const void *s, void *r) {
  gr_comm *c = k->comm;
  mpi_be *b = c->be;
  gr__mpi_call *m = gr__mpi_call_of(k);
  size_t in = algo->in_bytes(k, b);
  gr__mpi_ar *a = b->spare;
  if (a && a->in_cap >= in) {
    b->spare = NULL;
  } else {
    a = malloc(sizeof *a + in);
    if (!a) return gr__comm_err(c, GR_ERR_NOMEM, "out of memory (%zu bytes)", in);
    a->in_cap = in;
  }
  a->k = k;
  a->algo = algo;
  a->in = a->data;
  a->src = s;
  a->nreqs = 0;
  a->recvs = 0;
  a->live = 0;
  gr_status st;
  GR_CHECK_GOTO(take_slot(a), st, fail);
  m->ar = a;
  return algo->start(a, s, r);
fail: /* nothing was posted into it */
  free(a);
  return st;
}

/* Progress the oldest own allreduces in flight besides k's: a program that waits for its newest
 * request first would otherwise leave the older ones' messages to pile up, and Open MPI matches
 * every arrival against the whole list of posted receives, so thousands of requests waited newest
 * first slow every match down. A call found finished leaves the list; its owner's
 * next test completes it. Errors are left for the owner's own test to report. */
static void progress_oldest(mpi_be *b, gr__mpi_ar *a) {
  int i = 0;
  GR_LIST_FOREACH(n, tmp, &b->live) {
    if (i++ == 16) break;
    gr__mpi_ar *o = GR_LIST_ENTRY(n, gr__mpi_ar, node);
    int done = 0;
    if (o != a && ar_test(o, &done) == GR_OK && done) live_remove(b, o);
  }
}

void gr__mpi_own_progress(gr_comm *c) {
  if (c->be) progress_oldest(c->be, NULL);
}

/* Our own allreduces are point to point, hence cancellable: once the receives are cancelled, the
 * waits return locally and nothing writes into the buffers any more. Returns 1 (released), or 0
 * when MPI refused to cancel or complete a receive: it may still write into a->in, which is then
 * left allocated (the forget that asked has no sentence to add: the timeout's is the one said). A
 * send that MPI refuses to free only reads. */
static int cancel_p2p(gr__mpi_ar *a) {
  int released = 1;
  for (int i = 0; i < a->nreqs; i++) {
    if (a->reqs[i] == MPI_REQUEST_NULL) continue;
    if (a->recvs & (1ull << i)) {
      if (MPI_Cancel(&a->reqs[i]) != MPI_SUCCESS ||
          MPI_Wait(&a->reqs[i], MPI_STATUS_IGNORE) != MPI_SUCCESS)
        released = 0;
    } else if (MPI_Request_free(&a->reqs[i]) != MPI_SUCCESS) {
      /* a send (Open MPI cannot cancel one) let go; refused, it still only reads */
      a->reqs[i] = MPI_REQUEST_NULL;
    }
  }
  return released;
}

/* ---- the rows of gpurun's own allreduces (path.c lists one per algorithm) ------------------- */

int gr__mpi_own_present(const gr_comm *c) { return c->size > 1; }

/* They need a timeout to honour (without one MPI's blocking call is the fastest); the sizes and
 * rank counts each serves are its row's numbers (path.c). */
int gr__mpi_own_takes(const gr__path *p, const gr__call *k) {
  (void)p;
  return !k->blocking_ok;
}

gr_status gr__mpi_own_post(const gr__path *p, gr__call *k, const void *s, void *r, int *done) {
  (void)done;
  gr__mpi_call *m = gr__mpi_call_of(k);
  gr_status st = own_start(k, p->impl, s, r);
  /* requests may be posted into its receive buffer: the state is left allocated */
  if (st != GR_OK && m->ar) live_remove(k->comm->be, m->ar);
  return st;
}

gr_status gr__mpi_own_test(gr__call *k, int *done) {
  gr__mpi_call *m = gr__mpi_call_of(k);
  mpi_be *b = k->comm->be;
  gr__mpi_ar *a = m->ar;
  if (k->fe_request) progress_oldest(b, a); /* a group tests all its calls anyway */
  gr_status st = ar_test(a, done);
  if (st != GR_OK) { /* the caller frees k after a failure: it must leave the list */
    live_remove(b, a);
    return st;
  }
  if (!*done) return GR_OK;
  live_remove(b, a);
  /* nothing writes into it any more: the next call's, the larger of the two kept, up to
   * SPARE_MAX bytes of receive buffer */
  if (a->in_cap > SPARE_MAX || (b->spare && b->spare->in_cap > a->in_cap)) {
    free(a);
  } else {
    free(b->spare);
    b->spare = a;
  }
  m->ar = NULL;
  return GR_OK;
}

int gr__mpi_own_forget(gr__call *k) {
  gr__mpi_call *m = gr__mpi_call_of(k);
  gr__mpi_ar *a = m->ar;
  int released = a->algo->forget ? a->algo->forget(a) : cancel_p2p(a);
  live_remove(k->comm->be, a);
  m->ar = NULL;
  /* its receive buffer is only received into: those receives are cancelled */
  if (released) free(a);
  return released;
}
