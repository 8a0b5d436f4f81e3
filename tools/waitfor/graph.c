/* The wait-for graph of gr_waitfor.h: each waiting rank's targets (peers, or the members behind
 * it in the collective sequence), the chains along the first target, the blockers along all. */
#include "gr_waitfor.h"

#include "gr_array.h"
#include "gr_error.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct gr__wf {
  int n;
  int *rank;                     /* per row */
  unsigned char *have, *waiting; /* per row */
  int *toff, *tcnt;              /* per row: its targets, pool[toff .. toff + tcnt) */
  int *end;                      /* per row: index into ends, -1 when it does not wait */
  int *call;                     /* per row: its collective call's index, -1 none */
  int ncalls;                    /* the distinct collective calls waited in */
  gr_array pool;                 /* int: every target list, a collective's once per call */
  gr_array ends;                 /* gr__wf_end */
};

int gr__wf_row_of(const gr__wf *w, int rank) {
  int lo = 0, hi = w->n - 1;
  while (lo <= hi) {
    int mid = lo + (hi - lo) / 2;
    if (w->rank[mid] == rank) return mid;
    if (w->rank[mid] < rank)
      lo = mid + 1;
    else
      hi = mid - 1;
  }
  return -1;
}

int gr__wf_waiting(const gr__wf *w, int row) { return row >= 0 && row < w->n && w->waiting[row]; }

const int *gr__wf_targets(const gr__wf *w, int row, int *n) {
  *n = row >= 0 && row < w->n ? w->tcnt[row] : 0;
  return *n ? &GR_ARRAY_AT(&w->pool, int, w->toff[row]) : NULL;
}

int gr__wf_end_of(const gr__wf *w, int row) { return row >= 0 && row < w->n ? w->end[row] : -1; }

const gr__wf_end *gr__wf_ends(const gr__wf *w, int *n) {
  *n = (int)w->ends.count;
  return w->ends.data;
}

void gr__wf_free(gr__wf *w) {
  if (!w) return;
  free(w->rank);
  free(w->have);
  free(w->waiting);
  free(w->toff);
  free(w->tcnt);
  free(w->end);
  free(w->call);
  gr__array_free(&w->pool);
  gr__array_free(&w->ends);
  free(w);
}

/* ---- targets ---- */

typedef struct {
  int comm, rank; /* sort keys */
  double entered;
} member;

static int cmp_member(const void *a, const void *b) {
  const member *x = a, *y = b;
  if (x->comm != y->comm) return (x->comm > y->comm) - (x->comm < y->comm);
  return (x->rank > y->rank) - (x->rank < y->rank);
}

/* A collective waiter; sorted by communicator and position, one target list per call. */
typedef struct {
  int comm, row;
  double pos;
} waiter;

static int cmp_waiter(const void *a, const void *b) {
  const waiter *x = a, *y = b;
  if (x->comm != y->comm) return (x->comm > y->comm) - (x->comm < y->comm);
  return (x->pos > y->pos) - (x->pos < y->pos);
}

static gr_status push(gr__wf *w, int r) { return gr__array_push(&w->pool, &r); }

/* The members of comm behind position pos, then (world) the ranks below its size without a line
 * for it that did not exit, or (another communicator) one unnamed member when some left none. */
static gr_status laggards(gr__wf *w, const gr__wf_input *in, const member *m, int nm, int comm,
                          double pos) {
  for (int k = 0; k < nm; k++)
    if (m[k].entered < pos && push(w, m[k].rank) != GR_OK) return GR_ERR_NOMEM;
  const gr__wf_comm *c = &in->comms[comm];
  if (c->world) {
    int k = 0, row = 0;
    for (int r = 0; r < c->size; r++) {
      while (k < nm && m[k].rank < r)
        k++;
      if (k < nm && m[k].rank == r) continue;
      while (row < w->n && w->rank[row] < r)
        row++;
      if (row < w->n && w->rank[row] == r && in->ranks[row].exited) continue;
      if (push(w, r) != GR_OK) return GR_ERR_NOMEM;
    }
  } else if (c->size > nm && push(w, -1) != GR_OK) {
    return GR_ERR_NOMEM;
  }
  return GR_OK;
}

