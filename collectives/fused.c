/* gr_allreduce_multi, the fused allreduce of several buffers: one call's checks and one verdict
 * for all of them, then one packed allreduce where the backend takes it, or a group of one
 * allreduce per buffer. */
#include "gr_front.h"

#include "gr_dtype.h"
#include "gr_error.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One fused call's checks, the same for the blocking and the non-blocking form: GR_OK or this
 * rank's refusal (its sentence recorded, *arg the refused argument); *total the packed count and
 * *hash the per-buffer counts and in-place forms. *joinable says whether a refusing rank still
 * knows the total, so that it can take part in the exchange (coll.h, Errors). */
typedef struct {
  size_t total;
  uint64_t hash;
  int arg, joinable;
} fused_check;

static gr_status check_fused(const char *fn, const void *const *send, void *const *recv,
                             const size_t *counts, size_t nbufs, gr_dtype dtype, gr_op op,
                             gr_comm *comm, fused_check *f) {
  gr_status bad = GR_OK;
  f->arg = GR__ARG_NONE;
  f->total = 0;
  f->hash = 1469598103934665603ull;
  if (nbufs > 0 && (!send || !recv || !counts)) {
    bad = gr__fail(GR_ERR_INVALID, fn, "send, recv or counts is NULL with nbufs %zu", nbufs);
    f->arg = GR__ARG_BUFFERS;
  }
  for (size_t i = 0; i < nbufs && bad == GR_OK; i++) {
    gr__call k = CALL_INIT(GR__ALLREDUCE, comm);
    k.send = send[i], k.recv = recv[i], k.count = counts[i], k.dtype = dtype, k.op = op;
    bad = gr__validate(fn, &k);
    f->arg = k.fe_refused;
    if (bad == GR_OK && counts[i] > SIZE_MAX - f->total) {
      bad = gr__fail(GR_ERR_INVALID, fn, "the counts overflow size_t at buffer %zu", i);
      f->arg = GR__ARG_COUNT;
    }
    f->total += counts[i];
    f->hash = gr__fnv(gr__fnv(f->hash, counts[i]), (uint64_t)gr__inplace_form(&k));
  }
  size_t es = gr__dtype_size(dtype);
  if (bad == GR_OK && es && f->total > (size_t)PTRDIFF_MAX / es) { /* the packed total too */
    bad = gr__fail(GR_ERR_INVALID, fn,
                   "the counts add up to %zu elements of %s, which overflows "
                   "the address space",
                   f->total, gr__dtype_name(dtype));
    f->arg = GR__ARG_COUNT;
  }
  f->joinable = bad == GR_OK || (counts && f->arg != GR__ARG_COUNT);
  if (bad != GR_OK && f->joinable) {
    f->total = 0;
    for (size_t i = 0; i < nbufs; i++)
      f->total += counts[i] <= SIZE_MAX - f->total ? counts[i] : 0;
  }
  return bad;
}

