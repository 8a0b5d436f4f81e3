/* Ranks that share a GPU on the NCCL backend (see gr_nccl_share.h for the model).
 *
 * A call goes through up to four stages, each a non-blocking step that test() advances:
 *   in:   the members' data to their leader on host copies (reduce; an allgather for the gather;
 *         barrier; for a broadcast, the root's data to its whole group)
 *   nccl: the leaders' step, a call on the leaders' communicator (skipped with one leader)
 *   out:  the leader's result to its members (a broadcast; for a reduce-scatter, of the group's
 *         blocks, each member taking its own; barrier)
 *   copy: the result into the caller's buffer, on the call's stream.
 * Each level is a gr_comm this file composes, as hier.c composes its own. The leaders' is on the
 * parent's backend table (lead_new: id "<parent>.leaders"): its ranks drive one GPU each, so its
 * create runs NCCL over them directly, and its row ("nccl") stages the host buffers through the
 * device, runs NCCL, copies back, waits for the stream and words its failures. The members' are two
 * on the MPI backend's table over this GPU's ranks (member_new: "<parent>.gpu-in", ".gpu-out"), in
 * GPURUN_COLL_ALGO=mpi's configuration (the MPI library's calls; no shared-memory segment each),
 * whose rows post, test and word the "in" and "out" steps. The MPI backend has no gather or
 * scatter: the gather is an allgather and the scatter a broadcast of the group's blocks, which moves
 * blocks members do not need. This file only adds where ("the ranks-to-leader step on ...") and
 * the composition: turn order, the leader's host work (AVG's one division, the allgather's order).
 * Members post their "in" and "out" steps when the call is posted. Leaders post the leaders' step
 * and the "out" step strictly in call order (the turn counters), so that NCCL sees the same order
 * on every leader and each group's communicators see the same order of collectives on every
 * member, whatever order the calls complete in. "in" and "out" are two communicators, because a
 * member posts both at once while its leader posts "out" only after NCCL.
 * A call given up on forgets its steps; each backend's forget says whether anything still writes
 * the buffers it was given, and the call's host buffers are parked until nothing does.
 * All-to-all, send and receive do not go through the leaders: each is one call on a third
 * communicator of the MPI backend, over all of c's ranks (member_new: "<parent>.all", a duplicate
 * of c->mpi, made as the members' are), on host copies. Its row sends and receives by peer with
 * the one tag of gr_send/gr_recv (GR__P2P_TAG) on that duplicate, whose context no other
 * communicator shares: no message of c->mpi (verdicts, agreements) or of the members' and leaders'
 * steps can match one of its calls, and sends to one peer match its receives in the order posted
 * (MPI's order on one communicator and tag). It carries no collective but all-to-all.
 * Host staging costs two copies per member and call (and the MPI backend's private copy of what a
 * request receives); CUDA IPC between the ranks of one GPU would avoid them and is not done (yet). */
#include "gr_nccl_share.h"

#include "gr_agree.h"
#include "gr_dtype.h"
#include "gr_error.h"
#include "gr_log.h"
#include "gr_param.h"
#include "gr_path.h"
#include "gr_strbuf.h"

#include <cuda_runtime_api.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { BUS_LEN = 32, KEY_LEN = 288 };

struct gr__nccl_share {
  /* This GPU's ranks, in comm rank order (rank 0 = the leader), as two communicators on the MPI
   * backend's table (member_new): "in" carries the members' data to their leader, "out" the
   * leader's result back. Two, because a member posts both at once while its leader posts "out"
   * only after the leaders' step. */
  gr_comm *gin, *gout;
  /* All of c's ranks, on the MPI backend's table (member_new): all-to-all, send and receive, which
   * do not go through the leaders. */
  gr_comm *gall;
  int grank, gsize, gmax;   /* rank in and size of my group; the largest group */
  int nleaders, lrank;      /* leaders; my index among them (-1 for a member) */
  int *group_of, *grank_of; /* per comm rank: leader index of its group, rank within it */
  int *members;             /* comm ranks of my group, in group order */
  /* The leaders' communicator (leaders only, and only with more than one leader): a gr_comm on
   * the parent's backend table, as hier.c's leaders' (lead_new), so that the leaders' step is a
   * call on it that its row posts, tests and forgets (NCCL over the leaders, one GPU each). */
  gr_comm *lead;
  int pinned;                           /* lead exists: host staging buffers are pinned (see hal) */
  uint64_t posted, nccl_turn, out_turn; /* call numbers: posted, through NCCL, "out" posted */
  struct xcall *head, *tail;            /* calls in flight, in post order */
};

enum { P_IN, P_NCCL, P_NCCL_WAIT, P_OUT, P_OUT_WAIT, P_COPY, P_DONE };

typedef struct xcall {
  gr__call *k;
  int phase;
  gr_status st;
  uint64_t no;                    /* turn number; 0: not a collective through the leaders */
  int in_root_group;              /* broadcast/reduce: my group holds the root */
  int pinned;                     /* the host buffers came from cudaMallocHost */
  void *hs, *hwork, *hres, *hall; /* host: send copy, leader's work, result, allgather result */
  gr__call lc;                    /* the leaders' step, a call on s->lead (its row stages) */
  int lc_posted;                  /* lc is posted and not settled: forget it when given up */
  int lc_quiet;                   /* lc's forget said nothing writes into hwork/hall any more */
  /* the "in" and "out" steps, calls on s->gin and s->gout; for all-to-all, send and receive, ic
   * is their one step, a call on s->gall */
  gr__call ic, oc;
  int ic_posted, oc_posted; /* posted and not settled: forget them when given up */
  int ic_busy, oc_busy;     /* given up on, and their forget said MPI may still write */
  struct xcall *next;
} xcall;

