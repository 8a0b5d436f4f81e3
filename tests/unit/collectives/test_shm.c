/* The shared-memory collectives (gr_shm.h: the protocol in shm_coll.c, its algorithms in
 * shm_slots.c and shm_single.c, the choice among them in shm_policy.c) without MPI: ranks are
 * forked processes (as in production: one memfd segment, mapped by each) or threads of one process
 * (so that ThreadSanitizer sees every access of the protocol). Every result is checked element by
 * element against an expectation computed here in 64-bit arithmetic from the same inputs:
 * allreduce, reduce-scatter, allgather, broadcast and barrier, every dtype and op (AVG is the
 * caller's division of a SUM), in and out of place, odd counts, counts across round boundaries, 1-8
 * ranks; integer wrap-around and NaN in MIN/MAX; a stress run of random calls with random delays;
 * and a rank SIGKILLed in the middle of an allreduce, after which the others time out naming it;
 * and ranks that disagree on a call's kind, count, dtype, op or root, which must all fail with
 * GR_ERR_MISMATCH and then go on.
 *
 *   test_coll_shm              all of the above (cmocka)
 *   test_coll_shm threads N    only the thread runs, N rounds of stress (the TSan build's test) */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../mpi/collectives/exact_values.h"
#include "gr_dtype.h"
#include "gr_shm.h"
#include "gr_test_clock.h"

static int stress_rounds = 200;
/* Single copy by process_vm_readv (production's choice where the kernel allows it) or the
 * copy-in/copy-out fallback. */
static int use_cma = 1;

/* Post and progress one call until done or deadline (then forget, with the sentence in why). */
static gr_status run_op(gr__shm *s, gr__shm_op *call, double timeout_s, char *why, size_t len) {
  gr__shm_op *op = NULL;
  gr_status st = gr__shm_post(s, &op, call);
  if (st != GR_OK) return st;
  double deadline = gr_test_now() + timeout_s;
  for (unsigned spin = 0;; spin++) {
    int done = 0;
    st = gr__shm_test(s, op, &done);
    if (st != GR_OK || done) return st;
    if ((spin & 15) == 15 && gr_test_now() > deadline) {
      gr__shm_forget(s, op, why, len);
      return GR_ERR_TIMEOUT;
    }
  }
}

/* ---- values ---------------------------------------------------------------------------------- */

/* Input of rank r, element i, for op: small integers, so that every sum and product of up to 8
 * ranks is exact in fp16/bf16 (PROD: 1 or 2, products up to 256, which wraps int8/uint8). */
static int64_t input(gr_op op, int r, size_t i) {
  if (op == GR_PROD) return 1 + (int64_t)((i + (size_t)r) % 2);
  return (int64_t)((i * 7 + (size_t)r * 3) % 11) - (op == GR_MIN ? 5 : 0);
}

/* The value v takes in type t (unsigned types wrap negative inputs; int8 wraps 128..255). */
static double as_type(gr_dtype t, int64_t v) {
  switch (t) {
  case GR_INT8:
    return (int8_t)(uint8_t)(uint64_t)v;
  case GR_UINT8:
    return (uint8_t)(uint64_t)v;
  case GR_INT32:
    return (int32_t)(uint32_t)(uint64_t)v;
  case GR_UINT32:
    return (uint32_t)(uint64_t)v;
  case GR_UINT64:
    return (double)(uint64_t)v;
  default:
    return (double)v;
  }
}

/* Elements are written and read with the test-side codecs of the MPI tests (exact_values.h),
 * written independently of the library's conversions (collectives/dtype.c). Integers are stored
 * as the low bytes of their two's complement (x86 is little-endian), which wraps them into the
 * type as a cast would, without converting a negative or huge double to an unsigned type. */
static void put(gr_dtype t, void *buf, size_t i, int64_t v) {
  if (ev_is_float(t)) {
    ev_set(t, buf, i, (double)v);
    return;
  }
  uint64_t u = (uint64_t)v;
  memcpy((char *)buf + i * ev_size(t), &u, ev_size(t));
}
static double get(gr_dtype t, const void *buf, size_t i) { return ev_get(t, buf, i); }

/* The reduction over P ranks of element i: in 64-bit integers, wrapped once at the end (the same
 * as wrapping at every step, for SUM and PROD); MIN/MAX compare the values as the type holds them. */
static double expect(gr_dtype t, gr_op op, int P, size_t i) {
  int64_t acc = input(op, 0, i);
  double m = as_type(t, acc);
  for (int r = 1; r < P; r++) {
    int64_t v = input(op, r, i);
    double tv = as_type(t, v);
    if (op == GR_PROD)
      acc = (int64_t)((uint64_t)acc * (uint64_t)v);
    else if (op == GR_SUM)
      acc = (int64_t)((uint64_t)acc + (uint64_t)v);
    else if (op == GR_MIN)
      m = tv < m ? tv : m;
    else
      m = tv > m ? tv : m;
  }
  return op == GR_MIN || op == GR_MAX ? m : as_type(t, acc);
}

