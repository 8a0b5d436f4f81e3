/* Must compile (a control, built for gpurun_tasks, gpurun_observe, gpurun_coll and gpurun_monitor): every layer
 * sees the base. */
#include "gr_error.h"
#include "gr_log.h"
#include "gr_safefile.h"
int layer_probe;
