/* nccl_side_by_side: gr_allreduce on the NCCL backend against raw ncclAllReduce, on the same
 * cudaMalloc'ed device buffers, in one run, rounds alternating (order flipped every round) so that
 * whatever else the machine does hits both alike. nccl-tests columns for each (time per call,
 * algbw, busbw = algbw * 2(n-1)/n, #wrong from a check of every element), then gpurun/raw as the
 * median ratio of the rounds with its min-max spread. float32 sum, one GPU per rank.
 *   mpirun -np N nccl_side_by_side [-b 8] [-e 128M] [-f 4] [-n 20] [-w 5] [-R 5]
 * Exit 0 when no element was wrong, 1 on a wrong result or error, 77 with fewer GPUs than ranks. */
#include <gpurun/coll.h>

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size;

#define DIE(...)                                                                                   \
  do {                                                                                             \
    fprintf(stderr, "nccl_side_by_side: rank %d: ", rank);                                         \
    fprintf(stderr, __VA_ARGS__);                                                                  \
    fputc('\n', stderr);                                                                           \
    MPI_Abort(MPI_COMM_WORLD, 1);                                                                  \
  } while (0)
#define CUDA(x)                                                                                    \
  do {                                                                                             \
    cudaError_t e_ = (x);                                                                          \
    if (e_ != cudaSuccess) DIE("%s failed: %s", #x, cudaGetErrorString(e_));                       \
  } while (0)
#define NCCL(x)                                                                                    \
  do {                                                                                             \
    ncclResult_t r_ = (x);                                                                         \
    if (r_ != ncclSuccess) DIE("%s failed: %s", #x, ncclGetErrorString(r_));                       \
  } while (0)
#define GR(x)                                                                                      \
  do {                                                                                             \
    if ((x) != GR_OK) DIE("%s failed: %s", #x, gr_last_error());                                   \
  } while (0)

static size_t parse_bytes(const char *s) {
  char *end;
  double v = strtod(s, &end);
  switch (*end) {
  case 'K':
  case 'k':
    v *= 1024;
    break;
  case 'M':
  case 'm':
    v *= 1048576;
    break;
  case 'G':
  case 'g':
    v *= 1073741824;
    break;
  default:
    break;
  }
  return v < 4 ? 4 : (size_t)v;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Seconds per call of `iters` calls, the slowest rank's. which: 0 = gpurun, 1 = raw NCCL. */
static double timed(int which, gr_comm *gc, ncclComm_t nc, cudaStream_t st, const float *s,
                    float *r, size_t n, int iters) {
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  for (int i = 0; i < iters; i++) {
    if (which == 0)
      GR(gr_allreduce(s, r, n, GR_FLOAT32, GR_SUM, gc, st));
    else
      NCCL(ncclAllReduce(s, r, n, ncclFloat, ncclSum, nc, st));
  }
  if (which == 0)
    GR(gr_comm_synchronize(gc, st));
  else
    CUDA(cudaStreamSynchronize(st));
  double t = (MPI_Wtime() - t0) / iters, worst = 0;
  MPI_Allreduce(&t, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return worst;
}

/* Elements of r (n floats on the device) that differ from the exact sum; summed over ranks. */
static long long wrong(const float *r, size_t n, float *host) {
  CUDA(cudaMemcpy(host, r, n * sizeof(float), cudaMemcpyDeviceToHost));
  long long bad = 0, all = 0;
  for (size_t i = 0; i < n; i++) {
    float want = (float)size * (float)(i % 13) + (float)(size * (size - 1) / 2);
    bad += host[i] != want;
  }
  MPI_Allreduce(&bad, &all, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  return all;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  size_t minb = 8, maxb = (size_t)128 << 20;
  double factor = 4;
  int iters = 20, warmup = 5, rounds = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const char *a = argv[i], *v = argv[i + 1];
    if (!strcmp(a, "-b"))
      minb = parse_bytes(v);
    else if (!strcmp(a, "-e"))
      maxb = parse_bytes(v);
    else if (!strcmp(a, "-f"))
      factor = atof(v);
    else if (!strcmp(a, "-n"))
      iters = atoi(v);
    else if (!strcmp(a, "-w"))
      warmup = atoi(v);
    else if (!strcmp(a, "-R"))
      rounds = atoi(v);
    else
      DIE("unknown option %s", a);
  }
  if (factor < 1.5 || iters < 1 || warmup < 0 || rounds < 1 || rounds > 99 || maxb < minb)
    DIE("bad options (-f >= 1.5, -n >= 1, -w >= 0, 1 <= -R <= 99, -e >= -b)");

  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess) ndev = 0;
  int ok = ndev >= size, all_ok = 0;
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!all_ok) {
    if (rank == 0)
      printf("skipped: %d rank(s), %d GPU(s): raw NCCL needs one GPU per rank\n", size, ndev);
    MPI_Finalize();
    return 77;
  }
  CUDA(cudaSetDevice(rank % ndev));

  gr_comm_config cfg;
  gr_comm_config_init(&cfg);
  cfg.backend = GR_BACKEND_NCCL;
  gr_comm *gc = NULL;
  GR(gr_comm_create(MPI_COMM_WORLD, &cfg, &gc));
  ncclUniqueId id;
  if (rank == 0) NCCL(ncclGetUniqueId(&id));
  MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t nc;
  NCCL(ncclCommInitRank(&nc, size, id, rank));
  cudaStream_t st;
  CUDA(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));

  size_t maxn = maxb / sizeof(float);
  float *s, *r, *host = malloc(maxn * sizeof(float));
  if (!host) DIE("out of memory for %zu bytes", maxb);
  CUDA(cudaMalloc((void **)&s, maxn * sizeof(float)));
  CUDA(cudaMalloc((void **)&r, maxn * sizeof(float)));
  for (size_t i = 0; i < maxn; i++)
    host[i] = (float)(i % 13) + (float)rank;
  CUDA(cudaMemcpy(s, host, maxn * sizeof(float), cudaMemcpyHostToDevice));

  int ver = 0;
  ncclGetVersion(&ver);
  if (rank == 0) {
    printf("# nccl_side_by_side: %d rank(s), NCCL %d, float32 sum, out of place, %d iters x %d "
           "rounds (order alternating), %d warmup; time = slowest rank, median round\n",
           size, ver, iters, rounds, warmup);
    printf("# %10s %12s %5s %5s | %10s %8s %8s %6s | %10s %8s %8s %6s | %7s %13s\n", "size",
           "count", "type", "redop", "gr(us)", "algbw", "busbw", "#wrong", "nccl(us)", "algbw",
           "busbw", "#wrong", "ratio", "spread");
  }
  long long total_wrong = 0;
  double bus = 2.0 * (size - 1) / size; /* nccl-tests' allreduce factor: 0 at one rank */
  for (size_t bytes = minb; bytes <= maxb; bytes = (size_t)((double)bytes * factor)) {
    size_t n = bytes / sizeof(float);
    for (int w = 0; w < 2; w++)
      timed(w, gc, nc, st, s, r, n, warmup > 0 ? warmup : 1);
    double tg[99], tn[99], ratio[99];
    for (int k = 0; k < rounds; k++) {
      int first = k % 2;
      double a = timed(first, gc, nc, st, s, r, n, iters);
      double b = timed(!first, gc, nc, st, s, r, n, iters);
      tg[k] = first == 0 ? a : b;
      tn[k] = first == 0 ? b : a;
      ratio[k] = tn[k] > 0 ? tg[k] / tn[k] : 0;
    }
    /* Each side's result checked right after its own call. */
    timed(0, gc, nc, st, s, r, n, 1);
    long long wg = wrong(r, n, host);
    CUDA(cudaMemset(r, 0, n * sizeof(float)));
    timed(1, gc, nc, st, s, r, n, 1);
    long long wn = wrong(r, n, host);
    total_wrong += wg + wn;
    qsort(tg, (size_t)rounds, sizeof(double), cmp_double);
    qsort(tn, (size_t)rounds, sizeof(double), cmp_double);
    qsort(ratio, (size_t)rounds, sizeof(double), cmp_double);
    double mg = tg[rounds / 2], mn = tn[rounds / 2];
    double bytes_d = (double)(n * sizeof(float));
    if (rank == 0)
      printf("  %10zu %12zu %5s %5s | %10.2f %8.2f %8.2f %6lld | %10.2f %8.2f %8.2f %6lld | %7.3f "
             "%6.3f-%-6.3f\n",
             n * sizeof(float), n, "float", "sum", mg * 1e6, bytes_d / mg / 1e9,
             bytes_d / mg / 1e9 * bus, wg, mn * 1e6, bytes_d / mn / 1e9, bytes_d / mn / 1e9 * bus,
             wn, ratio[rounds / 2], ratio[0], ratio[rounds - 1]);
  }
  if (rank == 0) printf("# total wrong elements: %lld\n", total_wrong);
  cudaFree(s);
  cudaFree(r);
  free(host);
  ncclCommDestroy(nc);
  gr_comm_destroy(gc);
  cudaStreamDestroy(st);
  MPI_Finalize();
  return total_wrong == 0 ? 0 : 1;
}
