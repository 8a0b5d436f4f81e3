/* The MPI backend's multi-leader hierarchical allreduce (GPURUN_COLL_ALGO=hier-ml): every local
 * rank runs the inter-node step on its own slice of the data, so the node's network traffic goes
 * out through all of its ranks (and their NICs) instead of its leader's alone, and the node
 * broadcast of the hierarchical path (gr_hier.h) is gone:
 *   node reduce-scatter   each of the node's L ranks gets the node's sum of its slice (1/L)
 *   inter-node allreduce  one per local rank, among the ranks of that local rank on every node
 *   node allgather        every rank gets every slice
 * A count that L does not divide goes through a copy padded to L equal slices (the padding is
 * reduced and dropped).
 *
 * The row exists where GPURUN_COLL_ALGO is hier-ml on every rank (the lowest setting wins, coll.c),
 * the communicator spans two nodes or more and every node has the same number of ranks, two or
 * more (where the hierarchical row exists too, unless a node could not make its segment for it);
 * it takes every allreduce of one element or more there, ahead of the hierarchical row, which
 * runs the other kinds. It needs nothing of that row's state. Its create makes,
 * once, a communicator of the node (on the backend's table: the shared-memory path runs the node
 * steps, its sentences naming the parent's ranks) and one of this rank's slice (one rank per node,
 * the same local rank: the backend's own allreduces with the timeout), agreed over the parent: on
 * every rank, or on none. Both communicators' parent ranks come from their groups (no message);
 * the slice members' hosts, for the timeout's sentence, from one gather over the slice waited
 * within the timeout. Only MPI's splits themselves wait without a bound, as in hier.c.
 *
 * Calls in flight together (requests, groups) run one after the other, in the order they were
 * posted (the same on every rank): a call posts its first step once every older one finished, so
 * the steps reach the node's and the slice's communicators in one order everywhere. Any test of
 * one of them moves the oldest. A step that fails leaves the row unusable (later calls return
 * GR_ERR_ABORTED: the ranks may be at different steps); a timeout names the step, its
 * communicator's ranks (parent ranks) and, on the victim's node, the node-mates that vanished. */
#include "gr_mpi_be.h"

#include "gr_agree.h"
#include "gr_algo_count.h"
#include "gr_dtype.h"
#include "gr_list.h"
#include "gr_live.h"
#include "gr_log.h"
#include "gr_strbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ML_HOST 64

extern const gr__path gr__path_hier_ml; /* the row, at the end; path.c lists it */

typedef struct {
  int lrank, lsize, nnodes, node_idx; /* node_idx: this rank's node (its place in the slice) */
  gr_comm *node;                      /* this node's ranks, local rank order */
  gr_comm *slice;                     /* local rank lrank of every node, node order */
  int *node_ranks;       /* [lsize] parent ranks of this node (the node's sentences name them) */
  int *slice_ranks;      /* [nnodes] parent ranks of this slice */
  char (*host)[ML_HOST]; /* [nnodes] the slice members' hosts */
  int broken;
  char why[GR__ERRLEN];
  gr_list calls; /* ml_call posted and not finished, oldest first */
} ml_state;

enum { ML_QUEUED, ML_RS, ML_AR, ML_AG, ML_DONE };
static const char *const ml_stage[] = {"waiting for an older multi-leader allreduce",
                                       "node reduce-scatter", "inter-node allreduce",
                                       "node allgather", "done"};

typedef struct {
  ml_state *m;
  gr_dtype dtype;
  gr_op op;            /* AVG is reduced as SUM (the backend divides) */
  size_t es, count, b; /* b: elements per slice */
  const char *src;
  char *dst;
  char *tmp; /* the padded copy (L * b elements), or NULL: the slices are the buffers */
  int stage;
  gr__call sub; /* the step in flight (stages ML_RS .. ML_AG) */
  gr_status st;
  char why[GR__ERRLEN];
  gr_list_node node;
} ml_call;

