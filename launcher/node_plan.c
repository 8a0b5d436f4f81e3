/* The node-wide plan: topology + local size + options -> one row per local rank. Pure and
 * deterministic (same input, same plan on every rank), so each rank computes it and takes its row.
 *
 * 1. GPU sets: ranks spread over GPUs (ranks per GPU differ by at most 1); with fewer ranks than
 *    GPUs, each rank gets a set from one locality domain, grown greedily by the weakest link.
 * 2. Cores: the cores of each GPU's locality domain are split among the ranks homed there, in
 *    contiguous blocks; ranks that do not fit borrow cores no GPU domain uses, then spare ones.
 * 3. NUMA: the nodes of the rank's cores. 4. NIC: nearest, balanced among equally near ones. */
#include "gr_launcher.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  hwloc_obj_t obj;
  hwloc_bitmap_t cpuset;
  int *cores; /* indexes into the node's core list */
  int ncores;
  int nranks;
  int first_core;
} domain;

typedef struct {
  const gr__node *n;
  int N, G, C;
  hwloc_obj_t *core; /* allowed cores (or PUs when the topology has no cores), logical order */
  int *core_dom;     /* domain of each core, -1: none */
  domain *dom;
  int ndom;
  int *gpu_dom;  /* domain of each GPU */
  int *rank_set; /* GPU set of each rank */
  int nsets, k;
  int *set_gpus;    /* nsets x k */
  int *rank_bucket; /* domain index, or ndom for the free pool */
  gr__node_plan *p;
} ctx;

static void warn(gr__node_plan *p, const char *fmt, ...) GR_PRINTF(2, 3);
static void warn(gr__node_plan *p, const char *fmt, ...) {
  if (p->nwarn >= GR__MAX_WARN) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(p->warn[p->nwarn++], sizeof p->warn[0], fmt, ap);
  va_end(ap);
}

static double link_bw(const gr__node *n, int a, int b) {
  return n->link ? n->link[a * n->ngpus + b] : 0.0;
}

/* ---- domains ---------------------------------------------------------------------------- */
static gr_status build_domains(ctx *c) {
  const gr__node *n = c->n;
  c->dom = calloc((size_t)c->G + 1, sizeof *c->dom);
  c->gpu_dom = calloc((size_t)c->G + 1, sizeof *c->gpu_dom);
  if (!c->dom || !c->gpu_dom) return GR_ERR_NOMEM;
  for (int g = 0; g < c->G; g++) {
    hwloc_obj_t o = n->gpus[g].locality;
    int d = 0;
    while (d < c->ndom && c->dom[d].obj != o)
      d++;
    if (d == c->ndom) {
      c->dom[d].obj = o;
      c->dom[d].cpuset = hwloc_bitmap_alloc();
      if (!c->dom[d].cpuset) return GR_ERR_NOMEM;
      hwloc_bitmap_and(c->dom[d].cpuset, o ? o->cpuset : n->allowed, n->allowed);
      c->ndom++;
    }
    c->gpu_dom[g] = d;
  }
  /* Nested domains (one GPU under a package, another under a NUMA node inside it): the larger
   * keeps only what the smaller ones do not claim, so no core belongs to two domains. */
  hwloc_bitmap_t orig = hwloc_bitmap_alloc();
  for (int d = 0; d < c->ndom; d++) {
    hwloc_bitmap_copy(orig, c->dom[d].cpuset);
    for (int e = 0; e < c->ndom; e++)
      if (e != d && hwloc_bitmap_isincluded(c->dom[e].obj->cpuset, c->dom[d].obj->cpuset) &&
          !hwloc_bitmap_isequal(c->dom[e].obj->cpuset, c->dom[d].obj->cpuset))
        hwloc_bitmap_andnot(c->dom[d].cpuset, c->dom[d].cpuset, c->dom[e].cpuset);
    if (hwloc_bitmap_iszero(c->dom[d].cpuset)) hwloc_bitmap_copy(c->dom[d].cpuset, orig);
  }
  hwloc_bitmap_free(orig);
  for (int d = 0; d < c->ndom; d++) {
    c->dom[d].cores = calloc((size_t)c->C + 1, sizeof(int));
    if (!c->dom[d].cores) return GR_ERR_NOMEM;
    c->dom[d].first_core = c->C;
  }
  for (int i = 0; i < c->C; i++) {
    c->core_dom[i] = -1;
    int pu = hwloc_bitmap_first(c->core[i]->cpuset);
    hwloc_bitmap_t a = hwloc_bitmap_alloc();
    hwloc_bitmap_and(a, c->core[i]->cpuset, n->allowed);
    pu = hwloc_bitmap_first(a);
    hwloc_bitmap_free(a);
    for (int d = 0; d < c->ndom; d++)
      if (hwloc_bitmap_isset(c->dom[d].cpuset, (unsigned)pu)) {
        c->core_dom[i] = d;
        if (c->dom[d].ncores == 0) c->dom[d].first_core = i;
        c->dom[d].cores[c->dom[d].ncores++] = i;
        break;
      }
  }
  return GR_OK;
}

