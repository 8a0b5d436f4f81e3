/* Internal: GPU health from NVML, for gpurun's launch-time gate (--gpu-health,
 * launcher/health_gate.c). A GPU is unhealthy when NVML reports any of: volatile uncorrected ECC errors, retired pages
 * pending, a failed (or pending) row remap, an active hardware/thermal/power-brake slowdown, or a
 * temperature at or above the GPU's own slowdown threshold. NVML is loaded with dlopen
 * (gr__nvml_library_name); readings NVML does not support are skipped. */
#ifndef GR_HEALTH_H
#define GR_HEALTH_H

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

/* The loader both readers use, exposed for gpurun-doctor's further readings: NVML opened with
 * dlopen and initialised, with the entry points every reader needs. */
typedef struct {
  void *dl;
  int (*shutdown)(void);
  int (*by_pci)(const char *, void **);
} gr__nvml;
/* 0, or -1 when NVML cannot be loaded or initialised (nothing is left open then), with a short
 * reason in why (if why_len > 0). */
int gr__nvml_open(gr__nvml *l, char *why, size_t why_len);
/* The entry point called name, NULL when this NVML has none. */
void *gr__nvml_sym(const gr__nvml *l, const char *name);
/* The GPU with this PCI bus id into *d; 0 when there is none (an empty id, or NVML does not know
 * it). */
int gr__nvml_device(const gr__nvml *l, const char *pci, void **d);
void gr__nvml_close(gr__nvml *l);

#endif
