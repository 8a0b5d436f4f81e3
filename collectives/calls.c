/* The collective and point-to-point calls: local argument checks, the check-mode fingerprint
 * exchange, groups, and the wait loop that enforces the timeout, records the flight recorder and
 * keeps the counters. */
#include "gr_coll.h"

#include "gr_dtype.h"
#include "gr_error.h"
#include "gr_flight.h"
#include "gr_log.h"

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

/* ---- local checks ------------------------------------------------------------------------ */

static int overlaps(const void *a, size_t na, const void *b, size_t nb) {
  uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
  return na && nb && x < y + nb && y < x + na;
}

/* Everything here depends only on this rank's own arguments and costs a few comparisons. */
static gr_status validate(const char *fn, gr__call *k) {
  gr_comm *c = k->comm;
  int P = c->size;
  if (k->kind == GR__BARRIER) return GR_OK;
  if (!gr__dtype_valid((int)k->dtype))
    return gr__fail(GR_ERR_INVALID, fn, "dtype %d is not a gr_dtype (GR_INT8..GR_FLOAT64)",
                    (int)k->dtype);
  size_t es = gr__dtype_size(k->dtype);
  int reduces = k->kind == GR__ALLREDUCE || k->kind == GR__REDUCE || k->kind == GR__REDUCE_SCATTER;
  if (reduces) {
    if (!gr__op_valid((int)k->op))
      return gr__fail(GR_ERR_INVALID, fn, "op %d is not a gr_op (GR_SUM..GR_AVG)", (int)k->op);
    if (!gr__op_defined(k->dtype, k->op))
      return gr__fail(GR_ERR_INVALID, fn, "op %s is not defined on dtype %s (AVG needs a "
                      "floating type)", gr__op_name(k->op), gr__dtype_name(k->dtype));
  }
  int rooted = k->kind == GR__BROADCAST || k->kind == GR__REDUCE;
  int p2p = k->kind == GR__SEND || k->kind == GR__RECV;
  if ((rooted || p2p) && (k->root < 0 || k->root >= P))
    return gr__fail(GR_ERR_INVALID, fn, "%s %d is out of range [0, %d) of communicator %s",
                    rooted ? "root" : "peer", k->root, P, c->id);
  if (p2p && k->root == c->rank && grp.depth == 0)
    return gr__fail(GR_ERR_INVALID, fn, "peer %d is this rank: a %s to itself outside "
                    "gr_group_start/gr_group_end would wait forever", k->root,
                    gr__kind_name(k->kind));
  /* Whole buffers must be addressable: count * size (* ranks) must fit. */
  size_t mult = (k->kind == GR__ALLGATHER || k->kind == GR__REDUCE_SCATTER ||
                 k->kind == GR__ALLTOALL) ? (size_t)P : 1;
  if (k->count > (size_t)PTRDIFF_MAX / es / mult)
    return gr__fail(GR_ERR_INVALID, fn, "count %zu of %s%s overflows the address space", k->count,
                    gr__dtype_name(k->dtype), mult > 1 ? " times the communicator size" : "");
  if (k->count == 0) return GR_OK;
  size_t n = k->count * es, big = n * mult;
  int is_root = rooted && k->root == c->rank;
  switch (k->kind) {
  case GR__BROADCAST:
    if (is_root && !k->send) return gr__fail(GR_ERR_INVALID, fn, "send is NULL on root %d with count %zu", k->root, k->count);
    if (!k->recv) return gr__fail(GR_ERR_INVALID, fn, "recv is NULL with count %zu", k->count);
    if (is_root && k->send != k->recv && overlaps(k->send, n, k->recv, n))
      return gr__fail(GR_ERR_INVALID, fn, "send and recv overlap without being equal (in place)");
    break;
  case GR__REDUCE:
    if (!k->send) return gr__fail(GR_ERR_INVALID, fn, "send is NULL with count %zu", k->count);
    if (is_root && !k->recv) return gr__fail(GR_ERR_INVALID, fn, "recv is NULL on root %d with count %zu", k->root, k->count);
    if (is_root && k->send != k->recv && overlaps(k->send, n, k->recv, n))
      return gr__fail(GR_ERR_INVALID, fn, "send and recv overlap without being equal (in place)");
    break;
  case GR__SEND:
  case GR__RECV: {
    const void *b = k->kind == GR__SEND ? k->send : k->recv;
    if (!b) return gr__fail(GR_ERR_INVALID, fn, "buf is NULL with count %zu", k->count);
    break;
  }
  default:
    if (!k->send) return gr__fail(GR_ERR_INVALID, fn, "send is NULL with count %zu", k->count);
    if (!k->recv) return gr__fail(GR_ERR_INVALID, fn, "recv is NULL with count %zu", k->count);
    if (k->kind == GR__ALLREDUCE || k->kind == GR__ALLTOALL) {
      if (k->send != k->recv && overlaps(k->send, big, k->recv, big))
        return gr__fail(GR_ERR_INVALID, fn, "send and recv overlap without being equal (in place)");
    } else if (k->kind == GR__ALLGATHER) {
      if (k->send != (const char *)k->recv + (size_t)c->rank * n && overlaps(k->send, n, k->recv, big))
        return gr__fail(GR_ERR_INVALID, fn, "send overlaps recv; in place means send == recv + "
                        "rank * sendcount elements");
    } else if (k->kind == GR__REDUCE_SCATTER) {
      if (k->recv != (const char *)k->send + (size_t)c->rank * n && overlaps(k->send, big, k->recv, n))
        return gr__fail(GR_ERR_INVALID, fn, "recv overlaps send; in place means recv == send + "
                        "rank * recvcount elements");
    }
  }
  return GR_OK;
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
  case GR__ALLTOALL: return k->count > 0 && k->send == k->recv;
  case GR__ALLGATHER:
    return k->count > 0 && k->recv && k->send == (const char *)k->recv + (size_t)c->rank * n;
  case GR__REDUCE_SCATTER:
    return k->count > 0 && k->send && k->recv == (const char *)k->send + (size_t)c->rank * n;
  default: return -1;
  }
}

