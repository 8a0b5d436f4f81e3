/* Internal: gpurun's supervising mode (--monitor, --time-limit). Implemented in
 * monitor/supervise.c; called by launcher/main.c.
 *
 * The program keeps its place: gpurun still execs it, so it is the process its launcher started
 * (same pid, same parent, same process group and session). Before the exec gpurun starts the
 * supervisor as a grandchild that is orphaned at once (the intermediate child exits), so that it is
 * never a child of the program (a wait(-1) of the program neither reaps it nor waits for it). The
 * supervisor
 * - holds the program by a pidfd and a /proc/<pid> directory descriptor taken before the fork
 *   (neither can name another process after the program is reaped and its pid reused), sleeps in
 *   poll() on the pidfd, and _exits as soon as the program has ended (without pidfd_open(2), an
 *   old kernel: it looks every 0.1 s); it learns from a close-on-exec pipe whether the exec
 *   succeeded (when it did not, gpurun says why and exits 127/126, and the supervisor exits);
 * - calls setsid(), leaving the program's process group and session, and ignores SIGINT, SIGTERM,
 *   SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGPIPE, SIGXFSZ and the terminal stops: signals reach the
 *   program directly (nothing is forwarded), and the supervisor outlives the program long enough
 *   to record how it ended; SIGKILL ends it, and the program runs on unharmed. stdin and stdout
 *   are /dev/null in it; its comm is "gpurun-monitor";
 * - samples, enforces the time limit, and writes the end record (below).
 * The exit status the launcher sees is the program's own: a time limit no longer turns it into
 * 124 (SIGTERM kills with status 128+15 in a shell's words, SIGKILL 128+9, unless the program
 * handles SIGTERM and exits with a status of its own); the supervisor's log line says that the
 * time limit ended it.
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
 * - When the program has ended, the supervisor writes <node>.<local_rank>.end.json there
 *   (base/gr_end_record.h): exit status or signal, read from the zombie's /proc/<pid>/stat field
 *   52 before the launcher reaps it ("unseen" when the launcher was first), what the time limit
 *   had sent, start and end times, CPU seconds. Each CSV row ends with the program's own
 *   cpu_time_s and state (base/gr_monitor_csv.h), from /proc/<pid>/stat.
 * - GPURUN_NVML_LIBRARY overrides the NVML library dlopen'ed (tests use a fake one).
 * - Logging: the time-limit messages are at error level (the supervisor's: they may come after the
 *   program's own last output); "NVML not available" once at info. */
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

/* Starts the supervisor (above), then execvp(argv[0], argv) in this process: on success it does not
 * return. The time limit sends SIGTERM (and SIGCONT), then SIGKILL after kill_grace_s, to the
 * program's process group when the program leads one (under mpirun, say), else to the program
 * alone (pidfd_send_signal); and to every descendant of the program found by /proc's parent links
 * outside that group, each held by a pidfd; SIGKILL again to the group and to those once the
 * program has gone. A monitor interval below GR_MONITOR_MIN_INTERVAL_S is GR_ERR_INVALID, a fork
 * that fails GR_ERR_SYSTEM (nothing run). GR_OK returned: the exec failed (said at error level,
 * the supervisor ends), *exit_code is 127/126. */
gr_status gr__supervise(char *const argv[], const gr_supervise_opts *o, int *exit_code);

/* The fields of /proc/<pid>/stat the supervisor reads (proc(5) numbering). */
typedef struct {
  char state;                      /* field 3 */
  int ppid, pgrp;                  /* 4, 5 */
  unsigned flags;                  /* 9: the kernel's PF_* flags (PF_EXITING 0x4) */
  unsigned long long utime, stime; /* 14, 15: clock ticks */
  unsigned long long start;        /* 22: clock ticks after boot */
  int mm_visible;                  /* 45 (start_data) non-zero: the private fields are shown */
  int has_exit_code, exit_code;    /* 52: the wait status of an ended process (Linux 3.5) */
} gr__pid_stat;
/* Parses stat text (the command in field 2 may hold spaces and parentheses). 0, or -1 when the
 * state or the CPU times are missing. */
int gr__parse_pid_stat(const char *text, gr__pid_stat *out);

#endif
