/* Internal: what names one launch of MPICH's Hydra (mpiexec.hydra, MPICH's and Intel MPI's
 * mpiexec) outside a scheduler. Hydra exports PMI_RANK, PMI_SIZE, PMI_FD and MPI_LOCALRANKID but
 * no job id; each rank is started by that launch's hydra_pmi_proxy on its node, whose command
 * line names the mpiexec's control address (--control-port HOST:PORT), the same on every node of
 * the launch and different for launches that run at the same time. */
#ifndef GR_HYDRA_H
#define GR_HYDRA_H

#include <stddef.h>

/* The nearest ancestor (parent, or up to 3 more levels: gpurun's supervisor, a shell) that is a
 * hydra_pmi_proxy: its pid and start time (clock ticks after boot, so that a reused pid is another
 * process) in *pid and *start; 0, or -1 when there is none. */
int gr__hydra_proxy(int *pid, unsigned long long *start);

/* "hydra-HOST-PORT" from that proxy's --control-port: one id for the whole launch on every node;
 * 0, or -1 when there is no proxy or its command line names no control port. */
int gr__hydra_job(char *out, size_t cap);

#endif