static fingerprint fingerprint_of(const gr__call *k, gr_status bad) {
  int reduces = k->kind == GR__ALLREDUCE || k->kind == GR__REDUCE || k->kind == GR__REDUCE_SCATTER;
  int rooted = k->kind == GR__BROADCAST || k->kind == GR__REDUCE;
  fingerprint f = {0, k->count, 0, (int32_t)k->kind, k->kind == GR__BARRIER ? -1 : (int32_t)k->dtype,
                   reduces ? (int32_t)k->op : -1, rooted ? k->root : -1,
                   bad == GR_OK ? inplace_form(k) : -1, bad != GR_OK};
  return f;
}

static uint64_t fnv(uint64_t h, uint64_t x) {
  for (int i = 0; i < 8; i++) h = (h ^ ((x >> (8 * i)) & 0xff)) * 1099511628211ull;
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
  int n = snprintf(s, len, "%s(count=%llu", f->kind >= 0 && f->kind < GR__NKINDS ?
                   gr__kind_name((gr__kind)f->kind) : "?", (unsigned long long)f->count);
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

/* One exchange in flight: this rank's fingerprint and everybody's. */
typedef struct {
  fingerprint mine, stack[16], *all;
  MPI_Request req;
  int rc;
} exchange;

static gr_status exchange_post(const char *fn, gr_comm *c, exchange *x, fingerprint f) {
  f.seq = ++c->coll_seq;
  x->mine = f;
  x->all = c->size <= 16 ? x->stack : malloc(sizeof *x->all * (size_t)c->size);
  x->req = MPI_REQUEST_NULL;
  if (!x->all) return gr__fail(GR_ERR_NOMEM, fn, "out of memory (check mode)");
  x->rc = MPI_Iallgather(&x->mine, (int)sizeof x->mine, MPI_BYTE, x->all, (int)sizeof x->mine,
                         MPI_BYTE, c->check_mpi, &x->req);
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
        out = gr__fail(GR_ERR_INVALID, fn, "rank %d of communicator %s rejected its own arguments "
                       "to %s call #%llu; no rank sent anything", r, c->id,
                       all[r].kind == KIND_GROUP ? "a grouped" : gr__kind_name((gr__kind)all[r].kind),
                       (unsigned long long)all[r].seq);
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
          out = gr__fail(GR_ERR_MISMATCH, fn, "rank %d called %s as call #%llu while rank 0 called "
                         "%s (communicator %s)", r, a, (unsigned long long)all[r].seq, b, c->id);
        else
          out = gr__fail(GR_ERR_MISMATCH, fn, "rank %d called %s as call #%llu while rank 0 called "
                         "%s as call #%llu (communicator %s)", r, a, (unsigned long long)all[r].seq,
                         b, (unsigned long long)all[0].seq, c->id);
        break;
      }
  }
  if (all != x->stack) free(all);
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
  if (st == GR_ERR_TIMEOUT) { /* MPI may still write x.all: it is left allocated */
    k->seq = c->seq + 1;
    c->err[0] = '\0'; /* no backend detail belongs in this sentence */
    return timed_out(fn, k, "the check-mode fingerprint exchange before");
  }
  if (st != GR_OK) {
    if (x.all != x.stack) free(x.all);
    return bad != GR_OK ? bad : gr__fail(GR_ERR_MPI, fn, "check mode: MPI_Iallgather failed");
  }
  return exchange_verdict(fn, c, &x, bad);
}

