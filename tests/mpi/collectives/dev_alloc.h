/* Device memory for the tests that run over the NCCL test double (nccl_double/, whose
 * cuda_runtime_api.h stands in for CUDA's): its device memory is host-readable once the stream is
 * synchronised, so the tests fill and check it directly. */
#ifndef DEV_ALLOC_H
#define DEV_ALLOC_H

#include <mpi.h>
#include <stddef.h>
#include <stdio.h>

#include "nccl_double/include/cuda_runtime_api.h"

/* bytes of the double's device memory; a failed cudaMalloc ends the whole job (exit code 2) after
 * a line naming the world rank, since a rank that stopped alone would leave the others waiting. */
static inline void *dev_alloc(size_t bytes) {
  void *p = NULL;
  if (cudaMalloc(&p, bytes) != cudaSuccess || !p) {
    int r = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    fprintf(stderr, "[rank %d] cudaMalloc of the double failed\n", r);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  return p;
}

#endif
