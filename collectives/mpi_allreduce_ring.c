/* The MPI backend's pipelined ring allreduce, for larger allreduces with a timeout (see
 * the MPI backend's list of paths, path.c): reduce-scatter then allgather, P-1 steps each, the
 * bandwidth-optimal schedule MPI libraries use too. Each block of count/P elements travels in
 * segments that move through the steps independently (Open MPI's segmented ring does the same), so
 * segment j is reduced while segment j+1 is still in flight and its next step starts at once. */
#include "gr_mpi_be.h"

#include "gr_dtype.h"
#include "gr_error.h"

#include <string.h>

enum { RING_PIPE = 1 };

/* Segment size. Every message above the eager limit pays a rendezvous handshake, which waits for
 * the peer to be scheduled, so small segments lose more to handshakes than they win by overlap;
 * bench/README.md gives the sizes compared. A block under one segment goes whole. */
#define RING_SEG_BYTES (256 * 1024)

/* Block b of the ring: elements [*off, *off + *len). */
static void ring_block(const gr__call *k, int b, size_t *off, size_t *len) {
  size_t P = (size_t)k->comm->size, q = k->count / P, rm = k->count % P, ub = (size_t)b;
  *off = ub * q + (ub < rm ? ub : rm);
  *len = q + (ub < rm);
}

/* Step t (0 <= t < 2(P-1)) sends block *sb to the right and receives block *rb from the left: the
 * first P-1 steps reduce-scatter (afterwards this rank holds the result of block r+1), the rest
 * gather the results. */
static void ring_blocks(const gr__call *k, int t, int *sb, int *rb) {
  int P = k->comm->size, r = k->comm->rank;
  if (t < P - 1) {
    *sb = ((r - t) % P + P) % P;
    *rb = ((r - t - 1) % P + P) % P;
  } else {
    t -= P - 1;
    *sb = ((r + 1 - t) % P + P) % P;
    *rb = ((r - t) % P + P) % P;
  }
}

/* Segments per block: one per RING_SEG_BYTES, at most GR__MPI_RING_MAX_SEGS, one without a tag
 * per segment. */
static int ring_nsegs(const gr__call *k, const gr__mpi_be *b) {
  size_t es = gr__dtype_size(k->dtype), q = k->count / (size_t)k->comm->size;
  size_t n = ((q + 1) * es + RING_SEG_BYTES - 1) / RING_SEG_BYTES;
  if (n > GR__MPI_RING_MAX_SEGS) n = GR__MPI_RING_MAX_SEGS;
  if (n > q) n = q;
  if (n < 1 || !b->ring_tags) n = 1;
  return (int)n;
}

/* Elements per segment of n: the same for every block, so segment j always lands at the same
 * place in the receive buffer whichever block it belongs to (blocks differ by one element). */
static size_t ring_seg_elems(const gr__call *k, int n) {
  size_t maxb = k->count / (size_t)k->comm->size + 1, un = (size_t)n;
  return (maxb + un - 1) / un;
}

/* Segment j of block b: elements [*off, *off + *len) of the buffer, *in from the block's start. */
static void ring_seg(const gr__mpi_ar *a, int b, int j, size_t *off, size_t *len, size_t *in) {
  size_t bo, bl, se = ring_seg_elems(a->k, a->mask), s = (size_t)j * se;
  ring_block(a->k, b, &bo, &bl);
  *in = s;
  *off = bo + (s < bl ? s : bl);
  *len = s < bl ? (bl - s < se ? bl - s : se) : 0;
}

