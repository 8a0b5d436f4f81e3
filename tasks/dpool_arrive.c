/* Distributed pool: arrival notices, so that a collective step that times out (the registration
 * check of the first run, a run's final barrier) names the ranks that never reached it. MPI's
 * collective requests cannot say who is missing; these messages can.
 *
 * Every rank posts an empty receive from every other rank before any of them can send (the
 * registration check: on entry, and a sender's message that comes earlier waits in MPI until
 * then; the final barrier: when the run begins, and nobody reaches a run's barrier before every
 * rank has begun the run, since termination needs the token from every rank), then, on reaching
 * the step, sends an empty message to every other rank. On a timeout, the ranks whose message has
 * not come are the ones named; when the step completes, every rank has sent its messages and all
 * are received before the step returns, so nothing is left for later runs. Tags: dpool_impl.h.
 * Cost: 2 (P - 1) empty messages per rank per step. */
#include "dpool_impl.h"
#include "gr_strbuf.h"

#include <stdio.h>
#include <stdlib.h>

static char nothing; /* the buffer of the empty messages */

gr_status gr__dp_arrivals_post(gr_dpool *dp, gr__dp_arrivals *a, int tag) {
  a->tag = tag;
  a->size = dp->size;
  a->rq = malloc(2 * (size_t)dp->size * sizeof *a->rq);
  if (!a->rq) return GR_ERR_NOMEM;
  for (int r = 0; r < 2 * dp->size; r++)
    a->rq[r] = MPI_REQUEST_NULL;
  for (int r = 0; r < dp->size; r++)
    if (r != dp->rank &&
        MPI_Irecv(&nothing, 0, MPI_BYTE, r, tag, dp->comm, &a->rq[r]) != MPI_SUCCESS) {
      gr__dp_arrivals_abandon(a);
      return GR_ERR_MPI;
    }
  return GR_OK;
}

gr_status gr__dp_arrivals_send(gr_dpool *dp, gr__dp_arrivals *a) {
  for (int r = 0; r < dp->size; r++)
    if (r != dp->rank &&
        MPI_Isend(&nothing, 0, MPI_BYTE, r, a->tag, dp->comm, &a->rq[dp->size + r]) != MPI_SUCCESS)
      return GR_ERR_MPI;
  return GR_OK;
}

int gr__dp_arrivals_missing(gr__dp_arrivals *a, char *buf, size_t len) {
  int missing = 0, shown = 0;
  gr__strbuf sb;
  gr__strbuf_init_fixed(&sb, buf, len);
  if (!a->rq) return 0;
  for (int r = 0; r < a->size; r++) {
    int done = 1;
    if (a->rq[r] != MPI_REQUEST_NULL) MPI_Test(&a->rq[r], &done, MPI_STATUS_IGNORE);
    if (done) continue;
    missing++;
    if (shown < 16 && !sb.truncated) {
      gr__strbuf_appendf(&sb, "%s%d", shown ? ", " : "", r);
      shown++;
    }
  }
  if (missing > shown) gr__strbuf_appendf(&sb, " and %d more", missing - shown);
  return missing;
}

gr_status gr__dp_arrivals_finish(gr__dp_arrivals *a) {
  int rc = a->rq ? MPI_Waitall(2 * a->size, a->rq, MPI_STATUSES_IGNORE) : MPI_SUCCESS;
  free(a->rq);
  a->rq = NULL;
  return rc == MPI_SUCCESS ? GR_OK : GR_ERR_MPI;
}

void gr__dp_arrivals_abandon(gr__dp_arrivals *a) {
  if (!a->rq) return;
  for (int r = 0; r < 2 * a->size; r++) {
    if (a->rq[r] == MPI_REQUEST_NULL) continue;
    if (r < a->size) { /* a receive: cancelled, then completed */
      MPI_Cancel(&a->rq[r]);
      MPI_Wait(&a->rq[r], MPI_STATUS_IGNORE);
    } else { /* an empty send: MPI completes it on its own */
      MPI_Request_free(&a->rq[r]);
    }
  }
  free(a->rq);
  a->rq = NULL;
}
