/* GPU health from NVML (see gr_health.h), through the one loader (gr_nvml.h): the gate runs once,
 * before the program, in a process that never samples telemetry. */
#include "gr_health.h"

#include "gr_strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static void add(gr__gpu_health *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(gr__gpu_health *h, const char *fmt, ...) {
  gr__strbuf sb;
  gr__strbuf_init_tail(&sb, h->why, sizeof h->why);
  if (gr__strbuf_len(&sb) + 3 >= sizeof h->why) return;
  if (gr__strbuf_len(&sb)) gr__strbuf_append(&sb, ", ", 2);
  va_list ap;
  va_start(ap, fmt);
  gr__strbuf_vappendf(&sb, fmt, ap);
  va_end(ap);
  h->unhealthy = 1;
}

int gr__gpu_health_read(const char *const *pci, int n, gr__gpu_health *out) {
  memset(out, 0, (size_t)n * sizeof *out);
  gr__nvml lib, *l = &lib;
  if (gr__nvml_open(l) != GR_OK) return -1;
  for (int i = 0; i < n; i++) {
    gr__nvml_dev d;
    if (!gr__nvml_device(l, pci[i], &d)) continue;
    gr__gpu_health *h = &out[i];
    h->known = 1;
    unsigned long long count;
    /* NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1, NVML_VOLATILE_ECC = 0 */
    if (l->ecc && l->ecc(d, 1, 0, &count) == 0 && count > 0)
      add(h, "%llu volatile uncorrected ECC error%s", count, count == 1 ? "" : "s"), h->fault = 1;
    int pend;
    if (l->pages_pending && l->pages_pending(d, &pend) == 0 && pend == 1)
      add(h, "retired pages pending"), h->fault = 1;
    unsigned corr, unc, rpend, failed;
    if (l->remapped_rows && l->remapped_rows(d, &corr, &unc, &rpend, &failed) == 0) {
      if (failed) add(h, "row remapping failed"), h->fault = 1;
      if (rpend) add(h, "row remap pending (reset needed)"), h->fault = 1;
    }
    unsigned long long r;
    if (l->throttle && l->throttle(d, &r) == 0) {
      if (r & 0x40) add(h, "hardware thermal slowdown active");
      if (r & 0x20) add(h, "software thermal slowdown active");
      if (r & 0x08) add(h, "hardware slowdown active");
      if (r & 0x80) add(h, "power brake slowdown active");
    }
    unsigned t, slow;
    /* NVML_TEMPERATURE_GPU = 0, NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = 1 */
    if (l->temperature && l->threshold && l->temperature(d, 0, &t) == 0 &&
        l->threshold(d, 1, &slow) == 0 && slow > 0 && t >= slow)
      add(h, "%u C at or above its slowdown threshold %u C", t, slow);
  }
  gr__nvml_close(l);
  return 0;
}

int gr__gpu_load_read(const char *const *pci, int n, double *mem_used_mib, double *util) {
  for (int i = 0; i < n; i++)
    mem_used_mib[i] = util[i] = -1;
  gr__nvml lib, *l = &lib;
  if (gr__nvml_open(l) != GR_OK) return -1;
  for (int i = 0; i < n; i++) {
    gr__nvml_dev d;
    if (!gr__nvml_device(l, pci[i], &d)) continue;
    struct {
      unsigned long long total, free, used;
    } m;
    struct {
      unsigned int gpu, memory;
    } u;
    if (l->memory && l->memory(d, &m) == 0) mem_used_mib[i] = (double)m.used / 1048576.0;
    if (l->utilization && l->utilization(d, &u) == 0) util[i] = u.gpu;
  }
  gr__nvml_close(l);
  return 0;
}
