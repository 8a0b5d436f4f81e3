/* Internal: how many GPUs the CUDA runtime sees, asked by gpurun -v without linking libcudart
 * (gpurun runs before the program and links neither MPI nor CUDA; cmake/GpurunLayers.cmake). */
#ifndef GR_CUDA_PROBE_H
#define GR_CUDA_PROBE_H

#include <stddef.h>

/* Loads the CUDA runtime the build was configured with (GR_CUDART_SONAME, else libcudart.so) with
 * dlopen and returns cudaGetDeviceCount's answer; 0 when the library, the entry point or the call
 * fails, with a short reason in why (if why_len > 0). Same contract as gr__cuda_device_count. */
int gr__launcher_cuda_device_count(char *why, size_t why_len);

#endif
