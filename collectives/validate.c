/* The front end's argument checks, which depend only on this rank's own arguments, and check mode's
 * fingerprints and their exchange, which compare every rank's call with rank 0's. */
#include "gr_front.h"

#include "gr_dtype.h"
#include "gr_error.h"
#include "gr_strbuf.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- local checks ------------------------------------------------------------------------ */

static int overlaps(const void *a, size_t na, const void *b, size_t nb) {
  uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
  return na && nb && x < y + nb && y < x + na;
}

/* Everything here depends only on this rank's own arguments and costs a few comparisons. */
gr_status gr__validate(const char *fn, gr__call *k) {
#define REFUSE(arg, ...) return (k->fe_refused = (arg), gr__fail(GR_ERR_INVALID, fn, __VA_ARGS__))
  gr_comm *c = k->comm;
  k->fe_refused = GR__ARG_NONE;
  int P = c->size;
  if (k->kind == GR__BARRIER) return GR_OK;
  if (!gr__dtype_valid((int)k->dtype))
    REFUSE(GR__ARG_DTYPE, "dtype %d is not a gr_dtype (GR_INT8..GR_FLOAT64)", (int)k->dtype);
  size_t es = gr__dtype_size(k->dtype);
  int reduces = k->kind == GR__ALLREDUCE || k->kind == GR__REDUCE || k->kind == GR__REDUCE_SCATTER;
  if (reduces) {
    if (!gr__op_valid((int)k->op))
      REFUSE(GR__ARG_OP, "op %d is not a gr_op (GR_SUM..GR_AVG)", (int)k->op);
    if (!gr__op_defined(k->dtype, k->op))
      REFUSE(GR__ARG_OP, "op %s is not defined on dtype %s (AVG needs a floating type)",
             gr__op_name(k->op), gr__dtype_name(k->dtype));
  }
  int rooted = k->kind == GR__BROADCAST || k->kind == GR__REDUCE;
  int p2p = k->kind == GR__SEND || k->kind == GR__RECV;
  if ((rooted || p2p) && (k->root < 0 || k->root >= P))
    REFUSE(GR__ARG_ROOT, "%s %d is out of range [0, %d) of communicator %s",
           rooted ? "root" : "peer", k->root, P, c->id);
  if (p2p && k->root == c->rank && gr__group_depth() == 0)
    REFUSE(GR__ARG_ROOT,
           "peer %d is this rank: a %s to itself outside "
           "gr_group_start/gr_group_end would wait forever",
           k->root, gr__kind_name(k->kind));
  /* Whole buffers must be addressable: count * size (* ranks) must fit. */
  size_t mult =
      (k->kind == GR__ALLGATHER || k->kind == GR__REDUCE_SCATTER || k->kind == GR__ALLTOALL)
          ? (size_t)P
          : 1;
  if (k->count > (size_t)PTRDIFF_MAX / es / mult)
    REFUSE(GR__ARG_COUNT, "count %zu of %s%s overflows the address space", k->count,
           gr__dtype_name(k->dtype), mult > 1 ? " times the communicator size" : "");
  if (k->count == 0) return GR_OK;
  size_t n = k->count * es, big = n * mult;
  int is_root = rooted && k->root == c->rank;
  switch (k->kind) {
  case GR__BROADCAST:
    if (is_root && !k->send)
      REFUSE(GR__ARG_SEND, "send is NULL on root %d with count %zu", k->root, k->count);
    if (!k->recv) REFUSE(GR__ARG_RECV, "recv is NULL with count %zu", k->count);
    if (is_root && k->send != k->recv && overlaps(k->send, n, k->recv, n))
      REFUSE(GR__ARG_OVERLAP, "send and recv overlap without being equal (in place)");
    break;
  case GR__REDUCE:
    if (!k->send) REFUSE(GR__ARG_SEND, "send is NULL with count %zu", k->count);
    if (is_root && !k->recv)
      REFUSE(GR__ARG_RECV, "recv is NULL on root %d with count %zu", k->root, k->count);
    if (is_root && k->send != k->recv && overlaps(k->send, n, k->recv, n))
      REFUSE(GR__ARG_OVERLAP, "send and recv overlap without being equal (in place)");
    break;
  case GR__SEND:
  case GR__RECV: {
    const void *b = k->kind == GR__SEND ? k->send : k->recv;
    if (!b) REFUSE(GR__ARG_SEND, "buf is NULL with count %zu", k->count);
    break;
  }
  default:
    if (!k->send) REFUSE(GR__ARG_SEND, "send is NULL with count %zu", k->count);
    if (!k->recv) REFUSE(GR__ARG_RECV, "recv is NULL with count %zu", k->count);
    if (k->kind == GR__ALLREDUCE || k->kind == GR__ALLTOALL) {
      if (k->send != k->recv && overlaps(k->send, big, k->recv, big))
        REFUSE(GR__ARG_OVERLAP, "send and recv overlap without being equal (in place)");
    } else if (k->kind == GR__ALLGATHER) {
      if (k->send != (const char *)k->recv + (size_t)c->rank * n &&
          overlaps(k->send, n, k->recv, big))
        REFUSE(GR__ARG_OVERLAP, "send overlaps recv; in place means send == recv + "
                                "rank * sendcount elements");
    } else if (k->kind == GR__REDUCE_SCATTER) {
      if (k->recv != (const char *)k->send + (size_t)c->rank * n &&
          overlaps(k->send, big, k->recv, n))
        REFUSE(GR__ARG_OVERLAP, "recv overlaps send; in place means recv == send + "
                                "rank * recvcount elements");
    }
  }
  return GR_OK;
#undef REFUSE
}

