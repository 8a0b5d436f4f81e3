/* Internal: where a job's monitoring files go. The supervisor's CSVs, the runtime's counters and
 * the collectives' flight-recorder dumps all land in <GPURUN_MONITOR_DIR>/<job>/, so that
 * gpurun-report finds a job's files together. */
#ifndef GR_JOBDIR_H
#define GR_JOBDIR_H

#include <stddef.h>
#include <time.h>

/* The job id the ranks of one job share without talking: $GPURUN_JOB_ID, then the batch system's
 * and Open MPI's ids (SLURM_JOB_ID, FLUX_JOB_ID, OMPI_MCA_ess_base_jobid, PMIX_NAMESPACE, PBS_JOBID,
 * LSB_JOBID). 0 with the id (bytes outside gr__safe_char's alphabet made '_'; a leading '.' is
 * kept so that gr__jobdir_open refuses it), -1 when none is set. */
int gr__monitor_job_from_env(char *out, size_t cap);

/* The job id made from a clock when no launcher names the job. One rule everywhere: the time in
 * UTC (whatever TZ each node or user has), "YYYYmmdd-HHMMSS"; minute_only drops the seconds
 * ("YYYYmmdd-HHMM") for processes that cannot talk (the --monitor supervisors: started within
 * the same minute, they agree). gr__job_agree (gr_observe.h) broadcasts rank 0's to the second. */
void gr__job_from_time(time_t t, int minute_only, char *out, size_t cap);

/* gr__job_agree (the id all ranks agree on, over MPI) is in gr_observe.h: this header is part of
 * the MPI-free base that gpurun links. */

#endif
