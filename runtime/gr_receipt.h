/* Internal: the placement receipt (receipt.c), checked by gr_init. */
#ifndef GR_RECEIPT_H
#define GR_RECEIPT_H

#include <gpurun/runtime.h>

#include "gr_plan.h"

/* Compares this process's CPU affinity, memory policy, CUDA device and UCX NIC list (from envp)
 * with the plan gr_init read (only what gpurun applied: plan->bound) and r's GPU and NIC. Fills
 * r->receipt ("" when all match) and r->receipt_differs; returns that count, -1 without a plan. */
int gr__receipt_check(gr_rank_info_t *r, const gr_plan *plan, char *const *envp);

#endif
