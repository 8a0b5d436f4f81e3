/* The sequencer (collectives/sequencer.c, gr_sequencer.h), driven directly: one check per phase of
 * a call and for the drive loop's rules, on the MPI algorithms (GPURUN_COLL_ALGO=mpi: refusals
 * travel as a verdict or in band, so every phase is reached), 2 or more ranks.
 *
 *   verdict  a deferred call (iallgather) waits in VERDICT with no row chosen; a refusal by the
 *            last rank is never posted anywhere (no row, counters and buffers untouched) and fails
 *            on every rank naming that rank;
 *   queued   an in-band call started behind it waits in QUEUED; driving it posts the older call
 *            first (working one call moves the calls before it), and both complete exactly;
 *   posted   the row is chosen at the post (k.path); a budget of one turn returns unfinished while
 *            a peer has not started, and the call completes once it has;
 *   naming   an in-band allreduce one rank refuses: posted (its in-band form), then every rank
 *            learns who refused; recv untouched;
 *   settled  a finished call is counted once and released: the queue, the registry and the
 *            pending count are empty again; past the deadline the call times out with the
 *            sentence, the communicator aborted;
 *   drained  gr__requests_drain posts every queued call, in order, without waiting for them.
 *
 *   test_coll_sequencer threads   (MPI_THREAD_MULTIPLE; run under ThreadSanitizer too)
 *            three threads, a communicator each: every round each thread starts requests of every
 *            kind on its own (the seven collectives, the fused allreduce, a send and a receive
 *            around a ring), then waits, in an order of its own and partly by gr_test, for those
 *            its neighbour started (a request may be waited for on another thread); results
 *            exact. */
#include "gr_sequencer.h"

#include <gpurun/coll.h>
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size, failures;

#include "expect.h"
#include "world_comm.h"

#define N 1000 /* floats: an allgather of them is deferred behind its verdict */

static const char fn[] = "test_coll_sequencer";

static gr__call allgather_call(gr_comm *c, const float *send, float *recv) {
  gr__call k = CALL_INIT(GR__ALLGATHER, c);
  k.send = send, k.recv = recv, k.count = N, k.dtype = GR_FLOAT32;
  return k;
}

static gr__call allreduce_call(gr_comm *c, const float *send, float *recv, size_t n) {
  gr__call k = CALL_INIT(GR__ALLREDUCE, c);
  k.send = send, k.recv = recv, k.count = n, k.dtype = GR_FLOAT32, k.op = GR_SUM;
  return k;
}

/* Drive q to its end; its status. */
static gr_status finish(gr_request *q) {
  int done = 0;
  gr_status st = gr__seq_request(fn, q, 0, &done);
  if (!done) FAIL("a drive without budget returned before the call finished");
  return st;
}

static void check_allgather(const float *recv, const char *what) {
  for (int r = 0; r < size; r++)
    for (int i = 0; i < N; i++)
      if (recv[(size_t)r * N + (size_t)i] != (float)(r * 10000 + i)) {
        FAIL("%s: allgather element %d of rank %d is %g", what, i, r,
             (double)recv[(size_t)r * N + (size_t)i]);
        return;
      }
}

static void check_sum(const float *recv, size_t n, const char *what) {
  for (size_t i = 0; i < n; i++) {
    float want = 0;
    for (int r = 0; r < size; r++)
      want += (float)(r + (int)i);
    if (recv[i] != want) {
      FAIL("%s: allreduce element %zu is %g, want %g", what, i, (double)recv[i], (double)want);
      return;
    }
  }
}

