/* A stand-in libnvidia-ml with fixed, known readings, so the NVML paths are tested on machines
 * without a GPU. Two device sets:
 * - default: two GPUs, 0000:17:00.0 and 0000:65:00.0, identical readings (test_telemetry);
 * - GR_FAKE_NVML=node4: the four GPUs of configs/topologies/mpibind-lassen-p9-4xV100.xml, each
 *   with a story the tests check:
 *     0 0004:04:00.0 healthy and busy (90%), per-process rows: every child process of the caller
 *                    and the process GPURUN_PLAN_PID names when it is not the caller (a
 *                    supervisor's program: gpurun's pid, which the program keeps) 60% SM / 1 GiB,
 *                    and pid 1, a co-tenant, 25% / 512 MiB
 *     1 0004:05:00.0 ECC: 3 volatile uncorrected errors, 1 page pending retirement
 *     2 0035:03:00.0 throttling: HW + SW thermal slowdown (0x60), 92 C against a slowdown at 88 C
 *     3 0035:04:00.0 MIG mode with two MIG devices (their own handles and readings)
 *   GR_FAKE_NVML_HOT0=1 makes GPU 0 hot as well (HW thermal slowdown, 95 C) in this process only,
 *   GR_FAKE_NVML_ALL_ECC=1 gives every GPU an uncorrected ECC error (nothing healthy left),
 *   GR_FAKE_NVML_IDLE0=1 makes GPU 0 idle (no memory in use, 0%) in this process only.
 * Only the entry points gpurun uses. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
  unsigned int gpu, memory;
} util_t;
typedef struct {
  unsigned long long total, free, used;
} mem_t;
typedef struct {
  char legacy[16];
  unsigned int domain, bus, device, devid, subsys;
  char bus_id[32];
} pci_t;
/* nvmlProcessInfo_t (v2 layout: pid, usedGpuMemory, gpuInstanceId, computeInstanceId) */
typedef struct {
  unsigned int pid;
  unsigned long long used;
  unsigned int gi, ci;
} proc_t;
/* nvmlProcessUtilizationSample_t */
typedef struct {
  unsigned int pid;
  unsigned long long ts;
  unsigned int sm, mem, enc, dec;
} putil_t;

typedef struct {
  int domain, bus;
  unsigned util, mutil, temp, slow_temp, mw;
  unsigned long long used_mib, total_mib, throttle, ecc, pending;
  int mig; /* 1: MIG enabled with 2 MIG devices; -1: this is a MIG device */
} dev_t_;

static dev_t_ def[2] = {{0, 0x17, 77, 33, 61, 88, 312500, 2048, 81920, 4, 2, 0, 0},
                        {0, 0x65, 77, 33, 61, 88, 312500, 2048, 81920, 4, 2, 0, 0}};
static dev_t_ node4[4] = {{4, 4, 90, 40, 60, 88, 250000, 1536, 32768, 0, 0, 0, 0},
                          {4, 5, 5, 1, 45, 88, 60000, 0, 32768, 0, 3, 1, 0},
                          {0x35, 3, 50, 20, 92, 88, 200000, 1024, 32768, 0x60, 0, 0, 0},
                          {0x35, 4, 30, 10, 50, 88, 100000, 4096, 40960, 0, 0, 0, 1}};
static dev_t_ migs[2] = {{0x35, 4, 40, 10, 50, 88, 0, 2048, 20480, 0, 0, 0, -1},
                         {0x35, 4, 20, 10, 50, 88, 0, 2048, 20480, 0, 0, 0, -1}};
static int up;

static int is_node4(void) {
  const char *v = getenv("GR_FAKE_NVML");
  return v && !strcmp(v, "node4");
}
static dev_t_ *table(unsigned *n) {
  if (is_node4()) {
    *n = 4;
    return node4;
  }
  *n = 2;
  return def;
}
static int env_on(const char *name) {
  const char *v = getenv(name);
  return v && !strcmp(v, "1");
}
static dev_t_ *D(void *d) {
  dev_t_ *x = (dev_t_ *)d;
  if (is_node4() && x == &node4[0] && env_on("GR_FAKE_NVML_HOT0")) x->throttle = 0x40, x->temp = 95;
  if (is_node4() && env_on("GR_FAKE_NVML_ALL_ECC") && x->mig >= 0 && !x->ecc) x->ecc = 1;
  if (is_node4() && x == &node4[0] && env_on("GR_FAKE_NVML_IDLE0")) x->used_mib = 0, x->util = 0;
  return x;
}

