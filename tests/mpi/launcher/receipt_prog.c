/* Under mpirun + gpurun: optionally undoes gpurun's binding the way an MPI library that rebinds at
 * MPI_Init would ("rebind": every online CPU), then calls gr_init and prints its receipt:
 *   RECEIPT rank=R status=GR_OK differs=N receipt=...
 * Exit 0 whenever gr_init returned (the test judges the status). */
#include <stdlib.h>
#include <gpurun/gpurun.h>

#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "rebind") == 0) {
    cpu_set_t all;
    CPU_ZERO(&all);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    for (long c = 0; c < n && c < CPU_SETSIZE; c++)
      CPU_SET((int)c, &all);
    sched_setaffinity(0, sizeof all, &all);
  }
  gr_status st = gr_init(&argc, &argv);
  gr_rank_info_t ri;
  memset(&ri, 0, sizeof ri);
  if (st == GR_OK) gr_rank_info(&ri);
  /* the world rank as the launcher exported it: Open MPI, Hydra (MPICH), Slurm */
  const char *who = getenv("OMPI_COMM_WORLD_RANK");
  if (!who) who = getenv("PMI_RANK");
  if (!who) who = getenv("SLURM_PROCID");
  printf("RECEIPT rank=%s status=%s differs=%d receipt=%s error=%s\n", who ? who : "?",
         gr_status_name(st), ri.receipt_differs, ri.receipt, st == GR_OK ? "" : gr_last_error());
  fflush(stdout);
  if (st == GR_OK) gr_finalize();
  return 0;
}
