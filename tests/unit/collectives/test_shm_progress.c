/* The shared-memory path's progress engine (shm_progress.c) without MPI: ranks are threads of one
 * process on one segment (so that ThreadSanitizer sees every access of the engine, the segment
 * locks and the protocol), each registered with the engine as a request's post registers it.
 *   untested  every rank posts a few calls and never tests them: it only looks whether they
 *             settled (gr__shm_settled) and sleeps in between. The engine alone must finish them,
 *             within a generous bound (its thread runs at SCHED_IDLE).
 *   mixed     every rank posts many calls of random kinds and sizes (single-copy allreduces of
 *             many chunks among them) with random compute between the posts, then finishes them in
 *             an order of its own: by bounded tests alone (gr__shm_test_some, compute between),
 *             by the blocking test, or a few bounded tests and then the blocking one; ranks join
 *             and leave the engine at different times.
 * Every result is compared element by element with the answer computed here.
 *   test_coll_shm_progress [ROUNDS] */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gr_coll.h"
#include "gr_shm.h"
#include "gr_test_clock.h"

static uint64_t next(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

enum { SUM_F32, MIN_F64, BCAST_F32, GATHER_I32, NKINDS };
static const size_t counts[] = {1, 5, 2049, 4096, 20000, 70001, 300000};
#define NOPS 10
#define MAXP 4

typedef struct {
  int kind, root, how;
  size_t count;
  void *send, *recv;
  gr__shm_op *op;
} call;

static double input(int r, size_t i) { return (double)((i * 5 + (size_t)r * 11) % 97); }

static void fill(call *c, int r, int P) {
  size_t es = c->kind == MIN_F64 ? 8 : 4,
         rn = c->kind == GATHER_I32 ? c->count * (size_t)P : c->count;
  c->send = malloc(c->count * es);
  c->recv = malloc(rn * es);
  if (!c->send || !c->recv) abort();
  memset(c->recv, 0x5a, rn * es);
  for (size_t i = 0; i < c->count; i++) {
    double v = input(r, i);
    if (c->kind == MIN_F64)
      ((double *)c->send)[i] = v - 48.5;
    else if (c->kind == GATHER_I32)
      ((int32_t *)c->send)[i] = (int32_t)v - 40;
    else
      ((float *)c->send)[i] = (float)v;
  }
}

static gr__shm_op describe(const call *c) {
  gr__shm_op o = {.send = c->send, .recv = c->recv, .count = c->count, .root = c->root};
  switch (c->kind) {
  case SUM_F32:
    o.kind = GR__ALLREDUCE, o.dtype = GR_FLOAT32, o.op = GR_SUM;
    break;
  case MIN_F64:
    o.kind = GR__ALLREDUCE, o.dtype = GR_FLOAT64, o.op = GR_MIN;
    break;
  case BCAST_F32:
    o.kind = GR__BROADCAST, o.dtype = GR_FLOAT32;
    break;
  default:
    o.kind = GR__ALLGATHER, o.dtype = GR_INT32;
    break;
  }
  return o;
}

static int check(const call *c, int r, int P) {
  for (size_t i = 0; i < c->count; i++) {
    double want = 0, got = 0;
    if (c->kind == SUM_F32) {
      for (int q = 0; q < P; q++)
        want += input(q, i);
      got = ((const float *)c->recv)[i];
    } else if (c->kind == MIN_F64) {
      for (int q = 0; q < P; q++)
        want = q == 0 || input(q, i) - 48.5 < want ? input(q, i) - 48.5 : want;
      got = ((const double *)c->recv)[i];
    } else if (c->kind == BCAST_F32) {
      want = input(c->root, i);
      got = ((const float *)c->recv)[i];
    } else {
      for (int q = 0; q < P && got == want; q++) {
        want = input(q, i) - 40;
        got = ((const int32_t *)c->recv)[(size_t)q * c->count + i];
      }
    }
    if (got != want) {
      fprintf(stderr, "rank %d of %d: kind %d count %zu: [%zu] = %.17g, expected %.17g\n", r, P,
              c->kind, c->count, i, got, want);
      return 1;
    }
  }
  return 0;
}

typedef struct {
  void *base;
  size_t bytes;
  int r, P, rounds, rc;
  const char *mode;
  pthread_barrier_t *bar;
} rank_arg;

static int untested(gr__shm *s, int r, int P) {
  call c[3];
  for (int i = 0; i < 3; i++) {
    c[i] = (call){.kind = i == 2 ? BCAST_F32 : SUM_F32, .root = i % P, .count = i ? 300000 : 7};
    fill(&c[i], r, P);
    gr__shm_op o = describe(&c[i]);
    if (gr__shm_post(s, &c[i].op, &o) != GR_OK) return 1;
    if (gr__shm_engine_add(s) != GR_OK) return 1;
  }
  int bad = 0;
  for (int i = 0; i < 3; i++) {
    int failed = 0;
    double end = gr_test_now() + 60;
    while (!gr__shm_settled(s, c[i].op, &failed) && gr_test_now() < end)
      usleep(1000);
    int done = 0;
    if (!gr__shm_settled(s, c[i].op, &failed)) {
      fprintf(stderr, "rank %d of %d: call %d never settled without a test\n", r, P, i);
      return 1;
    }
    if (gr__shm_test_some(s, c[i].op, &done) != GR_OK || !done) bad++; /* releases it */
    bad += check(&c[i], r, P);
    free(c[i].send), free(c[i].recv);
  }
  return bad;
}

static int mixed(gr__shm *s, int r, int P, int rounds) {
  uint64_t calls = 0x2545f4914f6cdd1dull, mine = 0x9e37ull * (uint64_t)(r + 1);
  int bad = 0;
  for (int round = 0; round < rounds && !bad; round++) {
    call c[NOPS];
    for (int i = 0; i < NOPS; i++) {
      c[i].kind = (int)(next(&calls) % NKINDS);
      c[i].count = counts[next(&calls) % (sizeof counts / sizeof *counts)];
      c[i].root = (int)(next(&calls) % (uint64_t)P);
      c[i].how = (int)(next(&mine) % 3);
      fill(&c[i], r, P);
    }
    for (int i = 0; i < NOPS; i++) {
      gr_test_spin((double)(next(&mine) % 400) * 1e-6);
      gr__shm_op o = describe(&c[i]);
      if (gr__shm_post(s, &c[i].op, &o) != GR_OK) return 1;
      if ((round + r) % 2 == 0 && gr__shm_engine_add(s) != GR_OK) return 1;
    }
    int order[NOPS];
    for (int i = 0; i < NOPS; i++)
      order[i] = i;
    for (int i = NOPS - 1; i > 0; i--) {
      int j = (int)(next(&mine) % (uint64_t)(i + 1)), t = order[i];
      order[i] = order[j], order[j] = t;
    }
    for (int k = 0; k < NOPS; k++) {
      call *q = &c[order[k]];
      int done = 0, tests = 0;
      gr_status st = GR_OK;
      double end = gr_test_now() + 60;
      while (!done && st == GR_OK && gr_test_now() < end) {
        if (q->how == 1 || (q->how == 2 && tests < 8)) {
          st = gr__shm_test_some(s, q->op, &done);
          if (!done) gr_test_spin((double)(next(&mine) % 100) * 1e-6);
        } else {
          st = gr__shm_test(s, q->op, &done);
        }
        tests++;
      }
      if (st != GR_OK || !done) {
        fprintf(stderr, "rank %d of %d: round %d call %d: status %d, done %d\n", r, P, round,
                order[k], (int)st, done);
        return 1;
      }
      bad += check(q, r, P);
    }
    for (int i = 0; i < NOPS; i++)
      free(c[i].send), free(c[i].recv);
  }
  return bad;
}

static void *rank_main(void *p) {
  rank_arg *a = p;
  gr__shm *s = gr__shm_new(a->base, a->bytes, a->r, a->P);
  pthread_barrier_wait(a->bar); /* every rank's view exists: the single-copy probe may look */
  a->rc = 1;
  if (s && gr__shm_set_cma(s, gr__shm_cma_probe(s)))
    a->rc = strcmp(a->mode, "untested") == 0 ? untested(s, a->r, a->P)
                                             : mixed(s, a->r, a->P, a->rounds);
  gr__shm_free(s);
  return NULL;
}

static int run(const char *mode, int P, int rounds) {
  size_t bytes = gr__shm_bytes(P);
  void *base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) return 1;
  gr__shm_format(base, P, 11);
  pthread_barrier_t bar;
  pthread_barrier_init(&bar, NULL, (unsigned)P);
  rank_arg a[MAXP];
  pthread_t th[MAXP];
  for (int r = 0; r < P; r++) {
    a[r] = (rank_arg){base, bytes, r, P, rounds, 0, mode, &bar};
    if (pthread_create(&th[r], NULL, rank_main, &a[r]) != 0) return 1;
  }
  int failed = 0;
  for (int r = 0; r < P; r++) {
    pthread_join(th[r], NULL);
    failed += a[r].rc != 0;
  }
  pthread_barrier_destroy(&bar);
  munmap(base, bytes);
  printf("%s %s at %d ranks\n", failed ? "FAIL" : "ok", mode, P);
  return failed;
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 6, failed = 0;
  if (rounds < 1) rounds = 1;
  for (int P = 2; P <= MAXP; P++) {
    failed += run("untested", P, rounds);
    failed += run("mixed", P, rounds);
  }
  return failed != 0;
}