static const gr_dtype all_types[] = {GR_INT8,   GR_UINT8,   GR_INT32,    GR_UINT32,  GR_INT64,
                                     GR_UINT64, GR_FLOAT16, GR_BFLOAT16, GR_FLOAT32, GR_FLOAT64};
static const gr_op all_ops[] = {GR_SUM, GR_PROD, GR_MIN, GR_MAX};
/* odd, tiny, just over the small path (float32), more than one round of every kind */
static const size_t counts[] = {1, 3, 7, 1000, 2049, 70001};

#define FAIL(...)                                                                                  \
  do {                                                                                             \
    fprintf(stderr, "rank %d: ", r);                                                               \
    fprintf(stderr, __VA_ARGS__);                                                                  \
    fputc('\n', stderr);                                                                           \
    return 1;                                                                                      \
  } while (0)

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) abort();
  return p;
}

/* One call of kind on every rank; returns 0 when this rank's result is exact. */
static int one(gr__shm *s, int r, int P, int kind, gr_dtype t, gr_op op, size_t n, int inplace,
               int root) {
  size_t es = gr__dtype_size(t), N = (size_t)P * n;
  char why[256] = "";
  int bad = 0;
  gr__shm_op call = {.kind = kind, .count = n, .dtype = t, .op = op, .root = root};
  if (kind == GR__ALLREDUCE) {
    char *snd = xmalloc(n * es), *rcv = inplace ? snd : xmalloc(n * es);
    for (size_t i = 0; i < n; i++)
      put(t, snd, i, input(op, r, i));
    if (!inplace) memset(rcv, 0x5a, n * es);
    call.send = snd, call.recv = rcv;
    if (run_op(s, &call, 60, why, sizeof why) != GR_OK) FAIL("allreduce timed out: %s", why);
    for (size_t i = 0; i < n && !bad; i++)
      if (get(t, rcv, i) != expect(t, op, P, i)) {
        fprintf(stderr, "rank %d: allreduce %s %s n=%zu %s: [%zu] = %g, expected %g\n", r,
                gr__dtype_name(t), gr__op_name(op), n, inplace ? "in place" : "", i, get(t, rcv, i),
                expect(t, op, P, i));
        bad = 1;
      }
    for (size_t i = 0; i < n && !inplace && !bad; i++)
      if (get(t, snd, i) != as_type(t, input(op, r, i)))
        bad = fprintf(stderr, "rank %d: send changed\n", r);
    if (!inplace) free(rcv);
    free(snd);
  } else if (kind == GR__REDUCE_SCATTER) {
    /* block b, element i: input(op, r, b * n + i); rank r gets the reduction of block r */
    char *snd = xmalloc(N * es), *rcv = inplace ? snd + (size_t)r * n * es : xmalloc(n * es);
    for (size_t i = 0; i < N; i++)
      put(t, snd, i, input(op, r, i));
    call.send = snd, call.recv = rcv;
    if (run_op(s, &call, 60, why, sizeof why) != GR_OK) FAIL("reduce_scatter timed out: %s", why);
    for (size_t i = 0; i < n && !bad; i++)
      if (get(t, rcv, i) != expect(t, op, P, (size_t)r * n + i)) {
        fprintf(stderr, "rank %d: reduce_scatter %s %s n=%zu %s: [%zu] = %g, expected %g\n", r,
                gr__dtype_name(t), gr__op_name(op), n, inplace ? "in place" : "", i, get(t, rcv, i),
                expect(t, op, P, (size_t)r * n + i));
        bad = 1;
      }
    if (!inplace) free(rcv);
    free(snd);
  } else if (kind == GR__ALLGATHER) {
    char *rcv = xmalloc(N * es), *snd = inplace ? rcv + (size_t)r * n * es : xmalloc(n * es);
    memset(rcv, 0x5a, N * es);
    for (size_t i = 0; i < n; i++)
      put(t, snd, i, input(GR_SUM, r, i));
    call.send = snd, call.recv = rcv;
    if (run_op(s, &call, 60, why, sizeof why) != GR_OK) FAIL("allgather timed out: %s", why);
    for (int q = 0; q < P && !bad; q++)
      for (size_t i = 0; i < n && !bad; i++)
        if (get(t, rcv, (size_t)q * n + i) != as_type(t, input(GR_SUM, q, i))) {
          fprintf(stderr, "rank %d: allgather %s n=%zu %s: block %d [%zu] wrong\n", r,
                  gr__dtype_name(t), n, inplace ? "in place" : "", q, i);
          bad = 1;
        }
    if (!inplace) free(snd);
    free(rcv);
  } else if (kind == GR__BROADCAST) {
    char *snd = xmalloc(n * es), *rcv = inplace ? snd : xmalloc(n * es);
    memset(snd, 0x5a, n * es);
    if (r == root)
      for (size_t i = 0; i < n; i++)
        put(t, snd, i, input(GR_SUM, root, i));
    if (!inplace) memset(rcv, 0x5a, n * es);
    call.send = r == root ? snd : NULL, call.recv = rcv;
    if (run_op(s, &call, 60, why, sizeof why) != GR_OK) FAIL("broadcast timed out: %s", why);
    for (size_t i = 0; i < n && !bad; i++)
      if (get(t, rcv, i) != as_type(t, input(GR_SUM, root, i))) {
        fprintf(stderr, "rank %d: broadcast %s n=%zu root %d %s: [%zu] wrong\n", r,
                gr__dtype_name(t), n, root, inplace ? "in place" : "", i);
        bad = 1;
      }
    if (!inplace) free(rcv);
    free(snd);
  } else if (kind == GR__REDUCE) { /* only the root's recv is written */
    char *snd = xmalloc(n * es), *rcv = inplace && r == root ? snd : xmalloc(n * es);
    for (size_t i = 0; i < n; i++)
      put(t, snd, i, input(op, r, i));
    if (rcv != snd) memset(rcv, 0x5a, n * es);
    call.send = snd, call.recv = rcv;
    if (run_op(s, &call, 60, why, sizeof why) != GR_OK) FAIL("reduce timed out: %s", why);
    for (size_t i = 0; i < n && !bad; i++) {
      int ok = r == root ? get(t, rcv, i) == expect(t, op, P, i)
                         : ((unsigned char *)rcv)[i * es] == 0x5a;
      if (!ok) {
        fprintf(stderr, "rank %d: reduce %s %s n=%zu root %d %s: [%zu] = %g\n", r,
                gr__dtype_name(t), gr__op_name(op), n, root, inplace ? "in place" : "", i,
                get(t, rcv, i));
        bad = 1;
      }
    }
    if (rcv != snd) free(rcv);
    free(snd);
  } else if (kind == GR__ALLTOALL) { /* block q of rank r's send: input(SUM, r, q * n + i) */
    char *snd = xmalloc(N * es), *rcv = inplace ? snd : xmalloc(N * es);
    for (size_t i = 0; i < N; i++)
      put(t, snd, i, input(GR_SUM, r, i));
    if (!inplace) memset(rcv, 0x5a, N * es);
    call.send = snd, call.recv = rcv;
    if (run_op(s, &call, 60, why, sizeof why) != GR_OK) FAIL("alltoall timed out: %s", why);
    for (int q = 0; q < P && !bad; q++)
      for (size_t i = 0; i < n && !bad; i++)
        if (get(t, rcv, (size_t)q * n + i) != as_type(t, input(GR_SUM, q, (size_t)r * n + i))) {
          fprintf(stderr, "rank %d: alltoall %s n=%zu %s: block %d [%zu] wrong\n", r,
                  gr__dtype_name(t), n, inplace ? "in place" : "", q, i);
          bad = 1;
        }
    if (!inplace) free(rcv);
    free(snd);
  } else {
    gr_status bst = run_op(s, &call, 60, why, sizeof why);
    if (bst != GR_OK) FAIL("barrier failed (status %d): %s", (int)bst, why);
  }
  return bad;
}

