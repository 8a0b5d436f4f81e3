/* The watchdog (gr_watchdog.h): a timeout for programs that have none.
 *
 * Every tick (a quarter of GPURUN_TIMEOUT, at most 1 s) the thread asks its library which call
 * this process has been inside longest (the MPI layer: its threads' calls in progress; the NCCL
 * plugin: its communicators' records the GPU has not finished). The first rank to see one older
 * than the timeout creates <job>/hang exclusively, dumps its flight recorder and answers in
 * <job>/hang.<rank>; every rank that shares the job directory sees the file at its next tick and
 * does the same, whether it waits or computes. After two ticks and one second the rank that made
 * the file reads the answers and prints one verdict: who waits in which call on which
 * communicator, who is behind (and in what), and who never answered (stopped, dead, or on a node
 * that does not share the directory). With GPURUN_ON_HANG=abort it then ends the job through its
 * library (MPI_Abort; the NCCL plugin exits the process) with GR__HANG_EXIT. */
#include "gr_watchdog.h"
#include "gr_hang.h"

#include "gr_clock.h"
#include "gr_error.h"
#include "gr_escape.h"
#include "gr_flight.h"
#include "gr_jobdir.h"
#include "gr_live_file.h"
#include "gr_log.h"
#include "gr_param.h"
#include "gr_parse.h"
#include "gr_safefile.h"
#include "gr_strbuf.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MARK GR__HANG_MARK
#define ANSWER_MAGIC GR__HANG_MAGIC

static struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  pthread_t thread;
  int running, stop;
  double timeout, tick;
  int abort_job;
  char root[1024], job[128];
  int rank, size;
  const gr__watchdog_ops *ops;
} W = {.mu = PTHREAD_MUTEX_INITIALIZER};

static int open_dir(void) {
  int dirfd;
  if (gr__jobdir_open(W.root, W.job, &dirfd) != GR_OK) return -1;
  return dirfd;
}

/* This rank's answer: what it is inside (or that it computes) and each communicator's latest
 * call, one "comm ID SEQ OP STATE" line each. */
static void answer(int dirfd) {
  char buf[4096];
  gr__strbuf sb;
  gr__strbuf_init_fixed(&sb, buf, sizeof buf);
  gr__strbuf_appendf(&sb, ANSWER_MAGIC "\nrank %d\n", W.rank);
  gr__inside in;
  if (W.ops->longest(&in))
    gr__strbuf_appendf(&sb, "inside %s %s %llu %.3f\n", in.op, in.comm_id,
                       (unsigned long long)in.seq, gr__wall_now() - in.since);
  else
    gr__strbuf_appendf(&sb, "inside - - 0 0\n");
  gr__flight_now now[GR_LIVE_MAX_COMMS];
  int n = gr__flight_latest(now, GR_LIVE_MAX_COMMS);
  for (int i = 0; i < n; i++) {
    char id[32], name[32];
    gr__live_clean(id, sizeof id, now[i].id, strlen(now[i].id));
    gr__live_clean(name, sizeof name, now[i].name, strlen(now[i].name));
    gr__strbuf_appendf(&sb, "comm %s %s %llu %s %s\n", id, name, (unsigned long long)now[i].seq,
                       now[i].op ? now[i].op : "-",
                       now[i].calls ? (now[i].end > 0 ? "done" : "running") : "none");
  }
  char name[32];
  snprintf(name, sizeof name, MARK ".%d", W.rank);
  gr__file_replace(dirfd, name, buf, gr__strbuf_len(&sb));
}

static void dump(const char *reason) {
  char path[1024];
  if (gr__flight_dump(reason, path, sizeof path) != GR_OK) GR_WARN("%s", gr_last_error());
}

/* Reads hang.<r> into *a; 0 when it is a well-formed answer (gr__hang_parse). Regular files
 * only, at most GR__HANG_MAX bytes. */
static int read_answer(int dirfd, int r, const char *comm, gr__hang_answer *a) {
  memset(a, 0, sizeof *a);
  char name[32], buf[GR__HANG_MAX];
  snprintf(name, sizeof name, MARK ".%d", r);
  int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return -1;
  struct stat st;
  ssize_t n = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? read(fd, buf, sizeof buf) : -1;
  close(fd);
  if (n <= 0) return -1;
  return gr__hang_parse(buf, (size_t)n, comm, a);
}

