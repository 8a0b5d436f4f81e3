/* gpurun-bench-coll: nccl-tests style benchmark of gr_* collectives, with --compare running the
 * same operation through raw MPI (MPI_Allreduce, ...) on the same buffers in the same run.
 *
 *   mpirun -np 4 gpurun-bench-coll -b 8 -e 64M -f 4 -o allreduce --compare
 *
 * Options: -b/-e min/max bytes (K, M, G suffixes), -f factor, -n iterations per round, -w warmup
 * iterations, -R rounds, -c 0|1 check results (#wrong), -o allreduce|broadcast|reduce|allgather|
 * reduce_scatter|alltoall|sendrecv, -d float|double|half|bfloat16|int32|int8|..., -r sum|prod|min|max|avg,
 * --root N, --backend auto|mpi|nccl, --timeout S (0: the MPI backend may block inside MPI, as raw
 * MPI does; > 0: non-blocking requests and a test loop, which the timeout needs), --compare,
 * --json FILE, --vs ALGO (compare with gr_* on a second communicator created with
 * GPURUN_COLL_ALGO=ALGO instead of raw MPI, e.g. hierarchical vs flat: the columns after max(us)
 * then hold that communicator's figures), --nonblocking (each call a request started and waited
 * at once, gr_iallreduce/gr_ibroadcast/gr_iallgather + gr_wait, raw MPI_Iallreduce/MPI_Ibcast/
 * MPI_Iallgather + MPI_Wait: the cost of a request's start, refusal route included).
 * Timing: rounds alternate gpurun and raw MPI (order flipped every round) so that a noisy, shared
 * machine hits both alike; each round's time per iteration is the slowest rank's; the table shows
 * the median round, and OSU-style avg/min/max over ranks for that round; with --compare also the
 * best round of each (the least disturbed, the fairer figure for a thin wrapper on a busy host). busbw uses nccl-tests'
 * factors: allreduce 2(n-1)/n; allgather, reduce_scatter, alltoall (n-1)/n; others 1. */
#include <gpurun/coll.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gr_config.h"
#include "gr_dtype.h"
#include "gr_param.h"
#if GPURUN_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

typedef enum { B_ALLREDUCE, B_BCAST, B_REDUCE, B_ALLGATHER, B_REDSCAT, B_ALLTOALL, B_SENDRECV } bop;
static const char *const bop_names[] = {"allreduce",      "broadcast", "reduce",  "allgather",
                                        "reduce_scatter", "alltoall",  "sendrecv"};

typedef struct {
  size_t minb, maxb;
  double factor;
  int iters, warmup, rounds, check, root, compare;
  bop op;
  gr_dtype dt;
  gr_op redop;
  gr_backend backend;
  double timeout;
  const char *json;
  const char *vs;  /* --vs ALGO: the comparison is gr_* with GPURUN_COLL_ALGO=ALGO */
  int nonblocking; /* --nonblocking: gr_i* + gr_wait against MPI_I* + MPI_Wait */
} opts;

static int rank, P;

static size_t parse_size(const char *s) {
  char *end;
  double v = strtod(s, &end);
  switch (*end) {
  case 'K':
  case 'k':
    v *= 1024;
    break;
  case 'M':
  case 'm':
    v *= 1024 * 1024;
    break;
  case 'G':
  case 'g':
    v *= 1024.0 * 1024 * 1024;
    break;
  default:
    break;
  }
  return (size_t)v;
}

static int lookup(const char *s, const char *const *names, int n) {
  for (int i = 0; i < n; i++)
    if (strcmp(s, names[i]) == 0) return i;
  return -1;
}

static void usage(void) {
  if (rank == 0)
    fprintf(stderr, "usage: gpurun-bench-coll [-b min] [-e max] [-f factor] [-n iters] [-w warmup] "
                    "[-R rounds] [-c 0|1] [-o op] [-d dtype] [-r redop] [--root N] "
                    "[--backend auto|mpi|nccl] [--timeout S] [--compare] [--json FILE] [--vs ALGO] "
                    "[--nonblocking]\n");
  MPI_Finalize();
  exit(2);
}

