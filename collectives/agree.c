/* The one agreement round (gr_agree.h): a few 64-bit values per rank, one MPI_Iallreduce over
 * c->mpi on heap copies, waited for within the communicator's timeout by the engine's wait
 * (gr__mpi_wait_owning, comm_wait.c), which hands the copies to the lost list with the request
 * when the round is given up on. A round is posted (gr__agree_post) and waited for
 * (gr__agree_wait) in two steps, so that a group posts one per communicator before it waits for
 * any; gr__agree is both for one. The same steps carry the bounded broadcast and gather. */
#include "gr_agree.h"

#include "gr_error.h"
#include "gr_mpi_error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *op_name(gr__agree_op op) {
  return op == GR__AGREE_MIN ? "MIN" : op == GR__AGREE_MAX ? "MAX" : "MIN and MAX";
}

/* r's failure st before anything was posted: its sentence is in c->err already. */
static gr_status not_posted(gr__agree_round *r, gr_status st) {
  r->req = MPI_REQUEST_NULL;
  r->buf = NULL;
  r->st = st;
  return st;
}

gr_status gr__agree_post(gr__agree_round *r, gr_comm *c, const char *what, gr__agree_op op,
                         const int64_t *in, int64_t *out, int n) {
  r->c = c, r->what = what, r->op = op, r->out = out, r->n = n, r->deadline = 0;
  if (n < 1 || n > GR__AGREE_MAX_N ||
      (op != GR__AGREE_MIN && op != GR__AGREE_MAX && op != GR__AGREE_MINMAX))
    return not_posted(r, gr__comm_err(c, GR_ERR_INTERNAL,
                                      "the agreement on %s over communicator %s asks for %d "
                                      "value(s) with op %d (1 to %d, MIN, MAX or MINMAX); this "
                                      "rank did not join it",
                                      what, c->id, n, (int)op, GR__AGREE_MAX_N));
  /* MINMAX: one MIN over the values and their negatives (the negated MIN of -x is the MAX) */
  int m = op == GR__AGREE_MINMAX ? 2 * n : n;
  for (int i = 0; op == GR__AGREE_MINMAX && i < n; i++)
    if (in[i] == INT64_MIN)
      return not_posted(r, gr__comm_err(c, GR_ERR_INTERNAL,
                                        "the agreement on %s over communicator %s: value %d is "
                                        "INT64_MIN, which MIN and MAX in one round cannot negate; "
                                        "this rank did not join it",
                                        what, c->id, i));
  /* mine, then the result: both written by MPI until the request completes */
  int64_t *buf = malloc(2 * (size_t)m * sizeof *buf);
  if (!buf)
    return not_posted(r, gr__comm_err(c, GR_ERR_NOMEM,
                                      "out of memory for the agreement on %s over communicator "
                                      "%s; this rank did not join it",
                                      what, c->id));
  for (int i = 0; i < n; i++) {
    buf[i] = in[i];
    if (op == GR__AGREE_MINMAX) buf[n + i] = -in[i];
  }
  r->req = MPI_REQUEST_NULL;
  int rc = MPI_Iallreduce(buf, buf + m, m, MPI_INT64_T, op == GR__AGREE_MAX ? MPI_MAX : MPI_MIN,
                          c->mpi, &r->req);
  if (rc != MPI_SUCCESS) {
    free(buf); /* no request: nothing writes it */
    char e[MPI_MAX_ERROR_STRING];
    return not_posted(r, gr__comm_err(c, GR_ERR_MPI,
                                      "the agreement on %s over communicator %s: MPI_Iallreduce "
                                      "(%s of %d value(s)) failed: %s",
                                      what, c->id, op_name(op), n, gr__mpi_strerror(rc, e)));
  }
  r->buf = buf;
  r->deadline = gr__deadline(c->timeout_s);
  r->st = GR_OK;
  return GR_OK;
}

gr_status gr__agree_wait(gr__agree_round *r, size_t nr) {
  /* the earliest deadline of the rounds posted, and whose it is (for the sentence) */
  double deadline = 0;
  const gr__agree_round *by = NULL;
  for (size_t j = 0; j < nr; j++)
    if (r[j].st == GR_OK && r[j].deadline > 0 && (!by || r[j].deadline < deadline))
      deadline = r[j].deadline, by = &r[j];
  gr_status first = GR_OK;
  for (size_t j = 0; j < nr; j++) {
    gr__agree_round *x = &r[j];
    gr_comm *c = x->c;
    if (x->st != GR_OK) { /* not posted: its sentence is in c->err */
      if (first == GR_OK) first = x->st;
      continue;
    }
    /* While it waits for x, MPI's progress (any MPI call) moves the others too: a later round that
     * completed meanwhile passes its test even after the deadline. */
    gr_status st = gr__mpi_wait_owning(c, &x->req, deadline, x->buf);
    int64_t *buf = x->buf;
    x->buf = NULL; /* the lost list's or freed on failure, freed below on success */
    if (st == GR_ERR_TIMEOUT) {
      if (!by || by == x || by->c->timeout_s == c->timeout_s)
        st = gr__comm_err(c, GR_ERR_TIMEOUT,
                          "the agreement on %s over communicator %s (rank %d of %d) did not "
                          "complete within %g s (the communicator's timeout): some rank did not "
                          "join it",
                          x->what, c->id, c->rank, c->size, c->timeout_s);
      else
        st = gr__comm_err(c, GR_ERR_TIMEOUT,
                          "the agreement on %s over communicator %s (rank %d of %d) did not "
                          "complete within %g s (the timeout of communicator %s, the earliest of "
                          "the rounds waited for with it): some rank did not join it",
                          x->what, c->id, c->rank, c->size, by->c->timeout_s, by->c->id);
    } else if (st != GR_OK) { /* c->err holds MPI's words */
      char said[GR__ERRLEN];
      snprintf(said, sizeof said, "%s", c->err);
      st =
          gr__comm_err(c, st, "the agreement on %s over communicator %s: %s", x->what, c->id, said);
    } else {
      int m = x->op == GR__AGREE_MINMAX ? 2 * x->n : x->n;
      const int64_t *res = buf + m;
      for (int i = 0; i < x->n; i++) {
        x->out[i] = res[i];
        if (x->op == GR__AGREE_MINMAX) x->out[x->n + i] = -res[x->n + i];
      }
      free(buf);
    }
    x->st = st;
    if (first == GR_OK) first = st;
  }
  return first;
}