/* A call's state in the call record's be_area (gr_coll.h): its xcall, which the call list holds. */
typedef struct {
  xcall *x;
} share_call;
_Static_assert(sizeof(share_call) <= GR__NCCL_SHARE_AREA,
               "share_call must fit its part of be_area");

static xcall **slot(gr__call *k) { return &((share_call *)(void *)k->be_area)->x; }

static void sweep_parked(void);
static void park(gr__nccl_share *s, xcall *x);

/* ---- errors ------------------------------------------------------------------------------- */

static gr_status cuda_fail(gr_comm *c, cudaError_t e, const char *what) {
  return gr__comm_err(c, GR_ERR_CUDA, "%s failed on rank %d: %s (%d)", what, c->rank,
                      cudaGetErrorString(e), (int)e);
}

static gr_status mpi_fail(gr_comm *c, int rc, const char *what) {
  char s[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, s, &len) != MPI_SUCCESS) snprintf(s, sizeof s, "error %d", rc);
  return gr__comm_err(c, GR_ERR_MPI, "%s failed on rank %d: %s", what, c->rank, s);
}

static gr_status stream_wait(gr_comm *c, cudaStream_t st, double deadline) {
  for (;;) {
    cudaError_t e = cudaStreamQuery(st);
    if (e == cudaSuccess) return GR_OK;
    if (e != cudaErrorNotReady) return cuda_fail(c, e, "cudaStreamQuery");
    if (gr__past(deadline))
      return gr__comm_err(c, GR_ERR_TIMEOUT,
                          "the stream did not drain before the deadline on rank %d", c->rank);
  }
}

/* ---- setup -------------------------------------------------------------------------------- */

/* "host|boot id", then the PCI bus id: which physical GPU this rank drives. A MIG instance and an
 * MPS client report the bus id of the GPU itself, so they group with the other ranks on it. A
 * rank whose bus id cannot be read gets a key of its own (no grouping; NCCL says what is wrong). */
static void gpu_key(gr_comm *c, char *key, char *bus) {
  memset(key, 0, KEY_LEN);
  memset(bus, 0, BUS_LEN); /* the whole key is compared: no stale bytes after the id */
  int dev = 0, nl = 0;
  char name[MPI_MAX_PROCESSOR_NAME];
  MPI_Get_processor_name(name, &nl);
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetPCIBusId(bus, BUS_LEN, dev) != cudaSuccess) {
    cudaGetLastError();
    snprintf(bus, BUS_LEN, "?rank%d", c->rank);
  }
  bus[BUS_LEN - 1] = 0;
  for (char *p = bus; *p; p++)
    if (*p >= 'A' && *p <= 'F') *p = (char)(*p - 'A' + 'a');
  /* Host names repeat across containers and clusters: the boot id (what NCCL's host hash also
   * folds in) tells machines apart. */
  char boot[40] = "";
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (f) {
    if (!fgets(boot, sizeof boot, f)) boot[0] = 0;
    boot[strcspn(boot, "\n")] = 0;
    fclose(f);
  }
  snprintf(key, KEY_LEN - BUS_LEN, "%.*s|%s", KEY_LEN - BUS_LEN - 48, name, boot);
  memcpy(key + KEY_LEN - BUS_LEN, bus, strlen(bus));
}

/* The leaders' communicator: destroyed (bounded by deadline) and freed; a failure's sentence goes
 * to c->err. */
static gr_status lead_free(gr_comm *c, gr_comm *l, double deadline) {
  gr_status st = GR_OK;
  gr__paths_destroy(l);
  if (l->be && (st = l->ops->destroy(l, deadline)) != GR_OK)
    gr__comm_err(c, st, "destroying the leaders' communicator %s failed on rank %d: %s", l->id,
                 c->rank, l->err);
  gr__comm_free(l);
  return st;
}

/* The leaders' communicator on the parent's backend table, made as hier.c makes its own
 * (lead_new): its create sees one rank per GPU, so it runs NCCL over them directly and has no share
 * of its own. Owns lm from here on. */
static gr_status lead_new(gr_comm *c, MPI_Comm lm, gr_comm **out) {
  gr__comm_cfg cfg = {c->timeout_s, 0, c->algo, 0, c->ops};
  gr_comm *l = gr__comm_new(lm, &cfg);
  if (!l) {
    /* out of memory, or MPI refused lm's basics (said at warn level); the split MPI just gave
     * fails its free only as an invalid handle */
    (void)MPI_Comm_free(&lm);
    return gr__comm_err(c, GR_ERR_NOMEM,
                        "the leaders' communicator could not be made on rank %d (out of memory, "
                        "or MPI refused it: GPURUN_LOG=warn says which)",
                        c->rank);
  }
  snprintf(l->id, sizeof l->id, "%.20s.leaders", c->id);
  gr__path_row_take(l, c); /* the row GPURUN_COLL_ALGO names is c's, agreed already */
  gr_status st = l->ops->create(l, gr__deadline(c->timeout_s));
  if (st == GR_OK) st = gr__paths_create(l);
  if (st != GR_OK) {
    gr__comm_err(c, st,
                 "the leaders' communicator %s (NCCL among one leader per GPU) failed on rank "
                 "%d: %s",
                 l->id, c->rank, l->err);
    char why[sizeof c->err];
    memcpy(why, c->err, sizeof why);
    lead_free(c, l, gr__deadline(c->timeout_s));
    memcpy(c->err, why, sizeof why);
    return st;
  }
  *out = l;
  return GR_OK;
}

/* A communicator of this GPU's ranks: destroyed (bounded by deadline) and freed; its sentence goes
 * to c->err where nothing failed before (*st GR_OK). */
static void member_free(gr_comm *c, gr_comm *g, gr_status *st, double deadline) {
  if (!g) return;
  gr__paths_destroy(g);
  gr_status sg = g->be ? g->ops->destroy(g, deadline) : GR_OK;
  if (sg != GR_OK && *st == GR_OK)
    *st = gr__comm_err(c, sg, "destroying %s failed on rank %d: %s", g->id, c->rank, g->err);
  gr__comm_free(g);
}