static void parse(int argc, char **argv, opts *o) {
  static const char *const dnames[] = {"int8",   "uint8", "int32",    "uint32", "int64",
                                       "uint64", "half",  "bfloat16", "float",  "double"};
  static const char *const rnames[] = {"sum", "prod", "min", "max", "avg"};
  *o = (opts){8,      8 << 20,         4,  50,   10,   5, 1, 0, 0, B_ALLREDUCE, GR_FLOAT32,
              GR_SUM, GR_BACKEND_AUTO, -1, NULL, NULL, 0};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED()                                                                                     \
  do {                                                                                             \
    if (!v) usage();                                                                               \
    i++;                                                                                           \
  } while (0)
    if (!strcmp(a, "-b")) {
      NEED();
      o->minb = parse_size(v);
    } else if (!strcmp(a, "-e")) {
      NEED();
      o->maxb = parse_size(v);
    } else if (!strcmp(a, "-f")) {
      NEED();
      o->factor = atof(v);
    } else if (!strcmp(a, "-n")) {
      NEED();
      o->iters = atoi(v);
    } else if (!strcmp(a, "-w")) {
      NEED();
      o->warmup = atoi(v);
    } else if (!strcmp(a, "-R")) {
      NEED();
      o->rounds = atoi(v);
    } else if (!strcmp(a, "-c")) {
      NEED();
      o->check = atoi(v);
    } else if (!strcmp(a, "--root")) {
      NEED();
      o->root = atoi(v);
    } else if (!strcmp(a, "-o")) {
      NEED();
      int k = lookup(v, bop_names, 7);
      if (k < 0) usage();
      o->op = (bop)k;
    } else if (!strcmp(a, "-d")) {
      NEED();
      int k = lookup(v, dnames, 10);
      if (k < 0)
        k = lookup(v,
                   (const char *const[]){"i8", "u8", "i32", "u32", "i64", "u64", "float16", "bf16",
                                         "float32", "float64"},
                   10);
      if (k < 0) usage();
      o->dt = (gr_dtype)k;
    } else if (!strcmp(a, "-r")) {
      NEED();
      int k = lookup(v, rnames, 5);
      if (k < 0) usage();
      o->redop = (gr_op)k;
    } else if (!strcmp(a, "--backend")) {
      NEED();
      o->backend = !strcmp(v, "mpi")    ? GR_BACKEND_MPI
                   : !strcmp(v, "nccl") ? GR_BACKEND_NCCL
                                        : GR_BACKEND_AUTO;
    } else if (!strcmp(a, "--timeout")) {
      NEED();
      o->timeout = atof(v);
    } else if (!strcmp(a, "--compare"))
      o->compare = 1;
    else if (!strcmp(a, "--nonblocking"))
      o->nonblocking = 1;
    else if (!strcmp(a, "--json")) {
      NEED();
      o->json = v;
    } else if (!strcmp(a, "--vs")) {
      NEED();
      o->vs = v;
      o->compare = 1;
    } else
      usage();
  }
  if (o->factor <= 1) o->factor = 2;
  if (o->iters < 1) o->iters = 1;
  if (o->rounds < 1) o->rounds = 1;
  if (o->root < 0 || o->root >= P) o->root = 0;
  if (o->nonblocking && o->op != B_ALLREDUCE && o->op != B_BCAST && o->op != B_ALLGATHER) {
    if (rank == 0)
      fprintf(stderr, "gpurun-bench-coll: --nonblocking: coll.h has requests for allreduce, "
                      "broadcast and allgather only\n");
    MPI_Finalize();
    exit(2);
  }
}

static MPI_Datatype mpi_type(gr_dtype t) {
  static MPI_Datatype m[10];
  m[0] = MPI_INT8_T, m[1] = MPI_UINT8_T, m[2] = MPI_INT32_T, m[3] = MPI_UINT32_T,
  m[4] = MPI_INT64_T;
  m[5] = MPI_UINT64_T, m[6] = MPI_UINT16_T, m[7] = MPI_UINT16_T, m[8] = MPI_FLOAT,
  m[9] = MPI_DOUBLE;
  return m[t];
}
static MPI_Op mpi_op(gr_op op) {
  return op == GR_PROD ? MPI_PROD : op == GR_MIN ? MPI_MIN : op == GR_MAX ? MPI_MAX : MPI_SUM;
}

/* Buffer sizes in elements for count (per-rank count as the gr_ call takes it). */
static void sizes(const opts *o, size_t count, size_t *sn, size_t *rn) {
  switch (o->op) {
  case B_ALLGATHER:
    *sn = count;
    *rn = count * (size_t)P;
    break;
  case B_REDSCAT:
    *sn = count * (size_t)P;
    *rn = count;
    break;
  case B_ALLTOALL:
    *sn = *rn = count * (size_t)P;
    break;
  default:
    *sn = *rn = count;
  }
}