static void host_name(char *out) {
  char raw[MPI_MAX_PROCESSOR_NAME + 1] = "";
  int len = 0;
  if (MPI_Get_processor_name(raw, &len) != MPI_SUCCESS || len < 0) len = 0;
  raw[len < MPI_MAX_PROCESSOR_NAME ? len : MPI_MAX_PROCESSOR_NAME] = '\0';
  size_t i = 0; /* it ends up in sentences: letters, digits, '.', '-', '_' only */
  for (; raw[i] && i < ML_HOST - 1; i++) {
    char ch = raw[i];
    int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
             ch == '.' || ch == '-' || ch == '_';
    out[i] = ok ? ch : '?';
  }
  out[i] = '\0';
  if (!i) snprintf(out, ML_HOST, "?");
}

static void sub_free(gr_comm *s) {
  if (!s) return;
  gr__paths_destroy(s);
  if (s->be) s->ops->destroy(s, gr__deadline(s->timeout_s));
  gr__comm_free(s);
}

/* A communicator on the parent's backend table over mpi (owned from here on), or NULL. Errors
 * return on it (gr__comm_new); the row GPURUN_COLL_ALGO names is c's, agreed already
 * (gr__path_row_take: no round of its own). */
static gr_comm *sub_new(gr_comm *c, MPI_Comm mpi, const char *what) {
  gr__comm_cfg cfg = {c->timeout_s, 0, c->algo, 0, c->ops};
  gr_comm *s = gr__comm_new(mpi, &cfg);
  if (!s) {
    /* out of memory, or MPI refused mpi's basics (said at warn level); a split MPI just gave
     * fails its free only as an invalid handle */
    (void)MPI_Comm_free(&mpi);
    return NULL;
  }
  snprintf(s->id, sizeof s->id, "%.20s.%s", c->id, what);
  gr__path_row_take(s, c);
  if (s->ops->create(s, gr__deadline(c->timeout_s)) != GR_OK || gr__paths_create(s) != GR_OK) {
    GR_DEBUG("collectives: communicator %s: the multi-leader %s communicator failed: %s", c->id,
             what, s->err);
    sub_free(s);
    return NULL;
  }
  return s;
}

/* The parent ranks of sub's n ranks into out[n], from the two groups: local, no message. 1 when
 * every one is a rank of c. */
static int parent_ranks(const gr_comm *c, MPI_Comm sub, int n, int *out) {
  MPI_Group sg = MPI_GROUP_NULL, cg = MPI_GROUP_NULL;
  int ok = MPI_Comm_group(sub, &sg) == MPI_SUCCESS && MPI_Comm_group(c->mpi, &cg) == MPI_SUCCESS;
  for (int i = 0; ok && i < n; i++) /* one at a time: n is a node's or a slice's size */
    ok = MPI_Group_translate_ranks(sg, 1, &i, cg, &out[i]) == MPI_SUCCESS && out[i] >= 0 &&
         out[i] < c->size;
  if (sg != MPI_GROUP_NULL) MPI_Group_free(&sg);
  if (cg != MPI_GROUP_NULL) MPI_Group_free(&cg);
  return ok;
}

/* The slice members' hosts into m->host, in slice order: one bounded gather over the slice's
 * communicator (gr__agree_gather: MPI writes a heap copy, which a gather given up on takes to the
 * lost list with its request; the slice's communicator is then kept until it completes). 1 on
 * success. */
static int slice_hosts(ml_state *m) {
  gr_comm *s = m->slice;
  /* m->host has nnodes entries; nnodes and the slice's size are the same on its ranks */
  if (s->size != m->nnodes) return 0;
  char mine[ML_HOST];
  host_name(mine);
  if (gr__agree_gather(s, "the slice's host names", mine, ML_HOST, m->host) != GR_OK) {
    GR_DEBUG("collectives: communicator %s: %s", s->id, s->err);
    return 0;
  }
  for (int i = 0; i < m->nnodes; i++)
    m->host[i][ML_HOST - 1] = '\0';
  return 1;
}

