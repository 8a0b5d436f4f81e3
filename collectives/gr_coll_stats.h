/* Internal: per-communicator counters the runtime writes at finalize (the monitor directory's
 * collective columns): calls, bytes and seconds per operation type. Bytes are what this rank
 * contributes (send side; the receive buffer for recv and broadcast non-roots). */
#ifndef GR_COLL_STATS_H
#define GR_COLL_STATS_H

#include <gpurun/status.h>
#include <stdint.h>

#define GR_COLL_STATS_NOPS 9 /* allreduce broadcast reduce allgather reduce_scatter alltoall send recv barrier */

typedef struct gr_comm gr_comm;

typedef struct {
  uint64_t calls[GR_COLL_STATS_NOPS];
  uint64_t bytes[GR_COLL_STATS_NOPS];
  /* wall time inside the call, waiting for peers included; a call of a group of n is charged
   * 1/n of its time, so a group adds up to at most the time spent in gr_group_end */
  double seconds[GR_COLL_STATS_NOPS];
  uint64_t timeouts, failures;
} gr_coll_stats;

/* The name of op index i ("allreduce", ...), NULL past the end. */
const char *gr__coll_stats_op_name(int i);
/* Copy the communicator's counters; GR_ERR_INVALID for a NULL or destroyed comm. */
gr_status gr__coll_stats_get(const gr_comm *c, gr_coll_stats *out);

#endif
