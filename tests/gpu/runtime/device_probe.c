/* device_probe: what a borrowed GPU machine really has, for the device kit's run.sh
 * (scripts/device-kit). Prints key=value lines; never needs NCCL at link time, so it runs even
 * where no libnccl is found, and says so.
 *   device_probe info              CUDA runtime/driver versions, each device, the libnccl.so.2 that
 *                                  the loader finds (path and version)
 *   device_probe nccl-version LIB  the version of one libnccl file (dlopen'ed by its path)
 *   device_probe placement         under mpirun + gpurun: gr_init's GPU for this rank (the plan,
 *                                  from hwloc's PCI view) against cudaDeviceGetPCIBusId of the
 *                                  device CUDA made current; exit 0 when they are the same PCI
 *                                  function, 1 when not, 77 when there is nothing to compare */
#include <gpurun/gpurun.h>

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <link.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int (*nccl_get_version_fn)(int *);

/* The version code of the ncclGetVersion in handle h (e.g. 22809 for 2.28.9), or -1. */
static int nccl_version(void *h) {
  nccl_get_version_fn f = (nccl_get_version_fn)(uintptr_t)dlsym(h, "ncclGetVersion");
  int v = -1;
  if (!f || f(&v) != 0) return -1;
  return v;
}

static void print_nccl(const char *key, void *h, const char *fallback_path) {
  const char *path = fallback_path;
  struct link_map *lm = NULL;
  if (dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name && *lm->l_name) path = lm->l_name;
  int v = nccl_version(h);
  printf("%s_path=%s\n%s_version=%d\n", key, path, key, v);
}

static int info(void) {
  int rt = 0, drv = 0, n = 0;
  cudaRuntimeGetVersion(&rt);
  cudaError_t de = cudaDriverGetVersion(&drv);
  printf("cuda_runtime=%d\ncuda_driver=%d%s\n", rt, drv, de == cudaSuccess ? "" : " (unknown)");
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    printf("devices=0\ndevices_error=%s (%d)\n", cudaGetErrorString(e), (int)e);
    n = 0;
  } else {
    printf("devices=%d\n", n);
  }
  for (int d = 0; d < n; d++) {
    struct cudaDeviceProp p;
    char bus[32] = "?";
    if (cudaGetDeviceProperties(&p, d) != cudaSuccess) continue;
    cudaDeviceGetPCIBusId(bus, (int)sizeof bus, d);
    printf("device%d=%s sm_%d%d pci=%s mem_mib=%zu sms=%d\n", d, p.name, p.major, p.minor, bus,
           p.totalGlobalMem >> 20, p.multiProcessorCount);
  }
  void *h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  if (h) {
    print_nccl("nccl", h, "libnccl.so.2");
    dlclose(h);
  } else {
    const char *err = dlerror();
    printf("nccl_path=none\nnccl_error=%s\n", err ? err : "dlopen failed");
  }
  return n > 0 ? 0 : 77;
}

static int nccl_file_version(const char *path) {
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *err = dlerror();
    printf("nccl_file=%s\nnccl_file_version=-1\nnccl_file_error=%s\n", path, err ? err : "?");
    return 1;
  }
  int v = nccl_version(h);
  printf("nccl_file=%s\nnccl_file_version=%d\n", path, v);
  dlclose(h);
  return v > 0 ? 0 : 1;
}

/* Parse "dddd:bb:dd.f" (any domain width, any case) into one comparable number; -1 if malformed. */
static long long pci_key(const char *s) {
  unsigned dom = 0, bus = 0, dev = 0, fn = 0;
  if (!s || sscanf(s, "%x:%x:%x.%x", &dom, &bus, &dev, &fn) != 4) return -1;
  return ((long long)dom << 24) | ((long long)bus << 16) | ((long long)dev << 8) | fn;
}

static int placement(int argc, char **argv) {
  if (gr_init(&argc, &argv) != GR_OK) {
    fprintf(stderr, "device_probe: gr_init failed: %s\n", gr_last_error());
    return 1;
  }
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  gr_rank_info_t ri;
  int rc = 77;
  if (gr_rank_info(&ri) != GR_OK) {
    fprintf(stderr, "device_probe: gr_rank_info failed: %s\n", gr_last_error());
    rc = 1;
  } else {
    int dev = -1;
    char bus[32] = "";
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetPCIBusId(bus, (int)sizeof bus, dev) != cudaSuccess)
      bus[0] = '\0';
    const char *plan = ri.ngpus > 0 ? ri.gpus[0] : "";
    const char *env = getenv("GPURUN_GPUS");
    int same = *plan && *bus && pci_key(plan) >= 0 && pci_key(plan) == pci_key(bus);
    if (*plan && *bus) rc = same ? 0 : 1;
    printf("rank=%d plan_gpu=%s GPURUN_GPUS=%s cuda_device=%d cuda_pci=%s verdict=%s\n", rank,
           *plan ? plan : "-", env ? env : "(unset)", dev, *bus ? bus : "-",
           rc == 0   ? "MATCH"
           : rc == 1 ? "MISMATCH"
                     : "NOTHING-TO-COMPARE");
  }
  /* Every rank's verdict decides: the worst one wins (1 > 77 > 0). */
  int worst = rc == 1 ? 2 : rc == 77 ? 1 : 0, all = 0;
  MPI_Allreduce(&worst, &all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  gr_finalize();
  return all == 2 ? 1 : all == 1 ? 77 : 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc >= 2 && strcmp(argv[1], "info") == 0) return info();
  if (argc >= 3 && strcmp(argv[1], "nccl-version") == 0) return nccl_file_version(argv[2]);
  if (argc >= 2 && strcmp(argv[1], "placement") == 0) return placement(argc - 1, argv + 1);
  fprintf(stderr, "usage: device_probe info | nccl-version LIBNCCL | placement\n");
  return 2;
}
