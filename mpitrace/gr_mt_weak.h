/* Internal: included before every source of libgpurun-mpi.so (CMake's -include). The layer links
 * no MPI library, and Open MPI's handles (MPI_COMM_WORLD, MPI_FLOAT, ...) are the addresses of
 * libmpi's objects: referenced weakly, a process without libmpi (a shell a job script runs, with
 * the layer in LD_PRELOAD) still loads the layer, which then never starts; where libmpi is loaded
 * later, out of the layer's sight, by name (below). MPICH's handles are integer constants and
 * need nothing. */
#ifndef GR_MT_WEAK_H
#define GR_MT_WEAK_H

#include <mpi.h>

#if defined(OMPI_MAJOR_VERSION)
#pragma weak ompi_mpi_byte
#pragma weak ompi_mpi_char
#pragma weak ompi_mpi_comm_null
#pragma weak ompi_mpi_comm_self
#pragma weak ompi_mpi_comm_world
#pragma weak ompi_mpi_datatype_null
#pragma weak ompi_mpi_dblprec
#pragma weak ompi_mpi_double
#pragma weak ompi_mpi_float
#pragma weak ompi_mpi_group_null
#pragma weak ompi_mpi_int
#pragma weak ompi_mpi_int32_t
#pragma weak ompi_mpi_int64_t
#pragma weak ompi_mpi_int8_t
#pragma weak ompi_mpi_integer
#pragma weak ompi_mpi_integer4
#pragma weak ompi_mpi_integer8
#pragma weak ompi_mpi_long
#pragma weak ompi_mpi_long_long_int
#pragma weak ompi_mpi_real
#pragma weak ompi_mpi_real4
#pragma weak ompi_mpi_real8
#pragma weak ompi_mpi_signed_char
#pragma weak ompi_mpi_uint32_t
#pragma weak ompi_mpi_uint64_t
#pragma weak ompi_mpi_uint8_t
#pragma weak ompi_mpi_unsigned
#pragma weak ompi_mpi_unsigned_char
#pragma weak ompi_mpi_unsigned_long
#pragma weak ompi_mpi_unsigned_long_long
#pragma weak ompi_request_null
#pragma weak ompi_mpi_op_null
#pragma weak ompi_mpi_info_null
#pragma weak ompi_mpi_win_null

/* A weak reference is bound when the layer is loaded: where the program loads the MPI library
 * later, into a scope of its own (Python loads mpi4py's module RTLD_LOCAL), it stays NULL. The
 * handle is then looked up by name in the MPI library, wherever it was loaded (layer.c). */
void *gr__mt_ompi(const char *global);
#undef OMPI_PREDEFINED_GLOBAL
#define OMPI_PREDEFINED_GLOBAL(type, global)                                                       \
  ((type)(&(global) ? (void *)&(global) : gr__mt_ompi(#global)))
#endif

#endif