/* VERDICT, then QUEUED behind it, then the drive order. */
static void verdict_and_queue(gr_comm *c) {
  float *send = malloc(sizeof *send * N), *recv = calloc((size_t)N * (size_t)size, sizeof *recv);
  float s8[8], r8[8] = {0};
  for (int i = 0; i < N; i++)
    send[i] = (float)(rank * 10000 + i);
  for (int i = 0; i < 8; i++)
    s8[i] = (float)(rank + i);
  gr__call ka = allgather_call(c, send, recv), kb = allreduce_call(c, s8, r8, 8);
  gr_request *a = NULL, *b = NULL;
  EXPECT_ST(gr__seq_submit(fn, &ka, GR_OK, NULL, &a), GR_OK);
  EXPECT_ST(gr__seq_submit(fn, &kb, GR_OK, NULL, &b), GR_OK);
  if (!a || !b) return;
  if (gr__seq_phase_of(a) != GR__SEQ_VERDICT)
    FAIL("the deferred allgather is in phase %d, not VERDICT", (int)gr__seq_phase_of(a));
  if (gr__seq_call_of(a)->path) FAIL("a call waiting for its verdict has a row already");
  if (gr__seq_phase_of(b) != GR__SEQ_QUEUED)
    FAIL("the in-band allreduce behind it is in phase %d, not QUEUED", (int)gr__seq_phase_of(b));
  if (gr__seq_empty(c)) FAIL("the communicator's queue is empty with two calls waiting in it");
  /* Drive b one turn at a time: whenever b has posted, a has (a before b on every rank). */
  int done = 0, turns = 0;
  uint64_t a_seq = gr__seq_call_of(a)->seq, b_seq = gr__seq_call_of(b)->seq;
  if (b_seq != a_seq + 1)
    FAIL("the calls are numbered %llu then %llu", (unsigned long long)a_seq,
         (unsigned long long)b_seq);
  gr_status st = GR_OK;
  while (!done && st == GR_OK) {
    gr__seq_phase pa = gr__seq_phase_of(a);
    st = gr__seq_request(fn, b, 1, &done);
    turns++;
    if (!done && gr__seq_phase_of(b) >= GR__SEQ_POSTED && gr__seq_phase_of(a) < GR__SEQ_POSTED)
      FAIL("the allreduce posted before the allgather started before it (phase %d)", (int)pa);
  }
  EXPECT_ST(st, GR_OK);
  if (!done) return;
  if (turns < 2) FAIL("the allreduce behind a verdict finished in %d turn", turns);
  check_sum(r8, 8, "queued allreduce");
  if (gr__seq_phase_of(a) < GR__SEQ_POSTED)
    FAIL("the allgather before the finished allreduce is in phase %d", (int)gr__seq_phase_of(a));
  if (!gr__seq_call_of(a)->path) FAIL("the posted allgather has no row");
  EXPECT_ST(finish(a), GR_OK);
  check_allgather(recv, "deferred allgather");
  free(send);
  free(recv);
}

/* A refused deferred call: never posted, on any rank; the buffers and counters stay as they were.
 */
static void refused_verdict(gr_comm *c) {
  float *send = malloc(sizeof *send * N), *recv = malloc(sizeof *recv * (size_t)N * (size_t)size);
  for (int i = 0; i < N; i++)
    send[i] = (float)i;
  for (size_t i = 0; i < (size_t)N * (size_t)size; i++)
    recv[i] = -7.0f;
  uint64_t calls = c->stats.calls[GR__ALLGATHER], seq = c->seq;
  gr__call k = allgather_call(c, rank == size - 1 ? NULL : send, recv);
  gr_request *q = NULL;
  EXPECT_ST(gr__seq_submit(fn, &k, GR_OK, NULL, &q), GR_OK);
  if (!q) return;
  int done = 0;
  gr_status st = GR_OK;
  while (!done) {
    if (gr__seq_call_of(q)->path) FAIL("a refused call was posted (phase %d)", gr__seq_phase_of(q));
    if (gr__seq_phase_of(q) == GR__SEQ_POSTED) FAIL("a refused call reached POSTED");
    st = gr__seq_request(fn, q, 1, &done);
  }
  if (st != GR_ERR_INVALID) FAIL("a refused call ended with %s", gr_status_name(st));
  char want[64];
  snprintf(want, sizeof want, "rank %d of communicator", size - 1);
  if (rank != size - 1) EXPECT_MSG(want);
  for (size_t i = 0; i < (size_t)N * (size_t)size; i++)
    if (recv[i] != -7.0f) {
      FAIL("a refused allgather wrote recv[%zu]", i);
      break;
    }
  if (c->stats.calls[GR__ALLGATHER] != calls) FAIL("a refused allgather was counted");
  if (c->seq != seq + 1)
    FAIL("a refused call took %llu numbers", (unsigned long long)(c->seq - seq));
  free(send);
  free(recv);
}

