/* Placement on every recorded topology, at local sizes 1, GPUs/2, GPUs, 2xGPUs, cores, cores+1.
 * Every invariant is checked against the test's own hwloc view of the XML (its own topology
 * object, its own GPU/NIC enumeration, its own locality and distance look-ups), and against the
 * GPU/NIC counts the topologies' README records -- never against the plan's own bookkeeping. */
#include "gr_launcher.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

typedef struct {
  const char *file;
  int ngpus;        /* from configs/topologies/README.md */
  const char *nics; /* expected NIC names, space separated */
  int vendor;
  const char *not_gpus; /* display functions of a GPU vendor that are no GPU (the README's BMCs) */
} topo_case;

static const topo_case cases[] = {
    {"hwloc-nvidia-dgx2.xml", 16, "", 0x10de, ""},
    {"hwloc-power8-minsky-4xP100.xml", 4, "", 0x10de, ""},
    {"mpibind-lassen-p9-4xV100.xml", 4, "mlx5_0 mlx5_1 mlx5_2 mlx5_3", 0x10de, ""},
    {"mpibind-aws-g4dn-metal-8xT4.xml", 8, "rdmap197s0", 0x10de, ""},
    {"mpibind-pascal-2xP100.xml", 2, "mlx5_0", 0x10de, ""},
    {"flux-tuolumne-4xMI300A-SPX.xml", 4, "hsi0 hsi1 hsi2 hsi3", 0x1002, ""},
    {"hwloc-24em64t-3xM2070-es1000.xml", 3, "mlx4_0", 0x10de, "0000:01:03.0"},
    {"hwloc-96em64t-x3950m2-es1000.xml", 0, "", 0, "0000:01:00.0"},
    {"hwloc-8em64t-nonodesets-es1000.xml", 0, "mlx4_0", 0, "0000:0e:0d.0"},
};

/* ---- the test's own view ---------------------------------------------------------------- */
typedef struct {
  hwloc_topology_t t;
  int ngpus;
  char pci[64][20];
  hwloc_obj_t gpu_pci[64];
  int nnics;
  hwloc_obj_t nic[16];
  const char *nic_name[16];
} view;

static int cmp_str(const void *a, const void *b) {
  return strcmp((const char *)a, (const char *)b);
}

static void view_load(view *v, const char *path, const char *not_gpus) {
  memset(v, 0, sizeof *v);
  assert_int_equal(hwloc_topology_init(&v->t), 0);
  assert_int_equal(hwloc_topology_set_xml(v->t, path), 0);
  hwloc_topology_set_io_types_filter(v->t, HWLOC_TYPE_FILTER_KEEP_ALL);
  assert_int_equal(hwloc_topology_load(v->t), 0);
  /* GPUs: NVIDIA/AMD display or accelerator PCI functions */
  for (hwloc_obj_t o = NULL; (o = hwloc_get_next_obj_by_type(v->t, HWLOC_OBJ_PCI_DEVICE, o));) {
    unsigned cls = o->attr->pcidev.class_id, ven = o->attr->pcidev.vendor_id;
    if ((ven == 0x10de || ven == 0x1002) && ((cls >> 8) == 3 || cls == 0x1200)) {
      snprintf(v->pci[v->ngpus], 20, "%04x:%02x:%02x.%x", o->attr->pcidev.domain,
               o->attr->pcidev.bus, o->attr->pcidev.dev, o->attr->pcidev.func);
      if (!strstr(not_gpus, v->pci[v->ngpus])) v->ngpus++;
    }
  }
  qsort(v->pci, (size_t)v->ngpus, sizeof v->pci[0], cmp_str);
  for (int g = 0; g < v->ngpus; g++) {
    v->gpu_pci[g] = hwloc_get_pcidev_by_busidstring(v->t, v->pci[g]);
    assert_non_null(v->gpu_pci[g]);
  }
  for (hwloc_obj_t o = NULL; (o = hwloc_get_next_obj_by_type(v->t, HWLOC_OBJ_OS_DEVICE, o));) {
    if (o->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS ||
        (o->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK && strncmp(o->name, "hsi", 3) == 0)) {
      /* an hsi Net device beside an OpenFabrics device of the same function is the same NIC */
      int twin = 0;
      if (o->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK)
        for (hwloc_obj_t c = o->parent->io_first_child; c; c = c->next_sibling)
          if (c->type == HWLOC_OBJ_OS_DEVICE && c->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS)
            twin = 1;
      if (twin) continue;
      v->nic[v->nnics] = o;
      v->nic_name[v->nnics++] = o->name;
    }
  }
}

static hwloc_obj_t t_locality(view *v, hwloc_obj_t o) {
  hwloc_const_cpuset_t allowed = hwloc_topology_get_allowed_cpuset(v->t);
  hwloc_obj_t a = o->parent;
  while (a && (!a->cpuset || !hwloc_bitmap_intersects(a->cpuset, allowed)))
    a = a->parent;
  return a;
}

