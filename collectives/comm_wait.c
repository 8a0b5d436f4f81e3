/* MPI requests of a communicator, below every other file of the collectives: MPI_Test without
 * the fatal handler (gr__mpi_test), the wait bounded by a deadline that keeps the rank's other
 * work moving (gr__mpi_wait), and the requests given up on after a timeout (gr__mpi_abandon and
 * the kept MPI objects). Whether MPI was finalized (gr__mpi_gone) is asked here too. */
#include "gr_coll.h"
#include "gr_agree.h" /* gr__mpi_wait_owning */
#include "gr_front.h" /* the requests given up on, gr__mpi_wait_sweep */

#include "gr_flight.h"
#include "gr_log.h"
#include "gr_mpi_error.h"

#include <pthread.h>
#include <stdlib.h>

int gr__mpi_gone(void) {
  int fin = 0;
  /* callable at any time, before MPI_Init and after MPI_Finalize; it has no failure to report but
   * a broken MPI, where fin stays 0 and the MPI call that follows reports its own */
  (void)MPI_Finalized(&fin);
  return fin;
}

/* What a wait does every 16th turn besides testing its own request (MPI's progress rule): move
 * every other communicator's requests this thread uses, the request registry's sweep (request.c,
 * sequencer.c). The life cycle (coll.c) hands it over as it builds a communicator, before any
 * request can exist; until then nothing waits that it could move. */
static void (*wait_sweep)(void);

void gr__mpi_wait_sweep(void (*sweep)(void)) {
  __atomic_store_n(&wait_sweep, sweep, __ATOMIC_RELEASE);
}

int gr__mpi_test(MPI_Request *req, int *flag) {
  /* Open MPI 4.1 reports a failed non-blocking collective (libnbc: a count mismatch between ranks,
   * say) to MPI_COMM_WORLD's error handler from MPI_Test, not to the communicator of the request,
   * so MPI_ERRORS_RETURN on our communicators does not stop it from killing the job; and
   * MPI_Request_get_status does not say whether the request failed. So: wait for completion with
   * MPI_Request_get_status (no handler involved), then complete the request with MPI_Test while
   * MPI_COMM_WORLD's handler returns errors, once per request, and put the handler back. */
  int rc = MPI_Request_get_status(*req, flag, MPI_STATUS_IGNORE);
  if (rc != MPI_SUCCESS || !*flag || *req == MPI_REQUEST_NULL) return rc;
  static pthread_mutex_t swap = PTHREAD_MUTEX_INITIALIZER; /* threads on other communicators */
  MPI_Errhandler was = MPI_ERRHANDLER_NULL;
  pthread_mutex_lock(&swap);
  int swapped = MPI_Comm_get_errhandler(MPI_COMM_WORLD, &was) == MPI_SUCCESS &&
                MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN) == MPI_SUCCESS;
  rc = MPI_Test(req, flag, MPI_STATUS_IGNORE);
  /* The handler put back and the reference MPI_Comm_get_errhandler took released: both fail only
   * for handles MPI just gave, and the answer of this call is the request's (rc). */
  if (swapped) (void)MPI_Comm_set_errhandler(MPI_COMM_WORLD, was);
  pthread_mutex_unlock(&swap);
  if (was != MPI_ERRHANDLER_NULL) (void)MPI_Errhandler_free(&was);
  if (rc != MPI_SUCCESS && *req != MPI_REQUEST_NULL) {
    (void)MPI_Request_free(req); /* failed already: rc is the error said; let MPI have it */
    *req = MPI_REQUEST_NULL;
  }
  *flag = 1;
  return rc;
}

gr_status gr__mpi_wait(gr_comm *c, MPI_Request *req, double deadline) {
  return gr__mpi_wait_owning(c, req, deadline, NULL);
}

gr_status gr__mpi_wait_owning(gr_comm *c, MPI_Request *req, double deadline, void *buf) {
  for (unsigned spin = 0;; spin++) {
    int flag = 0;
    int rc = gr__mpi_test(req, &flag);
    if (rc != MPI_SUCCESS) {
      gr__mpi_abandon(c, req, buf, NULL); /* frees buf at once where the request is gone */
      return gr__comm_mpi_err(c, rc, "MPI_Test");
    }
    if (flag) return GR_OK;
    /* Waiting here (a fingerprint, a verdict), this rank still moves its requests' calls that
     * progress only when tested: a peer may wait inside one before it gets to this exchange. */
    if (c->ops && c->ops->progress) c->ops->progress(c);
    if ((spin & 15) == 0) {
      if (gr__past(deadline)) {
        gr__mpi_abandon(c, req, buf, NULL); /* MPI keeps it: c's MPI objects outlive it */
        return gr__comm_err(c, GR_ERR_TIMEOUT, "MPI request did not complete");
      }
      gr__flight_poll();
      /* ... and every other communicator's this thread uses (MPI's progress rule, request.c) */
      void (*sweep)(void) = __atomic_load_n(&wait_sweep, __ATOMIC_ACQUIRE);
      if (sweep) sweep();
    }
  }
}