/* Post segment j's receive from the left and send to the right for its current step. */
static gr_status ring_seg_post(gr__mpi_ar *a, int j) {
  gr__call *k = a->k;
  gr_comm *c = k->comm;
  int P = c->size, r = c->rank, t = a->seg[j] / 2, sb, rb;
  size_t es = gr__dtype_size(k->dtype), so, sl, ro, rl, in;
  MPI_Datatype dt = gr__mpi_type(k->dtype);
  const gr__mpi_be *b = c->be;
  int tag = b->ring_tags ? a->tag + j : a->tag;
  ring_blocks(k, t, &sb, &rb);
  ring_seg(a, sb, j, &so, &sl, &in);
  ring_seg(a, rb, j, &ro, &rl, &in);
  void *into = t < P - 1 ? (char *)a->in + in * es : (char *)a->buf + ro * es;
  /* the first step sends the input itself (out of place, buf gets each block when reduced) */
  const char *from = t == 0 ? (const char *)a->src : (const char *)a->buf;
  int rc = MPI_Irecv(into, (int)rl, dt, (r + P - 1) % P, tag, c->mpi, &a->reqs[2 * j]);
  GR_CHECK(gr__mpi_rc(k, rc, "MPI_Irecv (allreduce)"));
  rc = MPI_Isend(from + so * es, (int)sl, dt, (r + 1) % P, tag, c->mpi, &a->reqs[2 * j + 1]);
  return gr__mpi_rc(k, rc, "MPI_Isend (allreduce)");
}

static size_t ring_in_bytes(const gr__call *k, const gr__mpi_be *b) {
  int n = ring_nsegs(k, b);
  return (size_t)n * ring_seg_elems(k, n) * gr__dtype_size(k->dtype);
}

static gr_status ring_start(gr__mpi_ar *a, const void *s, void *r) {
  gr__call *k = a->k;
  int n = ring_nsegs(k, k->comm->be);
  a->mask = n;
  a->buf = r;
  a->src = s;
  a->phase = RING_PIPE;
  a->nreqs = 2 * n;
  a->recvs = 0;
  for (int j = 0; j < a->nreqs; j++) {
    a->reqs[j] = MPI_REQUEST_NULL;
    if (j % 2 == 0) a->recvs |= 1ull << j;
  }
  for (int j = 0; j < n; j++) {
    a->seg[j] = 0;
    GR_CHECK(ring_seg_post(a, j));
  }
  return GR_OK;
}

/* Reduce every segment whose receive arrived, start its next step once its send is done too. */
static gr_status ring_test(gr__mpi_ar *a, int *done) {
  const gr__call *k = a->k;
  int P = k->comm->size, n = a->mask, T = 2 * (P - 1);
  size_t es = gr__dtype_size(k->dtype);
  for (;;) {
    int outc = 0, idx[2 * GR__MPI_RING_MAX_SEGS];
    int rc = MPI_Testsome(2 * n, a->reqs, &outc, idx, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) return gr__mpi_rc(a->k, rc, "MPI_Testsome (allreduce)");
    int active = 0, moved = 0;
    for (int j = 0; j < n; j++) {
      int t = a->seg[j] / 2;
      if (t >= T) continue;
      if (!(a->seg[j] & 1) && a->reqs[2 * j] == MPI_REQUEST_NULL) {
        if (t < P - 1) {
          int sb, rb;
          size_t off, len, in;
          ring_blocks(k, t, &sb, &rb);
          ring_seg(a, rb, j, &off, &len, &in);
          char *dst = (char *)a->buf + off * es;
          /* out of place: each block is reduced exactly once during the reduce-scatter, so its
           * input is copied in here, segment by segment while it is in cache */
          if (a->src != a->buf) memcpy(dst, (const char *)a->src + off * es, len * es);
          gr__reduce_host(k->dtype, k->op, dst, (char *)a->in + in * es, len);
        }
        a->seg[j] |= 1;
      }
      if ((a->seg[j] & 1) && a->reqs[2 * j + 1] == MPI_REQUEST_NULL) {
        a->seg[j] = 2 * (t + 1);
        moved = 1;
        if (t + 1 < T) GR_CHECK(ring_seg_post(a, j));
      }
      if (a->seg[j] / 2 < T) active = 1;
    }
    if (!active) {
      a->phase = GR__MPI_AR_DONE;
      *done = 1;
      return GR_OK;
    }
    if (!moved) return GR_OK;
  }
}

const gr__mpi_algo gr__mpi_allreduce_ring = {
    .name = "pipelined ring", .in_bytes = ring_in_bytes, .start = ring_start, .test = ring_test};
