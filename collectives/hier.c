/* Hierarchical collectives across nodes (see gr_hier.h for the contract).
 *
 * A call is cut into segments of HIER_SEG_BYTES. On each rank each segment passes through up to
 * three stages: A, a node-local step on the node's shared-memory segment; L, the inter-node step on
 * the leaders' communicator (leaders only); C, a node-local broadcast (barrier) from the leader.
 * Which stages a rank has depends on the call's kind, its node's size and, for a broadcast, whether
 * the root is on its node and is its leader: the same on every rank of a node.
 *
 * Ordering. The shared-memory protocol runs a node's calls in the order they were posted, which
 * must be the same on every rank of the node; MPI (and NCCL) need the leaders' calls in the same
 * order on every leader. So a call's node steps are posted in a fixed sequence,
 *   A0, A1, C0, A2, C1, ..., A(S-1), C(S-2), C(S-1)   (a window of HIER_WINDOW segments),
 * the leader posting C(j) only once L(j) finished, and L(j) once A(j) finished; a non-leader posts
 * each as soon as the one before it is posted (its C(j) waits inside the protocol for the leader).
 * Calls in flight together (groups, requests) post in the order they were started: a call posts
 * node steps (leader steps) only once every older call has posted all of its own. Every test
 * progresses all calls in flight on the communicator, oldest first, so waiting for a newer call
 * first cannot stall an older one. */
#include "gr_hier.h"

#include "gr_agree.h"
#include "gr_dtype.h"
#include "gr_error.h"
#include "gr_list.h"
#include "gr_log.h"
#include "gr_path.h"
#include "gr_shm.h"
#include "gr_strbuf.h"

#include <limits.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Segment size. The node step of segment j+1 overlaps the leaders' exchange of segment j; below
 * one segment a call goes whole. Where the cores rather than the link are the bottleneck, every
 * extra step waits for a peer to be scheduled, so segments are large; on a real network the
 * overlap pays for calls above 16 MiB (bench/README.md gives the sizes compared). */
#define HIER_SEG_BYTES (16u << 20)

size_t gr__hier_seg_bytes;
_Atomic unsigned long gr__hier_calls[GR__NKINDS];
void (*gr__hier_step_hook)(int leader, int segment);
#define HIER_WINDOW 2
#define HOST_LEN 64

typedef struct gr__hier_call hier_call;

struct gr__hier {
  int mode;               /* the communicator's GR__COLL_ALGO_AUTO, _HIER or _HIER_ML */
  int rank, size;         /* in the parent communicator */
  int lrank, lsize;       /* in this rank's node */
  int nnodes, node;       /* nodes, this rank's node (= its leader's rank among the leaders) */
  int maxl;               /* ranks on the largest node: the block of a node in allgather and
                           * reduce-scatter (smaller nodes' blocks are padded to it) */
  int ident;              /* every node has maxl ranks, numbered node by node: node blocks are
                           * already in parent-rank order */
  int *node_of;           /* [size] node of every rank */
  int *local_of;          /* [size] rank within its node of every rank */
  int *leader_of;         /* [nnodes] the parent rank of each node's leader */
  int *node_ranks;        /* [lsize] parent ranks of this node, by local rank (shm sentences) */
  char (*host)[HOST_LEN]; /* [nnodes] each node's host name (sanitised), for sentences */
  gr__shm *shm;           /* this node's segment (NULL when alone on the node) */
  gr_comm *lead;          /* the leaders' communicator (leaders only) */
  char id[48];
  int broken; /* an earlier call failed: the sequences may be out of step */
  char why[GR__ERRLEN];
  gr_list calls; /* hier_call in flight (their node), oldest first */
};

/* One call. Node steps are coded j * 2 + (C ? 1 : 0) in seq. */
struct gr__hier_call {
  gr__hier *h;
  gr__kind kind;
  gr_dtype dtype;
  gr_op op; /* AVG is reduced as SUM */
  size_t es, count, seg;
  const char *src; /* the input of the first stage (allreduce, reduce, allgather) */
  char *buf;       /* the result, in place (allreduce, broadcast, reduce) */
  char *out;       /* the caller's receive buffer (allgather, reduce-scatter: copied out) */
  char *tmp;       /* owned scratch: reduce off the root; allgather, reduce-scatter: see below */
  char *blk;       /* allgather, reduce-scatter: the node blocks (blocks()), in tmp or out */
  char *rs_out;    /* reduce-scatter: the leaders' result blocks, in tmp */
  int rs_direct;   /* reduce-scatter: the node step reads the input as it is (no permuted copy) */
  int nseg;
  int has_a, has_l, has_c, a_kind, a_root, lroot;
  int *seq, nseq, tpost, tdone;
  gr__shm_op **nops;            /* [nseq] */
  unsigned char *adone, *ldone; /* [nseg] */
  gr__call *lc;                 /* [nseg] the leader steps */
  int lposted, ldone_lo;
  gr_status st; /* a failure seen while progressing (another call's test may find it) */
  char why[GR__ERRLEN];
  int finished;
  int busy; /* a forgotten leaders' step may still write (its backend's forget said so): tmp is
             * kept for the rest of the process, never freed */
  gr_list_node node; /* in h->calls */
};

