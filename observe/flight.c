/* Flight recorder (see gr_flight.h): the registry and the readers; the calls record inline
 * (gr_flight.h), without a lock. The registry of recorders is process-wide by necessity: a signal
 * or a timeout on one communicator dumps all of them. It is guarded by one mutex, taken by the
 * creation, naming and release of a recorder and by the readers, never by a call's begin or end
 * and never from the signal handler. */
#include "gr_fork.h"
#include "gr_flight.h"

#include "gr_param.h"

#include "gr_error.h"
#include "gr_escape.h"
#include "gr_log.h"
#include "gr_safefile.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* One record as a reader copied it. */
typedef struct {
  uint64_t seq, cseq, count;
  int kind, dtype, root, peer, tag;
  double start, end;
  gr__flight_state state;
} rec;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static gr_list recorders; /* gr__flight, in creation order (the dump's order); under lock */
static int keep_for_exit;
static unsigned armed_gen; /* the process generation that armed the exit dump (gr_fork.h) */
static char job[128];
volatile sig_atomic_t gr__flight_sig_pending;

static void on_sigusr1(int sig) {
  (void)sig;
  gr__flight_sig_pending = 1;
}

static void dump_at_exit(void) {
  char path[1024];
  if (!gr__fork_mine(armed_gen)) return; /* a child of fork(): the dump files are the parent's */
  if (gr__flight_dump(GR_FL_REASON_EXIT, path, sizeof path) != GR_OK)
    GR_WARN("%s", gr_last_error());
  pthread_mutex_lock(&lock);
  gr_list_node *n;
  while ((n = gr__list_pop_front(&recorders)))
    free(GR_LIST_ENTRY(n, gr__flight, node));
  pthread_mutex_unlock(&lock);
}

/* The world's size, kept from the arming for the dumps made after MPI_Finalize (at exit). */
static _Atomic int world_size;

void gr__flight_arm(const char *id) {
  int inited = 0, finalized = 0, size = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&finalized);
  if (inited && !finalized) MPI_Comm_size(MPI_COMM_WORLD, &size);
  pthread_mutex_lock(&lock);
  snprintf(job, sizeof job, "%s", id);
  if (size > 0) world_size = size;
  int debug = GR_LOG_ENABLED(GR_LOG_DEBUG);
  if (debug || gr__param_bool(GR_PARAM_FLIGHT)) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigusr1;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
  }
  if (debug) {
    keep_for_exit = 1;
    gr__fork_watch();
    armed_gen = gr__fork_gen();
    atexit(dump_at_exit);
  }
  pthread_mutex_unlock(&lock);
}

gr__flight *gr__flight_new(const char *id, int rank, int size, const char *backend) {
  gr__flight *f = calloc(1, sizeof *f);
  if (!f) return NULL;
  snprintf(f->id, sizeof f->id, "%s", id);
  snprintf(f->name, sizeof f->name, "%s", id);
  f->rank = rank;
  f->size = size;
  f->backend = backend;
  pthread_mutex_lock(&lock);
  gr__list_push_back(&recorders, &f->node);
  pthread_mutex_unlock(&lock);
  return f;
}

void gr__flight_name(gr__flight *f, const char *name) {
  if (!f) return;
  pthread_mutex_lock(&lock);
  snprintf(f->name, sizeof f->name, "%s", name);
  pthread_mutex_unlock(&lock);
}

void gr__flight_release(gr__flight *f) {
  if (!f) return;
  pthread_mutex_lock(&lock);
  if (!keep_for_exit) {
    gr__list_remove(&recorders, &f->node);
    free(f);
  }
  pthread_mutex_unlock(&lock);
}

uint64_t gr__flight_slot_wait(gr__flight_slot *s) {
  for (unsigned spins = 0;; spins++) {
    uint64_t v = atomic_load_explicit(&s->ver, memory_order_relaxed);
    if (!(v & 1) && atomic_compare_exchange_weak_explicit(&s->ver, &v, v + 1, memory_order_acquire,
                                                          memory_order_relaxed))
      return v;
    if (spins >= 64) sched_yield(); /* the other writer may be off its core */
  }
}

/* Tries a reader makes on one record before it gives up on it (a writer inside the slot, or a
 * begin that took the record's number and has not entered the slot yet); each past the first few
 * yields the core. */
#define READ_TRIES 4096

/* Copies record i of f into r when it is still in its slot: 1, else 0 (overwritten by a newer one,
 * or still being written after READ_TRIES looks). */
