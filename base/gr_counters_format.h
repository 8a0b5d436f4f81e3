/* Contract: the runtime's counters file, one per rank,
 *   <GPURUN_MONITOR_DIR>/<job>/<node>.<local_rank>.counters.json
 * written at gr_finalize (runtime/counters.c) and read by gpurun-report (tools/report/job_load.c).
 * Both include this header; docs/formats.md, "Counters", describes each key. Version 1 (not
 * written into the file): one JSON object; a reader ignores keys it does not know and treats every
 * key as optional, so a writer may add keys without a new version; renaming or removing one, or
 * changing a value's meaning, is a new version. Base layer: no MPI, no CUDA. */
#ifndef GR_COUNTERS_FORMAT_H
#define GR_COUNTERS_FORMAT_H

#define GR_COUNTERS_VERSION 1
#define GR_COUNTERS_SUFFIX ".counters.json" /* after "<node>.<local_rank>" */

/* top level */
#define GR_CTR_RANK "rank"
#define GR_CTR_SIZE "size"
#define GR_CTR_LOCAL_RANK "local_rank"
#define GR_CTR_NODE "node"
#define GR_CTR_JOB "job"
#define GR_CTR_WALL_S "wall_s"
#define GR_CTR_RECEIPT "receipt"   /* null unchecked, "" as planned, else what differed */
#define GR_CTR_PRIORITY "priority" /* "low" | "normal" | "high"; absent when unknown */
#define GR_CTR_COLLECTIVES "collectives"
#define GR_CTR_COLL_TIMEOUTS "coll_timeouts"
#define GR_CTR_COLL_FAILURES "coll_failures"
#define GR_CTR_POOL "pool"
/* "collectives": {"<op>": {...}} per operation (allreduce, broadcast, ...) */
#define GR_CTR_OP_CALLS "calls"
#define GR_CTR_OP_BYTES "bytes"
#define GR_CTR_OP_TIME_S "time_s"
#define GR_CTR_OP_WAIT_S                                                                           \
  "wait_s" /* read when present (time_s otherwise); version 1 never writes it */
/* "pool": {...} */
#define GR_CTR_POOL_THREADS "threads"
#define GR_CTR_POOL_SPAWNED "spawned"
#define GR_CTR_POOL_RUN "run"
#define GR_CTR_POOL_STEALS "steals"
#define GR_CTR_POOL_SLEEPS "sleeps"
#define GR_CTR_POOL_IDLE_S "idle_s"

#endif