/* The edge values: integer SUM that wraps past the type's range, NaN in MIN/MAX (float32, fp16). */
static int edges(gr__shm *s, int r, int P) {
  char why[256];
  int32_t a[3] = {INT32_MAX - r, INT32_MIN + r, 1 << 30}, ea[3];
  uint32_t acc[3] = {0, 0, 0};
  for (int q = 0; q < P; q++) {
    acc[0] += (uint32_t)(INT32_MAX - q);
    acc[1] += (uint32_t)(INT32_MIN + q);
    acc[2] += 1u << 30;
  }
  for (int i = 0; i < 3; i++)
    ea[i] = (int32_t)acc[i];
  gr__shm_op call = {
      .kind = GR__ALLREDUCE, .send = a, .recv = a, .count = 3, .dtype = GR_INT32, .op = GR_SUM};
  if (run_op(s, &call, 60, why, sizeof why) != GR_OK) FAIL("int32 sum timed out: %s", why);
  if (memcmp(a, ea, sizeof a) != 0) FAIL("int32 sum did not wrap: %d %d %d", a[0], a[1], a[2]);
  for (int op = GR_MIN; op <= GR_MAX; op++) {
    float f[4] = {1.0f + (float)r, -1.0f - (float)r, 0, 0};
    uint16_t h[4] = {gr__f32_to_f16((float)r), gr__f32_to_f16((float)-r), 0, 0};
    if (r == P - 1) f[0] = NAN, h[0] = 0x7e00; /* the last rank: NaN must still win */
    if (r == 0) f[1] = NAN, h[1] = 0x7e00;     /* the first rank */
    gr__shm_op cf = {.kind = GR__ALLREDUCE,
                     .send = f,
                     .recv = f,
                     .count = 4,
                     .dtype = GR_FLOAT32,
                     .op = (gr_op)op};
    gr__shm_op ch = {.kind = GR__ALLREDUCE,
                     .send = h,
                     .recv = h,
                     .count = 4,
                     .dtype = GR_FLOAT16,
                     .op = (gr_op)op};
    if (run_op(s, &cf, 60, why, sizeof why) != GR_OK ||
        run_op(s, &ch, 60, why, sizeof why) != GR_OK)
      FAIL("NaN %s timed out: %s", gr__op_name((gr_op)op), why);
    if (!isnan(f[0]) || !isnan(f[1]) || f[2] != 0)
      FAIL("float32 %s: NaN did not win (%g %g)", gr__op_name((gr_op)op), f[0], f[1]);
    if (!isnan(gr__f16_to_f32(h[0])) || !isnan(gr__f16_to_f32(h[1])))
      FAIL("float16 %s: NaN did not win", gr__op_name((gr_op)op));
  }
  return 0;
}