static gr_status targets(gr__wf *w, const gr__wf_input *in) {
  gr_status rc = GR_OK;
  int nw = 0;
  waiter *waiters = malloc(((size_t)w->n + 1) * sizeof *waiters);
  member *m = malloc(((size_t)in->nmembers + 1) * sizeof *m);
  int *mofs = calloc((size_t)in->ncomms + 1, sizeof *mofs);
  if (!waiters || !m || !mofs) {
    rc = GR_ERR_NOMEM;
    goto out;
  }
  /* The lines sorted by communicator and rank; a pair given twice counts once, its furthest. */
  for (int k = 0; k < in->nmembers; k++) {
    double e = in->members[k].entered;
    m[k] = (member){in->members[k].comm, w->rank[in->members[k].row], isnan(e) ? -1 : e};
  }
  if (in->nmembers > 1) qsort(m, (size_t)in->nmembers, sizeof *m, cmp_member);
  int nm = 0;
  for (int k = 0; k < in->nmembers; k++) {
    if (nm && m[nm - 1].comm == m[k].comm && m[nm - 1].rank == m[k].rank) {
      if (m[k].entered > m[nm - 1].entered) m[nm - 1].entered = m[k].entered;
      continue;
    }
    m[nm++] = m[k];
  }
  for (int k = 0; k < nm; k++)
    mofs[m[k].comm + 1]++;
  for (int c = 0; c < in->ncomms; c++)
    mofs[c + 1] += mofs[c];

  for (int i = 0; i < w->n; i++) {
    const gr__wf_rank *r = &in->ranks[i];
    if (!w->waiting[i]) continue;
    if (!r->p2p) {
      waiters[nw++] = (waiter){r->comm, i, isnan(r->pos) ? -INFINITY : r->pos}; /* behind none */
      continue;
    }
    w->toff[i] = (int)w->pool.count;
    for (int k = 0; k < r->npeers; k++)
      if (push(w, r->peers[k] >= 0 ? r->peers[k] : -1) != GR_OK) {
        rc = GR_ERR_NOMEM;
        goto out;
      }
    w->tcnt[i] = r->npeers;
    if (w->pool.count > INT_MAX) {
      rc = GR_ERR_NOMEM;
      goto out;
    }
  }
  if (nw > 1) qsort(waiters, (size_t)nw, sizeof *waiters, cmp_waiter);
  for (int a = 0; a < nw;) {
    size_t off = w->pool.count;
    int c = waiters[a].comm, b = a + 1;
    rc = laggards(w, in, m + mofs[c], mofs[c + 1] - mofs[c], c, waiters[a].pos);
    if (rc == GR_OK && w->pool.count > INT_MAX) rc = GR_ERR_NOMEM; /* the offsets are ints */
    if (rc != GR_OK) goto out;
    while (b < nw && waiters[b].comm == c && waiters[b].pos == waiters[a].pos)
      b++;
    for (int k = a; k < b; k++) {
      w->toff[waiters[k].row] = (int)off;
      w->tcnt[waiters[k].row] = (int)(w->pool.count - off);
      w->call[waiters[k].row] = w->ncalls;
    }
    w->ncalls++;
    a = b;
  }
out:
  free(waiters);
  free(m);
  free(mofs);
  return rc;
}

/* ---- chains: the first target at each step, ends memoised, so linear in the rows ---- */

static gr_status chains(gr__wf *w) {
  gr_status rc = GR_OK;
  int *path = malloc(((size_t)w->n + 1) * sizeof *path);
  unsigned char *onpath = calloc((size_t)w->n + 1, 1);
  if (!path || !onpath) {
    rc = GR_ERR_NOMEM;
    goto out;
  }
  for (int i = 0; i < w->n; i++) {
    if (!w->waiting[i] || w->end[i] >= 0) continue;
    int np = 0, cur = i, end = -1;
    gr__wf_end e = {-1, 0};
    for (;;) {
      if (onpath[cur]) {
        e = (gr__wf_end){w->rank[cur], GR__WF_END_CYCLE};
        break;
      }
      if (w->end[cur] >= 0) {
        end = w->end[cur];
        break;
      }
      onpath[cur] = 1;
      path[np++] = cur;
      if (!w->waiting[cur]) {
        e = (gr__wf_end){w->rank[cur], GR__WF_END_NOT_WAITING};
        break;
      }
      if (!w->tcnt[cur]) {
        e = (gr__wf_end){w->rank[cur], GR__WF_END_ALL_IN};
        break;
      }
      int t = GR_ARRAY_AT(&w->pool, int, w->toff[cur]);
      if (t < 0) {
        e = (gr__wf_end){w->rank[cur], GR__WF_END_UNNAMED};
        break;
      }
      int next = gr__wf_row_of(w, t);
      if (next < 0 || !w->have[next]) {
        e = (gr__wf_end){t, GR__WF_END_NO_DATA};
        break;
      }
      cur = next;
    }
    if (end < 0) {
      int nends = (int)w->ends.count;
      const gr__wf_end *ends = w->ends.data;
      for (end = 0; end < nends; end++)
        if (ends[end].rank == e.rank && ends[end].kind == e.kind) break;
      if (end == nends && gr__array_push(&w->ends, &e) != GR_OK) {
        rc = GR_ERR_NOMEM;
        goto out;
      }
    }
    for (int k = 0; k < np; k++) {
      w->end[path[k]] = end;
      onpath[path[k]] = 0;
    }
  }
out:
  free(path);
  free(onpath);
  return rc;
}

