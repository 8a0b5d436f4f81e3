/* The scheduler's GPUs: what a scheduler sets (CUDA_VISIBLE_DEVICES per task, SLURM_STEP_GPUS,
 * UUIDs, -1, garbage) on recorded nodes, through gr__visible_apply + the planner + the env. Every
 * expectation comes from the test's own reading of the XML (PCI bus ids in bus order, the
 * NVIDIAUUID of each, each GPU's locality cpuset), never from the launcher's structures. */
#include "gr_launcher.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* ---- a fake environment ------------------------------------------------------------------ */
typedef struct {
  const char *kv[16]; /* "NAME=value" */
} fake_env;

static const char *fake_get(void *ctx, const char *name) {
  fake_env *e = ctx;
  size_t l = strlen(name);
  for (int i = 0; i < 16 && e->kv[i]; i++)
    if (strncmp(e->kv[i], name, l) == 0 && e->kv[i][l] == '=') return e->kv[i] + l + 1;
  return NULL;
}

/* ---- the test's own view of a recorded node ---------------------------------------------- */
typedef struct {
  hwloc_topology_t t;
  int ngpus;
  char pci[32][20];
  char uuid[32][64];
  hwloc_obj_t loc[32];
} view;

static int cmp_str(const void *a, const void *b) {
  return strcmp((const char *)a, (const char *)b);
}

static void view_load(view *v, const char *file) {
  char path[2048];
  snprintf(path, sizeof path, "%s/%s", GR_TOPO_DIR, file);
  memset(v, 0, sizeof *v);
  assert_int_equal(hwloc_topology_init(&v->t), 0);
  assert_int_equal(hwloc_topology_set_xml(v->t, path), 0);
  hwloc_topology_set_io_types_filter(v->t, HWLOC_TYPE_FILTER_KEEP_ALL);
  assert_int_equal(hwloc_topology_load(v->t), 0);
  for (hwloc_obj_t o = NULL; (o = hwloc_get_next_obj_by_type(v->t, HWLOC_OBJ_PCI_DEVICE, o));) {
    unsigned cls = o->attr->pcidev.class_id, ven = o->attr->pcidev.vendor_id;
    if ((ven == 0x10de || ven == 0x1002) && ((cls >> 8) == 3 || cls == 0x1200))
      snprintf(v->pci[v->ngpus++], 20, "%04x:%02x:%02x.%x", o->attr->pcidev.domain,
               o->attr->pcidev.bus, o->attr->pcidev.dev, o->attr->pcidev.func);
  }
  qsort(v->pci, (size_t)v->ngpus, sizeof v->pci[0], cmp_str);
  for (int g = 0; g < v->ngpus; g++) {
    hwloc_obj_t o = hwloc_get_pcidev_by_busidstring(v->t, v->pci[g]);
    assert_non_null(o);
    for (hwloc_obj_t c = o->io_first_child; c; c = c->next_sibling) {
      const char *u = hwloc_obj_get_info_by_name(c, "NVIDIAUUID");
      if (u) snprintf(v->uuid[g], sizeof v->uuid[g], "%s", u);
    }
    hwloc_obj_t a = o->parent;
    while (a && !a->cpuset)
      a = a->parent;
    v->loc[g] = a;
  }
}

/* Each recorded node is loaded once (XML parsing dominates under ASan); every run gets its own
 * copy of the GPU list and link matrix, which gr__visible_apply narrows, and shares the rest. */
static struct {
  const char *file;
  gr__node node;
} cache[4];

static void node_get(gr__node *out, const char *file) {
  int i = 0;
  while (i < 4 && cache[i].file && strcmp(cache[i].file, file) != 0)
    i++;
  assert_true(i < 4);
  if (!cache[i].file) {
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", GR_TOPO_DIR, file);
    assert_int_equal(gr__node_load(&cache[i].node, path), GR_OK);
    cache[i].file = file;
  }
  *out = cache[i].node;
  out->gpus = malloc((size_t)out->ngpus * sizeof *out->gpus + 1);
  memcpy(out->gpus, cache[i].node.gpus, (size_t)out->ngpus * sizeof *out->gpus);
  out->link = NULL;
  char keep[256];
  memset(keep, 1, sizeof keep);
  gr__node_keep(out, keep); /* its own link matrix */
}

static void node_put(gr__node *n) {
  free(n->gpus);
  free(n->link);
  memset(n, 0, sizeof *n);
}

