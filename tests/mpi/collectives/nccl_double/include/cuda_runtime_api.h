/* NCCL TEST DOUBLE (test-only, never installed): the few CUDA runtime declarations
 * collectives/backend_nccl.c uses, with NVIDIA's names and values, implemented in nccl_double.c
 * over host memory. Every function is renamed to grdbl_* so that a test executable can link the
 * real libcudart beside it. It proves our glue, not CUDA or NCCL. */
#ifndef GRDBL_CUDA_RUNTIME_API_H
#define GRDBL_CUDA_RUNTIME_API_H

#include <stddef.h>

typedef enum cudaError {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInsufficientDriver = 35,
  cudaErrorNotReady = 600
} cudaError_t;
typedef struct grdbl_stream *cudaStream_t;
enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4
};
enum cudaMemoryType {
  cudaMemoryTypeUnregistered = 0,
  cudaMemoryTypeHost = 1,
  cudaMemoryTypeDevice = 2,
  cudaMemoryTypeManaged = 3
};
struct cudaPointerAttributes {
  enum cudaMemoryType type;
  int device;
  void *devicePointer;
  void *hostPointer;
};

#define cudaGetDeviceCount grdbl_cudaGetDeviceCount
#define cudaGetDevice grdbl_cudaGetDevice
#define cudaSetDevice grdbl_cudaSetDevice
#define cudaMalloc grdbl_cudaMalloc
#define cudaFree grdbl_cudaFree
#define cudaMallocHost grdbl_cudaMallocHost
#define cudaFreeHost grdbl_cudaFreeHost
#define cudaMemcpy grdbl_cudaMemcpy
#define cudaMemcpyAsync grdbl_cudaMemcpyAsync
#define cudaMemset grdbl_cudaMemset
#define cudaStreamCreate grdbl_cudaStreamCreate
#define cudaStreamDestroy grdbl_cudaStreamDestroy
#define cudaStreamSynchronize grdbl_cudaStreamSynchronize
#define cudaStreamQuery grdbl_cudaStreamQuery
#define cudaPointerGetAttributes grdbl_cudaPointerGetAttributes
#define cudaGetErrorString grdbl_cudaGetErrorString
#define cudaDeviceGetPCIBusId grdbl_cudaDeviceGetPCIBusId
#define cudaGetLastError grdbl_cudaGetLastError

cudaError_t cudaGetDeviceCount(int *n);
cudaError_t cudaGetDevice(int *d);
cudaError_t cudaSetDevice(int d);
cudaError_t cudaMalloc(void **p, size_t bytes);
cudaError_t cudaFree(void *p);
cudaError_t cudaMallocHost(void **p, size_t bytes);
cudaError_t cudaFreeHost(void *p);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind,
                            cudaStream_t s);
cudaError_t cudaMemset(void *p, int value, size_t bytes);
cudaError_t cudaStreamCreate(cudaStream_t *s);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaStreamQuery(cudaStream_t s);
cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *a, const void *p);
const char *cudaGetErrorString(cudaError_t e);
cudaError_t cudaGetLastError(void);
/* The fake device's PCI bus id, from GRDBL_GPUS (see nccl_double.c): what real CUDA reports for
 * the device, and for a MIG instance the bus id of its parent GPU. */
cudaError_t cudaDeviceGetPCIBusId(char *bus_id, int len, int device);

#endif
