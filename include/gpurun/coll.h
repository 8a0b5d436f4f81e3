/* gpurun collectives: one C API over NCCL (device buffers) and MPI (host buffers).
 *
 * Conventions follow NCCL: counts are in elements; send == recv means in place; on the NCCL backend
 * calls are enqueued on a CUDA stream (NULL = default) and gr_comm_synchronize waits for them.
 * Every call is collective over the communicator unless it says otherwise. */
#ifndef GPURUN_COLL_H
#define GPURUN_COLL_H

#include <gpurun/status.h>
#include <mpi.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { GR_INT8, GR_UINT8, GR_INT32, GR_UINT32, GR_INT64, GR_UINT64,
               GR_FLOAT16, GR_BFLOAT16, GR_FLOAT32, GR_FLOAT64 } gr_dtype;
typedef enum { GR_SUM, GR_PROD, GR_MIN, GR_MAX, GR_AVG } gr_op;
typedef enum { GR_BACKEND_AUTO, GR_BACKEND_NCCL, GR_BACKEND_MPI } gr_backend;
typedef void *gr_stream; /* a cudaStream_t with NCCL; NULL means the default */
typedef struct gr_comm gr_comm;

typedef struct {
  gr_backend backend; /* default GR_BACKEND_AUTO */
  double timeout_s;   /* default from GPURUN_TIMEOUT; 0 = none */
  int check;          /* cross-rank fingerprint check before each call; default from GPURUN_CHECK */
} gr_comm_config;

GR_API void gr_comm_config_init(gr_comm_config *cfg);
GR_API gr_status gr_comm_create(MPI_Comm mpi, const gr_comm_config *cfg, gr_comm **out);
GR_API gr_status gr_comm_split(gr_comm *c, int color, int key, gr_comm **out);
GR_API gr_status gr_comm_destroy(gr_comm *c);
GR_API gr_status gr_comm_abort(gr_comm *c);
GR_API int gr_comm_rank(const gr_comm *c);
GR_API int gr_comm_size(const gr_comm *c);
GR_API gr_backend gr_comm_backend(const gr_comm *c);

GR_API gr_status gr_allreduce(const void *send, void *recv, size_t count, gr_dtype dtype, gr_op op,
                              gr_comm *comm, gr_stream stream);
GR_API gr_status gr_broadcast(const void *send, void *recv, size_t count, gr_dtype dtype, int root,
                              gr_comm *comm, gr_stream stream);
GR_API gr_status gr_reduce(const void *send, void *recv, size_t count, gr_dtype dtype, gr_op op,
                           int root, gr_comm *comm, gr_stream stream);
GR_API gr_status gr_allgather(const void *send, void *recv, size_t sendcount, gr_dtype dtype,
                              gr_comm *comm, gr_stream stream);
GR_API gr_status gr_reduce_scatter(const void *send, void *recv, size_t recvcount, gr_dtype dtype,
                                   gr_op op, gr_comm *comm, gr_stream stream);
/* count elements per peer */
GR_API gr_status gr_alltoall(const void *send, void *recv, size_t count, gr_dtype dtype,
                             gr_comm *comm, gr_stream stream);
GR_API gr_status gr_send(const void *buf, size_t count, gr_dtype dtype, int peer, gr_comm *comm,
                         gr_stream stream);
GR_API gr_status gr_recv(void *buf, size_t count, gr_dtype dtype, int peer, gr_comm *comm,
                         gr_stream stream);
GR_API gr_status gr_barrier(gr_comm *comm);
GR_API gr_status gr_group_start(void);
GR_API gr_status gr_group_end(void);
/* Wait for everything enqueued on stream; honours the timeout. */
GR_API gr_status gr_comm_synchronize(gr_comm *comm, gr_stream stream);

#ifdef __cplusplus
}
#endif
#endif
