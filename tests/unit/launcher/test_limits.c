/* The planner at its limits, on a synthetic node written by this test: 2 packages x 64 cores,
 * 16 NVIDIA PCI functions with 8 partitions each (16 GPUs x 7 MIG slices and more) = 128 GPUs.
 * One per-rank GPU limit (GR_MAX_RANK_GPUS) for the launcher and the runtime's plan parser;
 * 100000 local ranks plan without a crash (run it under ASan/UBSan); FIFOs, directories and
 * devices are refused as --topology, not waited on; the -v list of the user's OMP_* is cut at its
 * buffer and shows control characters as '?'. */
#include "gr_launcher.h"
#include "gr_plan.h"
#include "gr_test_clock.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#define FUNCS 16
#define PARTS 8
#define CORES 64 /* per package */

static char xml_path[64];

/* cpuset "0x........,0x........" of PUs [lo, hi) in hwloc's XML form (32-bit words, high first) */
static void mask(char *out, size_t len, int lo, int hi, int total) {
  int words = (total + 31) / 32;
  size_t o = 0;
  for (int w = words - 1; w >= 0; w--) {
    unsigned v = 0;
    for (int b = 0; b < 32; b++) {
      int pu = w * 32 + b;
      if (pu >= lo && pu < hi) v |= 1u << b;
    }
    o += (size_t)snprintf(out + o, len - o, "%s0x%08x", w == words - 1 ? "" : ",", v);
  }
}

static int write_node(void) {
  snprintf(xml_path, sizeof xml_path, "/tmp/gpurun-synth-XXXXXX");
  int fd = mkstemp(xml_path);
  if (fd < 0) return -1;
  FILE *f = fdopen(fd, "w");
  int total = 2 * CORES, gp = 1;
  char m[256];
  mask(m, sizeof m, 0, total, total);
  fprintf(f,
          "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!DOCTYPE topology SYSTEM \"hwloc2.dtd\">\n"
          "<topology version=\"2.0\">\n<object type=\"Machine\" os_index=\"0\" cpuset=\"%s\" "
          "complete_cpuset=\"%s\" allowed_cpuset=\"%s\" nodeset=\"0x3\" complete_nodeset=\"0x3\" "
          "allowed_nodeset=\"0x3\" gp_index=\"%d\">\n",
          m, m, m, gp++);
  for (int p = 0; p < 2; p++) {
    mask(m, sizeof m, p * CORES, (p + 1) * CORES, total);
    fprintf(f,
            " <object type=\"Package\" os_index=\"%d\" cpuset=\"%s\" complete_cpuset=\"%s\" "
            "nodeset=\"0x%x\" complete_nodeset=\"0x%x\" gp_index=\"%d\">\n",
            p, m, m, 1 << p, 1 << p, gp++);
    fprintf(f,
            "  <object type=\"NUMANode\" os_index=\"%d\" cpuset=\"%s\" complete_cpuset=\"%s\" "
            "nodeset=\"0x%x\" complete_nodeset=\"0x%x\" gp_index=\"%d\" "
            "local_memory=\"1073741824\"/>\n",
            p, m, m, 1 << p, 1 << p, gp++);
    for (int c = p * CORES; c < (p + 1) * CORES; c++) {
      mask(m, sizeof m, c, c + 1, total);
      fprintf(f,
              "  <object type=\"Core\" os_index=\"%d\" cpuset=\"%s\" complete_cpuset=\"%s\" "
              "nodeset=\"0x%x\" complete_nodeset=\"0x%x\" gp_index=\"%d\">\n"
              "   <object type=\"PU\" os_index=\"%d\" cpuset=\"%s\" complete_cpuset=\"%s\" "
              "nodeset=\"0x%x\" complete_nodeset=\"0x%x\" gp_index=\"%d\"/>\n  </object>\n",
              c, m, m, 1 << p, 1 << p, gp, c, m, m, 1 << p, 1 << p, gp + 1);
      gp += 2;
    }
    fprintf(f,
            "  <object type=\"Bridge\" gp_index=\"%d\" bridge_type=\"0-1\" depth=\"0\" "
            "bridge_pci=\"0000:[%02x-%02x]\">\n",
            gp++, p * 0x80, p * 0x80 + 0x7f);
    for (int g = 0; g < FUNCS / 2; g++) {
      int bus = p * 0x80 + 0x10 + g;
      fprintf(f,
              "   <object type=\"PCIDev\" gp_index=\"%d\" pci_busid=\"0000:%02x:00.0\" "
              "pci_type=\"0302 [10de:20b0] [10de:1450] a1\" pci_link_speed=\"0.000000\">\n",
              gp++, bus);
      for (int s = 0; s < PARTS; s++)
        fprintf(f,
                "    <object type=\"OSDev\" gp_index=\"%d\" name=\"nvml%d\" subtype=\"NVML\" "
                "osdev_type=\"1\"/>\n",
                gp++, (p * FUNCS / 2 + g) * PARTS + s);
      fprintf(f, "   </object>\n");
    }
    fprintf(f, "  </object>\n </object>\n");
  }
  fprintf(f, "</object>\n</topology>\n");
  return fclose(f);
}