/* ---- GPU sets --------------------------------------------------------------------------- */
/* Grow a set of k unused GPUs from `cand` (d < 0: any domain) by the weakest link. */
static int grow_set(ctx *c, char *used, int d, int k, int *out) {
  int avail = 0;
  for (int g = 0; g < c->G; g++)
    if (!used[g] && (d < 0 || c->gpu_dom[g] == d)) avail++;
  if (avail < k) return 0;
  int m = 0;
  for (int g = 0; g < c->G && m == 0; g++)
    if (!used[g] && (d < 0 || c->gpu_dom[g] == d)) out[m++] = g;
  used[out[0]] = 1;
  while (m < k) {
    int best = -1;
    double best_w = -1;
    int best_same = 0;
    for (int g = 0; g < c->G; g++) {
      if (used[g] || (d >= 0 && c->gpu_dom[g] != d)) continue;
      double w = 1e300;
      for (int i = 0; i < m; i++) {
        double l = link_bw(c->n, out[i], g);
        if (l < w) w = l;
      }
      /* across domains, prefer the domain the set started in */
      int same = c->gpu_dom[g] == c->gpu_dom[out[0]];
      if (w > best_w || (w == best_w && same > best_same)) best = g, best_w = w, best_same = same;
    }
    out[m++] = best;
    used[best] = 1;
  }
  return 1;
}

static int cmp_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

