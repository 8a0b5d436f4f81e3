/* GPU health from NVML (see gr_health.h). Its own small dlopen, shared with gpurun-doctor: the gate
 * runs once, before the program, in a process that never samples telemetry. */
#include "gr_health.h"

#include "gr_telemetry.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef int nvml_ret;
typedef void *nvml_dev;

static void add(gr__gpu_health *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(gr__gpu_health *h, const char *fmt, ...) {
  size_t len = strlen(h->why);
  if (len + 3 >= sizeof h->why) return;
  if (len) {
    memcpy(h->why + len, ", ", 3);
    len += 2;
  }
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(h->why + len, sizeof h->why - len, fmt, ap);
  va_end(ap);
  h->unhealthy = 1;
}

/* v = the entry point called name in l (NULL if NVML has none) */
#define SYM(l, v, name) *(void **)&(v) = gr__nvml_sym(l, name)

int gr__nvml_open(gr__nvml *l, char *why, size_t why_len) {
  const char *name = gr__nvml_library_name();
  l->dl = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!l->dl) {
    if (why_len) snprintf(why, why_len, "dlopen %s: %s", name, dlerror());
    return -1;
  }
  nvml_ret (*init)(void);
  SYM(l, init, "nvmlInit_v2");
  SYM(l, l->shutdown, "nvmlShutdown");
  SYM(l, l->by_pci, "nvmlDeviceGetHandleByPciBusId_v2");
  if (!init || !l->shutdown || !l->by_pci) {
    if (why_len) snprintf(why, why_len, "%s lacks nvmlInit_v2, nvmlShutdown or a PCI lookup", name);
    dlclose(l->dl);
    return -1;
  }
  nvml_ret rc = init();
  if (rc != 0) {
    if (why_len) snprintf(why, why_len, "nvmlInit_v2 failed (NVML error %d)", rc);
    dlclose(l->dl);
    return -1;
  }
  return 0;
}

void *gr__nvml_sym(const gr__nvml *l, const char *name) { return dlsym(l->dl, name); }

int gr__nvml_device(const gr__nvml *l, const char *pci, void **d) {
  return pci && pci[0] && l->by_pci(pci, d) == 0;
}

void gr__nvml_close(gr__nvml *l) {
  l->shutdown();
  dlclose(l->dl);
}

int gr__gpu_health_read(const char *const *pci, int n, gr__gpu_health *out) {
  memset(out, 0, (size_t)n * sizeof *out);
  gr__nvml lib, *l = &lib;
  if (gr__nvml_open(l, NULL, 0) != 0) return -1;
  nvml_ret (*ecc)(nvml_dev, int, int, unsigned long long *);
  nvml_ret (*pending)(nvml_dev, int *);
  nvml_ret (*remap)(nvml_dev, unsigned *, unsigned *, unsigned *, unsigned *);
  nvml_ret (*throttle)(nvml_dev, unsigned long long *);
  nvml_ret (*temp)(nvml_dev, int, unsigned *), (*threshold)(nvml_dev, int, unsigned *);
  SYM(l, ecc, "nvmlDeviceGetTotalEccErrors");
  SYM(l, pending, "nvmlDeviceGetRetiredPagesPendingStatus");
  SYM(l, remap, "nvmlDeviceGetRemappedRows");
  SYM(l, throttle, "nvmlDeviceGetCurrentClocksThrottleReasons");
  SYM(l, temp, "nvmlDeviceGetTemperature");
  SYM(l, threshold, "nvmlDeviceGetTemperatureThreshold");
  for (int i = 0; i < n; i++) {
    nvml_dev d;
    if (!gr__nvml_device(l, pci[i], &d)) continue;
    gr__gpu_health *h = &out[i];
    h->known = 1;
    unsigned long long count;
    /* NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1, NVML_VOLATILE_ECC = 0 */
    if (ecc && ecc(d, 1, 0, &count) == 0 && count > 0)
      add(h, "%llu volatile uncorrected ECC error%s", count, count == 1 ? "" : "s"), h->fault = 1;
    int pend;
    if (pending && pending(d, &pend) == 0 && pend == 1)
      add(h, "retired pages pending"), h->fault = 1;
    unsigned corr, unc, rpend, failed;
    if (remap && remap(d, &corr, &unc, &rpend, &failed) == 0) {
      if (failed) add(h, "row remapping failed"), h->fault = 1;
      if (rpend) add(h, "row remap pending (reset needed)"), h->fault = 1;
    }
    unsigned long long r;
    if (throttle && throttle(d, &r) == 0) {
      if (r & 0x40) add(h, "hardware thermal slowdown active");
      if (r & 0x20) add(h, "software thermal slowdown active");
      if (r & 0x08) add(h, "hardware slowdown active");
      if (r & 0x80) add(h, "power brake slowdown active");
    }
    unsigned t, slow;
    /* NVML_TEMPERATURE_GPU = 0, NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = 1 */
    if (temp && threshold && temp(d, 0, &t) == 0 && threshold(d, 1, &slow) == 0 && slow > 0 &&
        t >= slow)
      add(h, "%u C at or above its slowdown threshold %u C", t, slow);
  }
  gr__nvml_close(l);
  return 0;
}

int gr__gpu_load_read(const char *const *pci, int n, double *mem_used_mib, double *util) {
  for (int i = 0; i < n; i++)
    mem_used_mib[i] = util[i] = -1;
  gr__nvml lib, *l = &lib;
  if (gr__nvml_open(l, NULL, 0) != 0) return -1;
  nvml_ret (*memory)(nvml_dev, void *), (*utilization)(nvml_dev, void *);
  SYM(l, memory, "nvmlDeviceGetMemoryInfo");
  SYM(l, utilization, "nvmlDeviceGetUtilizationRates");
  for (int i = 0; i < n; i++) {
    nvml_dev d;
    if (!gr__nvml_device(l, pci[i], &d)) continue;
    struct {
      unsigned long long total, free, used;
    } m;
    struct {
      unsigned int gpu, memory;
    } u;
    if (memory && memory(d, &m) == 0) mem_used_mib[i] = (double)m.used / 1048576.0;
    if (utilization && utilization(d, &u) == 0) util[i] = u.gpu;
  }
  gr__nvml_close(l);
  return 0;
}

#undef SYM
