/* The one agreement round (gr_agree.h): a few 64-bit values per rank, one MPI_Iallreduce over
 * c->mpi on heap copies, waited for within the communicator's timeout by the engine's wait
 * (gr__mpi_wait_owning, comm_wait.c), which hands the copies to the lost list with the request
 * when the round is given up on. */
#include "gr_agree.h"

#include "gr_mpi_error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *op_name(gr__agree_op op) {
  return op == GR__AGREE_MIN ? "MIN" : op == GR__AGREE_MAX ? "MAX" : "MIN and MAX";
}

gr_status gr__agree(gr_comm *c, const char *what, gr__agree_op op, const int64_t *in, int64_t *out,
                    int n) {
  if (n < 1 || n > GR__AGREE_MAX_N ||
      (op != GR__AGREE_MIN && op != GR__AGREE_MAX && op != GR__AGREE_MINMAX))
    return gr__comm_err(c, GR_ERR_INTERNAL,
                        "the agreement on %s over communicator %s asks for %d value(s) with op %d "
                        "(1 to %d, MIN, MAX or MINMAX); this rank did not join it",
                        what, c->id, n, (int)op, GR__AGREE_MAX_N);
  /* MINMAX: one MIN over the values and their negatives (the negated MIN of -x is the MAX) */
  int m = op == GR__AGREE_MINMAX ? 2 * n : n;
  for (int i = 0; op == GR__AGREE_MINMAX && i < n; i++)
    if (in[i] == INT64_MIN)
      return gr__comm_err(c, GR_ERR_INTERNAL,
                          "the agreement on %s over communicator %s: value %d is INT64_MIN, which "
                          "MIN and MAX in one round cannot negate; this rank did not join it",
                          what, c->id, i);
  /* mine, then the result: both written by MPI until the request completes */
  int64_t *buf = malloc(2 * (size_t)m * sizeof *buf);
  if (!buf)
    return gr__comm_err(c, GR_ERR_NOMEM,
                        "out of memory for the agreement on %s over communicator %s; this rank "
                        "did not join it",
                        what, c->id);
  for (int i = 0; i < n; i++) {
    buf[i] = in[i];
    if (op == GR__AGREE_MINMAX) buf[n + i] = -in[i];
  }
  MPI_Request req = MPI_REQUEST_NULL;
  int rc = MPI_Iallreduce(buf, buf + m, m, MPI_INT64_T, op == GR__AGREE_MAX ? MPI_MAX : MPI_MIN,
                          c->mpi, &req);
  if (rc != MPI_SUCCESS) {
    free(buf); /* no request: nothing writes it */
    char e[MPI_MAX_ERROR_STRING];
    return gr__comm_err(c, GR_ERR_MPI,
                        "the agreement on %s over communicator %s: MPI_Iallreduce (%s of %d "
                        "value(s)) failed: %s",
                        what, c->id, op_name(op), n, gr__mpi_strerror(rc, e));
  }
  gr_status st = gr__mpi_wait_owning(c, &req, gr__deadline(c->timeout_s), buf);
  if (st == GR_ERR_TIMEOUT) /* buf went to the lost list with the request */
    return gr__comm_err(c, GR_ERR_TIMEOUT,
                        "the agreement on %s over communicator %s (rank %d of %d) did not complete "
                        "within %g s (the communicator's timeout): some rank did not join it",
                        what, c->id, c->rank, c->size, c->timeout_s);
  if (st != GR_OK) { /* buf is gone too; c->err holds MPI's words */
    char said[GR__ERRLEN];
    snprintf(said, sizeof said, "%s", c->err);
    return gr__comm_err(c, st, "the agreement on %s over communicator %s: %s", what, c->id, said);
  }
  const int64_t *r = buf + m;
  for (int i = 0; i < n; i++) {
    out[i] = r[i];
    if (op == GR__AGREE_MINMAX) out[n + i] = -r[n + i];
  }
  free(buf);
  return GR_OK;
}

gr_status gr__agree_ok(gr_comm *c, const char *what, int ok, int *all) {
  int64_t mine = ok != 0, min = 0;
  gr_status st = gr__agree(c, what, GR__AGREE_MIN, &mine, &min, 1);
  *all = st == GR_OK && min;
  return st;
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
  gr_status st = gr__mpi_wait_owning(c, &req, gr__deadline(c->timeout_s), h);
  if (st == GR_ERR_TIMEOUT)
    return gr__comm_err(c, GR_ERR_TIMEOUT,
                        "%s over communicator %s (from rank %d) did not reach every rank within "
                        "%g s (the communicator's timeout)",
                        what, c->id, root, c->timeout_s);
  if (st != GR_OK) {
    char said[GR__ERRLEN];
    snprintf(said, sizeof said, "%s", c->err);
    return gr__comm_err(c, st, "%s over communicator %s: %s", what, c->id, said);
  }
  memcpy(buf, h, bytes);
  free(h);
  return GR_OK;
}

int gr__agree_all(gr_comm *c, const char *what, int ok) {
  int all = 0;
  gr__agree_ok(c, what, ok, &all);
  return all;
}
