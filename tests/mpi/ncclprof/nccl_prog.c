/* A plain NCCL program, as nccl-tests or a CUDA code is: MPI only to pass the unique id, then NCCL
 * calls on streams (here the NCCL test double's, tests/mpi/collectives/nccl_double/, which calls
 * the profiler plugin NCCL_PROFILER_PLUGIN names the way NCCL 2.28 does). It links no gpurun.
 *   nccl_prog ok            allreduces, a broadcast, an allgather, a ring of grouped sends and
 *                           receives, allreduces on a split; checks the results; "ok: N checks"
 *   nccl_prog stop K M      rank K stops itself (SIGSTOP) before allreduce #M; the others wait
 *                           in it (their streams never finish) */
#include "nccl.h"

#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int rank, size, bad, checks;

static void check(int ok, const char *what) {
  checks++;
  if (!ok) {
    bad++;
    fprintf(stderr, "rank %d: FAIL: %s\n", rank, what);
  }
}

#define NCCL(call)                                                                                 \
  do {                                                                                             \
    ncclResult_t r_ = (call);                                                                      \
    if (r_ != ncclSuccess) {                                                                       \
      fprintf(stderr, "rank %d: %s: %s\n", rank, #call, ncclGetErrorString(r_));                   \
      MPI_Abort(MPI_COMM_WORLD, 1);                                                                \
    }                                                                                              \
  } while (0)

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char *mode = argc > 1 ? argv[1] : "ok";
  ncclUniqueId id;
  if (rank == 0) NCCL(ncclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t comm;
  NCCL(ncclCommInitRankConfig(&comm, size, id, rank, NULL));
  cudaStream_t st;
  cudaStreamCreate(&st);
  enum { N = 256 };
  float *a, *b, *g;
  cudaMalloc((void **)&a, N * sizeof *a);
  cudaMalloc((void **)&b, N * sizeof *b);
  cudaMalloc((void **)&g, (size_t)size * N * sizeof *g);
  float host[N];

  if (!strcmp(mode, "stop")) {
    int who = argc > 2 ? atoi(argv[2]) : 1, at = argc > 3 ? atoi(argv[3]) : 3;
    for (int i = 1;; i++) {
      if (i == at && rank == who) raise(SIGSTOP);
      for (int k = 0; k < N; k++)
        host[k] = 1;
      cudaMemcpy(a, host, sizeof host, cudaMemcpyHostToDevice);
      NCCL(ncclAllReduce(a, b, N, ncclFloat32, ncclSum, comm, st));
      cudaStreamSynchronize(st);
      if (i >= at) { /* only when the stopped rank was let go on */
        MPI_Barrier(MPI_COMM_WORLD);
        break;
      }
    }
  } else {
    /* 5 allreduces */
    for (int i = 0; i < 5; i++) {
      for (int k = 0; k < N; k++)
        host[k] = (float)(rank + 1 + i);
      cudaMemcpy(a, host, sizeof host, cudaMemcpyHostToDevice);
      NCCL(ncclAllReduce(a, b, N, ncclFloat32, ncclSum, comm, st));
      cudaStreamSynchronize(st);
      cudaMemcpy(host, b, sizeof host, cudaMemcpyDeviceToHost);
      check(host[N - 1] == (float)(size * (size + 1) / 2 + size * i), "allreduce sum");
    }
    /* a broadcast from the last rank */
    for (int k = 0; k < N; k++)
      host[k] = (float)rank;
    cudaMemcpy(a, host, sizeof host, cudaMemcpyHostToDevice);
    NCCL(ncclBroadcast(a, a, N, ncclFloat32, size - 1, comm, st));
    cudaStreamSynchronize(st);
    cudaMemcpy(host, a, sizeof host, cudaMemcpyDeviceToHost);
    check(host[0] == (float)(size - 1), "broadcast");
    /* an allgather */
    NCCL(ncclAllGather(a, g, N, ncclFloat32, comm, st));
    cudaStreamSynchronize(st);
    /* (the copies go on the default stream: the double orders streams only by synchronizing) */
    /* a ring: each sends to the next and receives from the previous, in one group */
    for (int k = 0; k < N; k++)
      host[k] = (float)rank;
    cudaMemcpy(a, host, sizeof host, cudaMemcpyHostToDevice);
    NCCL(ncclGroupStart());
    NCCL(ncclSend(a, N, ncclFloat32, (rank + 1) % size, comm, st));
    NCCL(ncclRecv(b, N, ncclFloat32, (rank + size - 1) % size, comm, st));
    NCCL(ncclGroupEnd());
    cudaStreamSynchronize(st);
    cudaMemcpy(host, b, sizeof host, cudaMemcpyDeviceToHost);
    check(host[0] == (float)((rank + size - 1) % size), "ring");
    /* a split by parity: two allreduces on it */
    ncclComm_t half;
    NCCL(ncclCommSplit(comm, rank % 2, rank, &half, NULL));
    for (int i = 0; i < 2; i++) {
      for (int k = 0; k < N; k++)
        host[k] = 1;
      cudaMemcpy(a, host, sizeof host, cudaMemcpyHostToDevice);
      NCCL(ncclAllReduce(a, b, N, ncclFloat32, ncclSum, half, st));
      cudaStreamSynchronize(st);
      cudaMemcpy(host, b, sizeof host, cudaMemcpyDeviceToHost);
      check(host[0] == (float)((size + 1 - rank % 2) / 2), "split allreduce");
    }
    NCCL(ncclCommDestroy(half));
  }
  cudaStreamSynchronize(st);
  cudaFree(a);
  cudaFree(b);
  cudaFree(g);
  cudaStreamDestroy(st);
  NCCL(ncclCommDestroy(comm));
  int all = 0;
  MPI_Allreduce(&bad, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) printf("%s: %d checks, %d failed\n", mode, checks, all);
  MPI_Finalize();
  return all != 0;
}