int nvmlInit_v2(void) {
  up++;
  return 0;
}
int nvmlShutdown(void) {
  up--;
  return 0;
}
const char *nvmlErrorString(int rc) {
  return rc == 6 ? "Not Found" : rc == 3 ? "Not Supported" : "Unknown Error";
}
int nvmlDeviceGetCount_v2(unsigned int *n) {
  table(n);
  return 0;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned int i, void **d) {
  unsigned n;
  dev_t_ *t = table(&n);
  if (i >= n) return 2;
  *d = &t[i];
  return 0;
}
int nvmlDeviceGetIndex(void *d, unsigned int *i) {
  unsigned n;
  dev_t_ *t = table(&n);
  if (D(d)->mig < 0) return 3;
  *i = (unsigned)(D(d) - t);
  return 0;
}
int nvmlDeviceGetHandleByPciBusId_v2(const char *id, void **d) {
  unsigned dom, bus, dev, fn, n;
  if (sscanf(id, "%x:%x:%x.%x", &dom, &bus, &dev, &fn) != 4) return 2;
  dev_t_ *t = table(&n);
  for (unsigned i = 0; i < n; i++)
    if ((int)bus == t[i].bus && (int)dom == t[i].domain) {
      *d = &t[i];
      return 0;
    }
  return 6;
}
int nvmlDeviceGetUtilizationRates(void *d, util_t *u) {
  u->gpu = D(d)->util;
  u->memory = D(d)->mutil;
  return 0;
}
int nvmlDeviceGetMemoryInfo(void *d, mem_t *m) {
  m->total = D(d)->total_mib << 20;
  m->used = D(d)->used_mib << 20;
  m->free = m->total - m->used;
  return 0;
}
int nvmlDeviceGetTemperature(void *d, int s, unsigned int *t) {
  (void)s;
  *t = D(d)->temp;
  return 0;
}
/* NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = 1 */
int nvmlDeviceGetTemperatureThreshold(void *d, int which, unsigned int *t) {
  if (which != 1) return 3;
  *t = D(d)->slow_temp;
  return 0;
}
int nvmlDeviceGetPowerUsage(void *d, unsigned int *mw) {
  if (D(d)->mig < 0) return 3; /* MIG devices have no power reading of their own */
  *mw = D(d)->mw;
  return 0;
}
int nvmlDeviceGetTotalEnergyConsumption(void *d, unsigned long long *mj) {
  if (!is_node4() || D(d)->mig < 0) return 3; /* default set: integrate power instead */
  *mj = 123456789ull + (unsigned long long)(D(d) - node4);
  return 0;
}
int nvmlDeviceGetClockInfo(void *d, int c, unsigned int *mhz) {
  (void)d;
  *mhz = c == 1 ? 1980 : 0;
  return 0;
}
int nvmlDeviceGetCurrentClocksThrottleReasons(void *d, unsigned long long *r) {
  *r = D(d)->throttle;
  return 0;
}
int nvmlDeviceGetTotalEccErrors(void *d, int type, int counter, unsigned long long *n) {
  if (counter != 0) return 3; /* only the volatile counters */
  *n = type == 1 ? D(d)->ecc : 0;
  return 0;
}
/* cause 1 = double-bit errors; isPending: 1 when a page waits for retirement */
int nvmlDeviceGetRetiredPages_v2(void *d, int cause, unsigned int *count, unsigned long long *addr,
                                 unsigned long long *ts) {
  (void)addr;
  (void)ts;
  *count = cause == 1 ? (unsigned)D(d)->pending : 0;
  return 0;
}
int nvmlDeviceGetRetiredPagesPendingStatus(void *d, int *pending) {
  *pending = D(d)->pending ? 1 : 0;
  return 0;
}
int nvmlDeviceGetPciInfo_v3(void *d, pci_t *p) {
  memset(p, 0, sizeof *p);
  p->domain = (unsigned)D(d)->domain;
  p->bus = (unsigned)D(d)->bus;
  return 0;
}
int nvmlDeviceGetMigMode(void *d, unsigned int *cur, unsigned int *pend) {
  *cur = *pend = D(d)->mig == 1;
  return 0;
}
int nvmlDeviceGetMaxMigDeviceCount(void *d, unsigned int *n) {
  *n = D(d)->mig == 1 ? 2 : 0;
  return 0;
}
int nvmlDeviceGetMigDeviceHandleByIndex(void *d, unsigned int i, void **out) {
  if (D(d)->mig != 1 || i >= 2) return 2;
  *out = &migs[i];
  return 0;
}
int nvmlDeviceIsMigDeviceHandle(void *d, unsigned int *is) {
  *is = D(d)->mig < 0;
  return 0;
}

