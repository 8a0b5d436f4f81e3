/* A stand-in libnvidia-ml with two GPUs and fixed readings, so the NVML path is tested on machines
 * without one. Only the entry points runtime/telemetry.c uses. */
#include <stdio.h>
#include <string.h>

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

static int gpus[2] = {0x17, 0x65};
static int up;

int nvmlInit_v2(void) {
  up++;
  return 0;
}
int nvmlShutdown(void) {
  up--;
  return 0;
}
const char *nvmlErrorString(int rc) { return rc == 6 ? "Not Found" : "Unknown Error"; }
int nvmlDeviceGetCount_v2(unsigned int *n) {
  *n = 2;
  return 0;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned int i, void **d) {
  if (i >= 2) return 2;
  *d = &gpus[i];
  return 0;
}
int nvmlDeviceGetHandleByPciBusId_v2(const char *id, void **d) {
  unsigned dom, bus, dev, fn;
  if (sscanf(id, "%x:%x:%x.%x", &dom, &bus, &dev, &fn) != 4) return 2;
  for (int i = 0; i < 2; i++)
    if ((int)bus == gpus[i]) {
      *d = &gpus[i];
      return 0;
    }
  return 6;
}
int nvmlDeviceGetUtilizationRates(void *d, util_t *u) {
  (void)d;
  u->gpu = 77;
  u->memory = 33;
  return 0;
}
int nvmlDeviceGetMemoryInfo(void *d, mem_t *m) {
  (void)d;
  m->total = 81920ull << 20;
  m->used = 2048ull << 20;
  m->free = m->total - m->used;
  return 0;
}
int nvmlDeviceGetTemperature(void *d, int s, unsigned int *t) {
  (void)d;
  (void)s;
  *t = 61;
  return 0;
}
int nvmlDeviceGetPowerUsage(void *d, unsigned int *mw) {
  (void)d;
  *mw = 312500;
  return 0;
}
int nvmlDeviceGetClockInfo(void *d, int c, unsigned int *mhz) {
  (void)d;
  *mhz = c == 1 ? 1980 : 0;
  return 0;
}
int nvmlDeviceGetCurrentClocksThrottleReasons(void *d, unsigned long long *r) {
  (void)d;
  *r = 4;
  return 0;
}
int nvmlDeviceGetTotalEccErrors(void *d, int type, int counter, unsigned long long *n) {
  (void)d;
  (void)counter;
  *n = type == 1 ? 2 : 0;
  return 0;
}
int nvmlDeviceGetPciInfo_v3(void *d, pci_t *p) {
  memset(p, 0, sizeof *p);
  p->bus = (unsigned)*(int *)d;
  return 0;
}
