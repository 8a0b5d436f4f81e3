/* Internal: GPU health from NVML, for gpurun's launch-time gate (--gpu-health,
 * launcher/health_gate.c). A GPU is unhealthy when NVML reports any of: volatile uncorrected ECC errors, retired pages
 * pending, a failed (or pending) row remap, an active hardware/thermal/power-brake slowdown, or a
 * temperature at or above the GPU's own slowdown threshold. NVML comes from the one loader
 * (gr_nvml.h, which gpurun-doctor uses for its further readings); readings NVML does not support
 * are skipped. */
#ifndef GR_HEALTH_H
#define GR_HEALTH_H

#include "gr_nvml.h"

#include <stddef.h>

#define GR_HEALTH_WHY 200

typedef struct {
  int known; /* NVML answered for this GPU */
  int unhealthy;
  int fault; /* a hardware fault among the reasons (ECC, retired pages, row remap), not only a
                slowdown or the temperature */
  char why[GR_HEALTH_WHY]; /* "3 volatile uncorrected ECC errors, 1 retired page pending" */
} gr__gpu_health;

/* Reads the n GPUs named by PCI bus id. Returns 0, or -1 when NVML is not available (then every
 * out[i].known is 0). */
int gr__gpu_health_read(const char *const *pci, int n, gr__gpu_health *out);

/* Load of the n GPUs for least-loaded placement: device memory in use (MiB) and utilisation (%),
 * -1 where NVML cannot say. Returns 0, or -1 when NVML is not available (all -1). */
int gr__gpu_load_read(const char *const *pci, int n, double *mem_used_mib, double *util);

#endif
