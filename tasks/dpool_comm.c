/* Distributed task pool: the protocol between ranks.
 *
 * Stealing. An idle rank (empty queue) sends one random steal request at a time. The victim
 * answers at once with WORK: up to half of its queue, oldest tasks first (they tend to be the
 * biggest subtrees), at most cfg.max_chunk tasks - or with zero tasks, a refusal. After
 * cfg.random_steals refusals in a row the thief registers with its lifeline neighbours (rank ^ 2^k,
 * a hypercube: diameter log2 P, connected for any P) and spaces its random requests out with an
 * exponential backoff. A victim remembers registered neighbours and sends them a GIFT of half its
 * queue as soon as it holds two tasks or more, so that work spreads along the hypercube without
 * idle ranks polling.
 *
 * Termination: Dijkstra-Safra (EWD998). Each rank counts work-carrying messages (WORK with >= 1 task:
 * steal replies, gifts, push_to) sent minus received, and turns black when it receives one. A
 * token goes round the ring 0 -> 1 -> ... -> P-1 -> 0, held by each rank until it is passive (no
 * queued task, none running, empty outbox); it adds the rank's counter and blackness. Rank 0
 * declares termination when the token comes back white, rank 0 is white and the sum of counters
 * is 0: no task exists and none is in flight. Requests and refusals carry no work and are not
 * counted; they are settled by the drain.
 *
 * Drain: every message is sent with MPI_Issend (complete = matched). After TERM a rank answers
 * requests with refusals until its own request is answered and its sends are matched, then
 * enters an MPI_Ibarrier while still answering. When the barrier completes every message of the
 * run has been received, so the next run (or MPI_Comm_free) starts with nothing stale. Messages
 * of the next run can arrive during the barrier: they carry the other parity in their tags and
 * stay queued in MPI until this rank has begun that run (see dpool_impl.h).
 *
 * Deadlines (cfg.timeout_s > 0). A rank that stops answering must not leave the others waiting:
 * every send carries a deadline (matched within the timeout, since a live rank polls at least
 * every few ms), a random request must be answered within it, and each rank sends its ring
 * successor a heartbeat every timeout/4 s, so that a silent rank is noticed by its predecessor
 * even when nobody else has anything to send it. The rank that notices sends ABORT naming the
 * silent rank to every other rank and fails; each receiver fails the same way. Heartbeats stop
 * at termination: during the final barrier a successor may already have left the run, and a
 * heartbeat it never receives would be a message of this run left behind. */
#include "dpool_impl.h"

#include "gr_error.h"
#include "gr_log.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define GR__DP_MAX_MSG (16u << 20) /* bytes of tasks in one WORK message (soft) */

int gr__dp_test_stop_before_barrier = -1;

