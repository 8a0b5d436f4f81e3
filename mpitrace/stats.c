/* The MPI layer's call statistics (gr_stats.h; file: base/gr_mpistats_format.h). */
#include "gr_stats.h"

#include "gr_error.h"
#include "gr_escape.h"
#include "gr_log.h"
#include "gr_param.h"
#include "gr_safefile.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The blocking collectives: their time inside tells who arrived last. */
static int blocking_collective(int kind) {
  return kind >= GR__MPI_Barrier && kind <= GR__MPI_Exscan;
}

void gr__stats_comm_reset(gr__stats_comm *s, int size) {
  free(s->waited_on);
  s->npeers = size > 0 && size <= GR_MPISTATS_MAX_PEERS ? size : 0;
  s->waited_on = s->npeers ? calloc((size_t)s->npeers, sizeof *s->waited_on) : NULL;
  if (!s->waited_on) s->npeers = 0;
  s->calls = 0;
  s->mpi_s = s->coll_s = 0;
  s->last = 0;
  for (int i = 0; i < GR_MPISTATS_RING; i++)
    s->dur[i] = -1.0f;
}

void gr__stats_call(gr__stats_comm *s, int kind, uint64_t seq, double secs) {
  s->calls++;
  s->mpi_s += secs;
  if (!blocking_collective(kind) || !seq) return;
  s->coll_s += secs;
  /* numbers skipped since the last one (non-blocking collectives, creations) hold no time */
  for (uint64_t n = s->last + 1; n < seq && n + GR_MPISTATS_RING > seq; n++)
    s->dur[n % GR_MPISTATS_RING] = -1.0f;
  s->dur[seq % GR_MPISTATS_RING] = (float)secs;
  if (seq > s->last) s->last = seq;
}

void gr__stats_waited(gr__stats_comm *s, int peer, double secs) {
  if (peer < 0 || peer >= s->npeers || !(secs > 0)) return;
  /* relaxed atomics: the layer's publisher reads the sums off the calls' path (live_waited); on
   * x86-64 these are the plain load and store the += was */
  double v;
  __atomic_load(&s->waited_on[peer], &v, __ATOMIC_RELAXED);
  v += secs;
  __atomic_store(&s->waited_on[peer], &v, __ATOMIC_RELAXED);
}

/* The communicators kept for the file: a copy each, under the registry's own lock. */
typedef struct kept {
  char id[32], name[32];
  int rank, size;
  gr__stats_comm s;
  struct kept *next;
} kept;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static kept *head, **tail = &head;
static char job[128];
static int my_rank = -1, world_size, started, written;

static int nkept;
static unsigned long long dropped; /* communicators left out of the file: GR_MPISTATS_KEEP */

/* A program may create and free a communicator per step: the file keeps GR_MPISTATS_KEEP of them
 * (the world and the others finalize keeps among them), those with the most time in blocking
 * collectives, where an arrival lag shows, and counts the rest. */
void gr__stats_comm_keep(const gr__stats_comm *s, const gr__flight *f) {
  if (!f || !s->calls) return;
  pthread_mutex_lock(&mu);
  kept *k = NULL;
  if (nkept >= GR_MPISTATS_KEEP) {
    dropped++;
    kept *least = NULL; /* never the world */
    for (kept *x = head; x; x = x->next)
      if (strcmp(x->id, GR_MPISTATS_WORLD_ID) &&
          (!least || x->s.coll_s < least->s.coll_s ||
           (x->s.coll_s == least->s.coll_s && x->s.mpi_s < least->s.mpi_s)))
        least = x;
    int world = !strcmp(f->id, GR_MPISTATS_WORLD_ID);
    if (!least || (!world && s->coll_s <= least->s.coll_s)) {
      pthread_mutex_unlock(&mu);
      return;
    }
    k = least; /* replaced in place: the list keeps its order */
    free(k->s.waited_on);
  } else if (!(k = malloc(sizeof *k))) {
    pthread_mutex_unlock(&mu);
    return;
  } else {
    k->next = NULL;
    *tail = k;
    tail = &k->next;
    nkept++;
  }
  snprintf(k->id, sizeof k->id, "%s", f->id);
  snprintf(k->name, sizeof k->name, "%s", f->name);
  k->rank = f->rank;
  k->size = f->size;
  k->s = *s;
  k->s.waited_on = NULL;
  if (s->npeers && (k->s.waited_on = malloc((size_t)s->npeers * sizeof *s->waited_on)))
    memcpy(k->s.waited_on, s->waited_on, (size_t)s->npeers * sizeof *s->waited_on);
  else
    k->s.npeers = 0;
  pthread_mutex_unlock(&mu);
}

