/* Internal: ranks that share a GPU on the NCCL backend (nccl_share.c).
 *
 * NCCL refuses two ranks of one communicator on one GPU ("Duplicate GPU detected", ncclInvalidUsage)
 * - --ranks-per-gpu, MPS clients, MIG instances of one GPU (they report the parent's PCI bus id).
 * At creation the backend asks gr__nccl_share_setup whether any two ranks share a GPU (same host,
 * same PCI bus id). If none do, nothing changes. If some do, the ranks of each GPU form a group, the
 * lowest rank of each group is its leader, NCCL runs among the leaders only (a gr_comm of their own
 * on the NCCL backend's table, as hier.c's leaders'), and every collective but all-to-all goes
 * member -> leader (host staging over MPI) -> a call on the leaders' communicator -> leader ->
 * members; all-to-all, send and receive are one call each, on host copies, on a communicator of
 * all ranks on the MPI backend's table.
 * Compiled into libgpurun against NVIDIA's headers and into the NCCL test double's object. */
#ifndef GR_NCCL_SHARE_H
#define GR_NCCL_SHARE_H

#include "gr_coll.h"

typedef struct gr__nccl_share gr__nccl_share;

/* The bytes of a call's be_area that nccl_share.c may use (all of it: the refusal verdict is the
 * sequencer's, outside the call record). */
#define GR__NCCL_SHARE_AREA GR__BE_CALL_BYTES

/* Collective over c->mpi. *out = NULL when every rank has a GPU of its own (the caller goes on with
 * one NCCL communicator over all ranks); otherwise the groups, the leaders' communicator (a gr_comm
 * on c's backend table, NCCL over one leader per GPU: nccl_share.c) and the log line naming the
 * grouping. GPURUN_NCCL_SHARE=0 turns the grouping off (then NCCL itself refuses a shared GPU).
 * Every rank returns the same status. */
gr_status gr__nccl_share_setup(gr_comm *c, double deadline, gr__nccl_share **out);
gr_status gr__nccl_share_destroy(gr_comm *c, gr__nccl_share *s, double deadline);
void gr__nccl_share_abort(gr__nccl_share *s);

/* The backend's post/test/forget/synchronize for a communicator with a share. forget answers as
 * gr__coll_ops.forget: 1 when nothing writes into the call's buffers any more (what the share
 * itself allocated is parked until nothing writes into it either), 0 while its copy of the result
 * into k->recv may still be on the call's stream. */
gr_status gr__nccl_share_post(gr__nccl_share *s, gr__call *k, int *done);
gr_status gr__nccl_share_test(gr__nccl_share *s, gr__call *k, int *done);
int gr__nccl_share_forget(gr__nccl_share *s, gr__call *k);
gr_status gr__nccl_share_synchronize(gr__nccl_share *s, gr_comm *c, gr_stream stream,
                                     double deadline);

#endif
