/* The execution paths as data (collectives/gr_path.h) on real communicators: for many call
 * descriptions (every kind, sizes around each row's limits, several dtypes), on communicators with
 * and without the shared-memory path, with and without a timeout:
 *   - some row takes every call, and every rank chooses the same row (allgathered and compared);
 *   - the row that takes a collective carries a refusal the way gr__path_refusal says for its kind
 *     (the front end picks the refusal's route from the kind alone: a row that took a call of that
 *     kind and carried refusals otherwise would leave a refusing rank on another route);
 *   - the rows documented for the MPI backend take the calls they are documented to take
 *     (shm for an 8-byte allreduce on one node; with GPURUN_COLL_ALGO=mpi and a timeout, rd up to
 *     32 KiB, rabenseifner above at 4, 8, ... ranks, ring above otherwise; the MPI library
 *     without a timeout);
 *   - GPURUN_COLL_ALGO is agreed at creation: when only rank 0 asks for mpi, no rank of the
 *     communicator keeps the shared-memory row;
 *   - GPURUN_COLL_ALGO naming a row (pair, rd) puts that row first and leaves the shared-memory
 *     rows out, on every rank; ranks naming different rows select none (one rank a row, the
 *     others a mode, too), ranks spelling one row differently ("  PAIR " and "pair") select it,
 *     and so does gr_comm_split, each with the names its ranks give at the split; at two ranks an 8-byte
 *     allreduce takes the pair row (counted under pair) and both ranks get op(rank 0's, rank 1's)
 *     bit for bit (blocking, in place, request);
 *   - a communicator a row makes for itself (gr__comm_new, as hier.c's leaders') takes its
 *     parent's agreement on the named row (gr__path_row_take), whatever its ranks' own settings
 *     say at its creation (rd where the parent agreed on rd, none where the parent's ranks named
 *     different rows), and spends one gr__agree round (MPI_Iallreduce, counted here) fewer than
 *     the same creation that agrees on its own;
 *   - on a communicator of one rank (MPI_COMM_SELF), whatever GPURUN_COLL_ALGO and the timeout
 *     say, the self row comes first and takes every collective, point-to-point stays with the MPI
 *     library, and calls of every kind (in place and not) give their input, each allreduce
 *     counted under self.
 * Usage: test_coll_paths (under mpirun, 2 ranks or more, all on one node) */
#include <gpurun/coll.h>

#include "exact_check.h"
#include "gr_algo_count.h"
#include "gr_coll.h"
#include "gr_dtype.h"
#include "gr_path.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int world_rank, failures;
static long checks;

/* This process's MPI_Iallreduce calls: gr__agree's one call, so one per agreement round. The
 * library's calls come through this definition (the MPI profiling interface). */
static long iallreduces;
int MPI_Iallreduce(const void *s, void *r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm comm,
                   MPI_Request *req) {
  __atomic_add_fetch(&iallreduces, 1, __ATOMIC_RELAXED);
  return PMPI_Iallreduce(s, r, n, t, op, comm, req);
}

/* The index of p among c's rows, -1 when NULL. */
static int row_of(const gr_comm *c, const gr__path *p) {
  for (int i = 0; i < c->npaths; i++)
    if (c->paths[i] == p) return i;
  return -1;
}

static int has_row(const gr_comm *c, const char *name) {
  for (int i = 0; i < c->npaths; i++)
    if (strcmp(c->paths[i]->name, name) == 0) return 1;
  return 0;
}

/* The row that takes (kind, count, dtype) on c, with blocking_ok as a blocking call gets it. */
static const gr__path *choose(gr_comm *c, gr__kind kind, size_t count, gr_dtype t) {
  gr__call k;
  memset(&k, 0, sizeof k);
  k.kind = kind;
  k.count = count;
  k.dtype = t;
  k.op = GR_SUM;
  k.root =
      kind == GR__BROADCAST || kind == GR__REDUCE || kind == GR__SEND || kind == GR__RECV ? 0 : -1;
  k.comm = c;
  k.blocking_ok = c->timeout_s <= 0;
  return gr__path_choose(&k);
}

