/* The placement receipt: what this process really got, checked against gpurun's plan inside
 * gr_init (after MPI_Init, which some MPI libraries use to rebind the process). Each check runs
 * only for what gpurun says it applied (the plan's bound) or exported. */
#include "gr_receipt.h"

#include "gr_config.h"
#include "gr_plan.h"
#include "gr_strbuf.h"

#include <hwloc.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#if GPURUN_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

static void add(gr_rank_info_t *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(gr_rank_info_t *r, const char *fmt, ...) {
  gr__strbuf sb;
  gr__strbuf_init_tail(&sb, r->receipt, sizeof r->receipt);
  if (gr__strbuf_len(&sb) + 3 >= sizeof r->receipt) return;
  if (gr__strbuf_len(&sb)) gr__strbuf_append(&sb, "; ", 2);
  va_list ap;
  va_start(ap, fmt);
  gr__strbuf_vappendf(&sb, fmt, ap);
  va_end(ap);
  r->receipt_differs++;
}

static void check_cpus(gr_rank_info_t *r, const char *planned) {
  hwloc_bitmap_t want = hwloc_bitmap_alloc(), got = hwloc_bitmap_alloc();
  cpu_set_t cs;
  if (want && got && planned[0] && hwloc_bitmap_list_sscanf(want, planned) == 0 &&
      sched_getaffinity(0, sizeof cs, &cs) == 0) {
    for (int c = 0; c < CPU_SETSIZE; c++)
      if (CPU_ISSET(c, &cs)) hwloc_bitmap_set(got, (unsigned)c);
    if (!hwloc_bitmap_isequal(want, got)) {
      char g[128];
      hwloc_bitmap_list_snprintf(g, sizeof g, got);
      add(r, "cpus planned %.60s, got %s", planned, g);
    }
  }
  hwloc_bitmap_free(want);
  hwloc_bitmap_free(got);
}

/* The memory policy's nodes (get_mempolicy: no libnuma needed). */
static void check_mem(gr_rank_info_t *r, const char *planned) {
  unsigned long mask[16] = {0};
  int mode = -1;
  if (!planned[0] || syscall(SYS_get_mempolicy, &mode, mask, sizeof mask * 8, NULL, 0UL) != 0)
    return;
  hwloc_bitmap_t want = hwloc_bitmap_alloc(), got = hwloc_bitmap_alloc();
  if (want && got && hwloc_bitmap_list_sscanf(want, planned) == 0) {
    for (unsigned i = 0; i < sizeof mask * 8; i++)
      if (mask[i / (8 * sizeof mask[0])] >> (i % (8 * sizeof mask[0])) & 1UL)
        hwloc_bitmap_set(got, i);
    if (mode == 0 /* MPOL_DEFAULT */ || !hwloc_bitmap_isequal(want, got)) {
      char g[128] = "default";
      if (mode != 0) hwloc_bitmap_list_snprintf(g, sizeof g, got);
      add(r, "memory planned on NUMA %.40s, policy %s", planned, g);
    }
  }
  hwloc_bitmap_free(want);
  hwloc_bitmap_free(got);
}

static void check_nic(gr_rank_info_t *r, char *const *envp) {
  if (!r->nic[0]) return;
  const char *ucx = gr__env_lookup(envp, "UCX_NET_DEVICES");
  char want[72];
  snprintf(want, sizeof want, "%s", r->nic);
  /* entries are "mlx5_0:1" or "hsi0": compare the device part */
  for (const char *p = ucx; p && *p;) {
    size_t len = strcspn(p, ","), dev = strcspn(p, ":,");
    if (dev == strlen(want) && strncmp(p, want, dev) == 0) return;
    p += len + (p[len] == ',');
  }
  add(r, "NIC planned %.40s, UCX_NET_DEVICES=%.60s", r->nic, ucx ? ucx : "(unset)");
}

#if GPURUN_HAVE_CUDA
static void check_gpu(gr_rank_info_t *r) {
  int dev = -1, n = 0;
  if (r->ngpus == 0 || cudaGetDeviceCount(&n) != cudaSuccess || n <= 0 ||
      cudaGetDevice(&dev) != cudaSuccess)
    return;
  char bus[32];
  unsigned a[4], b[4];
  if (cudaDeviceGetPCIBusId(bus, (int)sizeof bus, dev) != cudaSuccess) return;
  if (sscanf(bus, "%x:%x:%x.%x", &a[0], &a[1], &a[2], &a[3]) != 4 ||
      sscanf(r->gpus[0], "%x:%x:%x.%x", &b[0], &b[1], &b[2], &b[3]) != 4 ||
      memcmp(a, b, sizeof a) != 0)
    add(r, "GPU planned %s, CUDA device %d is %s", r->gpus[0], dev, bus);
}
#endif

int gr__receipt_check(gr_rank_info_t *r, const gr_plan *plan, char *const *envp) {
  r->receipt[0] = 0;
  r->receipt_differs = 0;
  if (!plan->from_plan) {
    r->receipt_differs = -1;
    return -1;
  }
  if (plan->bound < 0) return 0; /* a plan not from a gpurun that records what it applied */
  if (plan->bound & GR_PLAN_BOUND_CPU) check_cpus(r, plan->cpus);
  if (plan->bound & GR_PLAN_BOUND_MEM) check_mem(r, plan->numa_nodes);
  check_nic(r, envp);
#if GPURUN_HAVE_CUDA
  check_gpu(r);
#endif
  return r->receipt_differs;
}