static const char GPU_RANKS[] = "the GPU's ranks' communicator",
                  ALL_RANKS[] = "the all-to-all, send and receive communicator";

/* A communicator on the MPI backend's table over m (owned from here on; this GPU's ranks, or all of
 * c's), made as hier.c's lead_new makes its leaders': the members' steps, or all-to-all, send and
 * receive, are calls on it that its rows post, test and forget. Its id is "<parent>.<name>", what
 * says what it is in its failure's sentence. Its configuration is GPURUN_COLL_ALGO=mpi's (the MPI
 * library's own calls, no shared-memory segment of its own: a member's traffic is one reduce or
 * broadcast per call, and a segment per communicator would be two per shared GPU and one more over
 * all ranks). */
static gr_status member_new(gr_comm *c, MPI_Comm m, const char *name, const char *what,
                            gr_comm **out) {
  gr__comm_cfg cfg = {c->timeout_s, 0, GR__COLL_ALGO_MPI, 0, &gr__coll_ops_mpi};
  gr_comm *g = gr__comm_new(m, &cfg);
  if (!g) {
    (void)MPI_Comm_free(&m); /* as lead_new's */
    return gr__comm_err(c, GR_ERR_NOMEM,
                        "%s could not be made on rank %d (out of memory, or MPI refused it: "
                        "GPURUN_LOG=warn says which)",
                        what, c->rank);
  }
  snprintf(g->id, sizeof g->id, "%.20s.%s", c->id, name);
  /* c's agreed row, translated into the MPI backend's table: none there (NCCL's table has no
   * row to select), so no round of its own and GPURUN_COLL_ALGO=mpi's plain rows */
  gr__path_row_take(g, c);
  gr_status st = g->ops->create(g, gr__deadline(c->timeout_s));
  if (st == GR_OK) st = gr__paths_create(g);
  if (st != GR_OK) {
    gr__comm_err(c, st, "%s %s failed on rank %d: %s", what, g->id, c->rank, g->err);
    gr_status ignore = st;
    member_free(c, g, &ignore, gr__deadline(c->timeout_s));
    return st;
  }
  *out = g;
  return GR_OK;
}

/* Frees s. st: the status so far, whose sentence stands over one from here (a failed
 * MPI_Op_free: gr__op_map_free); returns st, or that failure when st is GR_OK. */
static gr_status share_free(gr_comm *c, gr__nccl_share *s, gr_status st, double deadline) {
  if (!s) return st;
  if (s->lead) { /* its sentence stands only where nothing failed before */
    char why[sizeof c->err];
    memcpy(why, c->err, sizeof why);
    gr_status sl = lead_free(c, s->lead, deadline);
    s->lead = NULL;
    if (st != GR_OK)
      memcpy(c->err, why, sizeof why);
    else
      st = sl;
  }
  member_free(c, s->gin, &st, deadline);
  member_free(c, s->gout, &st, deadline);
  member_free(c, s->gall, &st, deadline);
  s->gin = s->gout = s->gall = NULL;
  free(s->group_of);
  free(s->grank_of);
  free(s->members);
  free(s);
  return st;
}

/* The one line that says the grouping: "ranks 0,1 share GPU 0000:1b:00.0; ...". */
static void log_grouping(gr_comm *c, const gr__nccl_share *s, const char *keys) {
  char line[480];
  gr__strbuf sb;
  gr__strbuf_init_fixed(&sb, line, sizeof line);
  for (int r = 0; r < c->size && gr__strbuf_len(&sb) < sizeof line - 40; r++) {
    if (s->grank_of[r] != 0) continue; /* r leads its group */
    int n = 0;
    for (int q = r; q < c->size; q++)
      n += s->group_of[q] == s->group_of[r];
    if (n < 2) continue;
    gr__strbuf_appendf(&sb, "%sranks ", gr__strbuf_len(&sb) ? "; " : "");
    int first = 1;
    for (int q = r; q < c->size && gr__strbuf_len(&sb) < sizeof line - 40; q++)
      if (s->group_of[q] == s->group_of[r]) {
        gr__strbuf_appendf(&sb, "%s%d", first ? "" : ",", q);
        first = 0;
      }
    gr__strbuf_appendf(&sb, " share GPU %s", keys + (size_t)r * KEY_LEN + KEY_LEN - BUS_LEN);
  }
  /* a long grouping ends in "..." at a fixed column */
  if (gr__strbuf_len(&sb) >= sizeof line - 40) snprintf(line + sizeof line - 40, 40, "...");
  GR_INFO("collectives on %s: %s; NCCL runs among %d leader(s), 1 leader per GPU (the others "
          "reduce into their leader through host memory)",
          c->id, line, s->nleaders);
}

static gr_status leaders_init(gr_comm *c, gr__nccl_share *s) {
  MPI_Comm lm = MPI_COMM_NULL;
  int rc = MPI_Comm_split(c->mpi, s->grank == 0 ? 0 : MPI_UNDEFINED, c->rank, &lm);
  if (rc != MPI_SUCCESS) return mpi_fail(c, rc, "MPI_Comm_split (leaders)");
  if (lm == MPI_COMM_NULL) return GR_OK;
  if (s->nleaders < 2) { /* one leader: no NCCL step at all */
    MPI_Comm_free(&lm);
    return GR_OK;
  }
  gr_status st = lead_new(c, lm, &s->lead);
  s->pinned = st == GR_OK;
  return st;
}

