/* gpurun's supervising mode: fork the program, forward signals, sample telemetry, enforce the time
 * limit. The supervisor sleeps in ppoll() on a signalfd between events, so it takes no CPU from the
 * program except for the samples themselves. */
#include "gr_supervise.h"

#include "gr_jobdir.h"
#include "gr_error.h"
#include "gr_live_file.h"
#include "gr_log.h"
#include "gr_prom.h"
#include "gr_telemetry.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

void gr__supervise_opts_init(gr_supervise_opts *o) {
  memset(o, 0, sizeof *o);
  o->kill_grace_s = 10.0;
  o->rank = -1;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Path components come from the environment: keep them to one safe path segment. */
static void sanitize(char *s) {
  for (; *s; s++)
    if (*s == '/' || *s == ' ' || (unsigned char)*s < 32) *s = '_';
}

/* The job id every rank of one job agrees on without talking to each other. */
static void job_id(const gr_supervise_opts *o, char *out, size_t cap) {
  if (o->job_id && *o->job_id) {
    snprintf(out, cap, "%s", o->job_id);
  } else if (gr__monitor_job_from_env(out, cap) != 0) {
    /* No launcher ids: a timestamp (minute resolution, so ranks started together usually agree). */
    time_t t = time(NULL);
    struct tm tm;
    localtime_r(&t, &tm);
    strftime(out, cap, "%Y%m%d-%H%M", &tm);
  }
  sanitize(out);
}

/* Opens <dir>/<job>/<node>.<local_rank>.csv for appending and exports the directory and job id to
 * the program, so that the runtime can put its counters beside the CSV. -1 when monitoring is off
 * or the file cannot be made (said at warn: the job still runs). */
static int open_csv(const gr_supervise_opts *o, char *path, size_t cap, char *job_out,
                    size_t job_cap, char *node_out, size_t node_cap) {
  const char *root = o->monitor_dir;
  if (!root || !*root) root = getenv("GPURUN_MONITOR_DIR");
  if (!root || !*root) root = "gpurun-monitor";
  char job[128], node[256];
  job_id(o, job, sizeof job);
  if (o->node_name && *o->node_name)
    snprintf(node, sizeof node, "%s", o->node_name);
  else if (gethostname(node, sizeof node) != 0)
    snprintf(node, sizeof node, "localhost");
  node[sizeof node - 1] = '\0';
  sanitize(node);

  char dir[PATH_MAX - 300];
  if ((size_t)snprintf(dir, sizeof dir, "%s/%s", root, job) >= sizeof dir) {
    GR_WARN("--monitor: directory %s too long; running without monitoring", root);
    return -1;
  }
  if (gr__mkdir_p(dir) != 0) {
    GR_WARN("--monitor: cannot create %s: %s; running without monitoring", dir, strerror(errno));
    return -1;
  }
  if ((size_t)snprintf(path, cap, "%s/%s.%d.csv", dir, node, o->local_rank) >= cap) {
    GR_WARN("--monitor: path under %s too long; running without monitoring", dir);
    return -1;
  }
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    GR_WARN("--monitor: cannot open %s: %s; running without monitoring", path, strerror(errno));
    return -1;
  }
  struct stat st;
  if (fstat(fd, &st) == 0 && st.st_size == 0) {
    ssize_t w = write(fd, GR_TELEMETRY_CSV_HEADER, strlen(GR_TELEMETRY_CSV_HEADER));
    (void)w;
  }
  setenv("GPURUN_MONITOR_DIR", root, 1);
  setenv("GPURUN_JOB_ID", job, 1);
  snprintf(job_out, job_cap, "%s", job);
  snprintf(node_out, node_cap, "%s", node);
  GR_INFO("--monitor: sampling every %g s into %s", o->monitor_interval_s, path);
  return fd;
}

/* Where the Prometheus file goes and what it is called; prom_name[0] == 0: off. */
typedef struct {
  const char *dir;
  char name[300], job[128], node[256], live[PATH_MAX];
  int warned;
} prom_out;

/* Keeps a label-safe file name segment. */
static void name_segment(char *s) {
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
          *s == '-' || *s == '.'))
      *s = '_';
}

/* The latest sample for node-exporter's textfile collector (see gr_prom.h). The rank's live file
 * adds the time in collectives. */