/* count: elements per the gr_ call from the message size (nccl-tests: size = the larger buffer
 * for allgather/reduce_scatter, i.e. count * nranks * elsize). */
static size_t count_for(const opts *o, size_t bytes) {
  size_t es = gr__dtype_size(o->dt);
  if (o->op == B_ALLGATHER || o->op == B_REDSCAT || o->op == B_ALLTOALL)
    return bytes / es / (size_t)P;
  return bytes / es;
}

/* --nonblocking: the request started and waited at once. */
static gr_status run_gr_request(const opts *o, gr_comm *c, const void *s, void *r, size_t n) {
  gr_request *q = NULL;
  gr_status st = o->op == B_ALLREDUCE ? gr_iallreduce(s, r, n, o->dt, o->redop, c, NULL, &q)
                 : o->op == B_BCAST   ? gr_ibroadcast(s, r, n, o->dt, o->root, c, NULL, &q)
                                      : gr_iallgather(s, r, n, o->dt, c, NULL, &q);
  return st == GR_OK && q ? gr_wait(&q) : st;
}

static int run_mpi_request(const opts *o, MPI_Comm m, const void *s, void *r, size_t n) {
  MPI_Datatype t = mpi_type(o->dt);
  int k = (int)n, rc;
  MPI_Request q = MPI_REQUEST_NULL;
  if (o->op == B_ALLREDUCE) {
    rc = MPI_Iallreduce(s, r, k, t, mpi_op(o->redop), m, &q);
  } else if (o->op == B_BCAST) {
    if (rank == o->root && s != r) memcpy(r, s, n * gr__dtype_size(o->dt));
    rc = MPI_Ibcast(r, k, t, o->root, m, &q);
  } else {
    rc = MPI_Iallgather(s, k, t, r, k, t, m, &q);
  }
  return rc == MPI_SUCCESS ? MPI_Wait(&q, MPI_STATUS_IGNORE) : rc;
}

static gr_status run_gr(const opts *o, gr_comm *c, const void *s, void *r, size_t n) {
  if (o->nonblocking) return run_gr_request(o, c, s, r, n);
  switch (o->op) {
  case B_ALLREDUCE:
    return gr_allreduce(s, r, n, o->dt, o->redop, c, NULL);
  case B_BCAST:
    return gr_broadcast(s, r, n, o->dt, o->root, c, NULL);
  case B_REDUCE:
    return gr_reduce(s, r, n, o->dt, o->redop, o->root, c, NULL);
  case B_ALLGATHER:
    return gr_allgather(s, r, n, o->dt, c, NULL);
  case B_REDSCAT:
    return gr_reduce_scatter(s, r, n, o->dt, o->redop, c, NULL);
  case B_ALLTOALL:
    return gr_alltoall(s, r, n, o->dt, c, NULL);
  case B_SENDRECV: {
    gr_status st = gr_group_start();
    gr_send(s, n, o->dt, (rank + 1) % P, c, NULL);
    gr_recv(r, n, o->dt, (rank + P - 1) % P, c, NULL);
    return st == GR_OK ? gr_group_end() : st;
  }
  }
  return GR_ERR_INVALID;
}

static int run_mpi(const opts *o, MPI_Comm m, const void *s, void *r, size_t n) {
  if (o->nonblocking) return run_mpi_request(o, m, s, r, n);
  MPI_Datatype t = mpi_type(o->dt);
  int k = (int)n;
  switch (o->op) {
  case B_ALLREDUCE:
    return MPI_Allreduce(s, r, k, t, mpi_op(o->redop), m);
  case B_BCAST:
    if (rank == o->root && s != r) memcpy(r, s, n * gr__dtype_size(o->dt));
    return MPI_Bcast(r, k, t, o->root, m);
  case B_REDUCE:
    return MPI_Reduce(s, r, k, t, mpi_op(o->redop), o->root, m);
  case B_ALLGATHER:
    return MPI_Allgather(s, k, t, r, k, t, m);
  case B_REDSCAT:
    return MPI_Reduce_scatter_block(s, r, k, t, mpi_op(o->redop), m);
  case B_ALLTOALL:
    return MPI_Alltoall(s, k, t, r, k, t, m);
  case B_SENDRECV:
    return MPI_Sendrecv(s, k, t, (rank + 1) % P, 0, r, k, t, (rank + P - 1) % P, 0, m,
                        MPI_STATUS_IGNORE);
  }
  return MPI_ERR_OTHER;
}

