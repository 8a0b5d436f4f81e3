/* gpurun: the umbrella header. Include this, or only the part you use. */
#ifndef GPURUN_GPURUN_H
#define GPURUN_GPURUN_H

#include <gpurun/status.h>
#include <gpurun/version.h>
#if __has_include(<gpurun/pool.h>)
#include <gpurun/pool.h>
#endif
#if __has_include(<gpurun/coll.h>)
#include <gpurun/coll.h>
#endif
#if __has_include(<gpurun/dpool.h>)
#include <gpurun/dpool.h>
#endif
#if __has_include(<gpurun/runtime.h>)
#include <gpurun/runtime.h>
#endif

#endif