/* the test's own NIC distance: 0 same PCIe switch, 1 same NUMA, 2 same package, 3 other */
static int t_nic_level(view *v, hwloc_obj_t gpu_pci, hwloc_const_cpuset_t cpus, hwloc_obj_t nic) {
  hwloc_obj_t npci = nic->parent;
  if (gpu_pci && npci && npci->type == HWLOC_OBJ_PCI_DEVICE) {
    for (hwloc_obj_t a = gpu_pci->parent; a && a->type == HWLOC_OBJ_BRIDGE; a = a->parent)
      if (a->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_PCI)
        for (hwloc_obj_t b = npci->parent; b; b = b->parent)
          if (b == a) return 0;
  }
  hwloc_obj_t loc = t_locality(v, nic);
  int numas = hwloc_get_nbobjs_by_type(v->t, HWLOC_OBJ_NUMANODE);
  for (int i = 0; i < numas; i++) {
    hwloc_obj_t nn = hwloc_get_obj_by_type(v->t, HWLOC_OBJ_NUMANODE, (unsigned)i);
    if (hwloc_bitmap_intersects(nn->cpuset, loc->cpuset) &&
        hwloc_bitmap_intersects(nn->cpuset, cpus) &&
        (numas == 1 ||
         !hwloc_bitmap_isequal(loc->cpuset, hwloc_topology_get_topology_cpuset(v->t))))
      return 1;
  }
  for (hwloc_obj_t p = loc; p; p = p->parent)
    if (p->type == HWLOC_OBJ_PACKAGE) return hwloc_bitmap_intersects(p->cpuset, cpus) ? 2 : 3;
  return 3;
}

/* connected directly or through one switch (a matrix object that is not a GPU) */
static int t_linked(view *v, const char *pa, const char *pb, int *have_matrix) {
  static const char *names[] = {"NVLinkBandwidth", "XGMIBandwidth"};
  for (int k = 0; k < 2; k++) {
    unsigned nr = 1;
    struct hwloc_distances_s *d;
    if (hwloc_distances_get_by_name(v->t, names[k], &nr, &d, 0) || nr == 0) continue;
    *have_matrix = 1;
    unsigned m = d->nbobjs;
    int ia = -1, ib = -1;
    char *sw = calloc(m, 1);
    for (unsigned i = 0; i < m; i++) {
      hwloc_obj_t o = d->objs[i];
      while (o && o->type != HWLOC_OBJ_PCI_DEVICE)
        o = o->parent;
      char bus[20] = "";
      if (o)
        snprintf(bus, sizeof bus, "%04x:%02x:%02x.%x", o->attr->pcidev.domain, o->attr->pcidev.bus,
                 o->attr->pcidev.dev, o->attr->pcidev.func);
      if (strcmp(bus, pa) == 0)
        ia = (int)i;
      else if (strcmp(bus, pb) == 0)
        ib = (int)i;
      else if (o) {
        int isgpu = 0;
        for (int g = 0; g < v->ngpus; g++)
          isgpu |= strcmp(bus, v->pci[g]) == 0;
        sw[i] = !isgpu;
      }
    }
    int ok = 0;
    if (ia >= 0 && ib >= 0) {
      ok = d->values[(size_t)ia * m + (size_t)ib] > 0;
      for (unsigned s = 0; s < m && !ok; s++)
        ok = sw[s] && d->values[(size_t)ia * m + s] > 0 && d->values[s * m + (size_t)ib] > 0;
    }
    free(sw);
    hwloc_distances_release(v->t, d);
    return ok;
  }
  return 0;
}

static const char *env_of(const gr__envlist *e, const char *name) {
  for (int i = 0; i < e->n; i++)
    if (strcmp(e->name[i], name) == 0) return e->value[i];
  return NULL;
}

static char topo_dir[1024] = GR_TOPO_DIR;

