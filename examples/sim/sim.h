/* sim: the pieces shared by the CPU path (sim.c) and the CUDA path (sim_cuda.cu). */
#ifndef SIM_H
#define SIM_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One rank's block of the global NX x NY interior grid, stored with a one-point halo on each side:
 * (ny + 2) rows of (nx + 2) doubles, row-major; global point (gx, gy) is local (gx - x0 + 1,
 * gy - y0 + 1). Halo cells on the global boundary stay 0 (Dirichlet). */
typedef struct {
  int nx, ny; /* owned points */
  int x0, y0; /* global index of the first owned point */
} sim_block;

/* The CUDA path: device copies of the field, a fused update + residual kernel, halo packing.
 * Available only when the program was built with SIM_HAVE_CUDA. Every call returns 0 on success
 * and writes a sentence to err on failure. */
typedef struct sim_gpu sim_gpu;
int sim_gpu_count(void);
int sim_gpu_create(const sim_block *b, const double *host_u, sim_gpu **out, char *err, size_t n);
/* u_new = u + r * (sum of the 4 neighbours - 4u) on the owned points; *resid = max |u_new - u| on
 * this rank. Swaps the buffers. */
int sim_gpu_step(sim_gpu *g, double r, double *resid, char *err, size_t n);
/* Edges of the owned block, packed into device buffers in the order N, S, W, E (nx, nx, ny, ny
 * doubles), and the halo buffers to receive into; sim_gpu_unpack copies the received W/E columns
 * and N/S rows into the halo. */
double *sim_gpu_send_buf(sim_gpu *g);
double *sim_gpu_recv_buf(sim_gpu *g);
int sim_gpu_pack(sim_gpu *g, char *err, size_t n);
int sim_gpu_unpack(sim_gpu *g, int has_n, int has_s, int has_w, int has_e, char *err, size_t n);
int sim_gpu_copy(sim_gpu *g, void *dst, const void *src, size_t bytes, int to_device, char *err,
                 size_t n);
int sim_gpu_download(sim_gpu *g, double *host_u, char *err, size_t n);
void sim_gpu_destroy(sim_gpu *g);

#ifdef __cplusplus
}
#endif
#endif