static int setup(void **state) {
  (void)state;
  return write_node();
}

static int teardown(void **state) {
  (void)state;
  unlink(xml_path);
  return 0;
}

static const char *env_of(const gr__envlist *e, const char *name) {
  for (int i = 0; i < e->n; i++)
    if (strcmp(e->name[i], name) == 0) return e->value[i];
  return NULL;
}

/* 128 GPUs on one rank: planned, exported, and read back by the runtime's parser. */
static void test_128_gpus_one_rank(void **state) {
  (void)state;
  assert_true(GR__MAX_RANK_GPUS >= 16 * 7);
  gr__node n;
  assert_int_equal(gr__node_load(&n, xml_path), GR_OK);
  assert_int_equal(n.ngpus, FUNCS * PARTS);
  gr__node_plan p;
  gr__node_plan_opts po = {0};
  assert_int_equal(gr__node_plan_compute(&n, 1, &po, &p), GR_OK);
  assert_int_equal(p.ranks[0].ngpus, 128);
  gr__envlist e;
  assert_int_equal(gr__plan_env(&n, &p, 0, NULL, &e), GR_OK);
  const char *gpus = env_of(&e, "GPURUN_GPUS");
  int commas = 0;
  for (const char *c = gpus; *c; c++)
    commas += *c == ',';
  assert_int_equal(commas, 127);
  /* the runtime reads the same plan: all 128, none dropped */
  char *envp[8] = {0};
  char b0[64], b1[64], b2[64];
  char *b3 = malloc(strlen(gpus) + 16);
  snprintf(b0, sizeof b0, "GPURUN_PLAN_VERSION=%s", GR_PLAN_VERSION);
  snprintf(b1, sizeof b1, "GPURUN_LOCAL_RANK=0");
  snprintf(b2, sizeof b2, "GPURUN_LOCAL_SIZE=1");
  sprintf(b3, "GPURUN_GPUS=%s", gpus);
  envp[0] = b0, envp[1] = b1, envp[2] = b2, envp[3] = b3;
  gr_plan ri;
  assert_int_equal(gr__plan_parse(envp, &ri), GR_OK);
  assert_int_equal(ri.ngpus, 128);
  assert_string_equal(ri.gpus[127], "0000:97:00.0");
  free(b3);
  gr__envlist_free(&e);
  gr__node_plan_free(&p);
  /* --gpus-per-rank 90 fits; more than the node has is refused */
  po.gpus_per_rank = 90;
  assert_int_equal(gr__node_plan_compute(&n, 1, &po, &p), GR_OK);
  assert_int_equal(p.ranks[0].ngpus, 90);
  gr__node_plan_free(&p);
  po.gpus_per_rank = 129;
  assert_int_equal(gr__node_plan_compute(&n, 1, &po, &p), GR_ERR_INVALID);
  gr__node_free(&n);
}

/* A task given all 128 GPUs by the environment: two local ranks spread over them, 64 each. */
static void test_visible_all_128(void **state) {
  (void)state;
  gr__node n;
  assert_int_equal(gr__node_load(&n, xml_path), GR_OK);
  gr__visible v;
  memset(&v, 0, sizeof v);
  /* "0,1,...,127" as a scheduler would give one task of two */
  char *list = malloc(128 * 4 + 32), *w = list;
  for (int g = 0; g < 128; g++)
    w += sprintf(w, "%s%d", g ? "," : "", g);
  assert_int_equal(setenv("CUDA_VISIBLE_DEVICES", list, 1), 0);
  assert_int_equal(gr__visible_apply(&n, 1, 2, gr__real_getenv, NULL, &v), GR_OK);
  unsetenv("CUDA_VISIBLE_DEVICES");
  gr__node_plan p;
  gr__node_plan_opts po = {.vis = &v};
  assert_int_equal(gr__node_plan_compute(&n, 2, &po, &p), GR_OK);
  assert_int_equal(p.ranks[1].ngpus, 64);
  gr__node_plan_free(&p);
  gr__visible_free(&v);
  free(list);
  gr__node_free(&n);
}

