/* Internal: a timeout for programs that have none (watchdog.c), shared by the loaded libraries
 * that record a program's calls: the MPI layer (mpitrace/) and the NCCL profiler plugin
 * (ncclprof/). Each says what "inside a call" means for it; the mark, the answers
 * (docs/formats.md, "The timeout's mark and answers"), the flight dumps and the verdict are one.
 * Compiled into those libraries only: libgpurun's calls keep their own timeout. */
#ifndef GR_WATCHDOG_H
#define GR_WATCHDOG_H

#include <stdint.h>

#define GR__HANG_EXIT 125 /* the status GPURUN_ON_HANG=abort ends the job with */

/* A call this process is inside. */
typedef struct {
  const char *op; /* static name (gr_op_names.h) */
  uint64_t seq;
  double since; /* gr__wall_now() at its start */
  char comm_id[32], comm_name[32];
} gr__inside;

typedef struct {
  /* the calls, in sentences: "MPI", "NCCL" ("outside MPI", "inside NCCL") */
  const char *calls;
  /* The call this process has been inside longest: 1 and *out, 0 when none. Called from the
   * watchdog's thread. */
  int (*longest)(gr__inside *out);
  /* GPURUN_ON_HANG=abort: ends the job with status code (does not return). */
  void (*end_job)(int code);
} gr__watchdog_ops;

/* With GPURUN_TIMEOUT set, starts a thread (every signal blocked) that notices a call inside
 * for longer, dumps the flight recorders of every rank that shares the job directory, names the
 * missing ranks in one line and, with GPURUN_ON_HANG=abort, calls ops->end_job(GR__HANG_EXIT).
 * ops must stay valid until gr__watchdog_stop. Nothing without GPURUN_TIMEOUT; a thread that
 * cannot start is said at warning level. One watchdog per library: a second start is ignored. */
void gr__watchdog_start(const char *job, int rank, int size, const gr__watchdog_ops *ops);
void gr__watchdog_stop(void);

#endif
