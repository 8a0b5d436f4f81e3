/* gpurun-bench-mem: collectives on gr_mem_alloc memory against raw MPI on malloc'd buffers, on one
 * node, with the node's limit beside them. Per size and collective, each repeat times, interleaved
 * in this order (a barrier before each, ITERS calls each, the slowest rank's time):
 *   raw      MPI_Allreduce / MPI_Allgather / MPI_Reduce_scatter_block on malloc'd buffers
 *   private  gr_ on malloc'd buffers (a timeout set: the path a program with a timeout takes)
 *   copyio   the same with GPURUN_SHM_CMA=0: copy in, reduce, copy out through the segment's
 *            slots in pipelined rounds, instead of the single copy by process_vm_readv/writev
 *   mem      gr_ on gr_mem_alloc buffers, out of place
 *   inplace  gr_ on gr_mem_alloc buffers, in place (allreduce only)
 *   limit    what the call must do at least, on buffers in one MPI_Win_allocate_shared window:
 *            a barrier (every input is there), each rank reduces (or copies) its slice of every
 *            rank's input straight into every rank's output, a barrier (no protocol, no agreement,
 *            no checks)
 * Columns: the median over repeats of the per-call time in microseconds, with [min-max]; the
 * ratios to raw of the medians; share = limit / mem (how close the path comes to the limit).
 * Every result is checked exactly (sums of small integers in float32).
 *
 *   gpurun-bench-mem [--min-mib A] [--max-mib B] [--repeats N] [--iters K] [--timeout S] */
#include <gpurun/coll.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { RAW, PRIV, COPYIO, MEM, INPLACE, LIMIT, NCOLS };
static const char *col_name[NCOLS] = {"raw", "private", "copyio", "mem", "inplace", "limit"};
enum { K_ALLREDUCE, K_ALLGATHER, K_REDUCE_SCATTER, NKINDS };
static const char *kind_name[NKINDS] = {"allreduce", "allgather", "reduce_scatter"};

static int rank, P, bad;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Buffers of one column: send and recv of n floats per rank (allgather: recv P*n; reduce-scatter:
 * send P*n). */
typedef struct {
  float *send, *recv;
} bufs;

/* The node limit's window: rank q's send at win_send[q], recv at win_recv[q]. */
static float *win_send[256], *win_recv[256];

static void fill(float *p, size_t n, int r) {
  for (size_t i = 0; i < n; i++)
    p[i] = (float)((r + 1) * ((i % 7) + 1));
}

/* Exact expectations: sum over ranks of (q+1)*(i%7+1) = P(P+1)/2 * (i%7+1). */
static void check(int kind, const float *recv, size_t n, const char *what) {
  float tri = (float)(P * (P + 1) / 2);
  size_t len = kind == K_ALLGATHER ? n * (size_t)P : n;
  for (size_t i = 0; i < len && !bad; i++) {
    float want;
    if (kind == K_ALLGATHER)
      want = (float)((int)(i / n) + 1) * (float)((i % n) % 7 + 1);
    else if (kind == K_REDUCE_SCATTER)
      want = tri * (float)(((size_t)rank * n + i) % 7 + 1);
    else
      want = tri * (float)(i % 7 + 1);
    if (recv[i] != want) {
      fprintf(stderr, "rank %d: %s %s n=%zu: element %zu is %g, expected %g\n", rank,
              kind_name[kind], what, n, i, recv[i], want);
      bad = 1;
    }
  }
}

