/* Flight recorder (see gr_flight.h). The registry of recorders is process-wide by necessity: a
 * signal or a timeout on one communicator dumps all of them. It is guarded by one mutex, taken
 * twice per call (begin/end) and never from the signal handler. */
#include "gr_flight.h"

#include "gr_env_bool.h"

#include "gr_coll.h"
#include "gr_dtype.h"
#include "gr_error.h"
#include "gr_jobdir.h"
#include "gr_log.h"

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
  size_t count;
  int kind, dtype, root, peer;
  double start, end;
  gr__flight_state state;
} rec;

struct gr__flight {
  char id[32];
  int rank, size;
  const char *backend;
  uint64_t n; /* records written so far; ring[n % N] is the next */
  rec ring[GR__FLIGHT_N];
  gr__flight *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static gr__flight *head;
static int setup_done, keep_for_exit;
static char job[128];
static volatile sig_atomic_t sig_pending;

static void on_sigusr1(int sig) {
  (void)sig;
  sig_pending = 1;
}

static void dump_at_exit(void) {
  char path[1024];
  gr__flight_dump("exit", path, sizeof path);
  pthread_mutex_lock(&lock);
  while (head) {
    gr__flight *f = head;
    head = f->next;
    free(f);
  }
  pthread_mutex_unlock(&lock);
}

static int env_on(const char *name) { return gr__env_bool(name, 0); }

void gr__flight_setup(MPI_Comm mpi) {
  /* Collective the first time: every rank of the first communicator takes the same branch. */
  if (__atomic_load_n(&setup_done, __ATOMIC_ACQUIRE)) return;
  char buf[128] = "";
  gr__job_agree(mpi, buf, sizeof buf);
  pthread_mutex_lock(&lock);
  if (!setup_done) {
    snprintf(job, sizeof job, "%s", buf);
    int debug = GR_LOG_ENABLED(GR_LOG_DEBUG);
    if (debug || env_on("GPURUN_FLIGHT")) {
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
    __atomic_store_n(&setup_done, 1, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&lock);
}

gr__flight *gr__flight_new(const char *id, int rank, int size, const char *backend) {
  gr__flight *f = calloc(1, sizeof *f);
  if (!f) return NULL;
  snprintf(f->id, sizeof f->id, "%s", id);
  f->rank = rank;
  f->size = size;
  f->backend = backend;
  pthread_mutex_lock(&lock);
  gr__flight **tail = &head; /* append: the dump lists communicators in creation order */
  while (*tail) tail = &(*tail)->next;
  *tail = f;
  pthread_mutex_unlock(&lock);
  return f;
}

void gr__flight_release(gr__flight *f) {
  if (!f) return;
  pthread_mutex_lock(&lock);
  if (!keep_for_exit) {
    for (gr__flight **p = &head; *p; p = &(*p)->next)
      if (*p == f) {
        *p = f->next;
        break;
      }
    free(f);
  }
  pthread_mutex_unlock(&lock);
}

int gr__flight_begin(gr__flight *f, uint64_t seq, int kind, size_t count, int dtype, int root,
                     int peer, double start) {
  if (!f) return -1;
  pthread_mutex_lock(&lock);
  int slot = (int)(f->n++ % GR__FLIGHT_N);
  f->ring[slot] = (rec){seq, count, kind, dtype, root, peer, start, 0.0, GR__FL_RUNNING};
  pthread_mutex_unlock(&lock);
  return slot;
}

void gr__flight_end(gr__flight *f, int slot, uint64_t seq, gr__flight_state st, double end) {
  if (!f || slot < 0) return;
  pthread_mutex_lock(&lock);
  if (f->ring[slot].seq == seq) { /* not overwritten by a newer call meanwhile */
    f->ring[slot].state = st;
    f->ring[slot].end = end;
  }
  pthread_mutex_unlock(&lock);
}

void gr__flight_poll(void) {
  if (!sig_pending) return;
  sig_pending = 0;
  char path[1024];
  if (gr__flight_dump("signal", path, sizeof path) == 0) GR_INFO("flight recorder written to %s", path);
}

static void put_double(FILE *o, double v) {
  if (v == 0.0)
    fputs("null", o);
  else
    fprintf(o, "%.6f", v);
}

int gr__flight_dump(const char *reason, char *path, size_t path_len) {
  static const char *const states[] = {"running", "done", "failed", "timeout"};
  const char *root = getenv("GPURUN_MONITOR_DIR");
  if (!root || !*root) root = "./gpurun-monitor";
  char dir[900];
  snprintf(dir, sizeof dir, "%s/%s", root, job[0] ? job : "nojob");
  if (gr__mkdir_p(dir) != 0) {
    GR_WARN("flight recorder: cannot create %s: %s", dir, strerror(errno));
    return -1;
  }
  int wrank = gr__process_rank();
  char tmp[1024];
  snprintf(path, path_len, "%s/flight.%d.json", dir, wrank);
  snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
  FILE *o = fopen(tmp, "w");
  if (!o) {
    GR_WARN("flight recorder: cannot write %s: %s", tmp, strerror(errno));
    return -1;
  }
  char node[256] = "";
  gethostname(node, sizeof node - 1);
  int wsize = 0;
  int inited = 0, finalized = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&finalized);
  if (inited && !finalized) MPI_Comm_size(MPI_COMM_WORLD, &wsize);
  fprintf(o, "{\"rank\": %d, \"size\": %d, \"node\": \"%s\", \"reason\": \"%s\", \"comms\": [", wrank,
          wsize, node, reason);
  pthread_mutex_lock(&lock);
  for (gr__flight *f = head; f; f = f->next) {
    fprintf(o, "%s\n {\"id\": \"%s\", \"rank\": %d, \"size\": %d, \"backend\": \"%s\", \"calls\": [",
            f == head ? "" : ",", f->id, f->rank, f->size, f->backend);
    uint64_t first = f->n > GR__FLIGHT_N ? f->n - GR__FLIGHT_N : 0;
    for (uint64_t i = first; i < f->n; i++) {
      const rec *r = &f->ring[i % GR__FLIGHT_N];
      fprintf(o, "%s\n  {\"seq\": %llu, \"op\": \"%s\", \"count\": %zu, \"dtype\": \"%s\", \"root\": %d, "
                 "\"peer\": %d, \"start\": ",
              i == first ? "" : ",", (unsigned long long)r->seq, gr__kind_name((gr__kind)r->kind),
              r->count, r->dtype >= 0 ? gr__dtype_name((gr_dtype)r->dtype) : "none", r->root, r->peer);
      put_double(o, r->start);
      fputs(", \"end\": ", o);
      put_double(o, r->state == GR__FL_RUNNING ? 0.0 : r->end);
      fprintf(o, ", \"state\": \"%s\"}", states[r->state]);
    }
    fputs("]}", o);
  }
  pthread_mutex_unlock(&lock);
  fputs("]}\n", o);
  int bad = ferror(o);
  if (fclose(o) != 0 || bad || rename(tmp, path) != 0) {
    unlink(tmp);
    return -1;
  }
  return 0;
}