/* Every kind, dtype, op, count, in/out of place. */
static int battery(gr__shm *s, int r, int P, int quick) {
  int bad = edges(s, r, P);
  for (size_t ci = 0; ci < sizeof counts / sizeof *counts; ci++) {
    size_t n = counts[ci];
    for (size_t ti = 0; ti < sizeof all_types / sizeof *all_types; ti++) {
      gr_dtype t = all_types[ti];
      if (quick && ti % 3 != 0 && n > 2049) continue;
      for (int inplace = 0; inplace < 2; inplace++) {
        for (size_t oi = 0; oi < 4; oi++) {
          if (t == GR_FLOAT16 && all_ops[oi] == GR_PROD && n > 2049)
            continue; /* slow, like n=1000 */
          bad |= one(s, r, P, GR__ALLREDUCE, t, all_ops[oi], n, inplace, -1);
          bad |= one(s, r, P, GR__REDUCE_SCATTER, t, all_ops[oi], n, inplace, -1);
          /* reduce runs here up to 8 KiB (128 KiB at 2 ranks), alltoall up to 4 KiB per rank;
           * (SUM and MAX: PROD and MIN add nothing the allreduce above does not check) */
          if (n * gr__dtype_size(t) <= (P == 2 ? 131072u : 8192u) && (oi == 0 || oi == 3) &&
              (!quick || ti % 3 == 0))
            bad |= one(s, r, P, GR__REDUCE, t, all_ops[oi], n, inplace, (int)(ci + oi) % P);
        }
        if ((size_t)P * n * gr__dtype_size(t) <= 4096u)
          bad |= one(s, r, P, GR__ALLTOALL, t, GR_SUM, n, inplace, -1);
        bad |= one(s, r, P, GR__ALLGATHER, t, GR_SUM, n, inplace, -1);
        bad |= one(s, r, P, GR__BROADCAST, t, GR_SUM, n, inplace, (int)(ci + ti) % P);
        bad |= one(s, r, P, GR__BARRIER, t, GR_SUM, 0, 0, -1);
        if (bad) return bad;
      }
    }
  }
  /* a single-copy allreduce is pipelined in chunks of 64 KiB per rank: cross several, with a
   * ragged last one, at every rank count */
  for (int inplace = 0; inplace < 2 && !bad; inplace++) {
    bad |= one(s, r, P, GR__ALLREDUCE, GR_INT32, GR_SUM, (size_t)P * 16384 * 3 + 5, inplace, -1);
    bad |= one(s, r, P, GR__ALLREDUCE, GR_FLOAT64, GR_MAX, (size_t)P * 8192 * 2 + 1, inplace, -1);
  }
  return bad;
}

/* Random calls (the same sequence on every rank: one seed), each rank with its own random delays,
 * so that the ranks drift against each other by up to the protocol's slack. */
static int stress(gr__shm *s, int r, int P, int rounds) {
  unsigned seed = 12345, mine = 777u + (unsigned)r;
  int bad = 0;
  for (int i = 0; i < rounds && !bad; i++) {
    seed = seed * 1103515245u + 12345u;
    int kind = (int)((seed >> 16) % 5);
    static const int kinds[5] = {GR__ALLREDUCE, GR__REDUCE_SCATTER, GR__ALLGATHER, GR__BROADCAST,
                                 GR__BARRIER};
    size_t n = (size_t)((seed >> 8) % 3 == 0 ? (seed >> 4) % 70000 : (seed >> 4) % 300);
    gr_dtype t = all_types[(seed >> 20) % 10];
    mine = mine * 1103515245u + 12345u;
    if ((mine >> 16) % 4 == 0) sched_yield();
    if ((mine >> 16) % 16 == 1) usleep((mine >> 8) % 200);
    bad = one(s, r, P, kinds[kind], t, GR_SUM, n, (int)(seed >> 28) & 1,
              (int)((seed >> 12) % (unsigned)P));
  }
  return bad;
}

/* ---- ranks as processes and as threads ------------------------------------------------------- */

typedef int (*body_fn)(gr__shm *s, int r, int P, void *arg);