/* POSTED: the row is chosen at the post; one turn does not wait for a peer that has not started.
 */
static void posted_and_budget(gr_comm *c) {
  float s8[8], r8[8] = {0};
  for (int i = 0; i < 8; i++)
    s8[i] = (float)(rank + i);
  gr__call k = allreduce_call(c, s8, r8, 8);
  gr_request *q = NULL;
  if (rank == 0) {
    EXPECT_ST(gr__seq_submit(fn, &k, GR_OK, NULL, &q), GR_OK);
    if (!q) return;
    if (gr__seq_phase_of(q) != GR__SEQ_POSTED)
      FAIL("an in-band allreduce with an empty queue is in phase %d", (int)gr__seq_phase_of(q));
    const gr__path *p = gr__seq_call_of(q)->path;
    if (!p || !p->name) FAIL("a posted call has no row");
    for (int i = 0; i < 50; i++) {
      int done = 0;
      EXPECT_ST(gr__seq_request(fn, q, 1, &done), GR_OK);
      if (done) {
        FAIL("the allreduce finished before the other ranks started it");
        return;
      }
    }
    if (gr__seq_call_of(q)->path != p) FAIL("the row changed after the post");
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank != 0) EXPECT_ST(gr__seq_submit(fn, &k, GR_OK, NULL, &q), GR_OK);
  if (!q) return;
  EXPECT_ST(finish(q), GR_OK);
  check_sum(r8, 8, "allreduce driven one turn at a time");
}

/* NAMING: an in-band allreduce the last rank refuses is posted (its in-band form, zeros from the
 * refusing rank) and every rank learns who refused; recv is untouched. */
static void naming(gr_comm *c) {
  float s8[8], r8[8];
  for (int i = 0; i < 8; i++)
    s8[i] = 1.0f, r8[i] = -3.0f;
  uint64_t calls = c->stats.calls[GR__ALLREDUCE];
  gr__call k = allreduce_call(c, rank == size - 1 ? NULL : s8, r8, 8);
  gr_request *q = NULL;
  EXPECT_ST(gr__seq_submit(fn, &k, GR_OK, NULL, &q), GR_OK);
  if (!q) return;
  if (!gr__seq_call_of(q)->path) FAIL("the in-band form of a refused call was not posted");
  int done = 0;
  gr_status st = GR_OK;
  while (!done)
    st = gr__seq_request(fn, q, 1, &done);
  if (st != GR_ERR_INVALID) FAIL("a refused call ended with %s", gr_status_name(st));
  char want[64];
  snprintf(want, sizeof want, "rank %d of communicator", size - 1);
  if (rank != size - 1) EXPECT_MSG(want);
  for (int i = 0; i < 8; i++)
    if (r8[i] != -3.0f) {
      FAIL("a refused allreduce wrote recv[%d] = %g", i, (double)r8[i]);
      break;
    }
  if (c->stats.calls[GR__ALLREDUCE] != calls) FAIL("a refused allreduce was counted");
}

/* DRAINED: the queue's calls are posted by a drain, oldest first, without waiting for them. */
static void drained(gr_comm *c) {
  float *send = malloc(sizeof *send * N), *recv = calloc((size_t)N * (size_t)size, sizeof *recv);
  float *recv2 = calloc((size_t)N * (size_t)size, sizeof *recv2);
  for (int i = 0; i < N; i++)
    send[i] = (float)(rank * 10000 + i);
  gr__call k1 = allgather_call(c, send, recv), k2 = allgather_call(c, send, recv2);
  gr_request *a = NULL, *b = NULL;
  EXPECT_ST(gr__seq_submit(fn, &k1, GR_OK, NULL, &a), GR_OK);
  EXPECT_ST(gr__seq_submit(fn, &k2, GR_OK, NULL, &b), GR_OK);
  if (!a || !b) return;
  EXPECT_ST(gr__requests_drain(fn, c), GR_OK);
  if (!gr__seq_empty(c)) FAIL("the queue is not empty after a drain");
  if (gr__seq_phase_of(a) < GR__SEQ_POSTED || gr__seq_phase_of(b) < GR__SEQ_POSTED)
    FAIL("a drain left calls unposted (phases %d, %d)", (int)gr__seq_phase_of(a),
         (int)gr__seq_phase_of(b));
  /* finished in the opposite order on every rank: both were posted, so neither waits */
  EXPECT_ST(finish(b), GR_OK);
  EXPECT_ST(finish(a), GR_OK);
  check_allgather(recv, "drained allgather 1");
  check_allgather(recv2, "drained allgather 2");
  free(send);
  free(recv);
  free(recv2);
}