/* ---- one (topology, size, policy) ------------------------------------------------------- */
static void check_one(const topo_case *tc, view *v, gr__node *node, int N, gr__policy pol,
                      int smt) {
  gr__node_plan_opts po = {.policy = pol, .smt = smt};
  gr__node_plan p, p2;
  print_message("  %s N=%d policy=%s%s\n", tc->file, N, gr__policy_name(pol), smt ? " smt" : "");
  assert_int_equal(gr__node_plan_compute(node, N, &po, &p), GR_OK);
  assert_int_equal(gr__node_plan_compute(node, N, &po, &p2), GR_OK);
  hwloc_const_cpuset_t allowed = hwloc_topology_get_allowed_cpuset(v->t);
  int C = hwloc_get_nbobjs_inside_cpuset_by_type(v->t, allowed, HWLOC_OBJ_CORE);
  int G = v->ngpus;
  int moved = 0;
  for (int i = 0; i < p.nwarn; i++)
    moved |= strstr(p.warn[i], "away from their GPU") != NULL;
  assert_int_equal(p.ncores_total, C);

  int *per_gpu = calloc((size_t)G, sizeof(int));
  int *core_load = calloc((size_t)C, sizeof(int));
  for (int r = 0; r < N; r++) {
    const gr__rank_plan *rp = &p.ranks[r];
    /* deterministic */
    assert_true(hwloc_bitmap_isequal(rp->cpuset, p2.ranks[r].cpuset));
    assert_int_equal(rp->ngpus, p2.ranks[r].ngpus);
    assert_int_equal(rp->nic, p2.ranks[r].nic);
    /* cores: non-empty, allowed, whole cores (or one PU per core) */
    assert_false(hwloc_bitmap_iszero(rp->cpuset));
    assert_true(hwloc_bitmap_isincluded(rp->cpuset, allowed));
    hwloc_bitmap_t rank_cores_pus = hwloc_bitmap_alloc();
    int ncores = 0;
    for (int c = 0; c < C; c++) {
      hwloc_obj_t core =
          hwloc_get_obj_inside_cpuset_by_type(v->t, allowed, HWLOC_OBJ_CORE, (unsigned)c);
      if (!hwloc_bitmap_intersects(core->cpuset, rp->cpuset)) continue;
      core_load[c]++;
      ncores++;
      hwloc_bitmap_t a = hwloc_bitmap_alloc();
      hwloc_bitmap_and(a, core->cpuset, allowed);
      if (smt)
        assert_true(hwloc_bitmap_isincluded(a, rp->cpuset));
      else
        assert_int_equal(hwloc_bitmap_weight(a) > 0 ? 1 : 0, 1);
      if (!smt) {
        hwloc_bitmap_and(a, a, rp->cpuset);
        assert_int_equal(hwloc_bitmap_weight(a), 1);
      }
      hwloc_bitmap_free(a);
      hwloc_bitmap_or(rank_cores_pus, rank_cores_pus, core->cpuset);
    }
    hwloc_bitmap_free(rank_cores_pus);
    if (pol == GR__POLICY_COMPACT) assert_int_equal(ncores, 1);
    /* NUMA: exactly the nodes of its cores */
    hwloc_bitmap_t ns = hwloc_bitmap_alloc();
    for (hwloc_obj_t nn = NULL; (nn = hwloc_get_next_obj_by_type(v->t, HWLOC_OBJ_NUMANODE, nn));)
      if (hwloc_bitmap_intersects(nn->cpuset, rp->cpuset)) hwloc_bitmap_set(ns, nn->os_index);
    assert_true(hwloc_bitmap_isequal(ns, rp->nodeset));
    hwloc_bitmap_free(ns);
    /* GPUs: valid, in PCI bus order, the expected bus ids */
    hwloc_bitmap_t local = hwloc_bitmap_alloc();
    for (int i = 0; i < rp->ngpus; i++) {
      const gr__gpu *g = &node->gpus[rp->gpu[i]];
      assert_in_range(g->index, 0, G - 1);
      assert_string_equal(g->pci, v->pci[g->index]);
      if (i) assert_true(node->gpus[rp->gpu[i - 1]].index < g->index);
      per_gpu[g->index]++;
      hwloc_bitmap_or(local, local, t_locality(v, v->gpu_pci[g->index])->cpuset);
      for (int j = 0; j < i; j++) {
        int have = 0;
        int linked = t_linked(v, node->gpus[rp->gpu[j]].pci, g->pci, &have);
        /* within what one locality domain holds, the set must be linked when a matrix exists */
        hwloc_obj_t la = t_locality(v, v->gpu_pci[node->gpus[rp->gpu[j]].index]);
        hwloc_obj_t lb = t_locality(v, v->gpu_pci[g->index]);
        if (have && la == lb) assert_true(linked);
      }
    }
    /* locality: cores next to the rank's GPUs (closest/compact/none with room, no warning) */
    if (G > 0 && N <= C && !moved && pol != GR__POLICY_SPREAD)
      assert_true(hwloc_bitmap_isincluded(rp->cpuset, local));
    hwloc_bitmap_free(local);
    /* NIC: one of the nearest */
    if (v->nnics == 0)
      assert_int_equal(rp->nic, -1);
    else {
      assert_in_range(rp->nic, 0, node->nnics - 1);
      hwloc_obj_t gp = rp->ngpus ? v->gpu_pci[node->gpus[rp->gpu[0]].index] : NULL;
      int best = 9, chosen = -1;
      for (int i = 0; i < v->nnics; i++) {
        int l = t_nic_level(v, gp, rp->cpuset, v->nic[i]);
        if (l < best) best = l;
        if (strcmp(v->nic_name[i], node->nics[rp->nic].name) == 0) chosen = l;
      }
      assert_int_equal(chosen, best);
    }
    /* environment: the contract, parsed back */
    gr__envlist e;
    assert_int_equal(gr__plan_env(node, &p, r, NULL, &e), GR_OK);
    /* several NICs: each of the rank's GPUs has one of its own nearest NICs in the rank's
     * UCX_NET_DEVICES (the test's own levels, from that GPU's place), each listed once */
    if (v->nnics > 0 && rp->nic >= 0) {
      const char *ucx = env_of(&e, "UCX_NET_DEVICES");
      assert_non_null(ucx);
      int listed = 0;
      for (int i = 0; i < v->nnics; i++) {
        char want[80];
        snprintf(want, sizeof want, "%s", v->nic_name[i]);
        const char *hit = strstr(ucx, want);
        int here = hit && (hit == ucx || hit[-1] == ',') &&
                   (hit[strlen(want)] == ':' || hit[strlen(want)] == ',' || !hit[strlen(want)]);
        if (here) assert_null(strstr(hit + 1, want)); /* once */
        listed += here;
      }
      assert_true(listed >= 1 && listed <= (rp->ngpus > 0 ? rp->ngpus : 1));
      for (int i = 1; i < rp->ngpus; i++) {
        hwloc_obj_t gp = v->gpu_pci[node->gpus[rp->gpu[i]].index];
        hwloc_const_cpuset_t gcs = t_locality(v, gp)->cpuset;
        int best = 9, got = 9;
        for (int k = 0; k < v->nnics; k++) {
          int l = t_nic_level(v, gp, gcs, v->nic[k]);
          if (l < best) best = l;
          const char *hit = strstr(ucx, v->nic_name[k]);
          if (hit && (hit == ucx || hit[-1] == ',') && l < got) got = l;
        }
        assert_int_equal(got, best);
      }
      const char *hca = env_of(&e, "NCCL_IB_HCA");
      if (hca) assert_true(hca[0] == '=');
    }
    hwloc_bitmap_t b = hwloc_bitmap_alloc();
    assert_int_equal(hwloc_bitmap_list_sscanf(b, env_of(&e, "GPURUN_CPUS")), 0);
    assert_true(hwloc_bitmap_isequal(b, rp->cpuset));
    hwloc_bitmap_free(b);
    char want[1024] = "", ord[256] = "";
    for (int i = 0; i < rp->ngpus; i++) {
      size_t l = strlen(want), lo = strlen(ord);
      snprintf(want + l, sizeof want - l, "%s%s", i ? "," : "",
               v->pci[node->gpus[rp->gpu[i]].index]);
      snprintf(ord + lo, sizeof ord - lo, "%s%d", i ? "," : "", node->gpus[rp->gpu[i]].index);
    }
    assert_string_equal(env_of(&e, "GPURUN_GPUS"), want);
    if (G == 0) { /* no GPU: no vendor's variable names one */
      assert_null(env_of(&e, "CUDA_VISIBLE_DEVICES"));
      assert_null(env_of(&e, "ROCR_VISIBLE_DEVICES"));
    } else {
      assert_string_equal(
          env_of(&e, tc->vendor == 0x1002 ? "ROCR_VISIBLE_DEVICES" : "CUDA_VISIBLE_DEVICES"), ord);
    }
    char lr[16];
    snprintf(lr, sizeof lr, "%d", r);
    assert_string_equal(env_of(&e, "GPURUN_LOCAL_RANK"), lr);
    if (rp->nic >= 0) assert_string_equal(env_of(&e, "GPURUN_NIC"), node->nics[rp->nic].name);
    if (rp->ngpus && p.ranks[r].sharers > 1)
      assert_non_null(env_of(&e, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"));
    gr__envlist_free(&e);
  }
  /* no shared cores while there are enough; otherwise as even as possible */
  int maxload = 0, minload = 1 << 30;
  for (int c = 0; c < C; c++) {
    if (core_load[c] > maxload) maxload = core_load[c];
    if (core_load[c] < minload) minload = core_load[c];
  }
  if (N <= C)
    assert_true(maxload <= 1);
  else {
    assert_true(maxload <= (N + C - 1) / C);
    assert_true(minload >= N / C);
  }
  /* GPU balance: ranks per GPU differ by at most one; with fewer ranks, equal-size sets */
  if (G > 0) {
    if (N >= G) {
      int mx = 0, mn = 1 << 30;
      for (int g = 0; g < G; g++) {
        if (per_gpu[g] > mx) mx = per_gpu[g];
        if (per_gpu[g] < mn) mn = per_gpu[g];
      }
      assert_true(mx - mn <= 1);
    } else {
      for (int r = 0; r < N; r++)
        assert_int_equal(p.ranks[r].ngpus, G / N);
      for (int g = 0; g < G; g++)
        assert_true(per_gpu[g] <= 1);
    }
  }
  /* core balance among ranks sharing a GPU set (same domain, no moves) */
  if (N <= C && !moved && pol != GR__POLICY_COMPACT)
    for (int r = 0; r < N; r++)
      for (int q = 0; q < N; q++)
        if (p.ranks[r].ngpus && p.ranks[q].ngpus && p.ranks[r].gpu[0] == p.ranks[q].gpu[0]) {
          int a = hwloc_bitmap_weight(p.ranks[r].cpuset),
              b = hwloc_bitmap_weight(p.ranks[q].cpuset);
          if (!smt) assert_true(abs(a - b) <= 1);
        }
  /* NIC balance among ranks that had the same choice: loads of equally near NICs differ by <= 1
   * (the candidate sets are the test's own, from t_nic_level) */
  if (v->nnics > 1) {
    unsigned *cand = calloc((size_t)(N > 0 ? N : 1), sizeof *cand);
    for (int r = 0; r < N; r++) {
      const gr__rank_plan *rp = &p.ranks[r];
      hwloc_obj_t gp = rp->ngpus ? v->gpu_pci[node->gpus[rp->gpu[0]].index] : NULL;
      int best = 9;
      for (int i = 0; i < v->nnics; i++) {
        int l = t_nic_level(v, gp, rp->cpuset, v->nic[i]);
        if (l < best) best = l, cand[r] = 0;
        if (l == best) cand[r] |= 1u << i;
      }
    }
    for (int r = 0; r < N; r++) {
      if (__builtin_popcount(cand[r]) < 2) continue;
      int cnt[16] = {0};
      for (int q = 0; q < N; q++)
        if (cand[q] == cand[r])
          for (int i = 0; i < v->nnics; i++)
            if (strcmp(v->nic_name[i], node->nics[p.ranks[q].nic].name) == 0) cnt[i]++;
      int mx = 0, mn = 1 << 30;
      for (int i = 0; i < v->nnics; i++)
        if (cand[r] & (1u << i)) {
          if (cnt[i] > mx) mx = cnt[i];
          if (cnt[i] < mn) mn = cnt[i];
        }
      assert_true(mx - mn <= 1);
    }
    free(cand);
  }
  free(per_gpu);
  free(core_load);
  gr__node_plan_free(&p);
  gr__node_plan_free(&p2);
}

static void test_every_topology(void **state) {
  (void)state;
  for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
    const topo_case *tc = &cases[t];
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", topo_dir, tc->file);
    view v;
    view_load(&v, path, tc->not_gpus);
    assert_int_equal(v.ngpus, tc->ngpus);
    gr__node node;
    assert_int_equal(gr__node_load(&node, path), GR_OK);
    assert_true(node.foreign);
    /* discovery: the same GPUs in PCI bus order, the expected NICs */
    assert_int_equal(node.ngpus, tc->ngpus);
    for (int g = 0; g < node.ngpus; g++) {
      assert_int_equal(node.gpus[g].index, g);
      assert_string_equal(node.gpus[g].pci, v.pci[g]);
    }
    char names[256] = "";
    for (int i = 0; i < node.nnics; i++) {
      size_t l = strlen(names);
      snprintf(names + l, sizeof names - l, "%s%s", i ? " " : "", node.nics[i].name);
    }
    assert_string_equal(names, tc->nics);
    assert_int_equal(node.nnics, v.nnics);
    int C = hwloc_get_nbobjs_inside_cpuset_by_type(v.t, hwloc_topology_get_allowed_cpuset(v.t),
                                                   HWLOC_OBJ_CORE);
    int G = v.ngpus;
    int sizes[] = {1, G / 2, G, 2 * G, C, C + 1};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
      if (sizes[s] < 1) continue;
      check_one(tc, &v, &node, sizes[s], GR__POLICY_CLOSEST, 0);
      if (sizes[s] == G || sizes[s] == 2 * G) {
        check_one(tc, &v, &node, sizes[s], GR__POLICY_CLOSEST, 1);
        check_one(tc, &v, &node, sizes[s], GR__POLICY_SPREAD, 0);
        check_one(tc, &v, &node, sizes[s], GR__POLICY_COMPACT, 0);
      }
    }
    gr__node_free(&node);
    hwloc_topology_destroy(v.t);
  }
}