static void ml_destroy(gr_comm *c, void *state) {
  (void)c;
  ml_state *m = state;
  if (!m) return;
  gr_list_node *n;
  while ((n = gr__list_pop_front(&m->calls))) { /* calls never collected: memory only */
    ml_call *mc = GR_LIST_ENTRY(n, ml_call, node);
    free(mc->tmp), free(mc);
  }
  sub_free(m->slice);
  sub_free(m->node);
  free(m->node_ranks), free(m->slice_ranks), free(m->host);
  free(m);
}

static gr_status ml_create(gr_comm *c, const gr__path *p, void **state) {
  (void)p;
  *state = NULL;
  /* agreed already: GPURUN_COLL_ALGO (c->algo); two nodes of two ranks need four */
  if (c->algo < GR__COLL_ALGO_HIER_ML || c->size < 4) return GR_OK;
  gr__live_create_step(GR_LIVE_STEP_HIER);
  MPI_Comm nm = MPI_COMM_NULL, sm = MPI_COMM_NULL;
  int lrank = 0, lsize = 0;
  int ok = MPI_Comm_split_type(c->mpi, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &nm) ==
               MPI_SUCCESS &&
           nm != MPI_COMM_NULL;
  if (ok && gr__comm_basics(c, nm, "the node's communicator", &lrank, &lsize) != GR_OK) {
    GR_DEBUG("collectives: communicator %s: no multi-leader allreduce: %s", c->id, c->err);
    ok = 0; /* this rank brings 0 to the layout's agreement below: none takes the row */
  }
  /* this rank's tables, sized as its own node says (the agreement below rejects any other) */
  ml_state *m = calloc(1, sizeof *m);
  if (m && ok && lsize > 0) {
    m->lrank = lrank, m->lsize = lsize, m->nnodes = c->size / lsize;
    m->node_ranks = malloc(sizeof(int) * (size_t)lsize);
    m->slice_ranks = malloc(sizeof(int) * (size_t)(m->nnodes > 0 ? m->nnodes : 1));
    m->host = malloc((size_t)(m->nnodes > 0 ? m->nnodes : 1) * ML_HOST);
  }
  ok = ok && m && m->node_ranks && m->slice_ranks && m->host;
  /* every node the same size: the lowest and the highest size agree (one gr__agree round, whose
   * x: the lowest ok and size, then the highest) */
  int64_t mine[2] = {ok, ok ? lsize : 0}, x[4] = {0, 0, 0, 0};
  if (gr__agree(c, "the multi-leader layout", GR__AGREE_MINMAX, mine, x, 2) != GR_OK || !x[0] ||
      x[1] != x[3] || x[1] < 2 || c->size % x[1] != 0 || c->size / x[1] < 2) {
    if (x[0] && x[1] != x[3])
      GR_DEBUG("collectives: communicator %s: no multi-leader allreduce (nodes of %d to %d ranks)",
               c->id, (int)x[1], (int)x[3]);
    /* the split MPI gave fails its free only as an invalid handle; the row stands aside anyway */
    if (nm != MPI_COMM_NULL) (void)MPI_Comm_free(&nm);
    ml_destroy(c, m);
    return GR_OK;
  }
  /* from here every rank has its tables and the same layout: the collectives below run on all */
  int ranks_ok = parent_ranks(c, nm, lsize, m->node_ranks);
  if (MPI_Comm_split(c->mpi, lrank, c->rank, &sm) != MPI_SUCCESS) sm = MPI_COMM_NULL;
  if (sm != MPI_COMM_NULL) {
    int sr = 0, ss = 0; /* ss: the same on every rank of the slice */
    if (gr__comm_basics(c, sm, "the slice's communicator", &sr, &ss) != GR_OK) {
      GR_DEBUG("collectives: communicator %s: %s", c->id, c->err);
      ss = 0; /* not the layout's: the agreement below sets the row aside on every rank */
    }
    ranks_ok = ranks_ok && ss == m->nnodes && parent_ranks(c, sm, ss, m->slice_ranks);
  }
  /* the node's and the slice's communicators, each collective over its own ranks */
  m->node = sub_new(c, nm, "node"); /* owns nm */
  gr__shm *shm = m->node && m->node->be ? ((gr__mpi_be *)m->node->be)->shm : NULL;
  if (shm && ranks_ok) gr__shm_name_ranks(shm, m->node_ranks);
  m->slice = sm != MPI_COMM_NULL ? sub_new(c, sm, "slice") : NULL;
  int hosts_ok = m->slice && slice_hosts(m); /* on every rank with a slice: none waits alone */
  if (!gr__path_agree(c, ranks_ok && hosts_ok && shm)) {
    GR_DEBUG("collectives: communicator %s: no multi-leader allreduce (%s)", c->id,
             !ranks_ok   ? "the node's or the slice's ranks could not be translated"
             : !m->slice ? "the slice's communicator could not be made"
             : !hosts_ok ? "the slice's host names were not exchanged"
             : !shm      ? "the node's communicator could not be made"
                         : "another rank could not make its part");
    ml_destroy(c, m);
    return GR_OK;
  }
  for (int i = 0; i < m->nnodes; i++)
    if (m->slice_ranks[i] == c->rank) m->node_idx = i;
  GR_DEBUG("collectives: communicator %s: multi-leader allreduce (%d nodes x %d ranks, this rank "
           "in slice %d)",
           c->id, m->nnodes, lsize, lrank);
  *state = m;
  return GR_OK;
}

