/* The MPI backend's recursive-doubling allreduce, for small allreduces with a timeout (see the
 * MPI backend's list of paths, path.c): Open MPI's non-blocking collectives (libnbc) cost several
 * microseconds more than its blocking ones at these sizes, while point-to-point requests are as
 * fast as they get. Ranks above the largest power of two fold into a partner first and get the
 * result back at the end. */
#include "gr_mpi_be.h"

#include "gr_dtype.h"
#include "gr_error.h"

#include <string.h>

enum { RD_FOLD_SEND = 1, RD_FOLD_RECV, RD_LOOP, RD_UNFOLD_SEND, RD_UNFOLD_RECV };

/* Messages go in chunks of at most RD_CHUNK bytes, which stay under the shared-memory transport's
 * eager limit (a 4 KiB message already takes the rendezvous path, several times slower). A message
 * of up to RD_INLINE bytes is sent by Open MPI's ob1 at once, without a request (its send_inline);
 * a larger one gets a request that completes only when the receiver hands the fragment back, one
 * more wait per step. The in-band form's flag element takes a 256-byte allreduce to 260 bytes, so
 * a message of up to twice RD_INLINE goes as two that each fit. */
#define RD_CHUNK 2048
#define RD_INLINE 256

/* Post the chunks of one message (dir 1: a send to peer, 0: a receive from it). */
static gr_status rd_chunks(gr__mpi_ar *a, int dir, void *buf, int peer) {
  gr__call *k = a->k;
  gr_comm *c = k->comm;
  size_t bytes = k->count * gr__dtype_size(k->dtype);
  size_t chunk = bytes > RD_INLINE && bytes <= 2 * RD_INLINE ? RD_INLINE : RD_CHUNK;
  size_t off = 0;
  do {
    int len = (int)(bytes - off < chunk ? bytes - off : chunk);
    if (!dir) a->recvs |= 1ull << a->nreqs;
    MPI_Request *q = &a->reqs[a->nreqs++];
    int rc = dir ? MPI_Isend((char *)buf + off, len, MPI_BYTE, peer, a->tag, c->mpi, q)
                 : MPI_Irecv((char *)buf + off, len, MPI_BYTE, peer, a->tag, c->mpi, q);
    if (rc != MPI_SUCCESS)
      return gr__mpi_rc(k, rc, dir ? "MPI_Isend (allreduce)" : "MPI_Irecv (allreduce)");
    off += (size_t)len;
  } while (off < bytes);
  return GR_OK;
}

static gr_status rd_post_step(gr__mpi_ar *a) {
  gr_comm *c = a->k->comm;
  int P = c->size, r = c->rank, pof2 = gr__mpi_pof2(P), rem = P - pof2;
  a->nreqs = 0;
  a->recvs = 0;
  switch (a->phase) {
  case RD_FOLD_SEND:
    return rd_chunks(a, 1, a->buf, r + 1);
  case RD_FOLD_RECV:
    return rd_chunks(a, 0, a->in, r - 1);
  case RD_LOOP: {
    int nr = r < 2 * rem ? r / 2 : r - rem, pn = nr ^ a->mask;
    int partner = pn < rem ? pn * 2 + 1 : pn + rem;
    GR_CHECK(rd_chunks(a, 0, a->in, partner));
    return rd_chunks(a, 1, a->buf, partner);
  }
  case RD_UNFOLD_SEND:
    return rd_chunks(a, 1, a->buf, r - 1);
  case RD_UNFOLD_RECV:
    return rd_chunks(a, 0, a->buf, r + 1);
  default:
    return GR_OK;
  }
}

/* The phase after the current one completed (0: before the first). */
static int rd_next(gr__mpi_ar *a) {
  gr_comm *c = a->k->comm;
  int P = c->size, r = c->rank, pof2 = gr__mpi_pof2(P), rem = P - pof2;
  switch (a->phase) {
  case RD_FOLD_SEND:
    return RD_UNFOLD_RECV; /* idle until the result comes back */
  case RD_FOLD_RECV:
  case 0:
    a->mask = 1;
    return pof2 > 1 ? RD_LOOP : (r < 2 * rem ? RD_UNFOLD_SEND : GR__MPI_AR_DONE);
  case RD_LOOP:
    a->mask <<= 1;
    if (a->mask < pof2) return RD_LOOP;
    return r < 2 * rem ? RD_UNFOLD_SEND : GR__MPI_AR_DONE;
  default:
    return GR__MPI_AR_DONE;
  }
}

static size_t rd_in_bytes(const gr__call *k, const gr__mpi_be *b) {
  (void)b;
  size_t bytes = k->count * gr__dtype_size(k->dtype);
  return bytes ? bytes : 1;
}

static gr_status rd_start(gr__mpi_ar *a, const void *s, void *r) {
  gr__call *k = a->k;
  gr_comm *c = k->comm;
  if (s != r) memcpy(r, s, k->count * gr__dtype_size(k->dtype));
  a->buf = r;
  int rem = c->size - gr__mpi_pof2(c->size);
  a->phase = 0;
  if (c->rank < 2 * rem)
    a->phase = c->rank % 2 == 0 ? RD_FOLD_SEND : RD_FOLD_RECV;
  else
    a->phase = rd_next(a); /* from phase 0 */
  if (a->phase == GR__MPI_AR_DONE) return GR_OK;
  return rd_post_step(a);
}

static gr_status rd_test(gr__mpi_ar *a, int *done) {
  gr__call *k = a->k;
  for (;;) {
    if (a->phase == GR__MPI_AR_DONE) {
      *done = 1;
      return GR_OK;
    }
    int flag = 0;
    int rc = MPI_Testall(a->nreqs, a->reqs, &flag, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) return gr__mpi_rc(k, rc, "MPI_Testall (allreduce)");
    if (!flag) return GR_OK;
    if (a->phase == RD_FOLD_RECV || a->phase == RD_LOOP)
      gr__reduce_host(k->dtype, k->op, a->buf, a->in, k->count);
    a->phase = rd_next(a);
    if (a->phase != GR__MPI_AR_DONE) GR_CHECK(rd_post_step(a));
  }
}

const gr__mpi_algo gr__mpi_allreduce_rd = {
    .name = "recursive doubling", .in_bytes = rd_in_bytes, .start = rd_start, .test = rd_test};
