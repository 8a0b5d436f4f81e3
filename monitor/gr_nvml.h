/* Internal: the one NVML loader of the tree (gpurun's telemetry, its health gate and
 * gpurun-doctor). NVML ships no header on these machines: the entry points used are declared here
 * by their stable signatures, structure arguments as void * (each reader declares the layout it
 * reads), and loaded with dlopen from GPURUN_NVML_LIBRARY (default libnvidia-ml.so.1). An entry
 * point this NVML lacks is NULL; a caller tests it before the call. */
#ifndef GR_NVML_H
#define GR_NVML_H

#include <gpurun/status.h>
#include <stddef.h>

typedef void *gr__nvml_dev;

typedef struct {
  void *dl;
  /* required: gr__nvml_open fails without them */
  int (*init)(void); /* nvmlInit_v2 */
  int (*shutdown)(void);
  int (*by_pci)(const char *, gr__nvml_dev *); /* nvmlDeviceGetHandleByPciBusId_v2 */
  /* optional */
  const char *(*error_string)(int);
  int (*count)(unsigned *);                                 /* nvmlDeviceGetCount_v2 */
  int (*by_index)(unsigned, gr__nvml_dev *);                /* nvmlDeviceGetHandleByIndex_v2 */
  int (*index)(gr__nvml_dev, unsigned *);                   /* nvmlDeviceGetIndex */
  int (*pci_info)(gr__nvml_dev, void *);                    /* nvmlDeviceGetPciInfo_v3 */
  int (*utilization)(gr__nvml_dev, void *);                 /* nvmlDeviceGetUtilizationRates */
  int (*memory)(gr__nvml_dev, void *);                      /* nvmlDeviceGetMemoryInfo */
  int (*temperature)(gr__nvml_dev, int, unsigned *);        /* nvmlDeviceGetTemperature */
  int (*threshold)(gr__nvml_dev, int, unsigned *);          /* nvmlDeviceGetTemperatureThreshold */
  int (*power)(gr__nvml_dev, unsigned *);                   /* nvmlDeviceGetPowerUsage, mW */
  int (*clock)(gr__nvml_dev, int, unsigned *);              /* nvmlDeviceGetClockInfo */
  int (*throttle)(gr__nvml_dev, unsigned long long *);      /* ...CurrentClocksThrottleReasons */
  int (*ecc)(gr__nvml_dev, int, int, unsigned long long *); /* nvmlDeviceGetTotalEccErrors */
  int (*pages_pending)(gr__nvml_dev, int *); /* nvmlDeviceGetRetiredPagesPendingStatus */
  int (*remapped_rows)(gr__nvml_dev, unsigned *, unsigned *, unsigned *, unsigned *);
  int (*energy)(gr__nvml_dev, unsigned long long *); /* mJ since the driver loaded (Volta+) */
  int (*procs)(gr__nvml_dev, unsigned *, void *);    /* ...ComputeRunningProcesses_v3 */
  int (*proc_util)(gr__nvml_dev, void *, unsigned *, unsigned long long);
  int (*mig_mode)(gr__nvml_dev, unsigned *, unsigned *);
  int (*mig_count)(gr__nvml_dev, unsigned *); /* nvmlDeviceGetMaxMigDeviceCount */
  int (*mig_by_index)(gr__nvml_dev, unsigned, gr__nvml_dev *);
  int (*driver_version)(char *, unsigned); /* nvmlSystemGetDriverVersion */
  int (*persistence)(gr__nvml_dev, int *); /* nvmlDeviceGetPersistenceMode */
} gr__nvml;

/* The library's name: GPURUN_NVML_LIBRARY, else libnvidia-ml.so.1. */
const char *gr__nvml_library_name(void);
/* 1 when the library can be loaded at all (nothing initialised; nothing is left open). */
int gr__nvml_loadable(void);
/* Loads and initialises NVML into *l: GR_OK, or, with nothing left open and the sentence
 * recorded (gr_last_error()), GR_ERR_NOT_FOUND "dlopen NAME: ..." (no library),
 * GR_ERR_UNSUPPORTED "NAME lacks nvmlInit_v2, nvmlShutdown or a PCI lookup", GR_ERR_SYSTEM
 * "nvmlInit_v2 failed: TEXT (NVML error N)" (TEXT: NVML's own, "error" when it has none). */
gr_status gr__nvml_open(gr__nvml *l);
/* The GPU with this PCI bus id into *d; 0 when there is none (an empty id, or NVML does not know
 * it). */
int gr__nvml_device(const gr__nvml *l, const char *pci, gr__nvml_dev *d);
/* Shuts NVML down and unloads it. */
void gr__nvml_close(gr__nvml *l);

#endif
