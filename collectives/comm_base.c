/* What every file of the collectives asks of a communicator or a call, calling none of them: the
 * checks each call starts with (gr__check_comm, gr__check_alive_fail), the abort, a backend's
 * detail for the front end's sentence (gr__comm_err), deadlines, the names of arguments and
 * algorithms, and the bytes of a call's two sides. The life cycle is coll.c's; MPI requests
 * (test, wait, the requests given up on) are comm_wait.c's. */
#include "gr_coll.h"

#include "gr_dtype.h"
#include "gr_error.h"
#include "gr_mpi_error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *gr__arg_name(int a) {
  static const char *const names[GR__NARGS] = {
      "no argument",
      "dtype (not a gr_dtype)",
      "op (not a gr_op, or AVG on an integer type)",
      "root (out of range)",
      "count (overflows the address space)",
      "send (NULL)",
      "recv (NULL)",
      "send and recv (they overlap without being the in-place form)",
      "send, recv or counts (NULL arrays)",
      "req (NULL)",
      "call (a non-blocking call inside a group)"};
  return a >= 0 && a < GR__NARGS ? names[a] : "?";
}
const char *gr__coll_stats_op_name(int i) {
  return i >= 0 && i < GR_COLL_STATS_NOPS ? gr__kind_name(i) : NULL;
}

static const char *const algo_names[] = {"mpi", "flat", "auto", "hier", "hier-ml"};

const char *gr__coll_algo_name(int a) {
  return a >= GR__COLL_ALGO_MPI && a <= GR__COLL_ALGO_HIER_ML ? algo_names[a] : "?";
}

double gr__deadline(double timeout_s) { return timeout_s > 0 ? gr__mono_now() + timeout_s : 0.0; }
int gr__past(double deadline) { return deadline > 0 && gr__mono_now() > deadline; }

void gr__call_sides(const gr__call *k, size_t *sb, size_t *rb) {
  size_t n = k->count * gr__dtype_size(k->dtype), P = (size_t)k->comm->size;
  int root = k->root == k->comm->rank;
  *sb = *rb = 0;
  switch (k->kind) {
  case GR__ALLREDUCE:
    *sb = *rb = n;
    break;
  case GR__BROADCAST:
    *sb = root ? n : 0;
    *rb = n;
    break;
  case GR__REDUCE:
    *sb = n;
    *rb = root ? n : 0;
    break;
  case GR__ALLGATHER:
    *sb = n;
    *rb = n * P;
    break;
  case GR__REDUCE_SCATTER:
    *sb = n * P;
    *rb = n;
    break;
  case GR__ALLTOALL:
    *sb = *rb = n * P;
    break;
  case GR__SEND:
    *sb = n;
    break;
  case GR__RECV:
    *rb = n;
    break;
  default:
    break;
  }
}

/* Formats into a local buffer first: a sentence may quote the detail it replaces (c->err as an
 * argument, mpi_own.c's take_slot), and vsnprintf must not read what it writes. */
gr_status gr__comm_err(gr_comm *c, gr_status st, const char *fmt, ...) {
  char s[sizeof c->err];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s, sizeof s, fmt, ap);
  va_end(ap);
  memcpy(c->err, s, sizeof s);
  return st;
}

gr_status gr__comm_mpi_err(gr_comm *c, int rc, const char *what) {
  char s[MPI_MAX_ERROR_STRING];
  return gr__comm_err(c, GR_ERR_MPI, "%s failed: %s", what, gr__mpi_strerror(rc, s));
}

gr_status gr__check_comm(const char *fn, const gr_comm *c) {
  if (!c) return gr__fail(GR_ERR_INVALID, fn, "comm is NULL");
  if (c->magic != GR__COMM_MAGIC)
    return gr__fail(GR_ERR_INVALID, fn, "comm %p is not a live communicator (destroyed?)",
                    (void *)c);
  if (!gr__fork_mine(c->fork_gen))
    return gr__fail(GR_ERR_STATE, fn,
                    "communicator %s was created by process %d; this process is a child of "
                    "fork() and cannot use it (its shared memory, MPI state and peers are the "
                    "parent's); nothing was done",
                    c->id, c->pid);
  return GR_OK;
}

gr_status gr__check_alive_fail(const char *fn, const gr_comm *c) {
  GR_CHECK(gr__check_comm(fn, c));
  if (c->aborted)
    return gr__fail(GR_ERR_ABORTED, fn,
                    "communicator %s was aborted (after a timeout or "
                    "gr_comm_abort); destroy it",
                    c->id);
  return GR_OK;
}

void gr__comm_abort_internal(gr_comm *c) {
  if (c->aborted) return;
  c->aborted = 1;
  c->ops->abort(c);
}