/* Plans local task `rank` of `size` under env; returns its plan row's status. */
typedef struct {
  gr__node node;
  gr__node_plan plan;
  gr__envlist env;
  char err[1024]; /* the sentence of the failing step */
  gr_status st;
} run_t;

static void run(run_t *r, const char *file, int rank, int size, fake_env *env) {
  memset(r, 0, sizeof *r);
  node_get(&r->node, file);
  gr__visible vis;
  r->st = gr__visible_apply(&r->node, rank, size, fake_get, env, &vis);
  if (r->st != GR_OK) {
    snprintf(r->err, sizeof r->err, "%s", gr_last_error());
    return;
  }
  gr__node_plan_opts po = {.vis = &vis};
  r->st = gr__node_plan_compute(&r->node, size, &po, &r->plan);
  gr__visible_free(&vis);
  assert_int_equal(r->st, GR_OK);
  assert_int_equal(gr__plan_env(&r->node, &r->plan, rank, NULL, &r->env), GR_OK);
}

static void run_free(run_t *r) {
  gr__envlist_free(&r->env);
  if (r->plan.ranks) gr__node_plan_free(&r->plan);
  node_put(&r->node);
}

static const char *env_of(const gr__envlist *e, const char *name) {
  for (int i = 0; i < e->n; i++)
    if (strcmp(e->name[i], name) == 0) return e->value[i];
  return NULL;
}

static int has_mps(const gr__envlist *e) {
  for (int i = 0; i < e->n; i++)
    if (strncmp(e->name[i], "CUDA_MPS_", 9) == 0) return 1;
  return 0;
}

static const char *T4 = "mpibind-aws-g4dn-metal-8xT4.xml";

/* The case: 4 tasks per node, --gpus-per-task=1 (Slurm: task i gets GPU i), every task
 * computes the same node: each holds its GPU alone (no MPS caps), its cores lie next to its GPU,
 * and the 4 tasks' cores are disjoint and cover the domain they share. */
static void test_gpus_per_task(void **state) {
  (void)state;
  view v;
  view_load(&v, T4);
  assert_int_equal(v.ngpus, 8);
  hwloc_bitmap_t all = hwloc_bitmap_alloc();
  for (int rank = 0; rank < 4; rank++) {
    char cvd[32];
    snprintf(cvd, sizeof cvd, "CUDA_VISIBLE_DEVICES=%d", rank);
    fake_env e = {{cvd, "SLURM_STEP_GPUS=0,1,2,3"}};
    run_t r;
    run(&r, T4, rank, 4, &e);
    const gr__rank_plan *rp = &r.plan.ranks[rank];
    assert_int_equal(rp->ngpus, 1);
    assert_string_equal(r.node.gpus[rp->gpu[0]].pci, v.pci[rank]);
    assert_int_equal(rp->sharers, 1);
    assert_false(has_mps(&r.env));
    assert_string_equal(env_of(&r.env, "CUDA_VISIBLE_DEVICES"),
                        cvd + strlen("CUDA_VISIBLE_DEVICES="));
    assert_true(hwloc_bitmap_isincluded(rp->cpuset, v.loc[rank]->cpuset));
    assert_false(hwloc_bitmap_intersects(rp->cpuset, all));
    hwloc_bitmap_or(all, all, rp->cpuset);
    /* the other tasks' rows of this task's plan agree with what they compute themselves */
    for (int q = 0; q < 4; q++)
      assert_string_equal(r.node.gpus[r.plan.ranks[q].gpu[0]].pci, v.pci[q]);
    run_free(&r);
  }
  /* GPUs 0-3 share one domain: the four tasks use all of its cores (one PU each) */
  hwloc_const_cpuset_t allowed = hwloc_topology_get_allowed_cpuset(v.t);
  hwloc_bitmap_t dom = hwloc_bitmap_alloc();
  hwloc_bitmap_and(dom, v.loc[0]->cpuset, allowed);
  int cores = hwloc_get_nbobjs_inside_cpuset_by_type(v.t, dom, HWLOC_OBJ_CORE);
  assert_int_equal(hwloc_bitmap_weight(all), cores);
  hwloc_bitmap_free(dom);
  hwloc_bitmap_free(all);
  hwloc_topology_destroy(v.t);
}

/* The issue's: srun without a Slurm GPU list, task 1 holding GPU 2 (not its block): still alone
 * on it, next to it. */