static int run_processes(int P, body_fn body, void *arg, int victim) {
  size_t bytes = gr__shm_bytes(P);
  int fd = gr__shm_memfd(bytes);
  assert_true(fd >= 0);
  void *base = gr__shm_map(fd, bytes);
  assert_non_null(base);
  gr__shm_format(base, P, 42);
  munmap(base, bytes);
  pid_t creator = getpid();
  pid_t kids[GR__SHM_MAX_RANKS];
  for (int r = 0; r < P; r++) {
    kids[r] = fork();
    assert_true(kids[r] >= 0);
    if (kids[r] == 0) { /* a rank: open the segment through /proc as production does */
      int pfd = gr__shm_open_peer(creator, fd);
      void *b = pfd >= 0 ? gr__shm_map(pfd, bytes) : NULL;
      if (!b || !gr__shm_valid(b, bytes, P, 42)) _exit(3);
      close(pfd);
      gr__shm *s = gr__shm_new(b, bytes, r, P);
      gr__shm_own_mapping(s);
      if (!gr__shm_set_cma(s, use_cma)) _exit(4);
      int rc = body(s, r, P, arg);
      gr__shm_free(s);
      _exit(rc ? 1 : 0);
    }
  }
  int failed = 0;
  for (int i = 0; i < P; i++) {
    int status = 0;
    pid_t w = waitpid(-1, &status, 0);
    int r = 0;
    while (r < P && kids[r] != w)
      r++;
    if (r == victim && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) continue;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fprintf(stderr, "rank %d of %d: %s %d\n", r, P, WIFEXITED(status) ? "exit" : "signal",
              WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
      failed++;
    }
  }
  close(fd); /* only now: the ranks open it through /proc whenever they get to run */
  return failed;
}

typedef struct {
  void *base;
  size_t bytes;
  int r, P, rc;
  body_fn body;
  void *arg;
} thread_rank;

static void *thread_main(void *p) {
  thread_rank *t = p;
  gr__shm *s = gr__shm_new(t->base, t->bytes, t->r, t->P);
  t->rc = s && gr__shm_set_cma(s, use_cma) ? t->body(s, t->r, t->P, t->arg) : 1;
  gr__shm_free(s);
  return NULL;
}

static int run_threads(int P, body_fn body, void *arg) {
  size_t bytes = gr__shm_bytes(P);
  void *base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  assert_true(base != MAP_FAILED);
  gr__shm_format(base, P, 7);
  thread_rank t[8];
  pthread_t th[8];
  for (int r = 0; r < P; r++) {
    t[r] = (thread_rank){base, bytes, r, P, 0, body, arg};
    assert_int_equal(pthread_create(&th[r], NULL, thread_main, &t[r]), 0);
  }
  int failed = 0;
  for (int r = 0; r < P; r++) {
    pthread_join(th[r], NULL);
    failed += t[r].rc != 0;
  }
  munmap(base, bytes);
  return failed;
}

static int body_battery(gr__shm *s, int r, int P, void *arg) {
  return battery(s, r, P, arg != NULL);
}
static int body_stress(gr__shm *s, int r, int P, void *arg) {
  (void)arg;
  return stress(s, r, P, stress_rounds);
}

/* Rank *victim SIGKILLs itself in the middle of a large allreduce (after its first raise); the
 * others must time out, naming it as gone. When the peers were quick enough for the victim's
 * first steps to finish the whole call (single copy under a slow sanitizer build), it dies right
 * after it, and the others' next call is the one that must time out. */
static int body_killed(gr__shm *s, int r, int P, void *arg) {
  int victim = *(int *)arg;
  size_t n = 1 << 20;
  float *x = xmalloc(n * sizeof *x);
  char why[256] = "";
  for (int it = 0; it < 3; it++) {
    for (size_t i = 0; i < n; i++)
      x[i] = 1;
    gr__shm_op call = {
        .kind = GR__ALLREDUCE, .send = x, .recv = x, .count = n, .dtype = GR_FLOAT32, .op = GR_SUM};
    if (run_op(s, &call, 60, why, sizeof why) != GR_OK || x[n - 1] != (float)P)
      FAIL("warm-up failed: %s", why);
  }
  gr__shm_op call = {
      .kind = GR__ALLREDUCE, .send = x, .recv = x, .count = n, .dtype = GR_FLOAT32, .op = GR_SUM};
  if (r == victim) {
    gr__shm_op *op;
    int done = 0;
    if (gr__shm_post(s, &op, &call) != GR_OK) return 1;
    /* 32 rounds: stop once it is inside (a round done or a raise made), long before the end */
    while (!done && op->pos == 0 && op->step < 2)
      gr__shm_test(s, op, &done);
    raise(SIGKILL);
  }
  gr_status st = run_op(s, &call, 1.5, why, sizeof why);
  if (st == GR_OK) { /* the victim finished this call before it died: the next one times out */
    for (size_t i = 0; i < n; i++)
      x[i] = 1;
    st = run_op(s, &call, 1.5, why, sizeof why);
  }
  char want[64];
  snprintf(want, sizeof want, "rank %d (process ", victim);
  if (st != GR_ERR_TIMEOUT)
    FAIL("expected a timeout, got status %d (errno %d)", (int)st, gr__shm_cma_errno(s));
  if (!strstr(why, want) || !strstr(why, "no longer exists"))
    FAIL("the timeout does not name rank %d as gone: %s", victim, why);
  if (r == (victim + 1) % P) fprintf(stderr, "rank %d timed out as it should: %s\n", r, why);
  /* the segment is unusable from now on, and says so */
  gr__shm_op *op2;
  if (gr__shm_post(s, &op2, &call) != GR_ERR_ABORTED) FAIL("post after the timeout was accepted");
  free(x);
  return 0;
}

