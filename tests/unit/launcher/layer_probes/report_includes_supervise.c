/* Must NOT compile: gpurun-report is on the base alone and sees not the supervisor's header. */
#include "gr_supervise.h"
int layer_probe;
