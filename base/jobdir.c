/* The job directory shared by the supervisor, the runtime's counters and the flight recorder. */
#include "gr_hydra.h"
#include "gr_jobdir.h"

#include "gr_param.h"
#include "gr_safefile.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>

int gr__monitor_job_from_env(char *out, size_t cap) {
  /* gpurun's own first (GPURUN_JOB_ID), then the schedulers' and MPI launchers' */
  static const char *const vars[] = {"SLURM_JOB_ID",   "FLUX_JOB_ID", "OMPI_MCA_ess_base_jobid",
                                     "PMIX_NAMESPACE", "PBS_JOBID",   "LSB_JOBID"};
  for (size_t i = 0; i <= sizeof vars / sizeof vars[0]; i++) {
    const char *v = i == 0 ? gr__param_raw(GR_PARAM_JOB_ID) : getenv(vars[i - 1]);
    if (!v || !*v) continue;
    snprintf(out, cap, "%s", v);
    /* A job id becomes a directory name: bytes outside the safe alphabet become '_'. Dots stay,
     * so that an id of ".." or ".x" is refused by gr__jobdir_open rather than renamed. */
    for (char *p = out; *p; p++)
      if (!gr__safe_char((unsigned char)*p)) *p = '_';
    return 0;
  }
  /* MPICH's Hydra outside a scheduler: its mpiexec's control address, one id on every node */
  if (getenv("PMI_RANK") && gr__hydra_job(out, cap) == 0) {
    for (char *p = out; *p; p++)
      if (!gr__safe_char((unsigned char)*p)) *p = '_';
    return 0;
  }
  return -1;
}

void gr__job_from_time(time_t t, int minute_only, char *out, size_t cap) {
  struct tm tm;
  if (!cap) return;
  out[0] = '\0';
  if (!gmtime_r(&t, &tm) ||
      strftime(out, cap, minute_only ? "%Y%m%d-%H%M" : "%Y%m%d-%H%M%S", &tm) == 0)
    snprintf(out, cap, "%lld", (long long)t); /* past year 9999, or cap too small */
}
