/* The MPI layer's state (gr_mpitrace.h): the next definitions, whether it records, the
 * communicators and requests it knows, and each thread's call in progress. */
#include "gr_mpitrace.h"

#include "gr_clock.h"
#include "gr_error.h"
#include "gr_flight.h"
#include "gr_jobdir.h"
#include "gr_live.h"
#include "gr_log.h"
#include "gr_mpi_family.h"
#include "gr_mpistats_format.h"
#include "gr_observe.h"
#include "gr_param.h"
#include "gr_safefile.h"
#include "gr_stats.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

gr__mt_next_table gr__mt_next;
int gr__mt_on;

/* ---- the next definitions ----------------------------------------------------------------- */

static pthread_once_t resolved = PTHREAD_ONCE_INIT;

/* The loaded object that defines PMPI_Init: the MPI library, also where the program loaded it
 * into a scope of its own (Python loads mpi4py's module, and with it libmpi, RTLD_LOCAL, where
 * neither RTLD_NEXT nor the default scope sees it). */
static int find_mpi(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  void **out = data;
  if (!info->dlpi_name || !info->dlpi_name[0]) return 0;
  void *h = dlopen(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD);
  if (!h) return 0;
  if (dlsym(h, "PMPI_Init")) {
    *out = h; /* kept open: the library is loaded anyway */
    return 1;
  }
  dlclose(h);
  return 0;
}

#if defined(OMPI_MAJOR_VERSION)
/* An Open MPI handle by its global's name (gr_mt_weak.h), from the MPI library wherever it was
 * loaded; remembered once found. */
void *gr__mt_ompi(const char *global) {
  static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  static struct {
    const char *name;
    void *value;
  } seen[48];
  static void *mpi;
  void *v = NULL;
  pthread_mutex_lock(&mu);
  for (int i = 0; i < 48 && seen[i].name && !v; i++)
    if (!strcmp(seen[i].name, global)) v = seen[i].value;
  if (!v) {
    if (!mpi) dl_iterate_phdr(find_mpi, &mpi);
    v = mpi ? dlsym(mpi, global) : NULL;
    for (int i = 0; i < 48 && v; i++)
      if (!seen[i].name) {
        seen[i].name = global;
        seen[i].value = v;
        break;
      }
  }
  pthread_mutex_unlock(&mu);
  return v;
}
#endif