static gr_status share_build(gr_comm *c, gr__nccl_share *s, const char *keys) {
  int P = c->size, me = c->rank;
  s->group_of = malloc(sizeof(int) * (size_t)P);
  s->grank_of = calloc((size_t)P, sizeof(int));
  int *count = calloc((size_t)P, sizeof(int)), *leader_of = malloc(sizeof(int) * (size_t)P);
  gr_status st = GR_OK;
  if (!s->group_of || !s->grank_of || !count || !leader_of) {
    st = gr__comm_err(c, GR_ERR_NOMEM, "out of memory grouping ranks by GPU on rank %d", me);
    goto out;
  }
  for (int r = 0; r < P; r++) { /* the group's leader: the lowest rank with the same key */
    int l = r;
    for (int q = 0; q < r; q++)
      if (memcmp(keys + (size_t)q * KEY_LEN, keys + (size_t)r * KEY_LEN, KEY_LEN) == 0) {
        l = q;
        break;
      }
    leader_of[r] = l;
    s->grank_of[r] = count[l]++;
    if (l == r)
      s->group_of[r] = s->nleaders++;
    else
      s->group_of[r] = s->group_of[l];
  }
  for (int r = 0; r < P; r++)
    s->gmax = count[r] > s->gmax ? count[r] : s->gmax;
  s->grank = s->grank_of[me];
  s->gsize = count[leader_of[me]];
  s->lrank = s->grank == 0 ? s->group_of[me] : -1;
  s->members = malloc(sizeof(int) * (size_t)s->gsize);
  if (!s->members) {
    st = gr__comm_err(c, GR_ERR_NOMEM, "out of memory grouping ranks by GPU on rank %d", me);
    goto out;
  }
  for (int r = 0, j = 0; r < P; r++)
    if (s->group_of[r] == s->group_of[me]) s->members[j++] = r;
  /* All of c's ranks first (every rank creates it, whatever its group), then this GPU's. */
  MPI_Comm am = MPI_COMM_NULL, gm = MPI_COMM_NULL, gm2 = MPI_COMM_NULL;
  int rc = MPI_Comm_dup(c->mpi, &am);
  if (rc != MPI_SUCCESS) {
    st = mpi_fail(c, rc, "MPI_Comm_dup (all ranks)");
    goto out;
  }
  if ((st = member_new(c, am, "all", ALL_RANKS, &s->gall)) != GR_OK) goto out;
  rc = MPI_Comm_split(c->mpi, s->group_of[me], me, &gm);
  if (rc == MPI_SUCCESS && (rc = MPI_Comm_dup(gm, &gm2)) != MPI_SUCCESS) MPI_Comm_free(&gm);
  if (rc != MPI_SUCCESS) {
    st = mpi_fail(c, rc, "MPI_Comm_split (ranks of one GPU)");
    goto out;
  }
  st = member_new(c, gm, "gpu-in", GPU_RANKS, &s->gin);
  if (st == GR_OK)
    st = member_new(c, gm2, "gpu-out", GPU_RANKS, &s->gout);
  else
    MPI_Comm_free(&gm2);
  if (st == GR_OK) st = leaders_init(c, s);
out:
  free(count);
  free(leader_of);
  return st;
}

gr_status gr__nccl_share_setup(gr_comm *c, double deadline, gr__nccl_share **out) {
  *out = NULL;
  int off = !gr__param_bool(GR_PARAM_NCCL_SHARE);
  size_t P = (size_t)c->size;
  char bus[BUS_LEN], *keys = malloc((P + 1) * KEY_LEN), mine[KEY_LEN];
  int ok = keys != NULL;
  gpu_key(c, mine, bus);
  /* Agree first on whether every rank could take part (memory) and on the switch. */
  int64_t flags[2] = {ok ? 0 : 1, off}, all[2] = {0, 0};
  gr_status st = gr__agree(c, "grouping ranks by GPU", GR__AGREE_MAX, flags, all, 2);
  if (st == GR_OK && all[0])
    st = gr__comm_err(c, GR_ERR_NOMEM, "a rank ran out of memory grouping ranks by GPU");
  if (st != GR_OK || all[1]) { /* GPURUN_NCCL_SHARE=0 on some rank: plain NCCL over all ranks */
    free(keys);
    return st;
  }
  MPI_Request req;
  memcpy(keys + P * KEY_LEN, mine, KEY_LEN); /* read by MPI until the gather completes */
  int rc =
      MPI_Iallgather(keys + P * KEY_LEN, KEY_LEN, MPI_CHAR, keys, KEY_LEN, MPI_CHAR, c->mpi, &req);
  if (rc != MPI_SUCCESS) {
    free(keys);
    return mpi_fail(c, rc, "MPI_Iallgather (GPU ids)");
  }
  st = gr__mpi_wait_owning(c, &req, deadline, keys); /* MPI writes keys until it completes */
  if (st != GR_OK) return st;                        /* keys: the lost list's, or freed */
  int shared = 0;
  for (size_t r = 0; r < P && !shared; r++)
    for (size_t q = r + 1; q < P && !shared; q++)
      shared = memcmp(keys + r * KEY_LEN, keys + q * KEY_LEN, KEY_LEN) == 0;
  if (!shared) {
    free(keys);
    return GR_OK;
  }
  gr__nccl_share *s = calloc(1, sizeof *s);
  if (s) {
    st = share_build(c, s, keys);
  } else {
    st = gr__comm_err(c, GR_ERR_NOMEM, "out of memory grouping ranks by GPU on rank %d", c->rank);
  }
  /* Every rank learns whether every rank got there; the first failing rank is named. */
  int64_t bad = st != GR_OK ? c->rank : -1, anybad = -1;
  gr_status st2 = gr__agree(c, "the ranks' NCCL groups", GR__AGREE_MAX, &bad, &anybad, 1);
  if (st == GR_OK && st2 != GR_OK) st = st2;
  if (st == GR_OK && anybad >= 0)
    st = gr__comm_err(c, GR_ERR_NCCL,
                      "rank %d could not set up NCCL among one leader per GPU (see "
                      "its error)",
                      (int)anybad);
  if (st == GR_OK && c->rank == 0) log_grouping(c, s, keys);
  free(keys);
  if (st != GR_OK) {
    if (s && s->lead) s->lead->ops->abort(s->lead); /* its peers may not have got there */
    return share_free(c, s, st, deadline);
  }
  *out = s;
  return GR_OK;
}

