/* gpurun collectives: one C API over NCCL (device buffers) and MPI (host buffers).
 *
 * Conventions follow NCCL: counts are in elements; send == recv means in place (allgather: send ==
 * recv + rank * sendcount; reduce_scatter: recv == send + rank * recvcount); on the NCCL backend
 * calls are enqueued on a CUDA stream (NULL = default) and gr_comm_synchronize waits for them.
 * Every call is collective over the communicator unless it says otherwise, and all ranks must make
 * the same collective calls in the same order with the same count, dtype, op and root.
 *
 * Backends. GR_BACKEND_MPI takes host buffers; device buffers (when CUDA is present) are staged
 * through pinned host memory, because the MPI library need not be CUDA-aware. Its calls have
 * completed when they return. GR_BACKEND_NCCL takes device buffers and is stream-ordered; host
 * buffers are staged through device memory, and then the call waits for its stream before it
 * returns. GR_BACKEND_AUTO picks NCCL when NCCL was built and every rank sees a GPU, MPI
 * otherwise (said once at GPURUN_LOG=info); gr_comm_backend() reports the choice.
 *
 * Reductions give one answer on every backend, algorithm and path (with or without a timeout,
 * blocking, non-blocking or grouped):
 * - integers wrap (two's complement): int8 100 + 100 = -56, uint8 200 + 200 = 144, and so on for
 *   SUM and PROD of every width (where MPI's own op does otherwise, such as Open MPI 4.1's op/avx,
 *   which saturates 8-bit sums, gpurun uses its own);
 * - MIN and MAX propagate NaN: if any input is NaN the result is the canonical quiet NaN
 *   (0x7fc00000 float32, 0x7ff8000000000000 float64, 0x7e00 float16, 0x7fc0 bfloat16, whatever
 *   the inputs' payloads), and -0 counts as below +0 (min(-0, +0) = -0, max = +0), as IEEE
 *   754-2019 minimum/maximum define them, so that the answer does not depend on the order in
 *   which the algorithm meets the operands;
 * - SUM, PROD and AVG follow IEEE arithmetic (inf - inf = NaN, the sign of zero as IEEE adds and
 *   multiplies); a NaN result is a NaN, its payload and sign are not specified. Floating-point
 *   sums are exact only when no rounding occurs: the order of the operations is not specified, as
 *   in NCCL and MPI. fp16/bf16 are computed in float and rounded to the type after every step;
 *   AVG is the SUM divided once by the number of ranks (fp16/bf16: the float quotient rounded).
 * (The NCCL backend hands MIN/MAX to NCCL; on a GPU this has not yet been checked against the
 * definition above.)
 *
 * Agreement. gr_comm_create agrees, over the new communicator, on everything that decides an
 * algorithm, a tag or a path: whether a timeout is set (cfg.timeout_s > 0), check mode and the
 * backend. A disagreement returns GR_ERR_MISMATCH on every rank, naming a rank on each side; a
 * rank whose own cfg is invalid (or asks for NCCL in a build without it) still takes part, and
 * every rank returns its status (GR_ERR_INVALID, GR_ERR_UNSUPPORTED), so no rank is left waiting.
 * Only a NULL out, a NULL communicator and an uninitialised MPI cannot take part. The timeout's
 * value may differ between ranks (each rank bounds its own waits); gr_comm_split's children
 * inherit the parent's agreed settings.
 *
 * Errors. Every call returns a gr_status and records a sentence for gr_last_error().
 * - Local argument checks (NULL buffers with count > 0, count x size overflow, unknown dtype/op,
 *   AVG on an integer type, root/peer out of range, partially overlapping buffers) return
 *   GR_ERR_INVALID, send no data and change no buffer. A refused collective is still collective:
 *   every rank must make it, as any other call. The arguments that must agree across ranks
 *   (count, dtype, op, root) fail identically on every rank when they agree.
 *   Checks that can fail on one rank only (one rank's NULL buffer, a root that only one rank has
 *   out of range, overlapping buffers, gr_allgather(v, v, n), which is in place on rank 0 and
 *   overlapping elsewhere) cannot leave the others inside the call: the refusing rank still joins
 *   the exchange, and every rank returns GR_ERR_INVALID naming the lowest refusing rank and the
 *   argument, e.g. "rank 3 of communicator world rejected its own recv (NULL) in allreduce
 *   (count=4)"; nothing is received and the communicator stays usable (the refusing rank's next
 *   call gets that call's data). This holds with and without check mode and a timeout, for
 *   blocking calls, grouped calls (gr_group_end fails on every rank, nothing posted) and
 *   gr_allreduce_multi (while the refusing rank has the counts), and for requests; a request's
 *   start never waits for other ranks. On the MPI algorithms every rank's start, the refusing
 *   rank's included, returns GR_OK and a request whose gr_wait/gr_test returns GR_ERR_INVALID
 *   naming the lowest refusing rank; on the shared-memory path, on the NCCL backend and in check
 *   mode the refusing rank's start returns GR_ERR_INVALID (no request) once the others have
 *   started the call, and the others' requests fail at their start (check mode) or their wait.
 *   The cost (docs/architecture.md, Collectives): none on the shared-memory path (the refusal
 *   rides in the call's descriptor), for allreduces up to 64 KiB on the MPI algorithms (one more
 *   element carries it in band, requests too) and for broadcasts below 16 KiB there (they run as
 *   an allreduce of their bytes that carries it the same way); elsewhere on the MPI backend,
 *   and once per group, the ranks first agree on a 4-byte verdict (a request posts it at its
 *   start and its data call waits for it inside gr_test/gr_wait). On the NCCL backend every
 *   collective but the barrier sends a 4-byte verdict over MPI and reaches NCCL once it is in
 *   (one host round trip per call, never a wait for the stream): a request's NCCL work is
 *   therefore enqueued by the gr_test/gr_wait that finds its verdict in, and a communicator's
 *   calls reach NCCL in the order they were made. Not covered without check mode: point-to-point
 *   calls, and arguments that differ between ranks (count, dtype, op: a disagreement, detected
 *   by check mode and on the shared-memory path, below). Use check mode while developing.
 * - Check mode (cfg.check, default from GPURUN_CHECK, off unless set): before each collective the
 *   ranks exchange a fingerprint (call number, kind, op, dtype, count, root, in-place form, local
 *   verdict) over MPI; a difference returns GR_ERR_MISMATCH on every rank, e.g. "rank 3 called
 *   allreduce(count=10) as call #17 while rank 0 called broadcast(count=12)", and nothing is
 *   sent; the communicator stays usable. gr_allreduce_multi is one call (its per-buffer counts
 *   and in-place forms hashed in). A group is checked at gr_group_end, with one fingerprint per
 *   communicator that has collectives in it (their number and a hash of their fingerprints in
 *   order); a grouped call that a rank refused stays queued, marked, so gr_group_end returns
 *   GR_ERR_INVALID on every rank and posts nothing (as without check mode). A group over several
 *   communicators is decided per communicator, the same way by all its ranks: the calls on a
 *   communicator whose check (or refusal verdict) failed are dropped, those on the others still
 *   run (their ranks need not belong to the failing one), and gr_group_end returns the failure
 *   on the ranks that saw it. Point-to-point calls are not fingerprinted
 *   (only the two peers take part); a refused one is dropped from the group.
 * - Node-local shared-memory path (MPI backend, all ranks on one node; GPURUN_COLL_ALGO=mpi turns
 *   it off): with or without check mode, every call's ranks compare a descriptor of the call
 *   (kind, count, dtype, op, root) at their first synchronisation, before any rank touches
 *   another's data. Ranks that disagree all return GR_ERR_MISMATCH naming two ranks and both
 *   calls, e.g. "rank 1 called allgather(count=8, dtype=int32) while rank 0 called
 *   allgather(count=4, dtype=int32)"; the receive buffers are left as they are or partly written
 *   (never beyond their own call's size), and the communicator stays usable (every rank drops the
 *   call at the same point, see collectives/gr_shm.h). The in-place form is not compared.
 * - Hierarchical path (MPI backend, a communicator spanning several nodes with two or more ranks on
 *   some node; GPURUN_COLL_ALGO=flat or mpi turns it off, see collectives/gr_hier.h): allreduces
 *   from 64 KiB and broadcasts from 256 KiB (GPURUN_COLL_ALGO=hier: every size, and the barrier)
 *   go node step (shared memory) -> leaders -> node broadcast. Its node
 *   steps compare descriptors like the shared-memory path; a call that fails there (or in the
 *   leaders' step) other than by a timeout leaves the path unusable: later allreduces, broadcasts
 *   and barriers on the communicator return GR_ERR_ABORTED on that rank.
 * - No MPI error of gpurun's reaches a fatal error handler: every communicator the library creates
 *   returns errors, and a failed non-blocking MPI collective (a count mismatch without check mode)
 *   is completed while MPI_COMM_WORLD's handler returns errors too, since Open MPI 4.1 reports
 *   those to MPI_COMM_WORLD (for the instant of that MPI_Test, another thread's error on
 *   MPI_COMM_WORLD would be returned rather than fatal). A rank that receives fewer elements than
 *   it expects cannot tell (MPI cannot); check mode can.
 * - Timeout (cfg.timeout_s, default GPURUN_TIMEOUT, 0 = none): a call (or gr_comm_synchronize)
 *   that does not complete in time returns GR_ERR_TIMEOUT naming the operation, its sequence
 *   number, count, dtype and communicator, writes the flight recorder, and aborts the
 *   communicator: later calls return GR_ERR_ABORTED; only gr_comm_destroy remains. The buffers of
 *   the call that timed out may still be written by the transport until the communicator is
 *   destroyed (except for the MPI backend's allreduce, whose point-to-point requests are
 *   cancelled). With timeout 0 the MPI backend may use MPI's blocking routines (lowest latency);
 *   with a timeout it uses non-blocking requests and a test loop (allreduce: its own recursive
 *   doubling or ring over MPI_Isend/MPI_Irecv; the others: MPI_I... collectives). Non-blocking
 *   and grouped allreduces use the own algorithms whatever the timeout.
 * - Calls in flight: any number of requests and grouped calls may be in flight on one
 *   communicator. The MPI backend's own allreduces get tags of their own, from MPI_TAG_UB: 67
 *   million calls in flight before a tag comes round again over Open MPI's ob1, 262 thousand over
 *   UCX; a call that finds the call holding its tag still in flight completes that call first
 *   (within its timeout; GR_ERR_TIMEOUT otherwise), so a tag never matches a live operation.
 *
 * Lifetimes. gr_comm_destroy refuses (GR_ERR_STATE, nothing destroyed) while requests started on
 * the communicator are not completed by gr_test/gr_wait or grouped calls on it are queued: complete
 * them first. After the program's own MPI_Finalize, gr_comm_destroy (and gr_finalize) release
 * gpurun's memory, touch no MPI object and return GR_ERR_STATE saying so.
 *
 * Threads: a communicator is used by one thread at a time. Groups (gr_group_start/end) belong to
 * the calling thread, as in NCCL: the calls between them are checked at once, queued, and started
 * together at the outermost gr_group_end (point-to-point pairs and several collectives in flight
 * at once). A barrier cannot be grouped. Sending to oneself is allowed only inside a group. */