static ml_state *ml_of(const gr_comm *c) { return gr__path_state(c, &gr__path_hier_ml); }

/* Post mc's step of its stage (ML_RS, ML_AR, ML_AG) on its communicator. */
static gr_status step_post(ml_call *mc, int *done) {
  ml_state *m = mc->m;
  if (gr__hier_step_hook) gr__hier_step_hook(mc->stage == ML_AR, 0);
  char *base = mc->tmp ? mc->tmp : mc->dst;
  char *mine = base + (size_t)m->lrank * mc->b * mc->es;
  gr__call *s = &mc->sub;
  memset(s, 0, sizeof *s);
  s->dtype = mc->dtype;
  s->op = mc->op;
  s->root = -1;
  s->count = mc->b;
  s->flight_slot = -1; /* and be_area zero, as a backend's post expects */
  switch (mc->stage) {
  case ML_RS:
    s->kind = GR__REDUCE_SCATTER;
    s->send = mc->tmp ? mc->tmp : mc->src;
    s->recv = mine;
    s->comm = m->node;
    break;
  case ML_AR:
    s->kind = GR__ALLREDUCE;
    s->send = s->recv = mine;
    s->comm = m->slice;
    break;
  default:
    s->kind = GR__ALLGATHER;
    s->send = mine;
    s->recv = base;
    s->comm = m->node;
  }
  s->seq = s->comm->seq++;
  s->comm->err[0] = '\0';
  *done = 0;
  return s->comm->ops->post(s, done);
}

static gr_status ml_fail(ml_call *mc, gr_status st, const char *detail) {
  ml_state *m = mc->m;
  mc->st = st;
  snprintf(mc->why, sizeof mc->why, "hierarchical allreduce (multi-leader), %s failed: %.400s",
           ml_stage[mc->stage], detail);
  m->broken = 1;
  snprintf(m->why, sizeof m->why, "%s", mc->why);
  if (gr__list_linked(&m->calls, &mc->node)) gr__list_remove(&m->calls, &mc->node);
  return st;
}

/* The result is in base: copy it out of the padded copy. */
static void finish(ml_call *mc) {
  if (mc->tmp) memcpy(mc->dst, mc->tmp, mc->count * mc->es);
  free(mc->tmp);
  mc->tmp = NULL;
  mc->stage = ML_DONE;
  gr__list_remove(&mc->m->calls, &mc->node);
}

