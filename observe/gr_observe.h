/* Internal: observability, the part of the collectives that shows a job from outside: the flight
 * recorder (gr_flight.h), the live state (gr_live.h) and the job id both file under (the job
 * directory, base/gr_jobdir.h). It starts once per process, with the job id as an argument:
 * - gr_init agrees on the id over MPI_COMM_WORLD (gr__job_agree) and calls gr__observe_start
 *   before it creates the world communicator;
 * - a program that does not call gr_init starts it in its first communicator's creation:
 *   gr__observe_start_from_env before the creation waits (so the live state shows a rank waiting
 *   in it), else gr__observe_start_over once the ranks are together.
 * The first start wins; later calls do nothing. */
#ifndef GR_OBSERVE_H
#define GR_OBSERVE_H

#include <mpi.h>
#include <stddef.h>

/* Start with this job id: the flight recorder's SIGUSR1 handler and exit dump where
 * GPURUN_FLIGHT or GPURUN_LOG=debug ask for them, the live state's publisher where
 * GPURUN_MONITOR_DIR is set. In libgpurun it first tells the MPI layer, when one is loaded, to
 * stand aside (gr_mpi_layer_stand_aside); the layer's own copy (built with GR_MPI_LAYER) does not. */
void gr__observe_start(const char *job);
/* Start with the id the environment names (gr__monitor_job_from_env: always under gpurun):
 * 1 when started now or before, 0 when no id is set (nothing done). No talk. */
int gr__observe_start_from_env(void);
/* Start with the id the ranks of mpi agree on (gr__job_agree). Collective over mpi unless started
 * already, which is the same on every rank of a first communicator. */
void gr__observe_start_over(MPI_Comm mpi);

/* The job id all ranks of comm agree on: gr__monitor_job_from_env, else rank 0's time
 * (gr__job_from_time: UTC, YYYYmmdd-HHMMSS) broadcast over comm. Collective over comm exactly when
 * no id is set in the environment, which is the same on every rank of a job. Needs MPI, so it is
 * here and not in the MPI-free base's gr_jobdir.h. */
void gr__job_agree(MPI_Comm comm, char *out, size_t cap);

#endif
