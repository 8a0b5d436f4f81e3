/* placeholder until the NCCL backend lands */
#include "gr_coll.h"
static gr_status nc_create(gr_comm *c, double d) { (void)d; return gr__comm_err(c, GR_ERR_UNSUPPORTED, "NCCL backend not yet implemented"); }
const gr__coll_ops gr__coll_ops_nccl = {.name = "nccl", .kind = GR_BACKEND_NCCL, .create = nc_create};
