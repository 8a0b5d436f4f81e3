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

GR_API gr_status gr_allreduce_multi(const void *const *send, void *const *recv,
                                    const size_t *counts, size_t nbufs, gr_dtype dtype, gr_op op,
                                    gr_comm *comm, gr_stream stream) {
  static const char fn[] = "gr_allreduce_multi";
  GR_CHECK(gr__check_alive(fn, comm));
  if (gr__group_depth() == 0 && !gr__list_empty(&comm->defer))
    GR_CHECK(gr__requests_drain(fn, comm));
  gr_status bad = GR_OK;
  int arg = GR__ARG_NONE;
  size_t total = 0;
  uint64_t hash = 1469598103934665603ull; /* the per-buffer counts and in-place forms */
  if (nbufs > 0 && (!send || !recv || !counts)) {
    bad = gr__fail(GR_ERR_INVALID, fn, "send, recv or counts is NULL with nbufs %zu", nbufs);
    arg = GR__ARG_BUFFERS;
  }
  for (size_t i = 0; i < nbufs && bad == GR_OK; i++) {
    gr__call k = CALL_INIT(GR__ALLREDUCE, comm);
    k.send = send[i], k.recv = recv[i], k.count = counts[i], k.dtype = dtype, k.op = op;
    bad = gr__validate(fn, &k);
    arg = k.fe_refused;
    if (bad == GR_OK && counts[i] > SIZE_MAX - total) {
      bad = gr__fail(GR_ERR_INVALID, fn, "the counts overflow size_t at buffer %zu", i);
      arg = GR__ARG_COUNT;
    }
    total += counts[i];
    hash = gr__fnv(gr__fnv(hash, counts[i]), (uint64_t)gr__inplace_form(&k));
  }
  size_t es = gr__dtype_size(dtype);
  if (bad == GR_OK && es && total > (size_t)PTRDIFF_MAX / es) { /* the packed total too */
    bad = gr__fail(GR_ERR_INVALID, fn,
                   "the counts add up to %zu elements of %s, which overflows "
                   "the address space",
                   total, gr__dtype_name(dtype));
    arg = GR__ARG_COUNT;
  }
  /* A refusing rank joins the exchange (coll.h, Errors) with the call's total count, which it
   * knows while it has the counts. */
  int joinable = bad == GR_OK || (counts && arg != GR__ARG_COUNT);
  if (bad != GR_OK && joinable) {
    total = 0;
    for (size_t i = 0; i < nbufs; i++)
      total += counts[i] <= SIZE_MAX - total ? counts[i] : 0;
  }
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
    gr_status st = gr__exchange_post(fn, comm, &x, f);
    if (st != GR_OK) return bad != GR_OK ? bad : st;
    st = x.rc == MPI_SUCCESS ? gr__mpi_wait(comm, &x.req, gr__deadline(comm->timeout_s))
                             : GR_ERR_MPI;
    if (st == GR_ERR_TIMEOUT) {
      gr__abandon(x.all);
      k.seq = comm->seq + 1;
      comm->err[0] = '\0';
      return gr__timed_out(fn, &k, "the check-mode fingerprint exchange before");
    }
    if (st != GR_OK) {
      free(x.all);
      return bad != GR_OK ? bad : gr__fail(GR_ERR_MPI, fn, "check mode: MPI_Iallgather failed");
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
  size_t off = 0;
  for (size_t i = 0; i < nbufs; i++) {
    if (counts[i]) memcpy(pack + off, send[i], counts[i] * es);
    off += counts[i] * es;
  }
  k.send = k.recv = pack;
  gr_status st = gr__run_one(fn, &k, comm->check);
  if (st == GR_OK) {
    off = 0;
    for (size_t i = 0; i < nbufs; i++) {
      if (counts[i]) memcpy(recv[i], pack + off, counts[i] * es);
      off += counts[i] * es;
    }
    free(pack);
  } else if (st != GR_ERR_TIMEOUT) {
    free(pack); /* after a timeout MPI may still write it */
  }
  return st;
}