static gr_status build_sets(ctx *c, const gr__node_plan_opts *po) {
  int N = c->N, G = c->G;
  if (po->gpus_per_rank > 0) {
    if (po->gpus_per_rank > G)
      return gr__fail_msg(GR_ERR_INVALID, "--gpus-per-rank %d is larger than the %d GPU%s here",
                          po->gpus_per_rank, G, G == 1 ? "" : "s");
    c->k = po->gpus_per_rank;
    c->nsets = G / c->k;
  } else if (po->ranks_per_gpu > 0) {
    int need = (N + po->ranks_per_gpu - 1) / po->ranks_per_gpu;
    if (need > G)
      return gr__fail_msg(GR_ERR_INVALID,
                          "--ranks-per-gpu %d with %d local ranks needs %d GPUs, %d here",
                          po->ranks_per_gpu, N, need, G);
    c->k = 1;
    c->nsets = need;
  } else if (N >= G) {
    c->k = 1;
    c->nsets = G;
  } else {
    c->k = G / N;
    c->nsets = N;
  }
  if (c->k > GR__MAX_RANK_GPUS) {
    if (po->gpus_per_rank > 0)
      return gr__fail_msg(GR_ERR_INVALID, "--gpus-per-rank %d is more than a rank may use (%d)",
                          po->gpus_per_rank, GR__MAX_RANK_GPUS);
    warn(c->p, "%d GPUs per rank capped at %d", c->k, GR__MAX_RANK_GPUS);
    c->k = GR__MAX_RANK_GPUS;
    c->nsets = N < G / c->k ? N : G / c->k;
  }
  if (c->nsets > N) c->nsets = N;
  if (!(c->p->gpu_store = calloc((size_t)N * (size_t)c->k + 1, sizeof(int)))) return GR_ERR_NOMEM;
  c->set_gpus = calloc((size_t)c->nsets * (size_t)c->k + 1, sizeof(int));
  char *used = calloc((size_t)G + 1, 1);
  if (!c->set_gpus || !used) {
    free(used);
    return GR_ERR_NOMEM;
  }
  int s = 0;
  if (c->k == 1 && c->nsets < G) {
    /* fewer single-GPU sets than GPUs (--ranks-per-gpu): spread them over the domains */
    int *taken = calloc((size_t)c->ndom + 1, sizeof(int));
    if (!taken) {
      free(used);
      return GR_ERR_NOMEM;
    }
    for (; s < c->nsets; s++) {
      int best = -1;
      for (int g = 0; g < G; g++)
        if (!used[g] && (best < 0 || taken[c->gpu_dom[g]] < taken[c->gpu_dom[best]])) best = g;
      used[best] = 1;
      taken[c->gpu_dom[best]]++;
      c->set_gpus[s] = best;
    }
    free(taken);
    qsort(c->set_gpus, (size_t)c->nsets, sizeof(int), cmp_int);
  } else {
    for (int d = 0; d < c->ndom && s < c->nsets; d++)
      while (s < c->nsets && grow_set(c, used, d, c->k, &c->set_gpus[s * c->k]))
        s++;
    while (s < c->nsets && grow_set(c, used, -1, c->k, &c->set_gpus[s * c->k]))
      s++;
    /* sets in the order of their first GPU, so rank order follows PCI order */
    for (int a = 0; a < c->nsets; a++)
      for (int b = a + 1; b < c->nsets; b++)
        if (c->set_gpus[b * c->k] < c->set_gpus[a * c->k])
          for (int i = 0; i < c->k; i++) {
            int t = c->set_gpus[a * c->k + i];
            c->set_gpus[a * c->k + i] = c->set_gpus[b * c->k + i];
            c->set_gpus[b * c->k + i] = t;
          }
  }
  int unused = 0;
  for (int g = 0; g < G; g++)
    unused += !used[g];
  free(used);
  if (unused && G > 0)
    warn(c->p, "%d of %d GPUs unused by %d local rank%s", unused, G, N, N == 1 ? "" : "s");
  /* ranks in blocks over the sets: set s gets ranks [s*N/nsets, (s+1)*N/nsets) */
  for (int r = 0; r < N; r++) {
    int set = (int)(((long long)r * c->nsets) / N);
    c->rank_set[r] = set;
    gr__rank_plan *rp = &c->p->ranks[r];
    rp->ngpus = c->k;
    rp->gpu = &c->p->gpu_store[(size_t)r * (size_t)c->k];
    for (int i = 0; i < c->k; i++)
      rp->gpu[i] = c->set_gpus[set * c->k + i];
  }
  /* sharers: ranks of the same set (counted per set, so planning stays linear in ranks) */
  int *per_set = calloc((size_t)c->nsets + 1, sizeof(int)),
      *seen = calloc((size_t)c->nsets + 1, sizeof(int));
  if (!per_set || !seen) {
    free(per_set), free(seen);
    return GR_ERR_NOMEM;
  }
  for (int r = 0; r < N; r++)
    per_set[c->rank_set[r]]++;
  for (int r = 0; r < N; r++) {
    c->p->ranks[r].sharers = per_set[c->rank_set[r]];
    c->p->ranks[r].share_index = seen[c->rank_set[r]]++;
  }
  free(per_set), free(seen);
  return GR_OK;
}

/* The scheduler fixed every task's GPUs (visible.c): take them; sharers are the tasks holding the
 * same GPU (a task holding a GPU alone is exclusive). */
static gr_status assign_fixed(ctx *c, const gr__visible *v) {
  int N = c->N, G = c->G, k = v->k;
  if (v->local_size != N || k < 1 || k > GR__MAX_RANK_GPUS)
    return gr__fail_msg(GR_ERR_INTERNAL, "GPU holdings for %d tasks, not %d", v->local_size, N);
  int *holders = calloc((size_t)G + 1, sizeof(int)), *seen = calloc((size_t)G + 1, sizeof(int));
  c->p->gpu_store = calloc((size_t)N * (size_t)k + 1, sizeof(int));
  if (!holders || !seen || !c->p->gpu_store) {
    free(holders), free(seen);
    return GR_ERR_NOMEM;
  }
  for (int r = 0; r < N; r++) {
    gr__rank_plan *rp = &c->p->ranks[r];
    rp->ngpus = 0;
    rp->gpu = &c->p->gpu_store[(size_t)r * (size_t)k];
    for (int i = 0; i < k; i++) {
      int g = v->fixed[(size_t)r * (size_t)k + (size_t)i];
      if (g < 0) continue;
      if (g >= G) {
        free(holders), free(seen);
        return gr__fail_msg(GR_ERR_INTERNAL, "GPU %d of task %d is not here", g, r);
      }
      rp->gpu[rp->ngpus++] = g;
      holders[g]++;
    }
    qsort(rp->gpu, (size_t)rp->ngpus, sizeof(int), cmp_int);
  }
  for (int r = 0; r < N; r++) {
    gr__rank_plan *rp = &c->p->ranks[r];
    rp->sharers = 1;
    rp->share_index = 0;
    for (int i = 0; i < rp->ngpus; i++)
      if (holders[rp->gpu[i]] > rp->sharers) rp->sharers = holders[rp->gpu[i]];
    if (rp->ngpus) rp->share_index = seen[rp->gpu[0]]++;
  }
  /* GPUs no local task holds belong to other jobs: nothing to warn about */
  free(holders), free(seen);
  return GR_OK;
}