static void nap_us(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

gr_status gr__dp_comm_init(gr_dpool *dp) {
  int n = 0;
  for (int bit = 1; bit > 0 && bit < dp->size; bit <<= 1)
    if ((dp->rank ^ bit) < dp->size) n++;
  dp->nlife = n;
  dp->life = calloc((size_t)(n ? n : 1), sizeof *dp->life);
  dp->armed = calloc((size_t)(n ? n : 1), 1);
  dp->waiting = calloc((size_t)(n ? n : 1), 1);
  if (!dp->life || !dp->armed || !dp->waiting) {
    gr__dp_comm_free(dp);
    return GR_ERR_NOMEM;
  }
  n = 0;
  for (int bit = 1; bit > 0 && bit < dp->size; bit <<= 1)
    if ((dp->rank ^ bit) < dp->size) dp->life[n++] = dp->rank ^ bit;
  return GR_OK;
}

void gr__dp_comm_free(gr_dpool *dp) {
  free(dp->life);
  free(dp->armed);
  free(dp->waiting);
  /* Sends still pending only after a failed run: cancel them; their buffers may still be read
   * by MPI, so they are abandoned (kept, never freed). */
  if (dp->sends.count > 0)
    GR_WARN("dpool: destroying with %zu unmatched messages after a failed run", dp->sends.count);
  for (size_t i = 0; i < dp->sends.count; i++) {
    gr__dp_send *s = &GR_ARRAY_AT(&dp->sends, gr__dp_send, i);
    MPI_Cancel(&s->req);
    MPI_Request_free(&s->req);
    gr__dp_abandon(s->buf);
  }
  gr__array_free(&dp->sends);
  free(dp->rbuf);
  dp->life = NULL;
  dp->armed = dp->waiting = NULL;
  dp->rbuf = NULL;
}

/* Buffers MPI may still read or write after a failed run (a send to a silent rank, a collective
 * it never joined). Freeing them could corrupt the heap if that rank comes back; they stay on this
 * list, reachable, for the life of the process. Only failed runs add to it, a few small messages
 * each (a steal reply in flight can be larger). */
typedef struct abandoned {
  struct abandoned *next;
  void *buf;
} abandoned;
static pthread_mutex_t abandoned_lock = PTHREAD_MUTEX_INITIALIZER;
static abandoned *abandoned_list;

void gr__dp_abandon(void *buf) {
  if (!buf) return;
  abandoned *a = malloc(sizeof *a);
  if (!a) return; /* then it simply leaks */
  a->buf = buf;
  pthread_mutex_lock(&abandoned_lock);
  a->next = abandoned_list;
  abandoned_list = a;
  pthread_mutex_unlock(&abandoned_lock);
}

double gr__dp_deadline(const gr_dpool *dp) {
  return dp->cfg.timeout_s > 0 ? gr__mono_now() + dp->cfg.timeout_s : 1e300;
}

/* Another rank (or this one) found `rank` silent: fail the run. */
static gr_status fail_silent(gr_dpool *dp, int rank, int reporter) {
  if (dp->silent < 0) {
    dp->silent = rank;
    dp->silent_reporter = reporter;
  }
  return GR_ERR_TIMEOUT;
}

static gr_status post(gr_dpool *dp, int dest, int tag, void *buf, size_t len);

/* This rank noticed: tell every other rank (they may have nothing to send the silent one), then
 * fail. The ABORT messages are never waited for. */
static gr_status notice_silent(gr_dpool *dp, int rank) {
  GR_ERROR("dpool: rank %d did not answer within %g s; telling the other ranks", rank,
           dp->cfg.timeout_s);
  for (int r = 0; r < dp->size; r++) {
    if (r == dp->rank || r == rank) continue;
    int32_t *m = malloc(sizeof *m);
    if (!m) break;
    *m = rank;
    if (post(dp, r, GR__DP_TAG_ABORT, m, sizeof *m) != GR_OK) break;
    GR_ARRAY_AT(&dp->sends, gr__dp_send, dp->sends.count - 1).deadline = 1e300;
  }
  return fail_silent(dp, rank, dp->rank);
}

void gr__dp_run_begin(gr_dpool *dp) {
  dp->tag_off = GR__DP_TAG_RUN * (int)(dp->runs & 1u);
  dp->runs++;
  dp->terminated = 0;
  dp->req_outstanding = 0;
  dp->fails = 0;
  dp->next_random = 0;
  dp->random_delay = 1e-6 * dp->cfg.poll_interval_us;
  memset(dp->armed, 0, (size_t)dp->nlife);
  memset(dp->waiting, 0, (size_t)dp->nlife);
  dp->counter = 0;
  dp->black = 0;
  dp->have_token = dp->rank == 0;
  dp->token_back = 0;
  memset(&dp->token, 0, sizeof dp->token);
  dp->next_beat = 0;
  dp->req_deadline = 1e300;
  dp->req_victim = -1;
  dp->silent = -1;
  dp->silent_reporter = -1;
  dp->missing[0] = '\0';
}

static unsigned next_rand(gr_dpool *dp) {
  unsigned x = dp->rng;
  x ^= x << 13;
  x ^= x >> 17;
  x ^= x << 5;
  return dp->rng = x ? x : 0x2545f491u;
}

static int life_index(const gr_dpool *dp, int rank) {
  for (int k = 0; k < dp->nlife; k++)
    if (dp->life[k] == rank) return k;
  return -1;
}

/* ---- sending ---------------------------------------------------------------------------------- */

/* Takes ownership of buf (malloc'd, may be NULL when len == 0). */
static gr_status post(gr_dpool *dp, int dest, int tag, void *buf, size_t len) {
  if (gr__array_reserve(&dp->sends, dp->sends.count + 1) != GR_OK) {
    free(buf);
    GR_ERROR("dpool: no memory for a send");
    return GR_ERR_NOMEM;
  }
  gr__dp_send *s = &GR_ARRAY_AT(&dp->sends, gr__dp_send, dp->sends.count);
  int rc = MPI_Issend(buf, (int)len, MPI_BYTE, dest, tag + dp->tag_off, dp->comm, &s->req);
  if (rc != MPI_SUCCESS) {
    free(buf);
    GR_ERROR("dpool: MPI_Issend to rank %d failed (MPI error %d)", dest, rc);
    return GR_ERR_MPI;
  }
  s->buf = buf;
  s->dest = dest;
  s->deadline = gr__dp_deadline(dp);
  dp->sends.count++;
  dp->st.msgs_sent++;
  dp->st.bytes_sent += len;
  return GR_OK;
}

static gr_status test_sends(gr_dpool *dp) {
  gr__dp_send *sends = dp->sends.data;
  size_t i = 0;
  while (i < dp->sends.count) {
    int done = 0;
    int rc = MPI_Test(&sends[i].req, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
      GR_ERROR("dpool: MPI_Test failed (MPI error %d)", rc);
      return GR_ERR_MPI;
    }
    if (done) {
      free(sends[i].buf);
      sends[i] = sends[--dp->sends.count];
    } else {
      i++;
    }
  }
  if (dp->cfg.timeout_s > 0) {
    double now = gr__mono_now();
    for (i = 0; i < dp->sends.count; i++)
      if (now > sends[i].deadline) return notice_silent(dp, sends[i].dest);
    if (dp->req_outstanding && now > dp->req_deadline) return notice_silent(dp, dp->req_victim);
  }
  return GR_OK;
}

/* Pack the given tasks (freed) into one WORK message. */
static gr_status send_tasks(gr_dpool *dp, int dest, int kind, gr__dtask **ts, int n) {
  size_t len = sizeof(gr__dp_work_hdr);
  for (int i = 0; i < n; i++)
    len += 8 + ts[i]->len;
  unsigned char *buf = malloc(len);
  if (!buf) {
    GR_ERROR("dpool: no memory for a %zu-byte work message", len);
    return GR_ERR_NOMEM;
  }
  gr__dp_work_hdr h = {n, kind};
  memcpy(buf, &h, sizeof h);
  size_t off = sizeof h;
  for (int i = 0; i < n; i++) {
    memcpy(buf + off, &ts[i]->id, 4);
    memcpy(buf + off + 4, &ts[i]->len, 4);
    memcpy(buf + off + 8, ts[i]->data, ts[i]->len);
    off += 8 + ts[i]->len;
    free(ts[i]);
  }
  if (n > 0) {
    dp->counter++;
    dp->st.tasks_sent += (uint64_t)n;
  }
  return post(dp, dest, GR__DP_TAG_WORK, buf, len);
}

/* Send up to half of the queue (oldest first), at most max_chunk tasks; 0 tasks = a refusal.
 * min_keep: give nothing unless the queue holds at least this many. */
static gr_status give_half(gr_dpool *dp, int dest, int kind, size_t min_keep, int *given) {
  gr__dtask *stack[64];
  gr__dtask **ts = stack;
  int n = 0;
  pthread_mutex_lock(&dp->mu);
  size_t want = dp->count >= min_keep ? dp->count / 2 : 0;
  if (want > (size_t)dp->cfg.max_chunk) want = (size_t)dp->cfg.max_chunk;
  if (want > 64) ts = malloc(want * sizeof *ts);
  if (!ts) want = 0, ts = stack;
  size_t bytes = 0;
  while ((size_t)n < want && bytes < GR__DP_MAX_MSG) {
    ts[n] = gr__dp_queue_pop_old(dp);
    bytes += 8 + ts[n]->len;
    n++;
  }
  pthread_mutex_unlock(&dp->mu);
  if (given) *given = n;
  if (n == 0 && kind != GR__DP_WORK_STEAL) return GR_OK; /* gifts are never empty */
  gr_status st = send_tasks(dp, dest, kind, ts, n);
  if (ts != stack) free(ts);
  return st;
}

static gr_status flush_outbox(gr_dpool *dp) {
  pthread_mutex_lock(&dp->mu);
  gr_list out = dp->outbox; /* the whole list: its nodes do not point back at the head */
  dp->outbox = (gr_list){0};
  pthread_mutex_unlock(&dp->mu);
  /* The rank is not passive while these are out of the outbox but not yet counted: the token is
   * only examined by this same thread, after this function returns. */
  gr_status st = GR_OK;
  gr_list_node *n;
  while ((n = gr__list_pop_front(&out))) {
    gr__dp_out *o = GR_LIST_ENTRY(n, gr__dp_out, node);
    if (st == GR_OK)
      st = send_tasks(dp, o->rank, GR__DP_WORK_PUSH, &o->task, 1);
    else
      free(o->task);
    free(o);
  }
  return st;
}

static gr_status arm_lifelines(gr_dpool *dp) {
  if (!dp->cfg.lifelines) return GR_OK;
  for (int k = 0; k < dp->nlife; k++) {
    if (dp->armed[k]) continue;
    int32_t *m = malloc(sizeof *m);
    if (!m) return GR_ERR_NOMEM;
    *m = GR__DP_REQ_LIFELINE;
    GR_CHECK(post(dp, dp->life[k], GR__DP_TAG_REQ, m, sizeof *m));
    dp->armed[k] = 1;
  }
  return GR_OK;
}

/* ---- receiving --------------------------------------------------------------------------------- */

static gr_status recv_tasks(gr_dpool *dp, const unsigned char *buf, size_t len, int n) {
  size_t off = sizeof(gr__dp_work_hdr);
  pthread_mutex_lock(&dp->mu);
  for (int i = 0; i < n; i++) {
    int32_t id;
    uint32_t tl;
    if (off + 8 > len) goto bad;
    memcpy(&id, buf + off, 4);
    memcpy(&tl, buf + off + 4, 4);
    if (off + 8 + tl > len || id < 0 || (size_t)id >= dp->fns.count) goto bad;
    gr__dtask *t = gr__dp_task_new(id, buf + off + 8, tl);
    if (!t || gr__dp_queue_push(dp, t) != 0) {
      free(t);
      pthread_mutex_unlock(&dp->mu);
      GR_ERROR("dpool: no memory for received tasks");
      return GR_ERR_NOMEM;
    }
    off += 8 + tl;
  }
  pthread_mutex_unlock(&dp->mu);
  dp->st.tasks_received += (uint64_t)n;
  return GR_OK;
bad:
  pthread_mutex_unlock(&dp->mu);
  GR_ERROR("dpool: malformed work message (%zu bytes, %d tasks; function ids registered "
           "differently on the ranks?)",
           len, n);
  return GR_ERR_INTERNAL;
}

static gr_status handle(gr_dpool *dp, int src, int tag, unsigned char *buf, size_t len) {
  switch (tag) {
  case GR__DP_TAG_REQ: {
    int32_t kind = GR__DP_REQ_RANDOM;
    if (len >= 4) memcpy(&kind, buf, 4);
    if (kind == GR__DP_REQ_LIFELINE) {
      int k = life_index(dp, src);
      if (k >= 0 && !dp->terminated) dp->waiting[k] = 1;
      return GR_OK;
    }
    if (dp->terminated || !dp->cfg.steal) return send_tasks(dp, src, GR__DP_WORK_STEAL, NULL, 0);
    return give_half(dp, src, GR__DP_WORK_STEAL, 2, NULL);
  }
  case GR__DP_TAG_WORK: {
    gr__dp_work_hdr h;
    if (len < sizeof h) return GR_ERR_INTERNAL;
    memcpy(&h, buf, sizeof h);
    if (h.ntasks > 0) {
      if (dp->terminated) {
        GR_ERROR("dpool: %d tasks from rank %d arrived after termination", h.ntasks, src);
        return GR_ERR_INTERNAL;
      }
      dp->counter--;
      dp->black = 1;
      GR_CHECK(recv_tasks(dp, buf, len, h.ntasks));
    }
    if (h.kind == GR__DP_WORK_STEAL) {
      dp->req_outstanding = 0;
      if (h.ntasks > 0) {
        dp->st.steals_won++;
        dp->fails = 0;
        dp->random_delay = 1e-6 * dp->cfg.poll_interval_us;
      } else if (!dp->terminated) {
        if (++dp->fails >= dp->cfg.random_steals) {
          GR_CHECK(arm_lifelines(dp));
          dp->next_random = gr__mono_now() + dp->random_delay;
          double cap = 1e-6 * 16 * (dp->cfg.backoff_max_us ? dp->cfg.backoff_max_us : 1);
          dp->random_delay = dp->random_delay * 2 > cap ? cap : dp->random_delay * 2;
        }
      }
    } else if (h.kind == GR__DP_WORK_GIFT) {
      int k = life_index(dp, src);
      if (k >= 0) dp->armed[k] = 0;
      dp->st.lifeline_steals++;
      dp->fails = 0;
      dp->random_delay = 1e-6 * dp->cfg.poll_interval_us;
    }
    return GR_OK;
  }
  case GR__DP_TAG_TOKEN:
    if (len != sizeof dp->token) return GR_ERR_INTERNAL;
    memcpy(&dp->token, buf, sizeof dp->token);
    dp->have_token = 1;
    if (dp->rank == 0) dp->token_back = 1;
    return GR_OK;
  case GR__DP_TAG_TERM:
    dp->terminated = 1;
    return GR_OK;
  case GR__DP_TAG_BEAT:
    return GR_OK;
  case GR__DP_TAG_ABORT: {
    int32_t r = -1;
    if (len == sizeof r) memcpy(&r, buf, sizeof r);
    if (r < 0 || r >= dp->size) r = -1;
    GR_ERROR("dpool: rank %d reports that rank %d did not answer in time", src, (int)r);
    return fail_silent(dp, r, src);
  }
  default:
    GR_ERROR("dpool: unexpected tag %d from rank %d", tag, src);
    return GR_ERR_INTERNAL;
  }
}

/* Receive and handle every message with this tag (MPI_ANY_TAG: any) that is there. */
static gr_status receive_all(gr_dpool *dp, int *got, int tag) {
  for (;;) {
    int flag = 0;
    MPI_Status s;
    int rc = MPI_Iprobe(MPI_ANY_SOURCE, tag, dp->comm, &flag, &s);
    if (rc != MPI_SUCCESS) {
      GR_ERROR("dpool: MPI_Iprobe failed (MPI error %d)", rc);
      return GR_ERR_MPI;
    }
    if (!flag) return GR_OK;
    int count = 0;
    MPI_Get_count(&s, MPI_BYTE, &count);
    if ((size_t)count > dp->rbufcap) {
      size_t ncap = (size_t)count * 2;
      void *nb = realloc(dp->rbuf, ncap);
      if (!nb) {
        GR_ERROR("dpool: no memory for a %d-byte message", count);
        return GR_ERR_NOMEM;
      }
      dp->rbuf = nb;
      dp->rbufcap = ncap;
    }
    rc = MPI_Recv(dp->rbuf, count, MPI_BYTE, s.MPI_SOURCE, s.MPI_TAG, dp->comm, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
      GR_ERROR("dpool: MPI_Recv failed (MPI error %d)", rc);
      return GR_ERR_MPI;
    }
    (*got)++;
    /* Before its final barrier a rank can only see this run's messages (no rank is past it). */
    int base = s.MPI_TAG - dp->tag_off;
    if (base < GR__DP_TAG_REQ || base > GR__DP_TAG_LAST) {
      GR_ERROR("dpool: message with tag %d from rank %d belongs to another run (run %u)", s.MPI_TAG,
               s.MPI_SOURCE, dp->runs);
      return GR_ERR_INTERNAL;
    }
    GR_CHECK(handle(dp, s.MPI_SOURCE, base, dp->rbuf, (size_t)count));
  }
}

/* ---- the poll ---------------------------------------------------------------------------------- */

static int passive(gr_dpool *dp) {
  pthread_mutex_lock(&dp->mu);
  int p = dp->count == 0 && dp->busy == 0 && gr__list_empty(&dp->outbox);
  pthread_mutex_unlock(&dp->mu);
  return p;
}

static gr_status send_term(gr_dpool *dp) {
  dp->terminated = 1;
  for (int r = 1; r < dp->size; r++)
    GR_CHECK(post(dp, r, GR__DP_TAG_TERM, NULL, 0));
  return GR_OK;
}

static gr_status pass_token(gr_dpool *dp) {
  if (dp->size == 1) {
    dp->terminated = 1;
    return GR_OK;
  }
  if (dp->rank == 0) {
    if (dp->token_back && !dp->token.black && !dp->black && dp->token.q + dp->counter == 0)
      return send_term(dp);
    memset(&dp->token, 0, sizeof dp->token);
    dp->black = 0;
    dp->token_back = 0;
    dp->st.token_rounds++;
  } else {
    dp->token.q += dp->counter;
    dp->token.black |= dp->black;
    dp->black = 0;
  }
  gr__dp_token *m = malloc(sizeof *m);
  if (!m) return GR_ERR_NOMEM;
  *m = dp->token;
  dp->have_token = 0;
  return post(dp, (dp->rank + 1) % dp->size, GR__DP_TAG_TOKEN, m, sizeof *m);
}

gr_status gr__dp_progress(gr_dpool *dp, int *got_msg) {
  dp->st.polls++;
  int got = 0;
  if (dp->size > 1) GR_CHECK(receive_all(dp, &got, MPI_ANY_TAG)); /* alone, nothing can arrive */
  GR_CHECK(flush_outbox(dp));
  if (dp->cfg.steal && !dp->terminated) {
    for (int k = 0; k < dp->nlife; k++) {
      if (!dp->waiting[k]) continue;
      int given = 0;
      GR_CHECK(give_half(dp, dp->life[k], GR__DP_WORK_GIFT, 2, &given));
      if (given) dp->waiting[k] = 0;
    }
  }
  if (!dp->terminated && dp->have_token && passive(dp)) GR_CHECK(pass_token(dp));
  if (!dp->terminated && dp->cfg.steal && dp->size > 1 && !dp->req_outstanding) {
    pthread_mutex_lock(&dp->mu);
    size_t n = dp->count;
    pthread_mutex_unlock(&dp->mu);
    if (n == 0 && (dp->fails < dp->cfg.random_steals || gr__mono_now() >= dp->next_random)) {
      int victim = (int)(next_rand(dp) % (unsigned)(dp->size - 1));
      if (victim >= dp->rank) victim++;
      int32_t *m = malloc(sizeof *m);
      if (!m) return GR_ERR_NOMEM;
      *m = GR__DP_REQ_RANDOM;
      GR_CHECK(post(dp, victim, GR__DP_TAG_REQ, m, sizeof *m));
      dp->req_outstanding = 1;
      dp->req_victim = victim;
      dp->req_deadline = gr__dp_deadline(dp);
      dp->st.steals_tried++;
    }
  }
  if (dp->cfg.timeout_s > 0 && dp->size > 1 && !dp->terminated) {
    double now = gr__mono_now();
    if (now >= dp->next_beat) {
      GR_CHECK(post(dp, (dp->rank + 1) % dp->size, GR__DP_TAG_BEAT, NULL, 0));
      dp->next_beat = now + dp->cfg.timeout_s / 4;
    }
  }
  GR_CHECK(test_sends(dp));
  if (got_msg) *got_msg = got;
  return GR_OK;
}

gr_status gr__dp_drain(gr_dpool *dp) {
  if (dp->size == 1) return GR_OK;
  int got = 0;
  long slp = 0;
  while (dp->req_outstanding || dp->sends.count > 0) {
    got = 0;
    GR_CHECK(receive_all(dp, &got, MPI_ANY_TAG));
    GR_CHECK(test_sends(dp));
    slp = got ? 0 : (slp ? (slp < 200 ? 2 * slp : slp) : 1);
    nap_us(slp);
  }
  if (gr__dp_test_stop_before_barrier == dp->rank) raise(SIGSTOP);
  GR_CHECK(
      gr__dp_arrivals_send(dp, &dp->bar_arr)); /* so that a timeout below names who is missing */
  MPI_Request bar;
  double bar_deadline = gr__dp_deadline(dp);
  int rc = MPI_Ibarrier(dp->comm, &bar);
  if (rc != MPI_SUCCESS) {
    GR_ERROR("dpool: MPI_Ibarrier failed (MPI error %d)", rc);
    return GR_ERR_MPI;
  }
  for (;;) {
    int done = 0;
    rc = MPI_Test(&bar, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
      GR_ERROR("dpool: MPI_Test on the final barrier failed (MPI error %d)", rc);
      return GR_ERR_MPI;
    }
    if (done) break;
    if (gr__mono_now() > bar_deadline) {
      /* The barrier stays pending in MPI (a collective request cannot be freed or cancelled):
       * the dpool is broken from here and only gr_dpool_destroy is left. */
      dp->coll_pending = 1;
      gr__dp_arrivals_missing(&dp->bar_arr, dp->missing, sizeof dp->missing);
      GR_ERROR("dpool: the final barrier did not complete within %g s (waiting for rank(s) %s)",
               dp->cfg.timeout_s, dp->missing[0] ? dp->missing : "?");
      return fail_silent(dp, -1, dp->rank);
    }
    /* Ranks whose barrier has completed may already be in the next run and send its TOKEN,
     * WORK or requests (other tags: left for the next run). Only this run's tags are received
     * here; in fact only late requests (random or lifeline) of this run can still come. */
    got = 0;
    for (int t = GR__DP_TAG_REQ; t <= GR__DP_TAG_LAST; t++)
      GR_CHECK(receive_all(dp, &got, t + dp->tag_off));
    GR_CHECK(test_sends(dp));
    slp = got ? 0 : (slp ? (slp < 200 ? 2 * slp : slp) : 1);
    nap_us(slp);
  }
  /* Refusals sent during the barrier were matched before their requesters entered it. */
  while (dp->sends.count > 0)
    GR_CHECK(test_sends(dp));
  return GR_OK;
}