static void resolve_all(void) {
  /* RTLD_NEXT: whatever comes after the layer in the search order (another tool, else the MPI
   * library); else PMPI_ through the default scope; else PMPI_ in the MPI library wherever it was
   * loaded (find_mpi) */
  void *mpi = NULL;
#define RESOLVE(name)                                                                              \
  do {                                                                                             \
    void *p = dlsym(RTLD_NEXT, "MPI_" #name);                                                      \
    if (!p) p = dlsym(RTLD_DEFAULT, "PMPI_" #name);                                                \
    if (!p && (mpi || dl_iterate_phdr(find_mpi, &mpi))) p = dlsym(mpi, "PMPI_" #name);             \
    if (p) __atomic_store_n((void **)&gr__mt_next.name, p, __ATOMIC_RELEASE);                      \
  } while (0);
  GR__MT_C_FUNCS(RESOLVE)
#undef RESOLVE
}

void gr__mt_resolve(void) {
  pthread_once(&resolved, resolve_all);
  /* still missing: the MPI library came later (mpi4py); try again, once per missing call */
  if (!gr__mt_next.Init) resolve_all();
  if (!gr__mt_next.Init) {
    /* An MPI function was called and no MPI library is loaded: nothing to call on. */
    fprintf(stderr, "gpurun: the MPI layer (libgpurun-mpi.so) found no MPI library in this "
                    "process to pass an MPI call on to; run the program without --trace=mpi\n");
    abort();
  }
}

/* ---- communicators -------------------------------------------------------------------------
 * One entry per communicator the program uses: its flight recorder (id, name, rank, size) and how
 * many communicators were made over it (the next one's id). Entries are never returned to
 * malloc (a freed communicator's goes to a free list): the watchdog and the thread caches may
 * still hold one, and reading a reused entry is harmless. */
typedef struct mt_comm {
  uintptr_t key;
  int live;
  gr__flight *f;
  uint64_t nmade;
  struct mt_comm *next;
  gr__stats_comm stats;
  int *world_of; /* its ranks' world ranks, for the live file's per-peer waits; NULL: none */
  int identity;  /* 1: the world itself (its ranks are world ranks) */
} mt_comm;

#define NBUCKETS 256
static pthread_mutex_t comm_mu = PTHREAD_MUTEX_INITIALIZER;
static mt_comm *buckets[NBUCKETS], *free_entries;
static unsigned long comm_gen = 1; /* one more on every free: thread caches drop their entry */
static MPI_Group world_group;      /* valid while have_world_group */
static int have_world_group;
static int world_rank = -1, world_size;
static uint64_t nunknown;

static _Thread_local struct {
  uintptr_t key;
  unsigned long gen;
  mt_comm *e;
} cache;

static uintptr_t key_of(MPI_Comm c) {
  uintptr_t k = 0;
  memcpy(&k, &c, sizeof c < sizeof k ? sizeof c : sizeof k);
  return k;
}
static unsigned bucket_of(uintptr_t k) { return (unsigned)((k ^ (k >> 9) ^ (k >> 17)) % NBUCKETS); }

/* The lowest world rank in comm's (local) group: the same on every member, so that two
 * communicators made by one split differ in their ids. */
static int lowest_world_rank(MPI_Comm c) {
  MPI_Group g;
  int n = 0, low = -1;
  if (NEXT(Comm_group)(c, &g) != MPI_SUCCESS) return -1;
  NEXT(Group_size)(g, &n);
  if (n > 0 && have_world_group) {
    int *in = malloc((size_t)n * sizeof *in), *out = malloc((size_t)n * sizeof *out);
    if (in && out) {
      for (int i = 0; i < n; i++)
        in[i] = i;
      if (NEXT(Group_translate_ranks)(g, n, in, world_group, out) == MPI_SUCCESS)
        for (int i = 0; i < n; i++)
          if (out[i] != MPI_UNDEFINED && (low < 0 || out[i] < low)) low = out[i];
    }
    free(in);
    free(out);
  }
  NEXT(Group_free)(&g);
  return low;
}

/* The world rank of each rank of c (an intra-communicator of size ranks, at most the per-peer
 * waits' bound), for the live file's per-peer waits; NULL where it cannot tell (an
 * inter-communicator's peers are the remote group's, out of memory). Local calls only. */
static int *world_map(MPI_Comm c, int size) {
  int inter = 0;
  if (!have_world_group || size <= 0 || size > GR_MPISTATS_MAX_PEERS ||
      NEXT(Comm_test_inter)(c, &inter) != MPI_SUCCESS || inter)
    return NULL;
  MPI_Group g;
  if (NEXT(Comm_group)(c, &g) != MPI_SUCCESS) return NULL;
  int *in = malloc((size_t)size * sizeof *in), *out = malloc((size_t)size * sizeof *out);
  if (in && out) {
    for (int i = 0; i < size; i++)
      in[i] = i;
    if (NEXT(Group_translate_ranks)(g, size, in, world_group, out) != MPI_SUCCESS) {
      free(out);
      out = NULL;
    }
  } else {
    free(out);
    out = NULL;
  }
  free(in);
  NEXT(Group_free)(&g);
  return out;
}

/* Under comm_mu. */
static mt_comm *insert(MPI_Comm c, const char *id, const char *name) {
  uintptr_t k = key_of(c);
  mt_comm *e = free_entries;
  if (e)
    free_entries = e->next;
  else if (!(e = calloc(1, sizeof *e)))
    return NULL;
  int rank = 0, size = 1;
  NEXT(Comm_rank)(c, &rank);
  NEXT(Comm_size)(c, &size);
  e->key = k;
  e->live = 1;
  e->nmade = 0;
  e->f = gr__flight_new(id, rank, size, "mpi");
  if (e->f && name) gr__flight_name(e->f, name);
  gr__stats_comm_reset(&e->stats, size);
  free(e->world_of);
  e->identity = c == MPI_COMM_WORLD;
  e->world_of = e->identity ? NULL : world_map(c, size);
  unsigned b = bucket_of(k);
  e->next = buckets[b];
  buckets[b] = e;
  return e;
}

/* Under comm_mu. */
static mt_comm *find(uintptr_t k) {
  for (mt_comm *e = buckets[bucket_of(k)]; e; e = e->next)
    if (e->key == k) return e;
  return NULL;
}

/* A spawned process's intercommunicator to its parents, where have_parent (spawned_job). */
static MPI_Comm spawn_parent;
static int have_parent;

/* The entry of a communicator the layer has not seen made (the world, self, one made by a call it
 * does not wrap): world, self and a spawned process's parent have fixed ids; any other gets one
 * of this process only. */
static mt_comm *entry_slow(MPI_Comm c) {
  uintptr_t k = key_of(c);
  pthread_mutex_lock(&comm_mu);
  mt_comm *e = find(k);
  if (!e) {
    char id[32];
    const char *name = NULL;
    if (c == MPI_COMM_WORLD) {
      snprintf(id, sizeof id, "%s", GR_MPISTATS_WORLD_ID);
      name = GR_FL_WORLD;
    } else if (c == MPI_COMM_SELF) {
      snprintf(id, sizeof id, "self.%d", world_rank);
      name = "self";
    } else if (have_parent && c == spawn_parent) {
      snprintf(id, sizeof id, "parent"); /* MPI_Comm_get_parent's: one on every spawned rank */
      name = "parent";
    } else {
      snprintf(id, sizeof id, "u%d.%llu", world_rank, (unsigned long long)++nunknown);
    }
    e = insert(c, id, name);
  }
  pthread_mutex_unlock(&comm_mu);
  return e;
}

static inline mt_comm *entry_of(MPI_Comm c) {
  uintptr_t k = key_of(c);
  unsigned long gen = __atomic_load_n(&comm_gen, __ATOMIC_ACQUIRE);
  if (cache.e && cache.key == k && cache.gen == gen) return cache.e;
  mt_comm *e = entry_slow(c);
  cache.key = k;
  cache.gen = gen;
  cache.e = e;
  return e;
}

/* The entry of made, the n-th creation over the communicator whose id is pid: its id agrees on
 * every member with no talk (docs/architecture.md, "Communicator ids without talking"). */
static void name_made(const char *pid, uint64_t n, MPI_Comm made) {
  char id[64];
  snprintf(id, sizeof id, "%s.%llu:%d", pid, (unsigned long long)n, lowest_world_rank(made));
  if (strlen(id) >= 32) { /* deep nesting: a hash of the path keeps it job-unique */
    uint64_t h = 1469598103934665603ull;
    for (const char *s = id; *s; s++)
      h = (h ^ (unsigned char)*s) * 1099511628211ull;
    snprintf(id, sizeof id, "h%016llx", (unsigned long long)h);
  }
  pthread_mutex_lock(&comm_mu);
  mt_comm *old = find(key_of(made));
  if (old) { /* a handle reused without our seeing its free */
    old->key = 0;
    old->live = 0;
  }
  insert(made, id, NULL);
  __atomic_add_fetch(&comm_gen, 1, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&comm_mu);
}

void gr__mt_comm_made(MPI_Comm parent, MPI_Comm made) {
  if (!__atomic_load_n(&gr__mt_on, __ATOMIC_RELAXED)) return;
  mt_comm *p = entry_of(parent);
  if (!p) return;
  uint64_t n = __atomic_add_fetch(&p->nmade, 1, __ATOMIC_RELAXED);
  if (made == MPI_COMM_NULL) return;
  name_made(p->f ? p->f->id : "?", n, made);
}

void gr__mt_comm_freed(MPI_Comm c) {
  if (!__atomic_load_n(&gr__mt_on, __ATOMIC_RELAXED)) return;
  uintptr_t k = key_of(c);
  pthread_mutex_lock(&comm_mu);
  mt_comm **pp = &buckets[bucket_of(k)];
  while (*pp && (*pp)->key != k)
    pp = &(*pp)->next;
  mt_comm *e = *pp;
  if (e) {
    *pp = e->next;
    gr__stats_comm_keep(&e->stats, e->f);
    gr__flight_release(e->f);
    e->f = NULL;
    e->live = 0;
    e->key = 0;
    e->next = free_entries;
    free_entries = e;
    __atomic_add_fetch(&comm_gen, 1, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&comm_mu);
}

void gr__mt_comm_named(MPI_Comm c, const char *name) {
  if (!__atomic_load_n(&gr__mt_on, __ATOMIC_RELAXED) || !name) return;
  mt_comm *e = entry_of(c);
  if (e && e->f) gr__flight_name(e->f, name);
}

/* ---- windows: their communicator, for the synchronisation calls ----------------------------- */
#define NWINS 64
static struct {
  uintptr_t win;
  MPI_Comm comm;
} wins[NWINS];
static pthread_mutex_t win_mu = PTHREAD_MUTEX_INITIALIZER;

static uintptr_t win_key(MPI_Win w) {
  uintptr_t k = 0;
  memcpy(&k, &w, sizeof w < sizeof k ? sizeof w : sizeof k);
  return k;
}

void gr__mt_win_made(MPI_Win win, MPI_Comm comm) {
  pthread_mutex_lock(&win_mu);
  uintptr_t k = win_key(win);
  int free_slot = -1;
  for (int i = 0; i < NWINS; i++) {
    if (wins[i].win == k) free_slot = i;
    if (free_slot < 0 && !wins[i].win) free_slot = i;
  }
  if (free_slot >= 0) {
    wins[free_slot].win = k;
    wins[free_slot].comm = comm;
  }
  pthread_mutex_unlock(&win_mu);
}

MPI_Comm gr__mt_win_comm(MPI_Win win) {
  MPI_Comm c = MPI_COMM_NULL;
  pthread_mutex_lock(&win_mu);
  uintptr_t k = win_key(win);
  for (int i = 0; i < NWINS; i++)
    if (wins[i].win == k) c = wins[i].comm;
  pthread_mutex_unlock(&win_mu);
  return c;
}

/* ---- the calls ---------------------------------------------------------------------------- */

static _Thread_local int depth; /* 1 inside a recorded call: calls from inside pass through */

/* The point-to-point requests the current wait completed: their peers share its time. */
#define MAX_DONE 64
static _Thread_local struct {
  struct mt_comm *comm;
  int peer;
} done[MAX_DONE];
static _Thread_local int ndone;

static int map_dtype_slow(MPI_Datatype t) {
  if (t == MPI_DATATYPE_NULL) return -1;
  if (t == MPI_FLOAT) return GR_FLOAT32;
  if (t == MPI_DOUBLE) return GR_FLOAT64;
  if (t == MPI_INT || t == MPI_INT32_T) return GR_INT32;
  if (t == MPI_UNSIGNED || t == MPI_UINT32_T) return GR_UINT32;
  if (t == MPI_LONG || t == MPI_LONG_LONG || t == MPI_INT64_T) return GR_INT64;
  if (t == MPI_UNSIGNED_LONG || t == MPI_UNSIGNED_LONG_LONG || t == MPI_UINT64_T) return GR_UINT64;
  if (t == MPI_CHAR || t == MPI_SIGNED_CHAR || t == MPI_INT8_T) return GR_INT8;
  if (t == MPI_BYTE || t == MPI_UNSIGNED_CHAR || t == MPI_UINT8_T) return GR_UINT8;
  /* Fortran's (its calls reach here with the C handles MPI_Type_f2c gives) */
  if (t == MPI_REAL || t == MPI_REAL4) return GR_FLOAT32;
  if (t == MPI_DOUBLE_PRECISION || t == MPI_REAL8) return GR_FLOAT64;
  if (t == MPI_INTEGER || t == MPI_INTEGER4) return GR_INT32;
  if (t == MPI_INTEGER8) return GR_INT64;
  return -1;
}

/* The last type this thread mapped: a loop calls with one type (the chain above is some twenty
 * compares of addresses loaded through the GOT). */
static _Thread_local struct {
  MPI_Datatype t;
  int v, set;
} last_type;
static inline int map_dtype(MPI_Datatype t) {
  if (!last_type.set || last_type.t != t) {
    last_type.t = t;
    last_type.v = map_dtype_slow(t);
    last_type.set = 1;
  }
  return last_type.v;
}

static int begin_on(gr__mt_rec *r, int kind, mt_comm *e, long long count, int dtype, int root,
                    int peer, int tag) {
  r->kind = kind;
  r->peer = peer;
  r->comm = e;
  r->f = e ? e->f : NULL;
  uint64_t nc = r->f ? atomic_load_explicit(&r->f->ncoll, memory_order_relaxed) : 0;
  r->seq = gr__kind_is_collective(kind) ? nc + 1 : nc;
  r->start = gr__wall_now();
  r->slot = gr__flight_begin(r->f, r->seq, kind, count < 0 ? 0 : (size_t)count, dtype, root, peer,
                             tag, r->start);
  gr__mt_thread_enter(kind, e, r->seq, r->start);
  return 1;
}

int gr__mt_begin(gr__mt_rec *r, int kind, MPI_Comm comm, long long count, MPI_Datatype dtype,
                 int root, int peer, int tag) {
  if (!__atomic_load_n(&gr__mt_on, __ATOMIC_RELAXED) || depth) return 0;
  depth = 1;
  return begin_on(r, kind, comm == MPI_COMM_NULL ? NULL : entry_of(comm), count, map_dtype(dtype),
                  root, peer, tag);
}

/* below, with the threads' slots */
static void thread_account(double secs, int kind);
static int live_mpi(gr__live_mpi *out);

void gr__mt_end(gr__mt_rec *r, int rc) {
  double end = gr__wall_now();
  gr__flight_end(r->f, r->slot, r->seq, rc == MPI_SUCCESS ? GR__FL_DONE : GR__FL_FAILED, end);
  thread_account(end - r->start, r->kind);
  mt_comm *e = r->comm;
  if (e) gr__stats_call(&e->stats, r->kind, r->seq, end - r->start);
  if (e && gr__kind_is_p2p(r->kind)) gr__stats_waited(&e->stats, r->peer, end - r->start);
  if (ndone) { /* a wait: its time, shared by the peers of the requests it completed */
    for (int i = 0; i < ndone; i++)
      gr__stats_waited(&done[i].comm->stats, done[i].peer, (end - r->start) / ndone);
    ndone = 0;
  }
  gr__mt_thread_leave();
  depth = 0;
}

/* ---- requests ------------------------------------------------------------------------------
 * A started non-blocking call's record, found by its request when a wait or test completes it. A
 * chained hash under one mutex (MPI_THREAD_MULTIPLE programs wait on several threads). */
/* A creation whose new communicator exists once its request completes (MPI_Comm_idup): where
 * MPI writes the handle, and the id's parts fixed at the call (the parent's id is copied, as the
 * parent may be freed before the request completes). */
typedef struct mt_made {
  MPI_Comm *made;
  uint64_t n;
  char pid[sizeof(((gr__flight *)0)->id)];
} mt_made;

typedef struct mt_req {
  uintptr_t key;
  gr__flight *f;
  mt_comm *comm;
  int slot, kind, peer;
  uint64_t seq;
  mt_made *made; /* NULL but for a creation's request */
  struct mt_req *next;
} mt_req;

#define REQ_BUCKETS 1024
static pthread_mutex_t req_mu = PTHREAD_MUTEX_INITIALIZER;
static mt_req *req_buckets[REQ_BUCKETS], *req_free;
static unsigned long nreqs; /* tracked now: the waits skip the lock when none */

static uintptr_t req_key(MPI_Request q) {
  uintptr_t k = 0;
  memcpy(&k, &q, sizeof q < sizeof k ? sizeof q : sizeof k);
  return k;
}
static unsigned req_bucket(uintptr_t k) {
  return (unsigned)((k ^ (k >> 6) ^ (k >> 15)) % REQ_BUCKETS);
}

/* Tracks req for r (made: what its completion creates, or NULL); 0 when the table is out of
 * memory (the record then stays running, as the layer cannot end it). */
static int track(gr__mt_rec *r, MPI_Request req, mt_made *made) {
  int ok = 0;
  uintptr_t k = req_key(req);
  pthread_mutex_lock(&req_mu);
  /* an entry with this handle is stale (its request ended where the layer did not see it, as by
   * MPI_Request_free, and MPI reuses the handle): dropped, so that no later completion reads a
   * creation's handle through a pointer the program no longer keeps valid */
  for (mt_req **pp = &req_buckets[req_bucket(k)]; *pp;) {
    mt_req *old = *pp;
    if (old->key != k) {
      pp = &old->next;
      continue;
    }
    *pp = old->next;
    free(old->made);
    old->made = NULL;
    old->next = req_free;
    req_free = old;
    nreqs--;
  }
  mt_req *q = req_free;
  if (q)
    req_free = q->next;
  else
    q = malloc(sizeof *q);
  if (q) {
    q->key = k;
    q->f = r->f;
    q->comm = r->comm;
    q->slot = r->slot;
    q->kind = r->kind;
    q->peer = r->peer;
    q->seq = r->seq;
    q->made = made;
    unsigned b = req_bucket(q->key);
    q->next = req_buckets[b];
    req_buckets[b] = q;
    nreqs++;
    ok = 1;
  }
  pthread_mutex_unlock(&req_mu);
  return ok;
}

/* A started call's thread-side end: the time inside the starting call; the request's life is not
 * time inside MPI. */
static void started(gr__mt_rec *r) {
  thread_account(gr__wall_now() - r->start, r->kind);
  gr__mt_thread_leave();
  depth = 0;
}

void gr__mt_req_track(gr__mt_rec *r, int rc, MPI_Request req) {
  if (rc != MPI_SUCCESS || req == MPI_REQUEST_NULL) {
    gr__mt_end(r, rc); /* failed to start, or done at once (MPI_PROC_NULL) */
    return;
  }
  track(r, req, NULL);
  started(r);
}

void gr__mt_req_track_made(gr__mt_rec *r, int rc, MPI_Request req, MPI_Comm parent,
                           MPI_Comm *made) {
  if (rc != MPI_SUCCESS) {
    gr__mt_end(r, rc);
    return;
  }
  /* the n-th creation over parent on every member: counted at the call, in the parent's order */
  mt_comm *p = r->comm ? r->comm : entry_of(parent);
  if (!p) {
    gr__mt_end(r, rc);
    return;
  }
  uint64_t n = __atomic_add_fetch(&p->nmade, 1, __ATOMIC_RELAXED);
  if (req == MPI_REQUEST_NULL) { /* done at once: the handle is valid now */
    gr__mt_end(r, rc);
    if (*made != MPI_COMM_NULL) name_made(p->f ? p->f->id : "?", n, *made);
    return;
  }
  mt_made *m = malloc(sizeof *m);
  if (m) {
    m->made = made;
    m->n = n;
    snprintf(m->pid, sizeof m->pid, "%s", p->f ? p->f->id : "?");
  }
  /* without memory for m the request still ends its record; the new communicator then gets a
   * rank-local id on first use */
  if (!track(r, req, m)) free(m);
  started(r);
}

void gr__mt_req_done(MPI_Request before, int ok) {
  if (!__atomic_load_n(&nreqs, __ATOMIC_RELAXED) || before == MPI_REQUEST_NULL) return;
  uintptr_t k = req_key(before);
  pthread_mutex_lock(&req_mu);
  mt_req **pp = &req_buckets[req_bucket(k)];
  while (*pp && (*pp)->key != k)
    pp = &(*pp)->next;
  mt_req *q = *pp;
  if (q) {
    *pp = q->next;
    nreqs--;
  }
  pthread_mutex_unlock(&req_mu);
  if (!q) return;
  gr__flight_end(q->f, q->slot, q->seq, ok ? GR__FL_DONE : GR__FL_FAILED, gr__wall_now());
  if (q->made) { /* a creation: the new handle is valid now */
    if (ok && *q->made->made != MPI_COMM_NULL) name_made(q->made->pid, q->made->n, *q->made->made);
    free(q->made);
    q->made = NULL;
  }
  if (depth && q->comm && gr__kind_is_p2p(q->kind) && q->peer >= 0 && ndone < MAX_DONE) {
    done[ndone].comm = q->comm;
    done[ndone].peer = q->peer;
    ndone++;
  }
  pthread_mutex_lock(&req_mu);
  q->next = req_free;
  req_free = q;
  pthread_mutex_unlock(&req_mu);
}

int gr__mt_begin_wait(gr__mt_rec *r, int kind, int n, const MPI_Request *reqs) {
  if (!__atomic_load_n(&gr__mt_on, __ATOMIC_RELAXED) || depth) return 0;
  depth = 1;
  mt_comm *e = NULL;
  if (__atomic_load_n(&nreqs, __ATOMIC_RELAXED) && reqs) {
    pthread_mutex_lock(&req_mu);
    for (int i = 0; i < n && !e; i++) {
      if (reqs[i] == MPI_REQUEST_NULL) continue;
      uintptr_t k = req_key(reqs[i]);
      for (mt_req *q = req_buckets[req_bucket(k)]; q && !e; q = q->next)
        if (q->key == k) e = q->comm;
    }
    pthread_mutex_unlock(&req_mu);
  }
  return begin_on(r, kind, e, n, -1, -1, -1, -1);
}

/* ---- start and stop ------------------------------------------------------------------------ */

/* The watchdog's view of the layer: its threads' calls in progress, and MPI_Abort. */
static void end_job(int code) { NEXT(Abort)(MPI_COMM_WORLD, code); }
static const gr__watchdog_ops watchdog_ops = {"MPI", gr__mt_longest, end_job};

/* Whether this process records, and why not: decided once, in MPI_Init. */
static const char *stand_aside_reason(char *buf, size_t cap) {
  if (gr__param_word(GR_PARAM_TRACE) == GR_TRACE_NONE) return "GPURUN_TRACE=none";
  if (dlsym(RTLD_DEFAULT, "gr_init")) {
    snprintf(buf, cap,
             "the program links libgpurun, whose calls record themselves (its other MPI calls "
             "are not recorded)");
    return buf;
  }
  if (gr__mpi_family_check("the MPI layer") != GR_OK) {
    snprintf(buf, cap, "%s", gr_last_error());
    return buf;
  }
  return NULL;
}

/* Another PMPI tool: the next MPI_Init is not the MPI library's (where PMPI_Init lives). */
static void say_next_tool(void) {
  Dl_info a, b;
  void *pmpi = dlsym(RTLD_DEFAULT, "PMPI_Init");
  if (!gr__mt_next.Init || !pmpi || !dladdr((void *)gr__mt_next.Init, &a) || !dladdr(pmpi, &b))
    return;
  if (a.dli_fname && b.dli_fname && strcmp(a.dli_fname, b.dli_fname) != 0)
    GR_INFO("the MPI layer passes each call on to %s (another MPI tool, loaded after it)",
            a.dli_fname);
}

/* A process MPI_Comm_spawn started is a job of its own whose MPI_COMM_WORLD numbers its ranks
 * from 0: under the parents' job id (GPURUN_JOB_ID or a scheduler's, which spawned processes
 * inherit) it would write over the parents' live files and flight recorders. Its job id becomes
 * the one it has followed by ".spawn-" and the spawned job's own name, which the MPI gives every
 * process of it in the environment (PMIX_NAMESPACE, OMPI_MCA_ess_base_jobid): the same on each
 * without talk, and different for each spawn; its intercommunicator to the parents has the id
 * "parent". NULL when the process is not spawned or its job is renamed; else why the layer
 * stands aside in it. */
static const char *spawned_job(char *job, size_t cap, char *why, size_t wcap) {
  MPI_Comm parent = MPI_COMM_NULL;
  if (!NEXT(Comm_get_parent) || NEXT(Comm_get_parent)(&parent) != MPI_SUCCESS ||
      parent == MPI_COMM_NULL)
    return NULL;
  const char *ns = getenv("PMIX_NAMESPACE");
  if (!ns || !*ns) ns = getenv("OMPI_MCA_ess_base_jobid");
  if (!ns || !*ns) {
    snprintf(why, wcap,
             "this process was started by MPI_Comm_spawn and its MPI names no job of its own "
             "(PMIX_NAMESPACE, OMPI_MCA_ess_base_jobid) to keep its files apart from its "
             "parents'");
    return why;
  }
  size_t had = strlen(job);
  int n = snprintf(job + had, cap - had, ".spawn-%s", ns);
  if (n < 0 || (size_t)n >= cap - had) {
    job[had] = '\0';
    snprintf(why, wcap,
             "this process was started by MPI_Comm_spawn and its job id (%s, then %.64s) is "
             "too long for a directory name",
             job, ns);
    return why;
  }
  for (char *p = job + had; *p; p++) /* the environment's bytes become a directory name */
    if (!gr__safe_char((unsigned char)*p)) *p = '_';
  spawn_parent = parent;
  have_parent = 1;
  return NULL;
}

void gr__mt_start(void) {
  gr__mt_resolve();
  char why[512];
  const char *reason = stand_aside_reason(why, sizeof why);
  if (reason) {
    if (gr__param_word(GR_PARAM_TRACE) == GR_TRACE_NONE)
      GR_DEBUG("the MPI layer stands aside: %s", reason);
    else
      GR_INFO("the MPI layer stands aside: %s", reason);
    return;
  }
  say_next_tool();
  NEXT(Comm_rank)(MPI_COMM_WORLD, &world_rank);
  NEXT(Comm_size)(MPI_COMM_WORLD, &world_size);
  have_world_group = NEXT(Comm_group)(MPI_COMM_WORLD, &world_group) == MPI_SUCCESS;
  /* the job id every rank agrees on (the environment's under gpurun: no talk), then the flight
   * recorder and the live state, as gr_init starts them */
  char job[128];
  gr__job_agree(MPI_COMM_WORLD, job, sizeof job);
  if ((reason = spawned_job(job, sizeof job, why, sizeof why))) {
    GR_INFO("the MPI layer stands aside: %s", reason);
    return;
  }
  gr__live_set_mpi(live_mpi); /* before the first state is published */
  gr__observe_start(job);
  gr__stats_start(job, world_rank, world_size);
  __atomic_store_n(&gr__mt_on, 1, __ATOMIC_RELEASE);
  entry_of(MPI_COMM_WORLD); /* the world's recorder first: the live file lists it first */
  gr__watchdog_start(job, world_rank, world_size, &watchdog_ops);
  GR_DEBUG("the MPI layer records this rank's MPI calls (job %s)", job);
}

/* libgpurun calls this when the program starts recording itself (observe.c), and the NCCL plugin
 * at its first communicator: one recorder, publisher and watchdog per rank. */
__attribute__((visibility("default"))) void gr_mpi_layer_stand_aside(void);
void gr_mpi_layer_stand_aside(void) {
  if (!__atomic_exchange_n(&gr__mt_on, 0, __ATOMIC_ACQ_REL)) return;
  gr__watchdog_stop();
  gr__stats_cancel();
  gr__live_stop();
  GR_INFO("the MPI layer stands aside: libgpurun or the NCCL profiler plugin records this "
          "program's calls (its other MPI calls are not recorded)");
}

void gr__mt_stop(void) {
  if (!__atomic_load_n(&gr__mt_on, __ATOMIC_RELAXED)) return;
  gr__watchdog_stop();
  pthread_mutex_lock(&comm_mu);
  for (int b = 0; b < NBUCKETS; b++)
    for (mt_comm *e = buckets[b]; e; e = e->next)
      gr__stats_comm_keep(&e->stats, e->f);
  pthread_mutex_unlock(&comm_mu);
  gr__stats_write("finalize");
  __atomic_store_n(&gr__mt_on, 0, __ATOMIC_RELEASE);
  if (have_world_group) NEXT(Group_free)(&world_group);
  have_world_group = 0;
}

/* ---- each thread's call in progress (the watchdog reads them) ----------------------------- */
#define NTHREADS 256
static struct {
  _Atomic int used;
  _Atomic int kind;
  _Atomic uint64_t seq;
  _Atomic double since;
  mt_comm *_Atomic comm;
  _Atomic double in_s, coll_s; /* seconds inside recorded calls, and in blocking collectives */
} threads[NTHREADS];
static _Thread_local int my_thread = -1;
/* The same sums for the threads beyond NTHREADS, shared. */
static _Atomic double extra_in_s, extra_coll_s;

static void add_shared(_Atomic double *v, double secs) {
  double old = atomic_load_explicit(v, memory_order_relaxed);
  while (!atomic_compare_exchange_weak_explicit(v, &old, old + secs, memory_order_relaxed,
                                                memory_order_relaxed)) {
  }
}

/* A finished call (or a non-blocking start) of the calling thread, inside for secs: added to its
 * slot, which only this thread writes (a load and a store, no locked add per call). The blocking
 * collectives are stats.c's (MPI_Barrier .. MPI_Exscan), whose time tells who arrives last. */
static void thread_account(double secs, int kind) {
  if (!(secs > 0)) return;
  int coll = kind >= GR__MPI_Barrier && kind <= GR__MPI_Exscan;
  if (my_thread < 0) {
    add_shared(&extra_in_s, secs);
    if (coll) add_shared(&extra_coll_s, secs);
    return;
  }
  _Atomic double *in = &threads[my_thread].in_s, *cs = &threads[my_thread].coll_s;
  atomic_store_explicit(in, atomic_load_explicit(in, memory_order_relaxed) + secs,
                        memory_order_relaxed);
  if (coll)
    atomic_store_explicit(cs, atomic_load_explicit(cs, memory_order_relaxed) + secs,
                          memory_order_relaxed);
}

/* The live file's per-peer waits: the seconds this rank was blocked on each world rank's sends
 * and receives (stats.c's per-communicator sums, which the calls add to anyway), summed over the
 * live communicators by world rank, the GR_LIVE_MPI_PEERS largest. Runs on the publisher, off
 * the calls' path: a pass over the communicators every interval, under comm_mu (the entries and
 * their arrays stay while it is held). The sums are read with relaxed loads; a call's add may
 * land a publish later. A freed communicator's waits leave the sums (gpurun-top's deltas clamp
 * at zero). */
static void live_waited(gr__live_mpi *out) {
  static double *sum; /* world_size entries, kept: only the publisher calls this, under its lock */
  out->nwaited = 0;
  if (world_size <= 0) return;
  if (!sum && !(sum = malloc((size_t)world_size * sizeof *sum))) return;
  memset(sum, 0, (size_t)world_size * sizeof *sum);
  int any = 0;
  pthread_mutex_lock(&comm_mu);
  for (int b = 0; b < NBUCKETS; b++)
    for (mt_comm *e = buckets[b]; e; e = e->next) {
      if (!e->live || !e->stats.waited_on || (!e->identity && !e->world_of)) continue;
      for (int p = 0; p < e->stats.npeers; p++) {
        double v;
        __atomic_load(&e->stats.waited_on[p], &v, __ATOMIC_RELAXED);
        int w = e->identity ? p : e->world_of[p];
        if (v > 0 && w >= 0 && w < world_size && w != world_rank) {
          sum[w] += v;
          any = 1;
        }
      }
    }
  pthread_mutex_unlock(&comm_mu);
  if (!any) return;
  /* the largest few, in descending order (insertion into a short sorted list) */
  for (int w = 0; w < world_size; w++) {
    if (!(sum[w] > 0)) continue;
    int n = out->nwaited, at = n;
    while (at > 0 && out->waited[at - 1].s < sum[w])
      at--;
    if (at >= GR_LIVE_MPI_PEERS) continue;
    if (n == GR_LIVE_MPI_PEERS) n--;
    memmove(&out->waited[at + 1], &out->waited[at], (size_t)(n - at) * sizeof out->waited[0]);
    out->waited[at].rank = w;
    out->waited[at].s = sum[w];
    out->nwaited = n + 1;
  }
}

/* The live file's MPI lines (gr__live_set_mpi): the sums over every thread, and the start of the
 * longest call a thread is inside now. A slot keeps its sums after its thread ends, so that they
 * only grow (Prometheus counters). */
static int live_mpi(gr__live_mpi *out) {
  double in = atomic_load_explicit(&extra_in_s, memory_order_relaxed);
  double cs = atomic_load_explicit(&extra_coll_s, memory_order_relaxed);
  for (int i = 0; i < NTHREADS; i++) {
    if (!atomic_load_explicit(&threads[i].used, memory_order_relaxed)) continue;
    in += atomic_load_explicit(&threads[i].in_s, memory_order_relaxed);
    cs += atomic_load_explicit(&threads[i].coll_s, memory_order_relaxed);
  }
  gr__inside now;
  out->in_s = in;
  out->coll_s = cs;
  out->inside_since = gr__mt_longest(&now) ? now.since : 0.0;
  live_waited(out);
  return 1;
}

void gr__mt_thread_enter(int kind, void *comm, uint64_t seq, double since) {
  if (my_thread < 0) {
    for (int i = 0; i < NTHREADS; i++) {
      int z = 0;
      if (atomic_compare_exchange_strong(&threads[i].used, &z, 1)) {
        my_thread = i;
        break;
      }
    }
    if (my_thread < 0) return; /* more threads than slots: this one is not watched */
  }
  atomic_store_explicit(&threads[my_thread].comm, (mt_comm *)comm, memory_order_relaxed);
  atomic_store_explicit(&threads[my_thread].seq, seq, memory_order_relaxed);
  atomic_store_explicit(&threads[my_thread].since, since, memory_order_relaxed);
  atomic_store_explicit(&threads[my_thread].kind, kind, memory_order_release);
}

void gr__mt_thread_leave(void) {
  if (my_thread >= 0) atomic_store_explicit(&threads[my_thread].kind, -1, memory_order_release);
}

int gr__mt_longest(gr__inside *out) {
  int found = 0;
  double now = gr__wall_now();
  for (int i = 0; i < NTHREADS; i++) {
    if (!atomic_load_explicit(&threads[i].used, memory_order_relaxed)) continue;
    int kind = atomic_load_explicit(&threads[i].kind, memory_order_acquire);
    if (kind < 0) continue;
    double since = atomic_load_explicit(&threads[i].since, memory_order_relaxed);
    if (found && now - since <= now - out->since) continue;
    found = 1;
    out->op = gr__kind_name(kind);
    out->since = since;
    out->seq = atomic_load_explicit(&threads[i].seq, memory_order_relaxed);
    mt_comm *e = atomic_load_explicit(&threads[i].comm, memory_order_relaxed);
    pthread_mutex_lock(&comm_mu); /* the entry's recorder may be released meanwhile */
    snprintf(out->comm_id, sizeof out->comm_id, "%s", e && e->f ? e->f->id : "-");
    snprintf(out->comm_name, sizeof out->comm_name, "%s", e && e->f ? e->f->name : "-");
    pthread_mutex_unlock(&comm_mu);
  }
  return found;
}