/* ---- MPI requests given up on ------------------------------------------------------------------
 * A collective request cannot be cancelled (MPI-3.1 5.12: neither MPI_Cancel nor MPI_Request_free
 * on one), and a timed-out call leaves one behind: a verdict, a fingerprint exchange, a data call
 * of the MPI library. MPI goes on running it whenever this process calls MPI, on its communicator
 * and with its MPI_Op, and writes its receive buffer when the late peers arrive. So: every such
 * request is handed here with the private buffers it writes (lost: a process-wide list, under
 * lost_lock), tested whenever a communicator is destroyed and at MPI_Finalize (an attribute on
 * MPI_COMM_SELF, whose delete callback MPI runs first thing in MPI_Finalize), and its buffers freed
 * once it completed. A communicator destroyed while one of its requests still runs does not free
 * its MPI objects: its MPI communicators and ops move to a kept record, freed once none of its
 * requests runs any more (at a later destroy or at MPI_Finalize); those still running at
 * MPI_Finalize are left to MPI_Finalize, and their buffers are never freed. The user's buffers are
 * never among them: the calls that can be abandoned run on private copies (backend_mpi.c). */
typedef struct lost_req {
  struct lost_req *next;
  MPI_Request req;
  void *buf[2];      /* freed once req completed */
  const void *owner; /* the gr_comm until it is destroyed, then its kept record */
} lost_req;

typedef struct kept {
  struct kept *next;
  const gr_comm *of; /* the communicator being destroyed; NULL once it is (sealed) */
  int ncomms, nops;
  MPI_Comm comms[8];
  MPI_Op ops[16];
} kept;

static pthread_mutex_t lost_lock = PTHREAD_MUTEX_INITIALIZER;
static lost_req *lost;
static kept *kept_list;
static int lost_hook; /* the MPI_Finalize hook is installed */

static int lost_on_finalize(MPI_Comm comm, int key, void *val, void *extra) {
  (void)comm, (void)key, (void)val, (void)extra;
  gr__mpi_reap();
  return MPI_SUCCESS;
}

/* Under lost_lock: test every lost request, free the buffers of those complete. */
static void lost_test(void) {
  for (lost_req **p = &lost; *p;) {
    lost_req *e = *p;
    int flag = 0;
    if (e->req != MPI_REQUEST_NULL && gr__mpi_test(&e->req, &flag) == MPI_SUCCESS && !flag) {
      p = &e->next;
      continue;
    }
    *p = e->next; /* complete (or failed: MPI let it go) */
    free(e->buf[0]);
    free(e->buf[1]);
    free(e);
  }
}

static int lost_owned(const void *owner) {
  for (lost_req *e = lost; e; e = e->next)
    if (e->owner == owner) return 1;
  return 0;
}

void gr__mpi_abandon(gr_comm *c, MPI_Request *req, void *buf0, void *buf1) {
  if (!req || *req == MPI_REQUEST_NULL || gr__mpi_gone()) {
    if (!req || *req == MPI_REQUEST_NULL) free(buf0), free(buf1); /* nothing writes them */
    return; /* after MPI_Finalize: nothing runs any more, but nothing can be told either */
  }
  lost_req *e = malloc(sizeof *e);
  pthread_mutex_lock(&lost_lock);
  if (!lost_hook) { /* refused: tried again at the next abandon; every destroy tests anyway */
    int key = MPI_KEYVAL_INVALID;
    if (MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, lost_on_finalize, &key, NULL) ==
        MPI_SUCCESS) {
      if (MPI_Comm_set_attr(MPI_COMM_SELF, key, NULL) == MPI_SUCCESS)
        lost_hook = 1;
      else /* not attached: the key is freed (its result only says an invalid key) */
        (void)MPI_Comm_free_keyval(&key);
    }
  }
  if (e) { /* else the request and its buffers are merely leaked; c's objects are then freed */
    e->req = *req;
    e->buf[0] = buf0;
    e->buf[1] = buf1;
    e->owner = c;
    e->next = lost;
    lost = e;
  }
  pthread_mutex_unlock(&lost_lock);
  *req = MPI_REQUEST_NULL;
}