static int read_rec(const gr__flight *f, uint64_t i, rec *r) {
  gr__flight_slot *s = (gr__flight_slot *)&f->ring[i % GR__FLIGHT_N];
  for (int t = 0; t < READ_TRIES; t++) {
    if (t >= 16) sched_yield();
    uint64_t v1 = atomic_load_explicit(&s->ver, memory_order_acquire);
    if (v1 & 1) continue;
    uint64_t idx = atomic_load_explicit(&s->idx, memory_order_relaxed);
    r->seq = atomic_load_explicit(&s->seq, memory_order_relaxed);
    r->cseq = atomic_load_explicit(&s->cseq, memory_order_relaxed);
    r->count = atomic_load_explicit(&s->count, memory_order_relaxed);
    r->kind = atomic_load_explicit(&s->kind, memory_order_relaxed);
    r->dtype = atomic_load_explicit(&s->dtype, memory_order_relaxed);
    r->root = atomic_load_explicit(&s->root, memory_order_relaxed);
    r->peer = atomic_load_explicit(&s->peer, memory_order_relaxed);
    r->tag = atomic_load_explicit(&s->tag, memory_order_relaxed);
    r->state = (gr__flight_state)atomic_load_explicit(&s->state, memory_order_relaxed);
    r->start = atomic_load_explicit(&s->start, memory_order_relaxed);
    r->end = atomic_load_explicit(&s->end, memory_order_relaxed);
    atomic_thread_fence(memory_order_acquire); /* the copy before the second look at ver */
    if (atomic_load_explicit(&s->ver, memory_order_relaxed) != v1) continue;
    if (idx == i + 1) return 1;
    if (idx > i + 1) return 0; /* a newer record took the slot */
    /* an older record: record i's begin has its number but has not written it yet */
  }
  return 0;
}

void gr__flight_poll_signal(void) {
  gr__flight_sig_pending = 0;
  char path[1024];
  if (gr__flight_dump(GR_FL_REASON_SIGNAL, path, sizeof path) == GR_OK)
    GR_INFO("flight recorder written to %s", path);
  else
    GR_WARN("%s", gr_last_error());
}

int gr__flight_latest(gr__flight_now *out, int max) {
  int n = 0;
  pthread_mutex_lock(&lock);
  for (gr_list_node *it = recorders.head; it && n < max; it = it->next, n++) {
    const gr__flight *f = GR_LIST_ENTRY(it, gr__flight, node);
    gr__flight_now *o = &out[n];
    memset(o, 0, sizeof *o);
    snprintf(o->id, sizeof o->id, "%s", f->id);
    snprintf(o->name, sizeof o->name, "%s", f->name);
    snprintf(o->backend, sizeof o->backend, "%s", f->backend ? f->backend : "?");
    o->rank = f->rank;
    o->size = f->size;
    o->busy_s = atomic_load_explicit(&f->busy_s, memory_order_relaxed);
    uint64_t calls = atomic_load_explicit(&f->n, memory_order_acquire);
    uint64_t first = calls > GR__FLIGHT_N ? calls - GR__FLIGHT_N : 0;
    rec r;
    /* the newest record a reader can copy whole (one a begin is inside is skipped) */
    for (uint64_t i = calls; i > first; i--) {
      if (!read_rec(f, i - 1, &r)) continue;
      o->calls = i;
      o->seq = r.seq;
      o->op = gr__record_name(r.kind);
      o->count = r.count;
      o->start = r.start;
      o->end = r.state == GR__FL_RUNNING ? 0.0 : r.end;
      o->state = r.state;
      break;
    }
    /* The point-to-point calls still unfinished, newest first: whom the rank waits for (a group
     * of sends and receives has several at once). */
    for (uint64_t i = calls; i > first && o->nwaits < GR_LIVE_MAX_WAITS; i--) {
      if (!read_rec(f, i - 1, &r)) continue;
      /* a receive from any rank (MPI_ANY_SOURCE) names nobody */
      if (r.state != GR__FL_RUNNING || !gr__kind_is_p2p(r.kind) || r.peer < 0) continue;
      o->waits[o->nwaits].recv = gr__kind_class(r.kind) == GR__OPC_RECV;
      o->waits[o->nwaits].peer = r.peer;
      o->waits[o->nwaits].tag = r.tag;
      o->nwaits++;
    }
  }
  pthread_mutex_unlock(&lock);
  return n;
}

static void put_double(FILE *o, double v) {
  if (v == 0.0)
    fputs("null", o);
  else
    fprintf(o, "%.6f", v);
}

/* "\"name\": " for a key of the contract (gr_flight_format.h) */
#define KEY(k) "\"" k "\": "

