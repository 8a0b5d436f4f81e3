/* Waiting for (or testing) any request moves every outstanding call of the process, whatever
 * communicator it is on (MPI's progress rule, gr_test(3)): requests started in one order on every
 * rank and waited in different orders per rank must all complete. Before the process-wide registry
 * of communicators with outstanding requests (request.c), a rank waiting on communicator B never
 * posted the deferred data call of its request on A that its peer was waiting in, and both timed
 * out (issue 40).
 *
 *   test_coll_wait_order [red|mix|block|verdict|thread|all] [ROUNDS]
 *     red     two communicators A (gr_comm_create of the world) and B (gr_comm_split of it); every
 *             rank starts a request on A then one on B (ialltoall, then ireduce, of 100,000
 *             floats); rank 0 waits A then B, the others B then A;
 *     mix     up to 4 communicators (created, split, split with the ranks reversed, created again),
 *             up to 24 requests of every kind (allreduce, broadcast, reduce, allgather,
 *             reduce-scatter, alltoall, barrier; counts from 1 to 100,000) drawn from a seed the
 *             ranks share, each rank waiting in an order of its own (seeded per rank), some by
 *             gr_test over all of them; results compared exactly;
 *     block   rank 0 starts a request on A, makes a blocking allreduce on B, then waits A; the
 *             others wait A before the blocking call (the blocking call's progress loop must move
 *             A's deferred post);
 *     verdict as block, with B in check mode: rank 0's blocking call waits in its fingerprint
 *             exchange (gr__mpi_wait), which must move A's request too;
 *     thread  MPI_THREAD_MULTIPLE: a second thread waits, in an order of its own, for requests on A
 *             that the main thread started, while the main thread starts and waits requests on B
 *             (which the second thread never uses), in opposite orders on the ranks; run under
 *             ThreadSanitizer too.
 * Every communicator has a 10 s timeout, so a hang shows as GR_ERR_TIMEOUT. */
#include <gpurun/coll.h>
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size, failures;

#include "expect.h"

#define TIMEOUT_S 10.0
#define MAXREQ 24

