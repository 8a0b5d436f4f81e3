/* smoke: each rank prints its host, the cpuset it is bound to, and the backend it would use.
 * The first program to run under mpirun on a fresh machine. */
#include <gpurun/status.h>
#include <gpurun/version.h>
#include <hwloc.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "gr_device.h"

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size, len;
  char host[MPI_MAX_PROCESSOR_NAME];
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Get_processor_name(host, &len);

  hwloc_topology_t topo;
  char *cpus = NULL;
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  if (hwloc_topology_init(&topo) == 0 && hwloc_topology_load(topo) == 0 &&
      hwloc_get_cpubind(topo, set, HWLOC_CPUBIND_PROCESS) == 0)
    hwloc_bitmap_list_asprintf(&cpus, set);

  int ngpu = 0;
  const char *why = gr__cuda_device_count(&ngpu) == GR_OK ? "" : gr_last_error();
  char line[1024];
  snprintf(line, sizeof line, "rank %d/%d on %s: cpuset %s, backend %s%s%s%s", rank, size, host,
           cpus ? cpus : "?", ngpu > 0 ? "nccl" : "mpi",
           ngpu > 0 ? "" : " (no GPU: ", ngpu > 0 ? "" : why, ngpu > 0 ? "" : ")");
  /* Print in rank order so the output reads as a table. */
  for (int r = 0; r < size; r++) {
    if (r == rank) {
      if (rank == 0) printf("%s\n", gr_build_info());
      printf("%s\n", line);
      fflush(stdout);
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
  free(cpus);
  hwloc_bitmap_free(set);
  hwloc_topology_destroy(topo);
  MPI_Finalize();
  return 0;
}
