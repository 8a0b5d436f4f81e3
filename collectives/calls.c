/* The public entry points of the collective and point-to-point calls, blocking and non-blocking,
 * and submit(), which checks a blocking call and runs it now or queues it for gr_group_end. The
 * front end's other jobs have files of their own (gr_front.h). */
#include "gr_front.h"

#include "gr_error.h"
#include "gr_flight.h"
#include "gr_log.h"

#include <stdio.h>

/* Validate, then run now or queue for gr_group_end. */
static gr_status submit(const char *fn, gr__call *k) {
  GR_CHECK(gr__check_alive(fn, k->comm));
  /* The calls before it in its communicator's queue move first (after the requests' data calls,
   * everywhere); an empty queue costs the blocking call one load. */
  if (gr__group_depth() == 0 && is_collective(k->kind) && !gr__seq_empty(k->comm))
    GR_CHECK(gr__requests_drain(fn, k->comm));
  gr_status bad = gr__validate(fn, k);
  if (gr__group_depth() > 0) {
    /* A refused call stays in the queue, marked, so that gr_group_end fails on every rank (check
     * mode's fingerprints, or the agreement) instead of the others waiting for the call this
     * rank dropped. */
    if (bad != GR_OK && !k->comm->check && gr__refusal_route(k) == ROUTE_NONE) return bad;
    k->fe_bad = bad;
    GR_CHECK(gr__group_queue(fn, k));
    return bad;
  }
  if (bad != GR_OK) {
    /* Tell the others, so that nobody waits for a call this rank will not make. */
    if (k->comm->check && is_collective(k->kind)) return gr__exchange_fingerprint(fn, k, bad);
    return gr__join_refused(fn, k, bad, gr__refusal_route(k));
  }
  return gr__run_one(fn, k, 0);
}

GR_API gr_status gr_allreduce(const void *send, void *recv, size_t count, gr_dtype dtype, gr_op op,
                              gr_comm *comm, gr_stream stream) {
  gr__call k = CALL_INIT(GR__ALLREDUCE, comm);
  k.send = send, k.recv = recv, k.count = count, k.dtype = dtype, k.op = op, k.stream = stream;
  return submit("gr_allreduce", &k);
}

GR_API gr_status gr_broadcast(const void *send, void *recv, size_t count, gr_dtype dtype, int root,
                              gr_comm *comm, gr_stream stream) {
  gr__call k = CALL_INIT(GR__BROADCAST, comm);
  k.send = send, k.recv = recv, k.count = count, k.dtype = dtype, k.root = root, k.stream = stream;
  return submit("gr_broadcast", &k);
}

GR_API gr_status gr_reduce(const void *send, void *recv, size_t count, gr_dtype dtype, gr_op op,
                           int root, gr_comm *comm, gr_stream stream) {
  gr__call k = CALL_INIT(GR__REDUCE, comm);
  k.send = send, k.recv = recv, k.count = count, k.dtype = dtype, k.op = op, k.root = root;
  k.stream = stream;
  return submit("gr_reduce", &k);
}

GR_API gr_status gr_allgather(const void *send, void *recv, size_t sendcount, gr_dtype dtype,
                              gr_comm *comm, gr_stream stream) {
  gr__call k = CALL_INIT(GR__ALLGATHER, comm);
  k.send = send, k.recv = recv, k.count = sendcount, k.dtype = dtype, k.stream = stream;
  return submit("gr_allgather", &k);
}

GR_API gr_status gr_reduce_scatter(const void *send, void *recv, size_t recvcount, gr_dtype dtype,
                                   gr_op op, gr_comm *comm, gr_stream stream) {
  gr__call k = CALL_INIT(GR__REDUCE_SCATTER, comm);
  k.send = send, k.recv = recv, k.count = recvcount, k.dtype = dtype, k.op = op, k.stream = stream;
  return submit("gr_reduce_scatter", &k);
}

GR_API gr_status gr_alltoall(const void *send, void *recv, size_t count, gr_dtype dtype,
                             gr_comm *comm, gr_stream stream) {
  gr__call k = CALL_INIT(GR__ALLTOALL, comm);
  k.send = send, k.recv = recv, k.count = count, k.dtype = dtype, k.stream = stream;
  return submit("gr_alltoall", &k);
}

GR_API gr_status gr_send(const void *buf, size_t count, gr_dtype dtype, int peer, gr_comm *comm,
                         gr_stream stream) {
  gr__call k = CALL_INIT(GR__SEND, comm);
  k.send = buf, k.count = count, k.dtype = dtype, k.root = peer, k.stream = stream;
  return submit("gr_send", &k);
}

GR_API gr_status gr_recv(void *buf, size_t count, gr_dtype dtype, int peer, gr_comm *comm,
                         gr_stream stream) {
  gr__call k = CALL_INIT(GR__RECV, comm);
  k.recv = buf, k.count = count, k.dtype = dtype, k.root = peer, k.stream = stream;
  return submit("gr_recv", &k);
}

