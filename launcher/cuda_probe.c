/* gpurun -v's CUDA device count through dlopen: the launcher links no CUDA library. */
#include "gr_cuda_probe.h"

#include "gr_error.h"

#include <dlfcn.h>
#include <stdio.h>

#ifndef GR_CUDART_SONAME
#define GR_CUDART_SONAME "libcudart.so"
#endif

/* The two stable entry points used, declared here (cudaError_t is an int-sized enum). */
typedef int (*cuda_count_fn)(int *count);
typedef const char *(*cuda_string_fn)(int err);

gr_status gr__launcher_cuda_device_count(int *count) {
  *count = 0;
  void *lib = dlopen(GR_CUDART_SONAME, RTLD_NOW | RTLD_LOCAL);
  if (!lib) return gr__fail_msg(GR_ERR_NOT_FOUND, "dlopen %s: %s", GR_CUDART_SONAME, dlerror());
  /* POSIX leaves object-to-function pointer conversion to the platform; Linux defines it. */
  cuda_count_fn get_count;
  cuda_string_fn string;
  *(void **)&get_count = dlsym(lib, "cudaGetDeviceCount");
  *(void **)&string = dlsym(lib, "cudaGetErrorString");
  if (!get_count) {
    dlclose(lib);
    return gr__fail_msg(GR_ERR_NOT_FOUND, "%s has no cudaGetDeviceCount", GR_CUDART_SONAME);
  }
  /* libcudart stays loaded: unloading it after it started the driver is not worth the risk */
  int n = 0; /* cudaGetDeviceCount leaves it untouched on failure */
  int e = get_count(&n);
  if (e != 0)
    return gr__fail_msg(GR_ERR_CUDA, "cudaGetDeviceCount: %s (%d)", string ? string(e) : "error",
                        e);
  if (n <= 0) return gr__fail_msg(GR_ERR_NOT_FOUND, "cudaGetDeviceCount: no device");
  *count = n;
  return GR_OK;
}

void gr__launcher_cuda_versions(gr__cuda_versions *v) {
  v->runtime = v->driver = 0;
  v->runtime_why[0] = v->driver_why[0] = 0;
  v->runtime_lib = GR_CUDART_SONAME;
  typedef int (*version_fn)(int *version);
  version_fn get;
  void *rt = dlopen(GR_CUDART_SONAME, RTLD_NOW | RTLD_LOCAL);
  if (!rt) {
    snprintf(v->runtime_why, sizeof v->runtime_why, "dlopen %s: %s", GR_CUDART_SONAME, dlerror());
  } else {
    *(void **)&get = dlsym(rt, "cudaRuntimeGetVersion");
    if (!get || get(&v->runtime) != 0 || v->runtime <= 0) {
      snprintf(v->runtime_why, sizeof v->runtime_why, "%s gives no cudaRuntimeGetVersion",
               GR_CUDART_SONAME);
      v->runtime = 0;
    }
  }
  /* the driver's own library, asked directly: cuDriverGetVersion needs no cuInit and no GPU */
  void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!drv) {
    snprintf(v->driver_why, sizeof v->driver_why, "dlopen libcuda.so.1: %s", dlerror());
    return;
  }
  *(void **)&get = dlsym(drv, "cuDriverGetVersion");
  if (!get || get(&v->driver) != 0 || v->driver <= 0) {
    snprintf(v->driver_why, sizeof v->driver_why, "libcuda.so.1 gives no cuDriverGetVersion");
    v->driver = 0;
  }
  /* both stay loaded, as in gr__launcher_cuda_device_count */
}
