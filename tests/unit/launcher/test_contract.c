/* The plan contract end to end: what gpurun exports for a rank is read back by the runtime's own
 * parser (base/plan.c, gr__plan_parse) on every recorded topology, at local sizes 1 and GPUs,
 * and the runtime must see the same GPUs, cpuset, NUMA nodes and NIC. */
#include "gr_launcher.h"
#include "gr_plan.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static const char *files[] = {"hwloc-nvidia-dgx2.xml",        "hwloc-power8-minsky-4xP100.xml",
                              "mpibind-lassen-p9-4xV100.xml", "mpibind-aws-g4dn-metal-8xT4.xml",
                              "mpibind-pascal-2xP100.xml",    "flux-tuolumne-4xMI300A-SPX.xml"};

static void check_rank(const gr__node *n, const gr__node_plan *p, int r, int smt) {
  gr__envlist e;
  assert_int_equal(gr__plan_env(n, p, r, NULL, &e), GR_OK);
  char *envp[GR__MAX_ENV + 1];
  for (int i = 0; i < e.n; i++) {
    envp[i] = NULL;
    assert_true(asprintf(&envp[i], "%s=%s", e.name[i], e.value[i]) > 0);
  }
  envp[e.n] = NULL;
  gr_plan info;
  memset(&info, 0, sizeof info);
  gr_status st = gr__plan_parse(envp, &info);
  if (st != GR_OK)
    fail_msg("rank %d%s: runtime rejects the plan: %s", r, smt ? " (smt)" : "", gr_last_error());
  const gr__rank_plan *rp = &p->ranks[r];
  assert_int_equal(info.from_plan, 1);
  assert_int_equal(info.local_rank, r);
  assert_int_equal(info.local_size, p->local_size);
  assert_int_equal(info.ngpus, rp->ngpus);
  for (int i = 0; i < rp->ngpus; i++)
    assert_string_equal(info.gpus[i], n->gpus[rp->gpu[i]].pci);
  hwloc_bitmap_t b = hwloc_bitmap_alloc();
  assert_int_equal(hwloc_bitmap_list_sscanf(b, info.cpus), 0);
  assert_true(hwloc_bitmap_isequal(b, rp->cpuset));
  hwloc_bitmap_free(b);
  assert_int_equal(info.numa, hwloc_bitmap_first(rp->nodeset));
  b = hwloc_bitmap_alloc(); /* the whole list, for the receipt's memory check */
  if (info.numa_nodes[0]) assert_int_equal(hwloc_bitmap_list_sscanf(b, info.numa_nodes), 0);
  assert_true(hwloc_bitmap_isequal(b, rp->nodeset));
  hwloc_bitmap_free(b);
  assert_string_equal(info.nic, rp->nic >= 0 ? n->nics[rp->nic].name : "");
  for (int i = 0; i < e.n; i++)
    free(envp[i]);
  gr__envlist_free(&e);
}

static void test_runtime_reads_plan(void **state) {
  (void)state;
  for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", GR_TOPO_DIR, files[f]);
    gr__node n;
    assert_int_equal(gr__node_load(&n, path), GR_OK);
    int sizes[] = {1, n.ngpus};
    for (int s = 0; s < 2; s++)
      for (int smt = 0; smt < 2; smt++) {
        gr__node_plan p;
        gr__node_plan_opts po = {.smt = smt};
        assert_int_equal(gr__node_plan_compute(&n, sizes[s], &po, &p), GR_OK);
        print_message("  %s N=%d%s\n", files[f], sizes[s], smt ? " smt" : "");
        for (int r = 0; r < sizes[s]; r++)
          check_rank(&n, &p, r, smt);
        gr__node_plan_free(&p);
      }
    gr__node_free(&n);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_runtime_reads_plan)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