static void host_name(char *out) {
  char raw[MPI_MAX_PROCESSOR_NAME + 1] = "";
  int len = 0;
  if (MPI_Get_processor_name(raw, &len) != MPI_SUCCESS || len < 0) len = 0;
  raw[len < MPI_MAX_PROCESSOR_NAME ? len : MPI_MAX_PROCESSOR_NAME] = '\0';
  /* it ends up in sentences on terminals and in logs: letters, digits, '.', '-', '_' only */
  size_t i = 0;
  for (; raw[i] && i < HOST_LEN - 1; i++) {
    char ch = raw[i];
    int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
             ch == '.' || ch == '-' || ch == '_';
    out[i] = ok ? ch : '?';
  }
  out[i] = '\0';
  if (!i) snprintf(out, HOST_LEN, "?");
}

/* MIN over c->mpi of n (at most 2) ints in place, one agreement round (gr__agree); 0 where the
 * round failed (its sentence is in c->err). */
static int agree_min(gr_comm *c, const char *what, int *x, int n) {
  int64_t in[2], out[2];
  if (n < 1 || n > 2) return 0;
  for (int i = 0; i < n; i++)
    in[i] = x[i];
  if (gr__agree(c, what, GR__AGREE_MIN, in, out, n) != GR_OK) return 0;
  for (int i = 0; i < n; i++)
    x[i] = (int)out[i];
  return 1;
}

static void lead_free(gr_comm *l) {
  if (!l) return;
  gr__paths_destroy(l);
  if (l->be) l->ops->destroy(l, gr__deadline(l->timeout_s));
  gr__comm_free(l);
}

void gr__hier_free(gr__hier *h) {
  if (!h) return;
  gr_list_node *n;
  while ((n = gr__list_pop_front(&h->calls))) { /* calls never collected: memory only */
    hier_call *hc = GR_LIST_ENTRY(n, hier_call, node);
    free(hc->seq), free(hc->nops), free(hc->adone), free(hc->ldone), free(hc->lc), free(hc->tmp);
    free(hc);
  }
  lead_free(h->lead);
  gr__shm_free(h->shm);
  free(h->node_of), free(h->local_of), free(h->leader_of), free(h->node_ranks), free(h->host);
  free(h);
}

/* The leaders' communicator on the parent's backend table: the inter-node step runs what that
 * backend runs (its create sees ranks on distinct nodes: no segment, no hierarchy of its own), and
 * the row GPURUN_COLL_ALGO names is c's, agreed already (gr__path_row_take: no round of its
 * own). */
static gr_status lead_new(gr_comm *c, MPI_Comm lm, gr_comm **out) {
  gr__comm_cfg cfg = {c->timeout_s, 0, c->algo, 0, c->ops};
  gr_comm *l = gr__comm_new(lm, &cfg);
  if (!l) {
    /* out of memory, or MPI refused lm's basics (said at warn level); the split MPI just gave
     * fails its free only as an invalid handle */
    (void)MPI_Comm_free(&lm);
    return GR_ERR_NOMEM;
  }
  snprintf(l->id, sizeof l->id, "%.20s.leaders", c->id);
  gr__path_row_take(l, c);
  gr_status st = l->ops->create(l, gr__deadline(c->timeout_s));
  if (st == GR_OK) st = gr__paths_create(l);
  if (st != GR_OK) {
    lead_free(l);
    return st;
  }
  *out = l;
  return GR_OK;
}

/* The node's leader: its rank 0, which is the node's lowest rank of c (the split's key is c's
 * rank), translated into c's numbering from the two groups. Local: no message, so nothing here
 * waits for a peer beyond the split itself. 1 on success. */
static int node_leader(const gr_comm *c, MPI_Comm node, int *leader) {
  MPI_Group ng = MPI_GROUP_NULL, cg = MPI_GROUP_NULL;
  int zero = 0, ok = MPI_Comm_group(node, &ng) == MPI_SUCCESS &&
                     MPI_Comm_group(c->mpi, &cg) == MPI_SUCCESS &&
                     MPI_Group_translate_ranks(ng, 1, &zero, cg, leader) == MPI_SUCCESS &&
                     *leader >= 0 && *leader < c->size;
  if (ng != MPI_GROUP_NULL) MPI_Group_free(&ng);
  if (cg != MPI_GROUP_NULL) MPI_Group_free(&cg);
  return ok;
}