static void test_one_gpu_alone(void **state) {
  (void)state;
  view v;
  view_load(&v, T4);
  fake_env e = {{"CUDA_VISIBLE_DEVICES=2", "SLURM_LOCALID=1"}};
  run_t r;
  run(&r, T4, 1, 4, &e);
  const gr__rank_plan *rp = &r.plan.ranks[1];
  assert_int_equal(rp->ngpus, 1);
  assert_string_equal(r.node.gpus[rp->gpu[0]].pci, v.pci[2]);
  assert_int_equal(rp->sharers, 1);
  assert_false(has_mps(&r.env));
  assert_string_equal(env_of(&r.env, "CUDA_VISIBLE_DEVICES"), "2");
  assert_true(hwloc_bitmap_isincluded(rp->cpuset, v.loc[2]->cpuset));
  run_free(&r);
  /* two tasks, one GPU each on different sockets: each gets its socket's cores, none unused */
  for (int rank = 0; rank < 2; rank++) {
    fake_env e2 = {
        {rank ? "CUDA_VISIBLE_DEVICES=4" : "CUDA_VISIBLE_DEVICES=0", "SLURM_STEP_GPUS=0,4"}};
    run(&r, T4, rank, 2, &e2);
    rp = &r.plan.ranks[rank];
    int g = rank ? 4 : 0;
    assert_string_equal(r.node.gpus[rp->gpu[0]].pci, v.pci[g]);
    hwloc_bitmap_t dom = hwloc_bitmap_alloc();
    hwloc_bitmap_and(dom, v.loc[g]->cpuset, hwloc_topology_get_allowed_cpuset(v.t));
    assert_int_equal(hwloc_bitmap_weight(rp->cpuset),
                     hwloc_get_nbobjs_inside_cpuset_by_type(v.t, dom, HWLOC_OBJ_CORE));
    hwloc_bitmap_free(dom);
    assert_false(has_mps(&r.env));
    run_free(&r);
  }
  hwloc_topology_destroy(v.t);
}

/* What Slurm 22.05 really exports under --gpus-per-task (seen on the local cluster): the task's
 * own GPU in SLURM_STEP_GPUS, the step's count in SLURM_GPUS_ON_NODE. Under ConstrainDevices the
 * task's CUDA_VISIBLE_DEVICES is 0 while SLURM_STEP_GPUS says 5. */
static void test_slurm_per_task(void **state) {
  (void)state;
  view v;
  view_load(&v, T4);
  hwloc_bitmap_t all = hwloc_bitmap_alloc();
  for (int rank = 0; rank < 2; rank++) {
    char cvd[64], step[64];
    snprintf(cvd, sizeof cvd, "CUDA_VISIBLE_DEVICES=%d", rank);
    snprintf(step, sizeof step, "SLURM_STEP_GPUS=%d", 4 + rank);
    fake_env e = {{cvd, step, "SLURM_GPUS_ON_NODE=2", "SLURM_LOCALID=0"}};
    run_t r;
    run(&r, T4, rank, 2, &e);
    const gr__rank_plan *rp = &r.plan.ranks[rank];
    assert_int_equal(rp->ngpus, 1);
    assert_string_equal(r.node.gpus[rp->gpu[0]].pci, v.pci[4 + rank]);
    assert_int_equal(rp->sharers, 1);
    assert_false(has_mps(&r.env));
    assert_string_equal(env_of(&r.env, "CUDA_VISIBLE_DEVICES"), cvd + 21);
    assert_true(hwloc_bitmap_isincluded(rp->cpuset, v.loc[4 + rank]->cpuset));
    assert_false(hwloc_bitmap_intersects(rp->cpuset, all));
    hwloc_bitmap_or(all, all, rp->cpuset);
    run_free(&r);
  }
  hwloc_bitmap_free(all);
  /* a list and a variable that disagree in size: refused */
  fake_env e = {{"CUDA_VISIBLE_DEVICES=0,1", "SLURM_STEP_GPUS=4", "SLURM_GPUS_ON_NODE=2"}};
  run_t r;
  run(&r, T4, 0, 2, &e);
  assert_int_equal(r.st, GR_ERR_INVALID);
  run_free(&r);
  hwloc_topology_destroy(v.t);
}

