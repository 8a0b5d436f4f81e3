/* Must NOT compile: the launcher side sees no runtime-layer header (cmake/GpurunLayers.cmake). */
#include "gr_pool.h"
int layer_probe;
