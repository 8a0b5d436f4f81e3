/* Internal: how many GPUs the CUDA runtime sees, asked by gpurun -v without linking libcudart
 * (gpurun runs before the program and links neither MPI nor CUDA; cmake/GpurunLayers.cmake). */
#ifndef GR_CUDA_PROBE_H
#define GR_CUDA_PROBE_H

#include <gpurun/status.h>

/* Loads the CUDA runtime the build was configured with (GR_CUDART_SONAME, else libcudart.so) with
 * dlopen and puts cudaGetDeviceCount's answer in *count: GR_OK with *count >= 1; otherwise
 * *count = 0 and the sentence (gr_last_error()) says why: GR_ERR_NOT_FOUND "dlopen NAME: ...",
 * "NAME has no cudaGetDeviceCount", "cudaGetDeviceCount: no device"; GR_ERR_CUDA
 * "cudaGetDeviceCount: ERROR (N)". Same contract as gr__cuda_device_count. */
gr_status gr__launcher_cuda_device_count(int *count);

/* The CUDA versions this node offers, as 1000 * major + 10 * minor (13000 is 13.0): the runtime's
 * (cudaRuntimeGetVersion of the runtime above) and the newest the driver supports
 * (cuDriverGetVersion of libcuda.so.1); 0 with a short reason in *_why where a library or entry
 * point is missing. Loads both with dlopen, starts no GPU. */
typedef struct {
  int runtime, driver;
  const char *runtime_lib; /* the runtime's soname */
  char runtime_why[200], driver_why[200];
} gr__cuda_versions;
void gr__launcher_cuda_versions(gr__cuda_versions *v);

#endif