static void sweep(gr_comm *c, const char *label) {
  static const size_t counts[] = {0,    1,    2,    3,     64,    1000,  2048,
                                  4096, 8192, 8193, 32768, 65536, 300000};
  static const gr_dtype types[] = {GR_INT8, GR_FLOAT32, GR_FLOAT64};
  int P = gr_comm_size(c);
  for (int kind = 0; kind < GR__NKINDS; kind++)
    for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++)
      for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const gr__path *p = choose(c, (gr__kind)kind, counts[ci], types[ti]);
        char what[160];
        snprintf(what, sizeof what, "%s: %s count %zu %s", label, gr__kind_name((gr__kind)kind),
                 counts[ci], gr__dtype_name(types[ti]));
        checks++;
        if (!p) {
          FAIL("%s: no row takes the call", what);
          continue;
        }
        if (kind != GR__SEND && kind != GR__RECV &&
            p->refusal != gr__path_refusal(c, (gr__kind)kind))
          FAIL("%s: row %s carries refusals one way, the kind's route says another", what, p->name);
        int mine = row_of(c, p), *all = ec_must(malloc(sizeof(int) * (size_t)P));
        MPI_Allgather(&mine, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD);
        for (int r = 0; r < P; r++)
          if (all[r] != mine) FAIL("%s: rank %d chose row %d, this rank %d", what, r, all[r], mine);
        free(all);
      }
}

static void expect(gr_comm *c, gr__kind kind, size_t count, gr_dtype t, const char *want,
                   const char *label) {
  const gr__path *p = choose(c, kind, count, t);
  checks++;
  if (!p || strcmp(p->name, want) != 0)
    FAIL("%s: %s of %zu %s took %s, the rules say %s", label, gr__kind_name(kind), count,
         gr__dtype_name(t), p ? p->name : "no row", want);
}

/* A communicator over mpi_comm with GPURUN_COLL_ALGO as given on this rank (NULL: unset). */
static gr_comm *make_on(MPI_Comm mpi_comm, const char *algo, double timeout_s) {
  if (algo)
    setenv("GPURUN_COLL_ALGO", algo, 1);
  else
    unsetenv("GPURUN_COLL_ALGO");
  gr_comm_config cfg;
  gr_comm_config_init(&cfg);
  cfg.backend = GR_BACKEND_MPI;
  cfg.timeout_s = timeout_s;
  gr_comm *c = NULL;
  EXPECT_OK_IN(gr_comm_create(mpi_comm, &cfg, &c), "gr_comm_create");
  unsetenv("GPURUN_COLL_ALGO");
  return c;
}
static gr_comm *make(const char *algo, double timeout_s) {
  return make_on(MPI_COMM_WORLD, algo, timeout_s);
}
/* A split of c (one colour, the same order) with GPURUN_COLL_ALGO as given on this rank. */
static gr_comm *split_with(gr_comm *c, const char *algo) {
  if (algo)
    setenv("GPURUN_COLL_ALGO", algo, 1);
  else
    unsetenv("GPURUN_COLL_ALGO");
  gr_comm *s = NULL;
  EXPECT_OK_IN(gr_comm_split(c, 0, world_rank, &s), "gr_comm_split");
  unsetenv("GPURUN_COLL_ALGO");
  return s;
}

/* Whether the n floats at got are the n at want, bit for bit; a failure names the call. */
static void same(const float *got, const float *want, size_t n, const char *what) {
  checks++;
  if (memcmp(got, want, n * sizeof(float)) != 0) FAIL("%s: the result is not the input", what);
}

