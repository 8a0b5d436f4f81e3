/* Checks shared by the dpool tests: a failed check names the rank, the place and gpurun's last
 * error, then takes the whole job down (a test that stops on one rank would leave the others
 * waiting in gr_dpool_run). The including file defines `g_rank`. */
#ifndef DPOOL_CHECK_H
#define DPOOL_CHECK_H

#include <gpurun/status.h>
#include <mpi.h>
#include <stdio.h>

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "rank %d: %s:%d: check failed: %s (last error: %s)\n", g_rank, __FILE__,     \
              __LINE__, #cond, gr_last_error());                                                   \
      MPI_Abort(MPI_COMM_WORLD, 1);                                                                \
    }                                                                                              \
  } while (0)
#define CHECK_OK(call) CHECK((call) == GR_OK)

#endif
