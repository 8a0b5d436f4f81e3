/* Internal: the supervisor's Prometheus output (gpurun --monitor --prometheus DIR). After every
 * sample, DIR/gpurun_<job>_<host>_<local_rank>.prom is replaced atomically (temp file, then rename)
 * with the latest readings in the text exposition format, for node-exporter's textfile collector;
 * the file is removed when the program ends, so that a finished job's series go stale.
 *
 * Names follow Prometheus' conventions (base units, _ratio, _total for counters) and are close to
 * dcgm-exporter's (DCGM_FI_DEV_GPU_UTIL -> gpurun_gpu_utilization_ratio, ...). Labels:
 * job, host, rank (world rank, "" unknown), local_rank, and per GPU gpu (NVML index) and pci.
 * Per GPU: utilization_ratio, memory_utilization_ratio, memory_used_bytes, memory_total_bytes,
 * temperature_celsius, power_watts, energy_joules_total, sm_clock_hertz, throttle_reasons
 * (NVML's bit mask), ecc_uncorrected_volatile_errors, and on shared GPUs rank_utilization_ratio,
 * others_utilization_ratio, rank_memory_used_bytes, others_memory_used_bytes. Per rank: cpu_utilization_ratio,
 * resident_memory_bytes, and from the rank's live file (base/gr_live_file.h):
 * collective_seconds_total, collective_calls_total, collective_wait_seconds (inside the current
 * call, 0 between calls). gpurun_sample_time_seconds says when the sample was taken. */
#ifndef GR_PROM_H
#define GR_PROM_H

#include "gr_live_file.h"
#include "gr_telemetry.h"

#include <stddef.h>

/* Formats the exposition text. job and host are label values (escaped here); live may be NULL.
 * Returns the length, 0 when it did not fit in cap. */
size_t gr__prom_format(const gr__sample *s, const char *job, const char *host, const gr__live *live,
                       char *buf, size_t cap);

/* Writes text to dir/name through dir/.name.tmp.<pid> (O_EXCL|O_NOFOLLOW) and rename(2).
 * 0, or -1 with errno. */
int gr__prom_write(const char *dir, const char *name, const char *text, size_t len);

#endif