gr_status gr__wf_analyse(const gr__wf_input *in, gr__wf **out) {
  *out = NULL;
  if (in->nranks < 0 || in->ncomms < 0 || in->nmembers < 0 || (in->nranks && !in->ranks) ||
      (in->ncomms && !in->comms) || (in->nmembers && !in->members))
    return gr__fail_msg(GR_ERR_INVALID, "wait-for analysis: a negative count or a missing array");
  for (int i = 0; i < in->nranks; i++) {
    const gr__wf_rank *r = &in->ranks[i];
    if (r->rank < 0 || (i && r->rank <= in->ranks[i - 1].rank))
      return gr__fail_msg(GR_ERR_INVALID,
                          "wait-for analysis: row %d (rank %d) is not in rank order or negative", i,
                          r->rank);
    if (r->comm < -1 || r->comm >= in->ncomms || r->npeers < 0 || (r->npeers && !r->peers))
      return gr__fail_msg(GR_ERR_INVALID,
                          "wait-for analysis: rank %d names communicator %d of %d, or bad peers",
                          r->rank, r->comm, in->ncomms);
  }
  for (int k = 0; k < in->nmembers; k++) {
    const gr__wf_member *m = &in->members[k];
    if (m->row < 0 || m->row >= in->nranks || m->comm < 0 || m->comm >= in->ncomms)
      return gr__fail_msg(
          GR_ERR_INVALID,
          "wait-for analysis: line %d names row %d or communicator %d, out of range", k, m->row,
          m->comm);
  }
  gr__wf *w = calloc(1, sizeof *w);
  if (!w) return gr__fail_msg(GR_ERR_NOMEM, "out of memory for the wait-for analysis");
  size_t n = (size_t)in->nranks + 1;
  w->n = in->nranks;
  gr__array_init(&w->pool, sizeof(int));
  gr__array_init(&w->ends, sizeof(gr__wf_end));
  w->rank = malloc(n * sizeof *w->rank);
  w->have = calloc(n, 1);
  w->waiting = calloc(n, 1);
  w->toff = calloc(n, sizeof *w->toff);
  w->tcnt = calloc(n, sizeof *w->tcnt);
  w->end = malloc(n * sizeof *w->end);
  w->call = malloc(n * sizeof *w->call);
  if (!w->rank || !w->have || !w->waiting || !w->toff || !w->tcnt || !w->end || !w->call) {
    gr__wf_free(w);
    return gr__fail_msg(GR_ERR_NOMEM, "out of memory for the wait-for analysis");
  }
  for (int i = 0; i < w->n; i++) {
    w->rank[i] = in->ranks[i].rank;
    w->have[i] = in->ranks[i].have != 0;
    w->waiting[i] = in->ranks[i].have && in->ranks[i].comm >= 0; /* no data: in no known call */
    w->end[i] = -1;
    w->call[i] = -1;
  }
  if (targets(w, in) != GR_OK || chains(w) != GR_OK) {
    gr__wf_free(w);
    return gr__fail_msg(GR_ERR_NOMEM, "out of memory for the wait-for analysis");
  }
  *out = w;
  return GR_OK;
}

/* ---- blockers: every target followed ---- */

/* The graph the blockers walk: the rows (nodes 0 .. n-1), then one node per collective call
 * (n + call), so that a call's waiters share its edges to the members behind instead of each
 * repeating them: a row in a collective has one edge, to its call. A row that waits for nobody
 * has none. */
/* Edge k of node u (whose targets start at uoff in the pool): the node it leads to, -1 for a rank
 * without a row or a member no data names. */
static int edge(const gr__wf *w, int u, int uoff, int k) {
  if (u < w->n && w->call[u] >= 0) return w->n + w->call[u];
  int t = GR_ARRAY_AT(&w->pool, int, uoff + k);
  return t >= 0 ? gr__wf_row_of(w, t) : -1;
}

