/* gpurun status codes and error reporting: every public call returns a gr_status (GR_OK is 0)
 * and on failure records a sentence for gr_last_error(). See gr_status(3). This header needs no
 * MPI, CUDA or hwloc headers. */
#ifndef GPURUN_STATUS_H
#define GPURUN_STATUS_H

#include <gpurun/export.h>

#ifdef __cplusplus
extern "C" {
#endif

/* X(name, value, description). Values are stable: new codes are only appended. See
 * GR_STATUS_MAP(3). */
#define GR_STATUS_MAP(X)                                                                           \
  X(GR_OK, 0, "success")                                                                           \
  X(GR_ERR_INVALID, 1, "invalid argument")                                                         \
  X(GR_ERR_NOMEM, 2, "out of memory")                                                              \
  X(GR_ERR_SYSTEM, 3, "operating-system call failed")                                              \
  X(GR_ERR_MPI, 4, "MPI call failed")                                                              \
  X(GR_ERR_CUDA, 5, "CUDA runtime call failed")                                                    \
  X(GR_ERR_NCCL, 6, "NCCL call failed")                                                            \
  X(GR_ERR_TIMEOUT, 7, "operation timed out")                                                      \
  X(GR_ERR_ABORTED, 8, "communicator was aborted")                                                 \
  X(GR_ERR_MISMATCH, 9, "ranks called mismatched collectives")                                     \
  X(GR_ERR_STATE, 10, "call not valid in the current state")                                       \
  X(GR_ERR_UNSUPPORTED, 11, "not supported by this build or backend")                              \
  X(GR_ERR_TOPOLOGY, 12, "node topology could not be read")                                        \
  X(GR_ERR_NOT_FOUND, 13, "not found")                                                             \
  X(GR_ERR_INTERNAL, 14, "internal error")

typedef enum {
#define GR_STATUS_ENUM_(name, value, text) name = value,
  GR_STATUS_MAP(GR_STATUS_ENUM_)
#undef GR_STATUS_ENUM_
      GR_STATUS_COUNT_
} gr_status;

/* A short static description of the code ("invalid argument"). See gr_strerror(3). */
GR_API const char *gr_strerror(gr_status st);

/* The code's name ("GR_ERR_INVALID"). See gr_status_name(3). */
GR_API const char *gr_status_name(gr_status st);

/* The sentence the last failing gpurun call on this thread recorded; "" when none. See
 * gr_last_error(3). */
GR_API const char *gr_last_error(void);

/* Forget this thread's last error. See gr_clear_error(3). */
GR_API void gr_clear_error(void);

#ifdef __cplusplus
}
#endif
#endif
