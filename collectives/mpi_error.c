/* MPI error codes as text (see gr_mpi_error.h). */
#include "gr_mpi_error.h"

#include <stdio.h>

const char *gr__mpi_strerror(int rc, char buf[MPI_MAX_ERROR_STRING]) {
  int len = 0;
  buf[0] = '\0';
  if (MPI_Error_string(rc, buf, &len) != MPI_SUCCESS || len <= 0)
    snprintf(buf, MPI_MAX_ERROR_STRING, "error %d", rc);
  buf[MPI_MAX_ERROR_STRING - 1] = '\0';
  return buf;
}
