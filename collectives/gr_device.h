/* Internal: what the CUDA runtime says about this process's GPUs. Without CUDA in the build, or
 * without a driver or device at run time, there are no GPUs and the recorded sentence says which. */
#ifndef GR_DEVICE_H
#define GR_DEVICE_H

#include <gpurun/status.h>

/* Number of CUDA devices visible to this process, in *count. GR_OK with *count >= 1; otherwise
 * *count = 0 and the sentence (gr__fail_msg, read with gr_last_error()) says why:
 * GR_ERR_UNSUPPORTED "built without CUDA", GR_ERR_CUDA "cudaGetDeviceCount: ERROR (N)",
 * GR_ERR_NOT_FOUND "cudaGetDeviceCount: no device". No GPU is an answer, not a failure of the
 * process: callers run in CPU mode and quote the sentence where they say so. */
gr_status gr__cuda_device_count(int *count);

#endif