int gr__mpi_lost(const gr_comm *c) {
  if (!__atomic_load_n(&lost, __ATOMIC_RELAXED)) return 0; /* the common case: one load */
  pthread_mutex_lock(&lost_lock);
  lost_test();
  int some = lost_owned(c);
  pthread_mutex_unlock(&lost_lock);
  return some;
}

/* Under lost_lock: c's kept record, made on first use. */
static kept *kept_of(const gr_comm *c) {
  for (kept *k = kept_list; k; k = k->next)
    if (k->of == c) return k;
  kept *k = calloc(1, sizeof *k);
  if (!k) return NULL;
  k->of = c;
  k->next = kept_list;
  kept_list = k;
  return k;
}

int gr__mpi_keep_comm(const gr_comm *c, MPI_Comm *m) {
  if (*m == MPI_COMM_NULL) return 1;
  pthread_mutex_lock(&lost_lock);
  kept *k = kept_of(c);
  int ok = k && k->ncomms < (int)(sizeof k->comms / sizeof k->comms[0]);
  if (ok) k->comms[k->ncomms++] = *m, *m = MPI_COMM_NULL;
  pthread_mutex_unlock(&lost_lock);
  return ok;
}

int gr__mpi_keep_op(const gr_comm *c, MPI_Op *op) {
  if (*op == MPI_OP_NULL) return 1;
  pthread_mutex_lock(&lost_lock);
  kept *k = kept_of(c);
  int ok = k && k->nops < (int)(sizeof k->ops / sizeof k->ops[0]);
  if (ok) k->ops[k->nops++] = *op, *op = MPI_OP_NULL;
  pthread_mutex_unlock(&lost_lock);
  return ok;
}

/* c is gone: its lost requests belong to its kept record from now on (none: nothing was kept). */
void gr__mpi_lost_seal(const gr_comm *c) {
  if (!__atomic_load_n(&lost, __ATOMIC_RELAXED) && !kept_list) return;
  pthread_mutex_lock(&lost_lock);
  kept *k = NULL;
  for (kept *x = kept_list; x; x = x->next)
    if (x->of == c) k = x;
  for (lost_req *e = lost; e; e = e->next)
    if (e->owner == c) e->owner = k; /* NULL when nothing was kept: a request merely tested */
  if (k) k->of = NULL;
  pthread_mutex_unlock(&lost_lock);
}

void gr__mpi_reap(void) {
  if (!__atomic_load_n(&lost, __ATOMIC_RELAXED) && !kept_list) return;
  if (gr__mpi_gone()) return;
  pthread_mutex_lock(&lost_lock);
  lost_test();
  for (kept **p = &kept_list; *p;) {
    kept *k = *p;
    if (k->of || lost_owned(k)) {
      p = &k->next;
      continue;
    }
    *p = k->next; /* nothing runs on its MPI objects any more */
    /* Their communicator is destroyed already: nobody is left to hand a status to, so a failure is
     * a warning, and the object is left to MPI_Finalize. */
    char s[MPI_MAX_ERROR_STRING];
    for (int i = 0; i < k->ncomms; i++) {
      int rc = MPI_Comm_free(&k->comms[i]);
      if (rc != MPI_SUCCESS)
        GR_WARN("MPI_Comm_free of a destroyed communicator's MPI communicator failed: %s",
                gr__mpi_strerror(rc, s));
    }
    for (int i = 0; i < k->nops; i++) {
      int rc = MPI_Op_free(&k->ops[i]);
      if (rc != MPI_SUCCESS)
        GR_WARN("MPI_Op_free of a destroyed communicator's MPI_Op failed: %s",
                gr__mpi_strerror(rc, s));
    }
    free(k);
  }
  pthread_mutex_unlock(&lost_lock);
}

/* Buffers a timed-out MPI request may still use (a collective request cannot be cancelled): kept
 * reachable for the rest of the process, never freed, so that a late write lands in memory nobody
 * else owns. Few: a timeout aborts the communicator. */
void gr__abandon(void *p) {
  static struct abandoned {
    struct abandoned *next;
    void *p;
  } * list;
  static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  struct abandoned *a = malloc(sizeof *a);
  if (!a) return; /* then it is merely leaked */
  a->p = p;
  pthread_mutex_lock(&lock);
  a->next = list;
  list = a;
  pthread_mutex_unlock(&lock);
}