GR_API gr_status gr_allreduce_multi(const void *const *send, void *const *recv,
                                    const size_t *counts, size_t nbufs, gr_dtype dtype, gr_op op,
                                    gr_comm *comm, gr_stream stream) {
  static const char fn[] = "gr_allreduce_multi";
  GR_CHECK(gr__check_alive(fn, comm));
  if (gr__group_depth() == 0 && !gr__list_empty(&comm->defer))
    GR_CHECK(gr__requests_drain(fn, comm));
  fused_check fc;
  gr_status bad = check_fused(fn, send, recv, counts, nbufs, dtype, op, comm, &fc);
  /* A refusing rank joins the exchange (coll.h, Errors) with the call's total count, which it
   * knows while it has the counts. */
  int arg = fc.arg, joinable = fc.joinable;
  size_t total = fc.total, es = gr__dtype_size(dtype);
  uint64_t hash = fc.hash;
  gr__call k = CALL_INIT(GR__ALLREDUCE, comm);
  k.count = total, k.dtype = dtype, k.op = op, k.stream = stream;
  int packed =
      gr__group_depth() == 0 && (comm->ops->caps & GR__CAP_PACK_MULTI) && !comm->gpu_buffers;
  if (comm->check && gr__group_depth() == 0) {
    /* One fingerprint for the whole call (buffer counts and forms hashed), also when a rank
     * refused it or has no buffers: every rank returns the same. */
    k.fe_refused = arg;
    fingerprint f = gr__fingerprint_of(&k, bad);
    f.hash = bad == GR_OK ? gr__fnv(hash, nbufs) : 0;
    f.inplace = -1;
    exchange x;
    /* out of memory: its sentence replaced bad's, and the status goes with the sentence */
    GR_CHECK(gr__exchange_post(fn, comm, &x, f));
    gr_status st = x.rc == MPI_SUCCESS ? gr__mpi_wait(comm, &x.req, gr__deadline(comm->timeout_s))
                                       : GR_ERR_MPI;
    if (st == GR_ERR_TIMEOUT) {
      gr__abandon(x.all);
      k.seq = comm->seq + 1;
      comm->err[0] = '\0';
      return gr__timed_out(fn, &k, "the check-mode fingerprint exchange before");
    }
    if (st != GR_OK) { /* comm->err: MPI_Iallgather's or MPI_Test's failure */
      free(x.all);
      return bad != GR_OK ? bad
                          : gr__fail(GR_ERR_MPI, fn,
                                     "check mode: the fingerprint exchange failed: %s", comm->err);
    }
    GR_CHECK(gr__exchange_verdict(fn, comm, &x, bad));
  } else if (bad != GR_OK && gr__group_depth() == 0 && joinable && nbufs > 0) {
    /* Unpacked, the others agree in the group below (one verdict, as ROUTE_AGREE does). */
    int route = gr__refusal_route(&k);
    k.fe_refused = arg;
    return gr__join_refused(fn, &k, bad, packed || route == ROUTE_NONE ? route : ROUTE_VERDICT);
  }
  if (bad != GR_OK) return bad;
  if (nbufs == 0) return GR_OK;
  if (!packed) {
    /* Checked above as one call; inside a user's group each buffer is a grouped call (and
     * checked with the group). */
    int was = comm->check;
    if (gr__group_depth() == 0) comm->check = 0;
    gr_status st = gr_group_start();
    for (size_t i = 0; i < nbufs && st == GR_OK; i++)
      st = gr_allreduce(send[i], recv[i], counts[i], dtype, op, comm, stream);
    gr_status st2 = gr_group_end();
    comm->check = was;
    return st != GR_OK ? st : st2;
  }
  char *pack = malloc(total * es + 1);
  if (!pack) return gr__fail(GR_ERR_NOMEM, fn, "out of memory packing %zu elements", total);
  gr__fused_pack((unsigned char *)pack, send, counts, nbufs, es);
  k.send = k.recv = pack;
  gr_status st = gr__run_one(fn, &k, comm->check);
  if (st == GR_OK) {
    gr__fused_unpack(recv, (const unsigned char *)pack, counts, nbufs, es);
    free(pack);
  } else if (st != GR_ERR_TIMEOUT) {
    free(pack); /* after a timeout MPI may still write it */
  }
  return st;
}

GR_API gr_status gr_iallreduce_multi(const void *const *send, void *const *recv,
                                     const size_t *counts, size_t nbufs, gr_dtype dtype, gr_op op,
                                     gr_comm *comm, gr_stream stream, gr_request **req) {
  static const char fn[] = "gr_iallreduce_multi";
  if (req) *req = NULL;
  GR_CHECK(gr__check_alive(fn, comm));
  if (!(comm->ops->caps & GR__CAP_PACK_MULTI) || comm->gpu_buffers)
    /* the same on every rank: a property of the communicator */
    return gr__fail(GR_ERR_UNSUPPORTED, fn,
                    "the %s backend%s packs no fused call; start one gr_iallreduce per buffer",
                    comm->ops->name, comm->gpu_buffers ? " with device buffers" : "");
  fused_check fc;
  gr_status bad = check_fused(fn, send, recv, counts, nbufs, dtype, op, comm, &fc);
  if (bad != GR_OK && !fc.joinable) return bad;
  size_t es = gr__dtype_size(dtype), n = bad == GR_OK ? nbufs : 0;
  es = es ? es : 1; /* a refused dtype: the refusal's call still packs its total as bytes */
  /* one block: the header, the pointers, the counts, then the pack (aligned for any element) */
  size_t head = sizeof(gr__fused) + n * (sizeof(void *) + sizeof(size_t));
  head = (head + 63) & ~(size_t)63;
  gr__fused *m = calloc(1, head + fc.total * es + 1);
  if (!m) return gr__fail(GR_ERR_NOMEM, fn, "out of memory packing %zu elements", fc.total);
  m->nbufs = n;
  m->es = es;
  m->recv = (void **)(m + 1);
  m->counts = (size_t *)(m->recv + n);
  m->pack = (unsigned char *)m + head;
  if (n) {
    memcpy(m->recv, recv, n * sizeof *m->recv);
    memcpy(m->counts, counts, n * sizeof *m->counts);
  }
  gr__fused_pack(m->pack, send, counts, n, es);
  gr__call k = CALL_INIT(GR__ALLREDUCE, comm);
  k.send = k.recv = m->pack;
  k.count = fc.total, k.dtype = dtype, k.op = op, k.stream = stream;
  k.fe_refused = bad == GR_OK ? GR__ARG_NONE : fc.arg;
  return gr__request_start_fused(fn, &k, bad, m, req);
}