/* ---- ranks that disagree on the call ----------------------------------------------------------- */

/* One rank (the odd one) calls b, the others a; every rank must fail with GR_ERR_MISMATCH, naming
 * both values, without hanging and without reading past a peer's buffer (each buffer is exactly
 * its own call's size, so ASan sees an over-read in the thread runs); then a checked allreduce
 * proves that the segment is still usable and the ranks still agree on its counters. Counts cover
 * the small, sliced and single-copy modes, and calls of several rounds. */
typedef struct {
  int kind;
  size_t n;
  gr_dtype t;
  gr_op op;
  int root;
  const char *text; /* what the sentence says of this side */
} mm_side;

static const struct {
  mm_side a, b;
} mm_cases[] = {
    {{GR__ALLREDUCE, 4, GR_INT32, GR_SUM, 0, "count=4"},
     {GR__ALLREDUCE, 8, GR_INT32, GR_SUM, 0, "count=8"}},
    {{GR__ALLREDUCE, 4, GR_INT32, GR_SUM, 0, "count=4"},
     {GR__ALLREDUCE, 70000, GR_INT32, GR_SUM, 0, "count=70000"}},
    /* the counter line's inline place against a slot, and inline against inline */
    {{GR__ALLREDUCE, 1, GR_INT32, GR_SUM, 0, "count=1"},
     {GR__ALLREDUCE, 4, GR_INT32, GR_SUM, 0, "count=4"}},
    {{GR__ALLREDUCE, 1, GR_FLOAT64, GR_SUM, 0, "float64"},
     {GR__ALLREDUCE, 1, GR_INT32, GR_SUM, 0, "int32"}},
    {{GR__ALLGATHER, 2, GR_INT32, GR_SUM, 0, "count=2"},
     {GR__ALLGATHER, 3, GR_INT32, GR_SUM, 0, "count=3"}},
    {{GR__BROADCAST, 2, GR_INT32, GR_SUM, 0, "count=2"},
     {GR__BROADCAST, 5, GR_INT32, GR_SUM, 0, "count=5"}},
    {{GR__ALLREDUCE, 40000, GR_FLOAT32, GR_SUM, 0, "float32"},
     {GR__ALLREDUCE, 40000, GR_INT32, GR_SUM, 0, "int32"}},
    {{GR__ALLREDUCE, 100, GR_FLOAT32, GR_SUM, 0, "op=sum"},
     {GR__ALLREDUCE, 100, GR_FLOAT32, GR_MAX, 0, "op=max"}},
    {{GR__ALLREDUCE, 100, GR_FLOAT32, GR_SUM, 0, "op=sum"},
     {GR__ALLREDUCE, 100, GR_FLOAT32, GR_AVG, 0, "op=avg"}},
    {{GR__REDUCE_SCATTER, 4, GR_INT32, GR_SUM, 0, "count=4"},
     {GR__REDUCE_SCATTER, 8, GR_INT32, GR_SUM, 0, "count=8"}},
    {{GR__REDUCE_SCATTER, 5000, GR_INT32, GR_SUM, 0, "count=5000"},
     {GR__REDUCE_SCATTER, 90000, GR_INT32, GR_SUM, 0, "count=90000"}},
    {{GR__REDUCE_SCATTER, 64, GR_INT64, GR_SUM, 0, "int64"},
     {GR__REDUCE_SCATTER, 64, GR_INT32, GR_SUM, 0, "int32"}},
    {{GR__REDUCE_SCATTER, 64, GR_INT32, GR_SUM, 0, "op=sum"},
     {GR__REDUCE_SCATTER, 64, GR_INT32, GR_MIN, 0, "op=min"}},
    {{GR__ALLGATHER, 4, GR_INT32, GR_SUM, 0, "count=4"},
     {GR__ALLGATHER, 8, GR_INT32, GR_SUM, 0, "count=8"}},
    {{GR__ALLGATHER, 9000, GR_INT32, GR_SUM, 0, "count=9000"},
     {GR__ALLGATHER, 80000, GR_INT32, GR_SUM, 0, "count=80000"}},
    {{GR__ALLGATHER, 33, GR_FLOAT16, GR_SUM, 0, "float16"},
     {GR__ALLGATHER, 33, GR_UINT8, GR_SUM, 0, "uint8"}},
    {{GR__BROADCAST, 16, GR_INT32, GR_SUM, 0, "count=16"},
     {GR__BROADCAST, 20, GR_INT32, GR_SUM, 0, "count=20"}},
    {{GR__BROADCAST, 50000, GR_INT32, GR_SUM, 0, "count=50000"},
     {GR__BROADCAST, 50001, GR_INT32, GR_SUM, 0, "count=50001"}},
    {{GR__BROADCAST, 16, GR_INT32, GR_SUM, 0, "root=0"},
     {GR__BROADCAST, 16, GR_INT32, GR_SUM, 1, "root=1"}},
    {{GR__BROADCAST, 16, GR_INT32, GR_SUM, 1, "root=1"},
     {GR__BROADCAST, 16, GR_INT32, GR_SUM, 0, "root=0"}},
    {{GR__BROADCAST, 16, GR_INT32, GR_SUM, 0, "int32"},
     {GR__BROADCAST, 16, GR_FLOAT64, GR_SUM, 0, "float64"}},
    {{GR__BARRIER, 0, GR_INT32, GR_SUM, 0, "barrier("},
     {GR__ALLREDUCE, 4, GR_INT32, GR_SUM, 0, "allreduce("}},
    {{GR__ALLGATHER, 4, GR_INT32, GR_SUM, 0, "allgather("},
     {GR__BROADCAST, 4, GR_INT32, GR_SUM, 0, "broadcast("}},
    {{GR__REDUCE_SCATTER, 4, GR_INT32, GR_SUM, 0, "reduce_scatter("},
     {GR__ALLREDUCE, 4, GR_INT32, GR_SUM, 0, "allreduce("}},
    /* kinds that only agree here (their algorithm runs in MPI): against each other and the rest */
    {{GR__ALLREDUCE, 40000, GR_FLOAT32, GR_SUM, 0, "allreduce("},
     {GR__ALLTOALL, 40000, GR_FLOAT32, GR_SUM, 0, "alltoall("}},
    {{GR__REDUCE, 4, GR_INT32, GR_SUM, 0, "reduce("},
     {GR__ALLGATHER, 4, GR_INT32, GR_SUM, 0, "allgather("}},
    {{GR__REDUCE, 4, GR_INT32, GR_SUM, 0, "root=0"},
     {GR__REDUCE, 4, GR_INT32, GR_SUM, 1, "root=1"}},
    {{GR__REDUCE, 4, GR_INT32, GR_SUM, 0, "op=sum"},
     {GR__REDUCE, 4, GR_INT32, GR_MAX, 0, "op=max"}},
    {{GR__ALLTOALL, 4, GR_INT32, GR_SUM, 0, "alltoall("},
     {GR__REDUCE, 4, GR_INT32, GR_SUM, 0, "reduce("}},
    {{GR__ALLTOALL, 4, GR_INT32, GR_SUM, 0, "count=4"},
     {GR__ALLTOALL, 5, GR_INT32, GR_SUM, 0, "count=5"}},
};