int gr__wf_blockers(const gr__wf *w, const unsigned char *start, unsigned char *block) {
  int n = w->n, nn = w->n + w->ncalls, nblock = 0;
  if (n) memset(block, 0, (size_t)n);
  size_t sz = (size_t)nn + 1;
  /* per node: its edges (count, offset into the pool), reached, and Tarjan's index, lowlink and
   * stack flag; the queue, the component stack and the walk's frames (node, next edge) */
  int *cnt = malloc(sz * sizeof *cnt), *off = malloc(sz * sizeof *off);
  int *queue = malloc(sz * sizeof *queue), *idx = malloc(sz * sizeof *idx);
  int *low = malloc(sz * sizeof *low), *stk = malloc(sz * sizeof *stk);
  int *frow = malloc(sz * sizeof *frow), *fnext = malloc(sz * sizeof *fnext);
  unsigned char *reached = calloc(sz, 1), *onstk = calloc(sz, 1);
  if (!cnt || !off || !queue || !idx || !low || !stk || !frow || !fnext || !reached || !onstk) {
    nblock = -1;
    goto out;
  }
  for (int u = 0; u < nn; u++) {
    cnt[u] = 0;
    off[u] = 0;
    idx[u] = -1;
  }
  for (int u = 0; u < n; u++) {
    if (!w->waiting[u] || !w->tcnt[u]) continue;
    if (w->call[u] >= 0) {
      cnt[u] = 1;
      cnt[n + w->call[u]] = w->tcnt[u];
      off[n + w->call[u]] = w->toff[u];
    } else {
      cnt[u] = w->tcnt[u];
      off[u] = w->toff[u];
    }
  }
  int qh = 0, qt = 0;
  for (int i = 0; i < n; i++)
    if (start[i]) {
      reached[i] = 1;
      queue[qt++] = i;
    }
  while (qh < qt) {
    int u = queue[qh++];
    for (int k = 0; k < cnt[u]; k++) {
      int v = edge(w, u, off[u], k);
      if (v >= 0 && !reached[v]) {
        reached[v] = 1;
        queue[qt++] = v;
      }
    }
  }
  /* The ends: reached rows that wait for nobody, but for the starting rows themselves. */
  for (int i = 0; i < n; i++)
    if (reached[i] && !start[i] && !cnt[i]) {
      block[i] = GR__WF_BLOCKS;
      nblock++;
    }
  /* The deadlocks: the cycles among the reached nodes with edges (Tarjan, iteratively). */
  int counter = 0, sp = 0;
  for (int root = 0; root < nn; root++) {
    if (!reached[root] || !cnt[root] || idx[root] >= 0) continue;
    int fp = 0;
    frow[fp] = root;
    fnext[fp++] = 0;
    idx[root] = low[root] = counter++;
    stk[sp++] = root;
    onstk[root] = 1;
    while (fp > 0) {
      int u = frow[fp - 1];
      if (fnext[fp - 1] < cnt[u]) {
        int v = edge(w, u, off[u], fnext[fp - 1]++);
        if (v < 0 || !cnt[v]) continue; /* an end: on no cycle */
        if (idx[v] < 0) {
          idx[v] = low[v] = counter++;
          stk[sp++] = v;
          onstk[v] = 1;
          frow[fp] = v;
          fnext[fp++] = 0;
        } else if (onstk[v] && idx[v] < low[u]) {
          low[u] = idx[v];
        }
        continue;
      }
      fp--;
      if (fp > 0 && low[u] < low[frow[fp - 1]]) low[frow[fp - 1]] = low[u];
      if (low[u] != idx[u]) continue;
      /* u roots a component: a cycle when it has two nodes or more (a row in a collective that
       * waits for itself makes two, with its call), or a row that waits for itself. Every wait
       * is for all of its targets (a collective needs every member, a group of sends and
       * receives every peer), so any cycle is a deadlock, whatever else its rows wait for. */
      int first = sp;
      do
        onstk[stk[--first]] = 0;
      while (stk[first] != u);
      int cycle = sp - first > 1;
      for (int k = 0; !cycle && k < cnt[u]; k++)
        cycle = edge(w, u, off[u], k) == u;
      for (int s = first; cycle && s < sp; s++) {
        if (stk[s] >= n) continue; /* a call, not a rank */
        if (!block[stk[s]]) nblock++;
        block[stk[s]] = GR__WF_DEADLOCK;
      }
      sp = first;
    }
  }
out:
  free(cnt);
  free(off);
  free(queue);
  free(idx);
  free(low);
  free(stk);
  free(frow);
  free(fnext);
  free(reached);
  free(onstk);
  return nblock;
}
