/* The collective and point-to-point calls: local argument checks, the check-mode fingerprint
 * exchange, groups, and the wait loop that enforces the timeout, records the flight recorder and
 * keeps the counters. */
#include "gr_coll.h"

#include "gr_dtype.h"
#include "gr_error.h"
#include "gr_flight.h"
#include "gr_log.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The calls queued between gr_group_start and gr_group_end on this thread (NCCL's model: the
 * group is a property of the calling thread, not of a communicator). */
typedef struct {
  int depth;
  size_t n, cap;
  gr__call *q;
} group_state;
static _Thread_local group_state grp;

static int is_collective(gr__kind k) { return k != GR__SEND && k != GR__RECV; }

/* How a refusal reaches the other ranks without check mode (see refusal_route). */
enum { ROUTE_NONE, ROUTE_CALL, ROUTE_AGREE, ROUTE_VERDICT /* ROUTE_AGREE, never in band */ };

/* ---- local checks ------------------------------------------------------------------------ */

static int overlaps(const void *a, size_t na, const void *b, size_t nb) {
  uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
  return na && nb && x < y + nb && y < x + na;
}

/* Everything here depends only on this rank's own arguments and costs a few comparisons. */
static gr_status validate(const char *fn, gr__call *k) {
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
  if (p2p && k->root == c->rank && grp.depth == 0)
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

/* kind GR__NKINDS: the summary of one rank's group on one communicator (count = number of
 * collectives, hash over their fingerprints in order, bad = any of its calls refused). */
#define KIND_GROUP GR__NKINDS
typedef struct {
  uint64_t seq, count, hash;
  int32_t kind, dtype, op, root, inplace, bad;
} fingerprint;

/* Whether the call uses the in-place form; -1 where the form is a root's own affair. MPI requires
 * MPI_IN_PLACE on every rank or none (allreduce, allgather, reduce_scatter), so it is compared. */
static int32_t inplace_form(const gr__call *k) {
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

static fingerprint fingerprint_of(const gr__call *k, gr_status bad) {
  int reduces = k->kind == GR__ALLREDUCE || k->kind == GR__REDUCE || k->kind == GR__REDUCE_SCATTER;
  int rooted = k->kind == GR__BROADCAST || k->kind == GR__REDUCE;
  fingerprint f = {0,
                   k->count,
                   0,
                   (int32_t)k->kind,
                   k->kind == GR__BARRIER ? -1 : (int32_t)k->dtype,
                   reduces ? (int32_t)k->op : -1,
                   rooted ? k->root : -1,
                   bad == GR_OK ? inplace_form(k) : -1,
                   bad == GR_OK    ? 0
                   : k->fe_refused ? k->fe_refused
                                   : GR__ARG_BUFFERS};
  return f;
}

static uint64_t fnv(uint64_t h, uint64_t x) {
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
  int n = snprintf(s, len, "%s(count=%llu",
                   f->kind >= 0 && f->kind < GR__NKINDS ? gr__kind_name((gr__kind)f->kind) : "?",
                   (unsigned long long)f->count);
  int same_kind = f->kind == ref->kind;
  if (same_kind && f->dtype != ref->dtype && f->dtype >= 0 && n >= 0 && (size_t)n < len)
    n += snprintf(s + n, len - (size_t)n, ", dtype=%s", gr__dtype_name((gr_dtype)f->dtype));
  if (same_kind && f->op != ref->op && f->op >= 0 && n >= 0 && (size_t)n < len)
    n += snprintf(s + n, len - (size_t)n, ", op=%s", gr__op_name((gr_op)f->op));
  if (same_kind && f->root != ref->root && f->root >= 0 && n >= 0 && (size_t)n < len)
    n += snprintf(s + n, len - (size_t)n, ", root=%d", f->root);
  if (same_kind && f->inplace != ref->inplace && f->inplace >= 0 && n >= 0 && (size_t)n < len)
    n += snprintf(s + n, len - (size_t)n, ", %s", f->inplace ? "in place" : "out of place");
  if (n >= 0 && (size_t)n < len) snprintf(s + n, len - (size_t)n, ")");
}

static int same(const fingerprint *a, const fingerprint *b) {
  return a->seq == b->seq && a->count == b->count && a->kind == b->kind && a->dtype == b->dtype &&
         a->op == b->op && a->root == b->root && a->inplace == b->inplace && a->hash == b->hash;
}

static gr_status timed_out(const char *fn, gr__call *k, const char *what);
static gr_status agree_call(const char *fn, gr__call *k, int arg);
static int refusal_route(const gr__call *k);
static int inband(const gr__call *k);
static gr_status run_inband(const char *fn, gr__call *k, int arg);

/* One exchange in flight: everybody's fingerprints, then this rank's at all[size] (on the heap:
 * after a timeout MPI may still read or write them, so they are abandoned, not freed). */
typedef struct {
  fingerprint *all;
  MPI_Request req;
  int rc;
} exchange;

/* Buffers a timed-out MPI request may still use (a collective request cannot be cancelled): kept
 * reachable for the rest of the process, never freed, so that a late write lands in memory nobody
 * else owns. Few: a timeout aborts the communicator. */
static void abandon(void *p) {
  static struct abandoned {
    struct abandoned *next;
    void *p;
  } * list;
  static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  struct abandoned *a = malloc(sizeof *a);
  if (!a) return; /* then it is merely leaked */
  a->p = p;
  pthread_mutex_lock(&lock);
  a->next = list;
  list = a;
  pthread_mutex_unlock(&lock);
}

static gr_status exchange_post(const char *fn, gr_comm *c, exchange *x, fingerprint f) {
  f.seq = ++c->coll_seq;
  x->all = malloc(sizeof *x->all * ((size_t)c->size + 1));
  x->req = MPI_REQUEST_NULL;
  if (!x->all) return gr__fail(GR_ERR_NOMEM, fn, "out of memory (check mode)");
  x->all[c->size] = f;
  x->rc = MPI_Iallgather(&x->all[c->size], (int)sizeof f, MPI_BYTE, x->all, (int)sizeof f, MPI_BYTE,
                         c->check_mpi, &x->req);
  return GR_OK;
}

/* Everyone's fingerprints are in: all ranks reach the same verdict. bad != GR_OK means this rank's
 * own checks failed (its sentence is already recorded). */
static gr_status exchange_verdict(const char *fn, gr_comm *c, exchange *x, gr_status bad) {
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
static gr_status exchange_fingerprint(const char *fn, gr__call *k, gr_status bad) {
  gr_comm *c = k->comm;
  exchange x;
  gr_status st = exchange_post(fn, c, &x, fingerprint_of(k, bad));
  if (st != GR_OK) return bad != GR_OK ? bad : st;
  st = x.rc == MPI_SUCCESS ? gr__mpi_wait(c, &x.req, gr__deadline(c->timeout_s)) : GR_ERR_MPI;
  if (st == GR_ERR_TIMEOUT) { /* MPI may still write x.all */
    abandon(x.all);
    k->seq = c->seq + 1;
    c->err[0] = '\0'; /* no backend detail belongs in this sentence */
    return timed_out(fn, k, "the check-mode fingerprint exchange before");
  }
  if (st != GR_OK) {
    free(x.all);
    return bad != GR_OK ? bad : gr__fail(GR_ERR_MPI, fn, "check mode: MPI_Iallgather failed");
  }
  return exchange_verdict(fn, c, &x, bad);
}

/* ---- execution ---------------------------------------------------------------------------- */

/* The call as the user made it (what records, counters and sentences show). */
static const gr__call *shown(const gr__call *k) { return k->fe_shown ? k->fe_shown : k; }
static size_t shown_count(const gr__call *k) { return shown(k)->count; }

static size_t call_bytes(const gr__call *k) {
  const gr__call *u = shown(k);
  if (u->kind == GR__BARRIER) return 0;
  size_t b = u->count * gr__dtype_size(u->dtype);
  return u->kind == GR__ALLTOALL || u->kind == GR__REDUCE_SCATTER ? b * (size_t)u->comm->size : b;
}

static void begin(gr__call *k) {
  gr_comm *c = k->comm;
  const gr__call *u = shown(k);
  k->seq = ++c->seq;
  k->t_start = gr__wall_now();
  int peer = u->kind == GR__SEND || u->kind == GR__RECV;
  k->flight_slot = gr__flight_begin(
      c->flight, k->seq, (int)u->kind, u->count, u->kind == GR__BARRIER ? -1 : (int)u->dtype,
      peer ? -1 : u->root, peer ? u->root : -1, peer ? GR__P2P_TAG : -1, k->t_start);
}

/* share: the part of the elapsed time charged to this call in the counters. A call of a group of
 * n is charged 1/n of its time, so that the calls of a group, which all run during one
 * gr_group_end, add up to no more than the time spent in it. */
static void end_share(gr__call *k, gr__flight_state fs, double t0, double share) {
  gr_comm *c = k->comm;
  double t1 = gr__mono_now();
  gr__flight_end(c->flight, k->flight_slot, k->seq, fs, k->t_start + (t1 - t0));
  if (k->fe_refused) return; /* this rank's refusal joining the exchange: not a call it made */
  gr__kind kind = shown(k)->kind;
  c->stats.calls[kind]++;
  c->stats.bytes[kind] += call_bytes(k);
  c->stats.seconds[kind] += (t1 - t0) * share;
  if (fs == GR__FL_FAILED) c->stats.failures++;
  if (fs == GR__FL_TIMEOUT) c->stats.timeouts++;
}

static void end(gr__call *k, gr__flight_state fs, double t0) { end_share(k, fs, t0, 1.0); }

static gr_status timed_out(const char *fn, gr__call *k, const char *what) {
  gr_comm *c = k->comm;
  char path[1024] = "";
  if (gr__flight_dump("timeout", path, sizeof path) != 0)
    snprintf(path, sizeof path, "not written");
  char gone[GR__ERRLEN - 32];
  if (!c->err[0] && c->ops->gone && c->ops->gone(c, gone, sizeof gone) > 0)
    snprintf(c->err, sizeof c->err, "on this node %s", gone);
  gr__comm_abort_internal(c);
  return gr__fail(
      GR_ERR_TIMEOUT, fn,
      "%s%s%s #%llu (count=%zu, dtype=%s) on communicator %s "
      "(rank %d of %d, %s backend) did not complete within %g s%s%s%s; the communicator is "
      "now aborted (flight recorder: %s)",
      what, what[0] ? " " : "", gr__kind_name(shown(k)->kind), (unsigned long long)k->seq,
      shown_count(k), shown(k)->kind == GR__BARRIER ? "none" : gr__dtype_name(shown(k)->dtype),
      c->id, c->rank, c->size, c->ops->name, c->timeout_s, c->err[0] ? " (" : "", c->err,
      c->err[0] ? ")" : "", path);
}

/* ---- the one progress loop ------------------------------------------------------------ */

/* How a path words its outcomes (the sentences each path has always given). */
typedef struct {
  const char *fn;
  const char *timeout_what; /* "" (a call, a request) or "grouped" */
  int name_backend;         /* failure sentences name the backend (single calls and requests) */
  int backend_timeout;      /* a backend's own GR_ERR_TIMEOUT is this call's timeout (blocking) */
} loop_style;

/* A call's outcome st (from post or test): its flight record and counters, and (say) the sentence;
 * without say the failure is only counted (an earlier one's sentence stands). */
static gr_status settle(const loop_style *y, gr__call *k, gr_status st, double t0, double share,
                        int say) {
  gr_comm *c = k->comm;
  int timeout = st == GR_ERR_TIMEOUT && y->backend_timeout;
  end_share(k, st == GR_OK ? GR__FL_DONE : timeout ? GR__FL_TIMEOUT : GR__FL_FAILED, t0, share);
  if (st == GR_OK || !say) return st;
  if (timeout) return timed_out(y->fn, k, y->timeout_what);
  if (y->name_backend)
    return gr__fail(st, y->fn, "%s #%llu on communicator %s (%s backend): %s",
                    gr__kind_name(shown(k)->kind), (unsigned long long)k->seq, c->id, c->ops->name,
                    c->err);
  return gr__fail(st, y->fn, "%s #%llu on communicator %s: %s", gr__kind_name(shown(k)->kind),
                  (unsigned long long)k->seq, c->id, c->err);
}

/* Test the posted calls k[0..n) whose done[i] is 0 until all are settled (blocking calls and
 * groups; a request's gr_test sweeps its own call and verdict, with settle() for the outcome).
 * first: a failure the caller met already (while posting), whose sentence stands.
 * Every 16th sweep checks the deadline (0 = none) and, before it, serves the flight recorder's
 * signal. Past the deadline every unsettled call is forgotten, recorded as timed out and its
 * communicator aborted; the first one's sentence is returned. Otherwise the first failure's
 * sentence (the others are still waited for: the peers wait for them too). done[i] = 1 once call i
 * is settled. */
static gr_status progress(const loop_style *y, gr__call *k, size_t n, int *done, double t0,
                          double deadline, double share, gr_status first) {
  size_t left = 0;
  for (size_t i = 0; i < n; i++)
    left += !done[i];
  for (unsigned spin = 0; left > 0; spin++) {
    for (size_t i = 0; i < n; i++) {
      if (done[i]) continue;
      gr_status st = k[i].comm->ops->test(&k[i], &done[i]);
      if (st != GR_OK || done[i]) {
        done[i] = 1;
        left--;
        st = settle(y, &k[i], st, t0, share, first == GR_OK);
        if (first == GR_OK) first = st;
      }
    }
    if (left > 0 && (spin & 15) == 15) {
      if (deadline > 0 && gr__mono_now() > deadline) {
        gr_status st = GR_OK;
        for (size_t i = 0; i < n; i++) {
          if (done[i]) continue;
          done[i] = 1;
          k[i].comm->ops->forget(&k[i]);
          end_share(&k[i], GR__FL_TIMEOUT, t0, share);
          if (st == GR_OK) st = timed_out(y->fn, &k[i], y->timeout_what);
          gr__comm_abort_internal(k[i].comm);
        }
        return st;
      }
      gr__flight_poll();
    }
  }
  return first;
}

static gr_status run_one(const char *fn, gr__call *k, int checked) {
  gr_comm *c = k->comm;
  gr__flight_poll();
  if (!checked && is_collective(k->kind)) {
    if (c->check)
      GR_CHECK(exchange_fingerprint(fn, k, GR_OK));
    else if (refusal_route(k) == ROUTE_AGREE) {
      if (inband(k)) return run_inband(fn, k, GR__ARG_NONE);
      GR_CHECK(agree_call(fn, k, GR__ARG_NONE));
    }
  }
  begin(k);
  double t0 = gr__mono_now(), deadline = c->timeout_s > 0 ? t0 + c->timeout_s : 0.0;
  k->blocking_ok = c->timeout_s <= 0;
  int done = 0;
  c->err[0] = '\0';
  const loop_style y = {fn, "", 1, 1};
  gr_status st = c->ops->post(k, &done);
  if (st != GR_OK || done) return settle(&y, k, st, t0, 1.0, 1);
  return progress(&y, k, 1, &done, t0, deadline, 1.0, GR_OK);
}

/* ---- refusals without check mode (coll.h, Errors) ------------------------------------------- */

/* A call that a rank refuses locally (validate) is still collective: the refusing rank joins the
 * call's exchange and every rank fails it, naming that rank and the argument, so that nobody is
 * left inside the call. How the refusal travels, decided from what every rank knows alike (kind,
 * communicator):
 *   ROUTE_CALL   the call's own first exchange carries it (the shared-memory descriptor, where
 *                every rank checks every peer's before touching data; on NCCL the verdict the
 *                backend posts with every call and waits for before it enqueues): the refusing
 *                rank posts the call without data; nothing else is needed in front of it;
 *   ROUTE_AGREE  every rank first agrees on a verdict (one 4-byte MPI_Iallreduce, MAX, bounded by
 *                the timeout): the MPI algorithms, and groups;
 *   ROUTE_NONE   nothing is exchanged: check mode (its fingerprint exchange does it), one rank,
 *                point-to-point and the barrier (nothing to refuse). */
static int refusal_route(const gr__call *k) {
  const gr_comm *c = k->comm;
  if (c->check || c->size < 2 || !is_collective(k->kind) || k->kind == GR__BARRIER ||
      !(c->ops->caps & GR__CAP_JOIN_REFUSALS))
    return ROUTE_NONE;
  return c->ops->carries_refusal && c->ops->carries_refusal(c, k->kind) ? ROUTE_CALL : ROUTE_AGREE;
}

/* The part of this thread's last error after "rank R: fn: ", to record again after the exchange. */
static void own_sentence(char *buf, size_t len, const char *fn) {
  const char *e = gr_last_error(), *p = strstr(e, fn);
  p = p ? p + strlen(fn) : e;
  if (p[0] == ':' && p[1] == ' ') p += 2;
  snprintf(buf, len, "%s", p);
}

/* The verdict word: 0, or the lowest refusing rank and its argument win under MAX. */
static int verdict_word(const gr_comm *c, int arg) {
  int r = c->rank < 0xfffff ? c->rank : 0xfffff;
  return arg ? 1 << 30 | (0xfffff - r) << 8 | (arg & 0xff) : 0;
}

static gr_status verdict_fail(const char *fn, const gr_comm *c, int all, const char *what) {
  return gr__fail(GR_ERR_INVALID, fn,
                  "rank %d of communicator %s rejected its own %s in %s; no "
                  "rank sent anything",
                  0xfffff - ((all >> 8) & 0xfffff), c->id, gr__arg_name(all & 0xff), what);
}

/* ROUTE_AGREE for one call; arg is this rank's refusal (GR__ARG_NONE: none). */
static gr_status agree_call(const char *fn, gr__call *k, int arg) {
  gr_comm *c = k->comm;
  int *v = malloc(2 * sizeof *v); /* abandoned after a timeout: MPI may still write it */
  if (!v) return gr__fail(GR_ERR_NOMEM, fn, "out of memory");
  v[0] = verdict_word(c, arg);
  v[1] = 0;
  MPI_Request req = MPI_REQUEST_NULL;
  int rc = MPI_Iallreduce(&v[0], &v[1], 1, MPI_INT, MPI_MAX, c->mpi, &req);
  gr_status st = rc == MPI_SUCCESS ? gr__mpi_wait(c, &req, gr__deadline(c->timeout_s)) : GR_ERR_MPI;
  if (st == GR_ERR_TIMEOUT) {
    k->seq = c->seq + 1;
    c->err[0] = '\0';
    abandon(v);
    return timed_out(fn, k, "the agreement on the arguments before");
  }
  int all = v[1];
  free(v);
  if (st != GR_OK)
    return gr__fail(GR_ERR_MPI, fn, "the agreement on the arguments: MPI_Iallreduce failed");
  if (!all) return GR_OK;
  char what[96];
  snprintf(what, sizeof what, "%s(count=%zu)", gr__kind_name(k->kind), k->count);
  return verdict_fail(fn, c, all, what);
}

/* ROUTE_AGREE's in-band form, for allreduces of up to INBAND_MAX bytes on host buffers: one more
 * element of the call's dtype carries whether a rank refused, as a value the op keeps apart from
 * the others' (SUM, AVG, MAX: 0 and 1; PROD, MIN: 1 and 0), so that the others learn it with the
 * data and only a refusal costs a second round (agree_call, which names the rank and argument).
 * Broadcasts of up to BCAST_INBAND_MAX bytes take it too, as an allreduce (MAX) of their bytes as
 * uint8 to which every rank but the root contributes zeros: exact for any data (MAX(x, 0) = x for
 * unsigned bytes), with the flag as one more byte. A broadcast cannot carry a refusal from the
 * other ranks to the root; an allreduce of a few KiB costs less than a verdict round followed by
 * the broadcast (bench/README.md, "Refusals").
 * The same choice on every rank: kind, count, dtype, op and the communicator decide it. 8-bit SUM
 * could wrap 256 refusals back to 0, so it needs fewer than 256 ranks. */
#define INBAND_MAX 65536
#define BCAST_INBAND_MAX 16384
static int inband(const gr__call *k) {
  size_t es = gr__dtype_size(k->dtype);
  if (k->comm->gpu_buffers || !es) return 0; /* es 0: not a gr_dtype (a refusal) */
  if (k->kind == GR__BROADCAST) return k->count < BCAST_INBAND_MAX / es;
  return k->kind == GR__ALLREDUCE && gr__op_defined(k->dtype, k->op) &&
         k->count < INBAND_MAX / es && !(es == 1 && k->op == GR_SUM && k->comm->size > 255);
}

static void inband_flag(gr_dtype t, gr_op op, int refused, unsigned char *out) {
  size_t es = gr__dtype_size(t);
  memset(out, 0, es);
  if ((op == GR_PROD || op == GR_MIN) == !!refused) return; /* 0 */
  uint16_t h = t == GR_FLOAT16 ? 0x3c00 : 0x3f80;           /* 1.0 in fp16, bf16 */
  uint32_t i32 = 1;
  uint64_t i64 = 1;
  float f = 1.0f;
  double d = 1.0;
  const void *one = t == GR_FLOAT16 || t == GR_BFLOAT16 ? (const void *)&h
                    : t == GR_FLOAT32                   ? (const void *)&f
                    : t == GR_FLOAT64                   ? (const void *)&d
                    : es == 8                           ? (const void *)&i64
                                                        : (const void *)&i32;
  if (es == 1)
    out[0] = 1;
  else
    memcpy(out, one, es);
}

/* Bytes of the in-band form of k (inband(k)): the data and the flag element. */
static size_t inband_bytes(const gr__call *k) {
  size_t es = gr__dtype_size(k->dtype), n = k->count * es;
  return k->kind == GR__BROADCAST ? n + 1 : n + es;
}

/* j = the in-band form of the user's call k on the buffer p (inband_bytes(k)): this rank's data,
 * or zeros where it has none to give (a broadcast's non-root) or refused (arg), then the flag. */
static void inband_pack(const gr__call *k, int arg, unsigned char *p, gr__call *j) {
  size_t n = k->count * gr__dtype_size(k->dtype);
  int bcast = k->kind == GR__BROADCAST;
  if (!arg && n && (!bcast || k->root == k->comm->rank))
    memcpy(p, k->send, n);
  else
    memset(p, 0, n);
  *j = *k;
  j->send = j->recv = p;
  j->count = k->count + 1;
  if (bcast) {
    j->kind = GR__ALLREDUCE, j->dtype = GR_UINT8, j->op = GR_MAX, j->root = -1;
    j->count = n + 1;
  }
  inband_flag(j->dtype, j->op, arg, p + n);
  j->fe_flags |= GR__FE_INBAND;
  j->fe_refused = GR__ARG_NONE;
  j->fe_shown = k;
}

/* Whether the flag of the in-band call j (done) says nobody refused. */
static int inband_clear(const gr__call *j) {
  size_t es = gr__dtype_size(j->dtype);
  _Alignas(16) unsigned char ok[16];
  inband_flag(j->dtype, j->op, 0, ok);
  return memcmp((const unsigned char *)j->recv + (j->count - 1) * es, ok, es) == 0;
}

/* k in its in-band form; arg is this rank's refusal (its buffers are then not touched). */
static gr_status run_inband(const char *fn, gr__call *k, int arg) {
  size_t n = k->count * gr__dtype_size(k->dtype), bytes = inband_bytes(k);
  _Alignas(16) unsigned char small[256];
  /* with a timeout MPI may still write the buffer after this returns: then it is not the stack */
  unsigned char *p = bytes <= sizeof small && k->comm->timeout_s <= 0 ? small : malloc(bytes);
  if (!p) return gr__fail(GR_ERR_NOMEM, fn, "out of memory (%zu bytes)", bytes);
  gr__call j;
  inband_pack(k, arg, p, &j);
  gr_status st = run_one(fn, &j, 1);
  if (st == GR_OK) {
    if (!inband_clear(&j)) { /* somebody refused: all learn who in one more round */
      st = agree_call(fn, k, arg);
      if (st == GR_OK) st = gr__fail(GR_ERR_INTERNAL, fn, "a refusal was signalled but not agreed");
    } else if (n) {
      memcpy(k->recv, p, n);
    }
  }
  if (p != small) {
    if (st == GR_ERR_TIMEOUT)
      abandon(p); /* MPI may still write it */
    else
      free(p);
  }
  return st;
}

/* This rank refused k (bad, k->fe_refused): join the exchange on the route given, then return bad
 * with this rank's own sentence (or the timeout). */
static gr_status join_refused(const char *fn, gr__call *k, gr_status bad, int route) {
  if (route == ROUTE_NONE) return bad;
  char own[GR__ERRLEN];
  own_sentence(own, sizeof own, fn);
  gr_status st;
  int arg = k->fe_refused ? k->fe_refused : GR__ARG_BUFFERS;
  if (route == ROUTE_AGREE || route == ROUTE_VERDICT) {
    st = route == ROUTE_AGREE && inband(k) ? run_inband(fn, k, arg) : agree_call(fn, k, arg);
  } else {
    k->send = NULL, k->recv = NULL; /* the backend posts the descriptor only */
    st = run_one(fn, k, 1);
  }
  if (st == GR_ERR_TIMEOUT || st == GR_ERR_ABORTED || st == GR_ERR_NOMEM) return st;
  return gr__fail(bad, fn, "%s", own);
}

/* Validate, then run now or queue for gr_group_end. */
static gr_status submit(const char *fn, gr__call *k) {
  GR_CHECK(gr__check_alive(fn, k->comm));
  if (grp.depth == 0 && is_collective(k->kind) && k->comm->defer_head)
    GR_CHECK(gr__requests_drain(fn, k->comm)); /* after the requests' data calls, everywhere */
  gr_status bad = validate(fn, k);
  if (grp.depth > 0) {
    /* A refused call stays in the queue, marked, so that gr_group_end fails on every rank (check
     * mode's fingerprints, or the agreement) instead of the others waiting for the call this
     * rank dropped. */
    if (bad != GR_OK && !k->comm->check && refusal_route(k) == ROUTE_NONE) return bad;
    k->fe_bad = bad;
    if (grp.n == grp.cap) {
      size_t cap = grp.cap ? 2 * grp.cap : 16;
      gr__call *q = realloc(grp.q, cap * sizeof *q);
      if (!q) return gr__fail(GR_ERR_NOMEM, fn, "out of memory queueing a grouped call");
      grp.q = q;
      grp.cap = cap;
    }
    grp.q[grp.n++] = *k;
    __atomic_add_fetch(&k->comm->pending, 1, __ATOMIC_ACQ_REL);
    return bad;
  }
  if (bad != GR_OK) {
    /* Tell the others, so that nobody waits for a call this rank will not make. */
    if (k->comm->check && is_collective(k->kind)) return exchange_fingerprint(fn, k, bad);
    return join_refused(fn, k, bad, refusal_route(k));
  }
  return run_one(fn, k, 0);
}

#define CALL_INIT(kind_, comm_)                                                                    \
  { .kind = (kind_), .comm = (comm_), .root = -1, .flight_slot = -1 }

GR_API gr_status gr_allreduce(const void *send, void *recv, size_t count, gr_dtype dtype, gr_op op,
                              gr_comm *comm, gr_stream stream) {
  gr__call k = CALL_INIT(GR__ALLREDUCE, comm);
  k.send = send, k.recv = recv, k.count = count, k.dtype = dtype, k.op = op, k.stream = stream;
  return submit("gr_allreduce", &k);
}

GR_API gr_status gr_broadcast(const void *send, void *recv, size_t count, gr_dtype dtype, int root,
                              gr_comm *comm, gr_stream stream) {
  gr__call k = CALL_INIT(GR__BROADCAST, comm);
  k.send = send, k.recv = recv, k.count = count, k.dtype = dtype, k.root = root, k.stream = stream;
  return submit("gr_broadcast", &k);
}

GR_API gr_status gr_reduce(const void *send, void *recv, size_t count, gr_dtype dtype, gr_op op,
                           int root, gr_comm *comm, gr_stream stream) {
  gr__call k = CALL_INIT(GR__REDUCE, comm);
  k.send = send, k.recv = recv, k.count = count, k.dtype = dtype, k.op = op, k.root = root;
  k.stream = stream;
  return submit("gr_reduce", &k);
}

GR_API gr_status gr_allgather(const void *send, void *recv, size_t sendcount, gr_dtype dtype,
                              gr_comm *comm, gr_stream stream) {
  gr__call k = CALL_INIT(GR__ALLGATHER, comm);
  k.send = send, k.recv = recv, k.count = sendcount, k.dtype = dtype, k.stream = stream;
  return submit("gr_allgather", &k);
}

GR_API gr_status gr_reduce_scatter(const void *send, void *recv, size_t recvcount, gr_dtype dtype,
                                   gr_op op, gr_comm *comm, gr_stream stream) {
  gr__call k = CALL_INIT(GR__REDUCE_SCATTER, comm);
  k.send = send, k.recv = recv, k.count = recvcount, k.dtype = dtype, k.op = op, k.stream = stream;
  return submit("gr_reduce_scatter", &k);
}

GR_API gr_status gr_alltoall(const void *send, void *recv, size_t count, gr_dtype dtype,
                             gr_comm *comm, gr_stream stream) {
  gr__call k = CALL_INIT(GR__ALLTOALL, comm);
  k.send = send, k.recv = recv, k.count = count, k.dtype = dtype, k.stream = stream;
  return submit("gr_alltoall", &k);
}

GR_API gr_status gr_send(const void *buf, size_t count, gr_dtype dtype, int peer, gr_comm *comm,
                         gr_stream stream) {
  gr__call k = CALL_INIT(GR__SEND, comm);
  k.send = buf, k.count = count, k.dtype = dtype, k.root = peer, k.stream = stream;
  return submit("gr_send", &k);
}

GR_API gr_status gr_recv(void *buf, size_t count, gr_dtype dtype, int peer, gr_comm *comm,
                         gr_stream stream) {
  gr__call k = CALL_INIT(GR__RECV, comm);
  k.recv = buf, k.count = count, k.dtype = dtype, k.root = peer, k.stream = stream;
  return submit("gr_recv", &k);
}

GR_API gr_status gr_barrier(gr_comm *comm) {
  if (grp.depth > 0)
    return gr__fail(GR_ERR_STATE, "gr_barrier", "a barrier cannot be part of a group");
  gr__call k = CALL_INIT(GR__BARRIER, comm);
  k.dtype = GR_UINT8;
  return submit("gr_barrier", &k);
}

GR_API gr_status gr_allreduce_multi(const void *const *send, void *const *recv,
                                    const size_t *counts, size_t nbufs, gr_dtype dtype, gr_op op,
                                    gr_comm *comm, gr_stream stream) {
  static const char fn[] = "gr_allreduce_multi";
  GR_CHECK(gr__check_alive(fn, comm));
  if (grp.depth == 0 && comm->defer_head) GR_CHECK(gr__requests_drain(fn, comm));
  gr_status bad = GR_OK;
  int arg = GR__ARG_NONE;
  size_t total = 0;
  uint64_t hash = 1469598103934665603ull; /* the per-buffer counts and in-place forms */
  if (nbufs > 0 && (!send || !recv || !counts)) {
    bad = gr__fail(GR_ERR_INVALID, fn, "send, recv or counts is NULL with nbufs %zu", nbufs);
    arg = GR__ARG_BUFFERS;
  }
  for (size_t i = 0; i < nbufs && bad == GR_OK; i++) {
    gr__call k = CALL_INIT(GR__ALLREDUCE, comm);
    k.send = send[i], k.recv = recv[i], k.count = counts[i], k.dtype = dtype, k.op = op;
    bad = validate(fn, &k);
    arg = k.fe_refused;
    if (bad == GR_OK && counts[i] > SIZE_MAX - total) {
      bad = gr__fail(GR_ERR_INVALID, fn, "the counts overflow size_t at buffer %zu", i);
      arg = GR__ARG_COUNT;
    }
    total += counts[i];
    hash = fnv(fnv(hash, counts[i]), (uint64_t)inplace_form(&k));
  }
  size_t es = gr__dtype_size(dtype);
  if (bad == GR_OK && es && total > (size_t)PTRDIFF_MAX / es) { /* the packed total too */
    bad = gr__fail(GR_ERR_INVALID, fn,
                   "the counts add up to %zu elements of %s, which overflows "
                   "the address space",
                   total, gr__dtype_name(dtype));
    arg = GR__ARG_COUNT;
  }
  /* A refusing rank joins the exchange (coll.h, Errors) with the call's total count, which it
   * knows while it has the counts. */
  int joinable = bad == GR_OK || (counts && arg != GR__ARG_COUNT);
  if (bad != GR_OK && joinable) {
    total = 0;
    for (size_t i = 0; i < nbufs; i++)
      total += counts[i] <= SIZE_MAX - total ? counts[i] : 0;
  }
  gr__call k = CALL_INIT(GR__ALLREDUCE, comm);
  k.count = total, k.dtype = dtype, k.op = op, k.stream = stream;
  int packed = grp.depth == 0 && (comm->ops->caps & GR__CAP_PACK_MULTI) && !comm->gpu_buffers;
  if (comm->check && grp.depth == 0) {
    /* One fingerprint for the whole call (buffer counts and forms hashed), also when a rank
     * refused it or has no buffers: every rank returns the same. */
    k.fe_refused = arg;
    fingerprint f = fingerprint_of(&k, bad);
    f.hash = bad == GR_OK ? fnv(hash, nbufs) : 0;
    f.inplace = -1;
    exchange x;
    gr_status st = exchange_post(fn, comm, &x, f);
    if (st != GR_OK) return bad != GR_OK ? bad : st;
    st = x.rc == MPI_SUCCESS ? gr__mpi_wait(comm, &x.req, gr__deadline(comm->timeout_s))
                             : GR_ERR_MPI;
    if (st == GR_ERR_TIMEOUT) {
      abandon(x.all);
      k.seq = comm->seq + 1;
      comm->err[0] = '\0';
      return timed_out(fn, &k, "the check-mode fingerprint exchange before");
    }
    if (st != GR_OK) {
      free(x.all);
      return bad != GR_OK ? bad : gr__fail(GR_ERR_MPI, fn, "check mode: MPI_Iallgather failed");
    }
    GR_CHECK(exchange_verdict(fn, comm, &x, bad));
  } else if (bad != GR_OK && grp.depth == 0 && joinable && nbufs > 0) {
    /* Unpacked, the others agree in the group below (one verdict, as ROUTE_AGREE does). */
    int route = refusal_route(&k);
    k.fe_refused = arg;
    return join_refused(fn, &k, bad, packed || route == ROUTE_NONE ? route : ROUTE_VERDICT);
  }
  if (bad != GR_OK) return bad;
  if (nbufs == 0) return GR_OK;
  if (!packed) {
    /* Checked above as one call; inside a user's group each buffer is a grouped call (and
     * checked with the group). */
    int was = comm->check;
    if (grp.depth == 0) comm->check = 0;
    gr_status st = gr_group_start();
    for (size_t i = 0; i < nbufs && st == GR_OK; i++)
      st = gr_allreduce(send[i], recv[i], counts[i], dtype, op, comm, stream);
    gr_status st2 = gr_group_end();
    comm->check = was;
    return st != GR_OK ? st : st2;
  }
  char *pack = malloc(total * es + 1);
  if (!pack) return gr__fail(GR_ERR_NOMEM, fn, "out of memory packing %zu elements", total);
  size_t off = 0;
  for (size_t i = 0; i < nbufs; i++) {
    if (counts[i]) memcpy(pack + off, send[i], counts[i] * es);
    off += counts[i] * es;
  }
  k.send = k.recv = pack;
  gr_status st = run_one(fn, &k, comm->check);
  if (st == GR_OK) {
    off = 0;
    for (size_t i = 0; i < nbufs; i++) {
      if (counts[i]) memcpy(recv[i], pack + off, counts[i] * es);
      off += counts[i] * es;
    }
    free(pack);
  } else if (st != GR_ERR_TIMEOUT) {
    free(pack); /* after a timeout MPI may still write it */
  }
  return st;
}

/* ---- non-blocking requests -------------------------------------------------------------- */

/* A request's start never waits for the other ranks: a non-blocking collective is local (MPI's
 * rule, and programs that post, then exchange point to point, then wait rely on it). How a refusal
 * reaches the others (coll.h, Errors):
 * - the shared-memory descriptor (ROUTE_CALL) and check mode (whose fingerprint exchange makes the
 *   start collective) as for blocking calls: the refusing rank's start returns GR_ERR_INVALID at
 *   once, the others' requests fail at their start (check mode) or their wait;
 * - the MPI algorithms (ROUTE_AGREE): the start returns a request on every rank, the refusing
 *   rank's included, and every rank's wait returns GR_ERR_INVALID naming the lowest refusing rank
 *   and argument. Two forms, chosen from what every rank knows alike:
 *     in band   (allreduces that inband() takes: up to 64 KiB on host buffers) as run_inband: the
 *               data call runs at once on a copy (pack) with one more element, the refusal flag
 *               (a refusing rank contributes zeros and the flag); the result is copied to recv
 *               when the flag is clear. No extra round. After a refusal every rank sends its
 *               verdict word to every other point to point over c->req_mpi, tagged with the
 *               request's in-band number (no collective: the ranks get there in the order they
 *               wait, which may differ), and the MAX names the lowest refusing rank;
 *     deferred  (everything else) the start posts the 4-byte verdict, MPI_Iallreduce (MAX) on
 *               c->req_mpi, and the data call is posted once the verdict is in and clear, not at
 *               all otherwise: one more 4-byte round before the data, paid inside the wait. The
 *               verdicts have a communicator of their own because they are posted at the starts
 *               while the data calls are posted later, from inside other calls: each keeps one
 *               order on every rank that way.
 * Data calls are posted in start order on every rank: c's FIFO (defer_head) holds the requests not
 * yet posted, only its head may post, and a request started while it is not empty queues behind it
 * whatever its route. Every blocking call, group, gr_allreduce_multi and gr_comm_split on c drains
 * it first (gr__requests_drain), so that they follow the requests' data calls on every rank. The
 * request's deadline, from its start, covers the verdict. */
enum { REQ_QUEUED, REQ_POSTED };

struct gr_request {
  gr__call k;    /* the backend keeps state in here: a request never moves once started */
  gr__call user; /* in band: the call as the user made it (k is its in-band form) */
  const char *fn;
  double t0, deadline;
  struct gr_request *next; /* in c's FIFO while REQ_QUEUED */
  int state;
  gr_status bad;       /* this rank's own refusal (GR_ERR_INVALID), its sentence in own */
  int arg;             /* this rank's refusal (gr__arg), GR__ARG_NONE */
  int verdict;         /* deferred: a verdict was posted; v[1] is everyone's once vdone */
  int vdone;           /* v[1] is in (-1: the MPI call failed) */
  int *v;              /* v[0] this rank's word, v[1] the MAX: heap, abandoned if never in */
  MPI_Request vreq;    /* the verdict's MPI_Iallreduce */
  unsigned char *pack; /* in band: the data call's buffer (inband_bytes); NULL otherwise */
  _Alignas(16) unsigned char small[64]; /* pack when it fits: no allocation for small calls */
  uint64_t no;   /* in band: the communicator's in-band request number (the naming tag) */
  int naming;    /* in band, a rank refused: the words are being exchanged (names_in) */
  int names_err; /* that exchange failed (out of memory, MPI) */
  int *names;    /* every rank's verdict word by rank; names[size] is this rank's sent one */
  MPI_Request *name_reqs;
  int nname_reqs;
  int data_done; /* the data call finished, failed to post, or is never posted */
  gr_status data_st;
  char own[GR__ERRLEN];      /* this rank's own refusal, after "rank R: fn: " */
  char post_err[GR__ERRLEN]; /* the backend's detail of a failed post, for the wait's sentence */
};

static void defer_push(gr_comm *c, gr_request *q) {
  q->next = NULL;
  if (c->defer_tail)
    c->defer_tail->next = q;
  else
    c->defer_head = q;
  c->defer_tail = q;
}

static void defer_unlink(gr_comm *c, gr_request *q) {
  gr_request *prev = NULL, *p = c->defer_head;
  while (p && p != q)
    prev = p, p = p->next;
  if (!p) return;
  if (prev)
    prev->next = q->next;
  else
    c->defer_head = q->next;
  if (c->defer_tail == q) c->defer_tail = prev;
  q->next = NULL;
}

/* 1 once q needs no verdict or its verdict is in. Never blocks. (Plain MPI_Test: one MPI_INT on
 * every rank cannot fail the way gr__mpi_test guards against.) */
static int verdict_in(gr_request *q) {
  if (!q->verdict || q->vdone) return 1;
  int flag = 0;
  if (MPI_Test(&q->vreq, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS) q->v[1] = -1, flag = 1;
  q->vdone = flag;
  return flag;
}

/* In band, after a refusal: this rank's word to every other rank, theirs from every other. */
static void names_start(gr_request *q) {
  gr_comm *c = q->k.comm;
  int P = c->size, n = 0;
  q->naming = 1;
  q->names = malloc(sizeof *q->names * ((size_t)P + 1));
  q->name_reqs = malloc(sizeof *q->name_reqs * 2 * (size_t)P);
  if (!q->names || !q->name_reqs) {
    q->names_err = 1;
    return;
  }
  int *ub = NULL, has = 0;
  MPI_Comm_get_attr(c->req_mpi, MPI_TAG_UB, &ub, &has);
  int tag = (int)(q->no % (uint64_t)(has && ub && *ub > 0 ? *ub : 32767));
  q->names[P] = verdict_word(c, q->arg);
  for (int r = 0; r < P; r++) {
    q->names[r] = r == c->rank ? q->names[P] : 0;
    if (r == c->rank) continue;
    if (MPI_Irecv(&q->names[r], 1, MPI_INT, r, tag, c->req_mpi, &q->name_reqs[n]) == MPI_SUCCESS)
      n++;
    else
      q->names_err = 1;
    if (MPI_Isend(&q->names[P], 1, MPI_INT, r, tag, c->req_mpi, &q->name_reqs[n]) == MPI_SUCCESS)
      n++;
    else
      q->names_err = 1;
  }
  q->nname_reqs = n;
}

/* 1 once the words are in (or the exchange failed). Never blocks. */
static int names_in(gr_request *q) {
  if (!q->naming) names_start(q);
  if (!q->names || !q->name_reqs) return 1;
  int flag = 0;
  if (MPI_Testall(q->nname_reqs, q->name_reqs, &flag, MPI_STATUSES_IGNORE) != MPI_SUCCESS)
    q->names_err = flag = 1;
  if (flag) q->nname_reqs = 0;
  return flag;
}

static void post_data(gr_request *q) {
  gr__call *k = &q->k;
  gr_comm *c = k->comm;
  q->state = REQ_POSTED;
  if (q->verdict && q->v[1] != 0) { /* refused somewhere: nobody posts it */
    q->data_done = 1;
    return;
  }
  k->blocking_ok = 0;
  c->err[0] = '\0';
  int done = 0;
  gr_status st = c->ops->post(k, &done);
  if (st != GR_OK) snprintf(q->post_err, sizeof q->post_err, "%s", c->err);
  q->data_done = done || st != GR_OK;
  q->data_st = st;
}

/* Post the data calls of c's FIFO, oldest first, up to the first whose verdict is not in (a
 * deferred one; the others post at once). Never blocks. */
static void defer_advance(gr_comm *c) {
  gr_request *q;
  while ((q = c->defer_head)) {
    if (!verdict_in(q)) return;
    c->defer_head = q->next;
    if (!c->defer_head) c->defer_tail = NULL;
    q->next = NULL;
    post_data(q);
  }
}

gr_status gr__requests_drain(const char *fn, gr_comm *c) {
  for (unsigned spin = 0; c->defer_head; spin++) {
    defer_advance(c);
    gr_request *q = c->defer_head;
    if (!q) break;
    if (c->aborted) return gr__check_alive(fn, c);
    if ((spin & 15) == 15) {
      if (q->deadline > 0 && gr__mono_now() > q->deadline) {
        c->err[0] = '\0'; /* q's own wait then returns GR_ERR_ABORTED */
        return timed_out(fn, &q->k, "the agreement on the arguments of the pending request");
      }
      gr__flight_poll();
    }
  }
  return GR_OK;
}

/* Release q; buffers MPI may still write (a verdict not in, a data call not finished) are
 * abandoned rather than freed. */
static void request_free(gr_request *q) {
  if (q->v) {
    if (q->verdict && !q->vdone)
      abandon(q->v);
    else
      free(q->v);
  }
  int keep = 0; /* q itself holds the pack MPI may still write */
  if (q->pack) {
    if (q->state != REQ_POSTED || q->data_done)
      free(q->pack == q->small ? NULL : q->pack);
    else if (q->pack == q->small)
      keep = 1;
    else
      abandon(q->pack);
  }
  if (q->names) {
    if (q->nname_reqs)
      abandon(q->names); /* its receives may still complete */
    else
      free(q->names);
  }
  free(q->name_reqs);
  if (keep)
    abandon(q);
  else
    free(q);
}

/* Data call and verdict are in: the outcome. A refusal anywhere (all ranks see the same verdict)
 * ends the request as a refused blocking call ends: GR_ERR_INVALID, not counted, recv untouched. */
static gr_status request_outcome(gr_request *q) {
  gr__call *k = &q->k;
  gr_comm *c = k->comm;
  int all = q->verdict ? q->v[1] : 0;
  if (q->naming) {
    for (int r = 0; r < c->size && !q->names_err; r++)
      all = q->names[r] > all ? q->names[r] : all;
    if (q->names_err) all = -1;
  }
  if (q->naming && all == 0) {
    end(k, GR__FL_FAILED, q->t0);
    return gr__fail(GR_ERR_INTERNAL, q->fn, "a refusal was signalled but not agreed");
  }
  if (all != 0) {
    gr_status st;
    if (all < 0)
      st = gr__fail(GR_ERR_MPI, q->fn, "the agreement on the arguments: MPI_Iallreduce failed");
    else if (q->bad != GR_OK)
      st = gr__fail(q->bad, q->fn, "%s", q->own);
    else {
      char what[96];
      snprintf(what, sizeof what, "%s(count=%zu)", gr__kind_name(shown(k)->kind), shown_count(k));
      st = verdict_fail(q->fn, c, all, what);
    }
    if (all > 0) k->fe_refused = all & 0xff; /* not a call anyone made: no counters */
    end(k, GR__FL_FAILED, q->t0);
    return st;
  }
  const loop_style y = {q->fn, "", 1, 0};
  if (q->data_st != GR_OK) {
    snprintf(c->err, sizeof c->err, "%s", q->post_err);
    return settle(&y, k, q->data_st, q->t0, 1.0, 1);
  }
  if (q->pack && q->user.count)
    memcpy(q->user.recv, q->pack, q->user.count * gr__dtype_size(q->user.dtype));
  return settle(&y, k, GR_OK, q->t0, 1.0, 1);
}

static gr_status request_timeout(gr_request *q) {
  gr__call *k = &q->k;
  gr_comm *c = k->comm;
  const char *what = "";
  if (q->state == REQ_QUEUED) {
    defer_unlink(c, q);
    what = "the agreement on the arguments before";
  } else if (!q->data_done) {
    c->ops->forget(k);
  } else {
    what = "the agreement on the arguments of";
  }
  end(k, GR__FL_TIMEOUT, q->t0);
  return timed_out(q->fn, k, what);
}

/* Start k as a request in *out; unret (GR_OK, or why this rank cannot hand out a request, its
 * sentence recorded and k->fe_refused set) makes it a refusal whatever validate says. */
static gr_status begin_request(const char *fn, gr__call *k, gr_request **out, gr_status unret) {
  gr_comm *c = k->comm;
  gr_status bad = unret != GR_OK ? unret : validate(fn, k);
  int route = refusal_route(k);
  int agree = route == ROUTE_AGREE && c->req_mpi != MPI_COMM_NULL;
  if (bad != GR_OK && !agree) {
    if (c->check) return exchange_fingerprint(fn, k, bad);
    if (route != ROUTE_CALL) return bad;
    char own[GR__ERRLEN];
    own_sentence(own, sizeof own, fn);
    GR_CHECK(gr__requests_drain(fn, c)); /* the refusing rank's descriptor-only call is blocking */
    gr__fail(bad, fn, "%s", own);
    return join_refused(fn, k, bad, ROUTE_CALL);
  }
  gr_request *q = calloc(1, sizeof *q);
  if (!q) return gr__fail(GR_ERR_NOMEM, fn, "out of memory");
  if (bad != GR_OK) own_sentence(q->own, sizeof q->own, fn);
  gr__flight_poll();
  if (c->check) {
    gr_status st = exchange_fingerprint(fn, k, GR_OK);
    if (st != GR_OK) {
      free(q);
      return st;
    }
  }
  q->k = *k;
  q->fn = fn;
  q->bad = bad;
  q->vreq = MPI_REQUEST_NULL;
  q->state = REQ_QUEUED;
  int arg = bad == GR_OK ? GR__ARG_NONE : k->fe_refused ? k->fe_refused : GR__ARG_BUFFERS;
  q->arg = arg;
  if (agree && inband(k)) {
    size_t bytes = inband_bytes(k);
    q->pack = bytes <= sizeof q->small ? q->small : malloc(bytes);
    if (!q->pack) {
      free(q);
      return gr__fail(GR_ERR_NOMEM, fn, "out of memory (%zu bytes)", bytes);
    }
    q->user = *k;
    inband_pack(&q->user, arg, q->pack, &q->k);
    q->no = c->req_inband++;
  }
  k = &q->k;
  k->fe_request = 1;
  k->fe_refused = GR__ARG_NONE; /* the backend posts this call with its data (or a copy) */
  if (agree && !q->pack) {
    q->v = malloc(2 * sizeof *q->v);
    if (!q->v) {
      free(q);
      return gr__fail(GR_ERR_NOMEM, fn, "out of memory");
    }
    q->v[0] = verdict_word(c, arg);
    q->v[1] = 0;
    if (MPI_Iallreduce(&q->v[0], &q->v[1], 1, MPI_INT, MPI_MAX, c->req_mpi, &q->vreq) !=
        MPI_SUCCESS) {
      free(q->v), free(q);
      return gr__fail(GR_ERR_MPI, fn, "the agreement on the arguments: MPI_Iallreduce failed");
    }
    q->verdict = 1;
  }
  begin(k);
  q->t0 = gr__mono_now();
  q->deadline = c->timeout_s > 0 ? q->t0 + c->timeout_s : 0.0;
  if (c->defer_head) defer_advance(c);
  if (c->defer_head || q->verdict) {
    defer_push(c, q);
  } else {
    post_data(q);
    if (q->data_st != GR_OK) { /* nothing else in flight: fail the start */
      const loop_style y = {fn, "", 1, 0};
      snprintf(c->err, sizeof c->err, "%s", q->post_err);
      gr_status st = settle(&y, k, q->data_st, q->t0, 1.0, 1);
      request_free(q);
      return st;
    }
  }
  __atomic_add_fetch(&c->pending, 1, __ATOMIC_ACQ_REL);
  *out = q;
  return GR_OK;
}

/* A rank that cannot hand out a request (req NULL, or the call inside a group) is a refusing rank
 * like any other: the others started theirs and wait for its part, so it starts one of its own as
 * a refusal and waits for it here, then returns its own error (the others' waits name it). */
static gr_status start_request(const char *fn, gr__call *k, gr_request **out) {
  if (out) *out = NULL;
  GR_CHECK(gr__check_alive(fn, k->comm));
  gr_status unret = GR_OK;
  if (!out) {
    unret = gr__fail(GR_ERR_INVALID, fn, "req is NULL");
    k->fe_refused = GR__ARG_REQ;
  } else if (grp.depth > 0) {
    unret = gr__fail(GR_ERR_STATE, fn, "non-blocking calls cannot be part of a group");
    k->fe_refused = GR__ARG_GROUPED;
  }
  gr_request *q = NULL;
  gr_status st = begin_request(fn, k, &q, unret);
  if (unret == GR_OK) {
    *out = q;
    return st;
  }
  return st == GR_OK && q ? gr_wait(&q) : st;
}

GR_API gr_status gr_test(gr_request **req, int *done) {
  static const char fn[] = "gr_test";
  if (!req || !*req || !done) return gr__fail(GR_ERR_INVALID, fn, "req, *req or done is NULL");
  gr_request *q = *req;
  gr__call *k = &q->k;
  gr_comm *c = k->comm;
  *done = 0;
  gr_status st = GR_OK;
  if (c->aborted) {
    if (q->state == REQ_QUEUED)
      defer_unlink(c, q);
    else if (!q->data_done)
      c->ops->forget(k);
    end(k, GR__FL_FAILED, q->t0);
    st = gr__fail(GR_ERR_ABORTED, q->fn, "communicator %s was aborted before %s #%llu finished",
                  c->id, gr__kind_name(shown(k)->kind), (unsigned long long)k->seq);
  } else {
    if (c->defer_head) defer_advance(c);
    if (q->state == REQ_POSTED && !q->data_done) {
      int d = 0;
      c->err[0] = '\0';
      gr_status s = c->ops->test(k, &d);
      if (s != GR_OK) snprintf(q->post_err, sizeof q->post_err, "%s", c->err);
      q->data_done = d || s != GR_OK;
      q->data_st = s;
    }
    int ready = q->state == REQ_POSTED && q->data_done && verdict_in(q);
    if (ready && q->pack && q->data_st == GR_OK && !inband_clear(&q->k))
      ready = names_in(q); /* a rank refused: which? */
    /* Waiting for others' words (or a verdict) here, this rank must still move the calls that
     * only their owner's tests move: another rank may wait inside one of them before it gets to
     * this request (gpurun's own allreduces; a small broadcast travels as one). */
    if (!ready && (q->state != REQ_POSTED || q->data_done) && c->ops->progress) c->ops->progress(c);
    if (ready) {
      st = request_outcome(q);
    } else if (q->deadline > 0 && gr__mono_now() > q->deadline) {
      st = request_timeout(q);
    } else {
      gr__flight_poll();
      return GR_OK; /* still running */
    }
  }
  *done = 1;
  __atomic_sub_fetch(&c->pending, 1, __ATOMIC_ACQ_REL);
  request_free(q);
  *req = NULL;
  return st;
}

GR_API gr_status gr_wait(gr_request **req) {
  if (!req || !*req) return gr__fail(GR_ERR_INVALID, "gr_wait", "req or *req is NULL");
  (*req)->k.fe_waiting = 1; /* the backend may work at full speed and sleep (gr_coll.h) */
  int done = 0;
  gr_status st;
  do
    st = gr_test(req, &done);
  while (!done && st == GR_OK);
  return st;
}

GR_API gr_status gr_iallreduce(const void *send, void *recv, size_t count, gr_dtype dtype, gr_op op,
                               gr_comm *comm, gr_stream stream, gr_request **req) {
  gr__call k = CALL_INIT(GR__ALLREDUCE, comm);
  k.send = send, k.recv = recv, k.count = count, k.dtype = dtype, k.op = op, k.stream = stream;
  return start_request("gr_iallreduce", &k, req);
}

GR_API gr_status gr_ibroadcast(const void *send, void *recv, size_t count, gr_dtype dtype, int root,
                               gr_comm *comm, gr_stream stream, gr_request **req) {
  gr__call k = CALL_INIT(GR__BROADCAST, comm);
  k.send = send, k.recv = recv, k.count = count, k.dtype = dtype, k.root = root, k.stream = stream;
  return start_request("gr_ibroadcast", &k, req);
}

GR_API gr_status gr_iallgather(const void *send, void *recv, size_t sendcount, gr_dtype dtype,
                               gr_comm *comm, gr_stream stream, gr_request **req) {
  gr__call k = CALL_INIT(GR__ALLGATHER, comm);
  k.send = send, k.recv = recv, k.count = sendcount, k.dtype = dtype, k.stream = stream;
  return start_request("gr_iallgather", &k, req);
}

/* ---- groups ------------------------------------------------------------------------------- */

GR_API gr_status gr_group_start(void) {
  grp.depth++;
  return GR_OK;
}

/* The group's calls on c are dropped (st): every rank of c reached the same verdict on c, so all
 * drop them, while the calls on the group's other communicators still run (ranks outside c wait
 * for them). */
static void drop_calls_on(gr__call *q, size_t n, const gr_comm *c, gr_status st) {
  for (size_t i = 0; i < n; i++)
    if (q[i].comm == c && q[i].fe_bad == GR_OK) q[i].fe_bad = st;
}

/* Check mode for a group: one fingerprint per communicator that has collectives in it (their
 * number and a hash of their fingerprints in order, and whether this rank refused any of its
 * calls on that communicator), exchanged for all communicators at once, so that the order in
 * which ranks list communicators in their groups cannot deadlock the check. Point-to-point calls
 * on a communicator without collectives in the group are not exchanged (not every rank of the
 * communicator takes part); a rank that refused one of those drops it, as without check mode. */
static gr_status check_group(const char *fn, gr__call *q, size_t n) {
  gr_comm *comms[64];
  size_t nc = 0;
  for (size_t i = 0; i < n; i++) {
    if (q[i].comm->aborted) return gr__check_alive(fn, q[i].comm);
    if (!q[i].comm->check || !is_collective(q[i].kind)) continue;
    size_t j = 0;
    while (j < nc && comms[j] != q[i].comm)
      j++;
    if (j == nc) {
      if (nc == sizeof comms / sizeof comms[0])
        return gr__fail(GR_ERR_UNSUPPORTED, fn,
                        "check mode handles groups over at most %zu "
                        "communicators",
                        nc);
      comms[nc++] = q[i].comm;
    }
  }
  if (nc == 0) return GR_OK;
  exchange x[64];
  gr_status first = GR_OK, mine[64];
  double deadline = 0, t0 = gr__mono_now();
  size_t posted = 0;
  for (size_t j = 0; j < nc; j++) {
    gr_comm *c = comms[j];
    fingerprint f = {0, 0, 1469598103934665603ull, KIND_GROUP, -1, -1, -1, -1, 0};
    mine[j] = GR_OK;
    for (size_t i = 0; i < n; i++) {
      if (q[i].comm != c) continue;
      if (q[i].fe_bad != GR_OK && mine[j] == GR_OK) {
        mine[j] = q[i].fe_bad;
        f.bad = q[i].fe_refused ? q[i].fe_refused : GR__ARG_BUFFERS;
      }
      if (!is_collective(q[i].kind)) continue;
      fingerprint g = fingerprint_of(&q[i], GR_OK);
      f.count++;
      uint64_t h = f.hash;
      h = fnv(fnv(fnv(h, (uint64_t)g.kind), g.count), (uint64_t)(uint32_t)g.dtype);
      f.hash = fnv(fnv(fnv(h, (uint64_t)(uint32_t)g.op), (uint64_t)(uint32_t)g.root),
                   (uint64_t)(uint32_t)g.inplace);
    }
    if (mine[j] != GR_OK) f.hash = 0;
    if (c->timeout_s > 0 && (deadline == 0 || t0 + c->timeout_s < deadline))
      deadline = t0 + c->timeout_s;
    first = exchange_post(fn, c, &x[j], f);
    if (first != GR_OK) break;
    posted++;
  }
  for (size_t j = 0; j < posted; j++) {
    gr_comm *c = comms[j];
    gr_status st = x[j].rc == MPI_SUCCESS ? gr__mpi_wait(c, &x[j].req, deadline) : GR_ERR_MPI;
    if (st == GR_ERR_TIMEOUT) {
      for (size_t i = 0; i < n; i++)
        if (q[i].comm == c) {
          q[i].seq = c->seq + 1;
          c->err[0] = '\0';
          st = timed_out(fn, &q[i], "the check-mode fingerprint exchange before grouped");
          break;
        }
      drop_calls_on(q, n, c, st);
      if (first == GR_OK) first = st;
      abandon(x[j].all); /* MPI may still write it */
      continue;
    }
    if (st != GR_OK) {
      free(x[j].all);
      st = gr__fail(GR_ERR_MPI, fn, "check mode: MPI_Iallgather failed");
      drop_calls_on(q, n, c, st);
      if (first == GR_OK) first = st;
      continue;
    }
    st = exchange_verdict(fn, c, &x[j], mine[j]);
    if (st != GR_OK) drop_calls_on(q, n, c, st);
    if (first == GR_OK) first = st;
  }
  for (size_t j = posted; j < nc; j++)
    drop_calls_on(q, n, comms[j], first);
  return first;
}

/* Without check mode: one verdict per communicator that has collectives in the group
 * (ROUTE_AGREE), posted for all at once like check_group's, so that a call one rank refused fails
 * the group on every rank before anything is posted. */
static gr_status agree_group(const char *fn, gr__call *q, size_t n) {
  gr_comm *comms[64];
  size_t nc = 0;
  for (size_t i = 0; i < n; i++) {
    if (!is_collective(q[i].kind) || refusal_route(&q[i]) == ROUTE_NONE) continue;
    size_t j = 0;
    while (j < nc && comms[j] != q[i].comm)
      j++;
    if (j == nc) {
      if (nc == sizeof comms / sizeof comms[0])
        return gr__fail(GR_ERR_UNSUPPORTED, fn, "groups span at most %zu communicators", nc);
      comms[nc++] = q[i].comm;
    }
  }
  if (nc == 0) return GR_OK;
  int *v = calloc(2 * nc, sizeof *v); /* abandoned after a timeout: MPI may still write it */
  MPI_Request req[64];
  if (!v) return gr__fail(GR_ERR_NOMEM, fn, "out of memory");
  double deadline = 0, t0 = gr__mono_now();
  for (size_t j = 0; j < nc; j++) {
    gr_comm *c = comms[j];
    int arg = GR__ARG_NONE;
    for (size_t i = 0; i < n && !arg; i++)
      if (q[i].comm == c && q[i].fe_bad != GR_OK)
        arg = q[i].fe_refused ? q[i].fe_refused : GR__ARG_BUFFERS;
    v[j] = verdict_word(c, arg);
    if (c->timeout_s > 0 && (deadline == 0 || t0 + c->timeout_s < deadline))
      deadline = t0 + c->timeout_s;
    req[j] = MPI_REQUEST_NULL;
    if (MPI_Iallreduce(&v[j], &v[nc + j], 1, MPI_INT, MPI_MAX, c->mpi, &req[j]) != MPI_SUCCESS)
      v[nc + j] = -1;
  }
  gr_status first = GR_OK;
  int timed = 0;
  for (size_t j = 0; j < nc; j++) {
    gr_comm *c = comms[j];
    gr_status st = req[j] != MPI_REQUEST_NULL ? gr__mpi_wait(c, &req[j], deadline) : GR_OK;
    if (st == GR_ERR_TIMEOUT) {
      timed = 1;
      for (size_t i = 0; i < n; i++)
        if (q[i].comm == c) {
          q[i].seq = c->seq + 1;
          c->err[0] = '\0';
          st = timed_out(fn, &q[i], "the agreement on the arguments before grouped");
          break;
        }
    } else if (st != GR_OK || v[nc + j] < 0) {
      st = gr__fail(GR_ERR_MPI, fn, "the agreement on the arguments: MPI_Iallreduce failed");
    } else if (v[nc + j]) {
      st = verdict_fail(fn, c, v[nc + j], "a grouped call");
    }
    if (st != GR_OK) drop_calls_on(q, n, c, st);
    if (first == GR_OK) first = st;
  }
  if (timed)
    abandon(v);
  else
    free(v);
  return first;
}

static gr_status run_group(const char *fn) {
  size_t n = grp.n;
  gr__call *q = grp.q;
  /* The requests waiting to post on the group's communicators go first, on every rank. */
  gr_status drained = GR_OK;
  for (size_t i = 0; i < n; i++)
    if (is_collective(q[i].kind) && q[i].comm->defer_head && !q[i].comm->aborted) {
      gr_status st = gr__requests_drain(fn, q[i].comm);
      if (st != GR_OK) drop_calls_on(q, n, q[i].comm, st);
      if (drained == GR_OK) drained = st;
    }
  /* Check mode first, for every communicator, before anything is posted; elsewhere the verdicts. */
  gr_status verdict = check_group(fn, q, n), agreed = agree_group(fn, q, n); /* both, always */
  if (verdict == GR_OK) verdict = agreed;
  /* Dropped: the calls on communicators whose check or agreement failed (by all their ranks
   * alike), and calls this rank refused on communicators without collectives in the group. The
   * rest runs, and gr_group_end returns the verdict's failure. */
  size_t kept = 0;
  for (size_t i = 0; i < n; i++)
    if (q[i].fe_bad == GR_OK) q[kept++] = q[i];
  n = kept;
  if (verdict == GR_OK) verdict = drained;
  if (n == 0) return verdict;
  gr_status first = GR_OK;
  double t0 = gr__mono_now(), deadline = 0, share = 1.0 / (double)n;
  for (size_t i = 0; i < n; i++) {
    double t = q[i].comm->timeout_s;
    if (t > 0 && (deadline == 0 || t0 + t < deadline)) deadline = t0 + t;
  }
  /* Post in order, each backend's run bracketed by its group hooks (NCCL's ncclGroupStart/End). */
  int *done = calloc(n, sizeof *done);
  if (!done) return gr__fail(GR_ERR_NOMEM, fn, "out of memory");
  const loop_style y = {fn, "grouped", 0, 0};
  size_t posted = 0;
  const gr__coll_ops *open = NULL;
  for (size_t i = 0; i < n && first == GR_OK; i++) {
    gr__call *k = &q[i];
    const gr__coll_ops *ops = k->comm->ops;
    if (ops != open) {
      if (open && open->group_finish) first = open->group_finish(q[i - 1].comm, deadline);
      if (first == GR_OK && ops->group_begin) first = ops->group_begin();
      open = ops;
      if (first != GR_OK) break;
    }
    begin(k);
    k->blocking_ok = 0;
    k->comm->err[0] = '\0';
    first = ops->post(k, &done[i]);
    if (first != GR_OK) {
      first = settle(&y, k, first, t0, share, 1);
      break;
    }
    posted = i + 1;
  }
  if (first == GR_OK && open && open->group_finish) {
    first = open->group_finish(q[n - 1].comm, deadline);
    if (first != GR_OK) first = gr__fail(first, fn, "%s", q[n - 1].comm->err);
  }
  /* Wait for everything posted, even after a failure: the peers are waiting for it too. */
  for (size_t i = 0; i < posted; i++)
    if (done[i]) end_share(&q[i], GR__FL_DONE, t0, share);
  first = progress(&y, q, posted, done, t0, deadline, share, first);
  free(done);
  return first != GR_OK ? first : verdict; /* first's sentence is the last recorded */
}

GR_API gr_status gr_group_end(void) {
  static const char fn[] = "gr_group_end";
  if (grp.depth == 0) return gr__fail(GR_ERR_STATE, fn, "no gr_group_start on this thread");
  if (--grp.depth > 0) return GR_OK;
  /* The queue is handed over: from here the calls are run (or failed) before this returns. */
  for (size_t i = 0; i < grp.n; i++)
    __atomic_sub_fetch(&grp.q[i].comm->pending, 1, __ATOMIC_ACQ_REL);
  gr_status st = grp.n ? run_group(fn) : GR_OK;
  free(grp.q);
  grp.q = NULL;
  grp.n = grp.cap = 0;
  return st;
}

GR_API gr_status gr_comm_synchronize(gr_comm *comm, gr_stream stream) {
  static const char fn[] = "gr_comm_synchronize";
  GR_CHECK(gr__check_alive(fn, comm));
  gr__flight_poll();
  comm->err[0] = '\0';
  gr_status st = comm->ops->synchronize(comm, stream, gr__deadline(comm->timeout_s));
  if (st == GR_ERR_TIMEOUT) {
    char path[1024] = "";
    if (gr__flight_dump("timeout", path, sizeof path) != 0)
      snprintf(path, sizeof path, "not written");
    gr__comm_abort_internal(comm);
    return gr__fail(st, fn,
                    "work enqueued on communicator %s (rank %d of %d, %s backend) after call "
                    "#%llu did not finish within %g s; the communicator is now aborted (flight "
                    "recorder: %s)",
                    comm->id, comm->rank, comm->size, comm->ops->name,
                    (unsigned long long)comm->seq, comm->timeout_s, path);
  }
  if (st != GR_OK) return gr__fail(st, fn, "%s backend: %s", comm->ops->name, comm->err);
  return GR_OK;
}
