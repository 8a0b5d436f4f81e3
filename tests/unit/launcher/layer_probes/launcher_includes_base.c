/* Must compile (a control): the launcher side sees the base (the plan contract included) and the
 * supervisor. */
#include "gr_error.h"
#include "gr_launcher.h"
#include "gr_plan.h"
#include "gr_supervise.h"
int layer_probe;
