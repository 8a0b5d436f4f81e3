/* Limits shared by the gpurun launcher and the runtime, so that a plan one side writes the other
 * can always read. */
#ifndef GPURUN_LIMITS_H
#define GPURUN_LIMITS_H

/* GPUs (or GPU partitions: MIG instances, rsmi partitions) one rank may be given: 16 GPUs x 7 MIG
 * slices fit. The launcher refuses more; the runtime's plan parser likewise. See
 * GR_MAX_RANK_GPUS(3). */
#define GR_MAX_RANK_GPUS 128

#endif