static void write_prom(prom_out *p, const gr__sample *smp) {
  gr__live lv, *live = NULL;
  if (p->live[0]) {
    char buf[8192];
    int fd = open(p->live, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd >= 0) {
      ssize_t n = read(fd, buf, sizeof buf);
      close(fd);
      if (n > 0 && gr__live_parse(buf, (size_t)n, &lv) == 0 && lv.rank == smp->rank) live = &lv;
    }
  }
  char text[32768];
  size_t len = gr__prom_format(smp, p->job, p->node, live, text, sizeof text);
  if (len && gr__prom_write(p->dir, p->name, text, len) == 0) return;
  if (!p->warned) {
    p->warned = 1;
    GR_WARN("--prometheus: cannot write %s/%s: %s", p->dir, p->name,
            len ? strerror(errno) : "sample too large");
  }
}

/* One write(2) per sample: a signal or a kill never leaves half a line in the file. */
static void write_sample(int fd, gr__telemetry *t, double elapsed, prom_out *prom) {
  char buf[8192];
  gr__sample smp;
  gr__telemetry_read(t, elapsed, &smp);
  size_t n = gr__telemetry_format_csv(&smp, buf, sizeof buf);
  if (n > 0) {
    ssize_t w;
    do
      w = write(fd, buf, n);
    while (w < 0 && errno == EINTR);
  }
  if (prom && prom->name[0]) write_prom(prom, &smp);
}

static int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

