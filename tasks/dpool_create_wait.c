/* Distributed pool: gr_dpool_create's wait for its communicator's duplicate, bounded by the
 * timeout, and who to name when it runs out.
 *
 * The duplicate (MPI_Comm_idup) completes only once every rank of the caller's communicator has
 * entered gr_dpool_create, and it cannot say who has not. The ranks that have can learn it only
 * from each other, and the only channel there is the caller's own communicator (the dpool's is
 * what is being made). A message on it could be taken by the program's own receives (MPI_ANY_TAG,
 * or the same tag) on a rank that has not entered yet, so nothing is sent while the create can
 * still succeed: only a rank whose timeout has run out (the call fails then anyway) sends every
 * other rank an empty "gave up" notice (tag: the communicator's MPI_TAG_UB), and a rank that
 * receives one, while waiting in gr_dpool_create, gives up at once and sends its own. Each then
 * collects the others' notices for a grace period (half the timeout, within 0.25..5 s: a waiting
 * rank answers within its poll, a millisecond, plus scheduling); the ranks not heard from are
 * named as not having entered. Cost: none when the create succeeds; P - 1 empty messages per rank
 * that gives up. A notice to a rank that never enters stays unreceived (or is received by that
 * rank's own code, in a job that has already failed). */
#include "dpool_impl.h"
#include "gr_strbuf.h"

#include "gr_error.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void nap_us(int us) {
  struct timespec ts = {us / 1000000, (long)(us % 1000000) * 1000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* The tag of the notices: the largest the communicator allows (programs rarely use it). */
static int notice_tag(MPI_Comm comm) {
  int *ub = NULL, flag = 0;
  MPI_Comm_get_attr(comm, MPI_TAG_UB, &ub, &flag);
  return flag && ub ? *ub : 32767;
}

/* Receive every notice that has come (empty messages of tag from anyone); heard[src] = 1. Returns
 * the rank of the first one newly heard, or -1. */
static int take_notices(MPI_Comm comm, int tag, char *heard) {
  int first = -1;
  for (;;) {
    int flag = 0;
    MPI_Message m;
    MPI_Status s;
    if (MPI_Improbe(MPI_ANY_SOURCE, tag, comm, &flag, &m, &s) != MPI_SUCCESS || !flag) break;
    char nothing;
    MPI_Mrecv(&nothing, 0, MPI_BYTE, &m, MPI_STATUS_IGNORE);
    if (!heard[s.MPI_SOURCE] && first < 0) first = s.MPI_SOURCE;
    heard[s.MPI_SOURCE] = 1;
  }
  return first;
}

/* "2, 5 (world rank 7) and 3 more": the ranks of comm not heard from (at most 16 shown). */
static int name_missing(MPI_Comm comm, int size, const char *heard, char *buf, size_t len) {
  MPI_Group g = MPI_GROUP_NULL, wg = MPI_GROUP_NULL;
  int same_as_world = 0;
  MPI_Comm_compare(comm, MPI_COMM_WORLD, &same_as_world);
  int translate = same_as_world != MPI_IDENT && same_as_world != MPI_CONGRUENT &&
                  MPI_Comm_group(comm, &g) == MPI_SUCCESS &&
                  MPI_Comm_group(MPI_COMM_WORLD, &wg) == MPI_SUCCESS;
  int missing = 0, shown = 0;
  gr__strbuf sb;
  gr__strbuf_init_fixed(&sb, buf, len);
  for (int r = 0; r < size; r++) {
    if (heard[r]) continue;
    missing++;
    if (shown == 16 || sb.truncated) continue;
    int wr = MPI_UNDEFINED;
    if (translate) MPI_Group_translate_ranks(g, 1, &r, wg, &wr);
    gr__strbuf_appendf(&sb, "%s%d", shown ? ", " : "", r);
    if (wr != MPI_UNDEFINED) gr__strbuf_appendf(&sb, " (world rank %d)", wr);
    shown++;
  }
  if (missing > shown) gr__strbuf_appendf(&sb, " and %d more", missing - shown);
  if (g != MPI_GROUP_NULL) MPI_Group_free(&g);
  if (wg != MPI_GROUP_NULL) MPI_Group_free(&wg);
  return missing;
}

gr_status gr__dp_create_wait(MPI_Comm comm, MPI_Request *dup, double timeout_s) {
  double deadline = timeout_s > 0 ? gr__mono_now() + timeout_s : 0;
  int rank = 0, size = 1, tag = timeout_s > 0 ? notice_tag(comm) : 0, slp = 0, gave_up_first = -1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  char *heard = timeout_s > 0 ? calloc((size_t)size, 1) : NULL;
  if (timeout_s > 0 && !heard)
    return gr__fail_msg(GR_ERR_NOMEM, "out of memory waiting for the other ranks");
  for (;;) {
    int done = 0;
    int rc = MPI_Test(dup, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
      free(heard);
      return gr__fail_msg(GR_ERR_MPI, "MPI_Comm_idup failed (MPI error %d)", rc);
    }
    if (done) {
      free(heard);
      return GR_OK;
    }
    if (timeout_s > 0) {
      gave_up_first = take_notices(comm, tag, heard);
      if (gave_up_first >= 0 || gr__mono_now() > deadline) break;
    }
    slp = slp ? (slp < 1000 ? 2 * slp : slp) : 1;
    nap_us(slp);
  }
  /* Giving up: tell every other rank, then hear who else is waiting here. */
  heard[rank] = 1;
  static char nothing;
  for (int r = 0; r < size; r++) {
    MPI_Request q;
    if (r != rank && MPI_Isend(&nothing, 0, MPI_BYTE, r, tag, comm, &q) == MPI_SUCCESS)
      MPI_Request_free(&q); /* empty: MPI completes it on its own, or never (a rank not here) */
  }
  double grace = timeout_s / 2 < 0.25 ? 0.25 : timeout_s / 2 > 5 ? 5 : timeout_s / 2;
  double until = gr__mono_now() + grace;
  int all = 0;
  while (!all && gr__mono_now() < until) {
    take_notices(comm, tag, heard);
    all = 1;
    for (int r = 0; r < size && all; r++)
      all = heard[r];
    if (!all) nap_us(1000);
  }
  char names[256], first[64] = "";
  int missing = name_missing(comm, size, heard, names, sizeof names);
  if (gave_up_first >= 0)
    snprintf(first, sizeof first, "; rank %d of comm gave up waiting first", gave_up_first);
  free(heard);
  if (missing)
    return gr__fail_msg(GR_ERR_TIMEOUT,
                        "rank(s) %s of comm did not enter gr_dpool_create within %g s (timeout_s "
                        "/ GPURUN_TIMEOUT)%s",
                        names, timeout_s, first);
  return gr__fail_msg(GR_ERR_TIMEOUT,
                      "every rank of comm entered gr_dpool_create, but the duplication of comm "
                      "did not complete within %g s (timeout_s / GPURUN_TIMEOUT)%s",
                      timeout_s, first);
}
