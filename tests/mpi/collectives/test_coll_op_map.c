/* The one (gr_dtype, gr_op) -> (MPI_Datatype, MPI_Op) map (collectives/gr_op_map.h):
 * - every pair gr__op_defined accepts gets a datatype and an op whose result (MPI_Reduce_local,
 *   both operand orders) has the bits of gpurun's kernel (gr__reduce_host), whether the op is
 *   MPI's built-in one or a user-defined one; the pairs it refuses get MPI_OP_NULL;
 * - a few results against values worked out here: wrapping integers, unsigned comparison, NaN and
 *   signed zeros in floating MIN/MAX, fp16/bf16 rounding;
 * - an MPI_Op_create that fails (at each of the map's ops in turn, and inside gr_comm_create) is a
 *   GR_ERR_MPI with a sentence naming the op, and the ops made before it are freed; a failed
 *   MPI_Op_free is a GR_ERR_MPI with its sentence too. The failures come from MPI's profiling
 *   interface: this program defines MPI_Op_create and MPI_Op_free (which libgpurun's calls reach)
 *   and calls PMPI_Op_create / PMPI_Op_free, failing when told to. */
#include <gpurun/coll.h>
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "gr_coll.h"
#include "gr_dtype.h"
#include "gr_op_map.h"

static int world_rank, failures;
static long checks;
#define GR_TEST_RANK world_rank
#define GR_TEST_FAILURES failures
#include "gr_check.h"

/* ---- MPI_Op_create / MPI_Op_free through the profiling interface --------------------------- */
static int fail_create_at = -1; /* the create (counted from 0 in creates) that fails; -1: none */
static int creates, fail_free, live_ops;

int MPI_Op_create(MPI_User_function *fn, int commute, MPI_Op *op) {
  if (fail_create_at >= 0 && creates++ == fail_create_at) return MPI_ERR_INTERN;
  int rc = PMPI_Op_create(fn, commute, op);
  if (rc == MPI_SUCCESS) live_ops++;
  return rc;
}

int MPI_Op_free(MPI_Op *op) {
  int rc = PMPI_Op_free(op);
  if (rc == MPI_SUCCESS) live_ops--;
  return fail_free ? MPI_ERR_OP : rc; /* freed, and reported as failed: what an MPI may say */
}

/* ---- the map against the kernel ------------------------------------------------------------ */
enum { N = 12 };
/* Operands: integers truncated to the type's width (so that 8 and 32 bits wrap and unsigned values
 * pass 127 and 2^31), floating values converted to the type (NaN, signed zeros, infinities). */
static const int64_t ia[N] = {100, -128, 127,       -1,        0,  135,
                              200, 3,    INT64_MAX, INT32_MAX, -7, 1 << 20};
static const int64_t ib[N] = {100, -1, 1, 127, -128, 0, 2, -3, 1, 1, 64, 1 << 20};
static const double fa[N] = {1.5, -0.0, 0.0, NAN, 3.0, -2.25, 1e30, INFINITY, 65504, 0.1, -1, 7};
static const double fb[N] = {2.25, 0.0, -0.0, 1.0, NAN, 4.0, 1e30, -1.0, 65504, 0.2, -0.0, 0.5};

static void fill(gr_dtype t, void *buf, const int64_t *iv, const double *fv) {
  size_t es = gr__dtype_size(t);
  for (int i = 0; i < N; i++) {
    unsigned char *p = (unsigned char *)buf + (size_t)i * es;
    uint64_t u = (uint64_t)iv[i];
    float f = (float)fv[i];
    double d = fv[i];
    uint16_t h;
    switch (t) {
    case GR_FLOAT32:
      memcpy(p, &f, 4);
      break;
    case GR_FLOAT64:
      memcpy(p, &d, 8);
      break;
    case GR_FLOAT16:
      h = gr__f32_to_f16(f);
      memcpy(p, &h, 2);
      break;
    case GR_BFLOAT16:
      h = gr__f32_to_bf16(f);
      memcpy(p, &h, 2);
      break;
    default: /* integers: the low bytes of u (little and big endian alike) */
      if (es == 1) {
        uint8_t v = (uint8_t)u;
        memcpy(p, &v, 1);
      } else if (es == 4) {
        uint32_t v = (uint32_t)u;
        memcpy(p, &v, 4);
      } else {
        memcpy(p, &u, 8);
      }
    }
  }
}

