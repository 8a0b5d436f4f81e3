/* Internal: the runtime's per-rank counters (keys: gr_counters_format.h, docs/formats.md), written
 * at gr_finalize beside the monitor CSV as
 *   <GPURUN_MONITOR_DIR>/<job>/<node>.<local_rank>.counters.json
 * and read by gpurun-report:
 *   {"rank", "size", "local_rank", "node", "job", "wall_s", "receipt",
 *    "priority": "low"|"normal"|"high",   (gpurun --priority; left out when unknown)
 *    "collectives": {"<op>": {"calls", "bytes", "time_s"}, ...},   (world communicator; time_s is
 *                    wall time inside the call, waiting for peers included)
 *    "coll_timeouts", "coll_failures",
 *    "pool": {"threads", "spawned", "run", "steals", "sleeps", "idle_s"}}   (default pool) */
#ifndef GR_COUNTERS_H
#define GR_COUNTERS_H

#include <gpurun/runtime.h>
#include <stdio.h>

#include "gr_coll_stats.h"
#include "gr_counters_format.h"
#include "gr_pool.h"

/* Writes the JSON document; priority, coll and pool may be NULL (left out). */
void gr__counters_json(FILE *f, const gr_rank_info_t *info, const char *job, const char *priority,
                       double wall_s, const gr_coll_stats *coll, const gr__pool_stats *pool,
                       int pool_threads);
/* Writes it to <dir>/<job>/<node>.<local_rank>.counters.json through gr_safefile.h (private job
 * directory, temporary file and rename: a reader never sees half a file, no symlink is followed).
 * A failure records gr_safefile.h's sentence (gr_last_error()). */
gr_status gr__counters_write(const char *dir, const gr_rank_info_t *info, const char *job,
                             const char *priority, double wall_s, const gr_coll_stats *coll,
                             const gr__pool_stats *pool, int pool_threads);

#endif