#ifndef GPURUN_COLL_H
#define GPURUN_COLL_H

#include <gpurun/status.h>
#include <mpi.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

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
typedef void *gr_stream; /* a cudaStream_t with NCCL; NULL means the default */
typedef struct gr_comm gr_comm;

typedef struct {
  gr_backend backend; /* default GR_BACKEND_AUTO */
  double timeout_s;   /* default from GPURUN_TIMEOUT; 0 = none */
  int check;          /* cross-rank fingerprint check before each call; default from GPURUN_CHECK
                       * (1/yes/true/on or 0/no/false/off, any case; anything else: off, and a
                       * warning) */
} gr_comm_config;

/* Defaults, read from the environment (GPURUN_TIMEOUT, GPURUN_CHECK). Every rank of a
 * communicator must end up with the same timeout on/off and check mode (see Agreement). */
GR_API void gr_comm_config_init(gr_comm_config *cfg);
/* Collective over mpi (which is duplicated, not kept); cfg may be NULL (defaults). On failure *out
 * is NULL. GR_ERR_UNSUPPORTED for GR_BACKEND_NCCL in a build without NCCL. */
GR_API gr_status gr_comm_create(MPI_Comm mpi, const gr_comm_config *cfg, gr_comm **out);
/* Collective over c, like MPI_Comm_split: ranks with the same color form a communicator ordered
 * by key (ties by rank in c); a negative color takes no part and gets *out = NULL. The child
 * inherits backend, timeout and check mode. */
