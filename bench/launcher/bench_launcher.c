/* gpurun's two benchmarks, side by side in one run:
 *  1. startup: `true`, `hwloc-bind core:0 -- true`, `gpurun --topology F -- true` and live
 *     `gpurun -- true`, interleaved round by round (the machine is shared and noisy), median
 *     wall time and ratios;
 *  2. placement quality on every recorded topology, gpurun's plan against the naive "rank i ->
 *     GPU i, cores in blocks": the fraction of each rank's cores local to its GPU, and the
 *     fraction of ranks whose NIC is as near as the node allows -- both measured with this
 *     program's own hwloc calls.
 * usage: bench_launcher GPURUN TOPO_DIR [ROUNDS] */
#include "gr_launcher.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double run_once(char *const argv[]) {
  double t0 = now();
  pid_t pid = fork();
  if (pid == 0) {
    int fd = open("/dev/null", O_WRONLY);
    dup2(fd, 1);
    dup2(fd, 2);
    execvp(argv[0], argv);
    _exit(127);
  }
  int st;
  waitpid(pid, &st, 0);
  double t = now() - t0;
  return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? t : -1;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void startup(const char *gpurun, const char *xml, int rounds) {
  char *c_true[] = {"true", NULL};
  char *c_bind[] = {"hwloc-bind", "core:0", "--", "true", NULL};
  /* the same backends gpurun loads live: a fair second yardstick */
  char *c_bind2[] = {"env", "HWLOC_COMPONENTS=-gl,-opencl", "hwloc-bind", "core:0", "--", "true",
                     NULL};
  char *c_xml[] = {(char *)gpurun, "--topology", (char *)xml, "--", "true", NULL};
  char *c_live[] = {(char *)gpurun, "--", "true", NULL};
  char **cmds[] = {c_true, c_bind, c_bind2, c_xml, c_live};
  const char *names[] = {"true", "hwloc-bind core:0 -- true", "hwloc-bind, no GL/OpenCL (*)",
                         "gpurun --topology F -- true", "gpurun -- true (live)"};
  enum { NC = 5 };
  double *t[NC];
  int ok[NC] = {0};
  for (int c = 0; c < NC; c++)
    t[c] = calloc((size_t)rounds, sizeof(double));
  for (int c = 0; c < NC; c++)
    run_once(cmds[c]); /* warm the page cache */
  for (int r = 0; r < rounds; r++)
    for (int c = 0; c < NC; c++) {
      double v = run_once(cmds[c]);
      if (v >= 0) t[c][ok[c]++] = v;
    }
  double med[NC];
  for (int c = 0; c < NC; c++) {
    qsort(t[c], (size_t)ok[c], sizeof(double), cmp_d);
    med[c] = ok[c] ? t[c][ok[c] / 2] : -1;
  }
  printf("startup (%d interleaved rounds, median wall time per run; F = %s)\n", rounds,
         strrchr(xml, '/') + 1);
  printf("  %-30s %10s %10s %14s\n", "command", "median ms", "vs true", "vs hwloc-bind");
  for (int c = 0; c < NC; c++) {
    printf("  %-30s %10.2f %10.2f %14.2f%s\n", names[c], med[c] * 1e3, med[c] / med[0],
           med[c] / med[1], ok[c] < rounds ? "  (some runs failed)" : "");
    free(t[c]);
  }
  printf("  (*) env HWLOC_COMPONENTS=-gl,-opencl hwloc-bind ...: the backends gpurun skips live\n");
}

/* ---- placement quality ------------------------------------------------------------------ */
static hwloc_obj_t gpu_locality(hwloc_topology_t t, hwloc_obj_t pci) {
  hwloc_const_cpuset_t allowed = hwloc_topology_get_allowed_cpuset(t);
  hwloc_obj_t a = pci->parent;
  while (a && (!a->cpuset || !hwloc_bitmap_intersects(a->cpuset, allowed)))
    a = a->parent;
  return a;
}

/* 0 same PCIe switch, 1 same NUMA, 2 same package, 3 other (the bench's own reading) */
static int nic_level(hwloc_topology_t t, hwloc_obj_t gpu, hwloc_const_cpuset_t cpus,
                     hwloc_obj_t nic) {
  hwloc_obj_t np = nic->parent;
  for (hwloc_obj_t a = gpu ? gpu->parent : NULL; a && a->type == HWLOC_OBJ_BRIDGE; a = a->parent)
    if (a->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_PCI)
      for (hwloc_obj_t b = np; b; b = b->parent)
        if (b == a) return 0;
  hwloc_obj_t loc = gpu_locality(t, nic);
  int numas = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
  if (numas == 1 || !hwloc_bitmap_isequal(loc->cpuset, hwloc_topology_get_topology_cpuset(t)))
    for (hwloc_obj_t nn = NULL; (nn = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_NUMANODE, nn));)
      if (hwloc_bitmap_intersects(nn->cpuset, loc->cpuset) &&
          hwloc_bitmap_intersects(nn->cpuset, cpus))
        return 1;
  for (hwloc_obj_t p = loc; p; p = p->parent)
    if (p->type == HWLOC_OBJ_PACKAGE) return hwloc_bitmap_intersects(p->cpuset, cpus) ? 2 : 3;
  return 3;
}

typedef struct {
  double core_local, nic_best;
} quality;

