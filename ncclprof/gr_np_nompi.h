/* Internal: included before observe/'s sources where libgpurun-nccl-profiler.so compiles them
 * (CMake's -include, with GR_NO_MPI defined). The plugin runs in processes that have no MPI at all
 * (PyTorch's NCCL backend, any CUDA program), or an MPI of another family than the one these
 * headers describe, so it calls none: the few MPI functions the flight recorder and the live state
 * ask (whether MPI is up, the world's rank and size) are answered from the environment here, as
 * if MPI were up with the launcher's world (gr__np_world_rank/size, plugin.c: RANK, OMPI_COMM_WORLD_RANK,
 * PMI_RANK, SLURM_PROCID, ... and WORLD_SIZE, OMPI_COMM_WORLD_SIZE, ...). mpi.h is read for its
 * types only; nothing in the library refers to an MPI symbol (it links with -z defs). */
#ifndef GR_NP_NOMPI_H
#define GR_NP_NOMPI_H

#include <mpi.h>

int gr__np_world_rank(void);
int gr__np_world_size(void);

static inline int gr__np_mpi_initialized(int *flag) {
  *flag = 1;
  return 0;
}
static inline int gr__np_mpi_finalized(int *flag) {
  *flag = 0;
  return 0;
}
static inline int gr__np_mpi_comm_rank(MPI_Comm c, int *r) {
  (void)c;
  *r = gr__np_world_rank();
  return 0;
}
static inline int gr__np_mpi_comm_size(MPI_Comm c, int *s) {
  (void)c;
  *s = gr__np_world_size();
  return 0;
}

#undef MPI_COMM_WORLD
#define MPI_COMM_WORLD ((MPI_Comm)0)
#define MPI_Initialized gr__np_mpi_initialized
#define MPI_Finalized gr__np_mpi_finalized
#define MPI_Comm_rank gr__np_mpi_comm_rank
#define MPI_Comm_size gr__np_mpi_comm_size

#endif