gr_status gr__nccl_share_destroy(gr_comm *c, gr__nccl_share *s, double deadline) {
  if (!s) return GR_OK;
  gr_status st = share_free(c, s, GR_OK, deadline);
  sweep_parked();
  return st;
}

void gr__nccl_share_abort(gr__nccl_share *s) {
  if (!s) return;
  if (s->lead) s->lead->ops->abort(s->lead);
  if (s->gin) s->gin->ops->abort(s->gin);
  if (s->gout) s->gout->ops->abort(s->gout);
  if (s->gall) s->gall->ops->abort(s->gall);
}

/* ---- calls -------------------------------------------------------------------------------- */

/* Host staging buffers. A leader with NCCL puts NCCL work on the callers' streams, and a copy
 * between pageable memory and the device waits for the stream inside cudaMemcpyAsync, where no
 * deadline reaches: its buffers are pinned, so every copy is asynchronous and every wait is a poll
 * the deadline bounds. Other ranks' streams carry none of our NCCL work: plain memory. */
static void *hal(const gr__nccl_share *s, size_t n) {
  void *p = NULL;
  if (!s->pinned) return malloc(n ? n : 1);
  if (cudaMallocHost(&p, n ? n : 1) != cudaSuccess) {
    cudaGetLastError();
    return NULL;
  }
  return p;
}

static void hfree(int pinned, void *p) {
  if (!p) return;
  if (pinned)
    cudaFreeHost(p);
  else
    free(p);
}

/* Host copy of a caller's buffer (device or host), on the call's stream, waited for. */
static gr_status stage(gr_comm *c, void *dst, const void *src, size_t n, cudaStream_t st) {
  if (!n) return GR_OK;
  cudaError_t e = cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, st);
  if (e != cudaSuccess) return cuda_fail(c, e, "cudaMemcpyAsync (staging to host)");
  return stream_wait(c, st, gr__deadline(c->timeout_s));
}

static int is_collective(gr__kind k) { return k != GR__ALLTOALL && k != GR__SEND && k != GR__RECV; }

/* Post one member step: call l on g (the GPU's ranks' communicator) of kind, over send/recv. A
 * failure's sentence names the step and g's detail. */
static gr_status step_post(xcall *x, gr_comm *g, gr__call *l, int *posted, gr__kind kind,
                           const void *send, void *recv, size_t count, int root, const char *what) {
  gr__call *k = x->k;
  memset(l, 0, sizeof *l); /* be_area zero, as a backend's post expects */
  l->kind = kind;
  l->send = send;
  l->recv = recv;
  l->count = count;
  l->dtype = k->dtype;
  l->op = k->op == GR_AVG ? GR_SUM : k->op; /* the leader divides once (leader_finish) */
  l->root = root;
  l->stream = k->stream;
  l->comm = g;
  l->seq = x->no;
  l->flight_slot = -1;
  int done = 0;
  g->err[0] = '\0';
  gr_status st = g->ops->post(l, &done);
  if (st != GR_OK)
    return gr__comm_err(k->comm, st, "the %s step on %s failed posting on rank %d: %s", what, g->id,
                        k->comm->rank, g->err);
  *posted = !done;
  return GR_OK;
}

/* Whether a member step posted by step_post is over (*st its failure, with the sentence). */
static int step_done(xcall *x, gr_comm *g, gr__call *l, int *posted, gr_status *st,
                     const char *what) {
  if (!*posted) return 1;
  int done = 0;
  g->err[0] = '\0';
  gr_status e = g->ops->test(l, &done);
  if (e != GR_OK) { /* a failed call is released by its backend */
    *posted = 0;
    *st = gr__comm_err(x->k->comm, e, "the %s step on %s failed on rank %d: %s", what, g->id,
                       x->k->comm->rank, g->err);
    return 1;
  }
  if (done) *posted = 0;
  return done;
}

static const char IN_WHAT[] = "ranks-to-leader", OUT_WHAT[] = "leader-to-ranks";

/* The step of a call that does not go through the leaders, as its failure's sentence names it. */
static const char *p2p_what(gr__kind kind) {
  return kind == GR__ALLTOALL ? "all-to-all (host copies)"
         : kind == GR__SEND   ? "send (host copy)"
                              : "receive (host copy)";
}

/* The "in" step: a call on the GPU's ranks' "in" communicator (reduce into the leader, the root's
 * broadcast to its group, an allgather for the leader's gather, a barrier); all-to-all, send and
 * receive are one call each on the communicator of all ranks, on host copies (they do not go
 * through the leaders). */
