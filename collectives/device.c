/* CUDA device discovery that never fails hard: no toolkit, no driver, no device all mean 0 GPUs. */
#include "gr_device.h"

#include "gr_config.h"

#include <stdio.h>

#if GPURUN_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

int gr__cuda_device_count(char *why, size_t why_len) {
#if GPURUN_HAVE_CUDA
  int n = 0; /* cudaGetDeviceCount leaves it untouched on failure */
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (why_len)
      snprintf(why, why_len, "cudaGetDeviceCount: %s (%d)", cudaGetErrorString(e), (int)e);
    return 0;
  }
  if (n == 0 && why_len) snprintf(why, why_len, "cudaGetDeviceCount: no device");
  return n;
#else
  if (why_len) snprintf(why, why_len, "built without CUDA");
  return 0;
#endif
}