gr_status gr__hier_attach(gr_comm *c, gr__hier **out) {
  *out = NULL;
  if (c->size < 3 || !c->ops) return GR_OK; /* two nodes and a pair on one need three ranks */
  int P = c->size;
  MPI_Comm node = MPI_COMM_NULL;
  int lrank = 0, lsize = 1, leader = c->rank;
  int split_ok = MPI_Comm_split_type(c->mpi, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &node) ==
                     MPI_SUCCESS &&
                 node != MPI_COMM_NULL;
  if (split_ok && gr__comm_basics(c, node, "the node's communicator", &lrank, &lsize) != GR_OK) {
    GR_DEBUG("collectives: communicator %s: no hierarchy: %s", c->id, c->err);
    split_ok = 0; /* this rank brings 0 to the set-up's agreement below: all stay flat */
  }
  if (split_ok) split_ok = node_leader(c, node, &leader);
  gr__hier *h = calloc(1, sizeof *h);
  /* every rank's place: its rank on its node, its node's leader, its host, gathered in one bounded
   * round (gr__agree_gather: MPI writes a heap copy, never rec after a round given up on) */
  struct {
    int lrank, leader;
    char host[HOST_LEN];
  } mine, *rec = malloc(sizeof *rec * (size_t)P);
  /* GPURUN_COLL_ALGO is agreed at creation (c->algo); mpi and flat keep the flat algorithms */
  int x[1] = {split_ok && h && rec};
  if (!agree_min(c, "the hierarchy's set-up", x, 1)) goto none;
  if (!x[0] || c->algo < GR__COLL_ALGO_AUTO) goto none;
  memset(&mine, 0, sizeof mine);
  mine.lrank = lrank, mine.leader = leader;
  host_name(mine.host);
  /* a failure here (MPI's, the timeout) leaves this rank flat; the others, had theirs passed,
   * give up on the next agreement, which it does not join, and run flat too */
  if (gr__agree_gather(c, "the hierarchy's ranks and hosts", &mine, sizeof mine, rec) != GR_OK) {
    GR_DEBUG("collectives: communicator %s: no hierarchy: %s", c->id, c->err);
    goto none;
  }
  /* Nodes are numbered by their leaders' ranks, which is also the leaders' order in their
   * communicator (split with key = rank). Everything below is computed from the gathered table,
   * the same on every rank. */
  int nnodes = 0, maxl = 0, *node_idx = calloc((size_t)P, sizeof(int));
  h->node_of = malloc(sizeof(int) * (size_t)P);
  h->local_of = malloc(sizeof(int) * (size_t)P);
  h->leader_of = malloc(sizeof(int) * (size_t)P);
  h->node_ranks = malloc(sizeof(int) * (size_t)lsize);
  h->host = malloc((size_t)P * HOST_LEN);
  int mem_ok = node_idx && h->node_of && h->local_of && h->leader_of && h->node_ranks && h->host;
  for (int r = 0; mem_ok && r < P; r++) {
    int lr = rec[r].lrank, ld = rec[r].leader;
    if (lr < 0 || ld < 0 || ld >= P || (lr == 0) != (ld == r))
      mem_ok = 0; /* not a partition */
    else if (lr == 0) {
      node_idx[r] = nnodes;
      h->leader_of[nnodes] = r;
      rec[r].host[HOST_LEN - 1] = '\0';
      memcpy(h->host[nnodes], rec[r].host, HOST_LEN);
      nnodes++;
    }
    if (lr + 1 > maxl) maxl = lr + 1;
  }
  for (int r = 0; mem_ok && r < P; r++) {
    h->node_of[r] = node_idx[rec[r].leader];
    h->local_of[r] = rec[r].lrank;
    if (h->node_of[r] == node_idx[leader] && rec[r].lrank < lsize) h->node_ranks[rec[r].lrank] = r;
  }
  free(node_idx);
  /* a rank out of memory here stops all of them at the next agreement */
  int y[1] = {mem_ok};
  if (!agree_min(c, "the hierarchy's tables", y, 1) || !y[0]) goto none;
  if (nnodes < 2 || maxl < 2) {
    GR_DEBUG("collectives: communicator %s: no hierarchy (%d node(s), at most %d rank(s) on one)",
             c->id, nnodes, maxl);
    goto none;
  }
  h->mode = c->algo;
  h->rank = c->rank, h->size = P, h->lrank = lrank, h->lsize = lsize, h->nnodes = nnodes;
  h->node = h->node_of[c->rank];
  h->maxl = maxl;
  h->ident = 1;
  for (int r = 0; r < P; r++)
    if (h->node_of[r] * maxl + h->local_of[r] != r) h->ident = 0;
  snprintf(h->id, sizeof h->id, "%.40s", c->id);
  /* this node's segment: the shared-memory path's own attach, on a communicator of the node */
  int seg_ok = 1;
  if (lsize > 1) {
    gr__comm_cfg cfg = {c->timeout_s, 0, c->algo, 0, NULL};
    gr_comm *nc = gr__comm_new(node, &cfg); /* owns node from here on */
    if (nc) {
      node = MPI_COMM_NULL;
      snprintf(nc->id, sizeof nc->id, "%.20s.node", c->id);
      /* a failed attach (its round timed out, MPI failed) leaves no segment: the hierarchy then
       * agrees to stand aside below; its sentence is said here, where nc still holds it */
      if (gr__shm_comm_attach(nc, &h->shm) != GR_OK)
        GR_DEBUG("collectives: communicator %s: the node's segment: %s", c->id, nc->err);
      gr__comm_free(nc);
    }
    seg_ok = h->shm != NULL;
    if (h->shm) gr__shm_name_ranks(h->shm, h->node_ranks);
  }
  MPI_Comm lm = MPI_COMM_NULL;
  int lead_ok = MPI_Comm_split(c->mpi, lrank == 0 ? 0 : MPI_UNDEFINED, c->rank, &lm) == MPI_SUCCESS;
  if (lead_ok && lm != MPI_COMM_NULL) {
    gr_status st = lead_new(c, lm, &h->lead);
    if (st != GR_OK) {
      GR_DEBUG("collectives: communicator %s: the leaders' communicator failed: %s", c->id,
               gr_status_name(st));
      lead_ok = 0;
    }
  }
  int z[2] = {seg_ok, lead_ok};
  if (!agree_min(c, "the hierarchy's segment and leaders", z, 2) || !z[0] || !z[1]) {
    GR_DEBUG("collectives: communicator %s: no hierarchy (%s)", c->id,
             !z[0] ? "a node could not make its shared-memory segment"
                   : "no leaders' communicator");
    goto none;
  }
  /* the segment carries the node's traffic; the split MPI gave fails its free only as an invalid
   * handle, and the hierarchy stands either way */
  if (node != MPI_COMM_NULL) (void)MPI_Comm_free(&node);
  free(rec);
  GR_DEBUG("collectives: communicator %s: hierarchical (%d nodes, this node %s has %d rank(s), "
           "leader rank %d; GPURUN_COLL_ALGO=%s)",
           c->id, nnodes, h->host[h->node], lsize, h->leader_of[h->node],
           gr__coll_algo_name(h->mode));
  *out = h;
  return GR_OK;
none:
  if (node != MPI_COMM_NULL) (void)MPI_Comm_free(&node); /* as above: the flat paths stand anyway */
  free(rec);
  gr__hier_free(h);
  return GR_OK;
}

