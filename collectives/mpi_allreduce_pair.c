/* The MPI backend's allreduce for two ranks and tiny messages (its row in path.c: two ranks, up to
 * 256 bytes, Open MPI's inline send; with a timeout, as every own allreduce): one exchange, the
 * input sent as it is and the peer's received into the call's receive buffer, then one local
 * reduce. Recursive doubling does the same exchange at two ranks, but first copies the input into
 * the result and reduces op(mine, peer's), which is op(a0, a1) on rank 0 and op(a1, a0) on rank 1.
 * Here both ranks compute op(rank 0's, rank 1's) in that order, so the two results are the same
 * bit for bit whatever the op's rounding in its operands' order (fp16/bf16 round once per step).
 * Tags, the list in flight and cancellation on a timeout are the own allreduces' (mpi_own.c). */
#include "gr_mpi_be.h"

#include "gr_dtype.h"
#include "gr_error.h"

#include <string.h>

static size_t pair_in_bytes(const gr__call *k, const gr__mpi_be *b) {
  (void)b;
  size_t bytes = k->count * gr__dtype_size(k->dtype);
  return bytes ? bytes : 1;
}

/* Post the receive of the peer's input into a->in and the send of this rank's (s, untouched until
 * the result is computed: in place, s is the result buffer). */
static gr_status pair_start(gr__mpi_ar *a, const void *s, void *r) {
  gr__call *k = a->k;
  gr_comm *c = k->comm;
  int bytes = (int)(k->count * gr__dtype_size(k->dtype)), peer = 1 - c->rank;
  a->buf = r;
  a->phase = 1;
  a->nreqs = 0;
  a->recvs = 1; /* reqs[0]: the receive, cancelled by forget */
  int rc = MPI_Irecv(a->in, bytes, MPI_BYTE, peer, a->tag, c->mpi, &a->reqs[a->nreqs++]);
  GR_CHECK(gr__mpi_rc(k, rc, "MPI_Irecv (two-rank allreduce)"));
  rc = MPI_Isend(s, bytes, MPI_BYTE, peer, a->tag, c->mpi, &a->reqs[a->nreqs++]);
  return gr__mpi_rc(k, rc, "MPI_Isend (two-rank allreduce)");
}

/* Once both requests completed: the result, op(rank 0's, rank 1's), in a->buf. */
static gr_status pair_test(gr__mpi_ar *a, int *done) {
  gr__call *k = a->k;
  int flag = 0;
  int rc = MPI_Testall(a->nreqs, a->reqs, &flag, MPI_STATUSES_IGNORE);
  if (rc != MPI_SUCCESS) return gr__mpi_rc(k, rc, "MPI_Testall (two-rank allreduce)");
  if (!flag) return GR_OK;
  size_t bytes = k->count * gr__dtype_size(k->dtype);
  if (k->comm->rank == 0) { /* mine, then the peer's */
    if (a->src != a->buf) memcpy(a->buf, a->src, bytes);
    gr__reduce_host(k->dtype, k->op, a->buf, a->in, k->count);
  } else { /* the peer's (rank 0's), then mine */
    gr__reduce_host(k->dtype, k->op, a->in, a->src, k->count);
    memcpy(a->buf, a->in, bytes);
  }
  a->phase = GR__MPI_AR_DONE;
  *done = 1;
  return GR_OK;
}

const gr__mpi_algo gr__mpi_allreduce_pair = {
    .name = "two-rank exchange", .in_bytes = pair_in_bytes, .start = pair_start, .test = pair_test};