/* Move mc (the oldest call) as far as it goes without waiting; *moved when it did. */
static gr_status advance(ml_call *mc, int *moved) {
  if (mc->stage == ML_DONE || mc->st != GR_OK) return mc->st;
  int done = mc->stage == ML_QUEUED; /* queued: nothing in flight, on to the first step */
  if (mc->stage != ML_QUEUED) {      /* a backend's test sets done only once it is */
    gr_status st = mc->sub.comm->ops->test(&mc->sub, &done);
    if (st != GR_OK) return ml_fail(mc, st, mc->sub.comm->err);
  }
  while (done) { /* the step finished (or was done at its post): post the next */
    *moved = 1;
    if (mc->stage == ML_AG) {
      finish(mc);
      return GR_OK;
    }
    mc->stage++;
    gr_status st = step_post(mc, &done);
    if (st != GR_OK) return ml_fail(mc, st, mc->sub.comm->err);
  }
  return GR_OK;
}

static ml_call **handle(gr__call *k) { return (ml_call **)&gr__mpi_call_of(k)->row_op; }

static gr_status ml_post(const gr__path *p, gr__call *k, const void *s, void *r, int *done) {
  (void)p;
  gr_comm *c = k->comm;
  ml_state *m = ml_of(c);
  if (m->broken)
    return gr__comm_err(c, GR_ERR_ABORTED,
                        "multi-leader allreduce unusable after an earlier failure (%s); destroy "
                        "the communicator",
                        m->why);
  ml_call *mc = calloc(1, sizeof *mc);
  if (!mc) return gr__comm_err(c, GR_ERR_NOMEM, "out of memory");
  mc->m = m;
  mc->dtype = k->dtype;
  mc->op = k->op == GR_AVG ? GR_SUM : k->op;
  mc->es = gr__dtype_size(k->dtype);
  mc->count = k->count;
  size_t L = (size_t)m->lsize;
  mc->b = (k->count + L - 1) / L;
  mc->src = s;
  mc->dst = r;
  if (k->count % L) { /* padded to L slices of b: the padding is reduced and dropped */
    size_t all = L * mc->b * mc->es, have = k->count * mc->es;
    mc->tmp = malloc(all);
    if (!mc->tmp) {
      free(mc);
      return gr__comm_err(c, GR_ERR_NOMEM, "out of memory (%zu bytes of scratch)", all);
    }
    memcpy(mc->tmp, s, have);
    memset(mc->tmp + have, 0, all - have);
  }
  gr__list_push_back(&m->calls, &mc->node);
  if (m->calls.head == &mc->node) { /* no older call: its first step starts now */
    int moved = 0;
    gr_status st = advance(mc, &moved);
    if (st != GR_OK) {
      gr__comm_err(c, st, "%s", mc->why);
      free(mc->tmp), free(mc);
      return st;
    }
  }
  if (mc->stage == ML_DONE) { /* one rank per slice and node: nothing to wait for */
    free(mc);
    *done = 1;
    return GR_OK;
  }
  *handle(k) = mc;
  return GR_OK;
}

static gr_status ml_test(gr__call *k, int *done) {
  ml_call *mc = *handle(k);
  ml_state *m = mc->m;
  *done = 0;
  /* the oldest call first, until this one finished or nothing moves */
  for (int moved = 1; moved && mc->st == GR_OK && mc->stage != ML_DONE && !m->broken;) {
    moved = 0;
    if (gr__list_empty(&m->calls)) break;
    advance(GR_LIST_ENTRY(m->calls.head, ml_call, node), &moved);
  }
  if (mc->st == GR_OK && mc->stage != ML_DONE && m->broken) { /* an older call failed */
    char why[GR__ERRLEN];
    snprintf(why, sizeof why, "%s", m->why);
    ml_fail(mc, GR_ERR_ABORTED, why);
    snprintf(mc->why, sizeof mc->why,
             "hierarchical allreduce (multi-leader) abandoned after another call failed: %.400s",
             why);
  }
  if (mc->st == GR_OK && mc->stage != ML_DONE) return GR_OK;
  gr_status st = mc->st;
  if (st != GR_OK) {
    gr__comm_err(k->comm, st, "%s", mc->why);
    gr__mpi_call_release(k); /* the call's state is released */
  }
  free(mc->tmp), free(mc);
  *handle(k) = NULL;
  *done = st == GR_OK;
  return st;
}