/* ---- cores ------------------------------------------------------------------------------ */
static void add_core(ctx *c, gr__rank_plan *rp, int core, int smt) {
  hwloc_bitmap_t pus = hwloc_bitmap_alloc();
  hwloc_bitmap_and(pus, c->core[core]->cpuset, c->n->allowed);
  if (smt)
    hwloc_bitmap_or(rp->cpuset, rp->cpuset, pus);
  else
    hwloc_bitmap_set(rp->cpuset, (unsigned)hwloc_bitmap_first(pus));
  hwloc_bitmap_free(pus);
}

/* Split `ncores` cores (list) among the `nr` ranks (list): contiguous blocks differing by at most
 * one core, or one core each from the start under compact. */
static void split(ctx *c, const int *cores, int ncores, const int *ranks, int nr, int compact,
                  int smt) {
  for (int j = 0; j < nr; j++) {
    gr__rank_plan *rp = &c->p->ranks[ranks[j]];
    if (compact) {
      add_core(c, rp, cores[j % ncores], smt);
      continue;
    }
    int lo = (int)((long long)j * ncores / nr), hi = (int)((long long)(j + 1) * ncores / nr);
    if (hi == lo) hi = lo + 1; /* more ranks than cores: share, evenly */
    for (int i = lo; i < hi && i < ncores; i++)
      add_core(c, rp, cores[i], smt);
  }
}

static int cmp_ll(const void *a, const void *b) {
  long long x = *(const long long *)a, y = *(const long long *)b;
  return (x > y) - (x < y);
}

static int home_key(ctx *c, int r) {
  if (c->G == 0 || c->p->ranks[r].ngpus == 0) return 0;
  return c->dom[c->gpu_dom[c->p->ranks[r].gpu[0]]].first_core;
}

