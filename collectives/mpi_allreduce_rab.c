/* The MPI backend's Rabenseifner allreduce (power-of-two ranks, 4 and up, above 32 KiB with a
 * timeout; see the MPI backend's list of paths, path.c): reduce-scatter by recursive halving, then
 * allgather by recursive doubling: the ring's bandwidth in 2 log2(P) steps instead of 2(P-1). At 2
 * ranks it is the ring's schedule; with 4 ranks on 2 cores every step waits for a peer to be
 * scheduled, so fewer steps beat the ring there (measured against raw MPI_Allreduce: bench/README.md,
 * "coll/", the before/after table; the figures live there only). Not segmented. */
#include "gr_mpi_be.h"

#include "gr_dtype.h"
#include "gr_error.h"

#include <string.h>

enum { RAB_RS = 1, RAB_AG };

/* The window this rank owns after the halving steps with masks P/2 .. stop (stop = P: none). */
static void rab_window(const gr__call *k, int stop, size_t *lo, size_t *hi) {
  int P = k->comm->size, r = k->comm->rank;
  *lo = 0;
  *hi = k->count;
  for (int m = P / 2; m >= stop && m >= 1; m /= 2) {
    size_t mid = *lo + (*hi - *lo) / 2;
    if (r & m)
      *lo = mid;
    else
      *hi = mid;
  }
}

/* Post this step's receive from the partner and send to it. */
static gr_status rab_post(gr__mpi_ar *a) {
  gr__call *k = a->k;
  gr_comm *c = k->comm;
  int partner = c->rank ^ a->mask;
  size_t es = gr__dtype_size(k->dtype), lo, hi, plo, phi;
  MPI_Datatype dt = gr__mpi_type(k->dtype);
  char *buf = a->buf;
  void *into;
  if (a->phase == RAB_RS) { /* keep one half of the window, send the other */
    size_t wlo, whi;
    rab_window(k, a->mask * 2, &wlo, &whi);
    rab_window(k, a->mask, &lo, &hi);
    plo = c->rank & a->mask ? wlo : hi;
    phi = c->rank & a->mask ? lo : whi;
    into = a->in;
    a->recvs = 1;
    a->nreqs = 2;
    a->reqs[1] = MPI_REQUEST_NULL;
    int rc = MPI_Irecv(into, (int)(hi - lo), dt, partner, a->tag, c->mpi, &a->reqs[0]);
    GR_CHECK(gr__mpi_rc(k, rc, "MPI_Irecv (allreduce)"));
    rc = MPI_Isend(buf + plo * es, (int)(phi - plo), dt, partner, a->tag, c->mpi, &a->reqs[1]);
    return gr__mpi_rc(k, rc, "MPI_Isend (allreduce)");
  }
  /* gather: send the window owned after the halving step with this mask, receive its sibling */
  size_t wlo, whi;
  rab_window(k, a->mask * 2, &wlo, &whi);
  rab_window(k, a->mask, &lo, &hi);
  plo = c->rank & a->mask ? wlo : hi;
  phi = c->rank & a->mask ? lo : whi;
  a->recvs = 1;
  a->nreqs = 2;
  a->reqs[1] = MPI_REQUEST_NULL;
  int rc = MPI_Irecv(buf + plo * es, (int)(phi - plo), dt, partner, a->tag, c->mpi, &a->reqs[0]);
  GR_CHECK(gr__mpi_rc(k, rc, "MPI_Irecv (allreduce)"));
  rc = MPI_Isend(buf + lo * es, (int)(hi - lo), dt, partner, a->tag, c->mpi, &a->reqs[1]);
  return gr__mpi_rc(k, rc, "MPI_Isend (allreduce)");
}

static size_t rab_in_bytes(const gr__call *k, const gr__mpi_be *b) {
  (void)b;
  return (k->count / 2 + 1) * gr__dtype_size(k->dtype);
}

static gr_status rab_start(gr__mpi_ar *a, const void *s, void *r) {
  gr__call *k = a->k;
  if (s != r) memcpy(r, s, k->count * gr__dtype_size(k->dtype));
  a->buf = r;
  a->phase = RAB_RS;
  a->mask = k->comm->size / 2;
  return rab_post(a);
}

static gr_status rab_test(gr__mpi_ar *a, int *done) {
  gr__call *k = a->k;
  for (;;) {
    int flag = 0;
    int rc = MPI_Testall(a->nreqs, a->reqs, &flag, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) return gr__mpi_rc(k, rc, "MPI_Testall (allreduce)");
    if (!flag) return GR_OK;
    if (a->phase == RAB_RS) {
      size_t lo, hi;
      rab_window(k, a->mask, &lo, &hi);
      gr__reduce_host(k->dtype, k->op, (char *)a->buf + lo * gr__dtype_size(k->dtype), a->in,
                      hi - lo);
      if (a->mask > 1)
        a->mask /= 2;
      else
        a->phase = RAB_AG; /* the gather starts with mask 1 */
    } else if (a->mask * 2 < k->comm->size) {
      a->mask *= 2;
    } else {
      a->phase = GR__MPI_AR_DONE;
      *done = 1;
      return GR_OK;
    }
    GR_CHECK(rab_post(a));
  }
}

const gr__mpi_algo gr__mpi_allreduce_rab = {
    .name = "Rabenseifner", .in_bytes = rab_in_bytes, .start = rab_start, .test = rab_test};
