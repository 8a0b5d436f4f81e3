/* "The library never answers wrong", one mode per run; every rank must reach the end
 * (a hang is the failure these cases guard against, and ctest's timeout catches it):
 *   create     gr_comm_create agrees on what decides an algorithm: the timeout set on some ranks
 *              only, check mode on some ranks only (cfg and GPURUN_CHECK spellings), one rank's
 *              invalid cfg, NCCL asked for on one rank of a build without it: the same status on
 *              every rank, at creation
 *   check      check mode covers groups (one rank's refused grouped call, different groups),
 *              gr_allreduce_multi (one rank's NULL buffer, different counts), roots out of range
 *              on one rank, gr_allgather(v, v, n) (in place on rank 0 only) and in-place forms
 *              that differ: the same status on every rank, and the communicator still works
 *   lifetime   gr_comm_destroy with a request or a grouped call outstanding is GR_ERR_STATE and
 *              destroys nothing; after completing them it works
 *   finalize   gr_finalize after the program's own MPI_Finalize returns GR_ERR_STATE with a
 *              sentence (the process must not abort)
 *   tags       20000 grouped allreduces and 16500 gr_iallreduce waited newest first give exact
 *              sums (tags do not wrap at 16384); with the tag slots capped at 8, the same with
 *              slots reused while in flight
 *   errors     with a timeout, a count mismatch in allgather/reduce_scatter returns an error
 *              (or times out) on every rank instead of killing the job
 * Options after the mode: --timeout (the communicators get a 60 s timeout: gpurun's own
 * algorithms) and --check (check mode), so that each case runs with and without both. */
#include <gpurun/coll.h>
#include <gpurun/runtime.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gr_coll.h"
#include "gr_config.h"
#include "gr_device.h"

static int rank, size, failures, opt_timeout, opt_check;

#include "expect.h"

static gr_comm_config base_cfg(void) {
  gr_comm_config cfg;
  gr_comm_config_init(&cfg);
  cfg.backend = GR_BACKEND_MPI;
  cfg.timeout_s = opt_timeout == 2 ? 900 : opt_timeout ? 60 : 0;
  cfg.check = opt_check;
  return cfg;
}

