/* gpurun's supervising mode: the program keeps gpurun's process (gpurun execs it, same pid), and a
 * supervisor process started beside it samples telemetry, enforces the time limit and records how
 * the program ended. The supervisor sleeps in poll() on a pidfd of the program between events, so
 * it takes no CPU from the program except for the samples themselves (gr_supervise.h). */
#include "gr_supervise.h"

#include "gr_clock.h"
#include "gr_counters_format.h"
#include "gr_end_record.h"
#include "gr_escape.h"
#include "gr_jobdir.h"
#include "gr_error.h"
#include "gr_live_file.h"
#include "gr_log.h"
#include "gr_param.h"
#include "gr_prom.h"
#include "gr_safefile.h"
#include "gr_strbuf.h"
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
#include <dirent.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The signals the supervisor ignores: the job-wide ones a launcher or a batch system may send to
 * every process of a rank or a step (by pid: it has left the program's process group and session),
 * so that it outlives the program long enough to record how it ended; SIGPIPE and SIGXFSZ so that
 * a closed stderr or a file-size limit is an error it handles (EFBIG rolls a CSV row back). */
static const int ignored[] = {SIGINT,  SIGTERM, SIGHUP,  SIGQUIT, SIGUSR1, SIGUSR2,
                              SIGPIPE, SIGXFSZ, SIGTSTP, SIGTTIN, SIGTTOU};

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
 * runtime can put its counters beside the CSV; *dirfd_out keeps the job directory open (the end
 * record goes there). -1 when monitoring is off or the file cannot be
 * made (said at warn, with the reason: the job still runs). A host name too long for the file
 * names is said in one sentence: its length, the limit, the longest that fits. */
static int open_csv(const gr_supervise_opts *o, char *path, size_t cap, char *job_out,
                    size_t job_cap, char *node_out, size_t node_cap, int *dirfd_out) {
  *dirfd_out = -1;
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
  gr_status st = gr__file_append_open(dirfd, name, GR_MONITOR_CSV_FILE_HEADER, &fd);
  if (st != GR_OK) {
    close(dirfd);
    GR_WARN("--monitor: %s/%s: %s; running without monitoring", root, job, gr_last_error());
    return -1;
  }
  *dirfd_out = dirfd;
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

/* ---- the program's /proc/<pid>/stat ---- */

int gr__parse_pid_stat(const char *text, gr__pid_stat *out) {
  memset(out, 0, sizeof *out);
  out->exit_code = -1;
  /* the command (field 2) may hold spaces and parentheses: the fields start after the last ')' */
  const char *p = text ? strrchr(text, ')') : NULL;
  if (!p) return -1;
  p++;
  int field = 3, got_state = 0, got_times = 0;
  while (*p && field <= 52) {
    while (*p == ' ')
      p++;
    if (!*p || *p == '\n') break;
    const char *tok = p;
    while (*p && *p != ' ' && *p != '\n')
      p++;
    if (field == 3) {
      out->state = *tok;
      got_state = 1;
    } else if (field == 4 || field == 5 || field == 9 || field == 14 || field == 15 ||
               field == 22 || field == 45 || field == 52) {
      /* only the fields read here are checked: others may be negative or the size of a word */
      char *end;
      errno = 0;
      long long v = strtoll(tok, &end, 10);
      if (end != p || errno) return -1;
      switch (field) {
      case 4:
        out->ppid = (int)v;
        break;
      case 5:
        out->pgrp = (int)v;
        break;
      case 9:
        out->flags = (unsigned)v;
        break;
      case 14:
        out->utime = (unsigned long long)v;
        break;
      case 15:
        out->stime = (unsigned long long)v;
        got_times = 1;
        break;
      case 22:
        out->start = (unsigned long long)v;
        break;
      case 45:
        out->mm_visible = v != 0;
        break;
      case 52:
        out->exit_code = (int)v;
        out->has_exit_code = 1;
        break;
      default:
        break;
      }
    }
    field++;
  }
  return got_state && got_times ? 0 : -1;
}

/* Reads and parses the stat file of the process whose /proc directory procfd is (a descriptor
 * tied to that process, never to a pid reused after it was reaped: openat fails then). */
static int read_stat_at(int procfd, gr__pid_stat *st) {
  if (procfd < 0) return -1;
  int fd = openat(procfd, "stat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char buf[1024];
  ssize_t n;
  do
    n = read(fd, buf, sizeof buf - 1);
  while (n < 0 && errno == EINTR);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = '\0';
  return gr__parse_pid_stat(buf, st);
}

static int read_stat_pid(pid_t pid, gr__pid_stat *st) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d", (int)pid);
  int dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return -1;
  int rc = read_stat_at(dfd, st);
  close(dfd);
  return rc;
}

/* pidfd_open(2) and pidfd_send_signal(2) (Linux 5.3 and 5.1) by number: glibc before 2.36 has no
 * wrappers. ENOSYS on an older kernel: the supervisor then polls /proc instead. */
static int pidfd_open_(pid_t pid) {
#ifdef SYS_pidfd_open
  return (int)syscall(SYS_pidfd_open, (int)pid, 0);
#else
  (void)pid;
  errno = ENOSYS;
  return -1;
#endif
}

static int pidfd_signal_(int pidfd, int sig) {
#ifdef SYS_pidfd_send_signal
  return (int)syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
#else
  (void)pidfd;
  (void)sig;
  errno = ENOSYS;
  return -1;
#endif
}

/* ---- the time limit's reach: the program's descendants ---- */

/* A process found below the program, held by a pidfd (or, without pidfds, by pid and start time,
 * checked again before each signal). */
typedef struct {
  pid_t pid;
  unsigned long long start;
  int fd;
} tracked;

typedef struct {
  tracked *v;
  int n, cap;
} tracked_set;

#define GR_SUPERVISE_MAX_TRACKED 4096

typedef struct {
  pid_t pid, ppid, pgrp;
  unsigned long long start;
  int mark;
} proc_row;

/* Adds to set every process below root (by /proc's parent links) that is not in root's own
 * process group when skip_pgrp (the group is signalled as a whole). */
static void track_descendants(pid_t root, pid_t skip_pgrp, tracked_set *set) {
  DIR *d = opendir("/proc");
  if (!d) return;
  proc_row *rows = NULL;
  size_t n = 0, cap = 0;
  for (struct dirent *e; (e = readdir(d));) {
    char *end;
    long pid = strtol(e->d_name, &end, 10);
    if (*end || pid <= 0) continue;
    gr__pid_stat st;
    if (read_stat_pid((pid_t)pid, &st) != 0) continue;
    if (n == cap) {
      size_t nc = cap ? cap * 2 : 256;
      proc_row *nr = realloc(rows, nc * sizeof *nr);
      if (!nr) break;
      rows = nr;
      cap = nc;
    }
    rows[n++] = (proc_row){(pid_t)pid, (pid_t)st.ppid, (pid_t)st.pgrp, st.start, 0};
  }
  closedir(d);
  /* mark the tree: passes until nothing changes (trees are shallow) */
  for (int changed = 1, pass = 0; changed && pass < 64; pass++) {
    changed = 0;
    for (size_t i = 0; i < n; i++) {
      if (rows[i].mark) continue;
      int parent_in = rows[i].ppid == root;
      for (size_t j = 0; j < n && !parent_in; j++)
        parent_in = rows[j].mark && rows[j].pid == rows[i].ppid;
      if (parent_in) rows[i].mark = changed = 1;
    }
  }
  for (size_t i = 0; i < n; i++) {
    if (!rows[i].mark || (skip_pgrp > 0 && rows[i].pgrp == skip_pgrp)) continue;
    int known = 0;
    for (int k = 0; k < set->n && !known; k++)
      known = set->v[k].pid == rows[i].pid && set->v[k].start == rows[i].start;
    if (known || set->n >= GR_SUPERVISE_MAX_TRACKED) continue;
    if (set->n == set->cap) {
      int nc = set->cap ? set->cap * 2 : 16;
      tracked *nv = realloc(set->v, (size_t)nc * sizeof *nv);
      if (!nv) break;
      set->v = nv;
      set->cap = nc;
    }
    /* the pidfd first, then the start time again: the pidfd is then that process for sure */
    int fd = pidfd_open_(rows[i].pid);
    gr__pid_stat st;
    if (read_stat_pid(rows[i].pid, &st) != 0 || st.start != rows[i].start) {
      if (fd >= 0) close(fd);
      continue;
    }
    set->v[set->n++] = (tracked){rows[i].pid, rows[i].start, fd};
  }
  free(rows);
}

static void signal_tracked(const tracked_set *set, int sig) {
  for (int k = 0; k < set->n; k++) {
    const tracked *t = &set->v[k];
    if (t->fd >= 0) {
      pidfd_signal_(t->fd, sig);
    } else {
      gr__pid_stat st;
      if (read_stat_pid(t->pid, &st) == 0 && st.start == t->start) kill(t->pid, sig);
    }
  }
}

/* ---- the supervisor ---- */

typedef struct {
  const gr_supervise_opts *o;
  char *const *argv;
  pid_t pid;       /* the program: gpurun's own pid, which it keeps */
  int pidfd;       /* pidfd of the program, -1 without (an old kernel) */
  int procfd;      /* /proc/<pid> of the program, -1 when /proc cannot be opened */
  int leads_group; /* the program leads its process group: the time limit signals the group */
  int csv, dirfd;  /* the CSV and the job directory; -1 when not monitoring */
  char csv_path[PATH_MAX], csv_name[300];
  prom_out prom;
  gr__telemetry *tel;
  long clk_tck;
  int permitted;     /* /proc showed this process's private fields (exit_code too) */
  double last_cpu_s; /* NAN until read */
  tracked_set below; /* the time limit's: descendants outside the program's group */
} supervisor;

static double cpu_seconds(const supervisor *s, const gr__pid_stat *st) {
  return (double)(st->utime + st->stime) / (double)s->clk_tck;
}

/* PF_EXITING (the kernel's task flag): set from the start of the exit, before the memory is
 * released and long before the state reads 'Z'. */
#define GR_PF_EXITING 0x4u

/* The program's stat now; updates what the end record needs to trust the exit code. A process
 * already exiting shows no private fields (its memory is gone, start_data reads 0) although
 * /proc still shows them to us: it does not count as hidden. */
static int program_stat(supervisor *s, gr__pid_stat *st) {
  if (read_stat_at(s->procfd, st) != 0) return -1;
  if (st->state != 'Z' && st->state != 'X') {
    if (!(st->flags & GR_PF_EXITING)) s->permitted = st->mm_visible;
    s->last_cpu_s = cpu_seconds(s, st);
  }
  return 0;
}

/* One whole row per sample, or none: a full disk or a file-size limit rolls the partial row back
 * (gr__file_append_row, whose sentence names path). A failure means the row could not be
 * written; sampling stops then. Telemetry formats the sample columns; the program's own two
 * (cpu_time_s, state) and then the cores' steal share (cpu_steal, last so that every older column
 * keeps its place) are added to each of its rows here. The Prometheus file, when asked for, gets
 * the same sample. */
static gr_status write_sample(supervisor *s, double elapsed) {
  char buf[8192], row[10240];
  gr__sample smp;
  gr__telemetry_read(s->tel, elapsed, &smp);
  if (s->prom.name[0]) write_prom(&s->prom, &smp);
  size_t n = gr__telemetry_format_csv(&smp, buf, sizeof buf);
  if (n == 0) return GR_OK;
  char program[64] = ",", steal[32] = "", extra[100];
  gr__pid_stat st;
  if (program_stat(s, &st) == 0)
    snprintf(program, sizeof program, "%.2f,%c", cpu_seconds(s, &st),
             st.state > ' ' && st.state < 0x7f && st.state != ',' ? st.state : '?');
  if (smp.cpu_steal >= 0) snprintf(steal, sizeof steal, "%.1f", smp.cpu_steal);
  snprintf(extra, sizeof extra, ",%s,%s", program, steal);
  gr__strbuf b;
  gr__strbuf_init_fixed(&b, row, sizeof row);
  for (size_t i = 0; i < n; i++) {
    if (buf[i] == '\n') gr__strbuf_appendf(&b, "%s", extra);
    gr__strbuf_putc(&b, buf[i]);
  }
  if (b.truncated) return GR_OK;
  return gr__file_append_row(s->csv, s->csv_path, row, gr__strbuf_len(&b));
}

/* Whether the program is still there; for when no pidfd says so. */
static int program_alive(const supervisor *s) {
  gr__pid_stat st;
  if (s->procfd >= 0)
    return read_stat_at(s->procfd, &st) == 0 && st.state != 'Z' && st.state != 'X';
  return kill(s->pid, 0) == 0 || errno == EPERM;
}

/* The time limit's signal: the program's process group when it leads one (its children in it get
 * it too), the program alone otherwise; and every descendant found outside that group. */
static void time_limit_signal(supervisor *s, int sig) {
  if (!program_alive(s)) return;
  /* first who is below it: once the program has died, its children are orphans of someone else */
  track_descendants(s->pid, s->leads_group ? s->pid : 0, &s->below);
  if (s->leads_group)
    kill(-s->pid, sig);
  else if (s->pidfd < 0 || pidfd_signal_(s->pidfd, sig) != 0)
    kill(s->pid, sig);
  signal_tracked(&s->below, sig);
}

/* How the program ended, in words and for the end record. */
typedef struct {
  const char *how; /* GR_END_HOW_* */
  int code, sig, core;
  double cpu_s; /* NAN unknown */
} program_end;

static void describe_end(const program_end *e, char *out, size_t cap) {
  if (!strcmp(e->how, GR_END_HOW_EXIT)) {
    snprintf(out, cap, "exit status %d", e->code);
  } else if (!strcmp(e->how, GR_END_HOW_SIGNAL)) {
    const char *abbr = sigabbrev_np(e->sig);
    snprintf(out, cap, "killed by signal %d (SIG%s)%s", e->sig, abbr ? abbr : "?",
             e->core ? ", core dumped" : "");
  } else {
    snprintf(out, cap, "status not seen (its launcher reaped it first)");
  }
}

/* Reads the ended program's status from its zombie's stat (field 52, the wait status), while the
 * program's parent has not reaped it yet. */
static void read_end(supervisor *s, program_end *e) {
  memset(e, 0, sizeof *e);
  e->how = GR_END_HOW_UNSEEN;
  e->cpu_s = s->last_cpu_s;
  gr__pid_stat st;
  if (read_stat_at(s->procfd, &st) != 0) return;
  if (st.state != 'Z' && st.state != 'X') return;
  e->cpu_s = cpu_seconds(s, &st);
  if (!st.has_exit_code || !s->permitted) return;
  int w = st.exit_code;
  if (WIFEXITED(w)) {
    e->how = GR_END_HOW_EXIT;
    e->code = WEXITSTATUS(w);
  } else if (WIFSIGNALED(w)) {
    e->how = GR_END_HOW_SIGNAL;
    e->sig = WTERMSIG(w);
    e->core = WCOREDUMP(w) != 0;
  }
}

/* <node>.<local_rank>.end.json in the job directory, whole or not at all (gr_end_record.h). */
static void write_end_record(supervisor *s, const program_end *e, const char *time_limit,
                             double start, double end) {
  if (s->dirfd < 0) return;
  char text[1024], num[64];
  gr__strbuf b;
  gr__strbuf_init_fixed(&b, text, sizeof text);
  /* the node name is already in the safe alphabet (gr__safe_name_fix): no JSON escape needed */
  gr__strbuf_appendf(&b,
                     "{\"" GR_END_KEY_VERSION "\": %d, \"" GR_END_KEY_NODE
                     "\": \"%s\", \"" GR_END_KEY_LOCAL_RANK "\": %d, \"" GR_END_KEY_RANK
                     "\": %d, \"" GR_END_KEY_PID "\": %d, \"" GR_END_KEY_HOW "\": \"%s\", ",
                     GR_END_VERSION, s->prom.node, s->o->local_rank, s->o->rank, (int)s->pid,
                     e->how);
  int is_exit = !strcmp(e->how, GR_END_HOW_EXIT), is_sig = !strcmp(e->how, GR_END_HOW_SIGNAL);
  if (is_exit)
    gr__strbuf_appendf(&b, "\"" GR_END_KEY_EXIT_CODE "\": %d, ", e->code);
  else
    gr__strbuf_appendf(&b, "\"" GR_END_KEY_EXIT_CODE "\": null, ");
  const char *abbr = is_sig ? sigabbrev_np(e->sig) : NULL;
  if (is_sig)
    gr__strbuf_appendf(&b, "\"" GR_END_KEY_SIGNAL "\": %d, ", e->sig);
  else
    gr__strbuf_appendf(&b, "\"" GR_END_KEY_SIGNAL "\": null, ");
  if (abbr)
    gr__strbuf_appendf(&b, "\"" GR_END_KEY_SIGNAL_NAME "\": \"%s\", ", abbr);
  else
    gr__strbuf_appendf(&b, "\"" GR_END_KEY_SIGNAL_NAME "\": null, ");
  gr__strbuf_appendf(&b,
                     "\"" GR_END_KEY_CORE "\": %s, \"" GR_END_KEY_TIME_LIMIT
                     "\": \"%s\", \"" GR_END_KEY_START "\": %.3f, \"" GR_END_KEY_END
                     "\": %.3f, \"" GR_END_KEY_CPU_TIME_S "\": ",
                     e->core ? "true" : "false", time_limit, start, end);
  if (isfinite(e->cpu_s))
    snprintf(num, sizeof num, "%.2f", e->cpu_s);
  else
    snprintf(num, sizeof num, "null");
  gr__strbuf_appendf(&b, "%s}\n", num);
  if (b.truncated) return;
  char name[300];
  snprintf(name, sizeof name, "%.250s.%d" GR_END_SUFFIX, s->prom.node, s->o->local_rank);
  if (gr__file_replace(s->dirfd, name, text, gr__strbuf_len(&b)) != GR_OK)
    GR_WARN("--monitor: the end record: %s", gr_last_error());
}

/* The supervisor process: runs until the program has ended, then _exits. ready is the read end of
 * the pipe whose write end closes when gpurun's exec succeeds (an errno comes through it when the
 * exec failed). */
static void supervisor_main(supervisor *s, int ready) {
  /* Out of the program's process group and session: the launcher's and the terminal's job-wide
   * signals (^C, ^Z, a hangup, a kill(-pgid)) are the program's; and ignore what a batch system
   * sends by pid to every process of a step, so as to see the program's end. */
  setsid();
  prctl(PR_SET_NAME, "gpurun-monitor");
  struct sigaction ign;
  memset(&ign, 0, sizeof ign);
  ign.sa_handler = SIG_IGN;
  for (size_t i = 0; i < sizeof ignored / sizeof ignored[0]; i++)
    sigaction(ignored[i], &ign, NULL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  /* stdout and stdin are the program's: a reader of its output sees the end of it when the
   * program ends, not when the supervisor does. stderr stays, for the time limit's lines. */
  int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (devnull >= 0) {
    dup2(devnull, STDIN_FILENO);
    dup2(devnull, STDOUT_FILENO);
    if (devnull > STDERR_FILENO) close(devnull);
  }

  int exec_errno = 0;
  ssize_t r;
  do
    r = read(ready, &exec_errno, sizeof exec_errno);
  while (r < 0 && errno == EINTR);
  close(ready);
  if (r == (ssize_t)sizeof exec_errno) _exit(0); /* gpurun said why, and exits 127/126 */

  const double t0 = gr__mono_now(), start_unix = gr__wall_now();
  gr__pid_stat st0;
  program_stat(s, &st0);
  if (s->csv >= 0 && s->prom.dir) {
    s->prom.have_self = gr__prom_owner_self(&s->prom.self) == 0;
    if (!s->prom.have_self)
      GR_WARN("--prometheus: /proc does not say who this supervisor is: its file carries no "
              "owner line, and no later job can remove it if the supervisor is killed");
  }
  if (s->csv >= 0 && gr__telemetry_open(s->o->gpus_pci, s->o->cpus, s->pid, s->o->rank,
                                        s->o->local_rank, &s->tel) != GR_OK) {
    GR_WARN("--monitor: telemetry could not start; running without monitoring");
    close(s->csv);
    s->csv = -1;
    s->tel = NULL;
  }

  const gr_supervise_opts *o = s->o;
  double next_sample = t0;
  const double term_at = o->time_limit_s > 0 ? t0 + o->time_limit_s : INFINITY;
  double kill_at = INFINITY;
  int term_sent = 0, kill_sent = 0;
  /* Without a pidfd the program's end is seen by looking: every 0.1 s at most, and at least once
   * an interval. */
  const double look = 0.1;

  for (;;) {
    double now = gr__mono_now();
    if (s->tel && now >= next_sample) {
      if (write_sample(s, now - t0) != GR_OK) {
        GR_WARN("--monitor: %s; sampling stops here (the file ends on the last whole row)",
                gr_last_error());
        gr__telemetry_close(s->tel);
        s->tel = NULL;
        close(s->csv);
        s->csv = -1;
        continue;
      }
      next_sample += o->monitor_interval_s;
      if (next_sample <= now) next_sample = now + o->monitor_interval_s; /* fell behind: skip */
    }
    if (!term_sent && now >= term_at) {
      GR_ERROR("time limit of %g s reached: sending SIGTERM to %s (pid %d), SIGKILL in %g s",
               o->time_limit_s, s->argv[0], (int)s->pid, o->kill_grace_s);
      time_limit_signal(s, SIGTERM);
      time_limit_signal(s, SIGCONT); /* a stopped program gets its SIGTERM now */
      term_sent = 1;
      kill_at = now + o->kill_grace_s;
    }
    if (term_sent && !kill_sent && now >= kill_at) {
      if (program_alive(s))
        GR_ERROR("%s (pid %d) still running %g s after SIGTERM: sending SIGKILL", s->argv[0],
                 (int)s->pid, o->kill_grace_s);
      time_limit_signal(s, SIGKILL);
      kill_sent = 1;
    }

    double wake = INFINITY;
    if (s->tel) wake = next_sample;
    if (!term_sent && term_at < wake) wake = term_at;
    if (term_sent && !kill_sent && kill_at < wake) wake = kill_at;
    if (s->pidfd < 0 && now + look < wake) wake = now + look;
    int timeout_ms = -1;
    if (isfinite(wake)) {
      double d = wake - gr__mono_now();
      timeout_ms = d <= 0 ? 0 : (int)ceil(d * 1000.0);
    }
    if (s->pidfd >= 0) {
      struct pollfd pfd = {.fd = s->pidfd, .events = POLLIN};
      int pr = poll(&pfd, 1, timeout_ms);
      if (pr > 0 && (pfd.revents & (POLLIN | POLLHUP | POLLERR))) break;
      if (pr < 0 && errno != EINTR) {
        GR_WARN("supervise: poll: %s; looking at the program every %g s instead", strerror(errno),
                look);
        close(s->pidfd);
        s->pidfd = -1;
      }
    } else {
      if (timeout_ms > 0) poll(NULL, 0, timeout_ms);
      if (!program_alive(s)) break;
    }
  }

  program_end e;
  read_end(s, &e);
  const double end_unix = gr__wall_now();
  /* Whatever the program left running is stopped with it by the time limit: its group when it led
   * one, and what was found below it (held by pidfds, so none of them is another process now). */
  if (term_sent) {
    if (s->leads_group) kill(-s->pid, SIGKILL);
    signal_tracked(&s->below, SIGKILL);
  }
  char words[160];
  describe_end(&e, words, sizeof words);
  if (term_sent)
    GR_ERROR("%s (pid %d) ended by the time limit of %g s (%s): %s", s->argv[0], (int)s->pid,
             o->time_limit_s, kill_sent ? "killed with SIGKILL" : "after SIGTERM", words);
  else
    GR_DEBUG("%s (pid %d) ended: %s", s->argv[0], (int)s->pid, words);
  write_end_record(s, &e,
                   kill_sent   ? GR_END_TL_KILL
                   : term_sent ? GR_END_TL_TERM
                               : GR_END_TL_NONE,
                   start_unix, end_unix);
  if (s->tel) gr__telemetry_close(s->tel);
  if (s->csv >= 0) close(s->csv);
  if (s->prom.name[0]) { /* the job is over: its series go away with it */
    char path[PATH_MAX];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", s->prom.dir, s->prom.name) < sizeof path)
      unlink(path);
  }
  _exit(0);
}

int gr__exec_exit_code(int err) { return err == ENOENT || err == ENOTDIR ? 127 : 126; }

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

  static supervisor sv; /* the supervisor's, after the fork; static keeps it off gpurun's stack */
  supervisor *s = &sv;
  memset(s, 0, sizeof *s);
  s->o = o;
  s->argv = argv;
  s->pid = getpid();
  s->csv = s->dirfd = -1;
  s->last_cpu_s = NAN;
  s->permitted = 1; /* until /proc shows otherwise (a set-uid program, say) */
  s->clk_tck = sysconf(_SC_CLK_TCK);
  if (s->clk_tck <= 0) s->clk_tck = 100;
  /* Opened here, before gpurun forks: what the supervisor holds is this process, whatever it
   * becomes (exec keeps the pid) and whenever its launcher reaps it. */
  s->pidfd = pidfd_open_(s->pid);
  char procpath[64];
  snprintf(procpath, sizeof procpath, "/proc/%d", (int)s->pid);
  s->procfd = open(procpath, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  s->leads_group = getpgrp() == s->pid;

  if (o->monitor_interval_s > 0)
    s->csv = open_csv(o, s->csv_path, sizeof s->csv_path, s->prom.job, sizeof s->prom.job,
                      s->prom.node, sizeof s->prom.node, &s->dirfd);
  if (s->csv >= 0 && o->prometheus_dir && *o->prometheus_dir) {
    char seg_job[128], seg_node[256];
    snprintf(seg_job, sizeof seg_job, "%.127s", s->prom.job);
    snprintf(seg_node, sizeof seg_node, "%.255s", s->prom.node);
    name_segment(seg_job);
    name_segment(seg_node);
    s->prom.dir = o->prometheus_dir;
    snprintf(s->prom.name, sizeof s->prom.name, "gpurun_%.100s_%.100s_%d.prom", seg_job, seg_node,
             o->local_rank);
    char *slash = strrchr(s->csv_path, '/');
    if (o->rank >= 0 && slash)
      snprintf(s->prom.live, sizeof s->prom.live, "%.*s/live.%d", (int)(slash - s->csv_path),
               s->csv_path, o->rank);
  }

  int ready[2] = {-1, -1};
  if (pipe2(ready, O_CLOEXEC) != 0) {
    int e = errno;
    if (s->csv >= 0) close(s->csv);
    if (s->dirfd >= 0) close(s->dirfd);
    if (s->pidfd >= 0) close(s->pidfd);
    if (s->procfd >= 0) close(s->procfd);
    return gr__fail(GR_ERR_SYSTEM, call, "supervise: pipe: %s", strerror(e));
  }
  fflush(NULL);
  /* The supervisor is a grandchild that the intermediate child leaves an orphan at once: not a
   * child of the program, whose own wait(-1) must never reap it (or wait for it). */
  pid_t mid = fork();
  if (mid == 0) {
    pid_t sup = fork();
    if (sup != 0) _exit(sup < 0 ? 1 : 0);
    close(ready[1]);
    supervisor_main(s, ready[0]);
    _exit(0);
  }
  int fork_errno = errno;
  close(ready[0]);
  if (s->csv >= 0) close(s->csv);
  if (s->dirfd >= 0) close(s->dirfd);
  if (s->pidfd >= 0) close(s->pidfd);
  if (s->procfd >= 0) close(s->procfd);
  int mst = 0;
  if (mid > 0) {
    pid_t w;
    while ((w = waitpid(mid, &mst, 0)) < 0 && errno == EINTR) {
    }
    if (w < 0) mst = 0; /* SIGCHLD ignored by whoever started gpurun: reaped for us */
  }
  if (mid < 0 || !WIFEXITED(mst) || WEXITSTATUS(mst) != 0) {
    close(ready[1]);
    return gr__fail(GR_ERR_SYSTEM, call, "supervise: fork: %s",
                    mid < 0 ? strerror(fork_errno) : "the supervisor could not be started");
  }
  execvp(argv[0], argv);
  int e = errno;
  ssize_t wr = write(ready[1], &e, sizeof e);
  (void)wr;
  close(ready[1]);
  GR_ERROR("cannot execute %s: %s", argv[0], strerror(e));
  *exit_code = gr__exec_exit_code(e);
  return GR_OK;
}
