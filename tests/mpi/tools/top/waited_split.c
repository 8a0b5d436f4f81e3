/* A plain MPI program (no gpurun API: the MPI layer records it) for the live files' per-peer
 * waits on a communicator whose ranks are not the world's: 4 ranks split by parity with the
 * order reversed (key -rank), so that in {0, 2} world 2 is rank 0 and world 0 rank 1, and in
 * {1, 3} world 3 is rank 0 and world 1 rank 1. Rank 1 of each half receives from rank 0, which
 * sleeps 1 s first: world 0 then waits 1 s for world 2, and world 1 for world 3. The live files
 * must name the world ranks (2 and 3), not the halves' (0). The halves are kept (a freed
 * communicator's waits leave the live sums), and every rank sleeps 1 s more so that the
 * publisher writes the sums while the job runs. */
#include <mpi.h>

#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size, v = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 4) {
    if (!rank) fprintf(stderr, "waited_split: needs 4 ranks, has %d\n", size);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  MPI_Comm half;
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &half);
  int hr;
  MPI_Comm_rank(half, &hr);
  if (hr == 0) {
    sleep(1);
    v = 42;
    MPI_Send(&v, 1, MPI_INT, 1, 7, half);
  } else {
    MPI_Recv(&v, 1, MPI_INT, 0, 7, half, MPI_STATUS_IGNORE);
  }
  sleep(1);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return v == 42 ? 0 : 1;
}
