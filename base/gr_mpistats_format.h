/* Internal: the MPI layer's call statistics, one file per rank (mpitrace/stats.c writes it,
 * gpurun-report reads it; docs/formats.md, "MPI call statistics").
 *   <job>/mpistats.<world_rank>.json, written at MPI_Finalize (reason "finalize") or at exit
 *   (reason "exit": the program never finalized), replaced whole:
 * {"rank", "size", "node", "reason", "comms_dropped",
 *  "comms": [{"id", "name", "rank", "size", "calls", "mpi_s", "coll_s",
 *             "first", "durs": [seconds inside blocking collective first, first + 1, ...],
 *             "waited_on": [seconds blocked on peer 0, 1, ... of the communicator]}]}
 * calls: recorded calls on the communicator; mpi_s: seconds inside them; coll_s: inside its
 * blocking collectives. durs: the last GR_MPISTATS_RING blocking collectives by their number
 * (cseq, the same on every member), null for a number that was not a blocking collective. The
 * rank that arrives last in a collective spends the least time inside it, and the others wait for
 * it: per number, max(durs) - durs[r] is how long after the first rank r arrived, which needs no
 * clock common to the nodes. waited_on: the time this rank spent blocked in sends and receives
 * (and the waits that completed them) with each peer, split evenly when a wait completed several:
 * summed over the members it says for whom the others waited, which names a rank slowed between
 * collectives in a code that exchanges point to point (a halo exchange). */
#ifndef GR_MPISTATS_FORMAT_H
#define GR_MPISTATS_FORMAT_H

#define GR_MPISTATS_PREFIX "mpistats."
#define GR_MPISTATS_SUFFIX ".json"
#define GR_MPISTATS_RING 1024
/* communicators a file holds at most: the world and those with the most time in blocking
 * collectives; comms_dropped counts the others */
#define GR_MPISTATS_KEEP 16
/* the world communicator's id; the others are "<parent>.<n>:<lowest world rank>" */
#define GR_MPISTATS_WORLD_ID "w"

#define GR_MS_RANK "rank"
#define GR_MS_SIZE "size"
#define GR_MS_NODE "node"
#define GR_MS_REASON "reason"
#define GR_MS_COMMS "comms"
#define GR_MS_DROPPED "comms_dropped"
#define GR_MS_ID "id"
#define GR_MS_NAME "name"
#define GR_MS_CALLS "calls"
#define GR_MS_MPI_S "mpi_s"
#define GR_MS_COLL_S "coll_s"
#define GR_MS_FIRST "first"
#define GR_MS_DURS "durs"
#define GR_MS_WAITED_ON "waited_on"
#define GR_MPISTATS_MAX_PEERS 4096

#endif
