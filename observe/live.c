/* The rank's live state (see gr_live.h): a snapshot of the flight recorder's latest call per
 * communicator, the communicator creations in progress, CPU time and RSS, written to a temp file
 * and renamed over live.<rank> so that a reader never sees half a file. A thread of its own
 * publishes every interval, so that a rank blocked inside MPI or NCCL still shows the call or
 * creation it waits in and its heartbeat; calls cost nothing more than the flight recorder's
 * lock, which they take anyway. */
#include "gr_live.h"

#include "gr_clock.h"
#include "gr_flight.h"
#include "gr_error.h"
#include "gr_jobdir.h"
#include "gr_live_file.h"
#include "gr_log.h"
#include "gr_param.h"
#include "gr_safefile.h"
#include "gr_strbuf.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <mpi.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static struct {
  int on;             /* set once by setup */
  pthread_mutex_t mu; /* everything below; held by the publisher except while it sleeps */
  pthread_cond_t cv;
  pthread_t thread;
  int stop, warned;
  pid_t owner;
  int64_t period_ns;
  long long beat; /* writes so far (the heartbeat) */
  int rank, size;
  char host[GR_LIVE_HOST_BYTES];
  int dirfd;           /* the job directory (gr__jobdir_open) */
  char path[PATH_MAX]; /* for messages */
  char name[32], tmp[64];
  double prev_cpu_s, prev_wall_s;
  double cpu_pct;
  gr__flight_now last[GR_LIVE_MAX_COMMS]; /* the last communicators written (kept for exit) */
  int nlast;
} L = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* Communicator creations in progress, under a mutex of their own: a creating thread never waits
 * for the publisher's file I/O (L.mu is held across it). */
typedef struct {
  const char *call, *step; /* static; call NULL: the slot is free */
  char over[32];
  int rank, size;
  double start;
} creating_slot;
static struct {
  pthread_mutex_t mu;
  creating_slot slot[GR_LIVE_MAX_CREATING];
} C = {.mu = PTHREAD_MUTEX_INITIALIZER};
static _Thread_local int my_creating = -1; /* the calling thread's slot in C.slot */
static int setup_done;

static const char *const state_names[] = {"running", "done", "failed", "timeout"};

static int (*_Atomic mpi_source)(gr__live_mpi *out); /* gr__live_set_mpi */

void gr__live_set_mpi(int (*fn)(gr__live_mpi *out)) {
  atomic_store_explicit(&mpi_source, fn, memory_order_release);
}

static long long rss_kib(void) {
  char buf[128];
  int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = '\0';
  unsigned long long size, res;
  if (sscanf(buf, "%llu %llu", &size, &res) != 2) return -1;
  return (long long)(res * (unsigned long long)sysconf(_SC_PAGESIZE) / 1024);
}