/* ---- execution ---------------------------------------------------------------------------- */

static size_t call_bytes(const gr__call *k) {
  if (k->kind == GR__BARRIER) return 0;
  size_t b = k->count * gr__dtype_size(k->dtype);
  return k->kind == GR__ALLTOALL || k->kind == GR__REDUCE_SCATTER ? b * (size_t)k->comm->size : b;
}

static void begin(gr__call *k) {
  gr_comm *c = k->comm;
  k->seq = ++c->seq;
  k->t_start = gr__wall_now();
  int peer = k->kind == GR__SEND || k->kind == GR__RECV;
  k->flight_slot = gr__flight_begin(c->flight, k->seq, (int)k->kind, k->count,
                                    k->kind == GR__BARRIER ? -1 : (int)k->dtype,
                                    peer ? -1 : k->root, peer ? k->root : -1, k->t_start);
}

/* share: the part of the elapsed time charged to this call in the counters. A call of a group of
 * n is charged 1/n of its time, so that the calls of a group, which all run during one
 * gr_group_end, add up to no more than the time spent in it. */
static void end_share(gr__call *k, gr__flight_state fs, double t0, double share) {
  gr_comm *c = k->comm;
  double t1 = gr__mono_now();
  gr__flight_end(c->flight, k->flight_slot, k->seq, fs, k->t_start + (t1 - t0));
  c->stats.calls[k->kind]++;
  c->stats.bytes[k->kind] += call_bytes(k);
  c->stats.seconds[k->kind] += (t1 - t0) * share;
  if (fs == GR__FL_FAILED) c->stats.failures++;
  if (fs == GR__FL_TIMEOUT) c->stats.timeouts++;
}

static void end(gr__call *k, gr__flight_state fs, double t0) { end_share(k, fs, t0, 1.0); }

static gr_status timed_out(const char *fn, gr__call *k, const char *what) {
  gr_comm *c = k->comm;
  char path[1024] = "";
  if (gr__flight_dump("timeout", path, sizeof path) != 0) snprintf(path, sizeof path, "not written");
  gr__comm_abort_internal(c);
  return gr__fail(GR_ERR_TIMEOUT, fn, "%s%s%s #%llu (count=%zu, dtype=%s) on communicator %s "
                  "(rank %d of %d, %s backend) did not complete within %g s%s%s%s; the communicator is "
                  "now aborted (flight recorder: %s)", what, what[0] ? " " : "",
                  gr__kind_name(k->kind), (unsigned long long)k->seq, k->count,
                  k->kind == GR__BARRIER ? "none" : gr__dtype_name(k->dtype), c->id, c->rank,
                  c->size, c->ops->name, c->timeout_s, c->err[0] ? " (" : "", c->err, c->err[0] ? ")" : "", path);
}

/* ---- the one progress loop ------------------------------------------------------------ */

/* How a path words its outcomes (the sentences each path has always given). */
typedef struct {
  const char *fn;
  const char *timeout_what;  /* "" (a call, a request) or "grouped" */
  int name_backend;          /* failure sentences name the backend (single calls and requests) */
  int backend_timeout;       /* a backend's own GR_ERR_TIMEOUT is this call's timeout (blocking) */
  int once;                  /* one sweep, deadline checked every time (gr_test) */
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
                    gr__kind_name(k->kind), (unsigned long long)k->seq, c->id, c->ops->name,
                    c->err);
  return gr__fail(st, y->fn, "%s #%llu on communicator %s: %s", gr__kind_name(k->kind),
                  (unsigned long long)k->seq, c->id, c->err);
}