static void put_list(gr__strbuf *o, const unsigned char *flag, int n) {
  int said = 0;
  for (int r = 0; r < n; r++)
    if (flag[r]) {
      if (said >= 16) {
        gr__strbuf_appendf(o, ",...");
        break;
      }
      gr__strbuf_appendf(o, "%s%d", said++ ? "," : "", r);
    }
}

/* The rank that made the mark: read every answer and say who is missing, in one line. A rank
 * inside a call waits (in this call, or another one); one outside, computing, is behind; one that
 * never answered is stopped or dead. The missing are the last two kinds; when there are none,
 * every rank is inside a call: a deadlock or calls that do not match, and the ranks in other calls
 * than this one are named. */
static void verdict(int dirfd, const gr__inside *in) {
  int n = W.size > 0 ? W.size : 1;
  gr__hang_answer *a = calloc((size_t)n, sizeof *a);
  unsigned char *same = calloc((size_t)n, 1), *other = calloc((size_t)n, 1),
                *outside = calloc((size_t)n, 1), *silent = calloc((size_t)n, 1);
  if (!a || !same || !other || !outside || !silent) goto out;
  int nsame = 0, nother = 0, nmissing = 0;
  for (int r = 0; r < n; r++) {
    if (read_answer(dirfd, r, in->comm_id, &a[r]) != 0) {
      silent[r] = 1;
      nmissing++;
    } else if (!a[r].in_op[0] || !strcmp(a[r].in_op, "-")) {
      outside[r] = 1;
      nmissing++;
    } else if (!strcmp(a[r].in_comm, in->comm_id) && a[r].in_seq == in->seq &&
               !strcmp(a[r].in_op, in->op)) {
      same[r] = 1;
      nsame++;
    } else {
      other[r] = 1;
      nother++;
    }
  }
  char line[2048];
  gr__strbuf o;
  gr__strbuf_init_fixed(&o, line, sizeof line);
  gr__strbuf_appendf(&o, "hang: rank%s ", nsame == 1 ? "" : "s");
  put_list(&o, same, n);
  gr__strbuf_appendf(&o, " waited %.1f s in %s #%llu on %s", gr__wall_now() - in->since, in->op,
                     (unsigned long long)in->seq, in->comm_name);
  int said = 0;
  if (nother) {
    if (nmissing)
      gr__strbuf_appendf(&o, "; also inside %s:", W.ops->calls);
    else
      gr__strbuf_appendf(
          &o, "; no rank is outside %s (a deadlock, or calls that do not match):", W.ops->calls);
    for (int r = 0; r < n && said < 8; r++)
      if (other[r])
        gr__strbuf_appendf(&o, "%s rank %d in %s #%llu on %s for %.1f s", said++ ? "," : "", r,
                           a[r].in_op, a[r].in_seq, a[r].in_comm, a[r].in_for);
  }
  if (nmissing) {
    gr__strbuf_appendf(&o, "; missing:");
    said = 0;
    for (int r = 0; r < n && said < 8; r++) {
      if (outside[r])
        gr__strbuf_appendf(&o, "%s rank %d outside %s (last call %s #%llu %s)", said++ ? "," : "",
                           r, W.ops->calls, a[r].op[0] ? a[r].op : "none", a[r].seq,
                           a[r].state[0] ? a[r].state : "-");
      else if (silent[r])
        gr__strbuf_appendf(&o,
                           "%s rank %d (no answer: stopped, dead, or on a node without this "
                           "job directory)",
                           said++ ? "," : "", r);
    }
    if (nmissing > said) gr__strbuf_appendf(&o, " and %d more", nmissing - said);
  }
  gr__strbuf_appendf(&o, "; flight recorders in %s/%s", W.root, W.job);
  /* one line on stderr whatever GPURUN_LOG says: it is what the user asked the timeout for */
  char esc[2200];
  fprintf(stderr, "gpurun: rank %d: %s\n", W.rank, gr__esc_term_str(esc, sizeof esc, line));
out:
  free(a);
  free(same);
  free(other);
  free(outside);
  free(silent);
}

