/* Internal: the MPI family the library was built for against the one it runs with. Open MPI and
 * the MPICH family (MPICH, Cray MPICH, Intel MPI, MVAPICH) have different ABIs: MPI_Comm is a
 * pointer in one and an integer in the other, so a libgpurun built for one and loaded under the
 * other would hand the running MPI handles it cannot read (MPICH's "Invalid communicator", or a
 * crash). Every public entry that makes the library's first MPI call checks first. */
#ifndef GR_MPI_FAMILY_H
#define GR_MPI_FAMILY_H

#include <gpurun/status.h>

/* GR_OK when the running MPI is of the family the library was built for; else
 * GR_ERR_UNSUPPORTED with a sentence naming both (recorded for fn). Decided once per process,
 * from MPI_Get_library_version, which MPI allows before MPI_Init. */
gr_status gr__mpi_family_check(const char *fn);

/* "Open MPI" or "MPICH": the family of the mpi.h the library was built with. */
const char *gr__mpi_family_built(void);

/* The family of a library version string (MPI_Get_library_version's): "Open MPI", "MPICH" (also
 * for Cray MPICH, Intel MPI and MVAPICH) or NULL when it names neither. */
const char *gr__mpi_family_of(const char *version);

#endif
