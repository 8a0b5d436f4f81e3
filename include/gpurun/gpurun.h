/* gpurun: the umbrella header. Include this, or only the part you use (pool.h alone needs no MPI).
 * See gpurun(3). */
#ifndef GPURUN_GPURUN_H
#define GPURUN_GPURUN_H

#include <gpurun/status.h>
#include <gpurun/version.h>
#include <gpurun/pool.h>
#include <gpurun/coll.h>
#include <gpurun/dpool.h>
#include <gpurun/runtime.h>

#endif