/* One rank: the self row's place and choices, then a call of every kind on it. */
static void one_rank(const char *algo, double timeout_s) {
  char label[80];
  snprintf(label, sizeof label, "one rank, GPURUN_COLL_ALGO=%s, timeout %g s", algo ? algo : "",
           timeout_s);
  gr_comm *c = make_on(MPI_COMM_SELF, algo, timeout_s);
  if (!c) return;
  checks++;
  if (c->npaths < 1 || strcmp(c->paths[0]->name, "self") != 0)
    FAIL("%s: the first row is %s, not self", label, c->npaths ? c->paths[0]->name : "none");
  static const size_t counts[] = {0, 1, 7, 8193, 300000};
  for (int kind = 0; kind < GR__NKINDS; kind++)
    for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++)
      expect(c, (gr__kind)kind, counts[ci], GR_FLOAT32,
             kind == GR__SEND || kind == GR__RECV ? "mpi" : "self", label);
  enum { N = 1001 }; /* odd, and more than a page */
  float *in = ec_must(malloc(N * sizeof(float))), *out = ec_must(malloc(N * sizeof(float))),
        *keep = ec_must(malloc(N * sizeof(float)));
  for (size_t i = 0; i < N; i++)
    in[i] = keep[i] = (float)i * 0.5f - 3.0f;
  uint64_t ran = gr__algo_count(GR__ALGO_SELF);
  char what[160];
#define SELF_CALL(name, call, got)                                                                 \
  do {                                                                                             \
    memset(out, 0xff, N * sizeof(float));                                                          \
    snprintf(what, sizeof what, "%s: %s", label, name);                                            \
    EXPECT_OK_IN(call, what);                                                                      \
    same(got, keep, N, what);                                                                      \
  } while (0)
  SELF_CALL("allreduce", gr_allreduce(in, out, N, GR_FLOAT32, GR_SUM, c, NULL), out);
  SELF_CALL("allreduce avg", gr_allreduce(in, out, N, GR_FLOAT32, GR_AVG, c, NULL), out);
  SELF_CALL("reduce", gr_reduce(in, out, N, GR_FLOAT32, GR_MAX, 0, c, NULL), out);
  SELF_CALL("broadcast", gr_broadcast(in, out, N, GR_FLOAT32, 0, c, NULL), out);
  SELF_CALL("allgather", gr_allgather(in, out, N, GR_FLOAT32, c, NULL), out);
  SELF_CALL("reduce-scatter", gr_reduce_scatter(in, out, N, GR_FLOAT32, GR_SUM, c, NULL), out);
  SELF_CALL("alltoall", gr_alltoall(in, out, N, GR_FLOAT32, c, NULL), out);
  SELF_CALL("allreduce in place", gr_allreduce(in, in, N, GR_FLOAT32, GR_PROD, c, NULL), in);
  SELF_CALL("allgather in place", gr_allgather(in, in, N, GR_FLOAT32, c, NULL), in);
  SELF_CALL("reduce-scatter in place", gr_reduce_scatter(in, in, N, GR_FLOAT32, GR_MIN, c, NULL),
            in);
#undef SELF_CALL
  EXPECT_OK_IN(gr_barrier(c), "barrier on one rank");
  gr_request *req = NULL;
  memset(out, 0, N * sizeof(float));
  EXPECT_OK_IN(gr_iallreduce(in, out, N, GR_FLOAT32, GR_SUM, c, NULL, &req), "iallreduce");
  if (req) EXPECT_OK_IN(gr_wait(&req), "wait");
  same(out, keep, N, "iallreduce on one rank");
  checks++;
  uint64_t now = gr__algo_count(GR__ALGO_SELF) - ran;
  if (now != 4) /* the blocking allreduces and the request */
    FAIL("%s: %llu allreduces counted under self, 4 ran", label, (unsigned long long)now);
  free(in);
  free(out);
  free(keep);
  EXPECT_OK_IN(gr_comm_destroy(c), "destroy");
}

/* A communicator over a duplicate of c's ranks on c's backend table, made the way a row makes its
 * own (gr__comm_new, the backend's create, gr__paths_create), with GPURUN_COLL_ALGO as given on
 * this rank; take: it takes c's agreement on the row first (gr__path_row_take). *rounds: the
 * agreement rounds its creation spent. NULL on failure (said). */