/* Called with L.mu held. */
static int write_state(const char *state) {
  gr__flight_now now[GR_LIVE_MAX_COMMS];
  int n = gr__flight_latest(now, GR_LIVE_MAX_COMMS);
  if (n > 0) {
    memcpy(L.last, now, (size_t)n * sizeof now[0]);
    L.nlast = n;
  } else { /* the communicators are gone (exit): keep what was last seen */
    memcpy(now, L.last, (size_t)L.nlast * sizeof now[0]);
    n = L.nlast;
  }
  struct rusage ru;
  double wall = gr__wall_now(), cpu = -1;
  if (getrusage(RUSAGE_SELF, &ru) == 0)
    cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
          (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
  if (cpu >= 0 && L.prev_wall_s > 0 && wall - L.prev_wall_s > 0.01) {
    L.cpu_pct = 100.0 * (cpu - L.prev_cpu_s) / (wall - L.prev_wall_s);
    if (L.cpu_pct < 0) L.cpu_pct = 0;
    L.prev_cpu_s = cpu;
    L.prev_wall_s = wall;
  } else if (L.prev_wall_s == 0) {
    L.prev_cpu_s = cpu;
    L.prev_wall_s = wall;
  }

  char buf[4096];
  gr__strbuf sb;
  gr__strbuf_init_fixed(&sb, buf, sizeof buf);
  gr__strbuf_appendf(&sb,
                     GR_LIVE_MAGIC "\nrank %d\nsize %d\nhost %s\npid %d\nstate %s\ntime %.3f\n"
                                   "beat %lld\ninterval %.3f\n",
                     L.rank, L.size, L.host, (int)getpid(), state, wall, ++L.beat,
                     (double)L.period_ns * 1e-9);
  if (L.cpu_pct >= 0) gr__strbuf_appendf(&sb, "cpu_pct %.1f\n", L.cpu_pct);
  long long rss = rss_kib();
  if (rss >= 0) gr__strbuf_appendf(&sb, "rss_kib %lld\n", rss);
  int (*mpi)(gr__live_mpi *) = atomic_load_explicit(&mpi_source, memory_order_acquire);
  gr__live_mpi m;
  m.nwaited = 0;
  if (mpi && mpi(&m)) {
    gr__strbuf_appendf(&sb, "mpi_s %.6f\nmpi_coll_s %.6f\nmpi_inside_since %.6f\n", m.in_s,
                       m.coll_s, m.inside_since);
    /* the per-peer waits: one bounded line (8 items of at most 24 bytes) */
    for (int k = 0; k < m.nwaited && k < GR_LIVE_MPI_PEERS; k++) {
      double s = m.waited[k].s;
      gr__strbuf_appendf(&sb, "%s%d:%.6f", k ? "," : "mpi_waited ", m.waited[k].rank,
                         s >= 0 && s < 1e9 ? s : 0.0);
    }
    if (m.nwaited > 0) gr__strbuf_putc(&sb, '\n');
  }
  for (int i = 0; i < n && gr__strbuf_len(&sb) < sizeof buf - 400; i++) {
    const gr__flight_now *c = &now[i];
    char name[sizeof c->name], waits[GR_LIVE_MAX_WAITS * 26 + 2];
    gr__live_clean(name, sizeof name, c->name, strlen(c->name)); /* one token */
    gr__strbuf wb;
    gr__strbuf_init_fixed(&wb, waits, sizeof waits);
    for (int k = 0; k < c->nwaits && k < GR_LIVE_MAX_WAITS; k++)
      gr__strbuf_appendf(&wb, "%s%c%d:%d", k ? "," : "", c->waits[k].recv ? 'r' : 's',
                         c->waits[k].peer, c->waits[k].tag < 0 ? 0 : c->waits[k].tag);
    if (!gr__strbuf_len(&wb)) gr__strbuf_putc(&wb, '-');
    gr__strbuf_appendf(&sb, "comm %s %d %d %s %llu %s %zu %s %.6f %.6f %llu %.6f %s %s\n", c->id,
                       c->rank, c->size, c->backend, (unsigned long long)c->seq,
                       c->op ? c->op : "-", c->count, state_names[c->state], c->start, c->end,
                       (unsigned long long)c->calls, c->busy_s, name[0] ? name : "-", waits);
  }
  creating_slot cr[GR_LIVE_MAX_CREATING];
  pthread_mutex_lock(&C.mu);
  memcpy(cr, C.slot, sizeof cr);
  pthread_mutex_unlock(&C.mu);
  for (int i = 0; i < GR_LIVE_MAX_CREATING && gr__strbuf_len(&sb) < sizeof buf - 200; i++)
    if (cr[i].call)
      gr__strbuf_appendf(&sb, "creating %s %s %s %d %d %.6f\n", cr[i].call, cr[i].step, cr[i].over,
                         cr[i].rank, cr[i].size, cr[i].start);
  /* A stale temp file of a killed predecessor with our pid is replaced; O_EXCL|O_NOFOLLOW make
   * sure a link planted under that name is never followed. */
  unlinkat(L.dirfd, L.tmp, 0);
  int fd = openat(L.dirfd, L.tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                  gr__jobdir_mode() & 0666);
  if (fd < 0) return -1;
  size_t len = gr__strbuf_len(&sb);
  ssize_t w = write(fd, buf, len);
  int bad = w != (ssize_t)len;
  if (close(fd) != 0) bad = 1;
  /* no fsync: a reader wants the latest state, not a durable one, 4 times a second */
  if (bad || renameat(L.dirfd, L.tmp, L.dirfd, L.name) != 0) {
    unlinkat(L.dirfd, L.tmp, 0);
    return -1;
  }
  return 0;
}

void gr__live_create_begin(const char *call, const char *step, const char *over, int rank,
                           int size) {
  double now = gr__wall_now();
  pthread_mutex_lock(&C.mu);
  my_creating = -1;
  for (int i = 0; i < GR_LIVE_MAX_CREATING && my_creating < 0; i++)
    if (!C.slot[i].call) {
      creating_slot *c = &C.slot[i];
      c->call = call;
      c->step = step;
      gr__live_clean(c->over, sizeof c->over, over, strlen(over)); /* one token, printable */
      c->rank = rank;
      c->size = size;
      c->start = now;
      my_creating = i;
    }
  pthread_mutex_unlock(&C.mu);
}

void gr__live_create_step(const char *step) {
  if (my_creating < 0) return;
  pthread_mutex_lock(&C.mu);
  C.slot[my_creating].step = step;
  pthread_mutex_unlock(&C.mu);
}

void gr__live_create_end(void) {
  if (my_creating < 0) return;
  pthread_mutex_lock(&C.mu);
  C.slot[my_creating].call = NULL;
  pthread_mutex_unlock(&C.mu);
  my_creating = -1;
}

int gr__live_publish(const char *state) {
  if (!__atomic_load_n(&L.on, __ATOMIC_ACQUIRE)) return -1;
  pthread_mutex_lock(&L.mu);
  int rc = write_state(state);
  pthread_mutex_unlock(&L.mu);
  return rc;
}

/* The publisher: wakes every interval and writes, whether or not a call or a creation changed:
 * the file's time and beat are the rank's heartbeat. A rank blocked inside MPI or NCCL keeps
 * publishing this way; a stopped or dead process does not, which gpurun-top reads as silence
 * after a few intervals (on another host, where it cannot look at the process). */
static void *publisher(void *arg) {
  (void)arg;
  pthread_mutex_lock(&L.mu);
  while (!L.stop) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t ns = ts.tv_nsec + L.period_ns;
    ts.tv_sec += (time_t)(ns / 1000000000);
    ts.tv_nsec = (long)(ns % 1000000000);
    pthread_cond_timedwait(&L.cv, &L.mu, &ts);
    if (L.stop) break;
    if (write_state("running") != 0 && !L.warned) {
      L.warned = 1;
      GR_WARN("live state: cannot write %s: %s", L.path, strerror(errno));
    }
  }
  pthread_mutex_unlock(&L.mu);
  return NULL;
}

