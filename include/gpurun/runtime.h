/* gpurun runtime: init/finalize over the plan gpurun exported, the world communicator, the
 * rank's place on its node. */
#ifndef GPURUN_RUNTIME_H
#define GPURUN_RUNTIME_H

#include <gpurun/coll.h>
#include <gpurun/limits.h>
#include <gpurun/pool.h>
#include <gpurun/status.h>

#ifdef __cplusplus
extern "C" {
#endif

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

/* Initialise MPI if the program has not (MPI_THREAD_MULTIPLE when available), read gpurun's plan,
 * select the device, create the world communicator and the default task pool. argc/argv may be
 * NULL. A second call returns GR_ERR_STATE. */
GR_API gr_status gr_init(int *argc, char ***argv);
/* Destroy what gr_init created; finalizes MPI only when gr_init initialised it. */
GR_API gr_status gr_finalize(void);
GR_API int gr_initialized(void);
/* The world communicator and the default pool (NULL before gr_init / after gr_finalize). */
GR_API gr_comm *gr_world(void);
GR_API gr_pool *gr_default_pool(void);
GR_API gr_status gr_rank_info(gr_rank_info_t *out);
/* sizeof(gr_rank_info_t) as this library was built: bindings that mirror the struct (python/)
 * compare it with their own before they let the library write into theirs. */
GR_API size_t gr_rank_info_sizeof(void);

/* A CUDA stream on the current device at this rank's priority (gpurun --priority, read from
 * GPURUN_PRIORITY at gr_init): high takes the device's greatest stream priority, low its least,
 * normal the default. Use it for the rank's collectives and kernels; destroy it with
 * gr_stream_destroy before gr_finalize. GR_ERR_UNSUPPORTED without CUDA in the build or without
 * a device, GR_ERR_STATE before gr_init. */
GR_API gr_status gr_stream_create(gr_stream *out);
GR_API gr_status gr_stream_destroy(gr_stream s);

#ifdef __cplusplus
}
#endif
#endif