static double bus_factor(bop op) {
  if (op == B_ALLREDUCE) return P > 1 ? 2.0 * (P - 1) / P : 0;
  if (op == B_ALLGATHER || op == B_REDSCAT || op == B_ALLTOALL)
    return P > 1 ? (double)(P - 1) / P : 0;
  return 1;
}

/* Small integers per element, exact in every type; the check recomputes the expected value. */
static double input(size_t i, int r) { return (double)((i + (size_t)r) % 5); }
static void fill(gr_dtype t, void *b, size_t n, int r) {
  for (size_t i = 0; i < n; i++) {
    double v = input(i, r);
    switch (t) {
    case GR_FLOAT16:
      ((uint16_t *)b)[i] = gr__f32_to_f16((float)v);
      break;
    case GR_BFLOAT16:
      ((uint16_t *)b)[i] = gr__f32_to_bf16((float)v);
      break;
    case GR_FLOAT32:
      ((float *)b)[i] = (float)v;
      break;
    case GR_FLOAT64:
      ((double *)b)[i] = v;
      break;
    case GR_INT8:
    case GR_UINT8:
      ((uint8_t *)b)[i] = (uint8_t)v;
      break;
    case GR_INT32:
    case GR_UINT32:
      ((uint32_t *)b)[i] = (uint32_t)v;
      break;
    default:
      ((uint64_t *)b)[i] = (uint64_t)v;
      break;
    }
  }
}
static double get(gr_dtype t, const void *b, size_t i) {
  switch (t) {
  case GR_FLOAT16:
    return gr__f16_to_f32(((const uint16_t *)b)[i]);
  case GR_BFLOAT16:
    return gr__bf16_to_f32(((const uint16_t *)b)[i]);
  case GR_FLOAT32:
    return ((const float *)b)[i];
  case GR_FLOAT64:
    return ((const double *)b)[i];
  case GR_INT8:
    return ((const int8_t *)b)[i];
  case GR_UINT8:
    return ((const uint8_t *)b)[i];
  case GR_INT32:
    return ((const int32_t *)b)[i];
  case GR_UINT32:
    return ((const uint32_t *)b)[i];
  case GR_INT64:
    return (double)((const int64_t *)b)[i];
  default:
    return (double)((const uint64_t *)b)[i];
  }
}
static double reduced(const opts *o, size_t i) {
  double acc = input(i, 0);
  for (int r = 1; r < P; r++) {
    double v = input(i, r);
    switch (o->redop) {
    case GR_PROD:
      acc *= v;
      break;
    case GR_MIN:
      acc = v < acc ? v : acc;
      break;
    case GR_MAX:
      acc = v > acc ? v : acc;
      break;
    default:
      acc += v;
    }
  }
  return o->redop == GR_AVG ? acc / P : acc;
}