GR_API gr_status gr_comm_split(gr_comm *c, int color, int key, gr_comm **out);
/* Local teardown (NCCL: finalize, bounded by the timeout, else abort). NULL is a no-op.
 * GR_ERR_STATE, destroying nothing, while requests or grouped calls on c are outstanding. */
GR_API gr_status gr_comm_destroy(gr_comm *c);
/* Local: stop using c (NCCL: ncclCommAbort). Later calls return GR_ERR_ABORTED. */
GR_API gr_status gr_comm_abort(gr_comm *c);
/* -1 for a NULL or destroyed communicator (GR_BACKEND_AUTO for the backend). */
GR_API int gr_comm_rank(const gr_comm *c);
GR_API int gr_comm_size(const gr_comm *c);
GR_API gr_backend gr_comm_backend(const gr_comm *c);

GR_API gr_status gr_allreduce(const void *send, void *recv, size_t count, gr_dtype dtype, gr_op op,
                              gr_comm *comm, gr_stream stream);
/* send is read on the root only (may be NULL elsewhere). */
GR_API gr_status gr_broadcast(const void *send, void *recv, size_t count, gr_dtype dtype, int root,
                              gr_comm *comm, gr_stream stream);
/* recv is written on the root only (may be NULL elsewhere); other ranks' recv is not touched. */
GR_API gr_status gr_reduce(const void *send, void *recv, size_t count, gr_dtype dtype, gr_op op,
                           int root, gr_comm *comm, gr_stream stream);
