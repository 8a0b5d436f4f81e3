/* gpurun runtime: init/finalize over the plan gpurun exported, the world communicator, the
 * rank's place on its node. See gr_init(3), gr_rank_info(3) and gr_stream_create(3). */
#ifndef GPURUN_RUNTIME_H
#define GPURUN_RUNTIME_H

#include <gpurun/coll.h>
#include <gpurun/limits.h>
#include <gpurun/pool.h>
#include <gpurun/status.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What gr_init found out about this rank; see gr_rank_info(3). */
typedef struct {
  int rank, size;                  /* MPI_COMM_WORLD */
  int local_rank, local_size;      /* on this node */
  char node[256];                  /* host name */
  int ngpus;                       /* GPUs this rank uses (0: CPU mode) */
  char gpus[GR_MAX_RANK_GPUS][16]; /* their PCI bus ids, "0000:c3:00.0" */
  char cpus[256];                  /* cpuset, hwloc list syntax of OS indexes ("0-13") */
  int numa;                        /* NUMA node (OS index), -1 unknown */
  char nic[64];                    /* nearest NIC ("mlx5_3"), "" none */
  gr_backend backend;              /* of gr_world() */
  int from_plan;                   /* 1 when read from gpurun's GPURUN_* plan */
  int receipt_differs;             /* placement receipt: -1 not checked (no plan), 0 as planned,
                                 N: N differences, described in receipt */
  char receipt[256];               /* "cpus planned 0-13, got 0-55; ..." ("" as planned) */
} gr_rank_info_t;

/* Initialise MPI if needed, read gpurun's plan, create the world communicator and the default
 * pool. See gr_init(3). */
GR_API gr_status gr_init(int *argc, char ***argv);
/* Destroy what gr_init created; finalizes MPI only when gr_init initialised it. See
 * gr_finalize(3). */
GR_API gr_status gr_finalize(void);
/* 1 between gr_init and gr_finalize. See gr_initialized(3). */
GR_API int gr_initialized(void);
/* The world communicator and the default pool (NULL outside gr_init..gr_finalize). See
 * gr_world(3). */
GR_API gr_comm *gr_world(void);
GR_API gr_pool *gr_default_pool(void);
/* Copy this rank's gr_rank_info_t. See gr_rank_info(3). */
GR_API gr_status gr_rank_info(gr_rank_info_t *out);
/* sizeof(gr_rank_info_t) as this library was built, for bindings that mirror the struct. See
 * gr_rank_info_sizeof(3). */
GR_API size_t gr_rank_info_sizeof(void);

/* A CUDA stream on the current device at this rank's priority (gpurun --priority); destroy it
 * before gr_finalize. See gr_stream_create(3). */
GR_API gr_status gr_stream_create(gr_stream *out);
GR_API gr_status gr_stream_destroy(gr_stream s);

#ifdef __cplusplus
}
#endif
#endif
