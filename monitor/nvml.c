/* The one NVML loader (see gr_nvml.h). */
#include "gr_nvml.h"

#include "gr_param.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

const char *gr__nvml_library_name(void) { return gr__param_str(GR_PARAM_NVML_LIBRARY); }

int gr__nvml_loadable(void) {
  void *dl = dlopen(gr__nvml_library_name(), RTLD_LAZY | RTLD_LOCAL);
  if (dl) dlclose(dl);
  return dl != NULL;
}

/* f = the entry point called name (NULL when this NVML has none) */
#define SYM(f, name) *(void **)&l->f = dlsym(l->dl, name)

static void resolve(gr__nvml *l) {
  SYM(init, "nvmlInit_v2");
  SYM(shutdown, "nvmlShutdown");
  SYM(by_pci, "nvmlDeviceGetHandleByPciBusId_v2");
  SYM(error_string, "nvmlErrorString");
  SYM(count, "nvmlDeviceGetCount_v2");
  SYM(by_index, "nvmlDeviceGetHandleByIndex_v2");
  SYM(index, "nvmlDeviceGetIndex");
  SYM(pci_info, "nvmlDeviceGetPciInfo_v3");
  SYM(utilization, "nvmlDeviceGetUtilizationRates");
  SYM(memory, "nvmlDeviceGetMemoryInfo");
  SYM(temperature, "nvmlDeviceGetTemperature");
  SYM(threshold, "nvmlDeviceGetTemperatureThreshold");
  SYM(power, "nvmlDeviceGetPowerUsage");
  SYM(clock, "nvmlDeviceGetClockInfo");
  SYM(throttle, "nvmlDeviceGetCurrentClocksThrottleReasons");
  SYM(ecc, "nvmlDeviceGetTotalEccErrors");
  SYM(pages_pending, "nvmlDeviceGetRetiredPagesPendingStatus");
  SYM(remapped_rows, "nvmlDeviceGetRemappedRows");
  SYM(energy, "nvmlDeviceGetTotalEnergyConsumption");
  SYM(procs, "nvmlDeviceGetComputeRunningProcesses_v3");
  SYM(proc_util, "nvmlDeviceGetProcessUtilization");
  SYM(mig_mode, "nvmlDeviceGetMigMode");
  SYM(mig_count, "nvmlDeviceGetMaxMigDeviceCount");
  SYM(mig_by_index, "nvmlDeviceGetMigDeviceHandleByIndex");
  SYM(driver_version, "nvmlSystemGetDriverVersion");
  SYM(persistence, "nvmlDeviceGetPersistenceMode");
}

#undef SYM

gr__nvml_failure gr__nvml_open(gr__nvml *l, char *why, size_t why_len, char *init_error,
                               size_t init_len) {
  memset(l, 0, sizeof *l);
  const char *name = gr__nvml_library_name();
  l->dl = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!l->dl) {
    const char *err = dlerror();
    if (why_len) snprintf(why, why_len, "dlopen %s: %s", name, err ? err : "failed");
    return GR__NVML_NO_LIBRARY;
  }
  resolve(l);
  if (!l->init || !l->shutdown || !l->by_pci) {
    if (why_len) snprintf(why, why_len, "%s lacks nvmlInit_v2, nvmlShutdown or a PCI lookup", name);
    dlclose(l->dl);
    memset(l, 0, sizeof *l);
    return GR__NVML_NO_ENTRY;
  }
  int rc = l->init();
  if (rc != 0) {
    if (why_len) snprintf(why, why_len, "nvmlInit_v2 failed (NVML error %d)", rc);
    const char *text = l->error_string ? l->error_string(rc) : NULL;
    if (init_len) snprintf(init_error, init_len, "%s", text ? text : "error");
    dlclose(l->dl);
    memset(l, 0, sizeof *l);
    return GR__NVML_NO_INIT;
  }
  return GR__NVML_OK;
}

int gr__nvml_device(const gr__nvml *l, const char *pci, gr__nvml_dev *d) {
  return pci && pci[0] && l->by_pci(pci, d) == 0;
}

void gr__nvml_close(gr__nvml *l) {
  if (!l->dl) return;
  l->shutdown();
  dlclose(l->dl);
  memset(l, 0, sizeof *l);
}
