/* gpurun's supervising mode: fork the program, forward signals, sample telemetry, enforce the time
 * limit. The supervisor sleeps in ppoll() on a signalfd between events, so it takes no CPU from the
 * program except for the samples themselves. */
#include "gr_supervise.h"

#include "gr_clock.h"
#include "gr_counters_format.h"
#include "gr_escape.h"
#include "gr_jobdir.h"
#include "gr_error.h"
#include "gr_live_file.h"
#include "gr_log.h"
#include "gr_param.h"
#include "gr_prom.h"
#include "gr_safefile.h"
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
#include <sys/prctl.h>
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

/* The job id every rank of one job agrees on without talking to each other. Bytes outside the
 * safe alphabet become '_'; an id that is still unsafe ("..", ".x") is refused when the directory
 * is opened. */
static void job_id(const gr_supervise_opts *o, char *out, size_t cap) {
  if (o->job_id && *o->job_id) {
    snprintf(out, cap, "%s", o->job_id);
    for (char *p = out; *p; p++)
      if (!gr__safe_char((unsigned char)*p)) *p = '_';
  } else if (gr__monitor_job_from_env(out, cap) != 0) {
    /* No launcher ids: a timestamp (UTC, minute resolution, so ranks started together usually
     * agree; gr_jobdir.h). */
    gr__job_from_time(time(NULL), 1, out, cap);
  }
}

/* The longest host name whose files fit in the job directory dirfd: the longest of them,
 * <node>.<local_rank>.counters.json (the runtime's, beside the CSV), within the file system's
 * limit on a file name (NAME_MAX, 255 bytes; *name_max gets it). Linux host names are at most
 * 64 bytes (HOST_NAME_MAX), far below; a longer node name comes from elsewhere. */
static long node_name_max(int dirfd, int local_rank, long *name_max) {
  long nm = fpathconf(dirfd, _PC_NAME_MAX);
  if (nm <= 0) nm = NAME_MAX;
  *name_max = nm;
  char rest[64];
  int n = snprintf(rest, sizeof rest, ".%d" GR_COUNTERS_SUFFIX, local_rank < 0 ? 0 : local_rank);
  return nm - n;
}

/* Opens <dir>/<job>/<node>.<local_rank>.csv for appending (gr_safefile.h: a private job
 * directory, no symlink followed) and exports the directory and job id to the program, so that the
 * runtime can put its counters beside the CSV. -1 when monitoring is off or the file cannot be
 * made (said at warn, with the reason: the job still runs). A host name too long for the file
 * names is said in one sentence: its length, the limit, the longest that fits. */
static int open_csv(const gr_supervise_opts *o, char *path, size_t cap, char *job_out,
                    size_t job_cap, char *node_out, size_t node_cap) {
  const char *root = o->monitor_dir;
  if (!root || !*root) root = gr__param_str(GR_PARAM_MONITOR_DIR);
  if (!root || !*root) root = "gpurun-monitor";
  char job[128], node[256];
  job_id(o, job, sizeof job);
  if (o->node_name && *o->node_name)
    snprintf(node, sizeof node, "%s", o->node_name);
  else if (gethostname(node, sizeof node) != 0)
    snprintf(node, sizeof node, "localhost");
  node[sizeof node - 1] = '\0';
  gr__safe_name_fix(node);

  int dirfd, fd;
  if (gr__jobdir_open(root, job, &dirfd) != GR_OK) {
    GR_WARN("--monitor: %s; running without monitoring", gr_last_error());
    return -1;
  }
  long name_max, node_max = node_name_max(dirfd, o->local_rank, &name_max);
  if ((long)strlen(node) > node_max) {
    char esc[512];
    GR_WARN(
        "--monitor: the host name is %zu bytes, and with it the file <host>.%d" GR_COUNTERS_SUFFIX
        " in %s/%s would pass the %ld bytes a file name can have (NAME_MAX): monitoring needs a "
        "host name of at most %ld bytes, so give this node a shorter one; running without "
        "monitoring",
        strlen(node), o->local_rank < 0 ? 0 : o->local_rank,
        gr__esc_term_str(esc, sizeof esc, root), job, name_max, node_max);
    close(dirfd);
    return -1;
  }
  char name[300];
  snprintf(name, sizeof name, "%.250s.%d" GR_MONITOR_CSV_SUFFIX, node, o->local_rank);
  snprintf(path, cap, "%s/%s/%s", root, job, name);
  gr_status st = gr__file_append_open(dirfd, name, GR_TELEMETRY_CSV_HEADER, &fd);
  close(dirfd);
  if (st != GR_OK) {
    GR_WARN("--monitor: %s/%s: %s; running without monitoring", root, job, gr_last_error());
    return -1;
  }
  setenv(gr__param_name(GR_PARAM_MONITOR_DIR), root, 1);
  setenv(gr__param_name(GR_PARAM_JOB_ID), job, 1);
  snprintf(job_out, job_cap, "%s", job);
  snprintf(node_out, node_cap, "%s", node);
  GR_INFO("--monitor: sampling every %g s into %s", o->monitor_interval_s, path);
  return fd;
}