/* ---- calls ------------------------------------------------------------------------------- */

/* What "auto" hands to the hierarchy (bench/README.md, "hierarchical collectives across nodes",
 * gives the runs): allreduce from 64 KiB (below, three stages in a row lose to the flat recursive
 * doubling), broadcast from 256 KiB, allgather from 1 MiB of all ranks' data. The barrier, reduce
 * and reduce-scatter are hierarchical only when asked for (GPURUN_COLL_ALGO=hier): no size gained
 * reliably (their node step reduces every byte on every rank of the node). The runs are on network
 * namespaces over one machine's two cores, so these thresholds wait for a measurement on a real
 * network. */
#define HIER_AUTO_ALLREDUCE_MIN (64u << 10)
#define HIER_AUTO_BROADCAST_MIN (256u << 10)
#define HIER_AUTO_ALLGATHER_MIN (1u << 20) /* all ranks' data: size x sendcount */

int gr__hier_takes(const gr__hier *h, const gr__call *k) {
  if (!h) return 0;
  size_t bytes = k->kind == GR__BARRIER ? 0 : k->count * gr__dtype_size(k->dtype);
  switch (k->kind) {
  case GR__ALLREDUCE:
    return h->mode >= GR__COLL_ALGO_HIER || bytes >= HIER_AUTO_ALLREDUCE_MIN;
  case GR__BROADCAST:
    return h->mode >= GR__COLL_ALGO_HIER || bytes >= HIER_AUTO_BROADCAST_MIN;
  case GR__ALLGATHER:
    return h->mode >= GR__COLL_ALGO_HIER || bytes * (size_t)h->size >= HIER_AUTO_ALLGATHER_MIN;
  case GR__REDUCE:
  case GR__REDUCE_SCATTER:
  case GR__BARRIER:
    return h->mode >= GR__COLL_ALGO_HIER;
  default:
    return 0;
  }
}

static void call_release(hier_call *hc) {
  gr__hier *h = hc->h;
  if (gr__list_linked(&h->calls, &hc->node)) gr__list_remove(&h->calls, &hc->node);
  if (hc->busy)
    gr__abandon(hc->tmp);
  else
    free(hc->tmp);
  free(hc->seq), free(hc->nops), free(hc->adone), free(hc->ldone), free(hc->lc);
  free(hc);
}

/* Stop everything of hc that is in flight (the path is unusable afterwards). */
static void call_abandon(hier_call *hc) {
  gr__hier *h = hc->h;
  if (h->shm && hc->tdone < hc->tpost) gr__shm_forget(h->shm, hc->nops[hc->tdone], NULL, 0);
  for (int j = hc->ldone_lo; j < hc->lposted; j++)
    if (!hc->ldone[j] && !h->lead->ops->forget(&hc->lc[j])) hc->busy = 1;
  hc->lposted = hc->ldone_lo; /* nothing left to forget */
  hc->tpost = hc->tdone;
}

/* base + off bytes; NULL stays NULL (a count-0 call's buffers may be NULL: no arithmetic on it) */
static char *at(const char *base, size_t off) {
  return base ? (char *)(uintptr_t)base + off : NULL;
}

