/* Internal: hierarchical collectives for a communicator whose ranks span several nodes and share a
 * node with another rank somewhere.
 *
 * At communicator creation (gr__hier_attach, collective over c->mpi) the ranks split by node
 * (MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)); the lowest rank of each node is its leader. Each node
 * with two or more ranks maps a shared-memory segment (gr_shm.h) for its node-local steps, and the
 * leaders get a communicator of their own, made on the parent's backend table (c->ops), so that the
 * inter-node step runs whatever algorithm that backend runs for the parent (the MPI backend's own
 * recursive doubling, ring or Rabenseifner with a timeout; NCCL where a backend with NCCL hooks in).
 *
 * A call goes through three stages per segment: a node-local step on the segment, the inter-node
 * step among the leaders, and a node-local broadcast (barrier) from the leader:
 *   allreduce       node allreduce; leaders' allreduce; node broadcast
 *   broadcast       from the root to its node when the root is not its leader; leaders'
 *                   broadcast from the root's node; node broadcast (not on the root's node then)
 *   barrier         node barrier; leaders' barrier; node barrier
 *   reduce          node allreduce (the protocol's reduce to one rank stops at small sizes);
 *                   leaders' reduce to the root's node; node broadcast on the root's node only,
 *                   when the root is not its leader. Ranks but the root work in scratch.
 *   allgather       node allgather into the node's block; leaders' allgather of the node blocks
 *                   (each padded to the largest node's size); node broadcast of all blocks; each
 *                   rank copies them into parent-rank order (a node's ranks need not be
 *                   contiguous in the parent). Where they are, with every node the same size and
 *                   one segment, the blocks are built in the receive buffer itself.
 *   reduce-scatter  each rank permutes its input into node blocks (as allgather's); node
 *                   allreduce of all of them; leaders' reduce-scatter of the node blocks; node
 *                   broadcast of the node's block, of which each rank keeps its own part (the
 *                   protocol has no scatter: a broadcast of lsize parts in shared memory).
 * Large calls go in segments (allgather, reduce-scatter: of all ranks' data) that move through
 * the stages independently, so the node step of segment j+1 runs while the leaders exchange
 * segment j.
 *
 * Which calls take it. GPURUN_COLL_ALGO: "flat" keeps the flat algorithms on communicators that
 * span nodes (a single-node communicator still takes the shared-memory path); "hier" takes the
 * hierarchical path for allreduce, broadcast, barrier, reduce, allgather and reduce-scatter at
 * every size; "auto" (default, "shm" is the same) for allreduces from 64 KiB, broadcasts from
 * 256 KiB and allgathers from 1 MiB of all ranks' data, where it measured faster (see
 * HIER_AUTO_* in hier.c; reduce and reduce-scatter did not gain reliably and stay flat); "mpi"
 * turns both the shared-memory and the hierarchical path off; "hier-ml" is "hier" with the
 * allreduces on the multi-leader row where every node has the same number of ranks
 * (mpi_path_hier_ml.c). Ranks whose settings differ use the most conservative one among them
 * (mpi < flat < auto < hier < hier-ml), said once at GPURUN_LOG=warn: the
 * communicator's c->algo, agreed at creation (coll.c). Whether
 * the path exists is decided at creation from data every rank holds after one allgather (the node
 * of every rank, whether every node with two or more ranks got its segment), so it is the same on
 * every rank; whether a call takes it depends only on the call's kind and size.
 *
 * Failures. Every wait is a poll that returns to the caller (the front end's deadline bounds it).
 * On a timeout the sentence names the stage and, in a node step, the ranks (of the parent
 * communicator) this rank waited for and whether their process still exists; in the inter-node
 * step, the leaders and their hosts. A call that fails in any other way (ranks that disagree on
 * the call, an MPI error) leaves the path unusable: later calls that would take it return
 * GR_ERR_ABORTED on this rank, since the other ranks may be at another point of the sequence. */
#ifndef GR_HIER_H
#define GR_HIER_H

#include "gr_coll.h"

typedef struct gr__hier gr__hier;

/* Collective over c->mpi, at communicator creation, after the backend's state exists. *out is NULL
 * when the communicator does not span two nodes with two ranks on some node, c->algo asks
 * for the flat algorithms, or a node could not make its segment (then the flat algorithms run). */
gr_status gr__hier_attach(gr_comm *c, gr__hier **out);
/* Local; releases the node segment, the leaders' communicator and the node communicator (only
 * memory after MPI_Finalize). NULL is a no-op. */
void gr__hier_free(gr__hier *h);

/* Whether call k takes the hierarchical path (kind and size: the same answer on every rank). */
int gr__hier_takes(const gr__hier *h, const gr__call *k);

/* The backend's hook, on the (staged) host buffers send and recv. post stores the call's state
 * in *op, which the backend keeps in its per-call state; test and forget release it and set *op to
 * NULL (done, failed, forgotten). AVG is reduced as SUM (the backend divides). forget (timeout)
 * writes the sentence naming the stage and the ranks waited for into k->comm->err. */
typedef struct gr__hier_call gr__hier_call;

/* Test hook: when > 0, the segment size in bytes of calls posted afterwards (the same on every
 * rank), so that tests reach the pipeline with small calls. */
extern size_t gr__hier_seg_bytes;
/* Test hook: calls of each kind (gr__kind) this process started on the hierarchical path. */
extern _Atomic unsigned long gr__hier_calls[GR__NKINDS];
/* Test hook: when set, called as this rank is about to post a step of a hierarchical call (leader
 * = 1 for the inter-node step, 0 for a node step; segment = its segment), so that a test can kill
 * a rank inside the data phase rather than at a time that may fall before the call. The
 * multi-leader row (mpi_path_hier_ml.c) calls it too, before each of its steps (leader = 1 for its
 * inter-node step, segment 0). */
extern void (*gr__hier_step_hook)(int leader, int segment);
/* Node-mates whose process no longer exists, as "rank R (process P no longer exists)" joined
 * with ", " (parent ranks); the number named (0: none, or no segment). */
int gr__hier_gone(const gr__hier *h, char *buf, size_t len);
gr_status gr__hier_call_post(gr__hier *h, gr__call *k, const void *send, void *recv,
                             gr__hier_call **op);
gr_status gr__hier_call_test(gr__hier *h, gr__call *k, gr__hier_call **op, int *done);
/* Forget a call that will never complete (the path is unusable afterwards): 1 when nothing
 * writes into its buffers any more, 0 when a leaders' step may still (its backend's forget said
 * so; its scratch is then kept, never freed). */
int gr__hier_call_forget(gr__hier *h, gr__call *k, gr__hier_call **op);

#endif