static void check_pair(const gr__op_map *m, gr_dtype t, gr_op op) {
  MPI_Op mop = gr__op_map_get(m, t, op);
  checks++;
  if (!gr__op_defined(t, op)) {
    if (mop != MPI_OP_NULL)
      FAIL("%s %s is not defined, yet the map gives an op", gr__dtype_name(t), gr__op_name(op));
    return;
  }
  MPI_Datatype dt = gr__mpi_type(t);
  int size = 0;
  if (dt == MPI_DATATYPE_NULL || mop == MPI_OP_NULL || MPI_Type_size(dt, &size) != MPI_SUCCESS ||
      (size_t)size != gr__dtype_size(t)) {
    FAIL("%s %s: no datatype of %zu bytes and op in the map", gr__dtype_name(t), gr__op_name(op),
         gr__dtype_size(t));
    return;
  }
  gr_op kop = op == GR_AVG ? GR_SUM : op; /* AVG reduces as SUM */
  for (int order = 0; order < 2; order++) {
    _Alignas(8) unsigned char a[N * 8], b[N * 8], want[N * 8];
    fill(t, a, order ? ib : ia, order ? fb : fa);
    fill(t, b, order ? ia : ib, order ? fa : fb);
    memcpy(want, b, sizeof want);
    gr__reduce_host(t, kop, want, a, N); /* want = b (op) a, as MPI's inoutvec = in (op) inout */
    int rc = MPI_Reduce_local(a, b, N, dt, mop);
    checks++;
    if (rc != MPI_SUCCESS) {
      FAIL("%s %s: MPI_Reduce_local returned %d", gr__dtype_name(t), gr__op_name(op), rc);
      continue;
    }
    size_t es = gr__dtype_size(t);
    for (int i = 0; i < N; i++)
      if (memcmp(b + (size_t)i * es, want + (size_t)i * es, es) != 0) {
        FAIL("%s %s, element %d (order %d): the map's op and gpurun's kernel differ",
             gr__dtype_name(t), gr__op_name(op), i, order);
        break;
      }
  }
}

/* One element x (op) y with the map's op, into out. */
static void one(const gr__op_map *m, gr_dtype t, gr_op op, const void *x, const void *y,
                void *out) {
  size_t es = gr__dtype_size(t);
  memcpy(out, y, es);
  if (MPI_Reduce_local(x, out, 1, gr__mpi_type(t), gr__op_map_get(m, t, op)) != MPI_SUCCESS)
    FAIL("%s %s: MPI_Reduce_local failed", gr__dtype_name(t), gr__op_name(op));
}