/* recv holds size * sendcount elements, rank r's at r * sendcount. */
GR_API gr_status gr_allgather(const void *send, void *recv, size_t sendcount, gr_dtype dtype,
                              gr_comm *comm, gr_stream stream);
/* Fused allreduce of nbufs buffers of one dtype (e.g. many small gradients): send[i] -> recv[i],
 * counts[i] elements each (send[i] == recv[i] is in place). The MPI backend packs host buffers
 * into one message and makes one reduction; NCCL (and device buffers) run the allreduces as one
 * group, which NCCL fuses. Checks as gr_allreduce, per buffer; counts as one call in check mode. */
GR_API gr_status gr_allreduce_multi(const void *const *send, void *const *recv,
                                    const size_t *counts, size_t nbufs, gr_dtype dtype, gr_op op,
                                    gr_comm *comm, gr_stream stream);
/* send holds size * recvcount elements; rank r receives the reduction of block r. */
GR_API gr_status gr_reduce_scatter(const void *send, void *recv, size_t recvcount, gr_dtype dtype,
                                   gr_op op, gr_comm *comm, gr_stream stream);
/* count elements per peer: block p of send goes to rank p, block p of recv comes from rank p. */
GR_API gr_status gr_alltoall(const void *send, void *recv, size_t count, gr_dtype dtype,
                             gr_comm *comm, gr_stream stream);
/* Point to point; pair a send with the peer's recv of the same count and dtype. Outside a group
 * each returns when its buffer may be reused (MPI) or once enqueued (NCCL). */
GR_API gr_status gr_send(const void *buf, size_t count, gr_dtype dtype, int peer, gr_comm *comm,
                         gr_stream stream);
GR_API gr_status gr_recv(void *buf, size_t count, gr_dtype dtype, int peer, gr_comm *comm,
                         gr_stream stream);
/* On NCCL, ordered on the default stream and waited for. */
GR_API gr_status gr_barrier(gr_comm *comm);
/* Non-blocking forms: start the call and return a request; complete it with gr_test or gr_wait
 * (which free it and set *req to NULL once it has finished, successfully or not). The timeout
 * counts from the start. Several requests may be outstanding on one communicator; every rank must
 * start the same collectives in the same order. Not allowed inside a group (GR_ERR_STATE). A start
 * that cannot hand out a request (req NULL: GR_ERR_INVALID; inside a group: GR_ERR_STATE) is a
 * refusal like a NULL buffer (Errors above): that rank takes part as the refusing rank and returns
 * its error once the exchange is done, the others' requests fail naming it ("rejected its own req
 * (NULL)"); only out of memory for the request itself leaves the others to their timeout. On the
 * NCCL backend a request finishes when the work is enqueued, as the blocking calls do; the work
 * reaches the stream once every rank has started the call (the refusal verdict, Errors above):
 * at the gr_test/gr_wait that finds the verdict in, or at the communicator's next call, whichever
 * comes first. So order other work on the stream after gr_wait, not after the start, and with a
 * request outstanding on one communicator, wait for it before calling on another communicator
 * that shares its stream where ranks could test it at different points (NCCL wants the same
 * order of communicators on every rank). */
typedef struct gr_request gr_request;
GR_API gr_status gr_iallreduce(const void *send, void *recv, size_t count, gr_dtype dtype, gr_op op,
                               gr_comm *comm, gr_stream stream, gr_request **req);
GR_API gr_status gr_ibroadcast(const void *send, void *recv, size_t count, gr_dtype dtype, int root,
                               gr_comm *comm, gr_stream stream, gr_request **req);
GR_API gr_status gr_iallgather(const void *send, void *recv, size_t sendcount, gr_dtype dtype,
                               gr_comm *comm, gr_stream stream, gr_request **req);
/* *done = 1 when finished (then the call's status is returned and *req is NULL). */
GR_API gr_status gr_test(gr_request **req, int *done);
GR_API gr_status gr_wait(gr_request **req);
GR_API gr_status gr_group_start(void);
GR_API gr_status gr_group_end(void);
/* Wait for everything enqueued on stream; honours the timeout. */
GR_API gr_status gr_comm_synchronize(gr_comm *comm, gr_stream stream);

#ifdef __cplusplus
}
#endif
#endif
