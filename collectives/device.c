/* CUDA device discovery that never fails hard: no toolkit, no driver, no device all mean 0 GPUs. */
#include "gr_device.h"

#include "gr_config.h"
#include "gr_error.h"

#if GPURUN_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

gr_status gr__cuda_device_count(int *count) {
  *count = 0;
#if GPURUN_HAVE_CUDA
  int n = 0; /* cudaGetDeviceCount leaves it untouched on failure */
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess)
    return gr__fail_msg(GR_ERR_CUDA, "cudaGetDeviceCount: %s (%d)", cudaGetErrorString(e), (int)e);
  if (n <= 0) return gr__fail_msg(GR_ERR_NOT_FOUND, "cudaGetDeviceCount: no device");
  *count = n;
  return GR_OK;
#else
  return gr__fail_msg(GR_ERR_UNSUPPORTED, "built without CUDA");
#endif
}