/* The caller's children: the processes a supervisor runs (the kernel's list for each thread,
 * /proc/self/task/TID/children, so that the fake costs little next to what it stands in for). */
static int children(unsigned *pids, int max) {
  int n = 0;
  DIR *dir = opendir("/proc/self/task");
  if (!dir) return 0;
  for (struct dirent *e; (e = readdir(dir)) && n < max;) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
    char path[300];
    snprintf(path, sizeof path, "/proc/self/task/%s/children", e->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    unsigned pid;
    while (n < max && fscanf(f, "%u", &pid) == 1)
      pids[n++] = pid;
    fclose(f);
  }
  closedir(dir);
  return n;
}

/* Rows: the caller's children and its supervised program at 60% / 1 GiB each, pid 1 (someone
 * else) at 25% / 512 MiB; only on node4's GPU 0. */
static int rows(void *d, unsigned *pid, unsigned *sm, unsigned long long *mem, int max) {
  if (!is_node4() || D(d) != &node4[0]) return 0;
  int n = children(pid, max - 2);
  const char *plan = getenv("GPURUN_PLAN_PID");
  unsigned prog = plan ? (unsigned)strtoul(plan, NULL, 10) : 0;
  int dup = 0;
  for (int i = 0; i < n; i++)
    dup |= pid[i] == prog;
  if (prog > 1 && prog != (unsigned)getpid() && !dup) pid[n++] = prog;
  for (int i = 0; i < n; i++)
    sm[i] = 60, mem[i] = 1ull << 30;
  pid[n] = 1, sm[n] = 25, mem[n] = 512ull << 20;
  return n + 1;
}

int nvmlDeviceGetComputeRunningProcesses_v3(void *d, unsigned int *count, proc_t *out) {
  unsigned pid[16], sm[16];
  unsigned long long mem[16];
  int n = rows(d, pid, sm, mem, 16);
  if (!out || *count < (unsigned)n) {
    *count = (unsigned)n;
    return n ? 7 : 0; /* NVML_ERROR_INSUFFICIENT_SIZE */
  }
  for (int i = 0; i < n; i++)
    out[i] = (proc_t){pid[i], mem[i], 0xffffffffu, 0xffffffffu};
  *count = (unsigned)n;
  return 0;
}
/* GR_FAKE_NVML_MANY=1: 100 samples per process since the last call (more than a first buffer
 * holds), SM alternating 50/70 for the caller's children (mean 60) and 25 for pid 1. */
int nvmlDeviceGetProcessUtilization(void *d, putil_t *out, unsigned int *count,
                                    unsigned long long since) {
  (void)since;
  unsigned pid[16], sm[16];
  unsigned long long mem[16];
  int n = rows(d, pid, sm, mem, 16);
  if (n && env_on("GR_FAKE_NVML_MANY")) {
    unsigned want = (unsigned)n * 100;
    if (!out || *count < want) {
      *count = want;
      return 7;
    }
    for (unsigned k = 0; k < want; k++) {
      unsigned i = k % (unsigned)n;
      out[k] =
          (putil_t){pid[i], 1 + k, pid[i] == 1 ? 25 : (k / (unsigned)n) % 2 ? 70u : 50u, 5, 0, 0};
    }
    *count = want;
    return 0;
  }
  if (!out || *count < (unsigned)n) {
    *count = (unsigned)n;
    return n ? 7 : 6;
  }
  for (int i = 0; i < n; i++)
    out[i] = (putil_t){pid[i], 1, sm[i], 5, 0, 0};
  *count = (unsigned)n;
  return 0;
}