gr_status gr__supervise(char *const argv[], const gr_supervise_opts *o, int *exit_code) {
  static const char *const call = "gpurun";
  gr_supervise_opts defaults;
  if (!o) {
    gr__supervise_opts_init(&defaults);
    o = &defaults;
  }
  if (!argv || !argv[0] || !exit_code)
    return gr__fail(GR_ERR_INVALID, call, "supervise: no program to run");
  if (!(o->monitor_interval_s >= 0) || !(o->time_limit_s >= 0) || !(o->kill_grace_s >= 0))
    return gr__fail(GR_ERR_INVALID, call,
                    "supervise: monitor interval %g, time limit %g and kill grace %g must be >= 0",
                    o->monitor_interval_s, o->time_limit_s, o->kill_grace_s);
  *exit_code = 1;

  int csv = -1;
  char csv_path[PATH_MAX] = "";
  prom_out prom;
  memset(&prom, 0, sizeof prom);
  if (o->monitor_interval_s > 0)
    csv = open_csv(o, csv_path, sizeof csv_path, prom.job, sizeof prom.job, prom.node,
                   sizeof prom.node);
  if (csv >= 0 && o->prometheus_dir && *o->prometheus_dir) {
    char seg_job[128], seg_node[256];
    snprintf(seg_job, sizeof seg_job, "%s", prom.job);
    snprintf(seg_node, sizeof seg_node, "%s", prom.node);
    name_segment(seg_job);
    name_segment(seg_node);
    prom.dir = o->prometheus_dir;
    snprintf(prom.name, sizeof prom.name, "gpurun_%.100s_%.100s_%d.prom", seg_job, seg_node,
             o->local_rank);
    char *slash = strrchr(csv_path, '/');
    if (o->rank >= 0 && slash)
      snprintf(prom.live, sizeof prom.live, "%.*s/live.%d", (int)(slash - csv_path), csv_path,
               o->rank);
  }

  sigset_t set, old;
  sigemptyset(&set);
  for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++)
    sigaddset(&set, forwarded[i]);
  sigaddset(&set, SIGCHLD);
  sigprocmask(SIG_BLOCK, &set, &old);
  int sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  int errpipe[2] = {-1, -1};
  if (sfd < 0 || pipe2(errpipe, O_CLOEXEC) != 0) {
    int e = errno;
    if (sfd >= 0) close(sfd);
    sigprocmask(SIG_SETMASK, &old, NULL);
    if (csv >= 0) close(csv);
    return gr__fail(GR_ERR_SYSTEM, call, "supervise: signalfd/pipe: %s", strerror(e));
  }

  pid_t pid = fork();
  if (pid < 0) {
    int e = errno;
    close(sfd);
    close(errpipe[0]);
    close(errpipe[1]);
    sigprocmask(SIG_SETMASK, &old, NULL);
    if (csv >= 0) close(csv);
    return gr__fail(GR_ERR_SYSTEM, call, "supervise: fork: %s", strerror(e));
  }
  if (pid == 0) {
    /* Child: only async-signal-safe calls until exec. The exec error goes back through the
     * close-on-exec pipe, so the parent can tell 127 (not found) from 126 (not executable). */
    sigprocmask(SIG_SETMASK, &old, NULL);
    execvp(argv[0], argv);
    int e = errno;
    ssize_t w = write(errpipe[1], &e, sizeof e);
    (void)w;
    _exit(e == ENOENT ? 127 : 126);
  }
  close(errpipe[1]);
  int exec_errno = 0;
  ssize_t r;
  do
    r = read(errpipe[0], &exec_errno, sizeof exec_errno);
  while (r < 0 && errno == EINTR);
  close(errpipe[0]);

  int status = 0;
  if (r == (ssize_t)sizeof exec_errno) {
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    GR_ERROR("cannot execute %s: %s", argv[0], strerror(exec_errno));
    *exit_code = exec_errno == ENOENT ? 127 : 126;
    close(sfd);
    sigprocmask(SIG_SETMASK, &old, NULL);
    if (csv >= 0) close(csv);
    return GR_OK;
  }

  gr__telemetry *tel = NULL;
  if (csv >= 0 &&
      gr__telemetry_open(o->gpus_pci, o->cpus, pid, o->rank, o->local_rank, &tel) != GR_OK) {
    GR_WARN("--monitor: telemetry could not start; running without monitoring");
    close(csv);
    csv = -1;
  }

  const double t0 = now_s();
  double next_sample = t0;
  const double term_at = o->time_limit_s > 0 ? t0 + o->time_limit_s : INFINITY;
  double kill_at = INFINITY;
  int term_sent = 0, kill_sent = 0, exited = 0;

  while (!exited) {
    double now = now_s();
    if (tel && now >= next_sample) {
      write_sample(csv, tel, now - t0, &prom);
      next_sample += o->monitor_interval_s;
      if (next_sample <= now) next_sample = now + o->monitor_interval_s; /* fell behind: skip */
    }
    if (!term_sent && now >= term_at) {
      GR_ERROR("time limit of %g s reached: sending SIGTERM to %s (pid %d), SIGKILL in %g s",
               o->time_limit_s, argv[0], (int)pid, o->kill_grace_s);
      kill(pid, SIGTERM);
      term_sent = 1;
      kill_at = now + o->kill_grace_s;
    }
    if (term_sent && !kill_sent && now >= kill_at) {
      GR_ERROR("%s (pid %d) still running %g s after SIGTERM: sending SIGKILL", argv[0], (int)pid,
               o->kill_grace_s);
      kill(pid, SIGKILL);
      kill_sent = 1;
    }

    double wake = INFINITY;
    if (tel) wake = next_sample;
    if (!term_sent && term_at < wake) wake = term_at;
    if (term_sent && !kill_sent && kill_at < wake) wake = kill_at;
    struct timespec ts, *tsp = NULL;
    if (isfinite(wake)) {
      double d = wake - now_s();
      if (d < 0) d = 0;
      ts.tv_sec = (time_t)d;
      ts.tv_nsec = (long)((d - (double)ts.tv_sec) * 1e9);
      tsp = &ts;
    }
    struct pollfd pfd = {.fd = sfd, .events = POLLIN};
    int pr = ppoll(&pfd, 1, tsp, NULL);
    if (pr < 0 && errno != EINTR) {
      GR_WARN("supervise: ppoll: %s", strerror(errno));
      /* Degrade to blocking on the child; signals stay blocked but the child still ends. */
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      exited = 1;
      break;
    }
    struct signalfd_siginfo si;
    while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
      if ((int)si.ssi_signo == SIGCHLD) continue;
      GR_DEBUG("forwarding signal %d to %s (pid %d)", (int)si.ssi_signo, argv[0], (int)pid);
      kill(pid, (int)si.ssi_signo);
    }
    /* Standard signals coalesce, so ask the kernel instead of counting SIGCHLDs. */
    pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) exited = 1;
  }

  if (tel) gr__telemetry_close(tel);
  if (csv >= 0) close(csv);
  if (prom.name[0]) { /* the job is over: its series go away with it */
    char path[PATH_MAX];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", prom.dir, prom.name) < sizeof path)
      unlink(path);
  }
  close(sfd);
  /* Signals still pending were meant for the program, which has gone: drop them rather than let
   * them hit gpurun when the caller's mask comes back. */
  struct timespec zero = {0, 0};
  while (sigtimedwait(&set, NULL, &zero) > 0) {
  }
  sigprocmask(SIG_SETMASK, &old, NULL);

  *exit_code = exit_code_of(status);
  if (term_sent) {
    GR_ERROR("%s ended by the time limit of %g s (%s); exit status 124", argv[0], o->time_limit_s,
             kill_sent ? "killed with SIGKILL" : "after SIGTERM");
    *exit_code = 124;
  }
  return GR_OK;
}