/* ---- check mode --------------------------------------------------------------------------- */

/* Whether the call uses the in-place form; -1 where the form is a root's own affair. MPI requires
 * MPI_IN_PLACE on every rank or none (allreduce, allgather, reduce_scatter), so it is compared. */
int32_t gr__inplace_form(const gr__call *k) {
  const gr_comm *c = k->comm;
  size_t n = k->count * gr__dtype_size(k->dtype);
  switch (k->kind) {
  case GR__ALLREDUCE:
  case GR__ALLTOALL:
    return k->count > 0 && k->send == k->recv;
  case GR__ALLGATHER:
    return k->count > 0 && k->recv && k->send == (const char *)k->recv + (size_t)c->rank * n;
  case GR__REDUCE_SCATTER:
    return k->count > 0 && k->send && k->recv == (const char *)k->send + (size_t)c->rank * n;
  default:
    return -1;
  }
}

fingerprint gr__fingerprint_of(const gr__call *k, gr_status bad) {
  int reduces = k->kind == GR__ALLREDUCE || k->kind == GR__REDUCE || k->kind == GR__REDUCE_SCATTER;
  int rooted = k->kind == GR__BROADCAST || k->kind == GR__REDUCE;
  fingerprint f = {0,
                   k->count,
                   0,
                   (int32_t)k->kind,
                   k->kind == GR__BARRIER ? -1 : (int32_t)k->dtype,
                   reduces ? (int32_t)k->op : -1,
                   rooted ? k->root : -1,
                   bad == GR_OK ? gr__inplace_form(k) : -1,
                   bad == GR_OK    ? 0
                   : k->fe_refused ? k->fe_refused
                                   : GR__ARG_BUFFERS};
  return f;
}

uint64_t gr__fnv(uint64_t h, uint64_t x) {
  for (int i = 0; i < 8; i++)
    h = (h ^ ((x >> (8 * i)) & 0xff)) * 1099511628211ull;
  return h;
}

/* "allreduce(count=10)"; dtype, op and root are named only where they differ from ref's call of
 * the same kind (a different kind says enough). */
static void describe(char *s, size_t len, const fingerprint *f, const fingerprint *ref) {
  if (f->kind == KIND_GROUP) {
    snprintf(s, len, "a group of %llu collective(s) (fingerprint %016llx)",
             (unsigned long long)f->count, (unsigned long long)f->hash);
    return;
  }
  gr__strbuf sb;
  gr__strbuf_init_fixed(&sb, s, len);
  gr__strbuf_appendf(&sb, "%s(count=%llu",
                     f->kind >= 0 && f->kind < GR__NKINDS ? gr__kind_name((gr__kind)f->kind) : "?",
                     (unsigned long long)f->count);
  int same_kind = f->kind == ref->kind;
  if (same_kind && f->dtype != ref->dtype && f->dtype >= 0)
    gr__strbuf_appendf(&sb, ", dtype=%s", gr__dtype_name((gr_dtype)f->dtype));
  if (same_kind && f->op != ref->op && f->op >= 0)
    gr__strbuf_appendf(&sb, ", op=%s", gr__op_name((gr_op)f->op));
  if (same_kind && f->root != ref->root && f->root >= 0)
    gr__strbuf_appendf(&sb, ", root=%d", f->root);
  if (same_kind && f->inplace != ref->inplace && f->inplace >= 0)
    gr__strbuf_appendf(&sb, ", %s", f->inplace ? "in place" : "out of place");
  gr__strbuf_putc(&sb, ')');
}

