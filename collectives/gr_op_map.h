/* Internal: the one map from (gr_dtype, gr_op) to the MPI_Datatype and MPI_Op that reduce it
 * (op_map.c), for every reduction MPI does for the collectives: the MPI backend's library calls
 * (backend_mpi.c) and the NCCL backend's shared-GPU staging (nccl_share.c). The MPI backend's own
 * allreduces (mpi_allreduce_*.c) send with its datatypes and reduce with gr__reduce_host.
 *
 * Native types reduce with MPI's built-in op where it gives gpurun's answer (gr_dtype.h's
 * semantics) and with gpurun's own kernel behind a user-defined op where it does not; fp16 and
 * bf16 travel as MPI_UINT16_T and reduce only with user-defined ops (float arithmetic, one
 * rounding per step). AVG reduces as SUM (the division comes once, at the end).
 *
 * The user-defined ops belong to a communicator: made when its backend state is made, freed when it
 * is destroyed, or handed to the kept objects (gr__mpi_keep_op) while a request given up on may
 * still run with them. */
#ifndef GR_OP_MAP_H
#define GR_OP_MAP_H

#include "gr_coll.h"
#include "gr_dtype.h"

#include <mpi.h>

/* The user-defined ops: by family (fp16, bf16, gpurun's kernels for the native types), then by op
 * (SUM, PROD, MIN, MAX). All MPI_OP_NULL until made. */
#define GR__OP_MAP_FAMILIES 3
typedef struct {
  MPI_Op op[GR__OP_MAP_FAMILIES][4];
} gr__op_map;

/* Every entry MPI_OP_NULL (what gr__op_map_free leaves too). */
void gr__op_map_init(gr__op_map *m);
/* Makes every user-defined op with MPI_Op_create. On a failure, frees those already made and
 * returns GR_ERR_MPI with the sentence in c->err (gr__comm_err). */
gr_status gr__op_map_create(gr_comm *c, gr__op_map *m);
/* Frees them (MPI_Op_free), or hands them to c's kept objects while a request given up on may still
 * use them (gr__mpi_lost); after MPI_Finalize only forgets them. Every entry ends MPI_OP_NULL; a
 * failed MPI_Op_free gives GR_ERR_MPI with the sentence in c->err (the rest are freed still). */
gr_status gr__op_map_free(gr_comm *c, gr__op_map *m);

/* The MPI datatype a buffer of t goes as (MPI_UINT16_T for fp16 and bf16; MPI_DATATYPE_NULL for a
 * value outside the enum). */
MPI_Datatype gr__mpi_type(gr_dtype t);
/* The op that reduces t with op when the buffer goes as gr__mpi_type(t): a built-in op or one of
 * m's; MPI_OP_NULL for a pair gr__op_defined refuses or an entry not made. */
MPI_Op gr__op_map_get(const gr__op_map *m, gr_dtype t, gr_op op);

#endif
