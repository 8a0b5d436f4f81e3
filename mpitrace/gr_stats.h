/* Internal: the MPI layer's call statistics (stats.c; file: base/gr_mpistats_format.h): per
 * communicator the time inside its calls and, by collective number, the time inside each of its
 * last GR_MPISTATS_RING blocking collectives, from which gpurun-report names the ranks that
 * arrive last. Written once, at MPI_Finalize or at exit. */
#ifndef GR_STATS_H
#define GR_STATS_H

#include "gr_flight.h"
#include "gr_mpistats_format.h"

#include <stdint.h>

typedef struct {
  uint64_t calls;
  double mpi_s, coll_s;
  uint64_t last;               /* the highest collective number stored in dur (0: none) */
  float dur[GR_MPISTATS_RING]; /* by number % ring; < 0: not a blocking collective */
  int npeers;                  /* the communicator's size, at most GR_MPISTATS_MAX_PEERS */
  double *waited_on;           /* seconds blocked on each peer's sends and receives */
} gr__stats_comm;

/* Zero it for a communicator of size ranks (the per-peer waits allocated; none when out of
 * memory). */
void gr__stats_comm_reset(gr__stats_comm *s, int size);
/* One finished call of the given kind and number (gr__mt_rec's seq), inside for secs. Called by
 * the communicator's user (one thread at a time per communicator, as MPI's collectives). */
void gr__stats_call(gr__stats_comm *s, int kind, uint64_t seq, double secs);
/* secs blocked waiting on peer (a rank of the communicator): a send or receive, or a share of a
 * wait on its requests. */
void gr__stats_waited(gr__stats_comm *s, int peer, double secs);
/* Keep a copy under the communicator's identity (f) for the file: a freed communicator's, and
 * every live one's at the end. */
void gr__stats_comm_keep(const gr__stats_comm *s, const gr__flight *f);
/* The job directory, this rank and the world's size; arms the write at exit. */
void gr__stats_start(const char *job, int rank, int size);
/* Write <job>/mpistats.<rank>.json once (later calls do nothing); cancel: never write it. */
void gr__stats_write(const char *reason);
void gr__stats_cancel(void);

#endif