static gr_comm *inner_of(gr_comm *c, const char *algo, int take, long *rounds) {
  MPI_Comm m = MPI_COMM_NULL;
  checks++;
  if (MPI_Comm_dup(c->mpi, &m) != MPI_SUCCESS) {
    FAIL("MPI_Comm_dup for an inner communicator failed");
    return NULL;
  }
  gr__comm_cfg cfg = {c->timeout_s, 0, c->algo, 0, c->ops};
  if (algo)
    setenv("GPURUN_COLL_ALGO", algo, 1);
  else
    unsetenv("GPURUN_COLL_ALGO");
  long before = iallreduces;
  gr_comm *s = gr__comm_new(m, &cfg);
  gr_status st = s ? GR_OK : GR_ERR_NOMEM;
  if (s) {
    snprintf(s->id, sizeof s->id, "%.20s.inner", c->id);
    if (take) gr__path_row_take(s, c);
    st = s->ops->create(s, gr__deadline(c->timeout_s));
    if (st == GR_OK && (st = gr__paths_create(s)) != GR_OK)
      s->ops->destroy(s, gr__deadline(c->timeout_s));
  }
  *rounds = iallreduces - before;
  unsetenv("GPURUN_COLL_ALGO");
  if (st != GR_OK) {
    FAIL("an inner communicator (%s): %s", take ? "taking the row" : "agreeing itself",
         s ? s->err : "out of memory");
    if (s) gr__comm_free(s);
    return NULL;
  }
  return s;
}

static void inner_free(gr_comm *s) {
  if (!s) return;
  gr__paths_destroy(s);
  s->ops->destroy(s, gr__deadline(s->timeout_s));
  gr__comm_free(s);
}

/* Inner communicators (gr__path_row_take): rd, agreed on c_rd, stays first where the inner
 * creation's ranks name different rows; c_differ's ranks named different rows, so every rank
 * naming rd at the inner creation selects none. */
static void inner_rows(gr_comm *c_rd, gr_comm *c_differ) {
  const char *mixed = world_rank == 0 ? NULL : "pair";
  long taken = 0, own = 0, r_differ = 0;
  gr_comm *in_rd = inner_of(c_rd, mixed, 1, &taken), *in_own = inner_of(c_rd, mixed, 0, &own),
          *in_differ = inner_of(c_differ, "rd", 1, &r_differ);
  if (in_rd && in_own && in_differ) {
    checks++;
    if (strcmp(in_rd->paths[0]->name, "rd") != 0 || has_row(in_rd, "shm"))
      FAIL("an inner communicator of a parent that agreed on rd: the first row is %s",
           in_rd->paths[0]->name);
    checks++;
    if (!has_row(in_own, "shm") || !strcmp(in_own->paths[0]->name, "rd"))
      FAIL("an inner communicator agreeing itself, rank 0 naming no row: the first row is %s",
           in_own->paths[0]->name);
    checks++;
    if (!has_row(in_differ, "shm") || !strcmp(in_differ->paths[0]->name, "rd"))
      FAIL("an inner communicator of a parent whose ranks named different rows, every rank "
           "naming rd: the first row is %s",
           in_differ->paths[0]->name);
    checks++;
    if (own - taken != 1)
      FAIL("an inner communicator taking its parent's row spent %ld agreement rounds, one "
           "agreeing itself %ld: one fewer expected",
           taken, own);
    sweep(in_rd, "inner, rd taken");
  }
  inner_free(in_rd);
  inner_free(in_own);
  inner_free(in_differ);
}

