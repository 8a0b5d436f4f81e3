/* Every public call of coll.h, runtime.h, pool.h and dpool.h with misuse and edge cases, printing
 * one line per call, "FUNCTION STATUS_NAME case", for check_status_pages.py, which fails when a
 * call returned a status its man page does not list. Run under mpirun at 1 and 2 ranks; every rank
 * makes the same calls (a collective refused on one rank only would make the others wait), and
 * rank 0 prints (the others print what only they can see, marked with their rank, and the checker
 * reads all lines alike).
 *
 * No call here touches memory it was not given: counts above INT_MAX point into a PROT_NONE
 * reservation, so a call that read or wrote the buffer instead of refusing would crash the test
 * rather than pass it. Destroyed handles are not passed (that is a use after free); handles of
 * zeroed memory stand for garbage. A forked child runs the calls on the parent's objects only when
 * a first, harmless probe (gr_comm_synchronize, a no-op on the MPI backend) shows that the fork
 * guard refuses them; before that guard existed the calls would corrupt the parent's state. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <gpurun/gpurun.h>

#include <errno.h>
#include <limits.h>
#include <mpi.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static int rank = 0, size = 1, ncalls = 0;
static const char *who = ""; /* "" in the parent, "fork-child" in a forked child */

static gr_status say(const char *fn, gr_status st, const char *what) {
  ncalls++;
  if (rank == 0 || who[0])
    printf("%s %s %s%s%s\n", fn, gr_status_name(st), who, who[0] ? ":" : "", what);
  return st;
}
#define CALL(fn, what, ...) say(#fn, fn(__VA_ARGS__), what)

/* Zeroed memory passed where a handle is expected: no magic, so every call must refuse it. */
static _Alignas(64) unsigned char garbage[1 << 16];
#define GARBAGE(type) ((type *)(void *)garbage)

/* A reservation nothing may touch, for counts above INT_MAX. */
static char *forbidden;
static size_t forbidden_len;

static void nop(void *arg) { (void)arg; }
static void body(size_t lo, size_t hi, void *arg) { (void)lo, (void)hi, (void)arg; }
static gr_pool *destroy_target;
static gr_status destroy_from_task;
static void destroy_self(void *arg) {
  (void)arg;
  destroy_from_task = gr_pool_destroy(destroy_target);
}

static void pool_calls(void) {
  gr_pool_config cfg;
  gr_pool *p = NULL;
  CALL(gr_pool_create, "out-null", NULL, NULL);
  gr_pool_config_init(&cfg);
  cfg.nthreads = -1;
  CALL(gr_pool_create, "nthreads-negative", &cfg, &p);
  gr_pool_config_init(&cfg);
  cfg.pin = 7;
  CALL(gr_pool_create, "pin-7", &cfg, &p);
  gr_pool_config_init(&cfg);
  cfg.priorities = 3;
  CALL(gr_pool_create, "priorities-3", &cfg, &p);
  gr_pool_config_init(&cfg);
  cfg.stack_size = 1;
  CALL(gr_pool_create, "stack-too-small", &cfg, &p);
  gr_pool_config_init(&cfg);
  cfg.nthreads = 2;
  if (CALL(gr_pool_create, "ok", &cfg, &p) != GR_OK) return;
  CALL(gr_pool_destroy, "null", NULL);
  CALL(gr_pool_destroy, "garbage", GARBAGE(gr_pool));

  gr_taskgroup g, zero;
  memset(&zero, 0, sizeof zero);
  CALL(gr_spawn, "group-null", NULL, nop, NULL);
  CALL(gr_spawn, "group-uninitialised", &zero, nop, NULL);
  gr_taskgroup_init(&g, NULL);
  CALL(gr_spawn, "group-without-pool", &g, nop, NULL);
  gr_taskgroup_init(&g, p);
  CALL(gr_spawn, "fn-null", &g, NULL, NULL);
  CALL(gr_spawn, "ok", &g, nop, NULL);
  CALL(gr_spawn_prio, "priority-5", &g, 5, nop, NULL);
  CALL(gr_spawn_prio, "fn-null", &g, GR_PRIO_HIGH, NULL, NULL);
  CALL(gr_spawn_prio, "ok", &g, GR_PRIO_HIGH, nop, NULL);
  CALL(gr_taskgroup_wait, "ok", &g);
  CALL(gr_taskgroup_wait, "again", &g);
  CALL(gr_taskgroup_wait, "null", NULL);
  CALL(gr_taskgroup_wait, "uninitialised", &zero);
  gr_taskgroup_init(&g, p);
  for (int i = 0; i < 100; i++)
    gr_spawn(&g, nop, NULL);
  gr_taskgroup_cancel(&g);
  CALL(gr_taskgroup_wait, "cancelled", &g);

  CALL(gr_parallel_for, "pool-null", NULL, 0, 10, 1, body, NULL);
  CALL(gr_parallel_for, "body-null", p, 0, 10, 1, NULL, NULL);
  CALL(gr_parallel_for, "begin-after-end", p, 10, 0, 1, body, NULL);
  CALL(gr_parallel_for, "garbage-pool", GARBAGE(gr_pool), 0, 10, 1, body, NULL);
  CALL(gr_parallel_for, "empty-range", p, 5, 5, 1, body, NULL);
  CALL(gr_parallel_for, "grain-0", p, 0, 100, 0, body, NULL);
  CALL(gr_parallel_for, "ok", p, 0, 1000, 7, body, NULL);

  destroy_target = p;
  gr_taskgroup_init(&g, p);
  gr_spawn(&g, destroy_self, NULL);
  gr_taskgroup_wait(&g);
  say("gr_pool_destroy", destroy_from_task, "from-own-task");
  CALL(gr_pool_destroy, "ok", p);
}