/* Test the posted calls k[0..n) whose done[i] is 0 until all are settled, or (y->once) sweep once.
 * first: a failure the caller met already (while posting), whose sentence stands.
 * Every 16th sweep (every sweep when once) checks the deadline (0 = none) and, before it, serves
 * the flight recorder's signal. Past the deadline every unsettled call is forgotten, recorded as
 * timed out and its communicator aborted; the first one's sentence is returned. Otherwise the first
 * failure's sentence (the others are still waited for: the peers wait for them too). done[i] = 1
 * once call i is settled; with once, a call still running keeps done[i] = 0. */
static gr_status progress(const loop_style *y, gr__call *k, size_t n, int *done, double t0,
                          double deadline, double share, gr_status first) {
  size_t left = 0;
  for (size_t i = 0; i < n; i++) left += !done[i];
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
    if (left > 0 && (y->once || (spin & 15) == 15)) {
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
    if (y->once) break;
  }
  return first;
}

static gr_status run_one(const char *fn, gr__call *k, int checked) {
  gr_comm *c = k->comm;
  gr__flight_poll();
  if (c->check && !checked && is_collective(k->kind)) GR_CHECK(exchange_fingerprint(fn, k, GR_OK));
  begin(k);
  double t0 = gr__mono_now(), deadline = c->timeout_s > 0 ? t0 + c->timeout_s : 0.0;
  k->blocking_ok = c->timeout_s <= 0;
  int done = 0;
  c->err[0] = '\0';
  const loop_style y = {fn, "", 1, 1, 0};
  gr_status st = c->ops->post(k, &done);
  if (st != GR_OK || done) return settle(&y, k, st, t0, 1.0, 1);
  return progress(&y, k, 1, &done, t0, deadline, 1.0, GR_OK);
}

/* Validate, then run now or queue for gr_group_end. */
static gr_status submit(const char *fn, gr__call *k) {
  GR_CHECK(gr__check_alive(fn, k->comm));
  gr_status bad = validate(fn, k);
  if (grp.depth > 0) {
    /* Check mode keeps a refused call in the queue, marked, so that gr_group_end fails on every
     * rank instead of the others waiting for the call this rank dropped. */
    if (bad != GR_OK && !k->comm->check) return bad;
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
    /* Check mode: tell the others, so that nobody waits for a call this rank will not make. */
    if (k->comm->check && is_collective(k->kind)) return exchange_fingerprint(fn, k, bad);
    return bad;
  }
  return run_one(fn, k, 0);
}

#define CALL_INIT(kind_, comm_) \
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

