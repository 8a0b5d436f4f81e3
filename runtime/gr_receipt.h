/* Internal: the placement receipt (receipt.c), checked by gr_init. */
#ifndef GR_RECEIPT_H
#define GR_RECEIPT_H

#include <gpurun/runtime.h>

/* Compares this process's CPU affinity, memory policy, CUDA device and UCX NIC list with the plan
 * in r and envp (only what gpurun applied: GPURUN_BOUND). Fills r->receipt ("" when all match)
 * and r->receipt_differs; returns that count, -1 without a plan. */
int gr__receipt_check(gr_rank_info_t *r, char *const *envp);

#endif
