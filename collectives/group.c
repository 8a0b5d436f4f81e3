/* Groups: the calls queued between gr_group_start and gr_group_end on this thread, their checks
 * (check mode's fingerprints or the verdicts, for all communicators at once) and their run. */
#include "gr_front.h"

#include "gr_agree.h"
#include "gr_array.h"
#include "gr_error.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The calls queued between gr_group_start and gr_group_end on this thread (NCCL's model: the
 * group is a property of the calling thread, not of a communicator). */
typedef struct {
  gr_array q; /* gr__call */
} group_state;
static _Thread_local group_state grp = {GR_ARRAY_INIT(gr__call)};

_Thread_local int gr__group_depth_now;

gr_status gr__group_queue(const char *fn, const gr__call *k) {
  if (gr__array_push(&grp.q, k) != GR_OK)
    return gr__fail(GR_ERR_NOMEM, fn, "out of memory queueing a grouped call");
  __atomic_add_fetch(&k->comm->pending, 1, __ATOMIC_ACQ_REL);
  return GR_OK;
}

/* ---- groups ------------------------------------------------------------------------------- */

GR_API gr_status gr_group_start(void) {
  gr__group_depth_now++;
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
      fingerprint g = gr__fingerprint_of(&q[i], GR_OK);
      f.count++;
      uint64_t h = f.hash;
      h = gr__fnv(gr__fnv(gr__fnv(h, (uint64_t)g.kind), g.count), (uint64_t)(uint32_t)g.dtype);
      f.hash = gr__fnv(gr__fnv(gr__fnv(h, (uint64_t)(uint32_t)g.op), (uint64_t)(uint32_t)g.root),
                       (uint64_t)(uint32_t)g.inplace);
    }
    if (mine[j] != GR_OK) f.hash = 0;
    if (c->timeout_s > 0 && (deadline == 0 || t0 + c->timeout_s < deadline))
      deadline = t0 + c->timeout_s;
    first = gr__exchange_post(fn, c, &x[j], f);
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
          st = gr__timed_out(fn, &q[i], "the check-mode fingerprint exchange before grouped");
          break;
        }
      drop_calls_on(q, n, c, st);
      if (first == GR_OK) first = st;
      gr__abandon(x[j].all); /* MPI may still write it */
      continue;
    }
    if (st != GR_OK) { /* c->err: MPI_Iallgather's (gr__exchange_post) or MPI_Test's failure */
      free(x[j].all);
      st = gr__fail(GR_ERR_MPI, fn, "check mode: the fingerprint exchange failed: %s", c->err);
      drop_calls_on(q, n, c, st);
      if (first == GR_OK) first = st;
      continue;
    }
    st = gr__exchange_verdict(fn, c, &x[j], mine[j]);
    if (st != GR_OK) drop_calls_on(q, n, c, st);
    if (first == GR_OK) first = st;
  }
  for (size_t j = posted; j < nc; j++)
    drop_calls_on(q, n, comms[j], first);
  return first;
}

/* Without check mode: one verdict per communicator that has collectives in the group
 * (ROUTE_AGREE), all posted before any is waited for (gr__agree_post, gr__agree_wait: within the
 * earliest of their communicators' timeouts), like check_group's, so that a call one rank refused
 * fails the group on every rank before anything is posted. The round is gr__agree_call's (refuse.c):
 * a rank that refused a call of gr_allreduce_multi alone joins the others' group with it. */
