/* Must compile (a control): the runtime sees every layer of the library below it, and MPI. */
#include "gr_coll.h"
#include "gr_counters.h"
#include "gr_error.h"
#include "gr_plan.h"
#include "gr_pool.h"
#include <mpi.h>
int layer_probe;
