/* MPI 4.0's big-count C functions (MPI_Send_c, MPI_Allreduce_c, ...: MPI_Count counts, MPI_Aint
 * displacements): the `_c` form of every call wrap.c records, recorded as wrap.c records the plain
 * form (the same kind, so the flight dump says MPI_Send; the count as the record's count) around
 * the next definition (NEXT: gr__mt_next, GR__MT_MPI4 in gr_mpitrace.h). Without them a program
 * that calls the `_c` forms under MPICH 4 passes the layer unrecorded. Compiled only where the MPI
 * headers declare them (mpitrace/CMakeLists.txt: MPI 4.0 or later; Open MPI 4.1 is MPI 3.1).
 * MPICH's mpi_f08 `_large_` bindings call these (fortran_mpich_f08.c records them first: they
 * pass through here inside the recorded call). */
#include "gr_mt_wrap.h"

#if MPI_VERSION < 4
#error "wrap_bigcount.c needs the MPI 4.0 big-count functions, which this MPI's mpi.h lacks"
#endif

#pragma GCC visibility push(default)

typedef MPI_Count N;
typedef MPI_Aint A;
#define SFX(name) SFX_(name)
#define SFX_(name) name##_c
#include "wrap_counted.h"

#pragma GCC visibility pop
