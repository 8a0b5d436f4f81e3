/* Internal: the distributed task pool's state, shared by dpool.c (API, queue, run loop) and
 * dpool_comm.c (steal protocol, lifelines, termination).
 *
 * Threads: every MPI call is made by the thread inside gr_dpool_run ("the progress thread").
 * Worker threads of a local gr_pool only touch the fields under mu. */
#ifndef GR_DPOOL_IMPL_H
#define GR_DPOOL_IMPL_H

#include <gpurun/dpool.h>
#include <pthread.h>
#include <stdint.h>

#include "gr_array.h"
#include "gr_clock.h"
#include "gr_list.h"

/* A task: id + payload, in one allocation so that it moves between queue, messages and workers
 * without copies of its header. */
typedef struct gr__dtask {
  int32_t id;
  uint32_t len;
  unsigned char data[];
} gr__dtask;

/* Message tags on the dpool's own communicator: base tag + GR__DP_TAG_RUN * (run parity). The
 * final barrier returns on each rank at its own time, so a rank may receive messages of run k+1
 * while it is still in run k's barrier; never of run k+2 (that needs it past run k+1's barrier).
 * The parity keeps them apart: the barrier phase receives run k's requests only. */
enum {
  GR__DP_TAG_REQ = 1,   /* int32 kind: GR__DP_REQ_RANDOM or GR__DP_REQ_LIFELINE */
  GR__DP_TAG_WORK = 2,  /* gr__dp_work_hdr + packed tasks; ntasks may be 0 (a refusal) */
  GR__DP_TAG_TOKEN = 3, /* gr__dp_token */
  GR__DP_TAG_TERM = 4,  /* no payload: the run is over */
  GR__DP_TAG_BEAT = 5,  /* no payload: heartbeat to the ring successor (timeout set) */
  GR__DP_TAG_ABORT = 6, /* int32: the rank that did not answer in time; the run fails */
  GR__DP_TAG_LAST = 6,
  GR__DP_TAG_RUN = 8,        /* tag offset of odd runs */
  GR__DP_TAG_ARRIVE = 7,     /* + parity: no payload, this rank reached the run's final barrier */
  GR__DP_TAG_ARRIVE_REG = 16 /* no payload: this rank reached the registration check */
};
enum { GR__DP_REQ_RANDOM = 0, GR__DP_REQ_LIFELINE = 1 };
enum { GR__DP_WORK_STEAL = 0, GR__DP_WORK_GIFT = 1, GR__DP_WORK_PUSH = 2 };

typedef struct {
  int32_t ntasks;
  int32_t kind;
} gr__dp_work_hdr;
/* each packed task: int32 id, uint32 len, len bytes (unaligned; read with memcpy) */

typedef struct {
  int64_t q;     /* sum of the counters of the ranks it passed */
  int32_t black; /* some rank it passed received work since it last forwarded the token */
  int32_t pad;
} gr__dp_token;

typedef struct gr__dp_out {
  gr_list_node node; /* in the outbox */
  int rank;
  gr__dtask *task;
} gr__dp_out;

typedef struct {
  MPI_Request req;
  void *buf;
  int dest;
  double deadline; /* must be matched by then (timeout set), else dest is silent */
} gr__dp_send;

/* dpool_arrive.c: who reached a collective step, so that its timeout names who did not. */
typedef struct {
  int tag, size;
  MPI_Request *rq; /* [size] receives by source (own: null), then [size] sends by destination */
} gr__dp_arrivals;

struct gr_dpool {
  uint32_t magic;
  MPI_Comm comm;
  int rank, size;
  gr_pool *local;
  gr_dpool_config cfg;

  gr_array fns; /* gr_dtask_fn, by id */

  /* ---- under mu: the task queue (ring, head = oldest), outbox, running count, counters ---- */
  pthread_mutex_t mu;
  gr__dtask **ring;
  size_t cap, head, count;
  gr_list outbox;     /* gr__dp_out, oldest first */
  int64_t busy;       /* tasks being executed */
  uint64_t tasks_run; /* also under mu */
  uint64_t tasks_pushed;
  int stop_workers; /* tells the local pool's worker loops to return */
  int oom;          /* a task's pushes were lost for want of memory: the run fails */

  /* ---- progress thread only ---- */
  int running;
  unsigned runs; /* runs begun (its parity goes into the tags) */
  int tag_off;   /* GR__DP_TAG_RUN * (runs & 1) for the current run */
  int terminated;
  gr_array sends; /* gr__dp_send: the Issends not yet complete */
  void *rbuf;
  size_t rbufcap;