static int body_mismatch(gr__shm *s, int r, int P, void *arg) {
  (void)arg;
  for (size_t c = 0; c < sizeof mm_cases / sizeof *mm_cases; c++) {
    int odd = (int)(c % (size_t)P);
    const mm_side *me = r == odd ? &mm_cases[c].b : &mm_cases[c].a;
    size_t es = gr__dtype_size(me->t), sn = me->n, rn = me->n;
    if (me->kind == GR__REDUCE_SCATTER) sn *= (size_t)P;
    if (me->kind == GR__ALLGATHER) rn *= (size_t)P;
    if (me->kind == GR__ALLTOALL) sn *= (size_t)P, rn *= (size_t)P;
    char *snd = xmalloc(sn * es), *rcv = xmalloc(rn * es);
    memset(snd, 1, sn * es);
    memset(rcv, 0x5a, rn * es);
    char why[256] = "";
    gr__shm_op call = {.kind = me->kind,
                       .send = snd,
                       .recv = rcv,
                       .count = me->n,
                       .dtype = me->t,
                       .op = me->op,
                       .root = me->root};
    gr_status st = run_op(s, &call, 30, why, sizeof why);
    free(snd);
    free(rcv);
    if (st != GR_ERR_MISMATCH)
      FAIL("case %zu: expected GR_ERR_MISMATCH, got status %d (%s)", c, (int)st, why);
    const char *e = gr__shm_why(s);
    const char *ta = mm_cases[c].a.text, *tb = mm_cases[c].b.text;
    char other[32], self[32]; /* the odd rank names whichever other rank it looked at first */
    snprintf(other, sizeof other, "rank %d called", r == odd ? -1 : odd);
    snprintf(self, sizeof self, "while rank %d called", r);
    if (!strstr(e, ta) || !strstr(e, tb) || !strstr(e, self) || (r != odd && !strstr(e, other)))
      FAIL("case %zu: the sentence lacks '%s', '%s', '%s' or '%s': %s", c, ta, tb, self, other, e);
    if (c == 0 && r == 0) fprintf(stderr, "rank 0 of %d: %s\n", P, e);
    /* still usable, counters in step */
    int32_t v[3] = {r + 1, 2 * r, -r}, want = P * (P + 1) / 2;
    gr__shm_op ok = {
        .kind = GR__ALLREDUCE, .send = v, .recv = v, .count = 3, .dtype = GR_INT32, .op = GR_SUM};
    st = run_op(s, &ok, 30, why, sizeof why);
    if (st != GR_OK || v[0] != want || v[1] != 2 * (want - P) || v[2] != -(want - P))
      FAIL("case %zu: allreduce afterwards: status %d, %d %d %d (%s)", c, (int)st, v[0], v[1], v[2],
           why);
  }
  return 0;
}