/* Wrong elements on this rank after one call with fresh inputs (in place when inplace). */
static long check_once(const opts *o, gr_comm *c, void *s, void *r, size_t n, int inplace) {
  size_t sn, rn;
  sizes(o, n, &sn, &rn);
  size_t es = gr__dtype_size(o->dt);
  fill(o->dt, s, sn, rank);
  memset(r, 0, rn * es);
  const void *src = s;
  void *dst = r;
  if (inplace) {
    if (o->op == B_ALLGATHER) {
      dst = s;
      src = (char *)s + (size_t)rank * n * es;
      fill(o->dt, (void *)src, n, rank);
    } else if (o->op == B_REDSCAT) {
      dst = (char *)s + (size_t)rank * n * es;
    } else if (o->op != B_SENDRECV)
      dst = s;
  }
  if (run_gr(o, c, src, dst, n) != GR_OK) return (long)rn;
  gr_comm_synchronize(c, NULL);
  long wrong = 0;
  int is_root = rank == o->root;
  for (size_t i = 0; i < rn; i++) {
    double want;
    switch (o->op) {
    case B_ALLREDUCE:
      want = reduced(o, i);
      break;
    case B_BCAST:
      want = input(i, o->root);
      break;
    case B_REDUCE:
      if (!is_root) continue;
      want = reduced(o, i);
      break;
    case B_ALLGATHER:
      want = input(i % (n ? n : 1), (int)(i / (n ? n : 1)));
      break;
    case B_REDSCAT:
      want = reduced(o, (size_t)rank * n + i);
      break;
    case B_ALLTOALL:
      want = input((size_t)rank * n + i % (n ? n : 1), (int)(i / (n ? n : 1)));
      break;
    default:
      want = input(i, (rank + P - 1) % P);
      break;
    }
    double got = get(o->dt, dst, i);
    double tol =
        (o->redop == GR_AVG && o->op != B_BCAST && o->op != B_ALLGATHER && o->op != B_ALLTOALL)
            ? 1e-2 * (want < 0 ? -want : want) + 1e-2
            : 0;
    if (got - want > tol || want - got > tol) wrong++;
  }
  return wrong;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

typedef struct {
  double t, tmin, tavg;
} timing; /* seconds per iteration: max/min/avg over ranks */

static gr_comm *vs_comm; /* --vs: the second communicator */

/* which: 0 = gpurun, 1 = raw MPI (or gpurun on vs_comm). */
static double run_iters(const opts *o, int which, gr_comm *c, MPI_Comm m, const void *s, void *r,
                        size_t n, int iters) {
  if (which == 1 && vs_comm) which = 0, c = vs_comm;
  MPI_Barrier(m);
  double t0 = MPI_Wtime();
  for (int i = 0; i < iters; i++) {
    if (which == 0) {
      if (run_gr(o, c, s, r, n) != GR_OK) {
        fprintf(stderr, "rank %d: %s\n", rank, gr_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
    } else {
      run_mpi(o, m, s, r, n);
    }
  }
  if (which == 0) gr_comm_synchronize(c, NULL);
  return (MPI_Wtime() - t0) / iters;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  opts o;
  parse(argc, argv, &o);
  gr_comm_config cfg;
  gr_comm_config_init(&cfg);
  cfg.backend = o.backend;
  if (o.timeout >= 0) cfg.timeout_s = o.timeout;
  gr_comm *c = NULL;
  if (gr_comm_create(MPI_COMM_WORLD, &cfg, &c) != GR_OK) {
    fprintf(stderr, "rank %d: %s\n", rank, gr_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Comm raw;
  MPI_Comm_dup(MPI_COMM_WORLD, &raw);
  if (o.vs) { /* GPURUN_COLL_ALGO is read at creation: the second communicator gets ALGO */
    const char *algo_var = gr__param_name(GR_PARAM_COLL_ALGO);
    const char *was = gr__param_raw(GR_PARAM_COLL_ALGO);
    char *keep = was ? strdup(was) : NULL;
    setenv(algo_var, o.vs, 1);
    if (gr_comm_create(MPI_COMM_WORLD, &cfg, &vs_comm) != GR_OK) {
      fprintf(stderr, "rank %d: %s\n", rank, gr_last_error());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (keep)
      setenv(algo_var, keep, 1);
    else
      unsetenv(algo_var);
    free(keep);
  }
  size_t es = gr__dtype_size(o.dt);
  size_t maxn = count_for(&o, o.maxb) + 1, sn, rn;
  sizes(&o, maxn, &sn, &rn);
  size_t big = (sn > rn ? sn : rn) * es + 64; /* in place, one buffer holds both sides */
  void *s, *r, *s2;
#if GPURUN_HAVE_CUDA
  /* NCCL needs device memory; managed memory also lets the check read it here. */
  if (gr_comm_backend(c) == GR_BACKEND_NCCL) {
    if (cudaMallocManaged(&s, big, cudaMemAttachGlobal) != cudaSuccess ||
        cudaMallocManaged(&r, big, cudaMemAttachGlobal) != cudaSuccess ||
        cudaMallocManaged(&s2, big, cudaMemAttachGlobal) != cudaSuccess) {
      fprintf(stderr, "cudaMallocManaged(%zu) failed\n", big);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  } else
#endif
  {
    s = malloc(big), r = malloc(big), s2 = malloc(big);
  }
  fill(o.dt, s, sn, rank);
  memset(r, 0, rn * es);
  FILE *js = NULL;
  if (o.json && rank == 0) {
    js = fopen(o.json, "w");
    if (js)
      fprintf(js,
              "{\"op\": \"%s\", \"ranks\": %d, \"backend\": \"%s\", \"dtype\": \"%s\", "
              "\"timeout_s\": %g, \"results\": [",
              bop_names[o.op], P, gr_comm_backend(c) == GR_BACKEND_NCCL ? "nccl" : "mpi",
              gr__dtype_name(o.dt), cfg.timeout_s);
  }
  if (rank == 0) {
    printf("# gpurun-bench-coll: %s%s, %d ranks, backend %s, timeout %g s, %d rounds x %d "
           "iterations, median round\n",
           bop_names[o.op], o.nonblocking ? " (non-blocking: start + wait)" : "", P,
           gr_comm_backend(c) == GR_BACKEND_NCCL ? "nccl" : "mpi", cfg.timeout_s, o.rounds,
           o.iters);
    if (o.vs) {
      const char *algo = gr__param_raw(GR_PARAM_COLL_ALGO);
      printf("# GPURUN_COLL_ALGO=%.16s (time, in:time, avg/min/max) vs GPURUN_COLL_ALGO=%.16s, "
             "rounds alternating\n",
             algo ? algo : "auto", o.vs);
    }
    printf("#%11s %12s %8s %6s %5s %10s %8s %8s %6s %10s %8s %8s %6s %9s %9s %9s", "size", "count",
           "type", "redop", "root", "time(us)", "algbw", "busbw", "#wrong", "in:time", "algbw",
           "busbw", "#wrong", "avg(us)", "min(us)", "max(us)");
    if (o.vs) {
      char t[24], b[24];
      snprintf(t, sizeof t, "%.6s(us)", o.vs);
      snprintf(b, sizeof b, "%.6sbest", o.vs);
      printf(" %10s %7s %9s %9s %9s %7s", t, "ratio", "diff(us)", "best(us)", b, "ratio");
    } else if (o.compare)
      printf(" %10s %7s %9s %9s %9s %7s", "mpi(us)", "ratio", "diff(us)", "best(us)", "mpibest",
             "ratio");
    printf("\n");
  }
  int first = 1;
  for (size_t bytes = o.minb, next; bytes <= o.maxb; bytes = next) {
    next = (size_t)((double)bytes * o.factor);
    if (next <= bytes) next = bytes + 1;
    if (bytes < o.maxb && next > o.maxb) next = o.maxb;
    size_t n = count_for(&o, bytes);
    size_t msg = (o.op == B_ALLGATHER || o.op == B_REDSCAT || o.op == B_ALLTOALL)
                     ? n * es * (size_t)P
                     : n * es;
    int iters = o.iters;
    if (msg >= (1u << 20)) iters = iters / 5 > 2 ? iters / 5 : 2; /* keep big sizes short */
    for (int w = 0; w < o.warmup; w++) {
      run_gr(&o, c, s, r, n);
      if (o.compare) run_mpi(&o, raw, s, r, n);
    }
    gr_comm_synchronize(c, NULL);
    double *tg = malloc(sizeof(double) * (size_t)o.rounds),
           *tm = malloc(sizeof(double) * (size_t)o.rounds);
    double *tgmin = malloc(sizeof(double) * (size_t)o.rounds),
           *tgavg = malloc(sizeof(double) * (size_t)o.rounds);
    double tin = 0;
    for (int k = 0; k < o.rounds; k++) {
      for (int pass = 0; pass < 2; pass++) {
        int which = (pass + k) % 2; /* flip the order each round */
        if (which == 1 && !o.compare) continue;
        double t = run_iters(&o, which, c, raw, s, r, n, iters), tmax, tmin, tsum;
        MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        MPI_Allreduce(&t, &tmin, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
        MPI_Allreduce(&t, &tsum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        if (which == 0)
          tg[k] = tmax, tgmin[k] = tmin, tgavg[k] = tsum / P;
        else
          tm[k] = tmax;
      }
    }
    /* in place: one round of the same length */
    {
      void *ip = s2;
      memcpy(s2, s, sn * es);
      void *dst = o.op == B_ALLGATHER ? ip
                  : o.op == B_REDSCAT ? (char *)ip + (size_t)rank * n * es
                                      : ip;
      const void *src = o.op == B_ALLGATHER ? (char *)ip + (size_t)rank * n * es : ip;
      if (o.op == B_SENDRECV) dst = r;
      for (int w = 0; w < o.warmup; w++)
        run_gr(&o, c, src, dst, n);
      double t = run_iters(&o, 0, c, raw, src, dst, n, iters);
      MPI_Allreduce(&t, &tin, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    }
    /* median round of gpurun (with its min/avg), median of raw MPI */
    int *idx = malloc(sizeof(int) * (size_t)o.rounds);
    double *sorted = malloc(sizeof(double) * (size_t)o.rounds);
    memcpy(sorted, tg, sizeof(double) * (size_t)o.rounds);
    qsort(sorted, (size_t)o.rounds, sizeof(double), cmp_d);
    double med = sorted[o.rounds / 2], medmin = 0;
    for (int k = 0; k < o.rounds; k++)
      if (tg[k] == med) {
        medmin = tgmin[k];
        break;
      }
    double mmed = 0, gbest = sorted[0], mbest = 0;
    if (o.compare) {
      memcpy(sorted, tm, sizeof(double) * (size_t)o.rounds);
      qsort(sorted, (size_t)o.rounds, sizeof(double), cmp_d);
      mmed = sorted[o.rounds / 2];
      mbest = sorted[0];
    }
    long wrong[2] = {0, 0}, wsum[2] = {0, 0};
    if (o.check) {
      wrong[0] = check_once(&o, c, s2, r, n, 0);
      wrong[1] = check_once(&o, c, s2, r, n, 1);
      fill(o.dt, s, sn, rank);
    }
    MPI_Allreduce(wrong, wsum, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    double algbw = med > 0 ? (double)msg / med / 1e9 : 0,
           inalg = tin > 0 ? (double)msg / tin / 1e9 : 0;
    if (rank == 0) {
      char root[8];
      snprintf(root, sizeof root, "%d", (o.op == B_BCAST || o.op == B_REDUCE) ? o.root : -1);
      const char *red = (o.op == B_ALLREDUCE || o.op == B_REDUCE || o.op == B_REDSCAT)
                            ? gr__op_name(o.redop)
                            : "none";
      double medavg = 0;
      for (int k = 0; k < o.rounds; k++)
        if (tg[k] == med) {
          medavg = tgavg[k];
          break;
        }
      printf("%12zu %12zu %8s %6s %5s %10.2f %8.3f %8.3f %6ld %10.2f %8.3f %8.3f %6ld %9.2f %9.2f "
             "%9.2f",
             msg, n, gr__dtype_name(o.dt), red, root, med * 1e6, algbw, algbw * bus_factor(o.op),
             o.check ? wsum[0] : -1L, tin * 1e6, inalg, inalg * bus_factor(o.op),
             o.check ? wsum[1] : -1L, medavg * 1e6, medmin * 1e6, med * 1e6);
      if (o.compare)
        printf(" %10.2f %7.3f %9.2f %9.2f %9.2f %7.3f", mmed * 1e6, mmed > 0 ? med / mmed : 0,
               (med - mmed) * 1e6, gbest * 1e6, mbest * 1e6, mbest > 0 ? gbest / mbest : 0);
      printf("\n");
      fflush(stdout);
      if (js) {
        fprintf(js,
                "%s\n {\"size\": %zu, \"count\": %zu, \"time_us\": %.3f, \"min_us\": %.3f, "
                "\"avg_us\": %.3f, "
                "\"algbw\": %.4f, \"busbw\": %.4f, \"inplace_time_us\": %.3f, \"wrong\": %ld, "
                "\"inplace_wrong\": %ld",
                first ? "" : ",", msg, n, med * 1e6, medmin * 1e6, medavg * 1e6, algbw,
                algbw * bus_factor(o.op), tin * 1e6, o.check ? wsum[0] : -1L,
                o.check ? wsum[1] : -1L);
        if (o.compare)
          fprintf(
              js,
              ", \"mpi_time_us\": %.3f, \"ratio\": %.4f, \"best_us\": %.3f, \"mpi_best_us\": %.3f",
              mmed * 1e6, mmed > 0 ? med / mmed : 0, gbest * 1e6, mbest * 1e6);
        fputs("}", js);
      }
    }
    first = 0;
    free(tg), free(tm), free(tgmin), free(tgavg), free(idx), free(sorted);
    if (bytes == o.maxb) break;
  }
  if (js) {
    fputs("\n]}\n", js);
    fclose(js);
  }
#if GPURUN_HAVE_CUDA
  if (gr_comm_backend(c) == GR_BACKEND_NCCL)
    cudaFree(s), cudaFree(r), cudaFree(s2);
  else
#endif
    free(s), free(r), free(s2);
  MPI_Comm_free(&raw);
  gr_comm_destroy(c);
  gr_comm_destroy(vs_comm);
  MPI_Finalize();
  return 0;
}