/* SETTLED: counted once, released; nothing of the sequencer is left behind. */
static void settled(gr_comm *c) {
  float s8[8], r8[8] = {0};
  for (int i = 0; i < 8; i++)
    s8[i] = (float)(rank + i);
  uint64_t calls = c->stats.calls[GR__ALLREDUCE];
  gr__call k = allreduce_call(c, s8, r8, 8);
  gr_request *q = NULL;
  EXPECT_ST(gr__seq_submit(fn, &k, GR_OK, NULL, &q), GR_OK);
  if (!q) return;
  if (!gr__requests_outstanding()) FAIL("an outstanding request is not in the registry");
  if (__atomic_load_n(&c->pending, __ATOMIC_RELAXED) != 1)
    FAIL("pending is %ld with one request", c->pending);
  EXPECT_ST(finish(q), GR_OK);
  check_sum(r8, 8, "settled allreduce");
  if (c->stats.calls[GR__ALLREDUCE] != calls + 1)
    FAIL("a finished allreduce was counted %llu times",
         (unsigned long long)(c->stats.calls[GR__ALLREDUCE] - calls));
  if (gr__requests_outstanding()) FAIL("the registry still holds a communicator");
  if (c->pending != 0) FAIL("pending is %ld with no request", c->pending);
  if (!gr__seq_empty(c)) FAIL("the queue is not empty");
}

/* SETTLED past the deadline: the last rank never starts; the others' call times out, naming the
 * verdict it waited for, and their communicator is aborted. */
static void settled_timeout(void) {
  gr_comm *c = world_comm(NULL, 1.0, 0);
  if (!c) {
    failures++;
    return;
  }
  if (rank != size - 1) {
    float *send = malloc(sizeof *send * N), *recv = calloc((size_t)N * (size_t)size, sizeof *recv);
    for (int i = 0; i < N; i++)
      send[i] = (float)i;
    gr__call k = allgather_call(c, send, recv);
    gr_request *q = NULL;
    double t0 = MPI_Wtime();
    EXPECT_ST(gr__seq_submit(fn, &k, GR_OK, NULL, &q), GR_OK);
    if (q) {
      EXPECT_ST(finish(q), GR_ERR_TIMEOUT);
      EXPECT_MSG("the agreement on the arguments before allgather #1");
      double t = MPI_Wtime() - t0;
      if (t < 0.9 || t > 5.0) FAIL("the 1 s timeout came after %.2f s", t);
    }
    if (gr__check_alive(fn, c) != GR_ERR_ABORTED) FAIL("the timed-out communicator is not aborted");
    free(send);
    free(recv); /* the request ran on its verdict alone: nothing writes recv */
  }
  EXPECT_ST(gr_comm_destroy(c), GR_OK);
}

/* ---- threads: requests of every kind started on one thread, waited for on another ------------ */

#define NT 3    /* threads, one communicator each */
#define NK 10   /* requests per thread and round */
#define TN 3000 /* floats per rank in each call */
#define ROUNDS 4

typedef struct {
  int t;
  gr_comm *c;
  gr_request *req[NK];
  float *send, *recv[NK], *multi_recv[2];
  int bad;
} tstate;

static tstate ts[NT];
static pthread_barrier_t tbar;

static float tval(int t, int round, int r, size_t i) {
  return (float)((t * 7 + round * 3 + r * 5 + (int)(i % 97)) % 64);
}