/* Score rank r with GPU pci `gpu` (NULL none), cpuset `cpus`, nic object `nic` (NULL none). */
static void score(hwloc_topology_t t, hwloc_obj_t gpu, hwloc_const_cpuset_t cpus, hwloc_obj_t nic,
                  hwloc_obj_t *nics, int nnics, quality *q) {
  hwloc_const_cpuset_t allowed = hwloc_topology_get_allowed_cpuset(t);
  int C = hwloc_get_nbobjs_inside_cpuset_by_type(t, allowed, HWLOC_OBJ_CORE), in = 0, all = 0;
  hwloc_obj_t loc = gpu ? gpu_locality(t, gpu) : NULL;
  for (int c = 0; c < C; c++) {
    hwloc_obj_t core = hwloc_get_obj_inside_cpuset_by_type(t, allowed, HWLOC_OBJ_CORE, (unsigned)c);
    if (!hwloc_bitmap_intersects(core->cpuset, cpus)) continue;
    all++;
    if (!loc || hwloc_bitmap_intersects(core->cpuset, loc->cpuset)) in++;
  }
  q->core_local += all ? (double)in / all : 0;
  if (nnics) {
    int best = 9;
    for (int i = 0; i < nnics; i++) {
      int l = nic_level(t, gpu, cpus, nics[i]);
      if (l < best) best = l;
    }
    q->nic_best += nic && nic_level(t, gpu, cpus, nic) == best;
  }
}

static void quality_table(const char *dir) {
  struct dirent **ents;
  int n = scandir(dir, &ents, NULL, alphasort);
  printf("\nplacement quality (mean over ranks; 1.0 = every core next to the rank's GPU / every "
         "NIC as near as possible)\n");
  printf("  %-34s %5s %6s | %-15s | %-15s\n", "topology", "ranks", "cores", "cores local",
         "NIC nearest");
  printf("  %-34s %5s %6s | %7s %7s | %7s %7s\n", "", "", "", "gpurun", "naive", "gpurun", "naive");
  for (int e = 0; e < n; e++) {
    const char *name = ents[e]->d_name;
    size_t l = strlen(name);
    if (l < 5 || strcmp(name + l - 4, ".xml") != 0) {
      free(ents[e]);
      continue;
    }
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    gr__node node;
    if (gr__node_load(&node, path) != GR_OK) {
      printf("  %-34s %s\n", name, gr_last_error());
      free(ents[e]);
      continue;
    }
    hwloc_topology_t t;
    hwloc_topology_init(&t);
    hwloc_topology_set_xml(t, path);
    hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_ALL);
    hwloc_topology_load(t);
    hwloc_const_cpuset_t allowed = hwloc_topology_get_allowed_cpuset(t);
    int C = hwloc_get_nbobjs_inside_cpuset_by_type(t, allowed, HWLOC_OBJ_CORE);
    hwloc_obj_t nics[16];
    int nnics = 0;
    for (int i = 0; i < node.nnics && i < 16; i++)
      nics[nnics++] = node.nics[i].osdev;
    int G = node.ngpus;
    int sizes[] = {G, 2 * G, G > C ? C : 0};
    for (int s = 0; s < 3; s++) {
      int N = sizes[s];
      if (N < 1 || N > C) continue;
      gr__node_plan_opts po = {0};
      gr__node_plan p;
      if (gr__node_plan_compute(&node, N, &po, &p) != GR_OK) continue;
      quality qg = {0}, qn = {0};
      hwloc_bitmap_t naive = hwloc_bitmap_alloc();
      for (int r = 0; r < N; r++) {
        const gr__rank_plan *rp = &p.ranks[r];
        score(t, rp->ngpus ? hwloc_get_pcidev_by_busidstring(t, node.gpus[rp->gpu[0]].pci) : NULL,
              rp->cpuset, rp->nic >= 0 ? nics[rp->nic] : NULL, nics, nnics, &qg);
        /* naive: GPU r mod G, cores [r*C/N, (r+1)*C/N), NIC r mod nnics */
        hwloc_bitmap_zero(naive);
        for (int c = r * C / N; c < (r + 1) * C / N; c++)
          hwloc_bitmap_or(
              naive, naive,
              hwloc_get_obj_inside_cpuset_by_type(t, allowed, HWLOC_OBJ_CORE, (unsigned)c)->cpuset);
        hwloc_bitmap_and(naive, naive, allowed);
        score(t, hwloc_get_pcidev_by_busidstring(t, node.gpus[r % G].pci), naive,
              nnics ? nics[r % nnics] : NULL, nics, nnics, &qn);
      }
      hwloc_bitmap_free(naive);
      if (nnics)
        printf("  %-34s %5d %6d | %7.3f %7.3f | %7.3f %7.3f\n", name, N, C, qg.core_local / N,
               qn.core_local / N, qg.nic_best / N, qn.nic_best / N);
      else
        printf("  %-34s %5d %6d | %7.3f %7.3f | %7s %7s\n", name, N, C, qg.core_local / N,
               qn.core_local / N, "-", "-");
      gr__node_plan_free(&p);
    }
    hwloc_topology_destroy(t);
    gr__node_free(&node);
    free(ents[e]);
  }
  free(ents);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s GPURUN TOPO_DIR [ROUNDS]\n", argv[0]);
    return 2;
  }
  int rounds = argc > 3 ? atoi(argv[3]) : 40;
  if (rounds < 1) rounds = 1;
  char xml[2048];
  snprintf(xml, sizeof xml, "%s/mpibind-lassen-p9-4xV100.xml", argv[2]);
  startup(argv[1], xml, rounds);
  quality_table(argv[2]);
  return 0;
}