static gr_status agree_group(const char *fn, gr__call *q, size_t n) {
  gr_comm *comms[64];
  size_t nc = 0;
  for (size_t i = 0; i < n; i++) {
    if (!is_collective(q[i].kind) || gr__refusal_route(&q[i]) == ROUTE_NONE) continue;
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
  gr__agree_round r[64];
  int64_t word[64], all[64];
  for (size_t j = 0; j < nc; j++) {
    gr_comm *c = comms[j];
    int arg = GR__ARG_NONE;
    for (size_t i = 0; i < n && !arg; i++)
      if (q[i].comm == c && q[i].fe_bad != GR_OK)
        arg = q[i].fe_refused ? q[i].fe_refused : GR__ARG_BUFFERS;
    word[j] = gr__verdict_word(c, arg);
    all[j] = 0;
    gr__agree_post(&r[j], c, "the arguments", GR__AGREE_MAX, &word[j], &all[j], 1);
  }
  gr__agree_wait(r, nc); /* each round's outcome in r[j].st */
  gr_status first = GR_OK;
  for (size_t j = 0; j < nc; j++) {
    gr_comm *c = comms[j];
    gr_status st = r[j].st;
    if (st == GR_ERR_TIMEOUT) {
      for (size_t i = 0; i < n; i++)
        if (q[i].comm == c) {
          q[i].seq = c->seq + 1;
          c->err[0] = '\0';
          st = gr__timed_out(fn, &q[i], "the agreement on the arguments before grouped");
          break;
        }
    } else if (st == GR_ERR_MPI) {
      st = gr__fail(GR_ERR_MPI, fn, "the agreement on the arguments: MPI_Iallreduce failed");
    } else if (st != GR_OK) {
      st = gr__fail(st, fn, "%s", c->err);
    } else if (all[j]) {
      st = gr__verdict_fail(fn, c, (int)all[j], "a grouped call");
    }
    if (st != GR_OK) drop_calls_on(q, n, c, st);
    if (first == GR_OK) first = st;
  }
  return first;
}

static gr_status run_group(const char *fn) {
  size_t n = grp.q.count;
  gr__call *q = grp.q.data;
  /* Communicators with requests outstanding are this thread's from here on (the registry,
   * sequencer.c). */
  for (size_t i = 0; i < n; i++)
    if (__atomic_load_n(&q[i].comm->pending, __ATOMIC_RELAXED) > 0) gr__requests_claim(q[i].comm);
  /* The requests waiting to post on the group's communicators go first, on every rank. */
  gr_status drained = GR_OK;
  for (size_t i = 0; i < n; i++)
    if (gr__seq_in_line(&q[i]) && !gr__seq_empty(q[i].comm) && !q[i].comm->aborted) {
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
    gr__begin(k);
    k->blocking_ok = 0;
    k->comm->err[0] = '\0';
    first = ops->post(k, &done[i]);
    if (first != GR_OK) {
      first = gr__settle(&y, k, first, t0, share, 1);
      break;
    }
    posted = i + 1;
  }
  if (first == GR_OK && open && open->group_finish) {
    first = open->group_finish(q[n - 1].comm, deadline);
    if (first != GR_OK) first = gr__fail(first, fn, "%s", q[n - 1].comm->err);
  }
  /* Wait for everything posted, even after a failure: the peers are waiting for it too (the
   * sequencer's drive loop: the deadline, the flight recorder, the other communicators). */
  for (size_t i = 0; i < posted; i++)
    if (done[i]) gr__end_share(&q[i], GR__FL_DONE, t0, share);
  first = gr__seq_drive_calls(&y, q, posted, done, t0, deadline, share, first);
  free(done);
  return first != GR_OK ? first : verdict; /* first's sentence is the last recorded */
}

GR_API gr_status gr_group_end(void) {
  static const char fn[] = "gr_group_end";
  if (gr__group_depth_now == 0)
    return gr__fail(GR_ERR_STATE, fn, "no gr_group_start on this thread");
  if (--gr__group_depth_now > 0) return GR_OK;
  for (size_t i = 0; i < grp.q.count; i++) {
    const gr_comm *c = GR_ARRAY_AT(&grp.q, gr__call, i).comm;
    if (!gr__fork_mine(c->fork_gen)) { /* queued by the parent before fork(): run nothing */
      gr__array_free(&grp.q);
      return gr__check_comm(fn, c);
    }
  }
  /* The queue is handed over: from here the calls are run (or failed) before this returns. */
  for (size_t i = 0; i < grp.q.count; i++)
    __atomic_sub_fetch(&GR_ARRAY_AT(&grp.q, gr__call, i).comm->pending, 1, __ATOMIC_ACQ_REL);
  gr_status st = grp.q.count ? run_group(fn) : GR_OK;
  gr__array_free(&grp.q);
  return st;
}