static gr_status post_in(gr__nccl_share *s, xcall *x) {
  gr__call *k = x->k;
  gr_comm *c = k->comm, *g = s->gin;
  size_t n = k->count, es = gr__dtype_size(k->dtype), P = (size_t)c->size;
  int lead = s->grank == 0;
  switch (k->kind) {
  case GR__ALLREDUCE:
  case GR__REDUCE:
  case GR__REDUCE_SCATTER: {
    size_t m = k->kind == GR__REDUCE_SCATTER ? n * P : n;
    if (lead && !(x->hwork = hal(s, m * es))) return GR_ERR_NOMEM;
    return step_post(x, g, &x->ic, &x->ic_posted, GR__REDUCE, x->hs, x->hwork, m, 0, IN_WHAT);
  }
  case GR__BROADCAST:
    if (!x->hwork && !(x->hwork = hal(s, n * es))) return GR_ERR_NOMEM;
    if (!x->in_root_group) return GR_OK;
    return step_post(x, g, &x->ic, &x->ic_posted, GR__BROADCAST, x->hwork, x->hwork, n,
                     s->grank_of[k->root], IN_WHAT);
  case GR__ALLGATHER:
    /* The MPI backend has no gather: an allgather, so every member receives the group's blocks
     * (the leader's buffer is padded to the largest group for the leaders' step). */
    if (!(x->hwork = hal(s, (size_t)(lead ? s->gmax : s->gsize) * n * es))) return GR_ERR_NOMEM;
    return step_post(x, g, &x->ic, &x->ic_posted, GR__ALLGATHER, x->hs, x->hwork, n, -1, IN_WHAT);
  case GR__BARRIER:
    return step_post(x, g, &x->ic, &x->ic_posted, GR__BARRIER, NULL, NULL, 0, -1, IN_WHAT);
  case GR__ALLTOALL:
    if (!(x->hres = hal(s, n * es * P))) return GR_ERR_NOMEM;
    return step_post(x, s->gall, &x->ic, &x->ic_posted, GR__ALLTOALL, x->hs, x->hres, n, -1,
                     p2p_what(k->kind));
  case GR__SEND:
    return step_post(x, s->gall, &x->ic, &x->ic_posted, GR__SEND, x->hs, NULL, n, k->root,
                     p2p_what(k->kind));
  case GR__RECV:
    if (!(x->hres = hal(s, n * es))) return GR_ERR_NOMEM;
    return step_post(x, s->gall, &x->ic, &x->ic_posted, GR__RECV, NULL, x->hres, n, k->root,
                     p2p_what(k->kind));
  default:
    return GR_OK;
  }
}

/* The "out" step: a broadcast from the leader on the "out" communicator (a reduce-scatter's
 * scatter is a broadcast of the group's blocks: the MPI backend has no scatter), or a barrier. */
static gr_status post_out(gr__nccl_share *s, xcall *x) {
  gr__call *k = x->k;
  gr_comm *c = k->comm, *g = s->gout;
  size_t n = k->count, es = gr__dtype_size(k->dtype), P = (size_t)c->size;
  size_t m = n; /* elements broadcast */
  int lead = s->grank == 0;
  switch (k->kind) {
  case GR__ALLREDUCE:
  case GR__REDUCE:
  case GR__BROADCAST:
    if (k->kind == GR__REDUCE && !x->in_root_group) return GR_OK;
    if (k->kind == GR__BROADCAST && x->in_root_group) return GR_OK;
    break;
  case GR__ALLGATHER:
    m = n * P;
    break;
  case GR__REDUCE_SCATTER:
    m = n * (size_t)s->gsize;
    break;
  case GR__BARRIER:
    return step_post(x, g, &x->oc, &x->oc_posted, GR__BARRIER, NULL, NULL, 0, -1, OUT_WHAT);
  default:
    return GR_OK;
  }
  if (!lead && !(x->hres = hal(s, m * es))) return GR_ERR_NOMEM;
  return step_post(x, g, &x->oc, &x->oc_posted, GR__BROADCAST, x->hres, x->hres, m, 0, OUT_WHAT);
}

/* The leaders' call failed while doing (posting, testing): its sentence, on c. */
static gr_status lead_fail(gr_comm *c, const gr__nccl_share *s, gr_status st, const char *doing) {
  return gr__comm_err(c, st,
                      "the leaders' step on %s (NCCL among one leader per GPU) failed %s on rank "
                      "%d: %s",
                      s->lead->id, doing, c->rank, s->lead->err);
}

/* The leaders' step: a call on the leaders' communicator (its row stages the host buffers through
 * the device, runs NCCL and copies back) on what this leader gathered. AVG is summed there and
 * divided once by the leader (leader_finish), since the leaders' call averages over the leaders. */
static gr_status post_lead(gr__nccl_share *s, xcall *x) {
  gr__call *k = x->k, *l = &x->lc;
  gr_comm *c = k->comm;
  size_t n = k->count, es = gr__dtype_size(k->dtype), P = (size_t)c->size;
  memset(l, 0, sizeof *l); /* be_area zero, as a backend's post expects */
  l->kind = k->kind;
  l->send = l->recv = x->hwork;
  l->count = n;
  l->dtype = k->dtype;
  l->op = k->op == GR_AVG ? GR_SUM : k->op;
  l->root = k->root >= 0 && k->kind != GR__SEND && k->kind != GR__RECV ? s->group_of[k->root] : -1;
  l->stream = k->stream;
  l->comm = s->lead;
  l->seq = x->no;
  l->flight_slot = -1;
  switch (k->kind) {
  case GR__REDUCE_SCATTER: /* every rank's blocks summed; the leader scatters its group's */
    l->kind = GR__ALLREDUCE;
    l->count = n * P;
    break;
  case GR__ALLGATHER: /* each leader's gathered block, padded to the largest group */
    l->count = (size_t)s->gmax * n;
    if (!(x->hall = hal(s, l->count * es * (size_t)s->nleaders))) return GR_ERR_NOMEM;
    l->recv = x->hall;
    break;
  case GR__BARRIER:
    l->send = l->recv = NULL;
    l->count = 0;
    break;
  default: /* allreduce, reduce, broadcast: in place in the leader's work buffer */
    break;
  }
  int done = 0;
  s->lead->err[0] = '\0';
  gr_status st = s->lead->ops->post(l, &done);
  if (st != GR_OK) return lead_fail(c, s, st, "posting");
  x->lc_posted = !done;
  return GR_OK;
}

