/* Must compile (a control): gpurun-doctor sees the launcher's core, the monitor's NVML loader and
 * health reader, and the base. */
#include "gr_cuda_probe.h"
#include "gr_doctor.h"
#include "gr_error.h"
#include "gr_escape.h"
#include "gr_health.h"
#include "gr_launcher.h"
int layer_probe;