static int same(const fingerprint *a, const fingerprint *b) {
  return a->seq == b->seq && a->count == b->count && a->kind == b->kind && a->dtype == b->dtype &&
         a->op == b->op && a->root == b->root && a->inplace == b->inplace && a->hash == b->hash;
}
gr_status gr__exchange_post(const char *fn, gr_comm *c, exchange *x, fingerprint f) {
  f.seq = ++c->coll_seq;
  x->all = malloc(sizeof *x->all * ((size_t)c->size + 1));
  x->req = MPI_REQUEST_NULL;
  if (!x->all) return gr__fail(GR_ERR_NOMEM, fn, "out of memory (check mode)");
  x->all[c->size] = f;
  x->rc = MPI_Iallgather(&x->all[c->size], (int)sizeof f, MPI_BYTE, x->all, (int)sizeof f, MPI_BYTE,
                         c->side_mpi, &x->req);
  /* the caller reports it after the exchanges it posted (group.c posts one per communicator) */
  if (x->rc != MPI_SUCCESS) gr__comm_mpi_err(c, x->rc, "MPI_Iallgather");
  return GR_OK;
}

/* Everyone's fingerprints are in: all ranks reach the same verdict. bad != GR_OK means this rank's
 * own checks failed (its sentence is already recorded). */
gr_status gr__exchange_verdict(const char *fn, gr_comm *c, exchange *x, gr_status bad) {
  fingerprint *all = x->all;
  gr_status out = bad;
  if (out == GR_OK) {
    for (int r = 0; r < c->size; r++)
      if (all[r].bad) {
        out =
            gr__fail(GR_ERR_INVALID, fn,
                     "rank %d of communicator %s rejected its own arguments "
                     "to %s call #%llu (%s); no rank sent anything",
                     r, c->id,
                     all[r].kind == KIND_GROUP ? "a grouped" : gr__kind_name((gr__kind)all[r].kind),
                     (unsigned long long)all[r].seq, gr__arg_name(all[r].bad));
        break;
      }
  }
  if (out == GR_OK) {
    for (int r = 1; r < c->size; r++)
      if (!same(&all[r], &all[0])) {
        char a[160], b[160];
        describe(a, sizeof a, &all[r], &all[0]);
        describe(b, sizeof b, &all[0], &all[r]);
        if (all[r].seq == all[0].seq)
          out = gr__fail(GR_ERR_MISMATCH, fn,
                         "rank %d called %s as call #%llu while rank 0 called "
                         "%s (communicator %s)",
                         r, a, (unsigned long long)all[r].seq, b, c->id);
        else
          out = gr__fail(GR_ERR_MISMATCH, fn,
                         "rank %d called %s as call #%llu while rank 0 called "
                         "%s as call #%llu (communicator %s)",
                         r, a, (unsigned long long)all[r].seq, b, (unsigned long long)all[0].seq,
                         c->id);
        break;
      }
  }
  free(all);
  x->all = NULL;
  return out;
}

/* Every rank contributes (call number, op, dtype, count, root, in-place form, local verdict); all
 * ranks see all and reach the same conclusion, so either everyone proceeds or everyone returns. */
gr_status gr__exchange_fingerprint(const char *fn, gr__call *k, gr_status bad) {
  gr_comm *c = k->comm;
  exchange x;
  /* out of memory: its sentence replaced bad's, and the status goes with the sentence */
  GR_CHECK(gr__exchange_post(fn, c, &x, gr__fingerprint_of(k, bad)));
  gr_status st =
      x.rc == MPI_SUCCESS ? gr__mpi_wait(c, &x.req, gr__deadline(c->timeout_s)) : GR_ERR_MPI;
  if (st == GR_ERR_TIMEOUT) { /* MPI may still write x.all */
    gr__abandon(x.all);
    k->seq = c->seq + 1;
    c->err[0] = '\0'; /* no backend detail belongs in this sentence */
    return gr__timed_out(fn, k, "the check-mode fingerprint exchange before");
  }
  if (st != GR_OK) { /* c->err: MPI_Iallgather's or MPI_Test's failure */
    free(x.all);
    return bad != GR_OK ? bad
                        : gr__fail(GR_ERR_MPI, fn,
                                   "check mode: the fingerprint exchange failed: %s", c->err);
  }
  return gr__exchange_verdict(fn, c, &x, bad);
}
