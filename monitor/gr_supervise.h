/* Internal: gpurun's supervising mode (--monitor, --time-limit). Instead of exec'ing the program,
 * gpurun forks it, forwards signals, samples telemetry until it exits, and enforces the time limit.
 * Implemented in monitor/supervise.c; called by launcher/main.c.
 *
 * Files and environment (the contract between gpurun, the runtime and gpurun-report):
 * - Samples go to <monitor_dir>/<job>/<node>.<local_rank>.csv, whole rows only (a failed append
 *   is rolled back, warned once, and sampling stops), columns in monitor/gr_telemetry.h. The job
 *   directory and the file are opened through gr_safefile.h: a private directory of this user
 *   (0700, 0750 with GPURUN_MONITOR_GROUP=1), no symlink followed, unsafe job ids refused.
 *   job: o->job_id, else $GPURUN_JOB_ID, $SLURM_JOB_ID,
 *   $FLUX_JOB_ID, $OMPI_MCA_ess_base_jobid, $PMIX_NAMESPACE, $PBS_JOBID, $LSB_JOBID
 *   (gr__monitor_job_from_env, base/gr_jobdir.h), else a timestamp (YYYYmmdd-HHMM). Bytes
 *   outside [A-Za-z0-9._+@-] become '_'; an id starting with '.' is refused.
 * - When monitoring, the supervisor exports to the program GPURUN_MONITOR_DIR (the root) and
 *   GPURUN_JOB_ID (the job segment actually used). gr_finalize then writes the runtime's counters to
 *   <GPURUN_MONITOR_DIR>/<GPURUN_JOB_ID>/<node>.<local_rank>.counters.json; a program run without
 *   the supervisor but with GPURUN_MONITOR_DIR set does the same (job resolved as above, else
 *   rank 0's timestamp; gr_init exports it as GPURUN_JOB_ID so the flight recorder agrees).
 * - The collectives' flight recorder dumps flight.<rank>.json into the same job directory.
 * - GPURUN_NVML_LIBRARY overrides the NVML library dlopen'ed (tests use a fake one).
 * - Logging: the time-limit messages are at error level; "NVML not available" once at info. */
#ifndef GR_SUPERVISE_H
#define GR_SUPERVISE_H

#include <gpurun/status.h>

typedef struct {
  double monitor_interval_s; /* > 0: sample every interval; 0: no sampling */
  double time_limit_s;       /* > 0: SIGTERM past it, SIGKILL after kill_grace_s more; 0: none */
  double kill_grace_s;       /* default 10 */
  const char
      *monitor_dir;      /* root of the CSV files; NULL: $GPURUN_MONITOR_DIR or ./gpurun-monitor */
  const char *job_id;    /* NULL: from Slurm / Open MPI ids, else a timestamp */
  const char *node_name; /* NULL: the host name */
  int local_rank;
  int rank;             /* world rank when known, else -1 */
  const char *gpus_pci; /* comma-separated PCI bus ids of this rank's GPUs ("" none) */
  const char *cpus;     /* the rank's cpuset, hwloc list syntax */
  const char *
      prometheus_dir; /* with sampling: the latest sample as DIR/gpurun_<job>_<node>_<local_rank>.prom (gr_prom.h) */
} gr_supervise_opts;

void gr__supervise_opts_init(gr_supervise_opts *o);

/* The smallest sampling interval accepted (seconds): below it the samples cost more than they
 * tell, and the CSV grows by megabytes a second. */
#define GR_MONITOR_MIN_INTERVAL_S 0.05

/* Shell-style status for a program that could not be executed: 127 when it was not found
 * (ENOENT, ENOTDIR), 126 otherwise. gpurun uses it with and without the supervisor. */
int gr__exec_exit_code(int err);

/* Fork and execvp(argv[0], argv) in its own process group (PR_SET_PDEATHSIG: killed when the
 * supervisor dies); forward SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 to that group;
 * sample until the program exits. The time limit sends SIGTERM, then SIGKILL, to the group, and
 * SIGKILL to what is left of it once the program has gone. A monitor interval below
 * GR_MONITOR_MIN_INTERVAL_S is GR_ERR_INVALID. *exit_code is shell-style: the child's exit status, 128+N when
 * killed by signal N, 124 when the time limit ended it, 127/126 when it could not be executed. */
gr_status gr__supervise(char *const argv[], const gr_supervise_opts *o, int *exit_code);

#endif
