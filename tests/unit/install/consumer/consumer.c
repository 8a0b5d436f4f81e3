/* An out-of-tree program that uses the installed gpurun. */
#include <gpurun/gpurun.h>
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int ok = gr_api_version() >= GR_API_VERSION && gr_strerror(GR_OK)[0] != '\0';
  int all_ok = 0;
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  if (rank == 0)
    printf("consumer %s: %d ranks, %s\n", all_ok ? "ok" : "FAILED", size, gr_build_info());
  MPI_Finalize();
  return all_ok ? 0 : 1;
}