static gr_status place_cores(ctx *c, const gr__node_plan_opts *po) {
  int N = c->N, C = c->C, compact = po->policy == GR__POLICY_COMPACT;
  int *ranks = malloc(((size_t)N + 1) * sizeof(int));
  int *all = malloc(((size_t)C + 1) * sizeof(int));
  int *pool = malloc(((size_t)C + 1) * sizeof(int));
  if (!ranks || !all || !pool) {
    free(ranks), free(all), free(pool);
    return GR_ERR_NOMEM;
  }
  for (int i = 0; i < C; i++)
    all[i] = i;
  /* ranks ordered by where their GPUs are, then by rank (n log n: local sizes reach 10^5) */
  long long *keyed = malloc(((size_t)N + 1) * sizeof *keyed);
  if (!keyed) {
    free(ranks), free(all), free(pool);
    return GR_ERR_NOMEM;
  }
  for (int r = 0; r < N; r++)
    keyed[r] = ((long long)home_key(c, r) << 32) | (long long)r;
  qsort(keyed, (size_t)N, sizeof *keyed, cmp_ll);
  for (int r = 0; r < N; r++)
    ranks[r] = (int)(keyed[r] & 0xffffffffLL);
  free(keyed);

  if (N > C) {
    warn(c->p, "%d local ranks on %d cores: ranks share cores", N, C);
    split(c, all, C, ranks, N, 0, po->smt);
  } else if (c->G == 0 || po->policy == GR__POLICY_SPREAD) {
    split(c, all, C, ranks, N, compact, po->smt);
  } else {
    /* closest / compact / none: each domain's cores for the ranks with a GPU there; a rank
     * whose GPU set spans domains takes a share in each of them. */
    int D = c->ndom;
    char *mem = calloc((size_t)(D + 1) * (size_t)N + 1, 1); /* mem[d*N + j]: rank ranks[j] uses d */
    int *sel = malloc(((size_t)N + 1) * sizeof(int));
    if (!mem || !sel) {
      free(mem), free(sel), free(ranks), free(all), free(pool);
      return GR_ERR_NOMEM;
    }
    for (int d = 0; d < D; d++)
      c->dom[d].nranks = 0;
    for (int j = 0; j < N; j++) {
      const gr__rank_plan *rp = &c->p->ranks[ranks[j]];
      for (int i = 0; i < rp->ngpus; i++) {
        int d = c->gpu_dom[rp->gpu[i]];
        if (!mem[d * N + j]) mem[d * N + j] = 1, c->dom[d].nranks++;
      }
    }
    /* the free pool: cores of no domain that has ranks (all cores when there are none) */
    int npool = 0, pool_ranks = 0, moved = 0;
    for (int i = 0; i < C; i++) {
      int d = c->core_dom[i];
      if (d < 0 || c->dom[d].nranks == 0) pool[npool++] = i;
    }
    /* ranks the scheduler gave no GPU take the free pool */
    for (int j = 0; j < N; j++)
      if (c->p->ranks[ranks[j]].ngpus == 0) {
        mem[D * N + j] = 1;
        pool_ranks++;
      }
    if (pool_ranks && npool == 0)
      for (int i = 0; i < C; i++)
        pool[npool++] = i;
    for (int d = 0; d < D; d++)
      while (c->dom[d].nranks > c->dom[d].ncores) {
        /* the domain's last rank leaves; if it has no other domain it goes to the free pool
         * while that has a core per rank, else to the domain with the most spare cores */
        int j = N - 1;
        while (!mem[d * N + j])
          j--;
        mem[d * N + j] = 0;
        c->dom[d].nranks--;
        int others = 0;
        for (int e = 0; e < D; e++)
          others += mem[e * N + j];
        if (others) continue;
        int to = -1;
        if (pool_ranks < npool)
          to = D;
        else {
          int spare = 0;
          for (int e = 0; e < D; e++)
            if (c->dom[e].ncores - c->dom[e].nranks > spare)
              spare = c->dom[e].ncores - c->dom[e].nranks, to = e;
        }
        if (to < 0) break; /* cannot happen when N <= C */
        mem[to * N + j] = 1;
        if (to == D)
          pool_ranks++;
        else
          c->dom[to].nranks++;
        moved++;
      }
    if (moved)
      warn(c->p, "%d rank%s placed on cores away from their GPU (not enough cores next to it)",
           moved, moved == 1 ? "" : "s");
    for (int d = 0; d <= D; d++) {
      int m = 0;
      for (int j = 0; j < N; j++)
        if (mem[d * N + j]) sel[m++] = ranks[j];
      if (m == 0) continue;
      if (d < D)
        split(c, c->dom[d].cores, c->dom[d].ncores, sel, m, compact, po->smt);
      else
        split(c, pool, npool, sel, m, compact, po->smt);
    }
    free(sel);
    free(mem);
  }
  free(ranks), free(all), free(pool);
  return GR_OK;
}

/* ---- NIC -------------------------------------------------------------------------------- */
/* 0 same PCIe switch as the GPU, 1 same NUMA node as `nodeset`, 2 same package as `cpuset`, 3
 * elsewhere. */
static int nic_level_at(const gr__node *n, hwloc_obj_t gpu_pci, hwloc_const_cpuset_t cpuset,
                        hwloc_const_nodeset_t nodeset, const gr__nic *nic) {
  if (gpu_pci && nic->pcidev) {
    hwloc_obj_t a = gr__io_common_ancestor(gpu_pci, nic->pcidev);
    if (a && a->type == HWLOC_OBJ_BRIDGE && a->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_PCI)
      return 0;
  }
  hwloc_obj_t loc = nic->locality;
  if (!loc) return 3;
  hwloc_bitmap_t ns = hwloc_bitmap_alloc();
  hwloc_cpuset_to_nodeset(n->topo, loc->cpuset, ns);
  int numa_all = hwloc_bitmap_isequal(ns, hwloc_topology_get_topology_nodeset(n->topo)) &&
                 hwloc_get_nbobjs_by_type(n->topo, HWLOC_OBJ_NUMANODE) > 1;
  int lvl = 3;
  if (!numa_all && hwloc_bitmap_intersects(ns, nodeset)) lvl = 1;
  hwloc_bitmap_free(ns);
  if (lvl == 3) {
    hwloc_obj_t pkg = hwloc_get_ancestor_obj_by_type(n->topo, HWLOC_OBJ_PACKAGE, loc);
    if (!pkg && loc->type == HWLOC_OBJ_PACKAGE) pkg = loc;
    if (pkg && hwloc_bitmap_intersects(pkg->cpuset, cpuset)) lvl = 2;
  }
  return lvl;
}