GR_API gr_status gr_allreduce_multi(const void *const *send, void *const *recv, const size_t *counts,
                                    size_t nbufs, gr_dtype dtype, gr_op op, gr_comm *comm,
                                    gr_stream stream) {
  static const char fn[] = "gr_allreduce_multi";
  GR_CHECK(gr__check_alive(fn, comm));
  gr_status bad = GR_OK;
  size_t total = 0;
  uint64_t hash = 1469598103934665603ull; /* the per-buffer counts and in-place forms */
  if (nbufs > 0 && (!send || !recv || !counts))
    bad = gr__fail(GR_ERR_INVALID, fn, "send, recv or counts is NULL with nbufs %zu", nbufs);
  for (size_t i = 0; i < nbufs && bad == GR_OK; i++) {
    gr__call k = CALL_INIT(GR__ALLREDUCE, comm);
    k.send = send[i], k.recv = recv[i], k.count = counts[i], k.dtype = dtype, k.op = op;
    bad = validate(fn, &k);
    if (bad == GR_OK && counts[i] > SIZE_MAX - total)
      bad = gr__fail(GR_ERR_INVALID, fn, "the counts overflow size_t at buffer %zu", i);
    total += counts[i];
    hash = fnv(fnv(hash, counts[i]), (uint64_t)inplace_form(&k));
  }
  if (bad == GR_OK && total > (size_t)PTRDIFF_MAX / gr__dtype_size(dtype)) /* the packed total too */
    bad = gr__fail(GR_ERR_INVALID, fn, "the counts add up to %zu elements of %s, which overflows "
                   "the address space", total, gr__dtype_name(dtype));
  gr__call k = CALL_INIT(GR__ALLREDUCE, comm);
  k.count = total, k.dtype = dtype, k.op = op, k.stream = stream;
  int packed = grp.depth == 0 && (comm->ops->caps & GR__CAP_PACK_MULTI) && !comm->gpu_buffers;
  if (comm->check && grp.depth == 0) {
    /* One fingerprint for the whole call (buffer counts and forms hashed), also when a rank
     * refused it or has no buffers: every rank returns the same. */
    fingerprint f = fingerprint_of(&k, bad);
    f.hash = bad == GR_OK ? fnv(hash, nbufs) : 0;
    f.inplace = -1;
    exchange x;
    gr_status st = exchange_post(fn, comm, &x, f);
    if (st != GR_OK) return bad != GR_OK ? bad : st;
    st = x.rc == MPI_SUCCESS ? gr__mpi_wait(comm, &x.req, gr__deadline(comm->timeout_s)) : GR_ERR_MPI;
    if (st == GR_ERR_TIMEOUT) {
      k.seq = comm->seq + 1;
      comm->err[0] = '\0';
      return timed_out(fn, &k, "the check-mode fingerprint exchange before");
    }
    if (st != GR_OK) {
      if (x.all != x.stack) free(x.all);
      return bad != GR_OK ? bad : gr__fail(GR_ERR_MPI, fn, "check mode: MPI_Iallgather failed");
    }
    GR_CHECK(exchange_verdict(fn, comm, &x, bad));
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
  size_t es = gr__dtype_size(dtype);
  char *pack = malloc(total * es + 1);
  if (!pack) return gr__fail(GR_ERR_NOMEM, fn, "out of memory packing %zu elements", total);
  size_t off = 0;
  for (size_t i = 0; i < nbufs; i++) {
    if (counts[i]) memcpy(pack + off, send[i], counts[i] * es);
    off += counts[i] * es;
  }
  k.send = k.recv = pack;
  gr_status st = run_one(fn, &k, 1);
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

struct gr_request {
  gr__call k; /* the backend keeps state in here: a request never moves once started */
  const char *fn;
  double t0, deadline;
};

static gr_status start_request(const char *fn, gr__call *k, gr_request **out) {
  if (!out) return gr__fail(GR_ERR_INVALID, fn, "req is NULL");
  *out = NULL;
  GR_CHECK(gr__check_alive(fn, k->comm));
  if (grp.depth > 0)
    return gr__fail(GR_ERR_STATE, fn, "non-blocking calls cannot be part of a group");
  gr_comm *c = k->comm;
  gr_status bad = validate(fn, k);
  if (bad != GR_OK) return c->check ? exchange_fingerprint(fn, k, bad) : bad;
  gr__flight_poll();
  if (c->check) GR_CHECK(exchange_fingerprint(fn, k, GR_OK));
  gr_request *q = malloc(sizeof *q);
  if (!q) return gr__fail(GR_ERR_NOMEM, fn, "out of memory");
  q->k = *k;
  q->fn = fn;
  k = &q->k;
  k->fe_request = 1;
  begin(k);
  q->t0 = gr__mono_now();
  q->deadline = c->timeout_s > 0 ? q->t0 + c->timeout_s : 0.0;
  k->blocking_ok = 0;
  c->err[0] = '\0';
  int done = 0;
  gr_status st = c->ops->post(k, &done);
  if (st != GR_OK) {
    const loop_style y = {fn, "", 1, 0, 1};
    st = settle(&y, k, st, q->t0, 1.0, 1);
    free(q);
    return st;
  }
  if (done) k->fe_flags |= GR__FE_DONE_IN_POST;
  __atomic_add_fetch(&c->pending, 1, __ATOMIC_ACQ_REL);
  *out = q;
  return GR_OK;
}

GR_API gr_status gr_test(gr_request **req, int *done) {
  static const char fn[] = "gr_test";
  if (!req || !*req || !done) return gr__fail(GR_ERR_INVALID, fn, "req, *req or done is NULL");
  gr_request *q = *req;
  gr__call *k = &q->k;
  gr_comm *c = k->comm;
  *done = 0;
  gr_status st = GR_OK;
  if (k->fe_flags & GR__FE_DONE_IN_POST) {
    end(k, GR__FL_DONE, q->t0);
  } else if (c->aborted) {
    c->ops->forget(k);
    end(k, GR__FL_FAILED, q->t0);
    st = gr__fail(GR_ERR_ABORTED, q->fn, "communicator %s was aborted before %s #%llu finished",
                  c->id, gr__kind_name(k->kind), (unsigned long long)k->seq);
  } else {
    const loop_style y = {q->fn, "", 1, 0, 1};
    int fin = 0;
    st = progress(&y, k, 1, &fin, q->t0, q->deadline, 1.0, GR_OK);
    if (!fin) return GR_OK; /* still running */
  }
  *done = 1;
  __atomic_sub_fetch(&c->pending, 1, __ATOMIC_ACQ_REL);
  free(q);
  *req = NULL;
  return st;
}

GR_API gr_status gr_wait(gr_request **req) {
  if (!req || !*req) return gr__fail(GR_ERR_INVALID, "gr_wait", "req or *req is NULL");
  int done = 0;
  gr_status st;
  do st = gr_test(req, &done);
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
    while (j < nc && comms[j] != q[i].comm) j++;
    if (j == nc) {
      if (nc == sizeof comms / sizeof comms[0])
        return gr__fail(GR_ERR_UNSUPPORTED, fn, "check mode handles groups over at most %zu "
                        "communicators", nc);
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
      if (q[i].fe_bad != GR_OK && mine[j] == GR_OK) mine[j] = q[i].fe_bad;
      if (!is_collective(q[i].kind)) continue;
      fingerprint g = fingerprint_of(&q[i], GR_OK);
      f.count++;
      uint64_t h = f.hash;
      h = fnv(fnv(fnv(h, (uint64_t)g.kind), g.count), (uint64_t)(uint32_t)g.dtype);
      f.hash = fnv(fnv(fnv(h, (uint64_t)(uint32_t)g.op), (uint64_t)(uint32_t)g.root),
                   (uint64_t)(uint32_t)g.inplace);
    }
    f.bad = mine[j] != GR_OK;
    if (mine[j] != GR_OK) f.hash = 0;
    if (c->timeout_s > 0 && (deadline == 0 || t0 + c->timeout_s < deadline)) deadline = t0 + c->timeout_s;
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
      if (first == GR_OK) first = st;
      continue; /* x[j].all stays allocated: MPI may still write it */
    }
    if (st != GR_OK) {
      if (x[j].all != x[j].stack) free(x[j].all);
      if (first == GR_OK) first = gr__fail(GR_ERR_MPI, fn, "check mode: MPI_Iallgather failed");
      continue;
    }
    st = exchange_verdict(fn, c, &x[j], mine[j]);
    if (first == GR_OK) first = st;
  }
  return first;
}

