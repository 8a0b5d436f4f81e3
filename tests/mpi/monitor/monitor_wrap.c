/* Test helper standing in for `gpurun --monitor`: starts gr__supervise's supervisor with sampling
 * and becomes the program (exec), one supervisor per rank. usage: monitor_wrap DIR JOB INTERVAL PROGRAM [ARGS...] */
#include "gr_supervise.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: monitor_wrap DIR JOB INTERVAL PROGRAM [ARGS...]\n");
    return 2;
  }
  gr_supervise_opts o;
  gr__supervise_opts_init(&o);
  o.monitor_dir = argv[1];
  o.job_id = argv[2];
  o.monitor_interval_s = atof(argv[3]);
  /* Open MPI's variables, else Hydra's (MPICH) */
  const char *lr = getenv("OMPI_COMM_WORLD_LOCAL_RANK"), *r = getenv("OMPI_COMM_WORLD_RANK");
  if (!lr) lr = getenv("MPI_LOCALRANKID");
  if (!r) r = getenv("PMI_RANK");
  o.local_rank = lr ? atoi(lr) : 0;
  o.rank = r ? atoi(r) : -1;
  o.gpus_pci = "";
  int code = 1;
  if (gr__supervise(&argv[4], &o, &code) != GR_OK) return 1;
  return code;
}
