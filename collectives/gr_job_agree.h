/* Internal: the job id all ranks of a communicator agree on. Kept apart from gr_jobdir.h because it
 * needs MPI and gr_jobdir.h belongs to the MPI-free base layer (cmake/GpurunLayers.cmake). */
#ifndef GR_JOB_AGREE_H
#define GR_JOB_AGREE_H

#include "gr_jobdir.h"

#include <mpi.h>
#include <stddef.h>

/* The job id all ranks of comm agree on: gr__monitor_job_from_env, else rank 0's time
 * (gr__job_from_time: UTC, YYYYmmdd-HHMMSS) broadcast over comm. Collective over comm exactly when
 * no id is set in the environment, which is the same on every rank of a job. */
void gr__job_agree(MPI_Comm comm, char *out, size_t cap);

#endif