/* GPURUN_COLL_ALGO naming a row (gr_path.h, Selection by name). */
static void named_rows(int P) {
  gr_comm *pair = make("pair", 60), *rd = make("rd", 60),
          *differ = make(world_rank == 0 ? "pair" : "rd", 60);
  if (pair && rd && differ) {
    sweep(pair, "pair, timeout");
    sweep(rd, "rd, timeout");
    sweep(differ, "pair or rd, timeout");
    checks++;
    if (strcmp(pair->paths[0]->name, "pair") != 0 || has_row(pair, "shm"))
      FAIL("GPURUN_COLL_ALGO=pair: the first row is %s and the shm row is %s", pair->paths[0]->name,
           has_row(pair, "shm") ? "there" : "left out");
    checks++;
    if (strcmp(rd->paths[0]->name, "rd") != 0 || has_row(rd, "shm-window"))
      FAIL("GPURUN_COLL_ALGO=rd: the first row is %s", rd->paths[0]->name);
    expect(pair, GR__ALLREDUCE, 2, GR_FLOAT32, P == 2 ? "pair" : "rd", "pair, timeout");
    expect(pair, GR__ALLREDUCE, 65, GR_FLOAT32, "rd", "pair, timeout");
    expect(pair, GR__BROADCAST, 2, GR_FLOAT32, "mpi", "pair, timeout");
    expect(rd, GR__ALLREDUCE, 2, GR_FLOAT32, "rd", "rd, timeout");
    /* each rank named another row: the table as auto has it (one node: shm) */
    checks++;
    if (!has_row(differ, "shm") || !strcmp(differ->paths[0]->name, "pair") ||
        !strcmp(differ->paths[0]->name, "rd"))
      FAIL("ranks that name different rows: the first row is %s", differ->paths[0]->name);
    inner_rows(rd, differ);
  }
  /* one rank names a row and the others a mode: none is selected on any rank (rank 0 too) */
  gr_comm *one = make(world_rank == 0 ? "pair" : "auto", 60);
  /* one row spelled two ways is the same row: selected on every rank */
  gr_comm *spelled = make(world_rank == 0 ? "  PAIR " : "pair", 60);
  if (one && spelled) {
    checks++;
    if (!has_row(one, "shm") || !strcmp(one->paths[0]->name, "pair"))
      FAIL("only rank 0 named pair: the first row is %s", one->paths[0]->name);
    checks++;
    if (strcmp(spelled->paths[0]->name, "pair") != 0 || has_row(spelled, "shm"))
      FAIL("\"  PAIR \" and \"pair\": the first row is %s", spelled->paths[0]->name);
  }
  /* gr_comm_split agrees on the row with the names given at the split, not the parent's */
  if (one && spelled) {
    gr_comm *s_rd = split_with(one, "rd"),
            *s_differ = split_with(spelled, world_rank ? "rd" : NULL);
    if (s_rd && s_differ) {
      checks++;
      if (strcmp(s_rd->paths[0]->name, "rd") != 0 || has_row(s_rd, "shm"))
        FAIL("a split naming rd: the first row is %s", s_rd->paths[0]->name);
      checks++;
      if (!has_row(s_differ, "shm") || !strcmp(s_differ->paths[0]->name, "rd") ||
          !strcmp(s_differ->paths[0]->name, "pair"))
        FAIL("a split where rank 0 names no row and the others rd: the first row is %s",
             s_differ->paths[0]->name);
      expect(s_rd, GR__ALLREDUCE, 2, GR_FLOAT32, "rd", "split, rd");
    }
    EXPECT_OK_IN(gr_comm_destroy(s_rd), "destroy");
    EXPECT_OK_IN(gr_comm_destroy(s_differ), "destroy");
  }
  EXPECT_OK_IN(gr_comm_destroy(one), "destroy");
  EXPECT_OK_IN(gr_comm_destroy(spelled), "destroy");
  if (pair && P == 2) { /* the pair row runs: op(rank 0's, rank 1's) on both ranks */
    float mine[2] = {world_rank ? 1e-8f : 1.0f, world_rank ? 3.25f : -0.125f}, got[2], want[2];
    float r0[2] = {1.0f, -0.125f}, r1[2] = {1e-8f, 3.25f};
    for (int i = 0; i < 2; i++)
      want[i] = r0[i] + r1[i];
    uint64_t ran = gr__algo_count(GR__ALGO_PAIR);
    EXPECT_OK_IN(gr_allreduce(mine, got, 2, GR_FLOAT32, GR_SUM, pair, NULL), "pair allreduce");
    checks++;
    if (memcmp(got, want, sizeof got) != 0) FAIL("pair allreduce: %g %g", got[0], got[1]);
    float io[2] = {mine[0], mine[1]};
    EXPECT_OK_IN(gr_allreduce(io, io, 2, GR_FLOAT32, GR_SUM, pair, NULL), "pair in place");
    checks++;
    if (memcmp(io, want, sizeof io) != 0) FAIL("pair allreduce in place: %g %g", io[0], io[1]);
    gr_request *req = NULL;
    memset(got, 0, sizeof got);
    EXPECT_OK_IN(gr_iallreduce(mine, got, 2, GR_FLOAT32, GR_MAX, pair, NULL, &req), "iallreduce");
    if (req) EXPECT_OK_IN(gr_wait(&req), "wait");
    checks++;
    if (got[0] != 1.0f || got[1] != 3.25f) FAIL("pair iallreduce max: %g %g", got[0], got[1]);
    checks++;
    uint64_t now = gr__algo_count(GR__ALGO_PAIR) - ran;
    if (now != 3) FAIL("%llu allreduces counted under pair, 3 ran", (unsigned long long)now);
  }
  EXPECT_OK_IN(gr_comm_destroy(pair), "destroy");
  EXPECT_OK_IN(gr_comm_destroy(rd), "destroy");
  EXPECT_OK_IN(gr_comm_destroy(differ), "destroy");
}