/* Stops the publisher (once): 1 when this call stopped it. */
static int stop_publisher(void) {
  if (getpid() != L.owner) return 0; /* a forked child has no publisher thread */
  pthread_mutex_lock(&L.mu);
  int running = !L.stop;
  L.stop = 1;
  pthread_cond_signal(&L.cv);
  pthread_mutex_unlock(&L.mu);
  if (running) pthread_join(L.thread, NULL);
  return running;
}

static void stop_at_exit(void) {
  if (stop_publisher()) gr__live_publish("exited");
}

void gr__live_stop(void) {
  if (!__atomic_load_n(&L.on, __ATOMIC_ACQUIRE)) return;
  stop_publisher();
  __atomic_store_n(&L.on, 0, __ATOMIC_RELEASE);
}

void gr__live_setup(const char *job) {
  if (__atomic_exchange_n(&setup_done, 1, __ATOMIC_ACQ_REL)) return;
  const char *root = gr__param_str(GR_PARAM_MONITOR_DIR);
  if (!root || !gr__param_bool(GR_PARAM_LIVE)) return;
  double period = gr__param_seconds(GR_PARAM_LIVE_INTERVAL);
  /* private, checked (gr_safefile.h) */
  if (gr__jobdir_open(root, job, &L.dirfd) != GR_OK) {
    GR_WARN("live state: %s; gpurun-top will not see this rank", gr_last_error());
    return;
  }
  int inited = 0;
  MPI_Initialized(&inited);
  L.rank = gr__process_rank();
  L.size = 1;
  if (inited) {
    MPI_Comm_rank(MPI_COMM_WORLD, &L.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &L.size);
  }
  if (L.rank < 0) L.rank = 0;
  char host[256] = "";
  if (gethostname(host, sizeof host - 1) != 0) snprintf(host, sizeof host, "localhost");
  gr__live_clean(L.host, sizeof L.host, host, strlen(host));
  snprintf(L.path, sizeof L.path, "%s/%s/live.%d", root, job, L.rank);
  snprintf(L.name, sizeof L.name, "live.%d", L.rank);
  snprintf(L.tmp, sizeof L.tmp, ".live.%d.tmp.%d", L.rank, (int)getpid());
  L.period_ns = (int64_t)(period * 1e9);
  L.cpu_pct = -1;
  L.owner = getpid();
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&L.cv, &ca);
  pthread_condattr_destroy(&ca);
  __atomic_store_n(&L.on, 1, __ATOMIC_RELEASE);
  if (gr__live_publish("running") != 0)
    GR_WARN("live state: cannot write %s: %s", L.path, strerror(errno));
  /* The publisher blocks every signal: they stay the program's. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int rc = pthread_create(&L.thread, NULL, publisher, NULL);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc != 0) {
    GR_WARN("live state: cannot start the publisher thread: %s", strerror(rc));
    return;
  }
  atexit(stop_at_exit);
}
