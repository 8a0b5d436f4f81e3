/* gpurun collectives: one C API over NCCL (device buffers) and MPI (host buffers).
 *
 * Counts are in elements; send == recv means in place; every call is collective over the
 * communicator unless it says otherwise, and all ranks make the same calls in the same order.
 * The rules every call shares (backends, reductions, agreement, rank-local refusals, check mode,
 * timeouts, calls in flight, lifetimes, threads) are in gr_comm(3); each function has its page. */
#ifndef GPURUN_COLL_H
#define GPURUN_COLL_H

#include <gpurun/status.h>
#include <mpi.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Element types and reductions (integers wrap, MIN/MAX propagate NaN); see gr_dtype(3). */
typedef enum {
  GR_INT8,
  GR_UINT8,
  GR_INT32,
  GR_UINT32,
  GR_INT64,
  GR_UINT64,
  GR_FLOAT16,
  GR_BFLOAT16,
  GR_FLOAT32,
  GR_FLOAT64
} gr_dtype;
typedef enum { GR_SUM, GR_PROD, GR_MIN, GR_MAX, GR_AVG } gr_op;
typedef enum { GR_BACKEND_AUTO, GR_BACKEND_NCCL, GR_BACKEND_MPI } gr_backend;
typedef void *gr_stream; /* a cudaStream_t with NCCL; NULL means the default. See gr_comm(3). */
typedef struct gr_comm gr_comm; /* see gr_comm(3) */

typedef struct {
  gr_backend backend; /* default GR_BACKEND_AUTO */
  double timeout_s;   /* default from GPURUN_TIMEOUT; 0 = none */
  int check;          /* cross-rank fingerprint check before each call; default from GPURUN_CHECK */
} gr_comm_config;

/* Defaults from GPURUN_TIMEOUT and GPURUN_CHECK; see gr_comm_create(3). */
GR_API void gr_comm_config_init(gr_comm_config *cfg);
/* Collective over mpi (duplicated); the ranks agree on the settings. See gr_comm_create(3). */
GR_API gr_status gr_comm_create(MPI_Comm mpi, const gr_comm_config *cfg, gr_comm **out);
/* Collective over c, like MPI_Comm_split; a negative color gets *out = NULL. See gr_comm_split(3). */
GR_API gr_status gr_comm_split(gr_comm *c, int color, int key, gr_comm **out);
/* Local teardown; GR_ERR_STATE while requests or grouped calls are outstanding. See
 * gr_comm_destroy(3). */
GR_API gr_status gr_comm_destroy(gr_comm *c);
/* Local: later calls on c return GR_ERR_ABORTED. See gr_comm_abort(3). */
GR_API gr_status gr_comm_abort(gr_comm *c);
/* Rank, size and backend; -1 (GR_BACKEND_AUTO) for a NULL or destroyed one. See gr_comm_rank(3). */
GR_API int gr_comm_rank(const gr_comm *c);
GR_API int gr_comm_size(const gr_comm *c);
GR_API gr_backend gr_comm_backend(const gr_comm *c);

/* Reduce over every rank, result on all. See gr_allreduce(3). */
GR_API gr_status gr_allreduce(const void *send, void *recv, size_t count, gr_dtype dtype, gr_op op,
                              gr_comm *comm, gr_stream stream);
/* Copy root's send to every rank's recv; send may be NULL off the root. See gr_broadcast(3). */
GR_API gr_status gr_broadcast(const void *send, void *recv, size_t count, gr_dtype dtype, int root,
                              gr_comm *comm, gr_stream stream);
/* Reduce over every rank onto root's recv; recv may be NULL off the root. See gr_reduce(3). */
GR_API gr_status gr_reduce(const void *send, void *recv, size_t count, gr_dtype dtype, gr_op op,
                           int root, gr_comm *comm, gr_stream stream);
/* recv holds size * sendcount elements, rank r's at r * sendcount. See gr_allgather(3). */
GR_API gr_status gr_allgather(const void *send, void *recv, size_t sendcount, gr_dtype dtype,
                              gr_comm *comm, gr_stream stream);
/* Fused allreduce of nbufs buffers of one dtype, send[i] -> recv[i]. See gr_allreduce_multi(3). */
GR_API gr_status gr_allreduce_multi(const void *const *send, void *const *recv,
                                    const size_t *counts, size_t nbufs, gr_dtype dtype, gr_op op,
                                    gr_comm *comm, gr_stream stream);
/* Rank r receives the reduction of block r of send. See gr_reduce_scatter(3). */
GR_API gr_status gr_reduce_scatter(const void *send, void *recv, size_t recvcount, gr_dtype dtype,
                                   gr_op op, gr_comm *comm, gr_stream stream);
