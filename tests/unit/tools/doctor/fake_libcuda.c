/* A stand-in libcuda.so.1 for gpurun-doctor's tests: the driver's version entry point only, so the
 * CUDA check sees a driver (CUDA 13.0) on a machine without one. Every other driver entry point is
 * absent, which the CUDA runtime reports as an error rather than a device. */
int cuDriverGetVersion(int *version);
int cuDriverGetVersion(int *version) {
  *version = 13000;
  return 0;
}
