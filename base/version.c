/* Library version and build description. */
#include <gpurun/version.h>

#include "gr_config.h"

GR_API const char *gr_version(void) { return GR_VERSION_STRING; }

GR_API unsigned gr_api_version(void) { return (unsigned)GR_API_VERSION; }

GR_API const char *gr_build_info(void) {
  return "gpurun " GR_VERSION_STRING " (cuda=" GPURUN_HAVE_CUDA_STR " nccl=" GPURUN_HAVE_NCCL_STR
         " hwloc=" GPURUN_HWLOC_VERSION " mpi=" GPURUN_MPI_STANDARD ")";
}