/* Block p of send goes to rank p, block p of recv comes from rank p. See gr_alltoall(3). */
GR_API gr_status gr_alltoall(const void *send, void *recv, size_t count, gr_dtype dtype,
                             gr_comm *comm, gr_stream stream);
/* Point to point; pair a send with the peer's recv of the same count and dtype. See gr_send(3). */
GR_API gr_status gr_send(const void *buf, size_t count, gr_dtype dtype, int peer, gr_comm *comm,
                         gr_stream stream);
GR_API gr_status gr_recv(void *buf, size_t count, gr_dtype dtype, int peer, gr_comm *comm,
                         gr_stream stream);
/* Not allowed inside a group. See gr_barrier(3). */
GR_API gr_status gr_barrier(gr_comm *comm);
/* Non-blocking forms: the blocking form's arguments, then the request that gr_test/gr_wait
 * complete. See gr_test(3) for what they share; each names its page. */
typedef struct gr_request gr_request;
/* See gr_allreduce(3). */
GR_API gr_status gr_iallreduce(const void *send, void *recv, size_t count, gr_dtype dtype, gr_op op,
                               gr_comm *comm, gr_stream stream, gr_request **req);
/* See gr_broadcast(3). */
GR_API gr_status gr_ibroadcast(const void *send, void *recv, size_t count, gr_dtype dtype, int root,
                               gr_comm *comm, gr_stream stream, gr_request **req);
/* See gr_allgather(3). */
GR_API gr_status gr_iallgather(const void *send, void *recv, size_t sendcount, gr_dtype dtype,
                               gr_comm *comm, gr_stream stream, gr_request **req);
/* See gr_reduce(3). */
GR_API gr_status gr_ireduce(const void *send, void *recv, size_t count, gr_dtype dtype, gr_op op,
                            int root, gr_comm *comm, gr_stream stream, gr_request **req);
/* See gr_reduce_scatter(3). */
GR_API gr_status gr_ireduce_scatter(const void *send, void *recv, size_t recvcount, gr_dtype dtype,
                                    gr_op op, gr_comm *comm, gr_stream stream, gr_request **req);
/* See gr_alltoall(3). */
GR_API gr_status gr_ialltoall(const void *send, void *recv, size_t count, gr_dtype dtype,
                              gr_comm *comm, gr_stream stream, gr_request **req);
/* See gr_allreduce_multi(3). */
GR_API gr_status gr_iallreduce_multi(const void *const *send, void *const *recv,
                                     const size_t *counts, size_t nbufs, gr_dtype dtype, gr_op op,
                                     gr_comm *comm, gr_stream stream, gr_request **req);
/* See gr_barrier(3). */
GR_API gr_status gr_ibarrier(gr_comm *comm, gr_request **req);
/* Point to point, this rank's alone (no agreement, no place in the collectives' order). See
 * gr_send(3). */
GR_API gr_status gr_isend(const void *buf, size_t count, gr_dtype dtype, int peer, gr_comm *comm,
                          gr_stream stream, gr_request **req);
GR_API gr_status gr_irecv(void *buf, size_t count, gr_dtype dtype, int peer, gr_comm *comm,
                          gr_stream stream, gr_request **req);
/* *done = 1 when finished (then the call's status is returned and *req is NULL). See gr_test(3). */
GR_API gr_status gr_test(gr_request **req, int *done);
GR_API gr_status gr_wait(gr_request **req);
/* Calls between them are queued and started together at the outermost end. See
 * gr_group_start(3). */
GR_API gr_status gr_group_start(void);
GR_API gr_status gr_group_end(void);
/* Memory the calls on comm reach directly (every rank of a node maps every rank's), collective
 * over comm with the same bytes on every rank; freed by gr_mem_free or gr_comm_destroy. See
 * gr_mem_alloc(3). */
GR_API gr_status gr_mem_alloc(gr_comm *comm, size_t bytes, void **ptr);
GR_API gr_status gr_mem_free(gr_comm *comm, void *ptr);
/* A buffer the program has, made memory the calls on comm reach directly, in place (same address,
 * same contents), until gr_mem_deregister; collective over comm. See gr_mem_register(3). */
typedef struct gr_mem_handle gr_mem_handle;
GR_API gr_status gr_mem_register(gr_comm *comm, void *ptr, size_t bytes, gr_mem_handle **handle);
GR_API gr_status gr_mem_deregister(gr_comm *comm, gr_mem_handle *handle);
/* Wait for everything enqueued on stream; honours the timeout. See gr_comm_synchronize(3). */
GR_API gr_status gr_comm_synchronize(gr_comm *comm, gr_stream stream);

#ifdef __cplusplus
}
#endif
#endif
