/* Requests on the node's shared-memory path that progress on their own (gr_shm.h, shm_progress.c).
 *
 *   test_coll_req_overlap stress [ROUNDS]
 *     Every round, every rank starts the same twelve requests (allreduce of float32, int32 and
 *     float64 with SUM, MIN or MAX, broadcast from a random root, allgather; counts from one
 *     element to past the single-copy threshold and across many chunks) with random compute
 *     between the starts, then finishes them in an order of its own: some by gr_test alone (with
 *     compute between the tests), some by gr_wait, a few by gr_test and then gr_wait. Every result
 *     is compared element by element with the answer computed here from the same inputs.
 *   test_coll_req_overlap VICTIM late
 *     (under shm_kill.sh, mpirun --enable-recovery) every rank starts a 64 MiB allreduce; VICTIM
 *     computes briefly without testing and is SIGKILLed; every other rank's gr_wait must return
 *     GR_ERR_TIMEOUT naming it as gone ("SURVIVOR OK"), the communicator then aborted. */
#include <gpurun/coll.h>
#include <mpi.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gr_test_clock.h"
#include "world_comm.h"

static int rank, size, failures;

/* A small generator the ranks seed alike (the calls) or apart (compute, order). */
static uint64_t next(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

enum { AR_F32_SUM, AR_I32_SUM, AR_F64_MIN, AR_F32_MAX, BCAST, GATHER, NKINDS };
static const size_t counts[] = {1, 7, 1000, 4099, 40000, 300001, 1u << 20};
#define NREQ 12

typedef struct {
  int kind, root;
  size_t count;
  void *send, *recv;
  gr_request *req;
  int how; /* 0 gr_wait, 1 gr_test alone, 2 gr_test a few times then gr_wait */
} one;

/* Input of rank r, element i: small integers, so that every sum is exact in float32. */
static double value(int kind, int r, size_t i) {
  double v = (double)((i * 7 + (size_t)r * 13) % 101);
  return kind == AR_F64_MIN ? v - 50.5 : v;
}

static size_t esize(int kind) {
  return kind == AR_I32_SUM ? 4 : kind == AR_F64_MIN ? 8 : kind == BCAST ? 8 : 4;
}

static void fill(one *o) {
  size_t n = o->count, es = esize(o->kind);
  size_t rn = o->kind == GATHER ? n * (size_t)size : n;
  o->send = malloc(n * es);
  o->recv = malloc(rn * es);
  if (!o->send || !o->recv) abort();
  memset(o->recv, 0xa5, rn * es);
  for (size_t i = 0; i < n; i++) {
    double v = value(o->kind, rank, i);
    if (o->kind == AR_I32_SUM)
      ((int32_t *)o->send)[i] = (int32_t)((uint32_t)v * 33554432u); /* wraps past 2 ranks */
    else if (o->kind == AR_F64_MIN || o->kind == BCAST)
      ((double *)o->send)[i] = o->kind == BCAST ? v + 0.25 * rank : v;
    else
      ((float *)o->send)[i] = (float)v;
  }
}

static gr_status start(one *o, gr_comm *c) {
  switch (o->kind) {
  case AR_F32_SUM:
    return gr_iallreduce(o->send, o->recv, o->count, GR_FLOAT32, GR_SUM, c, NULL, &o->req);
  case AR_I32_SUM:
    return gr_iallreduce(o->send, o->recv, o->count, GR_INT32, GR_SUM, c, NULL, &o->req);
  case AR_F64_MIN:
    return gr_iallreduce(o->send, o->recv, o->count, GR_FLOAT64, GR_MIN, c, NULL, &o->req);
  case AR_F32_MAX:
    return gr_iallreduce(o->send, o->recv, o->count, GR_FLOAT32, GR_MAX, c, NULL, &o->req);
  case BCAST:
    return gr_ibroadcast(o->send, o->recv, o->count, GR_FLOAT64, o->root, c, NULL, &o->req);
  default:
    return gr_iallgather(o->send, o->recv, o->count, GR_FLOAT32, c, NULL, &o->req);
  }
}

static void check(const one *o, int round, int at) {
  for (size_t i = 0; i < o->count; i++) {
    double want = 0, got = 0;
    switch (o->kind) {
    case AR_F32_SUM:
    case AR_F32_MAX:
      for (int r = 0; r < size; r++) {
        double v = value(o->kind, r, i);
        want = o->kind == AR_F32_MAX ? (r == 0 || v > want ? v : want) : want + v;
      }
      got = ((const float *)o->recv)[i];
      break;
    case AR_I32_SUM: {
      uint32_t w = 0;
      for (int r = 0; r < size; r++)
        w += (uint32_t)value(o->kind, r, i) * 33554432u;
      want = (int32_t)w;
      got = ((const int32_t *)o->recv)[i];
      break;
    }
    case AR_F64_MIN:
      for (int r = 0; r < size; r++) {
        double v = value(o->kind, r, i);
        want = r == 0 || v < want ? v : want;
      }
      got = ((const double *)o->recv)[i];
      break;
    case BCAST:
      want = value(o->kind, o->root, i) + 0.25 * o->root;
      got = ((const double *)o->recv)[i];
      break;
    default:
      for (int r = 0; r < size; r++) {
        want = value(o->kind, r, i);
        got = ((const float *)o->recv)[(size_t)r * o->count + i];
        if (got != want) break;
      }
      break;
    }
    if (got != want) {
      fprintf(stderr,
              "rank %d: round %d request %d (kind %d, count %zu): [%zu] = %.17g, expected %.17g\n",
              rank, round, at, o->kind, o->count, i, got, want);
      failures++;
      return;
    }
  }
}

static int stress(int rounds) {
  gr_comm *c = world_comm(NULL, 30, 0);
  if (!c) return 1;
  uint64_t calls = 0x9e3779b97f4a7c15ull, mine = 0x1234567ull + (uint64_t)rank * 0x51ed27ull;
  for (int round = 0; round < rounds && !failures; round++) {
    one o[NREQ];
    for (int i = 0; i < NREQ; i++) {
      o[i].kind = (int)(next(&calls) % NKINDS);
      o[i].count = counts[next(&calls) % (sizeof counts / sizeof *counts)];
      if (o[i].kind == GATHER && o[i].count > 300001) o[i].count = 300001;
      o[i].root = (int)(next(&calls) % (uint64_t)size);
      o[i].how = (int)(next(&mine) % 3);
      o[i].req = NULL;
      fill(&o[i]);
    }
    for (int i = 0; i < NREQ; i++) {
      gr_test_spin((double)(next(&mine) % 1500) * 1e-6);
      gr_status st = start(&o[i], c);
      if (st != GR_OK) {
        fprintf(stderr, "rank %d: round %d: start of request %d: %s\n", rank, round, i,
                gr_last_error());
        return 1;
      }
    }
    int order[NREQ];
    for (int i = 0; i < NREQ; i++)
      order[i] = i;
    for (int i = NREQ - 1; i > 0; i--) { /* this rank's order */
      int j = (int)(next(&mine) % (uint64_t)(i + 1)), t = order[i];
      order[i] = order[j], order[j] = t;
    }
    for (int k = 0; k < NREQ; k++) {
      one *q = &o[order[k]];
      gr_status st = GR_OK;
      int done = 0, tests = 0;
      if (q->how != 0)
        while (!done && st == GR_OK && (q->how == 1 || tests < 5)) {
          st = gr_test(&q->req, &done);
          tests++;
          if (!done) gr_test_spin((double)(next(&mine) % 300) * 1e-6);
        }
      if (!done && st == GR_OK) st = gr_wait(&q->req);
      if (st != GR_OK) {
        fprintf(stderr, "rank %d: round %d: request %d: %s\n", rank, round, order[k],
                gr_last_error());
        return 1;
      }
      if (q->req) {
        fprintf(stderr, "rank %d: a finished request was not cleared\n", rank);
        failures++;
      }
      check(q, round, order[k]);
    }
    for (int i = 0; i < NREQ; i++)
      free(o[i].send), free(o[i].recv);
  }
  int all = failures;
  MPI_Allreduce(MPI_IN_PLACE, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (gr_comm_destroy(c) != GR_OK) all++;
  if (rank == 0)
    printf("%s: %d rounds of %d requests at %d ranks\n", all ? "FAIL" : "PASS", rounds, NREQ, size);
  return all != 0;
}

static int late(int victim) {
  const double timeout_s = 3;
  gr_comm *c = world_comm(NULL, timeout_s, 0);
  if (!c) return 1;
  size_t n = 16u << 20; /* 64 MiB of float32 */
  float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
  if (!x || !y) return 1;
  for (size_t i = 0; i < n; i++)
    x[i] = (float)rank;
  gr_request *req = NULL;
  /* the path works, and warms every page */
  if (gr_iallreduce(x, y, n, GR_FLOAT32, GR_SUM, c, NULL, &req) != GR_OK ||
      gr_wait(&req) != GR_OK || y[n - 1] != (float)(size * (size - 1) / 2)) {
    fprintf(stderr, "rank %d: warm-up allreduce failed: %s\n", rank, gr_last_error());
    return 1;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (gr_iallreduce(x, y, n, GR_FLOAT32, GR_SUM, c, NULL, &req) != GR_OK) {
    fprintf(stderr, "rank %d: gr_iallreduce: %s\n", rank, gr_last_error());
    return 1;
  }
  if (rank == victim) { /* computes without testing, then dies */
    gr_test_spin(2000e-6);
    raise(SIGKILL);
  }
  double t0 = gr_test_now();
  gr_status st = gr_wait(&req);
  double dt = gr_test_now() - t0;
  const char *e = gr_last_error();
  char want[64];
  snprintf(want, sizeof want, "rank %d (process ", victim);
  int ok = st == GR_ERR_TIMEOUT && dt < timeout_s + 10 && strstr(e, want) &&
           strstr(e, "no longer exists") && strstr(e, "gr_iallreduce");
  fprintf(stderr, "rank %d: %s after %.1f s: %s\n", rank, ok ? "SURVIVOR OK" : "FAIL", dt, e);
  if (gr_allreduce(x, x, 1, GR_FLOAT32, GR_SUM, c, NULL) != GR_ERR_ABORTED) ok = 0;
  if (gr_comm_destroy(c) != GR_OK) ok = 0;
  free(x), free(y);
  return ok ? 0 : 1;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int rc;
  if (argc > 2 && strcmp(argv[2], "late") == 0)
    rc = late(atoi(argv[1]));
  else
    rc = stress(argc > 2 ? atoi(argv[2]) : 20);
  MPI_Finalize();
  return rc;
}