static void write_at_exit(void) { gr__stats_write("exit"); }

void gr__stats_start(const char *id, int rank, int size) {
  pthread_mutex_lock(&mu);
  snprintf(job, sizeof job, "%s", id);
  my_rank = rank;
  world_size = size;
  int first = !started;
  started = 1;
  pthread_mutex_unlock(&mu);
  if (first) atexit(write_at_exit);
}

static void put_comm(FILE *o, const kept *k, int first) {
  fprintf(o, "%s\n {\"" GR_MS_ID "\": ", first ? "" : ",");
  gr__esc_json(o, k->id);
  fputs(", \"" GR_MS_NAME "\": ", o);
  gr__esc_json(o, k->name);
  fprintf(o,
          ", \"" GR_MS_RANK "\": %d, \"" GR_MS_SIZE "\": %d, \"" GR_MS_CALLS
          "\": %llu, \"" GR_MS_MPI_S "\": %.6f, \"" GR_MS_COLL_S "\": %.6f",
          k->rank, k->size, (unsigned long long)k->s.calls, k->s.mpi_s, k->s.coll_s);
  uint64_t last = k->s.last, first_n = last >= GR_MPISTATS_RING ? last - GR_MPISTATS_RING + 1 : 1;
  fprintf(o, ", \"" GR_MS_FIRST "\": %llu, \"" GR_MS_DURS "\": [",
          (unsigned long long)(last ? first_n : 0));
  for (uint64_t n = first_n; last && n <= last; n++) {
    float d = k->s.dur[n % GR_MPISTATS_RING];
    if (n != first_n) fputc(',', o);
    if (d < 0)
      fputs("null", o);
    else
      fprintf(o, "%.7g", (double)d);
  }
  fputs("], \"" GR_MS_WAITED_ON "\": [", o);
  for (int p = 0; p < k->s.npeers; p++)
    fprintf(o, "%s%.6f", p ? "," : "", k->s.waited_on[p]);
  fputs("]}", o);
}

void gr__stats_write(const char *reason) {
  pthread_mutex_lock(&mu);
  if (!started || written) {
    pthread_mutex_unlock(&mu);
    return;
  }
  written = 1;
  char *buf = NULL;
  size_t len = 0;
  FILE *o = open_memstream(&buf, &len);
  if (!o) {
    pthread_mutex_unlock(&mu);
    GR_WARN("MPI call statistics: out of memory; not written");
    return;
  }
  char node[256] = "";
  gethostname(node, sizeof node - 1);
  fprintf(o, "{\"" GR_MS_RANK "\": %d, \"" GR_MS_SIZE "\": %d, \"" GR_MS_NODE "\": ", my_rank,
          world_size);
  gr__esc_json(o, node);
  fputs(", \"" GR_MS_REASON "\": ", o);
  gr__esc_json(o, reason);
  fprintf(o, ", \"" GR_MS_DROPPED "\": %llu", dropped);
  fputs(", \"" GR_MS_COMMS "\": [", o);
  int n = 0;
  for (const kept *k = head; k; k = k->next)
    put_comm(o, k, n++ == 0);
  fputs("]}\n", o);
  int bad = ferror(o);
  pthread_mutex_unlock(&mu);
  if (fclose(o) != 0 || bad) {
    free(buf);
    GR_WARN("MPI call statistics: out of memory; not written");
    return;
  }
  const char *root = gr__param_str(GR_PARAM_MONITOR_DIR);
  if (!root || !*root) { /* written for gpurun-report, which reads a monitored job */
    free(buf);
    return;
  }
  char name[64];
  snprintf(name, sizeof name, GR_MPISTATS_PREFIX "%d" GR_MPISTATS_SUFFIX, my_rank);
  gr_status st = gr__jobdir_replace(root, job, name, buf, len);
  free(buf);
  if (st != GR_OK)
    GR_WARN("MPI call statistics: %s/%s/%s not written: %s", root, job, name, gr_last_error());
}

void gr__stats_cancel(void) {
  pthread_mutex_lock(&mu);
  written = 1;
  pthread_mutex_unlock(&mu);
}