/* The leader's host-side work between NCCL and "out": AVG's division, the allgather's order. */
static gr_status leader_finish(gr__nccl_share *s, xcall *x) {
  gr__call *k = x->k;
  gr_comm *c = k->comm;
  size_t n = k->count, es = gr__dtype_size(k->dtype), P = (size_t)c->size;
  int avg = k->op == GR_AVG;
  switch (k->kind) {
  case GR__ALLREDUCE:
    if (avg) gr__avg_divide(k->dtype, x->hwork, n, c->size);
    x->hres = x->hwork;
    break;
  case GR__REDUCE:
    if (x->in_root_group && avg) gr__avg_divide(k->dtype, x->hwork, n, c->size);
    x->hres = x->hwork;
    break;
  case GR__BROADCAST:
    x->hres = x->hwork;
    break;
  case GR__ALLGATHER: {
    /* With one leader the gather is the result; otherwise hall holds, per leader, gmax blocks. */
    const char *src = s->nleaders > 1 ? x->hall : x->hwork;
    if (!(x->hres = hal(s, n * es * P))) return GR_ERR_NOMEM;
    for (size_t r = 0; r < P; r++)
      memcpy((char *)x->hres + r * n * es,
             src + ((size_t)s->group_of[r] * (size_t)s->gmax + (size_t)s->grank_of[r]) * n * es,
             n * es);
    break;
  }
  case GR__REDUCE_SCATTER:
    /* the blocks of this group's ranks, in group order, for the scatter (mine first) */
    if (avg) gr__avg_divide(k->dtype, x->hwork, n * P, c->size);
    if (!(x->hres = hal(s, n * es * (size_t)s->gsize))) return GR_ERR_NOMEM;
    for (int j = 0; j < s->gsize; j++)
      memcpy((char *)x->hres + (size_t)j * n * es,
             (char *)x->hwork + (size_t)s->members[j] * n * es, n * es);
    break;
  default:
    break;
  }
  return GR_OK;
}

static void xfree_bufs(xcall *x) {
  if (x->hres != x->hwork && x->hres != x->hs) hfree(x->pinned, x->hres);
  if (x->hwork != x->hs) hfree(x->pinned, x->hwork);
  hfree(x->pinned, x->hs);
  hfree(x->pinned, x->hall);
  x->hs = x->hwork = x->hres = x->hall = NULL;
}

/* Move one call as far as it goes without waiting. */
static gr_status advance(gr__nccl_share *s, xcall *x) {
  gr__call *k = x->k;
  gr_comm *c = k->comm;
  cudaStream_t st = (cudaStream_t)k->stream;
  gr_status e = GR_OK;
  int lead = s->grank == 0;
  for (;;) {
    switch (x->phase) {
    case P_IN:
      if (!step_done(x, x->no ? s->gin : s->gall, &x->ic, &x->ic_posted, &e,
                     x->no ? IN_WHAT : p2p_what(k->kind)))
        return GR_OK;
      if (e != GR_OK) return e;
      x->phase = x->no && lead ? P_NCCL : P_OUT_WAIT;
      break;
    case P_NCCL:
      if (x->no != s->nccl_turn + 1) return GR_OK; /* NCCL sees every leader's calls in one order */
      if (s->lead) GR_CHECK(post_lead(s, x));
      s->nccl_turn++;
      x->phase = P_NCCL_WAIT;
      break;
    case P_NCCL_WAIT:
      if (x->lc_posted) {
        int done = 0;
        s->lead->err[0] = '\0';
        gr_status lt = s->lead->ops->test(&x->lc, &done);
        if (lt != GR_OK) { /* a failed call is released by the leaders' backend */
          x->lc_posted = 0;
          return lead_fail(c, s, lt, "testing");
        }
        if (!done) return GR_OK;
        x->lc_posted = 0;
      }
      GR_CHECK(leader_finish(s, x));
      x->phase = P_OUT;
      break;
    case P_OUT:
      if (x->no != s->out_turn + 1) return GR_OK; /* the members posted "out" in call order */
      GR_CHECK(post_out(s, x));
      s->out_turn++;
      x->phase = P_OUT_WAIT;
      break;
    case P_OUT_WAIT: {
      if (!step_done(x, s->gout, &x->oc, &x->oc_posted, &e, OUT_WHAT)) return GR_OK;
      if (e != GR_OK) return e;
      size_t sb, rb;
      gr__call_sides(k, &sb, &rb);
      const char *src = x->hres;
      if (k->kind == GR__BROADCAST && x->in_root_group) src = x->hwork;
      if (k->kind == GR__REDUCE_SCATTER) src += (size_t)s->grank * rb; /* my block of the group's */
      if (rb) {
        cudaError_t q = cudaMemcpyAsync(k->recv, src, rb, cudaMemcpyDefault, st);
        if (q != cudaSuccess) return cuda_fail(c, q, "cudaMemcpyAsync (result to the caller)");
      }
      x->phase = P_COPY;
      break;
    }
    case P_COPY: {
      cudaError_t q = cudaStreamQuery(st);
      if (q == cudaErrorNotReady) return GR_OK;
      if (q != cudaSuccess) return cuda_fail(c, q, "cudaStreamQuery");
      xfree_bufs(x);
      x->phase = P_DONE;
      break;
    }
    default:
      return GR_OK;
    }
  }
}

