/* Internal: what the CUDA runtime says about this process's GPUs. Without CUDA in the build, or
 * without a driver or device at run time, there are no GPUs and `why` says which. */
#ifndef GR_DEVICE_H
#define GR_DEVICE_H

#include <stddef.h>

/* Number of CUDA devices visible to this process (0 when none or on any failure). When 0, a short
 * reason is written to why (if why_len > 0): "built without CUDA", "cudaGetDeviceCount: ...". */
int gr__cuda_device_count(char *why, size_t why_len);

#endif