/* ---- collectives ----------------------------------------------------------------------------- */

/* The blocking and non-blocking forms of one kind with the same arguments (every rank alike). */
typedef struct {
  const void *send;
  void *recv;
  size_t count;
  gr_dtype dtype;
  gr_op op;
  int root; /* root, or peer */
} args;

static void both(const char *what, gr_comm *c, args a, int kinds) {
  gr_request *q;
  char w[128];
#define REQ(fn, ...)                                                                               \
  do {                                                                                             \
    q = NULL;                                                                                      \
    gr_status st_ = say(#fn, fn(__VA_ARGS__, &q), what);                                           \
    if (q) {                                                                                       \
      snprintf(w, sizeof w, "%s-wait(%s)", what, #fn);                                             \
      say("gr_wait", gr_wait(&q), w);                                                              \
    }                                                                                              \
    (void)st_;                                                                                     \
  } while (0)
  if (kinds & 1) {
    CALL(gr_allreduce, what, a.send, a.recv, a.count, a.dtype, a.op, c, NULL);
    REQ(gr_iallreduce, a.send, a.recv, a.count, a.dtype, a.op, c, NULL);
  }
  if (kinds & 2) {
    CALL(gr_broadcast, what, a.send, a.recv, a.count, a.dtype, a.root, c, NULL);
    REQ(gr_ibroadcast, a.send, a.recv, a.count, a.dtype, a.root, c, NULL);
  }
  if (kinds & 4) {
    CALL(gr_reduce, what, a.send, a.recv, a.count, a.dtype, a.op, a.root, c, NULL);
    REQ(gr_ireduce, a.send, a.recv, a.count, a.dtype, a.op, a.root, c, NULL);
  }
  if (kinds & 8) {
    CALL(gr_allgather, what, a.send, a.recv, a.count, a.dtype, c, NULL);
    REQ(gr_iallgather, a.send, a.recv, a.count, a.dtype, c, NULL);
  }
  if (kinds & 16) {
    CALL(gr_reduce_scatter, what, a.send, a.recv, a.count, a.dtype, a.op, c, NULL);
    REQ(gr_ireduce_scatter, a.send, a.recv, a.count, a.dtype, a.op, c, NULL);
  }
  if (kinds & 32) {
    CALL(gr_alltoall, what, a.send, a.recv, a.count, a.dtype, c, NULL);
    REQ(gr_ialltoall, a.send, a.recv, a.count, a.dtype, c, NULL);
  }
  if (kinds & 64) {
    const void *s[2] = {a.send, a.send};
    void *r[2] = {a.recv, a.recv};
    size_t n[2] = {a.count, 0};
    CALL(gr_allreduce_multi, what, s, r, n, 2, a.dtype, a.op, c, NULL);
    REQ(gr_iallreduce_multi, s, r, n, 2, a.dtype, a.op, c, NULL);
  }
#undef REQ
}
#define ALL 127
#define NOMULTI 63

/* Point to point: rank r sends to r^1 and receives from r^1 (2 ranks), or refused arguments. */
static void p2p(const char *what, gr_comm *c, void *buf, size_t count, gr_dtype dt, int peer) {
  gr_request *q = NULL;
  char w[128];
  CALL(gr_send, what, buf, count, dt, peer, c, NULL);
  CALL(gr_recv, what, buf, count, dt, peer, c, NULL);
  if (say("gr_isend", gr_isend(buf, count, dt, peer, c, NULL, &q), what) == GR_OK && q) {
    snprintf(w, sizeof w, "%s-wait(gr_isend)", what);
    say("gr_wait", gr_wait(&q), w);
  }
  q = NULL;
  if (say("gr_irecv", gr_irecv(buf, count, dt, peer, c, NULL, &q), what) == GR_OK && q) {
    snprintf(w, sizeof w, "%s-wait(gr_irecv)", what);
    say("gr_wait", gr_wait(&q), w);
  }
}

/* Every call that takes a communicator, on c, with valid arguments (after abort, in a forked
 * child, on a NULL or garbage communicator). */
static void every_comm_call(const char *what, gr_comm *c, float *buf, float *big) {
  args a = {buf, buf, 4, GR_FLOAT32, GR_SUM, 0};
  both(what, c, a, ALL & ~(8 | 16 | 32));
  args b = {buf, big, 4, GR_FLOAT32, GR_SUM, 0};
  both(what, c, b, 8 | 32);
  args d = {big, buf, 4, GR_FLOAT32, GR_SUM, 0};
  both(what, c, d, 16);
  gr_request *q = NULL;
  CALL(gr_send, what, buf, 4, GR_FLOAT32, 0, c, NULL);
  CALL(gr_recv, what, buf, 4, GR_FLOAT32, 0, c, NULL);
  CALL(gr_isend, what, buf, 4, GR_FLOAT32, 0, c, NULL, &q);
  CALL(gr_irecv, what, buf, 4, GR_FLOAT32, 0, c, NULL, &q);
  CALL(gr_barrier, what, c);
  CALL(gr_ibarrier, what, c, &q);
  CALL(gr_comm_synchronize, what, c, NULL);
  gr_comm *out = NULL;
  CALL(gr_comm_split, what, c, 0, 0, &out);
  if (out) gr_comm_destroy(out);
  void *p = NULL;
  CALL(gr_mem_alloc, what, c, 4096, &p);
  CALL(gr_mem_free, what, c, p);
  gr_mem_handle *h = NULL;
  CALL(gr_mem_register, what, c, buf, 4096, &h);
  CALL(gr_mem_deregister, what, c, h);
  CALL(gr_mem_deregister, what, c, NULL);
}

static void coll_calls(gr_comm *w) {
  size_t P = (size_t)size;
  float *buf = aligned_alloc(4096, 4096), *big = aligned_alloc(4096, 4096 * 4);
  memset(buf, 0, 4096);
  memset(big, 0, 4096 * 4);
  char *fb = forbidden;

  /* NULL and garbage communicators */
  every_comm_call("comm-null", NULL, buf, big);
  every_comm_call("comm-garbage", GARBAGE(gr_comm), buf, big);

  /* argument refusals, every rank alike */
  both("dtype-99", w, (args){buf, buf, 4, (gr_dtype)99, GR_SUM, 0}, ALL);
  both("op-99", w, (args){buf, buf, 4, GR_FLOAT32, (gr_op)99, 0}, 1 | 4 | 16 | 64);
  both("avg-on-int32", w, (args){buf, buf, 4, GR_INT32, GR_AVG, 0}, 1 | 4 | 16 | 64);
  both("send-null", w, (args){NULL, big, 4, GR_FLOAT32, GR_SUM, 0}, ALL);
  both("recv-null", w, (args){buf, NULL, 4, GR_FLOAT32, GR_SUM, 0}, ALL);
  both("overlap", w, (args){big, big + 1, 4, GR_FLOAT32, GR_SUM, 0}, 1 | 2 | 4 | 32 | 64);
  both("overlap", w, (args){big + 1, big, 4, GR_FLOAT32, GR_SUM, 0}, 8 | 16);
  both("count-overflows", w, (args){buf, big, SIZE_MAX / 2, GR_FLOAT32, GR_SUM, 0}, ALL);
  both("root-negative", w, (args){buf, big, 4, GR_FLOAT32, GR_SUM, -1}, 2 | 4);
  both("root-size", w, (args){buf, big, 4, GR_FLOAT32, GR_SUM, size}, 2 | 4);
  /* count 0 with NULL buffers, and valid calls in place and out of place */
  both("count-0-null", w, (args){NULL, NULL, 0, GR_FLOAT32, GR_SUM, 0}, ALL);
  both("in-place", w, (args){buf, buf, 4, GR_FLOAT32, GR_SUM, 0}, 1 | 2 | 4 | 32 | 64);
  both("in-place", w, (args){big + (size_t)rank * 4, big, 4, GR_FLOAT32, GR_SUM, 0}, 8);
  both("in-place", w, (args){big, big + (size_t)rank * 4, 4, GR_FLOAT32, GR_SUM, 0}, 16);
  both("ok", w, (args){buf, big, 4, GR_FLOAT32, GR_SUM, 0}, ALL & ~16);
  both("ok", w, (args){big, buf, 4, GR_FLOAT32, GR_SUM, 0}, 16);
  both("root-last", w, (args){buf, big, 4, GR_FLOAT32, GR_MAX, size - 1}, 2 | 4);
  both("avg-float64", w, (args){big, big, 4, GR_FLOAT64, GR_AVG, 0}, 1 | 4 | 64);
  /* counts above INT_MAX, in place, in memory nobody may touch: refused before any byte moves */
  if (fb) {
    size_t n = (size_t)INT_MAX + 1;
    both("count-above-INT_MAX", w, (args){fb, fb, n, GR_INT8, GR_SUM, 0}, 1 | 2 | 4 | 32);
    both("count-above-INT_MAX", w, (args){fb + (size_t)rank * n, fb, n, GR_INT8, GR_SUM, 0}, 8);
    both("count-above-INT_MAX", w, (args){fb, fb + (size_t)rank * n, n, GR_INT8, GR_SUM, 0}, 16);
    if (size == 2) p2p("count-above-INT_MAX", w, fb, n, GR_INT8, rank ^ 1);
    (void)P;
  }

  /* point to point */
  p2p("peer-negative", w, buf, 4, GR_FLOAT32, -1);
  p2p("peer-size", w, buf, 4, GR_FLOAT32, size);
  p2p("peer-self", w, buf, 4, GR_FLOAT32, rank);
  p2p("buf-null", w, NULL, 4, GR_FLOAT32, 0);
  p2p("dtype-99", w, buf, 4, (gr_dtype)99, 0);
  if (size == 2) {
    gr_request *q = NULL;
    if (rank == 0) {
      CALL(gr_send, "ok", buf, 4, GR_FLOAT32, 1, w, NULL);
      CALL(gr_recv, "ok", buf, 4, GR_FLOAT32, 1, w, NULL);
      CALL(gr_isend, "ok", buf, 4, GR_FLOAT32, 1, w, NULL, &q);
    } else {
      CALL(gr_recv, "ok", buf, 4, GR_FLOAT32, 0, w, NULL);
      CALL(gr_send, "ok", buf, 4, GR_FLOAT32, 0, w, NULL);
      CALL(gr_irecv, "ok", buf, 4, GR_FLOAT32, 0, w, NULL, &q);
    }
    CALL(gr_wait, "ok(p2p)", &q);
    CALL(gr_send, "count-0", NULL, 0, GR_FLOAT32, rank ^ 1, w, NULL);
    CALL(gr_recv, "count-0", NULL, 0, GR_FLOAT32, rank ^ 1, w, NULL);
  }
  /* fused: NULL arrays, overflowing counts */
  CALL(gr_allreduce_multi, "arrays-null", NULL, NULL, NULL, 2, GR_FLOAT32, GR_SUM, w, NULL);
  CALL(gr_allreduce_multi, "nbufs-0", NULL, NULL, NULL, 0, GR_FLOAT32, GR_SUM, w, NULL);
  {
    gr_request *q = NULL;
    if (CALL(gr_iallreduce_multi, "arrays-null", NULL, NULL, NULL, 2, GR_FLOAT32, GR_SUM, w, NULL,
             &q) == GR_OK &&
        q)
      say("gr_wait", gr_wait(&q), "arrays-null");
    q = NULL;
    if (CALL(gr_iallreduce_multi, "nbufs-0", NULL, NULL, NULL, 0, GR_FLOAT32, GR_SUM, w, NULL,
             &q) == GR_OK &&
        q)
      say("gr_wait", gr_wait(&q), "nbufs-0");
    const void *s[2] = {buf, buf};
    void *r[2] = {buf, buf};
    size_t n[2] = {SIZE_MAX / 8, SIZE_MAX / 8};
    CALL(gr_allreduce_multi, "counts-overflow", s, r, n, 2, GR_FLOAT32, GR_SUM, w, NULL);
    q = NULL;
    if (CALL(gr_iallreduce_multi, "counts-overflow", s, r, n, 2, GR_FLOAT32, GR_SUM, w, NULL, &q) ==
            GR_OK &&
        q)
      say("gr_wait", gr_wait(&q), "counts-overflow");
  }

  /* requests: NULL req, waited twice, tested with NULL, inside a group */
  {
    gr_request *q = NULL;
    int done = 0;
    CALL(gr_iallreduce, "req-null", buf, buf, 4, GR_FLOAT32, GR_SUM, w, NULL, NULL);
    CALL(gr_ibroadcast, "req-null", buf, buf, 4, GR_FLOAT32, 0, w, NULL, NULL);
    CALL(gr_ireduce, "req-null", buf, buf, 4, GR_FLOAT32, GR_SUM, 0, w, NULL, NULL);
    CALL(gr_iallgather, "req-null", buf, big, 4, GR_FLOAT32, w, NULL, NULL);
    CALL(gr_ireduce_scatter, "req-null", big, buf, 4, GR_FLOAT32, GR_SUM, w, NULL, NULL);
    CALL(gr_ialltoall, "req-null", buf, big, 4, GR_FLOAT32, w, NULL, NULL);
    CALL(gr_ibarrier, "req-null", w, NULL);
    {
      const void *s[1] = {buf};
      void *r[1] = {buf};
      size_t n[1] = {4};
      CALL(gr_iallreduce_multi, "req-null", s, r, n, 1, GR_FLOAT32, GR_SUM, w, NULL, NULL);
    }
    CALL(gr_iallreduce, "ok", buf, buf, 4, GR_FLOAT32, GR_SUM, w, NULL, &q);
    CALL(gr_test, "done-null", &q, NULL);
    gr_request *saved = q;
    CALL(gr_comm_destroy, "request-outstanding", w);
    gr_comm *sp = NULL;
    if (CALL(gr_comm_split, "request-outstanding", w, 0, 0, &sp) == GR_OK && sp)
      gr_comm_destroy(sp);
    while (q && CALL(gr_test, "ok", &q, &done) == GR_OK && !done) {
    }
    (void)saved;
    CALL(gr_wait, "waited-twice", &q);
    CALL(gr_test, "tested-after-done", &q, &done);
    CALL(gr_wait, "null", NULL);
    CALL(gr_test, "null", NULL, &done);
    CALL(gr_ibarrier, "ok", w, &q);
    CALL(gr_wait, "ok(ibarrier)", &q);
  }
  /* groups */
  {
    gr_request *q = NULL;
    CALL(gr_group_end, "without-start");
    CALL(gr_group_start, "ok");
    CALL(gr_barrier, "in-group", w);
    CALL(gr_ibarrier, "in-group", w, &q);
    CALL(gr_iallreduce, "in-group", buf, buf, 4, GR_FLOAT32, GR_SUM, w, NULL, &q);
    CALL(gr_allreduce, "in-group", buf, buf, 4, GR_FLOAT32, GR_SUM, w, NULL);
    CALL(gr_send, "in-group-self", buf, 4, GR_FLOAT32, rank, w, NULL);
    CALL(gr_recv, "in-group-self", big, 4, GR_FLOAT32, rank, w, NULL);
    CALL(gr_group_start, "nested");
    CALL(gr_group_end, "nested");
    CALL(gr_group_end, "ok");
    CALL(gr_group_start, "refused-inside");
    CALL(gr_allreduce, "in-group-refused", NULL, buf, 4, GR_FLOAT32, GR_SUM, w, NULL);
    CALL(gr_group_end, "refused-inside");
    CALL(gr_group_start, "refused-p2p-inside");
    CALL(gr_send, "in-group-refused", buf, 4, GR_FLOAT32, -1, w, NULL);
    CALL(gr_group_end, "refused-p2p-inside");
  }
  /* memory */
  {
    void *p = NULL;
    gr_mem_handle *h = NULL, *h2 = NULL;
    CALL(gr_mem_alloc, "ptr-null", w, 4096, NULL);
    CALL(gr_mem_alloc, "bytes-0", w, 0, &p);
    CALL(gr_mem_alloc, "ok", w, 4096, &p);
    CALL(gr_mem_free, "unknown-pointer", w, buf);
    CALL(gr_mem_free, "null", w, NULL);
    CALL(gr_mem_free, "ok", w, p);
    CALL(gr_mem_free, "freed-twice", w, p);
    CALL(gr_mem_register, "ptr-null", w, NULL, 4096, &h);
    CALL(gr_mem_register, "bytes-0", w, buf, 0, &h);
    CALL(gr_mem_register, "handle-null", w, buf, 4096, NULL);
    char *unaligned = malloc(10000);
    if (CALL(gr_mem_register, "not-page-aligned", w, unaligned + 1, 100, &h) == GR_OK)
      CALL(gr_mem_deregister, "not-page-aligned", w, h);
    if (CALL(gr_mem_register, "partial-last-page", w, buf, 100, &h) == GR_OK)
      CALL(gr_mem_deregister, "partial-last-page", w, h);
    free(unaligned);
    CALL(gr_mem_register, "ok", w, big, 4096 * 4, &h);
    CALL(gr_mem_register, "overlap", w, big, 4096, &h2);
    gr_comm *other = NULL;
    if (gr_comm_split(w, 0, 0, &other) == GR_OK) {
      if (CALL(gr_mem_register, "pages-on-another-comm", other, big, 4096, &h2) == GR_OK)
        CALL(gr_mem_deregister, "pages-on-another-comm", other, h2);
      CALL(gr_comm_destroy, "ok", other);
    }
    {
      gr_request *q = NULL;
      gr_iallreduce(buf, buf, 4, GR_FLOAT32, GR_SUM, w, NULL, &q);
      void *p2 = NULL;
      gr_mem_handle *h3 = NULL;
      if (CALL(gr_mem_alloc, "request-outstanding", w, 4096, &p2) == GR_OK) gr_mem_free(w, p2);
      if (CALL(gr_mem_register, "request-outstanding", w, buf, 4096, &h3) == GR_OK)
        gr_mem_deregister(w, h3);
      CALL(gr_mem_deregister, "request-outstanding", w, h);
      if (q) gr_wait(&q);
    }
    CALL(gr_mem_deregister, "null", w, NULL);
    CALL(gr_mem_deregister, "garbage", w, GARBAGE(gr_mem_handle));
    CALL(gr_mem_deregister, "ok", w, h);
    CALL(gr_mem_deregister, "deregistered-twice", w, h);
  }
  CALL(gr_comm_synchronize, "ok", w, NULL);
  CALL(gr_comm_synchronize, "stream-garbage", w, (gr_stream)garbage);
  free(buf);
  free(big);
}

static void comm_calls(gr_comm *w) {
  gr_comm_config cfg;
  gr_comm *c = NULL;
  CALL(gr_comm_create, "out-null", MPI_COMM_WORLD, NULL, NULL);
  CALL(gr_comm_create, "mpi-null", MPI_COMM_NULL, NULL, &c);
  gr_comm_config_init(&cfg);
  cfg.backend = (gr_backend)99;
  CALL(gr_comm_create, "backend-99", MPI_COMM_WORLD, &cfg, &c);
  gr_comm_config_init(&cfg);
  cfg.timeout_s = -1;
  CALL(gr_comm_create, "timeout-negative", MPI_COMM_WORLD, &cfg, &c);
  gr_comm_config_init(&cfg);
  cfg.backend = GR_BACKEND_MPI;
  cfg.check = 1;
  if (CALL(gr_comm_create, "ok-check-mode", MPI_COMM_WORLD, &cfg, &c) == GR_OK) {
    float v[8] = {0};
    if (size > 1) {
      /* check mode: the ranks' calls disagree */
      CALL(gr_allreduce, "mismatch", v, v, rank ? 2 : 4, GR_FLOAT32, GR_SUM, c, NULL);
      gr_request *q = NULL;
      if (CALL(gr_iallreduce, "mismatch", v, v, rank ? 2 : 4, GR_FLOAT32, GR_SUM, c, NULL, &q) ==
              GR_OK &&
          q)
        say("gr_wait", gr_wait(&q), "mismatch");
      CALL(gr_broadcast, "mismatch", v, v, 4, GR_FLOAT32, rank, c, NULL);
      CALL(gr_group_start, "mismatch");
      CALL(gr_allreduce, "mismatch-grouped", v, v, rank ? 2 : 4, GR_FLOAT32, GR_SUM, c, NULL);
      CALL(gr_group_end, "mismatch");
      const void *s[1] = {v};
      void *r[1] = {v};
      size_t n[1] = {rank ? 2u : 4u};
      CALL(gr_allreduce_multi, "mismatch", s, r, n, 1, GR_FLOAT32, GR_SUM, c, NULL);
      void *p = NULL;
      if (CALL(gr_mem_alloc, "mismatch", c, rank ? 4096 : 8192, &p) == GR_OK) gr_mem_free(c, p);
      if (CALL(gr_mem_alloc, "ok", c, 4096, &p) == GR_OK)
        CALL(gr_mem_free, "mismatch-null", c, rank ? p : NULL);
      if (p) gr_mem_free(c, p);
      /* one rank refuses its own arguments */
      CALL(gr_allreduce, "one-rank-refuses", rank ? NULL : v, v, 4, GR_FLOAT32, GR_SUM, c, NULL);
    }
    CALL(gr_comm_destroy, "ok", c);
  }
  gr_comm_config_init(&cfg);
  cfg.backend = GR_BACKEND_NCCL;
  c = NULL;
  if (getenv("GPURUN_STATUS_NCCL") &&
      CALL(gr_comm_create, "backend-nccl", MPI_COMM_WORLD, &cfg, &c) == GR_OK)
    CALL(gr_comm_destroy, "ok", c);

  gr_comm *s = NULL;
  CALL(gr_comm_split, "out-null", w, 0, 0, NULL);
  CALL(gr_comm_split, "color-negative", w, -1, 0, &s);
  if (CALL(gr_comm_split, "ok", w, rank % 2, 0, &s) == GR_OK) CALL(gr_comm_destroy, "ok", s);
  CALL(gr_comm_destroy, "null", NULL);
  CALL(gr_comm_abort, "null", NULL);
  CALL(gr_comm_abort, "garbage", GARBAGE(gr_comm));
  CALL(gr_comm_destroy, "garbage", GARBAGE(gr_comm));

  /* after gr_comm_abort */
  gr_comm *a = NULL;
  if (gr_comm_split(w, 0, 0, &a) == GR_OK) {
    float *buf = aligned_alloc(4096, 4096), *big = aligned_alloc(4096, 4096 * 4);
    memset(buf, 0, 4096);
    memset(big, 0, 4096 * 4);
    void *p = NULL;
    gr_mem_handle *h = NULL;
    gr_mem_alloc(a, 4096, &p);
    gr_mem_register(a, big, 4096, &h);
    CALL(gr_comm_abort, "ok", a);
    every_comm_call("after-abort", a, buf, big);
    CALL(gr_mem_free, "after-abort-live-allocation", a, p);
    CALL(gr_mem_deregister, "after-abort-live-handle", a, h);
    CALL(gr_comm_abort, "twice", a);
    CALL(gr_comm_destroy, "after-abort", a);
    free(buf);
    free(big);
  }
  /* a request started before the abort */
  if (gr_comm_split(w, 0, 0, &a) == GR_OK) {
    float v[4] = {0};
    gr_request *q = NULL;
    int done = 0;
    gr_iallreduce(v, v, 4, GR_FLOAT32, GR_SUM, a, NULL, &q);
    gr_comm_abort(a);
    if (q) CALL(gr_test, "aborted-before-done", &q, &done);
    if (q) CALL(gr_wait, "aborted-before-done", &q);
    CALL(gr_comm_destroy, "after-abort", a);
  }
}

/* ---- dpool ----------------------------------------------------------------------------------- */

static void dtask(gr_dpool *dp, const void *payload, size_t len, void *ctx) {
  (void)dp, (void)payload, (void)len, (void)ctx;
}

static void dpool_calls(void) {
  gr_dpool_config cfg;
  gr_dpool *dp = NULL;
  CALL(gr_dpool_create, "out-null", MPI_COMM_WORLD, NULL, NULL, NULL);
  CALL(gr_dpool_create, "comm-null", MPI_COMM_NULL, NULL, NULL, &dp);
  memset(&cfg, 0, sizeof cfg);
  CALL(gr_dpool_create, "cfg-not-initialised", MPI_COMM_WORLD, NULL, &cfg, &dp);
  gr_dpool_config_init(&cfg);
  cfg.max_chunk = 0;
  CALL(gr_dpool_create, "max-chunk-0", MPI_COMM_WORLD, NULL, &cfg, &dp);
  gr_dpool_config_init(&cfg);
  cfg.timeout_s = 30;
  if (CALL(gr_dpool_create, "ok", MPI_COMM_WORLD, NULL, &cfg, &dp) != GR_OK) return;
  int id = -1;
  struct gr_dpool_stats st;
  char payload[8] = {0};
  CALL(gr_dpool_register, "dp-null", NULL, dtask, &id);
  CALL(gr_dpool_register, "dp-garbage", GARBAGE(gr_dpool), dtask, &id);
  CALL(gr_dpool_register, "fn-null", dp, NULL, &id);
  CALL(gr_dpool_register, "id-null", dp, dtask, NULL);
  CALL(gr_dpool_register, "ok", dp, dtask, &id);
  CALL(gr_dpool_push, "dp-null", NULL, id, payload, sizeof payload);
  CALL(gr_dpool_push, "id-7", dp, 7, payload, sizeof payload);
  CALL(gr_dpool_push, "too-long", dp, id, payload, (size_t)GR_DPOOL_MAX_PAYLOAD + 1);
  CALL(gr_dpool_push, "payload-null", dp, id, NULL, 4);
  CALL(gr_dpool_push, "len-0", dp, id, NULL, 0);
  CALL(gr_dpool_push, "ok", dp, id, payload, sizeof payload);
  CALL(gr_dpool_push_to, "rank-negative", dp, -1, id, payload, sizeof payload);
  CALL(gr_dpool_push_to, "rank-size", dp, size, id, payload, sizeof payload);
  CALL(gr_dpool_push_to, "ok", dp, size - 1, id, payload, sizeof payload);
  CALL(gr_dpool_run, "dp-null", NULL);
  CALL(gr_dpool_run, "ok", dp);
  CALL(gr_dpool_register, "after-run", dp, dtask, &id);
  CALL(gr_dpool_run, "again", dp);
  CALL(gr_dpool_stats, "dp-null", NULL, &st);
  CALL(gr_dpool_stats, "out-null", dp, NULL);
  CALL(gr_dpool_stats, "ok", dp, &st);
  CALL(gr_dpool_stats_reset, "dp-null", NULL);
  CALL(gr_dpool_stats_reset, "ok", dp);
  CALL(gr_dpool_destroy, "null", NULL);
  CALL(gr_dpool_destroy, "garbage", GARBAGE(gr_dpool));
  CALL(gr_dpool_destroy, "ok", dp);
}

/* ---- fork ------------------------------------------------------------------------------------ */

static void fork_calls(gr_comm *w) {
  float *buf = aligned_alloc(4096, 4096), *big = aligned_alloc(4096, 4096 * 4);
  memset(buf, 0, 4096);
  memset(big, 0, 4096 * 4);
  void *p = NULL;
  gr_mem_handle *h = NULL;
  gr_request *q = NULL;
  gr_mem_alloc(w, 4096, &p);
  gr_mem_register(w, big, 4096, &h);
  gr_iallreduce(buf, buf, 4, GR_FLOAT32, GR_SUM, w, NULL, &q);
  gr_group_start(); /* a group the parent queued a call in */
  gr_allreduce(buf, buf, 4, GR_FLOAT32, GR_SUM, w, NULL);
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    alarm(60);
    who = "fork-child";
    rank = 0; /* every rank's child prints */
    if (gr_comm_synchronize(w, NULL) != GR_ERR_STATE) {
      /* the guard is not in this build: every further call would touch the parent's state */
      printf("# fork-child: no fork guard in this build (gr_comm_synchronize did not refuse); "
             "calls skipped\n");
      fflush(stdout);
      _exit(0);
    }
    say("gr_comm_synchronize", GR_ERR_STATE, "probe");
    int done = 0;
    gr_request *cq = q;
    CALL(gr_test, "parent-request", &cq, &done);
    cq = q;
    CALL(gr_wait, "parent-request", &cq);
    CALL(gr_mem_free, "parent-allocation", w, p);
    CALL(gr_mem_deregister, "parent-handle", w, h);
    CALL(gr_group_end, "parent-queued-call");
    every_comm_call("parent-comm", w, buf, big);
    CALL(gr_comm_abort, "parent-comm", w);
    CALL(gr_comm_destroy, "parent-comm", w);
    CALL(gr_finalize, "init-in-parent");
    fflush(stdout);
    _exit(0);
  }
  if (pid > 0) {
    int ws = 0;
    while (waitpid(pid, &ws, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
      printf("# fork-child: FAILED: the child ended with status %d\n", ws);
  }
  CALL(gr_group_end, "after-fork");
  if (q) CALL(gr_wait, "after-fork", &q);
  CALL(gr_mem_deregister, "after-fork", w, h);
  CALL(gr_mem_free, "after-fork", w, p);
  free(buf);
  free(big);
}

/* ---- runtime --------------------------------------------------------------------------------- */

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  gr_rank_info_t info;
  gr_stream s = NULL;
  forbidden_len = (size_t)3 * 2 * ((size_t)INT_MAX + 1) + 4096;
  forbidden =
      mmap(NULL, forbidden_len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (forbidden == MAP_FAILED) forbidden = NULL;

  /* before gr_init (and before MPI_Init: the runtime would initialise it itself) */
  CALL(gr_finalize, "before-init");
  CALL(gr_rank_info, "before-init", &info);
  CALL(gr_rank_info, "out-null", NULL);
  CALL(gr_stream_create, "before-init", &s);
  CALL(gr_stream_create, "out-null", NULL);
  CALL(gr_stream_destroy, "null", NULL);
  {
    gr_comm *c = NULL;
    gr_dpool *dp = NULL;
    CALL(gr_comm_create, "before-mpi-init", MPI_COMM_WORLD, NULL, &c);
    CALL(gr_dpool_create, "before-mpi-init", MPI_COMM_WORLD, NULL, NULL, &dp);
  }
  pool_calls();

  if (CALL(gr_init, "ok", &argc, &argv) != GR_OK) {
    fprintf(stderr, "status_calls: gr_init: %s\n", gr_last_error());
    return 1;
  }
  gr_comm *w = gr_world();
  rank = gr_comm_rank(w);
  size = gr_comm_size(w);
  CALL(gr_init, "twice", &argc, &argv);
  CALL(gr_init, "twice-null-args", NULL, NULL);
  CALL(gr_rank_info, "ok", &info);
  if (CALL(gr_stream_create, "ok", &s) == GR_OK) CALL(gr_stream_destroy, "ok", s);

  comm_calls(w);
  coll_calls(w);
  dpool_calls();
  fork_calls(w);

  gr_comm *late = NULL;
  gr_comm_create(MPI_COMM_WORLD, NULL, &late);
  CALL(gr_finalize, "ok");
  CALL(gr_finalize, "twice");
  CALL(gr_init, "after-finalize", &argc, &argv);
  CALL(gr_rank_info, "after-finalize", &info);
  CALL(gr_stream_create, "after-finalize", &s);
  {
    gr_comm *c = NULL;
    gr_dpool *dp = NULL;
    CALL(gr_comm_create, "after-mpi-finalize", MPI_COMM_WORLD, NULL, &c);
    CALL(gr_dpool_create, "after-mpi-finalize", MPI_COMM_WORLD, NULL, NULL, &dp);
  }
  if (late) CALL(gr_comm_destroy, "after-mpi-finalize", late);
  pool_calls();
  printf("# rank %d: %d calls\n", rank, ncalls);
  return 0;
}