/* Slurm ConstrainDevices: the step holds node GPUs 4,5; the task sees them as 0,1. */
static void test_constrained(void **state) {
  (void)state;
  view v;
  view_load(&v, T4);
  fake_env e = {{"CUDA_VISIBLE_DEVICES=1", "SLURM_STEP_GPUS=4,5"}};
  run_t r;
  run(&r, T4, 1, 2, &e);
  const gr__rank_plan *rp = &r.plan.ranks[1];
  assert_int_equal(rp->ngpus, 1);
  assert_string_equal(r.node.gpus[rp->gpu[0]].pci, v.pci[5]);
  assert_string_equal(env_of(&r.env, "CUDA_VISIBLE_DEVICES"), "1"); /* the form given */
  assert_true(hwloc_bitmap_isincluded(rp->cpuset, v.loc[5]->cpuset));
  assert_false(has_mps(&r.env));
  run_free(&r);
  /* node-wide ordinals (no ConstrainDevices): 5 is in the list and not below its length */
  fake_env e2 = {{"CUDA_VISIBLE_DEVICES=5", "SLURM_JOB_GPUS=4,5"}};
  run(&r, T4, 1, 2, &e2);
  assert_string_equal(r.node.gpus[r.plan.ranks[1].gpu[0]].pci, v.pci[5]);
  assert_string_equal(env_of(&r.env, "CUDA_VISIBLE_DEVICES"), "5");
  run_free(&r);
  /* the whole step's GPUs seen by every task: four tasks spread over the two, MPS halves */
  fake_env e3 = {{"CUDA_VISIBLE_DEVICES=0,1", "SLURM_STEP_GPUS=4,5"}};
  run(&r, T4, 3, 4, &e3);
  assert_int_equal(r.node.ngpus, 2);
  assert_string_equal(r.node.gpus[r.plan.ranks[3].gpu[0]].pci, v.pci[5]);
  assert_string_equal(env_of(&r.env, "CUDA_VISIBLE_DEVICES"), "1");
  assert_string_equal(env_of(&r.env, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "50");
  run_free(&r);
  hwloc_topology_destroy(v.t);
}

/* UUIDs: resolved through the XML's NVIDIAUUID, exported as given (a prefix stays a prefix). */
static void test_uuid(void **state) {
  (void)state;
  view v;
  view_load(&v, T4);
  char cvd[256], pfx[64];
  snprintf(cvd, sizeof cvd, "CUDA_VISIBLE_DEVICES=%s", v.uuid[6]);
  fake_env e = {{cvd}};
  run_t r;
  run(&r, T4, 0, 1, &e);
  assert_int_equal(r.plan.ranks[0].ngpus, 1);
  assert_string_equal(r.node.gpus[r.plan.ranks[0].gpu[0]].pci, v.pci[6]);
  assert_string_equal(env_of(&r.env, "CUDA_VISIBLE_DEVICES"), v.uuid[6]);
  run_free(&r);
  snprintf(pfx, sizeof pfx, "%.12s", v.uuid[3]);
  snprintf(cvd, sizeof cvd, "CUDA_VISIBLE_DEVICES=%s,%s", v.uuid[1], pfx);
  fake_env e2 = {{cvd}};
  run(&r, T4, 0, 2, &e2); /* mpirun, both tasks see both: spread, rank 0 on the first */
  assert_string_equal(r.node.gpus[r.plan.ranks[0].gpu[0]].pci, v.pci[1]);
  assert_string_equal(env_of(&r.env, "CUDA_VISIBLE_DEVICES"), v.uuid[1]);
  run_free(&r);
  run(&r, T4, 1, 2, &e2);
  assert_string_equal(env_of(&r.env, "CUDA_VISIBLE_DEVICES"), pfx);
  run_free(&r);
  hwloc_topology_destroy(v.t);
}

/* Never widen: -1 / empty are CPU-only and the variable is not rewritten; a MIG instance hwloc
 * does not list is kept as well; entries naming no GPU are errors. */
static void test_never_widen(void **state) {
  (void)state;
  const char *cpu_only[] = {"CUDA_VISIBLE_DEVICES=-1",
                            "CUDA_VISIBLE_DEVICES=", "CUDA_VISIBLE_DEVICES=NoDevFiles",
                            "CUDA_VISIBLE_DEVICES=MIG-4b5c1c6e-2a5f-5d4c-9d3f-0123456789ab"};
  for (size_t i = 0; i < sizeof cpu_only / sizeof cpu_only[0]; i++) {
    fake_env e = {{cpu_only[i]}};
    run_t r;
    run(&r, T4, 0, 2, &e);
    assert_int_equal(r.plan.ranks[0].ngpus, 0);
    assert_null(env_of(&r.env, "CUDA_VISIBLE_DEVICES"));
    assert_string_equal(env_of(&r.env, "GPURUN_GPUS"), "");
    assert_false(hwloc_bitmap_iszero(r.plan.ranks[0].cpuset));
    run_free(&r);
  }
  /* "0,-1,3": CUDA stops at the invalid entry, so only GPU 0 */
  fake_env e = {{"CUDA_VISIBLE_DEVICES=0,-1,3"}};
  run_t r;
  run(&r, T4, 0, 1, &e);
  assert_int_equal(r.plan.ranks[0].ngpus, 1);
  assert_string_equal(env_of(&r.env, "CUDA_VISIBLE_DEVICES"), "0");
  run_free(&r);
  const char *bad[][2] = {
      {"CUDA_VISIBLE_DEVICES=0,,1", NULL},
      {"CUDA_VISIBLE_DEVICES=0,", NULL},
      {"CUDA_VISIBLE_DEVICES=garbage", NULL},
      {"CUDA_VISIBLE_DEVICES=8", NULL},
      {"CUDA_VISIBLE_DEVICES=1,1", NULL},
      {"CUDA_VISIBLE_DEVICES=GPU-ffffffff", NULL},
      {"CUDA_VISIBLE_DEVICES=0", "SLURM_STEP_GPUS=8"},
      {"CUDA_VISIBLE_DEVICES=0", "SLURM_STEP_GPUS=1,x"},
      {"CUDA_VISIBLE_DEVICES=7", "SLURM_STEP_GPUS=4,5"},
      {"CUDA_VISIBLE_DEVICES=GPU-", NULL},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    fake_env eb = {{bad[i][0], bad[i][1]}};
    run(&r, T4, 0, 1, &eb);
    print_message("  %s %s -> %s\n", bad[i][0], bad[i][1] ? bad[i][1] : "", r.err);
    assert_int_equal(r.st, GR_ERR_INVALID);
    assert_null(strchr(r.err, '\n'));
    assert_true(strlen(r.err) > 10);
    run_free(&r);
  }
}

/* AMD: ROCR_VISIBLE_DEVICES, else GPU_DEVICE_ORDINAL, exported under the name it came in. */
static void test_amd(void **state) {
  (void)state;
  const char *F = "flux-tuolumne-4xMI300A-SPX.xml";
  view v;
  view_load(&v, F);
  fake_env e = {{"ROCR_VISIBLE_DEVICES=2"}};
  run_t r;
  run(&r, F, 0, 1, &e);
  assert_string_equal(r.node.gpus[r.plan.ranks[0].gpu[0]].pci, v.pci[2]);
  assert_string_equal(env_of(&r.env, "ROCR_VISIBLE_DEVICES"), "2");
  run_free(&r);
  fake_env e2 = {{"GPU_DEVICE_ORDINAL=3"}};
  run(&r, F, 0, 1, &e2);
  assert_string_equal(r.node.gpus[r.plan.ranks[0].gpu[0]].pci, v.pci[3]);
  assert_string_equal(env_of(&r.env, "GPU_DEVICE_ORDINAL"), "3");
  assert_null(env_of(&r.env, "ROCR_VISIBLE_DEVICES"));
  run_free(&r);
  /* the four MI300As of this recording all report AMDUUID 0: a UUID cannot choose among them */
  fake_env e3 = {{"ROCR_VISIBLE_DEVICES=GPU-0000000000000000"}};
  run(&r, F, 0, 1, &e3);
  assert_int_equal(r.st, GR_ERR_INVALID);
  assert_non_null(strstr(r.err, "several"));
  run_free(&r);
  hwloc_topology_destroy(v.t);
}

/* mpirun passes one CUDA_VISIBLE_DEVICES to every rank: each local rank computes the same plan
 * over that list (rank 0 must not take "0,1" for its own block). */
static void test_mpirun_same_plan(void **state) {
  (void)state;
  view v;
  view_load(&v, T4);
  fake_env e = {{"CUDA_VISIBLE_DEVICES=0,1", "OMPI_COMM_WORLD_LOCAL_RANK=0"}};
  run_t a, b;
  run(&a, T4, 0, 2, &e);
  run(&b, T4, 1, 2, &e);
  for (int r = 0; r < 2; r++) {
    assert_int_equal(a.plan.ranks[r].ngpus, 1);
    assert_int_equal(b.plan.ranks[r].ngpus, 1);
    assert_string_equal(a.node.gpus[a.plan.ranks[r].gpu[0]].pci, v.pci[r]);
    assert_string_equal(b.node.gpus[b.plan.ranks[r].gpu[0]].pci, v.pci[r]);
    assert_true(hwloc_bitmap_isequal(a.plan.ranks[r].cpuset, b.plan.ranks[r].cpuset));
  }
  assert_string_equal(env_of(&a.env, "CUDA_VISIBLE_DEVICES"), "0");
  assert_string_equal(env_of(&b.env, "CUDA_VISIBLE_DEVICES"), "1");
  run_free(&a);
  run_free(&b);
  hwloc_topology_destroy(v.t);
}

/* --visible-devices: own (the rank's), own-first (its own, then the others it may see, so
 * peers stay reachable), all (PCI order); never more than the task was given. */
static void test_visible_modes(void **state) {
  (void)state;
  gr__options o;
  gr__options_init(&o);
  const char *cfg = "visible-devices = own-first\n";
  assert_int_equal(gr__options_config_text(&o, cfg, strlen(cfg), "t.conf"), GR_OK);
  assert_int_equal(o.visible, GR__VISIBLE_OWN_FIRST);
  const char *bad = "visible-devices = some\n";
  assert_int_equal(gr__options_config_text(&o, bad, strlen(bad), "t.conf"), GR_ERR_INVALID);
  assert_non_null(strstr(gr_last_error(), "own, own-first or all"));
  /* mpirun, every rank sees "3,1,2" (ordinals): rank 1 of 3 holds GPU 2 */
  fake_env e = {{"CUDA_VISIBLE_DEVICES=3,1,2"}};
  const char *want[] = {"2", "2,1,3", "1,2,3"};
  for (int m = 0; m < 3; m++) {
    run_t r;
    memset(&r, 0, sizeof r);
    node_get(&r.node, T4);
    gr__visible vis;
    assert_int_equal(gr__visible_apply(&r.node, 1, 3, fake_get, &e, &vis), GR_OK);
    gr__node_plan_opts po = {.vis = &vis};
    assert_int_equal(gr__node_plan_compute(&r.node, 3, &po, &r.plan), GR_OK);
    gr__visible_free(&vis);
    o.visible = m;
    o.gpu_mem_limit = 1ull << 30;
    assert_int_equal(gr__plan_env(&r.node, &r.plan, 1, &o, &r.env), GR_OK);
    assert_string_equal(env_of(&r.env, "CUDA_VISIBLE_DEVICES"), want[m]);
    /* the memory cap names the rank's GPU at its ordinal in that list */
    assert_string_equal(env_of(&r.env, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"),
                        m == 2 ? "1=1024M" : "0=1024M");
    run_free(&r);
  }
  /* srun --gpus-per-task: the task was given only its own GPU; all/own-first add nothing */
  fake_env e2 = {
      {"CUDA_VISIBLE_DEVICES=1", "SLURM_STEP_GPUS=1", "SLURM_GPUS_ON_NODE=4", "SLURM_LOCALID=1"}};
  for (int m = 0; m < 3; m++) {
    run_t r;
    memset(&r, 0, sizeof r);
    node_get(&r.node, T4);
    gr__visible vis;
    assert_int_equal(gr__visible_apply(&r.node, 1, 4, fake_get, &e2, &vis), GR_OK);
    gr__node_plan_opts po = {.vis = &vis};
    assert_int_equal(gr__node_plan_compute(&r.node, 4, &po, &r.plan), GR_OK);
    gr__visible_free(&vis);
    o.visible = m;
    o.gpu_mem_limit = 0;
    assert_int_equal(gr__plan_env(&r.node, &r.plan, 1, &o, &r.env), GR_OK);
    assert_string_equal(env_of(&r.env, "CUDA_VISIBLE_DEVICES"), "1");
    run_free(&r);
  }
}

static int teardown(void **state) {
  (void)state;
  for (int i = 0; i < 4; i++)
    if (cache[i].file) gr__node_free(&cache[i].node);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gpus_per_task),
      cmocka_unit_test(test_one_gpu_alone),
      cmocka_unit_test(test_constrained),
      cmocka_unit_test(test_uuid),
      cmocka_unit_test(test_slurm_per_task),
      cmocka_unit_test(test_visible_modes),
      cmocka_unit_test(test_mpirun_same_plan),
      cmocka_unit_test(test_never_widen),
      cmocka_unit_test(test_amd),
  };
  return cmocka_run_group_tests(tests, NULL, teardown);
}
