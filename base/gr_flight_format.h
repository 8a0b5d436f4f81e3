/* Contract: the collectives' flight-recorder dump, one per rank,
 *   <GPURUN_MONITOR_DIR>/<job>/flight.<world_rank>.json
 * written by observe/flight.c and read by gpurun-report (tools/report/waitfor.c, the
 * wait-for chains). Both include this header; docs/formats.md, "Flight recorder", describes each
 * key. Version 1 (not written into the file): a reader ignores keys it does not know; renaming or
 * removing a key, a state or a reason is a new version. "name" and "tag" came later: a reader
 * takes the id as the name where "name" is absent. Base layer: no MPI, no CUDA. */
#ifndef GR_FLIGHT_FORMAT_H
#define GR_FLIGHT_FORMAT_H

#define GR_FLIGHT_VERSION 1
#define GR_FLIGHT_PREFIX "flight." /* then the world rank */
#define GR_FLIGHT_SUFFIX ".json"

/* top level */
#define GR_FL_RANK "rank"
#define GR_FL_SIZE "size"
#define GR_FL_NODE "node"
#define GR_FL_REASON "reason" /* GR_FL_REASON_* */
#define GR_FL_COMMS "comms"
/* each of "comms" */
#define GR_FL_COMM_ID "id"     /* job-unique, agreed at creation: "L.N" (see collectives/coll.c) */
#define GR_FL_COMM_NAME "name" /* human: GR_FL_WORLD, "split-N:C", "comm"; absent before: = id */
#define GR_FL_WORLD "world"    /* the name of a communicator over MPI_COMM_WORLD */
#define GR_FL_COMM_RANK "rank"
#define GR_FL_COMM_SIZE "size"
#define GR_FL_COMM_BACKEND "backend"
#define GR_FL_COMM_CALLS "calls"
/* each of "calls" */
#define GR_FL_SEQ "seq"
#define GR_FL_OP "op" /* allreduce, ..., "send", "recv" */
#define GR_FL_COUNT "count"
#define GR_FL_DTYPE "dtype"
#define GR_FL_ROOT "root"
#define GR_FL_PEER "peer"
#define GR_FL_TAG "tag" /* send/recv only: the MPI tag */
#define GR_FL_START "start"
#define GR_FL_END "end"   /* null while unfinished */
#define GR_FL_CSEQ "cseq" /* null for send/recv */
#define GR_FL_STATE "state"
/* values of "reason" */
#define GR_FL_REASON_TIMEOUT "timeout"
#define GR_FL_REASON_SIGNAL "signal"
#define GR_FL_REASON_EXIT "exit"
#define GR_FL_REASON_HANG "hang" /* another rank of the job timed out (the MPI layer's watchdog) */
/* values of "state" */
#define GR_FL_STATE_RUNNING "running"
#define GR_FL_STATE_DONE "done"
#define GR_FL_STATE_FAILED "failed"
#define GR_FL_STATE_TIMEOUT "timeout"
/* values of "op" that are point to point */
#define GR_FL_OP_SEND "send"
#define GR_FL_OP_RECV "recv"

#endif