static int dump_text(FILE *o, const char *reason) {
  static const char *const states[] = {GR_FL_STATE_RUNNING, GR_FL_STATE_DONE, GR_FL_STATE_FAILED,
                                       GR_FL_STATE_TIMEOUT};
  int wrank = gr__process_rank();
  char node[256] = "";
  gethostname(node, sizeof node - 1);
  int wsize = 0;
  int inited = 0, finalized = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&finalized);
  if (inited && !finalized) MPI_Comm_size(MPI_COMM_WORLD, &wsize);
  if (wsize <= 0) wsize = world_size;
  fprintf(o, "{" KEY(GR_FL_RANK) "%d, " KEY(GR_FL_SIZE) "%d, " KEY(GR_FL_NODE), wrank, wsize);
  gr__esc_json(o, node);
  fputs(", " KEY(GR_FL_REASON), o);
  gr__esc_json(o, reason);
  fputs(", " KEY(GR_FL_COMMS) "[", o);
  pthread_mutex_lock(&lock);
  for (gr_list_node *it = recorders.head; it; it = it->next) {
    const gr__flight *f = GR_LIST_ENTRY(it, gr__flight, node);
    fprintf(o, "%s\n {" KEY(GR_FL_COMM_ID), it == recorders.head ? "" : ",");
    gr__esc_json(o, f->id);
    fputs(", " KEY(GR_FL_COMM_NAME), o);
    gr__esc_json(o, f->name);
    fprintf(o, ", " KEY(GR_FL_COMM_RANK) "%d, " KEY(GR_FL_COMM_SIZE) "%d, " KEY(GR_FL_COMM_BACKEND),
            f->rank, f->size);
    gr__esc_json(o, f->backend);
    fputs(", " KEY(GR_FL_COMM_CALLS) "[", o);
    uint64_t calls = atomic_load_explicit(&f->n, memory_order_acquire);
    uint64_t first = calls > GR__FLIGHT_N ? calls - GR__FLIGHT_N : 0;
    int written = 0;
    for (uint64_t i = first; i < calls; i++) {
      rec rc;
      if (!read_rec(f, i, &rc)) continue; /* overwritten meanwhile, or still being begun */
      const rec *r = &rc;
      fprintf(o, "%s\n  {" KEY(GR_FL_SEQ) "%llu, ", written++ ? "," : "",
              (unsigned long long)r->seq);
      fprintf(o,
              KEY(GR_FL_OP) "\"%s\", " KEY(GR_FL_COUNT) "%zu, " KEY(GR_FL_DTYPE) "\"%s\", " KEY(
                  GR_FL_ROOT) "%d, " KEY(GR_FL_PEER) "%d, ",
              gr__record_name(r->kind), r->count,
              r->dtype >= 0 ? gr__dtype_name((gr_dtype)r->dtype) : "none", r->root, r->peer);
      if (r->tag >= 0) fprintf(o, KEY(GR_FL_TAG) "%d, ", r->tag);
      fputs(KEY(GR_FL_START), o);
      put_double(o, r->start);
      fputs(", " KEY(GR_FL_END), o);
      put_double(o, r->state == GR__FL_RUNNING ? 0.0 : r->end);
      if (r->cseq)
        fprintf(o, ", " KEY(GR_FL_CSEQ) "%llu", (unsigned long long)r->cseq);
      else
        fputs(", " KEY(GR_FL_CSEQ) "null", o);
      fprintf(o, ", " KEY(GR_FL_STATE) "\"%s\"}", states[r->state]);
    }
    fputs("]}", o);
  }
  pthread_mutex_unlock(&lock);
  fputs("]}\n", o);
  return wrank;
}

gr_status gr__flight_dump(const char *reason, char *path, size_t path_len) {
  const char *root = gr__param_str(GR_PARAM_MONITOR_DIR);
  if (!root) root = "./gpurun-monitor";
  const char *jobname = job[0] ? job : "nojob";
  char *buf = NULL;
  size_t len = 0;
  FILE *o = open_memstream(&buf, &len);
  if (!o) return gr__fail_msg(GR_ERR_NOMEM, "flight recorder: out of memory");
  int wrank = dump_text(o, reason);
  int bad = ferror(o);
  if (fclose(o) != 0 || bad) {
    free(buf);
    return gr__fail_msg(GR_ERR_NOMEM, "flight recorder: out of memory");
  }
  char name[64];
  snprintf(name, sizeof name, GR_FLIGHT_PREFIX "%d" GR_FLIGHT_SUFFIX, wrank);
  snprintf(path, path_len, "%s/%s/%s", root, jobname, name);
  gr_status st = gr__jobdir_replace(root, jobname, name, buf, len);
  free(buf);
  if (st == GR_OK) return GR_OK;
  return gr__fail_msg(st, "flight recorder: not written: %s", gr_last_error());
}
