/* The only place gpurun changes the process: CPU and memory binding through hwloc. Kept thin, so
 * that what is bound is decided (and tested) in node_plan.c. */
#include "gr_launcher.h"

#include <errno.h>
#include <string.h>

gr_status gr__bind(const gr__node *n, const gr__node_plan *p, int rank, int *bound) {
  const gr__rank_plan *rp = &p->ranks[rank];
  *bound = 0;
  if (n->foreign) {
    return gr__fail_msg(GR_ERR_UNSUPPORTED, "topology came from a file, not bound");
  }
  if (hwloc_set_cpubind(n->topo, rp->cpuset, HWLOC_CPUBIND_PROCESS) != 0) {
    return gr__fail_msg(GR_ERR_SYSTEM, "CPU binding failed: %s", strerror(errno));
  }
  *bound |= GR_PLAN_BOUND_CPU;
  /* Memory: bind where the kernel allows it; a single-node machine gains nothing and some
   * containers forbid set_mempolicy, so failure here is a notice, not an error. */
  if (hwloc_get_nbobjs_by_type(n->topo, HWLOC_OBJ_NUMANODE) > 1 &&
      !hwloc_bitmap_iszero(rp->nodeset) &&
      hwloc_set_membind(n->topo, rp->nodeset, HWLOC_MEMBIND_BIND,
                        HWLOC_MEMBIND_PROCESS | HWLOC_MEMBIND_BYNODESET) != 0) {
    return gr__fail_msg(GR_ERR_SYSTEM, "memory binding failed: %s", strerror(errno));
  }
  if (hwloc_get_nbobjs_by_type(n->topo, HWLOC_OBJ_NUMANODE) > 1 &&
      !hwloc_bitmap_iszero(rp->nodeset))
    *bound |= GR_PLAN_BOUND_MEM;
  return GR_OK;
}