static void seg_range(const hier_call *hc, int j, size_t *off, size_t *len) {
  *off = (size_t)j * hc->seg;
  *len = hc->count - *off < hc->seg ? hc->count - *off : hc->seg;
}

static const char *leaders_text(const gr__hier *h, char *b, size_t len) {
  gr__strbuf sb;
  gr__strbuf_init_fixed(&sb, b, len);
  for (int i = 0; i < h->nnodes && !sb.truncated; i++)
    gr__strbuf_appendf(&sb, "%srank %d on %s", i ? ", " : "", h->leader_of[i], h->host[i]);
  return b;
}

/* Record hc's failure in stage (a phrase) with detail, and stop the path. */
static gr_status fail(hier_call *hc, gr_status st, const char *stage, const char *detail, int j) {
  hc->st = st;
  snprintf(hc->why, sizeof hc->why, "hierarchical %s, segment %d of %d: %s: %.380s",
           gr__kind_name(hc->kind), j, hc->nseg, stage, detail);
  gr__hier *h = hc->h;
  h->broken = 1;
  snprintf(h->why, sizeof h->why, "%s", hc->why);
  call_abandon(hc);
  return st;
}

/* Allgather, reduce-scatter: segment [off, off + len) of every rank's block lives in tmp as
 * nnodes node blocks of maxl * len elements, rank l of node i at (i * maxl + l) * len: the node
 * order the leaders' communicator has, whatever the ranks' order in the parent (a node's ranks
 * need not be contiguous there). Segments follow each other in tmp. */
static char *blocks(const hier_call *hc, size_t off, size_t len, int node, int l) {
  const gr__hier *h = hc->h;
  size_t B = (size_t)h->maxl;
  return at(hc->blk, (off * (size_t)h->nnodes * B + ((size_t)node * B + (size_t)l) * len) * hc->es);
}

/* Segment j's result is complete in tmp: put it where the caller wants it, in parent-rank order. */
static void seg_finish(hier_call *hc, int j) {
  const gr__hier *h = hc->h;
  size_t off, len;
  seg_range(hc, j, &off, &len);
  if (!len) return;
  if (hc->kind == GR__ALLGATHER && hc->blk != hc->out) {
    for (int r = 0; r < h->size; r++)
      memcpy(hc->out + ((size_t)r * hc->count + off) * hc->es,
             blocks(hc, off, len, h->node_of[r], h->local_of[r]), len * hc->es);
  } else if (hc->kind == GR__REDUCE_SCATTER) {
    memcpy(hc->out + off * hc->es,
           hc->rs_out + (off * (size_t)h->maxl + (size_t)h->lrank * len) * hc->es, len * hc->es);
  }
}

/* The leaders' step of segment j finished; on a rank without a node broadcast, so did j. */
static void lead_done(hier_call *hc, int j) {
  hc->ldone[j] = 1;
  if (!hc->has_c) seg_finish(hc, j);
}

static gr_status post_lead(hier_call *hc) {
  gr__hier *h = hc->h;
  int j = hc->lposted;
  size_t off, len;
  seg_range(hc, j, &off, &len);
  if (gr__hier_step_hook) gr__hier_step_hook(1, j);
  gr__call *l = &hc->lc[j];
  memset(l, 0, sizeof *l);
  l->kind = hc->kind;
  size_t B = (size_t)h->maxl;
  switch (hc->kind) {
  case GR__ALLGATHER:      /* the node blocks, in place (this leader's block is its node's) */
    if (!hc->has_a && len) /* alone on its node: its own input is the node's block */
      memcpy(blocks(hc, off, len, h->node, 0), at(hc->src, off * hc->es), len * hc->es);
    l->send = blocks(hc, off, len, h->node, 0);
    l->recv = blocks(hc, off, len, 0, 0);
    l->count = B * len;
    break;
  case GR__REDUCE_SCATTER: /* the node sums of every node block; this node's block comes back */
    l->send = blocks(hc, off, len, 0, 0);
    l->recv = at(hc->rs_out, off * B * hc->es);
    l->count = B * len;
    break;
  default: /* allreduce, reduce (the node's sum, or its own input alone), broadcast, barrier */
    l->send =
        at((hc->kind == GR__ALLREDUCE || hc->kind == GR__REDUCE) && !hc->has_a ? hc->src : hc->buf,
           off * hc->es);
    l->recv = at(hc->buf, off * hc->es);
    l->count = hc->kind == GR__BARRIER ? 0 : len;
  }
  l->dtype = hc->dtype;
  l->op = hc->op;
  l->root = hc->kind == GR__BROADCAST || hc->kind == GR__REDUCE ? hc->lroot : -1;
  l->comm = h->lead;
  l->seq = (uint64_t)j;
  l->flight_slot = -1; /* and be_area zero, as a backend's post expects */
  int done = 0;
  h->lead->err[0] = '\0';
  gr_status st = h->lead->ops->post(l, &done);
  if (st != GR_OK) {
    hc->ldone[j] = 1; /* nothing in flight to forget */
    hc->lposted++;
    return fail(hc, st, "the inter-node step failed", h->lead->err, j);
  }
  hc->lposted++;
  if (done) lead_done(hc, j);
  return GR_OK;
}