/* ---- explicit counts and options -------------------------------------------------------- */
static void load(gr__node *n, const char *file) {
  char path[2048];
  snprintf(path, sizeof path, "%s/%s", topo_dir, file);
  assert_int_equal(gr__node_load(n, path), GR_OK);
}

static void test_gpus_per_rank(void **state) {
  (void)state;
  gr__node n;
  load(&n, "mpibind-aws-g4dn-metal-8xT4.xml");
  gr__node_plan p;
  gr__node_plan_opts po = {.gpus_per_rank = 4};
  assert_int_equal(gr__node_plan_compute(&n, 2, &po, &p), GR_OK);
  /* 4 T4s per socket: each rank takes one socket's four */
  assert_int_equal(p.ranks[0].ngpus, 4);
  for (int i = 0; i < 4; i++)
    assert_int_equal(n.gpus[p.ranks[0].gpu[i]].index, i);
  for (int i = 0; i < 4; i++)
    assert_int_equal(n.gpus[p.ranks[1].gpu[i]].index, 4 + i);
  gr__node_plan_free(&p);
  po.gpus_per_rank = 9;
  assert_int_equal(gr__node_plan_compute(&n, 2, &po, &p), GR_ERR_INVALID);
  assert_non_null(strstr(gr_last_error(), "--gpus-per-rank 9"));
  /* ranks per GPU: 8 ranks, 4 per GPU -> 2 GPUs, one per socket, MPS at 25% */
  po.gpus_per_rank = 0;
  po.ranks_per_gpu = 4;
  assert_int_equal(gr__node_plan_compute(&n, 8, &po, &p), GR_OK);
  assert_int_equal(n.gpus[p.ranks[0].gpu[0]].index, 0);
  assert_int_equal(n.gpus[p.ranks[7].gpu[0]].index, 4);
  assert_int_equal(p.ranks[0].sharers, 4);
  gr__envlist e;
  gr__options o;
  gr__options_init(&o);
  assert_int_equal(gr__plan_env(&n, &p, 5, &o, &e), GR_OK);
  assert_string_equal(env_of(&e, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "25");
  /* T4: 15 GiB and a bit (CUDAGlobalMemorySize in the XML), a quarter each */
  const char *lim = env_of(&e, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT");
  assert_non_null(lim);
  assert_int_equal(strncmp(lim, "0=", 2), 0);
  gr__envlist_free(&e);
  o.gpu_mem_limit = 2ull << 30;
  assert_int_equal(gr__plan_env(&n, &p, 5, &o, &e), GR_OK);
  assert_string_equal(env_of(&e, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"), "0=2048M");
  gr__envlist_free(&e);
  gr__node_plan_free(&p);
  po.ranks_per_gpu = 1;
  assert_int_equal(gr__node_plan_compute(&n, 9, &po, &p), GR_ERR_INVALID);
  gr__node_free(&n);
}

static void test_restrict_visible(void **state) {
  (void)state;
  gr__node n;
  char note[200];
  load(&n, "mpibind-aws-g4dn-metal-8xT4.xml");
  assert_int_equal(gr__node_restrict(&n, "5,1", note, sizeof note), 2);
  assert_int_equal(n.ngpus, 2);
  assert_int_equal(n.gpus[0].index, 1); /* the node-wide ordinal stays */
  assert_int_equal(n.gpus[1].index, 5);
  gr__node_plan p;
  gr__node_plan_opts po = {0};
  assert_int_equal(gr__node_plan_compute(&n, 2, &po, &p), GR_OK);
  gr__envlist e;
  assert_int_equal(gr__plan_env(&n, &p, 1, NULL, &e), GR_OK);
  assert_string_equal(env_of(&e, "CUDA_VISIBLE_DEVICES"), "5");
  gr__envlist_free(&e);
  gr__node_plan_free(&p);
  gr__node_free(&n);
  load(&n, "mpibind-aws-g4dn-metal-8xT4.xml");
  assert_int_equal(gr__node_restrict(&n, "GPU-1234", note, sizeof note), 0);
  assert_int_equal(n.ngpus, 8);
  assert_non_null(strstr(note, "not ordinals"));
  gr__node_free(&n);
}

static void test_bad_xml(void **state) {
  (void)state;
  gr__node n;
  assert_int_equal(gr__node_load(&n, "/nonexistent/topo.xml"), GR_ERR_TOPOLOGY);
  assert_non_null(strstr(gr_last_error(), "/nonexistent/topo.xml"));
  char path[] = "/tmp/gpurun-bad-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, "<topology><object", 17), 17);
  close(fd);
  assert_int_equal(gr__node_load(&n, path), GR_ERR_TOPOLOGY);
  assert_non_null(strstr(gr_last_error(), "does not load"));
  unlink(path);
}

/* Server-management (BMC) display chips: an ATI ES1000 is a VGA function of a GPU vendor but no
 * GPU. Three real nodes carry one: beside three Tesla M2070s, and on two nodes with no GPU. */
static void test_bmc_display(void **state) {
  (void)state;
  gr__node n;
  load(&n, "hwloc-24em64t-3xM2070-es1000.xml");
  assert_int_equal(n.ngpus, 3);
  assert_int_equal(n.nskipped, 1);
  assert_non_null(strstr(n.skipped[0], "ignoring PCI 0000:01:03.0 (ATI ES1000 1002:515e)"));
  assert_non_null(strstr(n.skipped[0], "server-management display, not a GPU"));
  gr__node_plan p;
  gr__node_plan_opts po = {0};
  assert_int_equal(gr__node_plan_compute(&n, 3, &po, &p), GR_OK);
  const char *bus[] = {"0000:06:00.0", "0000:11:00.0", "0000:14:00.0"}, *ord[] = {"0", "1", "2"};
  for (int r = 0; r < 3; r++) { /* every real GPU used, once, under its CUDA ordinal */
    assert_int_equal(p.ranks[r].ngpus, 1);
    gr__envlist e;
    assert_int_equal(gr__plan_env(&n, &p, r, NULL, &e), GR_OK);
    assert_string_equal(env_of(&e, "GPURUN_GPUS"), bus[r]);
    assert_string_equal(env_of(&e, "CUDA_VISIBLE_DEVICES"), ord[r]);
    assert_null(env_of(&e, "ROCR_VISIBLE_DEVICES"));
    gr__envlist_free(&e);
  }
  gr__node_plan_free(&p);
  gr__node_free(&n);
  /* 96 cores on 4 NUMA nodes, no GPU: 24 ranks spread 6 to a node, none told of a GPU */
  load(&n, "hwloc-96em64t-x3950m2-es1000.xml");
  assert_int_equal(n.ngpus, 0);
  assert_int_equal(n.nskipped, 1);
  assert_non_null(strstr(n.skipped[0], "PCI 0000:01:00.0 (ATI ES1000 1002:515e)"));
  assert_int_equal(gr__node_plan_compute(&n, 24, &po, &p), GR_OK);
  int per_numa[4] = {0};
  for (int r = 0; r < 24; r++) {
    assert_int_equal(p.ranks[r].ngpus, 0);
    assert_int_equal(hwloc_bitmap_weight(p.ranks[r].nodeset), 1);
    int numa = hwloc_bitmap_first(p.ranks[r].nodeset);
    assert_in_range(numa, 0, 3);
    per_numa[numa]++;
    gr__envlist e;
    assert_int_equal(gr__plan_env(&n, &p, r, NULL, &e), GR_OK);
    assert_null(env_of(&e, "ROCR_VISIBLE_DEVICES"));
    assert_null(env_of(&e, "CUDA_VISIBLE_DEVICES"));
    gr__envlist_free(&e);
  }
  for (int k = 0; k < 4; k++)
    assert_int_equal(per_numa[k], 6);
  gr__node_plan_free(&p);
  gr__node_free(&n);
  load(&n, "hwloc-8em64t-nonodesets-es1000.xml");
  assert_int_equal(n.ngpus, 0);
  assert_int_equal(n.nskipped, 1);
  gr__node_free(&n);
}

/* Files hwloc cannot read get a sentence that says why: an hwloc 3 export (format 3.0, from
 * hwloc's own tests) names the version and how to export again; garbage, empty, other XML. */
static void test_unreadable_xml(void **state) {
  (void)state;
  gr__node n;
  assert_int_equal(gr__node_load(&n, GR_DATA_DIR "/hwloc3-cxlmem-dax.v3.xml"), GR_ERR_TOPOLOGY);
  const char *e = gr_last_error();
  assert_non_null(strstr(e, "hwloc3-cxlmem-dax.v3.xml"));
  assert_non_null(strstr(e, "format version 3.0"));
  assert_non_null(strstr(e, "hwloc " HWLOC_VERSION));
  assert_non_null(strstr(e, "lstopo --of v2xml"));
  static const struct {
    const char *text, *want;
  } bad[] = {
      {"", "is empty"},
      {" \n\t\n", "holds only white space"},
      {"\x7f"
       "ELF\x02\x01",
       "is not XML"},
      {"hello, world\n", "is not XML"},
      {"<?xml version=\"1.0\"?>\n<html><body/></html>\n", "without a <topology> element"},
      {"<?xml version=\"1.0\"?>\n<topology version=\"7.1\">\n", "format version 7.1"},
      {"<topology><object", "hwloc " HWLOC_VERSION " refuses it"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char path[] = "/tmp/gpurun-bad-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    size_t len = strlen(bad[i].text);
    assert_int_equal(write(fd, bad[i].text, len), (ssize_t)len);
    close(fd);
    assert_int_equal(gr__node_load(&n, path), GR_ERR_TOPOLOGY);
    print_message("  %s\n", gr_last_error());
    assert_non_null(strstr(gr_last_error(), bad[i].want));
    assert_non_null(strstr(gr_last_error(), path));
    if (i + 1 < sizeof bad / sizeof bad[0]) /* the text shows why: no errno word */
      assert_null(strstr(gr_last_error(), "Invalid argument"));
    unlink(path);
  }
}

static void test_no_gpu_and_policies(void **state) {
  (void)state;
  gr__node n;
  load(&n, "mpibind-pascal-2xP100.xml");
  /* hide every GPU: core/NUMA placement only, over the whole node */
  char note[200];
  assert_int_equal(gr__node_restrict(&n, "", note, sizeof note), 0);
  assert_int_equal(n.ngpus, 0);
  gr__node_plan p;
  gr__node_plan_opts po = {0};
  assert_int_equal(gr__node_plan_compute(&n, 2, &po, &p), GR_OK);
  assert_int_equal(p.ranks[0].ngpus, 0);
  assert_int_equal(hwloc_bitmap_weight(p.ranks[0].cpuset) + hwloc_bitmap_weight(p.ranks[1].cpuset),
                   36);
  assert_false(hwloc_bitmap_intersects(p.ranks[0].cpuset, p.ranks[1].cpuset));
  gr__envlist e;
  assert_int_equal(gr__plan_env(&n, &p, 0, NULL, &e), GR_OK);
  assert_null(env_of(&e, "CUDA_VISIBLE_DEVICES"));
  gr__envlist_free(&e);
  gr__node_plan_free(&p);
  gr__node_free(&n);
  /* Pascal: both GPUs on socket 0. closest leaves socket 1 idle; spread uses every core */
  load(&n, "mpibind-pascal-2xP100.xml");
  assert_int_equal(gr__node_plan_compute(&n, 2, &po, &p), GR_OK);
  assert_int_equal(hwloc_bitmap_weight(p.ranks[0].cpuset) + hwloc_bitmap_weight(p.ranks[1].cpuset),
                   18);
  gr__node_plan_free(&p);
  po.policy = GR__POLICY_SPREAD;
  assert_int_equal(gr__node_plan_compute(&n, 2, &po, &p), GR_OK);
  assert_int_equal(hwloc_bitmap_weight(p.ranks[0].cpuset) + hwloc_bitmap_weight(p.ranks[1].cpuset),
                   36);
  gr__node_plan_free(&p);
  /* 20 ranks on 18 cores next to the GPUs: two borrow socket 1's cores, with a warning */
  po.policy = GR__POLICY_CLOSEST;
  assert_int_equal(gr__node_plan_compute(&n, 20, &po, &p), GR_OK);
  assert_true(p.nwarn >= 1);
  gr__node_plan_free(&p);
  gr__node_free(&n);
}

/* A partitioned GPU: three rsmi devices on one PCI function are three GPUs, in PCI order, each
 * with its own ordinal; the three ranks on them split that function's domain. */
static void test_partitioned(void **state) {
  (void)state;
  gr__node n;
  assert_int_equal(gr__node_load(&n, GR_DATA_DIR "/partitioned-rsmi.xml"), GR_OK);
  assert_int_equal(n.ngpus, 6);
  const char *want[] = {"0000:02:00.0", "0000:02:00.0", "0000:02:00.0",
                        "0001:02:00.0", "0002:02:00.0", "0003:02:00.0"};
  for (int g = 0; g < 6; g++) {
    assert_string_equal(n.gpus[g].pci, want[g]);
    assert_int_equal(n.gpus[g].index, g);
  }
  assert_int_equal(n.gpus[2].partition, 2);
  gr__node_plan p;
  gr__node_plan_opts po = {0};
  assert_int_equal(gr__node_plan_compute(&n, 6, &po, &p), GR_OK);
  for (int r = 0; r < 6; r++) {
    assert_int_equal(p.ranks[r].ngpus, 1);
    assert_int_equal(n.gpus[p.ranks[r].gpu[0]].index, r);
    assert_int_equal(p.ranks[r].sharers, 1);
  }
  /* ranks 0-2 on NUMA 0's 24 cores, 8 each, disjoint */
  for (int r = 0; r < 3; r++) {
    assert_int_equal(hwloc_bitmap_weight(p.ranks[r].cpuset), 8);
    assert_int_equal(hwloc_bitmap_first(p.ranks[r].nodeset), 0);
    for (int q = 0; q < r; q++)
      assert_false(hwloc_bitmap_intersects(p.ranks[r].cpuset, p.ranks[q].cpuset));
  }
  gr__envlist e;
  assert_int_equal(gr__plan_env(&n, &p, 2, NULL, &e), GR_OK);
  assert_string_equal(env_of(&e, "ROCR_VISIBLE_DEVICES"), "2");
  assert_null(env_of(&e, "CUDA_VISIBLE_DEVICES"));
  gr__envlist_free(&e);
  gr__node_plan_free(&p);
  gr__node_free(&n);
}

int main(int argc, char **argv) {
  if (argc > 1) snprintf(topo_dir, sizeof topo_dir, "%s", argv[1]);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_topology),      cmocka_unit_test(test_gpus_per_rank),
      cmocka_unit_test(test_restrict_visible),    cmocka_unit_test(test_bad_xml),
      cmocka_unit_test(test_no_gpu_and_policies), cmocka_unit_test(test_partitioned),
      cmocka_unit_test(test_bmc_display),         cmocka_unit_test(test_unreadable_xml),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
