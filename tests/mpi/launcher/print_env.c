/* Run under gpurun: prints, on one line, what this process really got: its plan variables and the
 * CPU list the kernel lets it run on (/proc/self/status), for the live tests to compare. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *get(const char *n) {
  const char *v = getenv(n);
  return v ? v : "-";
}

int main(void) {
  char allowed[4096] = "-", line[4096];
  FILE *f = fopen("/proc/self/status", "r");
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, "Cpus_allowed_list:", 18) == 0) {
      char *v = line + 18;
      v += strspn(v, " \t");
      v[strcspn(v, "\n")] = 0;
      snprintf(allowed, sizeof allowed, "%s", v);
    }
  if (f) fclose(f);
  printf(
      "PRINTENV rank=%s local_rank=%s local_size=%s cpus=%s numa=%s gpus=%s nic=%s plan=%s omp=%s "
      "allowed=%s\n",
      /* the world rank as Open MPI or Hydra (MPICH) exported it */
      getenv("OMPI_COMM_WORLD_RANK") ? get("OMPI_COMM_WORLD_RANK") : get("PMI_RANK"),
      get("GPURUN_LOCAL_RANK"), get("GPURUN_LOCAL_SIZE"), get("GPURUN_CPUS"), get("GPURUN_NUMA"),
      get("GPURUN_GPUS"), get("GPURUN_NIC"), get("GPURUN_PLAN_VERSION"), get("OMP_NUM_THREADS"),
      allowed);
  return 0;
}
