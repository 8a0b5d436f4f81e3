/* NCCL TEST DOUBLE (test-only, never installed): the NCCL declarations collectives/backend_nccl.c
 * uses, with NCCL's names and values, implemented in nccl_double.c over MPI and host memory.
 * Functions are renamed to grdbl_* so the real libnccl can sit in the same executable.
 * It proves our glue (bootstrap, grouping, non-blocking init, error mapping, timeout/abort,
 * staging), not NCCL. */
#ifndef GRDBL_NCCL_H
#define GRDBL_NCCL_H

#include <limits.h>
#include <stddef.h>

#include "cuda_runtime_api.h"

#define NCCL_MAJOR 2
#define NCCL_MINOR 28
#define NCCL_PATCH 0
#define NCCL_VERSION(X, Y, Z) ((X)*10000 + (Y)*100 + (Z))
#define NCCL_UNIQUE_ID_BYTES 128
#define NCCL_SPLIT_NOCOLOR -1
#define NCCL_CONFIG_UNDEF_INT INT_MIN

typedef struct grdbl_comm *ncclComm_t;
typedef struct grdbl_reg *ncclWindow_t;
#define NCCL_WIN_DEFAULT 0x00
#define NCCL_WIN_COLL_SYMMETRIC 0x01
#define NCCL_WIN_REQUIRED_ALIGNMENT 4096
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;
typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclNumResults = 8
} ncclResult_t;
typedef enum { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3, ncclAvg = 4 } ncclRedOp_t;
typedef enum {
  ncclInt8 = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclFloat32 = 7,
  ncclFloat64 = 8,
  ncclBfloat16 = 9
} ncclDataType_t;
typedef struct {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
} ncclConfig_t;
#define NCCL_CONFIG_INITIALIZER                                                                    \
  {                                                                                                \
    sizeof(ncclConfig_t), 0xcafebeef, NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH),            \
        NCCL_CONFIG_UNDEF_INT                                                                      \
  }

#define ncclGetVersion grdbl_ncclGetVersion
#define ncclGetUniqueId grdbl_ncclGetUniqueId
#define ncclCommInitRankConfig grdbl_ncclCommInitRankConfig
#define ncclCommSplit grdbl_ncclCommSplit
#define ncclCommFinalize grdbl_ncclCommFinalize
#define ncclCommDestroy grdbl_ncclCommDestroy
#define ncclCommAbort grdbl_ncclCommAbort
#define ncclCommGetAsyncError grdbl_ncclCommGetAsyncError
#define ncclGetErrorString grdbl_ncclGetErrorString
#define ncclGetLastError grdbl_ncclGetLastError
#define ncclAllReduce grdbl_ncclAllReduce
#define ncclBroadcast grdbl_ncclBroadcast
#define ncclReduce grdbl_ncclReduce
#define ncclAllGather grdbl_ncclAllGather
#define ncclReduceScatter grdbl_ncclReduceScatter
#define ncclSend grdbl_ncclSend
#define ncclRecv grdbl_ncclRecv
#define ncclGroupStart grdbl_ncclGroupStart
#define ncclGroupEnd grdbl_ncclGroupEnd
#define ncclMemAlloc grdbl_ncclMemAlloc
#define ncclMemFree grdbl_ncclMemFree
#define ncclCommRegister grdbl_ncclCommRegister
#define ncclCommDeregister grdbl_ncclCommDeregister
#define ncclCommWindowRegister grdbl_ncclCommWindowRegister
#define ncclCommWindowDeregister grdbl_ncclCommWindowDeregister

ncclResult_t ncclGetVersion(int *v);
ncclResult_t ncclGetUniqueId(ncclUniqueId *id);
ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t *cfg);
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                           ncclConfig_t *cfg);
ncclResult_t ncclCommFinalize(ncclComm_t comm);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *async);
const char *ncclGetErrorString(ncclResult_t r);
const char *ncclGetLastError(ncclComm_t comm);
ncclResult_t ncclAllReduce(const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t st);
ncclResult_t ncclBroadcast(const void *s, void *r, size_t n, ncclDataType_t t, int root,
                           ncclComm_t comm, cudaStream_t st);
ncclResult_t ncclReduce(const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op,
                        int root, ncclComm_t comm, cudaStream_t st);
ncclResult_t ncclAllGather(const void *s, void *r, size_t n, ncclDataType_t t, ncclComm_t comm,
                           cudaStream_t st);
ncclResult_t ncclReduceScatter(const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op,
                               ncclComm_t comm, cudaStream_t st);
ncclResult_t ncclSend(const void *s, size_t n, ncclDataType_t t, int peer, ncclComm_t comm,
                      cudaStream_t st);
ncclResult_t ncclRecv(void *r, size_t n, ncclDataType_t t, int peer, ncclComm_t comm,
                      cudaStream_t st);
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);

ncclResult_t ncclMemAlloc(void **ptr, size_t size);
ncclResult_t ncclMemFree(void *ptr);
ncclResult_t ncclCommRegister(const ncclComm_t comm, void *buff, size_t size, void **handle);
ncclResult_t ncclCommDeregister(const ncclComm_t comm, void *handle);
ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win,
                                    int winFlags);
ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);

/* Test hooks (not NCCL): make the next ncclCommInitRankConfig fail on this rank. */
void grdbl_fail_next_init(ncclResult_t r);
/* ... the next ncclMemAlloc, or the next ncclCommWindowRegister (after its agreement, so that the
 * others' succeed), fail on this rank. */
void grdbl_fail_next_mem_alloc(ncclResult_t r);
void grdbl_fail_next_window(ncclResult_t r);
/* The version ncclGetVersion reports on this rank (0: the headers'). */
void grdbl_set_version(int v);
/* What this process holds: device allocations (cudaMalloc and ncclMemAlloc), of them
 * ncclMemAlloc's, buffers registered (ncclCommRegister) and windows, on any communicator; and
 * the registrations and windows that ncclCommDestroy found still there and dropped. */
typedef struct {
  int device_allocs, nccl_allocs, registrations, windows, left_at_destroy;
} grdbl_mem_counts;
grdbl_mem_counts grdbl_mem_census(void);

#endif