/* 100000 local ranks on 128 cores and 128 GPUs: every rank planned, cores shared evenly. */
static void test_huge_local_size(void **state) {
  (void)state;
  gr__node n;
  assert_int_equal(gr__node_load(&n, xml_path), GR_OK);
  gr__node_plan p;
  gr__node_plan_opts po = {0};
  double t0 = gr_test_now();
  assert_int_equal(gr__node_plan_compute(&n, 100000, &po, &p), GR_OK);
  print_message("  planning 100000 local ranks: %.3f s\n", gr_test_now() - t0);
  int *per_core = calloc(128, sizeof(int)), *per_gpu = calloc(128, sizeof(int));
  for (int r = 0; r < 100000; r++) {
    assert_int_equal(p.ranks[r].ngpus, 1);
    assert_int_equal(hwloc_bitmap_weight(p.ranks[r].cpuset), 1);
    per_core[hwloc_bitmap_first(p.ranks[r].cpuset)]++;
    per_gpu[p.ranks[r].gpu[0]]++;
  }
  for (int i = 0; i < 128; i++) {
    assert_in_range(per_core[i], 100000 / 128, 100000 / 128 + 1);
    assert_in_range(per_gpu[i], 100000 / 128, 100000 / 128 + 1);
  }
  assert_int_equal(p.ranks[99999].sharers, per_gpu[p.ranks[99999].gpu[0]]);
  free(per_core), free(per_gpu);
  gr__envlist e;
  assert_int_equal(gr__plan_env(&n, &p, 99999, NULL, &e), GR_OK);
  assert_string_equal(env_of(&e, "GPURUN_LOCAL_RANK"), "99999");
  gr__envlist_free(&e);
  gr__node_plan_free(&p);
  assert_int_equal(gr__node_plan_compute(&n, (1 << 20) + 1, &po, &p), GR_ERR_INVALID);
  gr__node_free(&n);
}

/* Not regular files: refused at once with one line, never waited on (a FIFO has no writer). */
static void test_not_regular(void **state) {
  (void)state;
  char fifo[] = "/tmp/gpurun-fifo-XXXXXX";
  int fd = mkstemp(fifo);
  assert_true(fd >= 0);
  close(fd);
  unlink(fifo);
  assert_int_equal(mkfifo(fifo, 0600), 0);
  const char *paths[] = {fifo, "/tmp", "/dev/null"};
  for (int i = 0; i < 3; i++) {
    gr__node n;
    assert_int_equal(gr__node_load(&n, paths[i]), GR_ERR_TOPOLOGY);
    assert_non_null(strstr(gr_last_error(), "not a regular file"));
    gr__options o;
    gr__options_init(&o);
    char *argv[] = {"gpurun", "--config", (char *)paths[i], "true", NULL};
    assert_int_equal(gr__options_parse(&o, 4, argv, gr__real_getenv, NULL), GR_ERR_INVALID);
    assert_non_null(strstr(gr_last_error(), "not a regular file"));
  }
  unlink(fifo);
}

/* The user's OMP_* values as a hostile environment holds them: a control character, a long value. */
static const char *omp_get(void *ctx, const char *name) {
  (void)ctx;
  if (!strcmp(name, "OMP_NUM_THREADS")) return "4\033[31mX";
  if (!strcmp(name, "OMP_PROC_BIND")) return "true";
  return NULL;
}

static void omp_list(gr__envlist *e) {
  static const char *const names[] = {"OMP_NUM_THREADS", "GPURUN_CPUS", "OMP_PROC_BIND",
                                      "OMP_PLACES"};
  e->n = 0;
  for (int i = 0; i < 4; i++) {
    e->name[e->n] = strdup(names[i]);
    e->value[e->n++] = strdup("planned");
  }
}

/* The kept list for -v: the user's values with control characters shown as '?', joined by ", ";
 * a list longer than its buffer is cut, still terminated; the user's OMP_* leave the plan's list. */
static void test_kept_omp_list(void **state) {
  (void)state;
  gr__envlist e;
  char kept[128];
  omp_list(&e);
  gr__envlist_keep_user_omp(&e, NULL, omp_get, NULL, kept, sizeof kept);
  assert_string_equal(kept, "OMP_NUM_THREADS=4?[31mX, OMP_PROC_BIND=true");
  assert_int_equal(e.n, 2);
  assert_string_equal(e.name[0], "GPURUN_CPUS");
  assert_string_equal(e.name[1], "OMP_PLACES");
  gr__envlist_free(&e);

  char small[12];
  omp_list(&e);
  gr__envlist_keep_user_omp(&e, NULL, omp_get, NULL, small, sizeof small);
  assert_string_equal(small, "OMP_NUM_THR");
  gr__envlist_free(&e);

  omp_list(&e); /* no buffer: the list still loses the user's variables */
  gr__envlist_keep_user_omp(&e, NULL, omp_get, NULL, NULL, 0);
  assert_int_equal(e.n, 2);
  gr__envlist_free(&e);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_kept_omp_list),   cmocka_unit_test(test_128_gpus_one_rank),
      cmocka_unit_test(test_visible_all_128), cmocka_unit_test(test_huge_local_size),
      cmocka_unit_test(test_not_regular),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
