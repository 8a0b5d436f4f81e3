/* Must compile (the control): the launcher side sees the base and the supervisor. */
#include "gr_error.h"
#include "gr_launcher.h"
#include "gr_supervise.h"
int layer_probe;