int gr__gpu_nic_level(const gr__node *n, int g, const gr__nic *nic) {
  const gr__gpu *G = &n->gpus[g];
  hwloc_const_cpuset_t cs = G->locality ? G->locality->cpuset : n->allowed;
  hwloc_bitmap_t ns = hwloc_bitmap_alloc();
  if (!ns) return 3;
  hwloc_cpuset_to_nodeset(n->topo, cs, ns);
  int lvl = nic_level_at(n, G->pcidev, cs, ns, nic);
  hwloc_bitmap_free(ns);
  return lvl;
}

/* The rank's own NIC: nearest to its first GPU and its cores. */
static int nic_level(const gr__node *n, const gr__rank_plan *rp, const gr__nic *nic) {
  hwloc_obj_t pci = rp->ngpus > 0 ? n->gpus[rp->gpu[0]].pcidev : NULL;
  return nic_level_at(n, pci, rp->cpuset, rp->nodeset, nic);
}

/* Least loaded of the NICs nearest to what lvl[] describes; -1 when there are none. */
static int pick_nearest(const gr__node *n, const int *lvl, const int *load) {
  int best = 4, pick = -1;
  for (int i = 0; i < n->nnics; i++)
    if (lvl[i] < best) best = lvl[i];
  for (int i = 0; i < n->nnics; i++)
    if (lvl[i] == best && (pick < 0 || load[i] < load[pick])) pick = i;
  return pick;
}

/* Each rank: the nearest NIC, balanced among equally near ones. A rank whose other GPUs are
 * nearer to other NICs (one rank over GPUs in several NIC domains) gets those too, so that its
 * traffic from each GPU has a NIC next to it. */
static gr_status place_nics(ctx *c) {
  const gr__node *n = c->n;
  if (n->nnics == 0) {
    for (int r = 0; r < c->N; r++)
      c->p->ranks[r].nic = -1;
    return GR_OK;
  }
  int *load = calloc((size_t)n->nnics, sizeof(int)), *lvl = calloc((size_t)n->nnics, sizeof(int));
  hwloc_bitmap_t gns = hwloc_bitmap_alloc();
  if (!load || !lvl || !gns) {
    free(load), free(lvl), hwloc_bitmap_free(gns);
    return GR_ERR_NOMEM;
  }
  for (int r = 0; r < c->N; r++) {
    gr__rank_plan *rp = &c->p->ranks[r];
    for (int i = 0; i < n->nnics; i++)
      lvl[i] = nic_level(n, rp, &n->nics[i]);
    int pick = pick_nearest(n, lvl, load);
    rp->nic = pick;
    rp->nics[0] = pick;
    rp->nnics = 1;
    load[pick]++;
    for (int g = 1; g < rp->ngpus && rp->nnics < GR__MAX_RANK_NICS; g++) {
      const gr__gpu *G = &n->gpus[rp->gpu[g]];
      hwloc_const_cpuset_t gcs = G->locality ? G->locality->cpuset : rp->cpuset;
      hwloc_cpuset_to_nodeset(n->topo, gcs, gns);
      int best = 4, have = 0;
      for (int i = 0; i < n->nnics; i++) {
        lvl[i] = nic_level_at(n, G->pcidev, gcs, gns, &n->nics[i]);
        if (lvl[i] < best) best = lvl[i];
      }
      for (int k = 0; k < rp->nnics; k++)
        have |= lvl[rp->nics[k]] == best; /* a NIC it already has is as near */
      if (have) continue;
      int extra = pick_nearest(n, lvl, load);
      rp->nics[rp->nnics++] = extra;
      load[extra]++;
    }
  }
  free(load), free(lvl);
  hwloc_bitmap_free(gns);
  return GR_OK;
}