  /* steal state */
  int req_outstanding;
  int fails;
  double next_random; /* earliest time of the next random request once lifelines are armed */
  double random_delay;
  unsigned rng;
  int nlife;        /* hypercube neighbours */
  int *life;        /* their ranks */
  uint8_t *armed;   /* [nlife]: I asked neighbour k and it has not answered yet */
  uint8_t *waiting; /* [nlife]: neighbour k asked me and I have not given it work yet */

  /* Safra */
  int64_t counter; /* work messages sent - received, this run */
  int black;
  int have_token;
  int token_back; /* rank 0: the token has come round (a fresh probe is not yet out) */
  gr__dp_token token;

  /* deadlines (timeout_s > 0; progress thread only) */
  double next_beat;    /* time of the next heartbeat to the ring successor */
  double req_deadline; /* the outstanding random request must be answered by then */
  int req_victim;
  int silent;              /* the rank that did not answer in time, -1 = none / unknown */
  int silent_reporter;     /* the rank that noticed it */
  int broken;              /* a run failed: no more runs */
  int agreed;              /* the registrations were checked (first run) */
  gr__dp_arrivals bar_arr; /* this run's final barrier (posted when the run begins) */
  char missing[160];       /* the ranks a timed-out step waited for ("2, 5") */
  int coll_pending;        /* a timed-out collective is still pending on comm: never free comm (MPI
                       * would progress it on a freed communicator once the late rank comes) */

  struct gr_dpool_stats st;
};

/* Post the receives (before any rank can send), send on reaching the step, name the ranks not
 * heard from (into buf: "2, 5 and 3 more"; returns their number, 0 when all or unknown),
 * complete all (the step completed), or give up. */
gr_status gr__dp_arrivals_post(gr_dpool *dp, gr__dp_arrivals *a, int tag);
gr_status gr__dp_arrivals_send(gr_dpool *dp, gr__dp_arrivals *a);
int gr__dp_arrivals_missing(gr__dp_arrivals *a, char *buf, size_t len); /* how many */
gr_status gr__dp_arrivals_finish(gr__dp_arrivals *a);
void gr__dp_arrivals_abandon(gr__dp_arrivals *a);
/* dpool_create_wait.c: wait for gr_dpool_create's MPI_Comm_idup (*dup) on comm, bounded by
 * timeout_s (0: no bound). GR_OK; GR_ERR_TIMEOUT with the sentence naming the ranks that did
 * not enter; GR_ERR_NOMEM or GR_ERR_MPI with theirs (gr__fail_msg: the caller names the call). */
gr_status gr__dp_create_wait(MPI_Comm comm, MPI_Request *dup, double timeout_s);
/* Test hook: the rank whose dp->rank equals this stops itself (SIGSTOP) just before it reaches a
 * run's final barrier; -1 (the default) never. */
extern int gr__dp_test_stop_before_barrier;

/* clock, seconds: gr__mono_now (gr_clock.h) */

/* dpool.c: the queue (caller holds mu unless noted) */
int gr__dp_queue_push(gr_dpool *dp, gr__dtask *t);
gr__dtask *gr__dp_queue_pop_new(gr_dpool *dp);
gr__dtask *gr__dp_queue_pop_old(gr_dpool *dp);
gr__dtask *gr__dp_task_new(int id, const void *payload, size_t len);

/* dpool_comm.c (progress thread only). Return GR_OK or GR_ERR_MPI/GR_ERR_NOMEM with a log line. */
gr_status gr__dp_comm_init(gr_dpool *dp);
void gr__dp_comm_free(gr_dpool *dp);
void gr__dp_run_begin(gr_dpool *dp);
/* One poll: receive and answer messages, flush the outbox, feed lifelines, pass the token when
 * passive, ask for work when empty. *got_msg = messages handled. */
gr_status gr__dp_progress(gr_dpool *dp, int *got_msg);
/* After termination: finish every message exchange, then a barrier that returns on all ranks. */
gr_status gr__dp_drain(gr_dpool *dp);
/* Keep a buffer MPI may still use after a failed run reachable for ever (never freed). */
void gr__dp_abandon(void *buf);
/* The time by which a step that starts now must finish (timeout set), or a huge number. */
double gr__dp_deadline(const gr_dpool *dp);

#endif