static int tstart(tstate *s, int round) {
  gr_comm *c = s->c;
  int bad = 0, root = (s->t + round) % size, next_r = (rank + 1) % size,
      prev_r = (rank + size - 1) % size;
  for (size_t i = 0; i < (size_t)TN * (size_t)size; i++)
    s->send[i] = tval(s->t, round, rank, i);
  const void *ms[2] = {s->send, s->send + 100};
  void *mr[2] = {s->multi_recv[0], s->multi_recv[1]};
  size_t mc[2] = {100, TN - 100};
  gr_status st[NK];
  st[0] = gr_iallreduce(s->send, s->recv[0], TN, GR_FLOAT32, GR_SUM, c, NULL, &s->req[0]);
  st[1] = gr_ibroadcast(s->send, s->recv[1], TN, GR_FLOAT32, root, c, NULL, &s->req[1]);
  st[2] = gr_ireduce(s->send, s->recv[2], TN, GR_FLOAT32, GR_MAX, root, c, NULL, &s->req[2]);
  st[3] = gr_iallgather(s->send, s->recv[3], TN, GR_FLOAT32, c, NULL, &s->req[3]);
  st[4] = gr_ireduce_scatter(s->send, s->recv[4], TN, GR_FLOAT32, GR_SUM, c, NULL, &s->req[4]);
  st[5] = gr_ialltoall(s->send, s->recv[5], TN, GR_FLOAT32, c, NULL, &s->req[5]);
  st[6] = gr_ibarrier(c, &s->req[6]);
  st[7] = gr_iallreduce_multi(ms, mr, mc, 2, GR_FLOAT32, GR_SUM, c, NULL, &s->req[7]);
  st[8] = gr_irecv(s->recv[8], TN, GR_FLOAT32, prev_r, c, NULL, &s->req[8]);
  st[9] = gr_isend(s->send, TN, GR_FLOAT32, next_r, c, NULL, &s->req[9]);
  for (int k = 0; k < NK; k++)
    if (st[k] != GR_OK) {
      fprintf(stderr, "[rank %d thread %d] request %d: %s\n", rank, s->t, k, gr_last_error());
      bad++;
      s->req[k] = NULL;
    }
  return bad;
}

static int tcheck(const tstate *s, int round) {
  int root = (s->t + round) % size, prev_r = (rank + size - 1) % size;
  for (size_t i = 0; i < TN; i++) {
    float sum = 0, max = 0, rs = 0;
    for (int r = 0; r < size; r++) {
      float v = tval(s->t, round, r, i);
      sum += v, max = v > max ? v : max;
      rs += tval(s->t, round, r, (size_t)rank * TN + i);
    }
    float mr = i < 100 ? s->multi_recv[0][i] : s->multi_recv[1][i - 100];
    float want[NK] = {sum, tval(s->t, round, root, i),  max, 0, rs, 0, 0,
                      sum, tval(s->t, round, prev_r, i)};
    float got[NK] = {s->recv[0][i], s->recv[1][i], s->recv[2][i], 0, s->recv[4][i], 0, 0, mr,
                     s->recv[8][i]};
    for (int k = 0; k < 9; k++) {
      if (k == 2 && rank != root) continue;
      if (k == 3 || k == 5 || k == 6) continue;
      if (got[k] != want[k]) {
        fprintf(stderr, "[rank %d thread %d round %d] request %d element %zu: %g, want %g\n", rank,
                s->t, round, k, i, (double)got[k], (double)want[k]);
        return 1;
      }
    }
    for (int r = 0; r < size; r++) {
      float ag = s->recv[3][(size_t)r * TN + i], a2a = s->recv[5][(size_t)r * TN + i];
      if (ag != tval(s->t, round, r, i) || a2a != tval(s->t, round, r, (size_t)rank * TN + i)) {
        fprintf(stderr, "[rank %d thread %d round %d] allgather/alltoall block %d element %zu\n",
                rank, s->t, round, r, i);
        return 1;
      }
    }
  }
  return 0;
}

/* Wait for the requests of s (started by another thread), in an order of this thread's own. */
static int twait(tstate *s, int me, int round) {
  int bad = 0, order[NK];
  for (int k = 0; k < NK; k++)
    order[k] = (k * 3 + me + round + rank) % NK; /* 3 and NK coprime: a permutation */
  for (int j = 0; j < NK; j++) {
    gr_request **q = &s->req[order[j]];
    if (!*q) continue;
    gr_status st = GR_OK;
    if (j % 2) {
      int done = 0;
      while (!done && st == GR_OK)
        st = gr_test(q, &done);
    } else {
      st = gr_wait(q);
    }
    if (st != GR_OK) {
      fprintf(stderr, "[rank %d thread %d] waiting for request %d of thread %d: %s\n", rank, me,
              order[j], s->t, gr_last_error());
      bad++;
    }
  }
  return bad;
}