static gr_comm *make(int check) {
  gr_comm_config cfg = base_cfg();
  cfg.check = check;
  gr_comm *c = NULL;
  if (gr_comm_create(MPI_COMM_WORLD, &cfg, &c) != GR_OK) {
    fprintf(stderr, "[rank %d] gr_comm_create: %s\n", rank, gr_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return c;
}

/* The communicator still works: an exact allreduce. */
static void still_works(gr_comm *c, const char *after) {
  int32_t v[3] = {rank + 1, 2 * rank, -rank};
  gr_status st = gr_allreduce(v, v, 3, GR_INT32, GR_SUM, c, NULL);
  int32_t s = size * (size + 1) / 2;
  if (st != GR_OK || v[0] != s || v[1] != 2 * (s - size) || v[2] != -(s - size))
    FAIL("allreduce after %s: %s, %d %d %d (%s)", after, gr_status_name(st), v[0], v[1], v[2],
         gr_last_error());
}

/* ---- create --------------------------------------------------------------------------------- */

static void mode_create(void) {
  gr_comm *c = (gr_comm *)&failures;
  gr_comm_config cfg = base_cfg();
  /* timeout on rank 0 only (both ways round, so that it does not matter which side has it) */
  for (int side = 0; side < 2 && size > 1; side++) {
    cfg = base_cfg();
    cfg.timeout_s = (rank == 0) == (side == 0) ? 5 : 0;
    EXPECT_ST(gr_comm_create(MPI_COMM_WORLD, &cfg, &c), GR_ERR_MISMATCH);
    EXPECT_MSG("timeout");
    if (c) FAIL("out set after a failed create");
  }
  /* check mode on the last rank only */
  if (size > 1) {
    cfg = base_cfg();
    cfg.check = rank == size - 1;
    EXPECT_ST(gr_comm_create(MPI_COMM_WORLD, &cfg, &c), GR_ERR_MISMATCH);
    EXPECT_MSG("check mode");
    /* the same through the environment: GPURUN_CHECK=no is off, =on is on */
    setenv("GPURUN_CHECK", rank == 0 ? "on" : "no", 1);
    gr_comm_config_init(&cfg);
    cfg.backend = GR_BACKEND_MPI;
    cfg.timeout_s = opt_timeout ? 60 : 0;
    if (cfg.check != (rank == 0))
      FAIL("GPURUN_CHECK=%s gave check %d", getenv("GPURUN_CHECK"), cfg.check);
    EXPECT_ST(gr_comm_create(MPI_COMM_WORLD, &cfg, &c), GR_ERR_MISMATCH);
    /* every spelling, and a rejected one keeps the default (off) */
    const char *off[] = {"0", "no", "false", "off", "NO", " Off ", "bogus", "2", "yes please"};
    const char *on[] = {"1", "yes", "true", "on", "TRUE", "On"};
    for (size_t i = 0; i < sizeof off / sizeof *off; i++) {
      setenv("GPURUN_CHECK", off[i], 1);
      gr_comm_config_init(&cfg);
      if (cfg.check) FAIL("GPURUN_CHECK=\"%s\" turned check mode on", off[i]);
    }
    for (size_t i = 0; i < sizeof on / sizeof *on; i++) {
      setenv("GPURUN_CHECK", on[i], 1);
      gr_comm_config_init(&cfg);
      if (!cfg.check) FAIL("GPURUN_CHECK=\"%s\" left check mode off", on[i]);
    }
    unsetenv("GPURUN_CHECK");
  }
  /* one rank's invalid configuration: every rank fails, none waits */
  cfg = base_cfg();
  if (rank == size - 1) cfg.timeout_s = -3;
  EXPECT_ST(gr_comm_create(MPI_COMM_WORLD, &cfg, &c), GR_ERR_INVALID);
  if (rank == size - 1)
    EXPECT_MSG("timeout_s");
  else {
    char want[64];
    snprintf(want, sizeof want, "rank %d refused its own arguments", size - 1);
    EXPECT_MSG(want);
  }
  cfg = base_cfg();
  if (rank == 0) cfg.backend = (gr_backend)9;
  EXPECT_ST(gr_comm_create(MPI_COMM_WORLD, &cfg, &c), GR_ERR_INVALID);
  /* NCCL asked for on rank 0 only: without NCCL in the build that rank refuses (unsupported) and
   * every rank fails with it; with NCCL, the backends differ: a mismatch everywhere */
  if (size > 1) {
    cfg = base_cfg();
    if (rank == 0) cfg.backend = GR_BACKEND_NCCL;
    EXPECT_ST(gr_comm_create(MPI_COMM_WORLD, &cfg, &c),
              GPURUN_HAVE_NCCL ? GR_ERR_MISMATCH : GR_ERR_UNSUPPORTED);
  }
  /* AUTO on some ranks, MPI on the others: fine where AUTO resolves to MPI (no GPU) */
  int gpus = 0, any_gpu = 0;
  gr__cuda_device_count(&gpus);
  MPI_Allreduce(&gpus, &any_gpu, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (any_gpu == 0) {
    cfg = base_cfg();
    if (rank % 2) cfg.backend = GR_BACKEND_AUTO;
    EXPECT_ST(gr_comm_create(MPI_COMM_WORLD, &cfg, &c), GR_OK);
    if (c && gr_comm_backend(c) != GR_BACKEND_MPI) FAIL("backend %d", (int)gr_comm_backend(c));
    still_works(c, "AUTO/MPI create");
    EXPECT_ST(gr_comm_destroy(c), GR_OK);
  }
  /* and agreeing ranks still create a working communicator */
  c = make(opt_check);
  still_works(c, "the failed creates");
  EXPECT_ST(gr_comm_destroy(c), GR_OK);
}

/* ---- check ---------------------------------------------------------------------------------- */

static void mode_check(void) {
  gr_comm *c = make(1);
  int32_t a[64], b[64 * 8];
  for (int i = 0; i < 64; i++)
    a[i] = i;
  if (size > 1) {
    /* one rank refuses a grouped call (NULL send): gr_group_end fails on every rank */
    EXPECT_ST(gr_group_start(), GR_OK);
    EXPECT_ST(gr_allreduce(a, a, 4, GR_INT32, GR_SUM, c, NULL), GR_OK);
    EXPECT_ST(gr_allreduce(rank == 1 ? NULL : a, b, 4, GR_INT32, GR_SUM, c, NULL),
              rank == 1 ? GR_ERR_INVALID : GR_OK);
    EXPECT_ST(gr_group_end(), GR_ERR_INVALID);
    if (rank != 1)
      EXPECT_MSG("rank 1 of communicator world[0.1] rejected its own arguments to a grouped call");
    for (int i = 0; i < 4; i++)
      if (a[i] != i) FAIL("a refused group changed the buffer: a[%d] = %d", i, a[i]);
    still_works(c, "a refused group");
    /* different groups: a broadcast on rank 0, an allreduce elsewhere */
    EXPECT_ST(gr_group_start(), GR_OK);
    if (rank == 0)
      EXPECT_ST(gr_broadcast(a, a, 4, GR_INT32, 0, c, NULL), GR_OK);
    else
      EXPECT_ST(gr_allreduce(a, a, 4, GR_INT32, GR_SUM, c, NULL), GR_OK);
    EXPECT_ST(gr_group_end(), GR_ERR_MISMATCH);
    EXPECT_MSG("a group of 1 collective(s)");
    /* the same calls, one more on the last rank */
    EXPECT_ST(gr_group_start(), GR_OK);
    EXPECT_ST(gr_allreduce(a, a, 4, GR_INT32, GR_MAX, c, NULL), GR_OK);
    if (rank == size - 1) EXPECT_ST(gr_allreduce(a, a, 4, GR_INT32, GR_MAX, c, NULL), GR_OK);
    EXPECT_ST(gr_group_end(), GR_ERR_MISMATCH);
    still_works(c, "mismatched groups");
    /* gr_allreduce_multi: one rank's NULL buffer, then different counts */
    const void *s[2] = {a, a + 8};
    void *r[2] = {b, rank == 0 ? NULL : b + 8};
    size_t n[2] = {8, 8};
    EXPECT_ST(gr_allreduce_multi(s, r, n, 2, GR_INT32, GR_SUM, c, NULL), GR_ERR_INVALID);
    r[1] = b + 8;
    n[1] = rank == size - 1 ? 7 : 8;
    EXPECT_ST(gr_allreduce_multi(s, r, n, 2, GR_INT32, GR_SUM, c, NULL), GR_ERR_MISMATCH);
    n[0] = 9, n[1] = 7; /* the same total (16) split differently on the last rank */
    if (rank != size - 1) n[0] = 8, n[1] = 8;
    EXPECT_ST(gr_allreduce_multi(s, r, n, 2, GR_INT32, GR_SUM, c, NULL), GR_ERR_MISMATCH);
    /* no buffers on rank 0 only */
    EXPECT_ST(gr_allreduce_multi(s, r, n, rank == 0 ? 0 : 2, GR_INT32, GR_SUM, c, NULL),
              GR_ERR_MISMATCH);
    still_works(c, "refused allreduce_multi");
    /* a root out of range on one rank: everyone fails, and the next broadcast is right */
    for (int i = 0; i < 4; i++)
      a[i] = rank == 0 ? 100 + i : -1;
    EXPECT_ST(gr_broadcast(a, a, 4, GR_INT32, rank == size - 1 ? size : 0, c, NULL),
              GR_ERR_INVALID);
    for (int i = 0; i < 4; i++)
      a[i] = rank == 0 ? 200 + i : -1;
    EXPECT_ST(gr_broadcast(a, a, 4, GR_INT32, 0, c, NULL), GR_OK);
    for (int i = 0; i < 4; i++)
      if (a[i] != 200 + i)
        FAIL("broadcast after a refused one: a[%d] = %d, expected %d", i, a[i], 200 + i);
    /* gr_allgather(v, v, n): in place on rank 0, overlapping elsewhere: refused everywhere */
    EXPECT_ST(gr_allgather(b, b, 4, GR_INT32, c, NULL), GR_ERR_INVALID);
    /* in place on some ranks only (both valid locally): a mismatch */
    int32_t *mine = b + 4 * rank;
    EXPECT_ST(gr_allgather(rank == 0 ? a : mine, b, 4, GR_INT32, c, NULL), GR_ERR_MISMATCH);
    EXPECT_MSG("place");
    EXPECT_ST(gr_allreduce(a, rank % 2 ? a : b, 4, GR_INT32, GR_SUM, c, NULL), GR_ERR_MISMATCH);
    /* a reduce whose root differs */
    EXPECT_ST(gr_reduce(a, b, 4, GR_INT32, GR_SUM, rank == 0 ? 1 : 0, c, NULL), GR_ERR_MISMATCH);
    EXPECT_MSG("root=");
    /* non-blocking with one rank's bad root */
    gr_request *q = NULL;
    EXPECT_ST(gr_ibroadcast(a, a, 4, GR_INT32, rank == 1 ? -1 : 0, c, NULL, &q), GR_ERR_INVALID);
    if (q) FAIL("request set by a refused call");
  }
  still_works(c, "the check-mode cases");
  EXPECT_ST(gr_comm_destroy(c), GR_OK);
}

/* ---- lifetime ------------------------------------------------------------------------------- */

static void mode_lifetime(void) {
  gr_comm *c = make(opt_check);
  int32_t a[16], b[16];
  for (int i = 0; i < 16; i++)
    a[i] = rank + i;
  gr_request *q = NULL;
  EXPECT_ST(gr_iallreduce(a, b, 16, GR_INT32, GR_SUM, c, NULL, &q), GR_OK);
  EXPECT_ST(gr_comm_destroy(c), GR_ERR_STATE);
  EXPECT_MSG("outstanding");
  EXPECT_ST(gr_wait(&q), GR_OK);
  for (int i = 0; i < 16; i++)
    if (b[i] != size * (size - 1) / 2 + size * i)
      FAIL("iallreduce after a refused destroy: b[%d] = %d", i, b[i]);
  /* a grouped call queued */
  EXPECT_ST(gr_group_start(), GR_OK);
  EXPECT_ST(gr_allreduce(a, a, 16, GR_INT32, GR_SUM, c, NULL), GR_OK);
  EXPECT_ST(gr_comm_destroy(c), GR_ERR_STATE);
  EXPECT_ST(gr_group_end(), GR_OK);
  for (int i = 0; i < 16; i++)
    if (a[i] != b[i]) FAIL("grouped allreduce after a refused destroy: a[%d] = %d", i, a[i]);
  still_works(c, "refused destroys");
  EXPECT_ST(gr_comm_destroy(c), GR_OK);
}

static void mode_finalize(void) {
  /* gr_init on the program's MPI; the program then finalizes MPI itself, before gr_finalize. */
  EXPECT_ST(gr_init(NULL, NULL), GR_OK);
  gr_comm *c = make(opt_check);
  still_works(c, "gr_init");
  int fails = failures;
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  EXPECT_ST(gr_comm_destroy(c), GR_ERR_STATE);
  EXPECT_MSG("MPI was finalized");
  EXPECT_ST(gr_finalize(), GR_ERR_STATE);
  EXPECT_MSG("MPI_Finalize before gr_finalize");
  EXPECT_ST(gr_finalize(), GR_ERR_STATE); /* once is enough */
  printf("[rank %d] finalize: %d failures\n", rank, failures);
  exit(failures || fails ? 1 : 0);
}

/* ---- tags ----------------------------------------------------------------------------------- */

/* n allreduces of 2 int32 each, in one group: element j of call i is rank * i + j. */
static void many_grouped(gr_comm *c, int n) {
  int32_t *v = malloc(sizeof *v * 2 * (size_t)n);
  if (!v) MPI_Abort(MPI_COMM_WORLD, 2);
  for (int i = 0; i < n; i++)
    v[2 * i] = rank * i, v[2 * i + 1] = rank * i + 1;
  EXPECT_ST(gr_group_start(), GR_OK);
  for (int i = 0; i < n; i++)
    EXPECT_ST(gr_allreduce(v + 2 * i, v + 2 * i, 2, GR_INT32, GR_SUM, c, NULL), GR_OK);
  EXPECT_ST(gr_group_end(), GR_OK);
  int bad = 0;
  for (int i = 0; i < n && bad < 5; i++) {
    int32_t w0 = (int32_t)((uint32_t)(size * (size - 1) / 2) * (uint32_t)i), w1 = w0 + size;
    if (v[2 * i] != w0 || v[2 * i + 1] != w1) {
      FAIL("group of %d: call %d gave %d %d, expected %d %d", n, i, v[2 * i], v[2 * i + 1], w0, w1);
      bad++;
    }
  }
  free(v);
}

/* n gr_iallreduce of 3 int64 each, waited newest first. */
static void many_requests(gr_comm *c, int n) {
  int64_t *v = malloc(sizeof *v * 3 * (size_t)n);
  gr_request **q = calloc((size_t)n, sizeof *q);
  if (!v || !q) MPI_Abort(MPI_COMM_WORLD, 2);
  for (int i = 0; i < n; i++)
    for (int j = 0; j < 3; j++)
      v[3 * i + j] = (int64_t)rank * i + j;
  for (int i = 0; i < n; i++)
    EXPECT_ST(gr_iallreduce(v + 3 * i, v + 3 * i, 3, GR_INT64, GR_SUM, c, NULL, &q[i]), GR_OK);
  for (int i = n - 1; i >= 0; i--)
    EXPECT_ST(gr_wait(&q[i]), GR_OK);
  int bad = 0;
  for (int i = 0; i < n && bad < 5; i++)
    for (int j = 0; j < 3; j++) {
      int64_t want = (int64_t)(size * (size - 1) / 2) * i + (int64_t)size * j;
      if (v[3 * i + j] != want && bad++ < 5)
        FAIL("%d requests: call %d element %d is %lld, expected %lld", n, i, j,
             (long long)v[3 * i + j], (long long)want);
    }
  free(v);
  free(q);
}

static void mode_tags(void) {
  /* 16500 requests started at once share one wait: the timeout only bounds a hang here */
  if (opt_timeout) opt_timeout = 2;
  gr_comm *c = make(opt_check);
  many_grouped(c, 20000);
  many_requests(c, 16500);
  still_works(c, "20000 and 16500 calls in flight");
  EXPECT_ST(gr_comm_destroy(c), GR_OK);
  /* Eight tag slots: calls 8 apart share tags, so starting call i completes call i - 8 first. */
  gr__mpi_tag_slots_cap = 8;
  c = make(opt_check);
  many_grouped(c, 100);
  many_requests(c, 100);
  /* large enough for the ring / Rabenseifner, several in flight */
  enum { N = 40000, K = 12 };
  float *big = malloc(sizeof *big * N * K);
  gr_request *q[K];
  if (!big) MPI_Abort(MPI_COMM_WORLD, 2);
  for (int k = 0; k < K; k++)
    for (int i = 0; i < N; i++)
      big[k * N + i] = (float)((rank + k + i) % 5);
  for (int k = 0; k < K; k++)
    EXPECT_ST(gr_iallreduce(big + k * N, big + k * N, N, GR_FLOAT32, GR_SUM, c, NULL, &q[k]),
              GR_OK);
  for (int k = K - 1; k >= 0; k--)
    EXPECT_ST(gr_wait(&q[k]), GR_OK);
  for (int k = 0, bad = 0; k < K; k++)
    for (int i = 0; i < N && bad < 5; i++) {
      float want = 0;
      for (int r = 0; r < size; r++)
        want += (float)((r + k + i) % 5);
      if (big[k * N + i] != want) {
        FAIL("large call %d element %d: %g, expected %g", k, i, (double)big[k * N + i],
             (double)want);
        bad++;
      }
    }
  free(big);
  still_works(c, "reused tag slots");
  EXPECT_ST(gr_comm_destroy(c), GR_OK);
  gr__mpi_tag_slots_cap = 0;
}

/* ---- errors --------------------------------------------------------------------------------- */

static gr_comm *make_timeout(double t) {
  gr_comm_config cfg = base_cfg();
  cfg.timeout_s = t, cfg.check = 0;
  gr_comm *c = NULL;
  if (gr_comm_create(MPI_COMM_WORLD, &cfg, &c) != GR_OK) MPI_Abort(MPI_COMM_WORLD, 1);
  return c;
}

/* A count mismatch on the node-local shared-memory path returns GR_ERR_MISMATCH on every rank and
 * leaves the communicator usable; over MPI, rank 0 gets GR_ERR_MPI or GR_ERR_TIMEOUT. Either way
 * never GR_OK on rank 0. */
static void mismatch_verdict(const char *what, gr_status st, gr_comm *c) {
  int mism = st == GR_ERR_MISMATCH, any = 0, all = 0;
  MPI_Allreduce(&mism, &any, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
  MPI_Allreduce(&mism, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  if (rank == 0 && size > 1 && st != GR_ERR_MPI && st != GR_ERR_TIMEOUT && !mism)
    FAIL("%s with a count mismatch returned %s on rank 0 (%s)", what, gr_status_name(st),
         gr_last_error());
  if (any && !all)
    FAIL("%s with a count mismatch: GR_ERR_MISMATCH on some ranks only; here %s (%s)", what,
         gr_status_name(st), gr_last_error());
  if (mism) {
    const char *e = gr_last_error();
    if (!strstr(e, "rank 0 called") && !strstr(e, "rank 1 called"))
      FAIL("%s: sentence names no rank: %s", what, e);
    if (!strstr(e, "count=4") || !strstr(e, "count=8"))
      FAIL("%s: sentence lacks the two counts: %s", what, e);
    still_works(c, what);
  }
}

static void mode_errors(void) {
  /* a short timeout: a rank that waits for data that never comes gives up soon */
  gr_comm *c = make_timeout(3);
  int32_t s[64] = {0}, d[64 * 8] = {0};
  /* rank 0 gathers 4 per rank, the others 8: over MPI rank 0 receives too much (MPI_ERR_TRUNCATE)
   * and the others may see a short message as a success (MPI cannot tell), or time out */
  gr_status st = gr_allgather(s, d, rank == 0 ? 4 : 8, GR_INT32, c, NULL);
  mismatch_verdict("allgather", st, c);
  gr_comm_destroy(c);
  c = make_timeout(3);
  st = gr_reduce_scatter(d, s, rank == 0 ? 4 : 8, GR_INT32, GR_SUM, c, NULL);
  mismatch_verdict("reduce_scatter", st, c);
  gr_comm_destroy(c);
  /* reaching here on every rank is the test: the job was not killed */
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char *mode = argc > 1 ? argv[1] : "";
  for (int i = 2; i < argc; i++) {
    opt_timeout |= strcmp(argv[i], "--timeout") == 0;
    opt_check |= strcmp(argv[i], "--check") == 0;
  }
  if (strcmp(mode, "create") == 0)
    mode_create();
  else if (strcmp(mode, "check") == 0)
    mode_check();
  else if (strcmp(mode, "lifetime") == 0)
    mode_lifetime();
  else if (strcmp(mode, "finalize") == 0)
    mode_finalize();
  else if (strcmp(mode, "tags") == 0)
    mode_tags();
  else if (strcmp(mode, "errors") == 0)
    mode_errors();
  else {
    fprintf(stderr, "usage: test_coll_agree create|check|lifetime|finalize|tags|errors [--timeout] "
                    "[--check]\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0)
    printf("%s%s%s: %d failures\n", mode, opt_timeout ? " --timeout" : "",
           opt_check ? " --check" : "", total);
  MPI_Finalize();
  return total ? 1 : 0;
}