static uint64_t next(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static gr_comm *create_world(void) {
  gr_comm_config cfg;
  gr_comm_config_init(&cfg);
  cfg.timeout_s = TIMEOUT_S;
  gr_comm *c = NULL;
  if (gr_comm_create(MPI_COMM_WORLD, &cfg, &c) != GR_OK) {
    fprintf(stderr, "[rank %d] gr_comm_create: %s\n", rank, gr_last_error());
    failures++;
    return NULL;
  }
  return c;
}

static gr_comm *split(gr_comm *parent, int reversed) {
  gr_comm *c = NULL;
  if (gr_comm_split(parent, 0, reversed ? size - rank : rank, &c) != GR_OK) {
    fprintf(stderr, "[rank %d] gr_comm_split: %s\n", rank, gr_last_error());
    failures++;
    return NULL;
  }
  return c;
}

/* ---- one request: its kind, buffers and exact answer ---------------------------------------- */

enum {
  K_ALLREDUCE,
  K_BROADCAST,
  K_REDUCE,
  K_ALLGATHER,
  K_REDUCE_SCATTER,
  K_ALLTOALL,
  K_BARRIER,
  NKINDS
};
static const char *const kind_name[] = {"allreduce",      "broadcast", "reduce", "allgather",
                                        "reduce_scatter", "alltoall",  "barrier"};

typedef struct {
  int kind, root, id;
  size_t count;
  gr_comm *comm;
  float *send, *recv;
  gr_request *req;
  int done;
} one;

/* Rank r's input element i of request id, headed for block b (alltoall, reduce-scatter): small
 * integers, so every sum over 4 ranks is exact in float32. */
static float value(int id, int r, size_t b, size_t i) {
  return (float)((i * 7 + (size_t)r * 13 + b * 5 + (size_t)id * 3) % 1021);
}

static size_t send_count(const one *o, int p) {
  return o->kind == K_REDUCE_SCATTER || o->kind == K_ALLTOALL ? o->count * (size_t)p : o->count;
}
static size_t recv_count(const one *o, int p) {
  return o->kind == K_ALLGATHER || o->kind == K_ALLTOALL ? o->count * (size_t)p : o->count;
}

/* Buffers and the start of o on its communicator (its rank there: me, of p). */
static gr_status start(one *o) {
  int me = gr_comm_rank(o->comm), p = gr_comm_size(o->comm);
  size_t ns = send_count(o, p), nr = recv_count(o, p);
  o->send = malloc((ns ? ns : 1) * sizeof(float));
  o->recv = malloc((nr ? nr : 1) * sizeof(float));
  if (!o->send || !o->recv) abort();
  size_t per = o->kind == K_REDUCE_SCATTER || o->kind == K_ALLTOALL ? o->count : ns;
  for (size_t j = 0; j < ns; j++)
    o->send[j] = value(o->id, me, per ? j / per : 0, per ? j % per : j);
  for (size_t j = 0; j < nr; j++)
    o->recv[j] = -1.0f;
  o->req = NULL;
  o->done = 0;
  switch (o->kind) {
  case K_ALLREDUCE:
    return gr_iallreduce(o->send, o->recv, o->count, GR_FLOAT32, GR_SUM, o->comm, NULL, &o->req);
  case K_BROADCAST:
    return gr_ibroadcast(o->send, o->recv, o->count, GR_FLOAT32, o->root, o->comm, NULL, &o->req);
  case K_REDUCE:
    return gr_ireduce(o->send, o->recv, o->count, GR_FLOAT32, GR_SUM, o->root, o->comm, NULL,
                      &o->req);
  case K_ALLGATHER:
    return gr_iallgather(o->send, o->recv, o->count, GR_FLOAT32, o->comm, NULL, &o->req);
  case K_REDUCE_SCATTER:
    return gr_ireduce_scatter(o->send, o->recv, o->count, GR_FLOAT32, GR_SUM, o->comm, NULL,
                              &o->req);
  case K_ALLTOALL:
    return gr_ialltoall(o->send, o->recv, o->count, GR_FLOAT32, o->comm, NULL, &o->req);
  default:
    return gr_ibarrier(o->comm, &o->req);
  }
}

/* The number of wrong elements of o's result (the first printed), then its buffers freed. */
static int check(one *o, const char *where) {
  int me = gr_comm_rank(o->comm), p = gr_comm_size(o->comm), bad = 0;
  size_t nr = recv_count(o, p);
  for (size_t j = 0; j < nr && o->kind != K_BARRIER; j++) {
    float want;
    size_t i = j % (o->count ? o->count : 1), blk = o->count ? j / o->count : 0;
    switch (o->kind) {
    case K_ALLREDUCE:
    case K_REDUCE:
      if (o->kind == K_REDUCE && me != o->root) return free(o->send), free(o->recv), 0;
      want = 0;
      for (int r = 0; r < p; r++)
        want += value(o->id, r, 0, j);
      break;
    case K_BROADCAST:
      want = value(o->id, o->root, 0, j);
      break;
    case K_ALLGATHER:
      want = value(o->id, (int)blk, 0, i);
      break;
    case K_REDUCE_SCATTER:
      want = 0;
      for (int r = 0; r < p; r++)
        want += value(o->id, r, (size_t)me, j);
      break;
    default: /* alltoall: block blk came from rank blk, which sent its block for me */
      want = value(o->id, (int)blk, (size_t)me, i);
    }
    if (o->recv[j] != want) {
      if (!bad)
        fprintf(stderr,
                "[rank %d] %s: request %d (%s, count %zu, root %d): [%zu] = %g, expected %g\n",
                rank, where, o->id, kind_name[o->kind], o->count, o->root, j, o->recv[j], want);
      bad++;
    }
  }
  free(o->send), free(o->recv);
  return bad ? 1 : 0;
}

/* Finish o with gr_wait; 1 on a failure (printed). */
static int wait_one(one *o, const char *where) {
  gr_clear_error();
  gr_status st = gr_wait(&o->req);
  o->done = 1;
  if (st != GR_OK) {
    fprintf(stderr, "[rank %d] %s: gr_wait of request %d (%s, count %zu) returned %s: %s\n", rank,
            where, o->id, kind_name[o->kind], o->count, gr_status_name(st), gr_last_error());
    free(o->send), free(o->recv);
    return 1;
  }
  return check(o, where);
}

/* ---- red: the reproduced case ---------------------------------------------------------------- */

static void red_team(int kind) {
  gr_comm *a = create_world(), *b = a ? split(a, 0) : NULL;
  if (!a || !b) return;
  one r[2] = {{.kind = kind, .root = 0, .id = 1, .count = 100000, .comm = a},
              {.kind = kind, .root = size - 1, .id = 2, .count = 100000, .comm = b}};
  EXPECT_OK(start(&r[0]));
  EXPECT_OK(start(&r[1]));
  char where[64];
  snprintf(where, sizeof where, "red team, %s", kind_name[kind]);
  if (rank == 0) {
    failures += wait_one(&r[0], where);
    failures += wait_one(&r[1], where);
  } else {
    failures += wait_one(&r[1], where);
    failures += wait_one(&r[0], where);
  }
  EXPECT_OK(gr_comm_destroy(b));
  EXPECT_OK(gr_comm_destroy(a));
}

/* ---- mix: every kind over up to 4 communicators, waited in orders of each rank's own -------- */

static const size_t counts[] = {1, 5, 256, 1000, 17000, 100000};

static void mix(int round) {
  gr_comm *comms[4] = {create_world(), NULL, NULL, NULL};
  if (!comms[0]) return;
  comms[1] = split(comms[0], 0);
  comms[2] = split(comms[0], 1);
  comms[3] = create_world();
  for (int i = 0; i < 4; i++)
    if (!comms[i]) goto out;
  uint64_t shared = 0x9e3779b97f4a7c15ull ^ (uint64_t)(round + 1) * 0x2545f4914f6cdd1dull;
  uint64_t mine = shared ^ (uint64_t)(rank + 1) * 0xbf58476d1ce4e5b9ull;
  int ncomm = 2 + (int)(next(&shared) % 3), nreq = 8 + (int)(next(&shared) % (MAXREQ - 7));
  one r[MAXREQ];
  for (int i = 0; i < nreq; i++) {
    one *o = &r[i];
    memset(o, 0, sizeof *o);
    o->id = round * 100 + i;
    o->kind = (int)(next(&shared) % NKINDS);
    o->comm = comms[next(&shared) % (uint64_t)ncomm];
    o->count = counts[next(&shared) % (sizeof counts / sizeof counts[0])];
    if ((o->kind == K_ALLTOALL || o->kind == K_REDUCE_SCATTER || o->kind == K_ALLGATHER) &&
        o->count > 17000)
      o->count = 17000 + (size_t)i; /* times size: enough to leave the small paths */
    o->root = (int)(next(&shared) % (uint64_t)size);
    if (start(o) != GR_OK) {
      FAIL("mix round %d: start of request %d (%s) failed: %s", round, i, kind_name[o->kind],
           gr_last_error());
      o->done = 1;
      free(o->send), free(o->recv);
    }
  }
  /* This rank's order: a shuffle; every third round the first half by gr_test sweeps. */
  int order[MAXREQ];
  for (int i = 0; i < nreq; i++)
    order[i] = i;
  for (int i = nreq - 1; i > 0; i--) {
    int j = (int)(next(&mine) % (uint64_t)(i + 1)), t = order[i];
    order[i] = order[j], order[j] = t;
  }
  char where[64];
  snprintf(where, sizeof where, "mix round %d (%d comms, %d requests)", round, ncomm, nreq);
  if (round % 3 == 2) {
    int half = nreq / 2, left = half;
    while (left > 0) {
      for (int k = 0; k < half; k++) {
        one *o = &r[order[k]];
        if (o->done) continue;
        int d = 0;
        gr_clear_error();
        gr_status st = gr_test(&o->req, &d);
        if (st != GR_OK || d) {
          o->done = 1, left--;
          if (st != GR_OK) {
            FAIL("%s: gr_test of request %d (%s) returned %s: %s", where, o->id, kind_name[o->kind],
                 gr_status_name(st), gr_last_error());
            free(o->send), free(o->recv);
          } else {
            failures += check(o, where);
          }
        }
      }
    }
  }
  for (int k = 0; k < nreq; k++)
    if (!r[order[k]].done) failures += wait_one(&r[order[k]], where);
out:
  for (int i = 3; i >= 0; i--)
    if (comms[i]) EXPECT_OK(gr_comm_destroy(comms[i]));
}

/* ---- block: a blocking call's progress loop moves another communicator's requests ------------ */

static void blocking_between(void) {
  gr_comm *a = create_world(), *b = a ? split(a, 0) : NULL;
  if (!a || !b) return;
  one r = {.kind = K_REDUCE, .root = size - 1, .id = 7, .count = 100000, .comm = a};
  one s = {.kind = K_ALLREDUCE, .root = 0, .id = 8, .count = 1000, .comm = b};
  EXPECT_OK(start(&r));
  if (rank != 0) failures += wait_one(&r, "block, the request first");
  /* s as a blocking call: start() would make it a request, so by hand */
  float x[1000], y[1000];
  for (int i = 0; i < 1000; i++)
    x[i] = value(8, gr_comm_rank(b), 0, (size_t)i);
  EXPECT_OK(gr_allreduce(x, y, 1000, GR_FLOAT32, GR_SUM, b, NULL));
  for (int i = 0; i < 1000; i++) {
    float want = 0;
    for (int q = 0; q < size; q++)
      want += value(8, q, 0, (size_t)i);
    if (y[i] != want) {
      FAIL("block: blocking allreduce [%d] = %g, expected %g", i, y[i], want);
      break;
    }
  }
  (void)s;
  if (rank == 0) failures += wait_one(&r, "block, the blocking call first");
  EXPECT_OK(gr_comm_destroy(b));
  EXPECT_OK(gr_comm_destroy(a));
}

/* ---- verdict: a blocking call that waits in an MPI exchange of its own ------------------------ */

/* As block, but B is in check mode, so rank 0's blocking allreduce waits in its fingerprint
 * exchange (gr__mpi_wait, comm_wait.c) rather than in the progress loop: that wait must move A's
 * request too (its deferred post, or the gated call's MPI call). */
static void verdict_between(void) {
  gr_comm_config cfg;
  gr_comm_config_init(&cfg);
  cfg.timeout_s = TIMEOUT_S;
  cfg.check = 1;
  gr_comm *a = create_world(), *b = NULL;
  if (!a) return;
  if (gr_comm_create(MPI_COMM_WORLD, &cfg, &b) != GR_OK) {
    fprintf(stderr, "[rank %d] gr_comm_create (check mode): %s\n", rank, gr_last_error());
    failures++;
    gr_comm_destroy(a);
    return;
  }
  one r = {.kind = K_REDUCE, .root = size - 1, .id = 9, .count = 100000, .comm = a};
  EXPECT_OK(start(&r));
  if (rank != 0) failures += wait_one(&r, "verdict, the request first");
  float x[1000], y[1000];
  for (int i = 0; i < 1000; i++)
    x[i] = value(10, rank, 0, (size_t)i);
  EXPECT_OK(gr_allreduce(x, y, 1000, GR_FLOAT32, GR_SUM, b, NULL));
  for (int i = 0; i < 1000; i++) {
    float want = 0;
    for (int q = 0; q < size; q++)
      want += value(10, q, 0, (size_t)i);
    if (y[i] != want) {
      FAIL("verdict: blocking allreduce [%d] = %g, expected %g", i, y[i], want);
      break;
    }
  }
  if (rank == 0) failures += wait_one(&r, "verdict, the blocking call first");
  EXPECT_OK(gr_comm_destroy(b));
  EXPECT_OK(gr_comm_destroy(a));
}

/* ---- thread: a second thread waits on A while the main thread uses B ------------------------ */

typedef struct {
  one *r;
  int n, bad;
  uint64_t seed;
} waiter;

static void *wait_all(void *arg) {
  waiter *w = arg;
  int order[MAXREQ];
  for (int i = 0; i < w->n; i++)
    order[i] = i;
  for (int i = w->n - 1; i > 0; i--) {
    int j = (int)(next(&w->seed) % (uint64_t)(i + 1)), t = order[i];
    order[i] = order[j], order[j] = t;
  }
  for (int k = 0; k < w->n; k++)
    w->bad += wait_one(&w->r[order[k]], "thread, second thread on A");
  return NULL;
}

static void threads(int round) {
  gr_comm *a = create_world(), *b = a ? split(a, 0) : NULL;
  if (!a || !b) return;
  enum { NA = 6, NB = 6 };
  one ra[NA], rb[NB];
  static const int kinds[] = {K_ALLTOALL,  K_REDUCE,    K_ALLREDUCE,
                              K_BROADCAST, K_ALLGATHER, K_REDUCE_SCATTER};
  /* Main starts A's requests and B's first half, interleaved, then hands A's to the thread. */
  for (int i = 0; i < NA; i++) {
    ra[i] = (one){.kind = kinds[i],
                  .root = i % size,
                  .id = 300 + i,
                  .count = i % 2 ? 100000 : 3000,
                  .comm = a};
    EXPECT_OK(start(&ra[i]));
    if (i < NB / 2) {
      rb[i] = (one){.kind = kinds[NB - 1 - i],
                    .root = (i + 1) % size,
                    .id = 400 + i,
                    .count = i % 2 ? 3000 : 30000,
                    .comm = b};
      EXPECT_OK(start(&rb[i]));
    }
  }
  waiter w = {ra, NA, 0, 0x1234567ull * (uint64_t)(rank + 1) + (uint64_t)round};
  pthread_t t;
  if (pthread_create(&t, NULL, wait_all, &w) != 0) {
    FAIL("pthread_create failed");
    return;
  }
  /* Meanwhile the main thread starts B's second half and waits all of B's: rank 0 newest first,
   * the others oldest first. */
  for (int i = NB / 2; i < NB; i++) {
    rb[i] = (one){.kind = kinds[i], .root = i % size, .id = 400 + i, .count = 20000, .comm = b};
    EXPECT_OK(start(&rb[i]));
  }
  for (int k = 0; k < NB; k++)
    failures += wait_one(&rb[rank == 0 ? NB - 1 - k : k], "thread, main thread on B");
  pthread_join(t, NULL);
  failures += w.bad;
  EXPECT_OK(gr_comm_destroy(b));
  EXPECT_OK(gr_comm_destroy(a));
}

int main(int argc, char **argv) {
  const char *what = argc > 1 ? argv[1] : "all";
  int rounds = argc > 2 ? atoi(argv[2]) : 6;
  int thread = !strcmp(what, "thread") || !strcmp(what, "all"), provided = 0;
  MPI_Init_thread(&argc, &argv, thread ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int all = !strcmp(what, "all");
  if (all || !strcmp(what, "red")) {
    red_team(K_ALLTOALL);
    red_team(K_REDUCE);
  }
  if (all || !strcmp(what, "block")) blocking_between();
  if (all || !strcmp(what, "verdict")) verdict_between();
  if (all || !strcmp(what, "mix"))
    for (int i = 0; i < rounds; i++)
      mix(i);
  if (thread) {
    if (provided < MPI_THREAD_MULTIPLE) {
      if (rank == 0) printf("wait_order: MPI_THREAD_MULTIPLE not provided, thread case skipped\n");
    } else {
      for (int i = 0; i < (rounds < 3 ? rounds : 3); i++)
        threads(i);
    }
  }
  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) printf("wait_order %s: %d failures\n", what, total);
  MPI_Finalize();
  return total ? 1 : 0;
}
