/* The MPI layer's cost per call: an 8-byte MPI_Allreduce and a 0-byte ping-pong between ranks 0
 * and 1, timed in blocks; the median block's time per call is printed. Run once plain and once
 * with libgpurun-mpi.so preloaded (bench/mpitrace/layer_cost.sh alternates them), the same binary
 * both times: it links MPI only.
 * usage: bench_layer [CALLS_PER_BLOCK [BLOCKS]]
 * prints: "allreduce8 MEDIAN_US MIN_US MAX_US" and "pingpong0 ..." (rank 0; one-way half of a
 * round trip for the ping-pong) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void report(const char *what, double *t, int n) {
  qsort(t, (size_t)n, sizeof *t, cmp);
  printf("%s %.3f %.3f %.3f\n", what, t[n / 2], t[0], t[n - 1]);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int calls = argc > 1 ? atoi(argv[1]) : 20000, blocks = argc > 2 ? atoi(argv[2]) : 21;
  if (calls < 1 || blocks < 1 || blocks > 1000 || size < 2) {
    if (!rank) fprintf(stderr, "usage: bench_layer [CALLS [BLOCKS]] at 2 or more ranks\n");
    MPI_Finalize();
    return 2;
  }
  double *t = malloc((size_t)blocks * sizeof *t), x = 1, y;
  for (int i = 0; i < calls; i++) /* warm-up */
    MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  for (int b = 0; b < blocks; b++) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < calls; i++)
      MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    t[b] = (MPI_Wtime() - t0) / calls * 1e6;
  }
  if (!rank) report("allreduce8", t, blocks);
  for (int b = 0; b < blocks; b++) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < calls && rank < 2; i++) {
      if (rank == 0) {
        MPI_Send(NULL, 0, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
        MPI_Recv(NULL, 0, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      } else {
        MPI_Recv(NULL, 0, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(NULL, 0, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
      }
    }
    t[b] = (MPI_Wtime() - t0) / calls / 2 * 1e6;
  }
  if (!rank) report("pingpong0", t, blocks);
  free(t);
  MPI_Finalize();
  return 0;
}