GR_API gr_status gr_barrier(gr_comm *comm) {
  if (gr__group_depth() > 0)
    return gr__fail(GR_ERR_STATE, "gr_barrier", "a barrier cannot be part of a group");
  gr__call k = CALL_INIT(GR__BARRIER, comm);
  k.dtype = GR_UINT8;
  return submit("gr_barrier", &k);
}

GR_API gr_status gr_iallreduce(const void *send, void *recv, size_t count, gr_dtype dtype, gr_op op,
                               gr_comm *comm, gr_stream stream, gr_request **req) {
  gr__call k = CALL_INIT(GR__ALLREDUCE, comm);
  k.send = send, k.recv = recv, k.count = count, k.dtype = dtype, k.op = op, k.stream = stream;
  return gr__request_start("gr_iallreduce", &k, req);
}

GR_API gr_status gr_ibroadcast(const void *send, void *recv, size_t count, gr_dtype dtype, int root,
                               gr_comm *comm, gr_stream stream, gr_request **req) {
  gr__call k = CALL_INIT(GR__BROADCAST, comm);
  k.send = send, k.recv = recv, k.count = count, k.dtype = dtype, k.root = root, k.stream = stream;
  return gr__request_start("gr_ibroadcast", &k, req);
}

GR_API gr_status gr_iallgather(const void *send, void *recv, size_t sendcount, gr_dtype dtype,
                               gr_comm *comm, gr_stream stream, gr_request **req) {
  gr__call k = CALL_INIT(GR__ALLGATHER, comm);
  k.send = send, k.recv = recv, k.count = sendcount, k.dtype = dtype, k.stream = stream;
  return gr__request_start("gr_iallgather", &k, req);
}

GR_API gr_status gr_ireduce(const void *send, void *recv, size_t count, gr_dtype dtype, gr_op op,
                            int root, gr_comm *comm, gr_stream stream, gr_request **req) {
  gr__call k = CALL_INIT(GR__REDUCE, comm);
  k.send = send, k.recv = recv, k.count = count, k.dtype = dtype, k.op = op, k.root = root;
  k.stream = stream;
  return gr__request_start("gr_ireduce", &k, req);
}

GR_API gr_status gr_ireduce_scatter(const void *send, void *recv, size_t recvcount, gr_dtype dtype,
                                    gr_op op, gr_comm *comm, gr_stream stream, gr_request **req) {
  gr__call k = CALL_INIT(GR__REDUCE_SCATTER, comm);
  k.send = send, k.recv = recv, k.count = recvcount, k.dtype = dtype, k.op = op, k.stream = stream;
  return gr__request_start("gr_ireduce_scatter", &k, req);
}

GR_API gr_status gr_ialltoall(const void *send, void *recv, size_t count, gr_dtype dtype,
                              gr_comm *comm, gr_stream stream, gr_request **req) {
  gr__call k = CALL_INIT(GR__ALLTOALL, comm);
  k.send = send, k.recv = recv, k.count = count, k.dtype = dtype, k.stream = stream;
  return gr__request_start("gr_ialltoall", &k, req);
}

GR_API gr_status gr_ibarrier(gr_comm *comm, gr_request **req) {
  gr__call k = CALL_INIT(GR__BARRIER, comm);
  k.dtype = GR_UINT8;
  return gr__request_start("gr_ibarrier", &k, req);
}

GR_API gr_status gr_isend(const void *buf, size_t count, gr_dtype dtype, int peer, gr_comm *comm,
                          gr_stream stream, gr_request **req) {
  gr__call k = CALL_INIT(GR__SEND, comm);
  k.send = buf, k.count = count, k.dtype = dtype, k.root = peer, k.stream = stream;
  return gr__request_start("gr_isend", &k, req);
}

GR_API gr_status gr_irecv(void *buf, size_t count, gr_dtype dtype, int peer, gr_comm *comm,
                          gr_stream stream, gr_request **req) {
  gr__call k = CALL_INIT(GR__RECV, comm);
  k.recv = buf, k.count = count, k.dtype = dtype, k.root = peer, k.stream = stream;
  return gr__request_start("gr_irecv", &k, req);
}

GR_API gr_status gr_comm_synchronize(gr_comm *comm, gr_stream stream) {
  static const char fn[] = "gr_comm_synchronize";
  GR_CHECK(gr__check_alive(fn, comm));
  gr__flight_poll();
  comm->err[0] = '\0';
  gr_status st = comm->ops->synchronize(comm, stream, gr__deadline(comm->timeout_s));
  if (st == GR_ERR_TIMEOUT) {
    char path[1024] = "";
    if (gr__flight_dump("timeout", path, sizeof path) != GR_OK) {
      GR_WARN("%s", gr_last_error());
      snprintf(path, sizeof path, "not written");
    }
    gr__comm_abort_internal(comm);
    return gr__fail(st, fn,
                    "work enqueued on communicator %s (rank %d of %d, %s backend) after call "
                    "#%llu did not finish within %g s; the communicator is now aborted (flight "
                    "recorder: %s)",
                    comm->id, comm->rank, comm->size, comm->ops->name,
                    (unsigned long long)comm->seq, comm->timeout_s, path);
  }
  if (st != GR_OK) return gr__fail(st, fn, "%s backend: %s", comm->ops->name, comm->err);
  return GR_OK;
}