gr_status gr__agree(gr_comm *c, const char *what, gr__agree_op op, const int64_t *in, int64_t *out,
                    int n) {
  gr__agree_round r;
  GR_CHECK(gr__agree_post(&r, c, what, op, in, out, n));
  return gr__agree_wait(&r, 1);
}

gr_status gr__agree_ok(gr_comm *c, const char *what, int ok, int *all) {
  int64_t mine = ok != 0, min = 0;
  gr_status st = gr__agree(c, what, GR__AGREE_MIN, &mine, &min, 1);
  *all = st == GR_OK && min;
  return st;
}

int gr__agree_all(gr_comm *c, const char *what, int ok) {
  int all = 0;
  gr__agree_ok(c, what, ok, &all);
  return all;
}

/* The broadcast's and the gather's wait: h (heap, MPI's until req completes) within c's timeout,
 * then the sentences; GR_OK leaves h to the caller, any failure takes it. */
static gr_status wait_bytes(gr_comm *c, const char *what, const char *from, MPI_Request *req,
                            void *h) {
  gr_status st = gr__mpi_wait_owning(c, req, gr__deadline(c->timeout_s), h);
  if (st == GR_ERR_TIMEOUT)
    return gr__comm_err(c, GR_ERR_TIMEOUT,
                        "%s over communicator %s (%s) did not reach every rank within %g s (the "
                        "communicator's timeout)",
                        what, c->id, from, c->timeout_s);
  if (st != GR_OK) {
    char said[GR__ERRLEN];
    snprintf(said, sizeof said, "%s", c->err);
    return gr__comm_err(c, st, "%s over communicator %s: %s", what, c->id, said);
  }
  return GR_OK;
}

gr_status gr__agree_bcast(gr_comm *c, const char *what, void *buf, size_t bytes, int root) {
  if (!bytes || bytes > GR__AGREE_MAX_BYTES || root < 0 || root >= c->size)
    return gr__comm_err(c, GR_ERR_INTERNAL,
                        "%s over communicator %s: %zu bytes from rank %d (1 to %d bytes from a "
                        "rank of %d); this rank did not join it",
                        what, c->id, bytes, root, GR__AGREE_MAX_BYTES, c->size);
  void *h = malloc(bytes); /* written by MPI until the request completes */
  if (!h)
    return gr__comm_err(c, GR_ERR_NOMEM,
                        "out of memory for %s over communicator %s; this rank did not join it",
                        what, c->id);
  memcpy(h, buf, bytes);
  MPI_Request req = MPI_REQUEST_NULL;
  int rc = MPI_Ibcast(h, (int)bytes, MPI_BYTE, root, c->mpi, &req);
  if (rc != MPI_SUCCESS) {
    free(h);
    char e[MPI_MAX_ERROR_STRING];
    return gr__comm_err(c, GR_ERR_MPI, "%s over communicator %s: MPI_Ibcast failed: %s", what,
                        c->id, gr__mpi_strerror(rc, e));
  }
  char from[32];
  snprintf(from, sizeof from, "from rank %d", root);
  GR_CHECK(wait_bytes(c, what, from, &req, h));
  memcpy(buf, h, bytes);
  free(h);
  return GR_OK;
}

gr_status gr__agree_gather(gr_comm *c, const char *what, const void *mine, size_t bytes,
                           void *all) {
  if (!bytes || bytes > GR__AGREE_MAX_BYTES || c->size < 1)
    return gr__comm_err(c, GR_ERR_INTERNAL,
                        "%s over communicator %s: %zu bytes from each rank (1 to %d); this rank "
                        "did not join it",
                        what, c->id, bytes, GR__AGREE_MAX_BYTES);
  size_t total = (size_t)c->size * bytes;
  /* every rank's, then this rank's own past the end: written by MPI until the request completes */
  unsigned char *h = malloc(total + bytes);
  if (!h)
    return gr__comm_err(c, GR_ERR_NOMEM,
                        "out of memory for %s over communicator %s (%zu bytes); this rank did not "
                        "join it",
                        what, c->id, total + bytes);
  memcpy(h + total, mine, bytes);
  MPI_Request req = MPI_REQUEST_NULL;
  int rc = MPI_Iallgather(h + total, (int)bytes, MPI_BYTE, h, (int)bytes, MPI_BYTE, c->mpi, &req);
  if (rc != MPI_SUCCESS) {
    free(h);
    char e[MPI_MAX_ERROR_STRING];
    return gr__comm_err(c, GR_ERR_MPI, "%s over communicator %s: MPI_Iallgather failed: %s", what,
                        c->id, gr__mpi_strerror(rc, e));
  }
  GR_CHECK(wait_bytes(c, what, "from every rank", &req, h));
  memcpy(all, h, total);
  free(h);
  return GR_OK;
}