static int node_allowed(const hier_call *hc, int code) {
  return !(code & 1) || hc->h->lrank != 0 || hc->ldone[code / 2];
}

static gr_status post_node(hier_call *hc) {
  gr__hier *h = hc->h;
  int code = hc->seq[hc->tpost], j = code / 2;
  size_t off, len;
  seg_range(hc, j, &off, &len);
  if (gr__hier_step_hook) gr__hier_step_hook(0, j);
  gr__shm_op call = {.kind = GR__BARRIER, .dtype = hc->dtype, .op = hc->op, .root = -1};
  size_t NB = (size_t)h->nnodes * (size_t)h->maxl;
  if (hc->kind != GR__BARRIER && (code & 1)) { /* C: the leader's result to its node */
    call.kind = GR__BROADCAST;
    call.root = 0;
    call.count = len;
    call.recv = at(hc->buf, off * hc->es);
    if (hc->kind == GR__ALLGATHER) { /* every node's block: each rank picks the order itself */
      call.count = NB * len;
      call.recv = blocks(hc, off, len, 0, 0);
    } else if (hc->kind == GR__REDUCE_SCATTER) { /* this node's block: each rank takes its part */
      call.count = (size_t)h->maxl * len;
      call.recv = at(hc->rs_out, off * (size_t)h->maxl * hc->es);
    }
    call.send = call.recv;
  } else if (hc->kind != GR__BARRIER) { /* A: the node's step */
    call.kind = hc->a_kind;
    call.root = hc->a_root;
    call.count = len;
    call.send = at(hc->src, off * hc->es);
    call.recv = at(hc->buf, off * hc->es);
    if (hc->kind == GR__BROADCAST) {
      call.send = call.recv;
    } else if (hc->kind == GR__ALLGATHER) { /* the node's ranks' inputs, in local order */
      call.recv = blocks(hc, off, len, h->node, 0);
    } else if (hc->kind == GR__REDUCE_SCATTER) { /* the node's sum of the permuted inputs */
      call.count = NB * len;
      call.recv = blocks(hc, off, len, 0, 0);
      call.send = hc->rs_direct ? hc->src : call.recv;
    }
  }
  gr_status st = gr__shm_post(h->shm, &hc->nops[hc->tpost], &call);
  if (st != GR_OK)
    return fail(hc, st, "the node step could not start",
                st == GR_ERR_NOMEM ? "out of memory" : "segment unusable", j);
  hc->tpost++;
  return GR_OK;
}

/* Whether every call older than hc has posted all of its node (leader) steps. */
static int older_posted(const hier_call *hc, int leaders) {
  for (const gr_list_node *n = hc->node.prev; n; n = n->prev) {
    const hier_call *o = GR_LIST_ENTRY(n, const hier_call, node);
    if (leaders ? o->has_l && o->lposted < o->nseg : o->tpost < o->nseq) return 0;
  }
  return 1;
}

/* Progress hc as far as it goes now; *moved when anything happened. */
static gr_status progress(hier_call *hc, int *moved) {
  gr__hier *h = hc->h;
  if (hc->st != GR_OK || hc->finished) return hc->st;
  if (hc->has_l) {
    while (hc->lposted < hc->nseg && (!hc->has_a || hc->adone[hc->lposted]) &&
           older_posted(hc, 1)) {
      GR_CHECK(post_lead(hc));
      *moved = 1;
    }
    for (int j = hc->ldone_lo; j < hc->lposted; j++) {
      if (hc->ldone[j]) continue;
      int done = 0;
      h->lead->err[0] = '\0';
      gr_status st = h->lead->ops->test(&hc->lc[j], &done);
      if (st != GR_OK) {
        hc->ldone[j] = 1; /* a failed call is released by the backend */
        return fail(hc, st, "the inter-node step failed", h->lead->err, j);
      }
      if (done) lead_done(hc, j), *moved = 1;
    }
    while (hc->ldone_lo < hc->lposted && hc->ldone[hc->ldone_lo])
      hc->ldone_lo++;
  }
  while (hc->tpost < hc->nseq && node_allowed(hc, hc->seq[hc->tpost]) && older_posted(hc, 0)) {
    GR_CHECK(post_node(hc));
    *moved = 1;
  }
  if (hc->tdone < hc->tpost) {
    int done = 0, code = hc->seq[hc->tdone];
    gr_status st = gr__shm_test(h->shm, hc->nops[hc->tdone], &done);
    if (st != GR_OK) {
      if (done) hc->tdone++; /* a mismatch releases the op */
      char d[400];
      snprintf(d, sizeof d, "%s",
               st == GR_ERR_MISMATCH ? gr__shm_why(h->shm)
               : st == GR_ERR_SYSTEM ? "a single-copy read from a peer failed"
                                     : "segment unusable");
      return fail(hc, st, "the node step failed", d, code / 2);
    }
    if (done) {
      if (!(code & 1))
        hc->adone[code / 2] = 1;
      else
        seg_finish(hc, code / 2);
      hc->tdone++;
      *moved = 1;
    }
  }
  if (hc->tdone == hc->nseq && (!hc->has_l || hc->ldone_lo == hc->nseg)) hc->finished = 1;
  return GR_OK;
}