static void mismatch_processes(void **state) {
  (void)state;
  for (use_cma = 1; use_cma >= 0; use_cma--)
    for (int P = 2; P <= 3; P++)
      assert_int_equal(run_processes(P, body_mismatch, NULL, -1), 0);
  use_cma = 1;
}

static void mismatch_threads(void **state) {
  (void)state;
  for (use_cma = 1; use_cma >= 0; use_cma--)
    for (int P = 2; P <= 4; P++)
      assert_int_equal(run_threads(P, body_mismatch, NULL), 0);
  use_cma = 1;
}

static void exact_processes(void **state) {
  (void)state;
  static const int sizes[] = {1, 2, 3, 5, 8};
  for (use_cma = 1; use_cma >= 0; use_cma--)
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
      if (use_cma || sizes[i] == 2 || sizes[i] == 3)
        assert_int_equal(run_processes(sizes[i], body_battery, sizes[i] > 3 ? (void *)1 : NULL, -1),
                         0);
  use_cma = 1;
}

static void exact_threads(void **state) {
  (void)state;
  for (int P = 2; P <= 4; P++) {
    use_cma = P != 3;
    assert_int_equal(run_threads(P, body_battery, (void *)1), 0);
  }
  use_cma = 1;
}

static void stress_processes(void **state) {
  (void)state;
  assert_int_equal(run_processes(3, body_stress, NULL, -1), 0);
  use_cma = 0;
  assert_int_equal(run_processes(4, body_stress, NULL, -1), 0);
  use_cma = 1;
}

static void stress_threads(void **state) {
  (void)state;
  for (use_cma = 0; use_cma <= 1; use_cma++)
    assert_int_equal(run_threads(3, body_stress, NULL), 0);
  use_cma = 1;
}

static void killed_rank(void **state) {
  (void)state;
  int victim = 1;
  for (use_cma = 1; use_cma >= 0; use_cma--) {
    assert_int_equal(run_processes(3, body_killed, &victim, victim), 0);
    victim = 0;
    assert_int_equal(run_processes(2, body_killed, &victim, victim), 0);
  }
  use_cma = 1;
}

static void bad_segments(void **state) {
  (void)state;
  size_t bytes = gr__shm_bytes(2);
  void *base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  assert_true(base != MAP_FAILED);
  assert_false(gr__shm_valid(base, bytes, 2, 9)); /* zero page: no header */
  gr__shm_format(base, 2, 9);
  assert_true(gr__shm_valid(base, bytes, 2, 9));
  assert_false(gr__shm_valid(base, bytes, 2, 10)); /* another communicator's nonce */
  assert_false(gr__shm_valid(base, bytes, 3, 9));  /* another size */
  assert_false(gr__shm_valid(base, bytes - 4096, 2, 9));
  munmap(base, bytes);
  int fd = gr__shm_memfd(4096);
  assert_true(fd >= 0);
  errno = 0;
  assert_null(gr__shm_map(fd, 8192)); /* a file shorter than the segment is refused (SIGBUS) */
  assert_int_equal(errno, EINVAL);
  close(fd);
  assert_int_equal(gr__shm_open_peer(getpid(), 999999), -1);
  assert_int_equal(gr__shm_open_peer(0, 3), -1);
  assert_null(gr__shm_new(NULL, 0, 2, 2)); /* rank out of range */
  /* the single-copy probe: two ranks in this process read each other's header */
  base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  assert_true(base != MAP_FAILED);
  gr__shm_format(base, 2, 9);
  gr__shm *a = gr__shm_new(base, bytes, 0, 2), *b = gr__shm_new(base, bytes, 1, 2);
  assert_true(gr__shm_cma_probe(a) && gr__shm_cma_probe(b));
  gr__shm_free(a);
  gr__shm_free(b);
  munmap(base, bytes);
}

int main(int argc, char **argv) {
  if (argc >= 2 && strcmp(argv[1], "threads") == 0) {
    if (argc >= 3) stress_rounds = atoi(argv[2]);
    const struct CMUnitTest t[] = {cmocka_unit_test(exact_threads),
                                   cmocka_unit_test(stress_threads),
                                   cmocka_unit_test(mismatch_threads)};
    return cmocka_run_group_tests(t, NULL, NULL);
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(bad_segments),       cmocka_unit_test(exact_processes),
      cmocka_unit_test(exact_threads),      cmocka_unit_test(stress_processes),
      cmocka_unit_test(stress_threads),     cmocka_unit_test(killed_rank),
      cmocka_unit_test(mismatch_processes), cmocka_unit_test(mismatch_threads),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