static void *watch(void *arg) {
  (void)arg;
  int answered = 0, fired = 0;
  double mark_seen_at = 0, fired_at = 0;
  gr__inside hung;
  memset(&hung, 0, sizeof hung);
  pthread_mutex_lock(&W.mu);
  while (!W.stop) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    long long ns = ts.tv_nsec + (long long)(W.tick * 1e9);
    ts.tv_sec += (time_t)(ns / 1000000000);
    ts.tv_nsec = (long)(ns % 1000000000);
    pthread_cond_timedwait(&W.cv, &W.mu, &ts);
    if (W.stop) break;
    pthread_mutex_unlock(&W.mu);
    int dirfd = open_dir();
    gr__inside in;
    if (!fired && W.ops->longest(&in) && gr__wall_now() - in.since > W.timeout) {
      fired = 1;
      fired_at = gr__mono_now();
      hung = in;
      if (dirfd >= 0) {
        int fd = openat(dirfd, MARK, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0) { /* the first: this rank speaks */
          dprintf(fd, "rank %d\n", W.rank);
          close(fd);
        } else {
          fired = 2; /* another rank made it: it speaks */
        }
      }
      dump(GR_FL_REASON_TIMEOUT);
      if (dirfd >= 0) answer(dirfd);
      answered = 1;
      if (dirfd < 0) fired = 1; /* no directory: speak from what this rank knows */
    }
    if (!answered && dirfd >= 0 && faccessat(dirfd, MARK, F_OK, AT_SYMLINK_NOFOLLOW) == 0) {
      if (!mark_seen_at) mark_seen_at = gr__mono_now();
      dump(GR_FL_REASON_HANG);
      answer(dirfd);
      answered = 1;
    }
    if (fired == 1 && gr__mono_now() - fired_at >= 2 * W.tick + 1.0) {
      fired = 3;
      if (dirfd >= 0) verdict(dirfd, &hung);
      if (W.abort_job) {
        fprintf(stderr, "gpurun: rank %d: GPURUN_ON_HANG=abort: ending the job (exit %d)\n", W.rank,
                GR__HANG_EXIT);
        /* the launcher forwards the lines above on its own time, and an abort may kill that
         * forwarding first (MPICH's Hydra dropped the last line once): a moment for it */
        fflush(stderr);
        struct timespec pause = {0, 200 * 1000 * 1000};
        nanosleep(&pause, NULL);
        W.ops->end_job(GR__HANG_EXIT);
      }
    }
    if (dirfd >= 0) close(dirfd);
    pthread_mutex_lock(&W.mu);
  }
  pthread_mutex_unlock(&W.mu);
  return NULL;
}

void gr__watchdog_start(const char *job, int rank, int size, const gr__watchdog_ops *ops) {
  double t = gr__param_seconds(GR_PARAM_TIMEOUT);
  if (!(t > 0) || W.running) return;
  W.ops = ops;
  const char *root = gr__param_str(GR_PARAM_MONITOR_DIR);
  snprintf(W.root, sizeof W.root, "%s", root && *root ? root : "gpurun-monitor");
  snprintf(W.job, sizeof W.job, "%s", job);
  W.rank = rank;
  W.size = size;
  W.timeout = t;
  W.tick = t / 4 < 1.0 ? t / 4 : 1.0;
  if (W.tick < 0.05) W.tick = 0.05;
  W.abort_job = gr__param_word(GR_PARAM_ON_HANG) == GR_ON_HANG_ABORT;
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&W.cv, &ca);
  pthread_condattr_destroy(&ca);
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int rc = pthread_create(&W.thread, NULL, watch, NULL);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc != 0) {
    GR_WARN("GPURUN_TIMEOUT: cannot start the watchdog: %s; %s calls have no timeout", strerror(rc),
            ops->calls);
    return;
  }
  W.running = 1;
}

void gr__watchdog_stop(void) {
  if (!W.running) return;
  pthread_mutex_lock(&W.mu);
  W.stop = 1;
  pthread_cond_signal(&W.cv);
  pthread_mutex_unlock(&W.mu);
  pthread_join(W.thread, NULL);
  W.running = 0;
}