gr_status gr__hier_call_post(gr__hier *h, gr__call *k, const void *send, void *recv,
                             hier_call **op) {
  gr_comm *c = k->comm;
  if (h->broken)
    return gr__comm_err(c, GR_ERR_ABORTED,
                        "hierarchical path unusable after an earlier failure "
                        "(%s); destroy the communicator",
                        h->why);
  hier_call *hc = calloc(1, sizeof *hc);
  if (!hc) return gr__comm_err(c, GR_ERR_NOMEM, "out of memory");
  hc->h = h;
  hc->kind = k->kind;
  hc->dtype = k->dtype;
  hc->op = k->op == GR_AVG ? GR_SUM : k->op;
  hc->es = k->kind == GR__BARRIER ? 1 : gr__dtype_size(k->dtype);
  hc->count = k->kind == GR__BARRIER ? 0 : k->count;
  /* allgather, reduce-scatter: a segment is sized by what the leaders exchange, every node block */
  size_t NB = (size_t)h->nnodes * (size_t)h->maxl, per = hc->es;
  if (k->kind == GR__ALLGATHER || k->kind == GR__REDUCE_SCATTER) per *= NB;
  hc->seg = (gr__hier_seg_bytes ? gr__hier_seg_bytes : HIER_SEG_BYTES) / per;
  if (!hc->seg) hc->seg = 1;
  hc->nseg = hc->count ? (int)((hc->count + hc->seg - 1) / hc->seg) : 1;
  hc->src = send;
  hc->buf = recv;
  hc->out = recv;
  int multi = h->lsize > 1;
  hc->has_l = h->lrank == 0;
  hc->a_kind = k->kind;
  hc->a_root = -1;
  size_t bytes = hc->count * hc->es;
  if (k->kind == GR__REDUCE) {
    /* node allreduce (every rank of the node gets its sum; the protocol has no reduce to one
     * rank at this size), leaders' reduce to the root's node, and a node broadcast from that
     * leader when the root is not it. Ranks but the root work in scratch. */
    hc->lroot = h->node_of[k->root];
    hc->a_kind = GR__ALLREDUCE;
    hc->has_a = multi;
    hc->has_c = multi && hc->lroot == h->node && h->local_of[k->root] != 0;
    if (k->root != h->rank && bytes) hc->tmp = malloc(bytes);
    if (k->root != h->rank) hc->buf = hc->tmp;
  } else if (k->kind == GR__ALLGATHER || k->kind == GR__REDUCE_SCATTER) {
    /* tmp: the node blocks (blocks()); reduce-scatter adds the leaders' result, maxl blocks */
    size_t tb = NB * bytes + (k->kind == GR__REDUCE_SCATTER ? (size_t)h->maxl * bytes : 0);
    /* ranks in node order, every node alike, one segment: the blocks are in rank order already */
    int direct = h->ident && hc->nseg == 1;
    if (k->kind == GR__ALLGATHER && direct)
      hc->blk = recv; /* built in place: they are the result */
    else if (tb)      /* zero: a smaller node's padding is sent, never used */
      hc->blk = hc->tmp = direct ? malloc(tb) : calloc(1, tb);
    hc->rs_direct = k->kind == GR__REDUCE_SCATTER && direct; /* the input is the blocks */
    hc->has_a = hc->has_c = multi;
    if (k->kind == GR__REDUCE_SCATTER) hc->a_kind = GR__ALLREDUCE;
  }
  if (k->kind == GR__REDUCE_SCATTER && hc->tmp) {
    /* this rank's input, block of rank r to node_of[r]'s block, slot local_of[r], per segment */
    hc->rs_out = hc->tmp + NB * bytes;
    for (size_t off = 0; off < hc->count && !hc->rs_direct; off += hc->seg) {
      size_t len = hc->count - off < hc->seg ? hc->count - off : hc->seg;
      for (int r = 0; r < h->size; r++)
        memcpy(blocks(hc, off, len, h->node_of[r], h->local_of[r]),
               (const char *)send + ((size_t)r * hc->count + off) * hc->es, len * hc->es);
    }
  }
  int scratch = k->kind == GR__REDUCE_SCATTER || (k->kind == GR__REDUCE && k->root != h->rank);
  if (bytes && (k->kind == GR__ALLGATHER ? !hc->blk : scratch && !hc->tmp)) {
    free(hc);
    return gr__comm_err(c, GR_ERR_NOMEM, "out of memory (%zu bytes of scratch)", bytes);
  }
  if (k->kind == GR__BROADCAST) {
    int rn = h->node_of[k->root], rl = h->local_of[k->root];
    hc->lroot = rn;
    if (rn == h->node && rl != 0) {
      hc->has_a = 1; /* the root is not its node's leader: it broadcasts to its node first */
      hc->a_root = rl;
    } else {
      hc->has_c = multi;
    }
    if (k->root == h->rank && send != recv && hc->count) memcpy(recv, send, hc->count * hc->es);
  } else if (k->kind == GR__ALLREDUCE || k->kind == GR__BARRIER) {
    hc->has_a = hc->has_c = multi;
  }
  int W = HIER_WINDOW, n = 0;
  hc->seq = malloc(sizeof(int) * 2 * (size_t)hc->nseg);
  hc->nops = calloc(2 * (size_t)hc->nseg, sizeof *hc->nops);
  hc->adone = calloc((size_t)hc->nseg, 1);
  hc->ldone = calloc((size_t)hc->nseg, 1);
  hc->lc = hc->has_l ? calloc((size_t)hc->nseg, sizeof *hc->lc) : NULL;
  if (!hc->seq || !hc->nops || !hc->adone || !hc->ldone || (hc->has_l && !hc->lc)) {
    free(hc->seq), free(hc->nops), free(hc->adone), free(hc->ldone), free(hc->lc), free(hc->tmp);
    free(hc);
    return gr__comm_err(c, GR_ERR_NOMEM, "out of memory");
  }
  for (int j = 0; j < hc->nseg + W - 1; j++) {
    if (hc->has_a && j < hc->nseg) hc->seq[n++] = 2 * j;
    int cj = j - (W - 1);
    if (hc->has_c && cj >= 0 && cj < hc->nseg) hc->seq[n++] = 2 * cj + 1;
  }
  hc->nseq = n;
  gr__list_push_back(&h->calls, &hc->node);
  int moved = 0;
  gr_status st = progress(hc, &moved);
  if (st != GR_OK) {
    gr__comm_err(c, st, "%s", hc->why);
    call_release(hc);
    return st;
  }
  *op = hc;
  atomic_fetch_add_explicit(&gr__hier_calls[hc->kind], 1, memory_order_relaxed);
  return GR_OK;
}

