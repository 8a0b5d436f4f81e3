/* Internal: the one MPI error string helper (gpurun_coll, the lowest layer that sees mpi.h; the
 * runtime above uses it too). */
#ifndef GR_MPI_ERROR_H
#define GR_MPI_ERROR_H

#include <mpi.h>

/* MPI's text for error code rc in buf (MPI_MAX_ERROR_STRING bytes), or "error RC" when MPI has
 * none (MPI_Error_string itself failed). Returns buf, always terminated. */
const char *gr__mpi_strerror(int rc, char buf[MPI_MAX_ERROR_STRING]);

#endif
