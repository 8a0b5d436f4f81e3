// sim's CUDA path: the same update as the CPU tiles (sim.c), one thread per grid point, with the
// block's max |u' - u| reduced on the device; plus halo packing so the exchange moves 4 edges.
// Built only when CUDA is enabled and a CUDA compiler is found (see CMakeLists.txt).
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

struct sim_gpu {
  sim_block b;
  double *u, *un;            // (ny + 2) x (nx + 2), halo included
  double *send, *recv;       // N, S, W, E edges: nx, nx, ny, ny
  unsigned long long *resid; // max as the bits of a non-negative double (ordered like the value)
  cudaStream_t stream;
};

#define CU(call)                                                                                   \
  do {                                                                                             \
    cudaError_t e_ = (call);                                                                       \
    if (e_ != cudaSuccess) {                                                                       \
      snprintf(err, n, "%s: %s (%d)", #call, cudaGetErrorString(e_), (int)e_);                     \
      return -1;                                                                                   \
    }                                                                                              \
  } while (0)

extern "C" int sim_gpu_count(void) {
  int count = 0; // left untouched by cudaGetDeviceCount when there is no driver
  if (cudaGetDeviceCount(&count) != cudaSuccess) return 0;
  return count;
}

extern "C" int sim_gpu_create(const sim_block *b, const double *host_u, sim_gpu **out, char *err,
                              size_t n) {
  sim_gpu *g = (sim_gpu *)calloc(1, sizeof *g);
  if (!g) {
    snprintf(err, n, "out of host memory");
    return -1;
  }
  *out = g;
  g->b = *b;
  size_t cells = (size_t)(b->nx + 2) * (size_t)(b->ny + 2);
  size_t edges = 2 * (size_t)b->nx + 2 * (size_t)b->ny;
  CU(cudaStreamCreate(&g->stream));
  CU(cudaMalloc((void **)&g->u, cells * sizeof(double)));
  CU(cudaMalloc((void **)&g->un, cells * sizeof(double)));
  CU(cudaMalloc((void **)&g->send, edges * sizeof(double)));
  CU(cudaMalloc((void **)&g->recv, edges * sizeof(double)));
  CU(cudaMalloc((void **)&g->resid, sizeof(unsigned long long)));
  CU(cudaMemcpy(g->u, host_u, cells * sizeof(double), cudaMemcpyHostToDevice));
  CU(cudaMemcpy(g->un, host_u, cells * sizeof(double), cudaMemcpyHostToDevice));
  return 0;
}

__global__ void step_kernel(const double *__restrict__ u, double *__restrict__ un, int nx, int ny,
                            double r, unsigned long long *resid) {
  const int stride = nx + 2;
  int i = blockIdx.x * blockDim.x + threadIdx.x + 1;
  int j = blockIdx.y * blockDim.y + threadIdx.y + 1;
  double d = 0;
  if (i <= nx && j <= ny) {
    size_t k = (size_t)j * stride + i;
    // The CPU's expression, term for term; nvcc may still contract into FMAs (--fmad), so GPU and
    // CPU runs agree to rounding, not bit for bit.
    double v = u[k] + r * ((u[k - stride] + u[k + stride] + u[k - 1] + u[k + 1]) - 4.0 * u[k]);
    d = fabs(v - u[k]);
    un[k] = v;
  }
  // Warp max, then one atomic per warp. Non-negative doubles order like their bit patterns.
  for (int off = 16; off > 0; off /= 2)
    d = fmax(d, __shfl_down_sync(0xffffffffu, d, off));
  if ((threadIdx.x + threadIdx.y * blockDim.x) % 32 == 0)
    atomicMax(resid, (unsigned long long)__double_as_longlong(d));
}

extern "C" int sim_gpu_step(sim_gpu *g, double r, double *resid, char *err, size_t n) {
  dim3 block(32, 8);
  dim3 grid((g->b.nx + 31) / 32, (g->b.ny + 7) / 8);
  CU(cudaMemsetAsync(g->resid, 0, sizeof *g->resid, g->stream));
  step_kernel<<<grid, block, 0, g->stream>>>(g->u, g->un, g->b.nx, g->b.ny, r, g->resid);
  CU(cudaGetLastError());
  unsigned long long bits = 0;
  CU(cudaMemcpyAsync(&bits, g->resid, sizeof bits, cudaMemcpyDeviceToHost, g->stream));
  CU(cudaStreamSynchronize(g->stream));
  double v;
  memcpy(&v, &bits, sizeof v);
  *resid = v;
  double *t = g->u;
  g->u = g->un;
  g->un = t;
  return 0;
}

double *sim_gpu_send_buf(sim_gpu *g) { return g->send; }
double *sim_gpu_recv_buf(sim_gpu *g) { return g->recv; }

extern "C" int sim_gpu_pack(sim_gpu *g, char *err, size_t n) {
  const int nx = g->b.nx, ny = g->b.ny;
  const size_t sp = (size_t)(nx + 2) * sizeof(double);
  // N and S rows are contiguous; W and E columns are strided (pitch = one row).
  CU(cudaMemcpyAsync(g->send, g->u + (nx + 2) + 1, nx * sizeof(double), cudaMemcpyDeviceToDevice,
                     g->stream));
  CU(cudaMemcpyAsync(g->send + nx, g->u + (size_t)ny * (nx + 2) + 1, nx * sizeof(double),
                     cudaMemcpyDeviceToDevice, g->stream));
  CU(cudaMemcpy2DAsync(g->send + 2 * nx, sizeof(double), g->u + (nx + 2) + 1, sp, sizeof(double),
                       ny, cudaMemcpyDeviceToDevice, g->stream));
  CU(cudaMemcpy2DAsync(g->send + 2 * nx + ny, sizeof(double), g->u + (nx + 2) + nx, sp,
                       sizeof(double), ny, cudaMemcpyDeviceToDevice, g->stream));
  CU(cudaStreamSynchronize(g->stream));
  return 0;
}

extern "C" int sim_gpu_unpack(sim_gpu *g, int has_n, int has_s, int has_w, int has_e, char *err,
                              size_t n) {
  const int nx = g->b.nx, ny = g->b.ny;
  const size_t sp = (size_t)(nx + 2) * sizeof(double);
  if (has_n)
    CU(cudaMemcpyAsync(g->u + 1, g->recv, nx * sizeof(double), cudaMemcpyDeviceToDevice,
                       g->stream));
  if (has_s)
    CU(cudaMemcpyAsync(g->u + (size_t)(ny + 1) * (nx + 2) + 1, g->recv + nx, nx * sizeof(double),
                       cudaMemcpyDeviceToDevice, g->stream));
  if (has_w)
    CU(cudaMemcpy2DAsync(g->u + (nx + 2), sp, g->recv + 2 * nx, sizeof(double), sizeof(double), ny,
                         cudaMemcpyDeviceToDevice, g->stream));
  if (has_e)
    CU(cudaMemcpy2DAsync(g->u + (nx + 2) + nx + 1, sp, g->recv + 2 * nx + ny, sizeof(double),
                         sizeof(double), ny, cudaMemcpyDeviceToDevice, g->stream));
  CU(cudaStreamSynchronize(g->stream));
  return 0;
}

extern "C" int sim_gpu_copy(sim_gpu *g, void *dst, const void *src, size_t bytes, int to_device,
                            char *err, size_t n) {
  CU(cudaMemcpyAsync(dst, src, bytes, to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost,
                     g->stream));
  CU(cudaStreamSynchronize(g->stream));
  return 0;
}

extern "C" int sim_gpu_download(sim_gpu *g, double *host_u, char *err, size_t n) {
  size_t cells = (size_t)(g->b.nx + 2) * (size_t)(g->b.ny + 2);
  CU(cudaMemcpy(host_u, g->u, cells * sizeof(double), cudaMemcpyDeviceToHost));
  return 0;
}

extern "C" void sim_gpu_destroy(sim_gpu *g) {
  if (!g) return;
  cudaFree(g->u);
  cudaFree(g->un);
  cudaFree(g->send);
  cudaFree(g->recv);
  cudaFree(g->resid);
  if (g->stream) cudaStreamDestroy(g->stream);
  free(g);
}
