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
 * resident_memory_bytes, cpu_steal_ratio (the CSV's cpu_steal), and from the rank's live file (base/gr_live_file.h):
 * collective_seconds_total, collective_calls_total, collective_wait_seconds (inside the current
 * call, 0 between calls), and for a program the MPI layer records (the file's mpi_ lines)
 * mpi_seconds_total (inside its MPI calls) and mpi_collective_seconds_total (inside its blocking
 * collectives: the job's highest rate minus a rank's is how late that rank arrives, in PromQL, as
 * no rank alone has the others' times). Under the layer collective_seconds_total is
 * mpi_seconds_total (the records' busy time would count a request's life besides its wait) and
 * collective_wait_seconds is the layer's longest call in progress (a non-blocking call's record
 * runs until its request completes, while the rank computes). Per rank the labels are job, host,
 * rank and local_rank (given by host and rank): no communicator or call labels, so a job has a
 * fixed number of series. gpurun_up is 1 in every file (a series that exists only while its
 * writer lives) and gpurun_sample_time_seconds says when the sample was taken, so that an alert
 * sees a file that stopped changing.
 *
 * Owner line. The first line of every file is a comment the exposition format ignores,
 *   # gpurun-owner 1 host=<host> boot=<boot_id> pidns=<inode> pid=<pid> start=<ticks>
 * naming the supervisor that wrote it: its host (gethostname, mapped onto [A-Za-z0-9._+@-]), the
 * kernel's boot id, its pid namespace (inode of /proc/self/ns/pid), pid and start time
 * (/proc/<pid>/stat field 22). Before every write, the supervisor sweeps the directory
 * (gr__prom_sweep) and removes the gpurun_*.prom files whose owner is gone from this host, so that
 * a supervisor killed with SIGKILL (which cannot remove its own file) is not served as a live job
 * after the next sample of any gpurun job on the directory. */
#ifndef GR_PROM_H
#define GR_PROM_H

#include "gr_live_file.h"
#include "gr_telemetry.h"

#include <gpurun/status.h>
#include <stddef.h>

/* The first bytes of the owner line, and the version of the line that follows them. */
#define GR_PROM_OWNER_TAG "# gpurun-owner "
#define GR_PROM_OWNER_VERSION 1
/* Bytes of a file the sweep reads to find the owner line; a longer first line is no owner line. */
#define GR_PROM_OWNER_MAX 512

/* Who wrote a file. Empty boot, pidns 0: unknown (the sweep then leaves such files alone). */
typedef struct {
  char host[256];
  char boot[40];
  unsigned long long pidns;
  long pid;
  unsigned long long start;
} gr__prom_owner;

/* Fills o with this process's identity. 0, or -1 when /proc cannot say who we are, or is another
 * pid namespace's (its /proc/self is not getpid()): no owner line is written then, and no sweep
 * runs. */
int gr__prom_owner_self(gr__prom_owner *o);

/* The start time of pid (/proc/<pid>/stat field 22, clock ticks after boot). 0; -1 with errno
 * ESRCH when the process is gone or a zombie, another errno when /proc could not be read. */
int gr__prom_proc_start(long pid, unsigned long long *start);

/* Writes the owner line (with its newline) into buf; the length, 0 when it does not fit. */
size_t gr__prom_owner_line(const gr__prom_owner *o, char *buf, size_t cap);

/* Reads the owner line at the start of text (len bytes, need not be terminated). 0, or -1 when
 * the text does not start with a well-formed line of this version. */
int gr__prom_owner_parse(const char *text, size_t len, gr__prom_owner *o);

/* The text gr__prom_format leaves: buf malloc'd and NUL-terminated (NULL when nothing was written),
 * len its length. Zero-initialise; gr__prom_text_free releases it. */
typedef struct {
  char *buf;
  size_t len, cap;
} gr__prom_text;

void gr__prom_text_free(gr__prom_text *t);

/* Formats the exposition text of one sample into t (replacing what it held): the owner line when
 * owner is not NULL, then the series. job and host are label values (escaped here); live may be
 * NULL. GR_ERR_NOMEM (recorded for gr_last_error()) when memory runs out. */
gr_status gr__prom_format(const gr__sample *s, const char *job, const char *host,
                          const gr__live *live, const gr__prom_owner *owner, gr__prom_text *t);

/* Writes text to dir/name through dir/.name.tmp.<pid> (O_EXCL|O_NOFOLLOW) and rename(2); when
 * another user's file holds that name, through .name.tmp.<pid>-<k> (k < 100). A failure records
 * "cannot write DIR/NAME: <reason>" for gr_last_error(). */
gr_status gr__prom_write(const char *dir, const char *name, const char *text, size_t len);

/* Removes dir's gpurun_*.prom files (and .gpurun_*.prom.tmp.<pid>[-<k>], gr__prom_write's temp
 * files) whose owner no longer runs on this host. A file is removed only when it is a regular file (no link followed or removed) owned by this effective uid, its
 * owner line names self's host, and either its boot id and pid namespace are self's and its pid is
 * gone, a zombie or reused (another start time), or its boot id differs and it was last written
 * before this boot. Anything else (another host, another pid namespace, another user's file,
 * garbage, no owner line) is left alone. The number of files removed, -1 with errno when dir
 * cannot be read. */
int gr__prom_sweep(const char *dir, const gr__prom_owner *self);

#endif
