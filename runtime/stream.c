/* gr_stream_create / gr_stream_destroy: a CUDA stream on the current device at the rank's priority
 * (gpurun --priority): the greatest stream priority the device offers for high, the least for
 * low, the default for normal. Without CUDA in the build or without a device: GR_ERR_UNSUPPORTED. */
#include <gpurun/runtime.h>

#include "gr_config.h"
#include "gr_device.h"
#include "gr_error.h"
#include "gr_log.h"
#include "gr_param.h"
#include "gr_priority.h"

#include <stdlib.h>
#include <string.h>

#if GPURUN_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

/* GR_PRIORITY_*: written by gr_init under its lock, before any stream call */
static int level = GR_PRIORITY_NORMAL;

void gr__priority_set(int l) {
  level = l == GR_PRIORITY_LOW || l == GR_PRIORITY_HIGH ? l : GR_PRIORITY_NORMAL;
}

const char *gr__priority_level_name(void) {
  return level == GR_PRIORITY_LOW ? "low" : level == GR_PRIORITY_HIGH ? "high" : "normal";
}

GR_API gr_status gr_stream_create(gr_stream *out) {
  static const char fn[] = "gr_stream_create";
  if (!out) return gr__fail(GR_ERR_INVALID, fn, "out is NULL");
  *out = NULL;
#if GPURUN_HAVE_CUDA
  if (!gr_initialized())
    return gr__fail(GR_ERR_STATE, fn, "gpurun is not initialised (call gr_init first)");
  int ndev = 0;
  if (gr__cuda_device_count(&ndev) != GR_OK)
    return gr__fail(GR_ERR_UNSUPPORTED, fn, "no CUDA device (%s): stream priorities need a GPU",
                    gr_last_error());
  int least = 0, greatest = 0;
  cudaError_t e = cudaDeviceGetStreamPriorityRange(&least, &greatest);
  if (e != cudaSuccess)
    return gr__fail(GR_ERR_UNSUPPORTED, fn, "cudaDeviceGetStreamPriorityRange: %s",
                    cudaGetErrorString(e));
  /* CUDA: lower numbers are higher priorities; the default priority is 0. */
  int prio = level == GR_PRIORITY_HIGH ? greatest : level == GR_PRIORITY_LOW ? least : 0;
  cudaStream_t s = NULL;
  e = cudaStreamCreateWithPriority(&s, cudaStreamDefault, prio);
  if (e != cudaSuccess)
    return gr__fail(GR_ERR_CUDA, fn, "cudaStreamCreateWithPriority(priority %d, %s): %s", prio,
                    gr__priority_level_name(), cudaGetErrorString(e));
  *out = (gr_stream)s;
  return GR_OK;
#else
  return gr__fail(GR_ERR_UNSUPPORTED, fn,
                  "this build has no CUDA (GPURUN_WITH_CUDA=OFF): there are no streams to create");
#endif
}

GR_API gr_status gr_stream_destroy(gr_stream s) {
  static const char fn[] = "gr_stream_destroy";
  if (!s)
    return gr__fail(GR_ERR_INVALID, fn, "stream is NULL (the default stream is not destroyed)");
#if GPURUN_HAVE_CUDA
  cudaError_t e = cudaStreamDestroy((cudaStream_t)s);
  if (e != cudaSuccess)
    return gr__fail(GR_ERR_CUDA, fn, "cudaStreamDestroy: %s", cudaGetErrorString(e));
  return GR_OK;
#else
  return gr__fail(GR_ERR_UNSUPPORTED, fn,
                  "this build has no CUDA (GPURUN_WITH_CUDA=OFF): there are no streams to destroy");
#endif
}
