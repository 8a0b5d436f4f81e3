/* The one NVML loader (see gr_nvml.h). */
#include "gr_nvml.h"

#include "gr_error.h"
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

gr_status gr__nvml_open(gr__nvml *l) {
  memset(l, 0, sizeof *l);
  const char *name = gr__nvml_library_name();
  l->dl = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!l->dl) {
    const char *err = dlerror();
    return gr__fail_msg(GR_ERR_NOT_FOUND, "dlopen %s: %s", name, err ? err : "failed");
  }
  resolve(l);
  if (!l->init || !l->shutdown || !l->by_pci) {
    dlclose(l->dl);
    memset(l, 0, sizeof *l);
    return gr__fail_msg(GR_ERR_UNSUPPORTED, "%s lacks nvmlInit_v2, nvmlShutdown or a PCI lookup",
                        name);
  }
  int rc = l->init();
  if (rc != 0) {
    const char *text = l->error_string ? l->error_string(rc) : NULL;
    gr_status st = gr__fail_msg(GR_ERR_SYSTEM, "nvmlInit_v2 failed: %s (NVML error %d)",
                                text ? text : "error", rc);
    dlclose(l->dl);
    memset(l, 0, sizeof *l);
    return st;
  }
  return GR_OK;
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