gr_status gr__nccl_share_post(gr__nccl_share *s, gr__call *k, int *done) {
  gr_comm *c = k->comm;
  size_t n = k->count, P = (size_t)c->size;
  *done = 0;
  if (n > (size_t)INT_MAX / P)
    return gr__comm_err(c, GR_ERR_UNSUPPORTED,
                        "count %zu x %zu ranks is too large for ranks that "
                        "share a GPU on rank %d (they go through MPI on host copies: at most %d "
                        "elements per call)",
                        n, P, c->rank, INT_MAX);
  xcall *x = calloc(1, sizeof *x);
  if (!x) return gr__comm_err(c, GR_ERR_NOMEM, "out of memory on rank %d", c->rank);
  x->k = k;
  x->pinned = s->pinned;
  x->in_root_group = (k->kind == GR__BROADCAST || k->kind == GR__REDUCE) &&
                     s->group_of[k->root] == s->group_of[c->rank];
  if (is_collective(k->kind)) x->no = ++s->posted;
  size_t sb, rb;
  gr__call_sides(k, &sb, &rb);
  gr_status st = GR_OK;
  if (sb) { /* the root of a broadcast stages straight into the buffer its group broadcasts */
    void *dst = hal(s, sb);
    if (!dst)
      st = GR_ERR_NOMEM;
    else if (k->kind == GR__BROADCAST)
      x->hwork = dst;
    else
      x->hs = dst;
    if (st == GR_OK) st = stage(c, dst, k->send, sb, (cudaStream_t)k->stream);
  }
  if (st == GR_OK) st = post_in(s, x);
  if (st == GR_OK && x->no && s->grank != 0) { /* a member: its "out" step now (see the top) */
    st = post_out(s, x);
    x->phase = P_IN;
  }
  if (st != GR_OK) {
    if (st == GR_ERR_NOMEM && !c->err[0])
      gr__comm_err(c, st, "out of memory staging a call on rank %d", c->rank);
    /* Requests already posted keep their buffers until they complete. */
    if (!x->ic_posted && !x->oc_posted) {
      xfree_bufs(x);
      free(x);
    } else {
      park(s, x);
    }
    return st;
  }
  *slot(k) = x;
  if (s->tail)
    s->tail->next = x;
  else
    s->head = x;
  s->tail = x;
  return GR_OK;
}

static void unlink_call(gr__nccl_share *s, xcall *x) {
  xcall **p = &s->head, *prev = NULL;
  while (*p && *p != x)
    prev = *p, p = &(*p)->next;
  if (!*p) return;
  *p = x->next;
  if (s->tail == x) s->tail = prev;
}

gr_status gr__nccl_share_test(gr__nccl_share *s, gr__call *k, int *done) {
  xcall *me = *slot(k);
  *done = 0;
  if (!me) return gr__comm_err(k->comm, GR_ERR_INTERNAL, "a shared-GPU call without its state");
  /* Older calls first: this call may wait for their turn on the leader. */
  for (xcall *x = s->head; x; x = x->next) {
    if (x->phase != P_DONE && x->st == GR_OK) x->st = advance(s, x);
    if (x == me) break;
  }
  if (me->st != GR_OK) { /* the front end drops a failed call without forget: it leaves now */
    gr_status st = me->st;
    unlink_call(s, me);
    *slot(k) = NULL;
    park(s, me);
    return st;
  }
  if (me->phase != P_DONE) return GR_OK;
  unlink_call(s, me);
  free(me);
  *slot(k) = NULL;
  *done = 1;
  return GR_OK;
}

/* Calls given up (timeout, abort) whose buffers MPI or a stream may still write into: a step on
 * the MPI backend (the members', or all-to-all, send, receive) whose forget said MPI may still
 * write its buffers, and a copy or an NCCL call may be on the stream. They are parked here
 * (process-wide, reachable) and freed by a later sweep once no copy or NCCL call of theirs can be
 * in flight; those whose forget said busy (their backend's lost list holds the request, not these
 * buffers) stay until exit. */
static xcall *parked;
static pthread_mutex_t parked_lock = PTHREAD_MUTEX_INITIALIZER;

static void sweep_parked(void) {
  if (gr__mpi_gone()) return;
  pthread_mutex_lock(&parked_lock);
  for (xcall **p = &parked; *p;) {
    xcall *x = *p;
    if (!x->ic_busy && !x->oc_busy && (x->phase != P_NCCL_WAIT || x->lc_quiet) &&
        x->phase != P_COPY) {
      *p = x->next;
      xfree_bufs(x);
      free(x);
    } else {
      p = &x->next;
    }
  }
  pthread_mutex_unlock(&parked_lock);
}

static void park(gr__nccl_share *s, xcall *x) {
  if (x->lc_posted) { /* the leaders' row releases what it can (its stream may still run) */
    x->lc_quiet = s->lead->ops->forget(&x->lc);
    x->lc_posted = 0;
  }
  /* The steps on the MPI backend (the members', all-to-all, send, receive: ic's communicator is
   * s->gin or s->gall): their backend hands what MPI may still write to its lost list and says
   * whether x's buffers are among it (they stay here until the sweep after the end of time). */
  if (x->ic_posted) x->ic_busy = !x->ic.comm->ops->forget(&x->ic), x->ic_posted = 0;
  if (x->oc_posted) x->oc_busy = !s->gout->ops->forget(&x->oc), x->oc_posted = 0;
  x->k = NULL;
  pthread_mutex_lock(&parked_lock);
  x->next = parked;
  parked = x;
  pthread_mutex_unlock(&parked_lock);
  sweep_parked();
}

int gr__nccl_share_forget(gr__nccl_share *s, gr__call *k) {
  xcall *x = *slot(k);
  if (!x) return 1;
  int quiet = x->phase != P_COPY; /* only that copy writes into k->recv (staging is waited for) */
  unlink_call(s, x);
  *slot(k) = NULL;
  park(s, x);
  return quiet;
}

gr_status gr__nccl_share_synchronize(gr__nccl_share *s, gr_comm *c, gr_stream stream,
                                     double deadline) {
  if (!s->lead) return stream_wait(c, (cudaStream_t)stream, deadline);
  s->lead->err[0] = '\0';
  gr_status st = s->lead->ops->synchronize(s->lead, stream, deadline);
  if (st != GR_OK)
    return gr__comm_err(c, st, "the leaders' communicator %s on rank %d: %s", s->lead->id, c->rank,
                        s->lead->err);
  return GR_OK;
}