static void *tmain(void *arg) {
  tstate *me = arg;
  for (int round = 0; round < ROUNDS; round++) {
    me->bad += tstart(me, round);
    pthread_barrier_wait(&tbar); /* this thread's communicator is its neighbour's from here */
    tstate *other = &ts[(me->t + 1) % NT];
    me->bad += twait(other, me->t, round);
    me->bad += tcheck(other, round);
    pthread_barrier_wait(&tbar); /* and back to its own thread */
  }
  return NULL;
}

static void threads_case(void) {
  for (int t = 0; t < NT; t++) {
    ts[t].t = t;
    ts[t].c = world_comm(NULL, 30.0, 0);
    if (!ts[t].c) MPI_Abort(MPI_COMM_WORLD, 1);
    ts[t].send = malloc(sizeof(float) * TN * (size_t)size);
    for (int k = 0; k < NK; k++)
      ts[t].recv[k] = malloc(sizeof(float) * TN * (size_t)size);
    ts[t].multi_recv[0] = malloc(sizeof(float) * TN);
    ts[t].multi_recv[1] = malloc(sizeof(float) * TN);
  }
  pthread_barrier_init(&tbar, NULL, NT);
  pthread_t th[NT];
  for (int t = 0; t < NT; t++)
    if (pthread_create(&th[t], NULL, tmain, &ts[t]) != 0) MPI_Abort(MPI_COMM_WORLD, 1);
  for (int t = 0; t < NT; t++)
    pthread_join(th[t], NULL);
  pthread_barrier_destroy(&tbar);
  for (int t = 0; t < NT; t++) {
    failures += ts[t].bad;
    EXPECT_ST(gr_comm_destroy(ts[t].c), GR_OK);
    free(ts[t].send);
    for (int k = 0; k < NK; k++)
      free(ts[t].recv[k]);
    free(ts[t].multi_recv[0]);
    free(ts[t].multi_recv[1]);
  }
}

int main(int argc, char **argv) {
  int threads = argc > 1 && strcmp(argv[1], "threads") == 0, provided = 0;
  MPI_Init_thread(&argc, &argv, threads ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size < 2 || (threads && provided < MPI_THREAD_MULTIPLE)) {
    if (rank == 0)
      fprintf(stderr,
              "test_coll_sequencer needs 2 or more ranks (threads: and MPI_THREAD_MULTIPLE)\n");
    MPI_Finalize();
    return 1;
  }
  if (threads) {
    threads_case();
    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
      printf("test_coll_sequencer threads: %s (%d failures)\n", total ? "FAIL" : "ok", total);
    MPI_Finalize();
    return total ? 1 : 0;
  }
  gr_comm *c = world_comm(NULL, 20.0, 0);
  if (!c) MPI_Abort(MPI_COMM_WORLD, 1);
  if (c->side_mpi == MPI_COMM_NULL || !getenv("GPURUN_COLL_ALGO") ||
      strcmp(getenv("GPURUN_COLL_ALGO"), "mpi") != 0) {
    if (rank == 0) fprintf(stderr, "run under GPURUN_COLL_ALGO=mpi (verdicts, in-band calls)\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  verdict_and_queue(c);
  refused_verdict(c);
  posted_and_budget(c);
  naming(c);
  drained(c);
  settled(c);
  /* the communicator still works for blocking calls, which never enter the queue */
  float x = 1.0f, y = 0;
  EXPECT_ST(gr_allreduce(&x, &y, 1, GR_FLOAT32, GR_SUM, c, NULL), GR_OK);
  if (y != (float)size) FAIL("the blocking allreduce after the requests gave %g", (double)y);
  EXPECT_ST(gr_comm_destroy(c), GR_OK);
  settled_timeout();
  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) printf("test_coll_sequencer: %s (%d failures)\n", total ? "FAIL" : "ok", total);
  MPI_Finalize();
  return total ? 1 : 0;
}
