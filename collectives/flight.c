/* Flight recorder (see gr_flight.h). The registry of recorders is process-wide by necessity: a
 * signal or a timeout on one communicator dumps all of them. It is guarded by one mutex, taken
 * twice per call (begin/end) and never from the signal handler. */
#include "gr_flight.h"

#include "gr_param.h"

#include "gr_coll.h"
#include "gr_dtype.h"
#include "gr_error.h"
#include "gr_escape.h"
#include "gr_log.h"
#include "gr_safefile.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct {
  uint64_t seq;
  uint64_t cseq; /* the communicator's collective number (the same on every member); 0: p2p */
  size_t count;
  int kind, dtype, root, peer, tag; /* peer, tag: point to point only (else -1) */
  double start, end;
  gr__flight_state state;
} rec;

struct gr__flight {
  char id[32], name[32];
  int rank, size;
  const char *backend;
  uint64_t n;     /* records written so far; ring[n % N] is the next */
  uint64_t ncoll; /* collective calls begun so far */
  double busy_s;  /* seconds inside finished calls (the live state's running total) */
  rec ring[GR__FLIGHT_N];
  gr_list_node node; /* in recorders */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static gr_list recorders; /* gr__flight, in creation order (the dump's order); under lock */
static int keep_for_exit;
static char job[128];
static volatile sig_atomic_t sig_pending;

static void on_sigusr1(int sig) {
  (void)sig;
  sig_pending = 1;
}

static void dump_at_exit(void) {
  char path[1024];
  if (gr__flight_dump(GR_FL_REASON_EXIT, path, sizeof path) != GR_OK)
    GR_WARN("%s", gr_last_error());
  pthread_mutex_lock(&lock);
  gr_list_node *n;
  while ((n = gr__list_pop_front(&recorders)))
    free(GR_LIST_ENTRY(n, gr__flight, node));
  pthread_mutex_unlock(&lock);
}

void gr__flight_arm(const char *id) {
  pthread_mutex_lock(&lock);
  snprintf(job, sizeof job, "%s", id);
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

int gr__flight_begin(gr__flight *f, uint64_t seq, int kind, size_t count, int dtype, int root,
                     int peer, int tag, double start) {
  if (!f) return -1;
  pthread_mutex_lock(&lock);
  int slot = (int)(f->n++ % GR__FLIGHT_N);
  int p2p = kind == GR__SEND || kind == GR__RECV;
  uint64_t cseq = p2p ? 0 : ++f->ncoll;
  f->ring[slot] =
      (rec){seq, cseq, count, kind, dtype, root, peer, p2p ? tag : -1, start, 0.0, GR__FL_RUNNING};
  pthread_mutex_unlock(&lock);
  return slot;
}

void gr__flight_end(gr__flight *f, int slot, uint64_t seq, gr__flight_state st, double end) {
  if (!f || slot < 0) return;
  pthread_mutex_lock(&lock);
  if (f->ring[slot].seq == seq) { /* not overwritten by a newer call meanwhile */
    f->ring[slot].state = st;
    f->ring[slot].end = end;
    if (end > f->ring[slot].start) f->busy_s += end - f->ring[slot].start;
  }
  pthread_mutex_unlock(&lock);
}

void gr__flight_poll(void) {
  if (!sig_pending) return;
  sig_pending = 0;
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
    o->calls = f->n;
    o->busy_s = f->busy_s;
    if (f->n) {
      const rec *r = &f->ring[(f->n - 1) % GR__FLIGHT_N];
      o->seq = r->seq;
      o->op = gr__kind_name((gr__kind)r->kind);
      o->count = r->count;
      o->start = r->start;
      o->end = r->state == GR__FL_RUNNING ? 0.0 : r->end;
      o->state = r->state;
    }
    /* The point-to-point calls still unfinished, newest first: whom the rank waits for (a group
     * of sends and receives has several at once). */
    uint64_t first = f->n > GR__FLIGHT_N ? f->n - GR__FLIGHT_N : 0;
    for (uint64_t i = f->n; i > first && o->nwaits < GR_LIVE_MAX_WAITS; i--) {
      const rec *r = &f->ring[(i - 1) % GR__FLIGHT_N];
      if (r->state != GR__FL_RUNNING || (r->kind != GR__SEND && r->kind != GR__RECV)) continue;
      o->waits[o->nwaits].recv = r->kind == GR__RECV;
      o->waits[o->nwaits].peer = r->peer;
      o->waits[o->nwaits].tag = r->tag;
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
    uint64_t first = f->n > GR__FLIGHT_N ? f->n - GR__FLIGHT_N : 0;
    for (uint64_t i = first; i < f->n; i++) {
      const rec *r = &f->ring[i % GR__FLIGHT_N];
      fprintf(o, "%s\n  {" KEY(GR_FL_SEQ) "%llu, ", i == first ? "" : ",",
              (unsigned long long)r->seq);
      fprintf(o,
              KEY(GR_FL_OP) "\"%s\", " KEY(GR_FL_COUNT) "%zu, " KEY(GR_FL_DTYPE) "\"%s\", " KEY(
                  GR_FL_ROOT) "%d, " KEY(GR_FL_PEER) "%d, ",
              gr__kind_name((gr__kind)r->kind), r->count,
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
  int dirfd;
  gr_status st = gr__jobdir_open(root, jobname, &dirfd);
  if (st == GR_OK) {
    st = gr__file_replace(dirfd, name, buf, len);
    close(dirfd);
  }
  free(buf);
  if (st == GR_OK) return GR_OK;
  return gr__fail_msg(st, "flight recorder: not written: %s", gr_last_error());
}
