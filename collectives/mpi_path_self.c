/* The MPI backend's row for a communicator of one rank: every collective's result is this rank's
 * own input (a reduction over one rank, an allgather of one block, a broadcast from itself), so a
 * call is one copy from send to recv, or nothing in place, done at its post: no MPI call, no
 * request, no temporary. Open MPI's own calls at one rank stage through temporaries (a 16 MiB
 * MPI_Ireduce_scatter_block took 7.2 ms, three times MPI_Reduce_scatter_block, six times a memcpy;
 * bench/README.md), and one-rank communicators are common: a split by node with one rank per node,
 * a job of one rank.
 *
 * The row exists where the communicator has one rank, whatever GPURUN_COLL_ALGO says (no algorithm
 * has anything to do there), ahead of every other row; it takes every collective. Point-to-point
 * calls (a rank sending to itself) stay with the MPI library's row. */
#include "gr_mpi_be.h"

#include "gr_algo_count.h"
#include "gr_dtype.h"

#include <string.h>

static int self_present(const gr_comm *c) { return c->size == 1; }

/* s and r are NULL for a refusing rank's call: nothing moves. In place (an allgather's block at
 * its own place in recv, a reduce-scatter's recv at its own block of send) s == r. A reduction's
 * result goes through the reduction kernel's rules for one operand (gr__reduce_one). */
static gr_status self_post(const gr__path *p, gr__call *k, const void *s, void *r, int *done) {
  (void)p;
  size_t bytes = k->count * gr__dtype_size(k->dtype);
  if (k->kind != GR__BARRIER && s && r && s != r && bytes) memmove(r, s, bytes);
  if (r && bytes &&
      (k->kind == GR__ALLREDUCE || k->kind == GR__REDUCE || k->kind == GR__REDUCE_SCATTER))
    gr__reduce_one(k->dtype, k->op, r, k->count);
  *done = 1;
  return GR_OK;
}

static gr_status self_test(gr__call *k, int *done) {
  (void)k;
  *done = 1;
  return GR_OK;
}

/* A call is done at its post: nothing of it is left to write into its buffers. */
static int self_forget(gr__call *k) {
  (void)k;
  return 1;
}

const gr__path gr__path_self = {.name = GR__ALGO_NAME(SELF),
                                .algo = GR__ALGO_SELF,
                                .refusal = GR__REFUSAL_AGREED,
                                .kinds = GR__KINDS_COLLECTIVE,
                                .staged = 1,
                                .present = self_present,
                                .takes = gr__path_takes_all,
                                .post = self_post,
                                .test = self_test,
                                .forget = self_forget};
