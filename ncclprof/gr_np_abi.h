/* Internal: NCCL's profiler plugin interface, versions 5 and 4, as NCCL 2.28 defines it. NCCL
 * installs no header for it: a plugin carries its own copy of the definitions (NCCL's
 * ext-profiler/README.md, "Headers management"). Copied, with these names, from NCCL v2.28.9-1
 * (github.com/NVIDIA/nccl, BSD-3-Clause): src/include/plugin/nccl_profiler.h (event types and
 * states), src/include/plugin/profiler/profiler_v5.h and profiler_v4.h (descriptors, state
 * arguments, the function tables), ext-profiler/example/nccl/common.h (the logger). Only the
 * layout matters: NCCL reads the table the plugin exports under the name ncclProfiler_v5 (tried
 * first) or ncclProfiler_v4 (src/plugin/profiler.cc, ncclProfilerPluginLoad) and calls through it.
 * The NCCL test double (tests/mpi/collectives/nccl_double/) includes this file too, so that it
 * calls the plugin through the same definitions. */
#ifndef GR_NP_ABI_H
#define GR_NP_ABI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* ncclResult_t's values the interface uses (0: success); a plain int here, so that this file does
 * not need nccl.h (the double has its own). */
typedef int gr_np_result;

typedef void (*gr_np_logger)(int level, unsigned long flags, const char *file, int line,
                             const char *fmt, ...);

/* event types (nccl_profiler.h): the activation mask is an OR of these */
enum {
  gr_npGroup = 1 << 0,        /* ncclProfileGroup: one kernel plan (legacy v4 group) */
  gr_npColl = 1 << 1,         /* ncclProfileColl: a collective task of a plan */
  gr_npP2p = 1 << 2,          /* ncclProfileP2p: a send or receive task of a plan */
  gr_npProxyOp = 1 << 3,      /* ncclProfileProxyOp */
  gr_npProxyStep = 1 << 4,    /* ncclProfileProxyStep */
  gr_npProxyCtrl = 1 << 5,    /* ncclProfileProxyCtrl */
  gr_npKernelCh = 1 << 6,     /* ncclProfileKernelCh: the kernel's work on one channel */
  gr_npNetPlugin = 1 << 7,    /* ncclProfileNetPlugin */
  gr_npGroupApi = 1 << 8,     /* ncclProfileGroupApi (v5) */
  gr_npCollApi = 1 << 9,      /* ncclProfileCollApi (v5) */
  gr_npP2pApi = 1 << 10,      /* ncclProfileP2pApi (v5) */
  gr_npKernelLaunch = 1 << 11 /* ncclProfileKernelLaunch (v5) */
};

/* event states (ncclProfilerEventState_t): the one this plugin and the double use */
enum { gr_npKernelChStop = 22 /* ncclProfilerKernelChStop */ };

/* ncclProfilerEventDescr_v5_t */
typedef struct {
  uint64_t type;
  void *parentObj;
  int rank;
  union {
    struct {
      bool graphCaptured;
      int groupDepth;
    } groupApi;
    struct {
      const char *func;
      size_t count;
      const char *datatype;
      int root;
      void *stream;
      bool graphCaptured;
    } collApi;
    struct {
      const char *func;
      size_t count;
      const char *datatype;
      void *stream;
      bool graphCaptured;
    } p2pApi;
    struct {
      void *stream;
    } kernelLaunch;
    struct {
      uint64_t seqNumber;
      const char *func;
      void const *sendBuff;
      void *recvBuff;
      size_t count;
      int root;
      const char *datatype;
      uint8_t nChannels;
      uint8_t nWarps;
      const char *algo;
      const char *proto;
      void *parentGroup;
    } coll;
    struct {
      const char *func;
      void *buff;
      const char *datatype;
      size_t count;
      int peer;
      uint8_t nChannels;
      void *parentGroup;
    } p2p;
    struct {
      pid_t pid;
      uint8_t channelId;
      int peer;
      int nSteps;
      int chunkSize;
      int isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
    struct {
      uint8_t channelId;
      uint64_t pTimer;
    } kernelCh;
    struct {
      int64_t id;
      void *data;
    } netPlugin;
  };
} gr_np_descr_v5;

/* ncclProfilerEventDescr_v4_t: a one-byte type, no API events; parentObj of a task is its group */
typedef struct {
  uint8_t type;
  void *parentObj;
  int rank;
  union {
    struct {
      uint64_t seqNumber;
      const char *func;
      void const *sendBuff;
      void *recvBuff;
      size_t count;
      int root;
      const char *datatype;
      uint8_t nChannels;
      uint8_t nWarps;
      const char *algo;
      const char *proto;
    } coll;
    struct {
      const char *func;
      void *buff;
      const char *datatype;
      size_t count;
      int peer;
      uint8_t nChannels;
    } p2p;
    struct {
      pid_t pid;
      uint8_t channelId;
      int peer;
      int nSteps;
      int chunkSize;
      int isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
    struct {
      uint8_t channelId;
      uint64_t pTimer;
    } kernelCh;
    struct {
      int64_t id;
      void *data;
    } netPlugin;
  };
} gr_np_descr_v4;

/* ncclProfilerEventStateArgs_v5_t and _v4_t (the same union) */
typedef union {
  struct {
    size_t transSize;
  } proxyStep;
  struct {
    int appendedProxyOps;
  } proxyCtrl;
  struct {
    void *data;
  } netPlugin;
  struct {
    uint64_t pTimer;
  } kernelCh;
} gr_np_state_args;

/* ncclProfiler_v5_t */
typedef struct {
  const char *name;
  gr_np_result (*init)(void **context, uint64_t commId, int *eActivationMask, const char *commName,
                       int nNodes, int nranks, int rank, gr_np_logger logfn);
  gr_np_result (*startEvent)(void *context, void **eHandle, gr_np_descr_v5 *eDescr);
  gr_np_result (*stopEvent)(void *eHandle);
  gr_np_result (*recordEventState)(void *eHandle, int eState, gr_np_state_args *eStateArgs);
  gr_np_result (*finalize)(void *context);
} gr_np_profiler_v5;

/* ncclProfiler_v4_t: init's arguments in another order */
typedef struct {
  const char *name;
  gr_np_result (*init)(void **context, int *eActivationMask, const char *commName,
                       uint64_t commHash, int nNodes, int nranks, int rank, gr_np_logger logfn);
  gr_np_result (*startEvent)(void *context, void **eHandle, gr_np_descr_v4 *eDescr);
  gr_np_result (*stopEvent)(void *eHandle);
  gr_np_result (*recordEventState)(void *eHandle, int eState, gr_np_state_args *eStateArgs);
  gr_np_result (*finalize)(void *context);
} gr_np_profiler_v4;

#endif