/* Where the Prometheus file goes and what it is called; prom_name[0] == 0: off. */
typedef struct {
  const char *dir;
  char name[300], job[128], node[256], live[PATH_MAX];
  int warned, have_self;
  gr__prom_owner self; /* the owner line, and what the sweep compares with */
  gr__prom_text text;  /* reused from sample to sample */
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
  /* First the files of supervisors that died without removing theirs (SIGKILL), then ours. */
  if (p->have_self) {
    int removed = gr__prom_sweep(p->dir, &p->self);
    if (removed > 0)
      GR_INFO("--prometheus: removed %d file%s of supervisors gone from this host in %s", removed,
              removed == 1 ? "" : "s", p->dir);
  }
  if (gr__prom_format(smp, p->job, p->node, live, p->have_self ? &p->self : NULL, &p->text) ==
          GR_OK &&
      gr__prom_write(p->dir, p->name, p->text.buf, p->text.len) == GR_OK)
    return;
  if (!p->warned) {
    p->warned = 1;
    GR_WARN("--prometheus: %s", gr_last_error());
  }
}

/* One whole row per sample, or none: a full disk or a file-size limit rolls the partial row back
 * (gr__file_append_row, whose sentence names path). A failure means the row could not be
 * written; sampling stops then. The Prometheus file, when asked for, gets the same sample. */
static gr_status write_sample(int fd, const char *path, gr__telemetry *t, double elapsed,
                              prom_out *prom) {
  char buf[8192];
  gr__sample smp;
  gr__telemetry_read(t, elapsed, &smp);
  if (prom && prom->name[0]) write_prom(prom, &smp);
  size_t n = gr__telemetry_format_csv(&smp, buf, sizeof buf);
  if (n == 0) return GR_OK;
  return gr__file_append_row(fd, path, buf, n);
}

int gr__exec_exit_code(int err) { return err == ENOENT || err == ENOTDIR ? 127 : 126; }

static int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

/* The program's whole process group; the program alone when it left the group (setsid). */
static void signal_group(pid_t pid, int sig) {
  if (kill(-pid, sig) != 0) kill(pid, sig);
}