int main(int argc, char **argv) {
  (void)argc, (void)argv;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  int P;
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  if (P < 2) {
    fprintf(stderr, "test_coll_paths: needs 2 ranks or more\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  gr_comm *shm = make(NULL, 0), *shm_t = make(NULL, 60), *mpi = make("mpi", 0),
          *mpi_t = make("mpi", 60), *mixed = make(world_rank == 0 ? "mpi" : "auto", 60);
  if (shm && shm_t && mpi && mpi_t && mixed) {
    sweep(shm, "auto");
    sweep(shm_t, "auto, timeout");
    sweep(mpi, "mpi");
    sweep(mpi_t, "mpi, timeout");
    if (!has_row(shm, "shm")) FAIL("auto on one node: no shm row");
    expect(shm, GR__ALLREDUCE, 2, GR_FLOAT32, "shm", "auto");
    expect(shm_t, GR__ALLREDUCE, 2, GR_FLOAT32, "shm", "auto, timeout");
    expect(mpi, GR__ALLREDUCE, 2, GR_FLOAT32, "mpi", "mpi");
    expect(mpi_t, GR__ALLREDUCE, 2, GR_FLOAT32, P == 2 ? "pair" : "rd", "mpi, timeout");
    expect(mpi_t, GR__ALLREDUCE, 64, GR_FLOAT32, P == 2 ? "pair" : "rd", "mpi, timeout");
    expect(mpi_t, GR__ALLREDUCE, 65, GR_FLOAT32, "rd", "mpi, timeout");
    expect(mpi_t, GR__ALLREDUCE, 8192, GR_FLOAT32, "rd", "mpi, timeout");
    expect(mpi_t, GR__ALLREDUCE, 8193 * (size_t)P, GR_FLOAT32,
           P >= 4 && (P & (P - 1)) == 0 ? "rabenseifner" : "ring", "mpi, timeout");
    expect(mpi_t, GR__BROADCAST, 100, GR_FLOAT32, "mpi", "mpi, timeout");
    checks++;
    if (mixed->algo != GR__COLL_ALGO_MPI || has_row(mixed, "shm"))
      FAIL("only rank 0 asked for GPURUN_COLL_ALGO=mpi: this rank has algo %s and %s shm row",
           gr__coll_algo_name(mixed->algo), has_row(mixed, "shm") ? "a" : "no");
  }
  EXPECT_OK_IN(gr_comm_destroy(shm), "destroy");
  EXPECT_OK_IN(gr_comm_destroy(shm_t), "destroy");
  EXPECT_OK_IN(gr_comm_destroy(mpi), "destroy");
  EXPECT_OK_IN(gr_comm_destroy(mpi_t), "destroy");
  EXPECT_OK_IN(gr_comm_destroy(mixed), "destroy");
  named_rows(P);
  one_rank(NULL, 0);
  one_rank(NULL, 60);
  one_rank("mpi", 60);
  one_rank("ring", 0);
  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (world_rank == 0)
    printf("test_coll_paths: %d ranks, %ld checks per rank, %d failures\n", P, checks, total);
  MPI_Finalize();
  return total ? 1 : 0;
}