static const char *ranks_text(const ml_state *m, char *b, size_t len) {
  gr__strbuf sb;
  gr__strbuf_init_fixed(&sb, b, len);
  for (int i = 0; i < m->nnodes && !sb.truncated; i++)
    gr__strbuf_appendf(&sb, "%srank %d on %s", i ? ", " : "", m->slice_ranks[i], m->host[i]);
  return b;
}

static int ml_gone(const gr_comm *c, char *buf, size_t len) {
  const ml_state *m = ml_of(c);
  const gr__shm *shm = m && m->node->be ? ((const gr__mpi_be *)m->node->be)->shm : NULL;
  if (len) buf[0] = '\0';
  return shm ? gr__shm_gone(shm, buf, len) : 0;
}

/* Timeout: the step in flight is forgotten on its communicator, whose sentence says whom this rank
 * waited for; the row is unusable afterwards. */
static int ml_forget(gr__call *k) {
  ml_call *mc = *handle(k);
  ml_state *m = mc->m;
  char b[GR__ERRLEN], t[256];
  gr__strbuf sb;
  gr__strbuf_init_fixed(&sb, b, sizeof b);
  gr__strbuf_appendf(&sb, "hierarchical allreduce (multi-leader, %d nodes x %d ranks): %s",
                     m->nnodes, m->lsize, ml_stage[mc->stage]);
  int quiet = 1; /* nothing writes mc's buffers any more */
  if (mc->stage >= ML_RS && mc->stage <= ML_AG && mc->st == GR_OK) {
    gr_comm *s = mc->sub.comm;
    s->err[0] = '\0';
    quiet = s->ops->forget(&mc->sub);
    if (mc->stage == ML_AR)
      gr__strbuf_appendf(
          &sb, " of slice %d among %s not complete%s%s", m->lrank, ranks_text(m, t, sizeof t),
          s->err[0] ? ": " : ": a rank of the slice, or of its node, did not take part", s->err);
    else
      gr__strbuf_appendf(&sb, " on %s not complete%s%s", m->host[m->node_idx],
                         s->err[0] ? ": " : "", s->err);
  }
  char gone[200];
  if (!strstr(b, "no longer exists") && ml_gone(k->comm, gone, sizeof gone) > 0)
    gr__strbuf_appendf(&sb, "; on this node %s", gone);
  snprintf(k->comm->err, sizeof k->comm->err, "%s", b);
  m->broken = 1;
  snprintf(m->why, sizeof m->why, "a call timed out");
  if (gr__list_linked(&m->calls, &mc->node)) gr__list_remove(&m->calls, &mc->node);
  if (quiet)
    free(mc->tmp);
  else
    gr__abandon(mc->tmp); /* the step in flight may still write it: kept, never freed */
  free(mc);
  *handle(k) = NULL;
  return quiet;
}

const gr__path gr__path_hier_ml = {.name = GR__ALGO_NAME(HIER_ML),
                                   .algo = GR__ALGO_HIER_ML,
                                   .refusal = GR__REFUSAL_AGREED,
                                   .kinds = GR__KIND_BIT(GR__ALLREDUCE),
                                   .staged = 1,
                                   .create = ml_create,
                                   .destroy = ml_destroy,
                                   .serves = {.min_bytes = 1}, /* every allreduce with data */
                                   .post = ml_post,
                                   .test = ml_test,
                                   .forget = ml_forget,
                                   .gone = ml_gone};
