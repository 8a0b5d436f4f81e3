/* Which MPI does this libgpurun serve? Built with one MPI's compiler wrapper and run against a
 * libgpurun, it prints what gr_init says: GR_OK when the library was built for this MPI's family,
 * otherwise the sentence naming both. */
#include <gpurun/runtime.h>
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  gr_status st = gr_init(&argc, &argv);
  printf("gr_init: %s%s%s\n", gr_status_name(st), st == GR_OK ? "" : ": ", gr_last_error());
  if (st == GR_OK) gr_finalize();
  MPI_Finalize();
  return 0;
}