#define SPOT(t, op, T, x, y, want)                                                                 \
  do {                                                                                             \
    T x_ = (x), y_ = (y), w_ = (want), r_[2];                                                      \
    one(&m, t, op, &x_, &y_, &r_[0]);                                                              \
    one(&m, t, op, &y_, &x_, &r_[1]);                                                              \
    checks++;                                                                                      \
    if (memcmp(&r_[0], &w_, sizeof w_) != 0 || memcmp(&r_[1], &w_, sizeof w_) != 0)                \
      FAIL("%s %s of %s and %s: not %s in both orders", gr__dtype_name(t), gr__op_name(op), #x,    \
           #y, #want);                                                                             \
  } while (0)

static void spots(const gr__op_map *mp) {
  gr__op_map m = *mp;
  SPOT(GR_INT8, GR_SUM, int8_t, 100, 100, -56); /* wraps (Open MPI's op/avx saturates) */
  SPOT(GR_INT8, GR_PROD, int8_t, 16, 16, 0);
  SPOT(GR_UINT8, GR_MAX, uint8_t, 135, 0, 135); /* unsigned (MPICH 4.0 compares signed) */
  SPOT(GR_UINT32, GR_MIN, uint32_t, 0x80000000u, 1, 1);
  SPOT(GR_UINT64, GR_MAX, uint64_t, 1ull << 63, 1, 1ull << 63);
  SPOT(GR_INT32, GR_SUM, int32_t, INT32_MAX, 1, INT32_MIN);
  SPOT(GR_INT64, GR_MIN, int64_t, -5, 3, -5);
  uint32_t qnan = 0x7fc00000u, pnan = 0x7f800001u; /* canonical; another payload */
  float fnan, fcanon;
  memcpy(&fnan, &pnan, 4);
  memcpy(&fcanon, &qnan, 4);
  SPOT(GR_FLOAT32, GR_MIN, float, fnan, 1.0f, fcanon); /* NaN propagates, canonical */
  SPOT(GR_FLOAT32, GR_MAX, float, -fnan, 1.0f, fcanon);
  SPOT(GR_FLOAT32, GR_MIN, float, -0.0f, 0.0f, -0.0f); /* -0 below +0 */
  SPOT(GR_FLOAT32, GR_MAX, float, -0.0f, 0.0f, 0.0f);
  SPOT(GR_FLOAT64, GR_MAX, double, -0.0, 0.0, 0.0);
  SPOT(GR_FLOAT64, GR_AVG, double, 0.5, 0.25, 0.75);            /* AVG reduces as SUM */
  SPOT(GR_FLOAT16, GR_SUM, uint16_t, 0x3c00, 0x4000, 0x4200);   /* 1 + 2 = 3 */
  SPOT(GR_FLOAT16, GR_PROD, uint16_t, 0x7bff, 0x4000, 0x7c00);  /* 65504 * 2 = Inf */
  SPOT(GR_FLOAT16, GR_MIN, uint16_t, 0x8000, 0x0000, 0x8000);   /* -0 below +0 */
  SPOT(GR_BFLOAT16, GR_PROD, uint16_t, 0x4040, 0xc000, 0xc0c0); /* 3 * -2 = -6 */
  SPOT(GR_BFLOAT16, GR_SUM, uint16_t, 0x3f80, 0x3b80, 0x3f80);  /* 1 + 2^-8 ties to even 1 */
}

/* ---- failures --------------------------------------------------------------------------------- */
static int all_null(const gr__op_map *m) {
  for (int f = 0; f < GR__OP_MAP_FAMILIES; f++)
    for (int o = 0; o < 4; o++)
      if (m->op[f][o] != MPI_OP_NULL) return 0;
  return 1;
}

static void create_failures(gr_comm *c) {
  int made = GR__OP_MAP_FAMILIES * 4;
  for (int k = 0; k < made; k++) {
    gr__op_map m;
    int before = live_ops;
    creates = 0;
    fail_create_at = k;
    gr_status st = gr__op_map_create(c, &m);
    fail_create_at = -1;
    checks++;
    if (st != GR_ERR_MPI)
      FAIL("MPI_Op_create failing at op %d: status %d, not GR_ERR_MPI", k, (int)st);
    if (!strstr(c->err, "MPI_Op_create for the ") || !strstr(c->err, "failed on rank"))
      FAIL("MPI_Op_create failing at op %d: the sentence \"%s\" does not say so", k, c->err);
    if (live_ops != before || !all_null(&m))
      FAIL("MPI_Op_create failing at op %d: %d op(s) made before it are still there", k,
           live_ops - before);
    if (st == GR_OK) gr__op_map_free(c, &m);
  }
  /* the sentence names the op: the fifth is bf16's sum (fp16's four come first) */
  gr__op_map m;
  creates = 0;
  fail_create_at = 4;
  gr__op_map_create(c, &m);
  fail_create_at = -1;
  checks++;
  if (!strstr(c->err, "MPI_Op_create for the bf16 sum failed on rank"))
    FAIL("the sentence \"%s\" does not name the bf16 sum", c->err);

  /* inside gr_comm_create: the MPI backend's creation fails on every rank alike */
  int before = live_ops;
  gr_comm *x = NULL;
  creates = 0;
  fail_create_at = 6;
  gr_status st = gr_comm_create(MPI_COMM_WORLD, NULL, &x);
  fail_create_at = -1;
  checks++;
  if (st != GR_ERR_MPI || x)
    FAIL("gr_comm_create with a failing MPI_Op_create: status %d, communicator %p", (int)st,
         (void *)x);
  EXPECT_MSG("MPI_Op_create for the bf16 min failed on rank");
  if (live_ops != before) FAIL("gr_comm_create failed, and left %d op(s)", live_ops - before);
  if (x) gr_comm_destroy(x);
}

static void free_failure(gr_comm *c) {
  gr__op_map m;
  int before = live_ops;
  REQUIRE_OK(gr__op_map_create(c, &m));
  if (live_ops != before + GR__OP_MAP_FAMILIES * 4)
    FAIL("gr__op_map_create made %d ops, not %d", live_ops - before, GR__OP_MAP_FAMILIES * 4);
  fail_free = 1;
  gr_status st = gr__op_map_free(c, &m);
  fail_free = 0;
  checks++;
  if (st != GR_ERR_MPI) FAIL("a failing MPI_Op_free: status %d, not GR_ERR_MPI", (int)st);
  if (!strstr(c->err, "MPI_Op_free for the fp16 sum failed on rank"))
    FAIL("a failing MPI_Op_free: the sentence \"%s\" does not name the first op", c->err);
  if (!all_null(&m) || live_ops != before)
    FAIL("a failing MPI_Op_free: %d op(s) left (each is to be freed still)", live_ops - before);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  int P = 0, before = live_ops;
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  gr_comm *c = NULL;
  REQUIRE_OK(gr_comm_create(MPI_COMM_WORLD, NULL, &c));
  if (live_ops == before) FAIL("gr_comm_create made no reduction op");

  gr__op_map m;
  REQUIRE_OK(gr__op_map_create(c, &m));
  for (int t = 0; t < GR__NDTYPES; t++)
    for (int op = 0; op < GR__NOPS; op++)
      check_pair(&m, (gr_dtype)t, (gr_op)op);
  checks++;
  if (gr__op_map_get(&m, (gr_dtype)GR__NDTYPES, GR_SUM) != MPI_OP_NULL ||
      gr__mpi_type((gr_dtype)GR__NDTYPES) != MPI_DATATYPE_NULL)
    FAIL("a dtype outside the enum gets a datatype or an op");
  spots(&m);
  EXPECT_OK(gr__op_map_free(c, &m));
  if (!all_null(&m)) FAIL("gr__op_map_free left an op");

  create_failures(c);
  free_failure(c);

  EXPECT_OK(gr_comm_destroy(c));
  checks++;
  if (live_ops != before) FAIL("%d reduction op(s) left after gr_comm_destroy", live_ops - before);

  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (world_rank == 0)
    printf("test_coll_op_map: %d ranks, %ld checks per rank, %d failures\n", P, checks, total);
  MPI_Finalize();
  return total ? 1 : 0;
}