gr_status gr__hier_call_test(gr__hier *h, gr__call *k, hier_call **op, int *done) {
  hier_call *hc = *op;
  *done = 0;
  /* every call in flight, oldest first, until nothing moves */
  for (int moved = 1; moved && hc->st == GR_OK && !hc->finished;) {
    moved = 0;
    GR_LIST_FOREACH(o, tmp, &h->calls)
    progress(GR_LIST_ENTRY(o, hier_call, node), &moved);
  }
  if (hc->st == GR_OK && !hc->finished && h->broken) /* another call failed */
    fail(hc, GR_ERR_ABORTED, "abandoned after another call failed", h->why, hc->ldone_lo);
  if (hc->st == GR_OK && !hc->finished) return GR_OK;
  gr_status st = hc->st;
  if (st != GR_OK) gr__comm_err(k->comm, st, "%s", hc->why);
  *op = NULL;
  call_release(hc);
  *done = st == GR_OK;
  return st;
}

int gr__hier_gone(const gr__hier *h, char *buf, size_t len) {
  if (len) buf[0] = '\0';
  return h->shm ? gr__shm_gone(h->shm, buf, len) : 0;
}

int gr__hier_call_forget(gr__hier *h, gr__call *k, hier_call **op) {
  hier_call *hc = *op;
  char b[GR__ERRLEN], lt[256];
  gr__strbuf sb;
  gr__strbuf_init_fixed(&sb, b, sizeof b);
  gr__strbuf_appendf(&sb,
                     "hierarchical %s over %d nodes in %d segment(s):", gr__kind_name(hc->kind),
                     h->nnodes, hc->nseg);
  if (h->shm && hc->tdone < hc->tpost) {
    char w[320] = "";
    gr__shm_forget(h->shm, hc->nops[hc->tdone], w, sizeof w);
    gr__strbuf_appendf(&sb, " node step (segment %d) on %s: %s;", hc->seq[hc->tdone] / 2,
                       h->host[h->node], w);
  } else if (h->shm) {
    gr__shm_forget(h->shm, NULL, NULL, 0);
  }
  if (hc->has_l && hc->ldone_lo < hc->lposted && !sb.truncated)
    gr__strbuf_appendf(&sb,
                       " inter-node step (segment %d) among the node "
                       "leaders (%s) not complete: a leader, or a rank of its node, did not take "
                       "part;",
                       hc->ldone_lo, leaders_text(h, lt, sizeof lt));
  size_t n = gr__strbuf_len(&sb);
  if (n > 0 && !sb.truncated && b[n - 1] == ';') b[n - 1] = '\0';
  snprintf(k->comm->err, sizeof k->comm->err, "%s", b);
  h->broken = 1;
  snprintf(h->why, sizeof h->why, "a call timed out");
  hc->tdone = hc->tpost; /* the segment is marked broken: nothing of it is waited for */
  call_abandon(hc);
  *op = NULL;
  int quiet = !hc->busy;
  call_release(hc);
  return quiet;
}