/* What the call must do at least (see the header): rank r's slice of every rank's input. */
static void limit_call(int kind, size_t n) {
  enum { B = 1024 }; /* 4 KiB blocks: the sum stays in L1 while it is copied out */
  float tmp[B];
  MPI_Barrier(MPI_COMM_WORLD); /* every rank's input is there (the call's first synchronisation) */
  if (kind == K_ALLGATHER) {   /* in pieces that stay in cache while they go to every output */
    for (size_t at = 0; at < n; at += 65536) {
      size_t m = n - at < 65536 ? n - at : 65536;
      for (int q = 0; q < P; q++)
        memcpy(win_recv[q] + (size_t)rank * n + at, win_send[rank] + at, m * sizeof(float));
    }
  } else {
    size_t lo = kind == K_REDUCE_SCATTER ? (size_t)rank * n : n * (size_t)rank / (size_t)P;
    size_t hi = kind == K_REDUCE_SCATTER ? lo + n : n * (size_t)(rank + 1) / (size_t)P;
    for (size_t at = lo; at < hi; at += B) {
      size_t m = hi - at < B ? hi - at : B;
      memcpy(tmp, win_send[0] + at, m * sizeof(float));
      for (int q = 1; q < P; q++) {
        const float *x = win_send[q] + at;
        for (size_t i = 0; i < m; i++)
          tmp[i] += x[i];
      }
      if (kind == K_REDUCE_SCATTER)
        memcpy(win_recv[rank] + (at - lo), tmp, m * sizeof(float));
      else
        for (int q = 0; q < P; q++)
          memcpy(win_recv[q] + at, tmp, m * sizeof(float));
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

static gr_comm *copyio_comm; /* created with GPURUN_SHM_CMA=0 */

static int run_call(int col, int kind, const bufs *b, size_t n, gr_comm *c) {
  if (col == COPYIO) c = copyio_comm;
  float *send = col == INPLACE ? b->recv : b->send;
  if (col == LIMIT) {
    limit_call(kind, n);
    return 0;
  }
  switch (kind) {
  case K_ALLREDUCE:
    if (col == RAW) return MPI_Allreduce(send, b->recv, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    return gr_allreduce(send, b->recv, n, GR_FLOAT32, GR_SUM, c, NULL);
  case K_ALLGATHER:
    if (col == RAW)
      return MPI_Allgather(send, (int)n, MPI_FLOAT, b->recv, (int)n, MPI_FLOAT, MPI_COMM_WORLD);
    return gr_allgather(send, b->recv, n, GR_FLOAT32, c, NULL);
  default:
    if (col == RAW)
      return MPI_Reduce_scatter_block(send, b->recv, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    return gr_reduce_scatter(send, b->recv, n, GR_FLOAT32, GR_SUM, c, NULL);
  }
}

static void prepare(int col, int kind, const bufs *b, size_t n) {
  size_t sn = kind == K_REDUCE_SCATTER ? n * (size_t)P : n;
  if (col == INPLACE)
    fill(b->recv, n, rank);
  else
    fill(col == LIMIT ? win_send[rank] : b->send, sn, rank);
}

static void verify(int col, int kind, const bufs *b, size_t n) {
  check(kind, col == LIMIT ? win_recv[rank] : b->recv, n, col_name[col]);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  int min_mib = 1, max_mib = 16, repeats = 7, iters = 10;
  double timeout = 60;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--min-mib"))
      min_mib = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--max-mib"))
      max_mib = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--repeats"))
      repeats = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--iters"))
      iters = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--timeout"))
      timeout = atof(argv[i + 1]);
  }
  if (min_mib < 1 || max_mib < min_mib || max_mib > 1024 || repeats < 1 || repeats > 99 ||
      iters < 1 || P > 256) {
    if (!rank)
      fprintf(stderr, "usage: gpurun-bench-mem [--min-mib A] [--max-mib B] [--repeats N (1-99)] "
                      "[--iters K] [--timeout S]\n");
    MPI_Finalize();
    return 2;
  }
  gr_comm_config cfg;
  gr_comm_config_init(&cfg);
  cfg.backend = GR_BACKEND_MPI;
  cfg.timeout_s = timeout;
  gr_comm *c = NULL;
  if (gr_comm_create(MPI_COMM_WORLD, &cfg, &c) != GR_OK) {
    fprintf(stderr, "rank %d: gr_comm_create: %s\n", rank, gr_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  setenv("GPURUN_SHM_CMA", "0", 1); /* read at creation */
  if (gr_comm_create(MPI_COMM_WORLD, &cfg, &copyio_comm) != GR_OK) {
    fprintf(stderr, "rank %d: gr_comm_create: %s\n", rank, gr_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  unsetenv("GPURUN_SHM_CMA");
  size_t max_n = (size_t)max_mib << 18; /* floats */
  size_t big = max_n * (size_t)P;       /* the larger side of allgather and reduce-scatter */
  bufs priv = {malloc(big * sizeof(float)), malloc(big * sizeof(float))}, mem = {0};
  if (gr_mem_alloc(c, big * sizeof(float), (void **)&mem.send) != GR_OK ||
      gr_mem_alloc(c, big * sizeof(float), (void **)&mem.recv) != GR_OK) {
    fprintf(stderr, "rank %d: gr_mem_alloc: %s\n", rank, gr_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int nsize;
  MPI_Comm_size(node, &nsize);
  if (nsize != P) {
    if (!rank) fprintf(stderr, "gpurun-bench-mem: every rank must be on one node\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  float *wbase = NULL;
  MPI_Win win;
  MPI_Win_allocate_shared((MPI_Aint)(2 * big * sizeof(float)), sizeof(float), MPI_INFO_NULL, node,
                          &wbase, &win);
  for (int q = 0; q < P; q++) {
    MPI_Aint sz;
    int du;
    float *p;
    MPI_Win_shared_query(win, q, &sz, &du, &p);
    win_send[q] = p;
    win_recv[q] = p + big;
  }
  if (!priv.send || !priv.recv) MPI_Abort(MPI_COMM_WORLD, 2);
  memset(priv.send, 0, big * sizeof(float)), memset(priv.recv, 0, big * sizeof(float));
  memset(win_send[rank], 0, 2 * big * sizeof(float));
  if (!rank) {
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    printf("# gpurun-bench-mem: %d ranks on one node (%ld cores%s), %d repeats of %d calls, "
           "float32 sum, timeout %g s\n",
           P, ncpu, ncpu < P ? ", oversubscribed" : "", repeats, iters, timeout);
    printf("# time per call in us: median [min-max] over repeats; x = median / raw's median; "
           "share = limit / mem\n");
    printf("%-14s %5s %21s %27s %27s %27s %27s %21s %6s\n", "collective", "MiB", "raw", "private",
           "copyio", "mem", "inplace", "limit", "share");
  }
  for (int kind = 0; kind < NKINDS; kind++)
    for (int mib = min_mib; mib <= max_mib; mib *= 2) {
      size_t n = (size_t)mib << 18;
      if (kind != K_ALLREDUCE) n /= (size_t)P; /* the same bytes moved per rank as the allreduce */
      double t[NCOLS][99];
      for (int rep = 0; rep < repeats; rep++)
        for (int col = 0; col < NCOLS; col++) {
          if (col == INPLACE && kind != K_ALLREDUCE) continue;
          const bufs *b = col == RAW || col == PRIV || col == COPYIO ? &priv : &mem;
          prepare(col, kind, b, n);
          if (run_call(col, kind, b, n, c) != 0) { /* warm-up, and the checked result */
            fprintf(stderr, "rank %d: %s %s failed: %s\n", rank, kind_name[kind], col_name[col],
                    gr_last_error());
            MPI_Abort(MPI_COMM_WORLD, 1);
          }
          verify(col, kind, b, n);
          MPI_Barrier(MPI_COMM_WORLD);
          double t0 = now();
          for (int it = 0; it < iters; it++) /* (in place, the result grows: only time counts) */
            run_call(col, kind, b, n, c);
          double dt = (now() - t0) / iters, worst;
          MPI_Allreduce(&dt, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
          t[col][rep] = worst * 1e6;
        }
      if (rank) continue;
      double med[NCOLS] = {0}, lo[NCOLS] = {0}, hi[NCOLS] = {0};
      for (int col = 0; col < NCOLS; col++) {
        if (col == INPLACE && kind != K_ALLREDUCE) continue;
        qsort(t[col], (size_t)repeats, sizeof(double), cmp);
        med[col] = t[col][repeats / 2], lo[col] = t[col][0], hi[col] = t[col][repeats - 1];
      }
      printf("%-14s %5d %8.1f [%5.0f-%5.0f]", kind_name[kind], mib, med[RAW], lo[RAW], hi[RAW]);
      for (int col = PRIV; col <= INPLACE; col++) {
        if (col == INPLACE && kind != K_ALLREDUCE)
          printf(" %27s", "-");
        else
          printf(" %8.1f [%5.0f-%5.0f] %4.2fx", med[col], lo[col], hi[col], med[col] / med[RAW]);
      }
      printf(" %8.1f [%5.0f-%5.0f] %5.2f\n", med[LIMIT], lo[LIMIT], hi[LIMIT],
             med[LIMIT] / med[MEM]);
      fflush(stdout);
    }
  MPI_Win_free(&win);
  MPI_Comm_free(&node);
  gr_mem_free(c, mem.recv);
  gr_mem_free(c, mem.send);
  gr_comm_destroy(c);
  gr_comm_destroy(copyio_comm);
  free(priv.send), free(priv.recv);
  int any = 0;
  MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (!rank) printf("results %s\n", any ? "WRONG" : "exact");
  MPI_Finalize();
  return any ? 1 : 0;
}