/* Gives the terminal back to gpurun's own group after the program's group had it. */
static void take_back_tty(int fg_tty) {
  if (!fg_tty) return;
  sigset_t ttou, prev;
  sigemptyset(&ttou);
  sigaddset(&ttou, SIGTTOU);
  sigprocmask(SIG_BLOCK, &ttou, &prev);
  tcsetpgrp(STDIN_FILENO, getpgrp());
  sigprocmask(SIG_SETMASK, &prev, NULL);
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
  if (o->monitor_interval_s > 0 && o->monitor_interval_s < GR_MONITOR_MIN_INTERVAL_S)
    return gr__fail(GR_ERR_INVALID, call,
                    "supervise: monitor interval %g s is below the floor of %g s",
                    o->monitor_interval_s, GR_MONITOR_MIN_INTERVAL_S);
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
    prom.have_self = gr__prom_owner_self(&prom.self) == 0;
    if (!prom.have_self)
      GR_WARN("--prometheus: /proc does not say who this supervisor is: its file carries no "
              "owner line, and no later job can remove it if the supervisor is killed");
  }

  sigset_t set, old;
  sigemptyset(&set);
  for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++)
    sigaddset(&set, forwarded[i]);
  sigaddset(&set, SIGCHLD);
  sigprocmask(SIG_BLOCK, &set, &old);
  /* A file-size limit must make write(2) fail with EFBIG (and the row be rolled back), not kill
   * the supervisor; the program gets the caller's disposition back before exec. */
  struct sigaction ign, old_xfsz;
  memset(&ign, 0, sizeof ign);
  ign.sa_handler = SIG_IGN;
  sigaction(SIGXFSZ, &ign, &old_xfsz);
  /* In the foreground of a terminal, the program's group takes the terminal over (as a shell
   * would give it to a job), so that it can read it and ^C reaches it. */
  const pid_t me = getpid();
  const int fg_tty = isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp();
  int sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  int errpipe[2] = {-1, -1};
  if (sfd < 0 || pipe2(errpipe, O_CLOEXEC) != 0) {
    int e = errno;
    if (sfd >= 0) close(sfd);
    sigprocmask(SIG_SETMASK, &old, NULL);
    sigaction(SIGXFSZ, &old_xfsz, NULL);
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
    sigaction(SIGXFSZ, &old_xfsz, NULL);
    if (csv >= 0) close(csv);
    return gr__fail(GR_ERR_SYSTEM, call, "supervise: fork: %s", strerror(e));
  }
  if (pid == 0) {
    /* Child: only async-signal-safe calls until exec. The exec error goes back through the
     * close-on-exec pipe, so the parent can tell 127 (not found) from 126 (not executable).
     * Its own process group, so that signals and the time limit reach everything it starts;
     * SIGKILL when the supervisor dies (checked once more after prctl: it may have died before). */
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != me) _exit(128 + SIGKILL);
    if (fg_tty) {
      sigset_t ttou;
      sigemptyset(&ttou);
      sigaddset(&ttou, SIGTTOU);
      sigprocmask(SIG_BLOCK, &ttou, NULL);
      tcsetpgrp(STDIN_FILENO, getpid());
    }
    sigprocmask(SIG_SETMASK, &old, NULL);
    sigaction(SIGXFSZ, &old_xfsz, NULL);
    execvp(argv[0], argv);
    int e = errno;
    ssize_t w = write(errpipe[1], &e, sizeof e);
    (void)w;
    _exit(gr__exec_exit_code(e));
  }
  setpgid(pid, pid); /* also here: whichever runs first, the group exists before any signal */
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
    *exit_code = gr__exec_exit_code(exec_errno);
    close(sfd);
    take_back_tty(fg_tty);
    sigprocmask(SIG_SETMASK, &old, NULL);
    sigaction(SIGXFSZ, &old_xfsz, NULL);
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

  const double t0 = gr__mono_now();
  double next_sample = t0;
  const double term_at = o->time_limit_s > 0 ? t0 + o->time_limit_s : INFINITY;
  double kill_at = INFINITY;
  int term_sent = 0, kill_sent = 0, exited = 0;

  while (!exited) {
    double now = gr__mono_now();
    if (tel && now >= next_sample) {
      if (write_sample(csv, csv_path, tel, now - t0, &prom) != GR_OK) {
        GR_WARN("--monitor: %s; sampling stops here (the file ends on the last whole row)",
                gr_last_error());
        gr__telemetry_close(tel);
        tel = NULL;
        close(csv);
        csv = -1;
        continue;
      }
      next_sample += o->monitor_interval_s;
      if (next_sample <= now) next_sample = now + o->monitor_interval_s; /* fell behind: skip */
    }
    if (!term_sent && now >= term_at) {
      GR_ERROR("time limit of %g s reached: sending SIGTERM to %s (pid %d), SIGKILL in %g s",
               o->time_limit_s, argv[0], (int)pid, o->kill_grace_s);
      signal_group(pid, SIGTERM);
      term_sent = 1;
      kill_at = now + o->kill_grace_s;
    }
    if (term_sent && !kill_sent && now >= kill_at) {
      GR_ERROR("%s (pid %d) still running %g s after SIGTERM: sending SIGKILL", argv[0], (int)pid,
               o->kill_grace_s);
      signal_group(pid, SIGKILL);
      kill_sent = 1;
    }

    double wake = INFINITY;
    if (tel) wake = next_sample;
    if (!term_sent && term_at < wake) wake = term_at;
    if (term_sent && !kill_sent && kill_at < wake) wake = kill_at;
    struct timespec ts, *tsp = NULL;
    if (isfinite(wake)) {
      double d = wake - gr__mono_now();
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
      signal_group(pid, (int)si.ssi_signo);
    }
    /* Standard signals coalesce, so ask the kernel instead of counting SIGCHLDs. */
    pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) exited = 1;
  }

  /* Whatever the program left running in its group is stopped with it by the time limit. */
  if (term_sent) kill(-pid, SIGKILL);
  if (tel) gr__telemetry_close(tel);
  if (csv >= 0) close(csv);
  if (prom.name[0]) { /* the job is over: its series go away with it */
    char path[PATH_MAX];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", prom.dir, prom.name) < sizeof path)
      unlink(path);
  }
  gr__prom_text_free(&prom.text);
  close(sfd);
  take_back_tty(fg_tty);
  /* Signals still pending were meant for the program, which has gone: drop them rather than let
   * them hit gpurun when the caller's mask comes back. */
  struct timespec zero = {0, 0};
  while (sigtimedwait(&set, NULL, &zero) > 0) {
  }
  sigprocmask(SIG_SETMASK, &old, NULL);
  sigaction(SIGXFSZ, &old_xfsz, NULL);

  *exit_code = exit_code_of(status);
  if (term_sent) {
    GR_ERROR("%s ended by the time limit of %g s (%s); exit status 124", argv[0], o->time_limit_s,
             kill_sent ? "killed with SIGKILL" : "after SIGTERM");
    *exit_code = 124;
  }
  return GR_OK;
}
