/* Internal: per-rank telemetry sampled by the supervising gpurun (monitor/supervise.c). The CSV's
 * columns are a contract with gpurun-report: base/gr_monitor_csv.h, docs/formats.md.
 *
 * One sample is one CSV line per GPU of the rank (or one line with gpu "-" when it has none):
 *   time,elapsed_s,rank,local_rank,gpu,gpu_util,mem_util,mem_used_mib,mem_total_mib,temp_c,
 *   power_w,sm_clock_mhz,throttle,ecc_uncorrected,cpu_util,rss_mib
 * time is Unix seconds; gpu is the PCI bus id; a GPU field is empty when NVML cannot say;
 * cpu_util is the busy share (0-100) of the rank's cores since the previous sample (from
 * /proc/stat); rss_mib is the program's resident set (/proc/<pid>/status VmRSS). gpurun-report
 * reads these columns by name. rank_sm_util/others_sm_util (percent) and rank_mem_mib/others_mem_mib
 * split the GPU between this rank's process tree and everyone else (other ranks, other users),
 * from NVML's per-process utilisation and running compute processes; empty when NVML has no
 * per-process rows for the GPU. A GPU in MIG mode is followed by one row per MIG device, gpu
 * "<pci>/mig<i>". GPUs come from NVML (gr_nvml.h: GPURUN_NVML_LIBRARY, else libnvidia-ml.so.1):
 * without it the GPU fields stay empty, which is said once at info level.
 *
 * A sample also carries cpu_steal: the share (0-100) of the rank's cores' time since the previous
 * sample that the hypervisor gave to other guests (/proc/stat's steal field), or the whole node's
 * when /proc/stat has no line for those cores. It is not one of these columns: the supervisor
 * appends it after the program's own (base/gr_monitor_csv.h), so that every older column keeps its
 * place. */
#ifndef GR_TELEMETRY_H
#define GR_TELEMETRY_H

#include <gpurun/status.h>

#include <stddef.h>
#include <sys/types.h>

#include "gr_monitor_csv.h"

/* The CSV's first line: the contract's (gr_monitor_csv.h), which gpurun-report reads by name. */
#define GR_TELEMETRY_CSV_HEADER GR_MONITOR_CSV_HEADER

typedef struct gr__telemetry gr__telemetry;

#define GR_TELEMETRY_MAX_GPUS 16

/* One GPU's readings; each has_* says whether NVML answered. */
typedef struct {
  char pci[32];
  int index; /* NVML's device index (nvmlDeviceGetIndex), else the position in the rank's list */
  int has_util, has_mem, has_temp, has_power, has_clock, has_throttle, has_ecc, has_energy;
  unsigned int util, mem_util;            /* percent */
  unsigned long long mem_used, mem_total; /* bytes */
  unsigned int temp_c, sm_mhz;
  double power_w;
  double energy_j; /* NVML's counter since the driver loaded, else power integrated since start */
  unsigned long long throttle, ecc_uncorrected;
  /* Per-process attribution: this rank's process tree vs everyone else on the GPU. */
  int has_share_util, has_share_mem;
  double rank_sm, others_sm;               /* percent of the GPU's SMs */
  unsigned long long rank_mem, others_mem; /* bytes */
} gr__gpu_sample;

/* One sample of one rank. */
typedef struct {
  double unix_s, elapsed_s;
  int rank, local_rank;
  double cpu_util;   /* 0-100, -1 unknown */
  double cpu_steal;  /* 0-100, -1 unknown (no time passed, or a kernel without the field) */
  long long rss_kib; /* -1 unknown */
  int ngpus;
  gr__gpu_sample gpu[GR_TELEMETRY_MAX_GPUS];
} gr__sample;

/* gpus_pci: comma-separated PCI bus ids ("" none; NULL: every GPU NVML sees). cpus: the rank's
 * cpuset in hwloc list syntax (NULL or "": this process's affinity). pid: the process whose RSS is
 * sampled. */
gr_status gr__telemetry_open(const char *gpus_pci, const char *cpus, pid_t pid, int rank,
                             int local_rank, gr__telemetry **out);
/* Takes one sample (elapsed_s is stored as given). */
void gr__telemetry_read(gr__telemetry *t, double elapsed_s, gr__sample *out);
/* Formats a sample as CSV lines (the header's columns); returns the length, 0 when it did not fit. */
size_t gr__telemetry_format_csv(const gr__sample *s, char *buf, size_t cap);
/* read + format_csv: appends one sample (one or more complete lines) to buf; returns its length,
 * or 0 when it did not fit. elapsed_s is written as given. */
size_t gr__telemetry_sample(gr__telemetry *t, double elapsed_s, char *buf, size_t cap);
/* Number of GPUs NVML matched (0 without NVML). */
int gr__telemetry_ngpus(const gr__telemetry *t);
void gr__telemetry_close(gr__telemetry *t);

/* ---- /proc parsers (pure, for tests) ---- */

typedef struct {
  unsigned long long busy, total; /* jiffies */
  unsigned long long steal;       /* jiffies the hypervisor ran another guest on this CPU */
  int has_steal;                  /* the line had the steal field (the 8th) */
} gr__cpu_times;

/* Parses /proc/stat text: fills out[cpu] for each "cpuN" line with N < max (others zeroed) and,
 * when node is not NULL, *node from the all-CPU "cpu" line (zeroed without one). busy = total -
 * idle - iowait; total counts steal (time the CPU was meant to run but the hypervisor did not).
 * Returns the highest N seen + 1, or -1 when no cpuN line parses. */
int gr__parse_proc_stat(const char *text, gr__cpu_times *out, int max, gr__cpu_times *node);
/* Reads the file at path (the sampler passes "/proc/stat"; tests a fixture) and parses it as
 * gr__parse_proc_stat does; -1 when it cannot be read. */
int gr__read_proc_stat(const char *path, gr__cpu_times *out, int max, gr__cpu_times *node);
/* VmRSS from /proc/<pid>/status text, in KiB; -1 when absent. */
long long gr__parse_status_rss_kib(const char *text);
/* Busy share (0-100) of the cpus marked in mask[0..n) between two snapshots; -1 when no time
 * passed. */
double gr__cpu_util(const gr__cpu_times *prev, const gr__cpu_times *cur, const unsigned char *mask,
                    int n);
/* Steal share (0-100) of the cpus marked in mask[0..n) between two snapshots: their steal jiffies
 * over all their jiffies. When those lines give none (no time passed on them, no line for them, no
 * steal field) and node_prev/node_cur are not NULL: the all-CPU line's share. -1 when neither
 * says. */
double gr__cpu_steal(const gr__cpu_times *prev, const gr__cpu_times *cur, const unsigned char *mask,
                     int n, const gr__cpu_times *node_prev, const gr__cpu_times *node_cur);

#endif
