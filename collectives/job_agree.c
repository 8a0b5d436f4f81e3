/* The job id all ranks of a communicator agree on (moved out of jobdir.c: it is the one part of the
 * job directory code that needs MPI, and jobdir.c belongs to the MPI-free base). */
#include "gr_job_agree.h"

#include <time.h>

void gr__job_agree(MPI_Comm comm, char *out, size_t cap) {
  if (gr__monitor_job_from_env(out, cap) == 0) return;
  long long t = (long long)time(NULL);
  MPI_Bcast(&t, 1, MPI_LONG_LONG, 0, comm);
  gr__job_from_time((time_t)t, 0, out, cap);
}