static gr_status run_group(const char *fn) {
  size_t n = grp.n;
  gr__call *q = grp.q;
  /* Check mode first, for every communicator, before anything is posted. */
  gr_status first = check_group(fn, q, n);
  if (first != GR_OK) return first;
  /* Calls this rank refused on communicators without collectives in the group: dropped. */
  size_t kept = 0;
  for (size_t i = 0; i < n; i++)
    if (q[i].fe_bad == GR_OK) q[kept++] = q[i];
  n = kept;
  if (n == 0) return GR_OK;
  double t0 = gr__mono_now(), deadline = 0, share = 1.0 / (double)n;
  for (size_t i = 0; i < n; i++) {
    double t = q[i].comm->timeout_s;
    if (t > 0 && (deadline == 0 || t0 + t < deadline)) deadline = t0 + t;
  }
  /* Post in order, each backend's run bracketed by its group hooks (NCCL's ncclGroupStart/End). */
  int *done = calloc(n, sizeof *done);
  if (!done) return gr__fail(GR_ERR_NOMEM, fn, "out of memory");
  const loop_style y = {fn, "grouped", 0, 0, 0};
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
  return first;
}

GR_API gr_status gr_group_end(void) {
  static const char fn[] = "gr_group_end";
  if (grp.depth == 0) return gr__fail(GR_ERR_STATE, fn, "no gr_group_start on this thread");
  if (--grp.depth > 0) return GR_OK;
  /* The queue is handed over: from here the calls are run (or failed) before this returns. */
  for (size_t i = 0; i < grp.n; i++) __atomic_sub_fetch(&grp.q[i].comm->pending, 1, __ATOMIC_ACQ_REL);
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
    if (gr__flight_dump("timeout", path, sizeof path) != 0) snprintf(path, sizeof path, "not written");
    gr__comm_abort_internal(comm);
    return gr__fail(st, fn, "work enqueued on communicator %s (rank %d of %d, %s backend) after call "
                    "#%llu did not finish within %g s; the communicator is now aborted (flight "
                    "recorder: %s)", comm->id, comm->rank, comm->size, comm->ops->name,
                    (unsigned long long)comm->seq, comm->timeout_s, path);
  }
  if (st != GR_OK) return gr__fail(st, fn, "%s backend: %s", comm->ops->name, comm->err);
  return GR_OK;
}