/* ---- entry ------------------------------------------------------------------------------ */
gr_status gr__node_plan_compute(const gr__node *n, int local_size, const gr__node_plan_opts *po,
                                gr__node_plan *p) {
  memset(p, 0, sizeof *p);
  if (local_size < 1)
    return gr__fail_msg(GR_ERR_INVALID, "local size %d is not positive", local_size);
  if (local_size > 1 << 20)
    return gr__fail_msg(GR_ERR_INVALID, "local size %d is too large", local_size);
  p->local_size = local_size;
  p->policy = po->policy;
  p->smt = po->smt;
  gr_status st = GR_OK;
  ctx c = {.n = n, .N = local_size, .G = n->ngpus, .p = p};
  p->ranks = calloc((size_t)local_size, sizeof *p->ranks);
  c.rank_set = calloc((size_t)local_size, sizeof(int));
  if (!p->ranks || !c.rank_set) {
    st = GR_ERR_NOMEM;
    goto out;
  }
  for (int r = 0; r < local_size; r++) {
    p->ranks[r].local_rank = r;
    p->ranks[r].cpuset = hwloc_bitmap_alloc();
    p->ranks[r].nodeset = hwloc_bitmap_alloc();
    p->ranks[r].nic = -1;
    p->ranks[r].sharers = 1;
    if (!p->ranks[r].cpuset || !p->ranks[r].nodeset) {
      st = GR_ERR_NOMEM;
      goto out;
    }
  }
  hwloc_obj_type_t ct = HWLOC_OBJ_CORE;
  c.C = hwloc_get_nbobjs_inside_cpuset_by_type(n->topo, n->allowed, ct);
  if (c.C <= 0) {
    ct = HWLOC_OBJ_PU;
    c.C = hwloc_get_nbobjs_inside_cpuset_by_type(n->topo, n->allowed, ct);
  }
  if (c.C <= 0) {
    st = gr__fail_msg(GR_ERR_INVALID, "the topology has no allowed cores");
    goto out;
  }
  p->ncores_total = c.C;
  c.core = calloc((size_t)c.C, sizeof *c.core);
  c.core_dom = calloc((size_t)c.C, sizeof *c.core_dom);
  if (!c.core || !c.core_dom) {
    st = GR_ERR_NOMEM;
    goto out;
  }
  for (int i = 0; i < c.C; i++)
    c.core[i] = hwloc_get_obj_inside_cpuset_by_type(n->topo, n->allowed, ct, (unsigned)i);
  GR_CHECK_GOTO(build_domains(&c), st, out);
  if (c.G > 0 && po->vis && po->vis->fixed) {
    if (po->gpus_per_rank > 0 || po->ranks_per_gpu > 0)
      warn(p, "--gpus-per-rank/--ranks-per-gpu ignored: the scheduler gave each task its GPUs");
    GR_CHECK_GOTO(assign_fixed(&c, po->vis), st, out);
  } else if (c.G > 0)
    GR_CHECK_GOTO(build_sets(&c, po), st, out);
  else if (po->gpus_per_rank > 0) {
    st = gr__fail_msg(GR_ERR_INVALID, "--gpus-per-rank %d is larger than the 0 GPUs here",
                      po->gpus_per_rank);
    goto out;
  } else
    for (int r = 0; r < local_size; r++)
      p->ranks[r].sharers = 1;
  GR_CHECK_GOTO(place_cores(&c, po), st, out);
  for (int r = 0; r < local_size; r++)
    hwloc_cpuset_to_nodeset(n->topo, p->ranks[r].cpuset, p->ranks[r].nodeset);
  GR_CHECK_GOTO(place_nics(&c), st, out);
out:
  if (st == GR_ERR_NOMEM) gr__fail_msg(st, "out of memory while planning"); /* none says more */
  for (int d = 0; d < c.ndom; d++) {
    hwloc_bitmap_free(c.dom[d].cpuset);
    free(c.dom[d].cores);
  }
  free(c.dom), free(c.gpu_dom), free(c.rank_set), free(c.set_gpus), free(c.core), free(c.core_dom);
  if (st != GR_OK) gr__node_plan_free(p);
  return st;
}

void gr__node_plan_free(gr__node_plan *p) {
  if (p->ranks)
    for (int r = 0; r < p->local_size; r++) {
      hwloc_bitmap_free(p->ranks[r].cpuset);
      hwloc_bitmap_free(p->ranks[r].nodeset);
    }
  free(p->ranks);
  free(p->gpu_store);
  memset(p, 0, sizeof *p);
}
