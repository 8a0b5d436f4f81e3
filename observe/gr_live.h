/* Internal: each rank's live state, published for gpurun-top and the supervisor's Prometheus
 * output (file format: base/gr_live_file.h). On when GPURUN_MONITOR_DIR is set (gpurun
 * --monitor sets it) unless GPURUN_LIVE=0; written every GPURUN_LIVE_INTERVAL seconds (default
 * 0.25) by a publisher thread, changed or not (the heartbeat). The state itself is the flight
 * recorder's (each communicator's latest call and its unfinished sends and receives), so a call
 * costs nothing more than its flight record. */
#ifndef GR_LIVE_H
#define GR_LIVE_H

#include "gr_live_file.h" /* GR_LIVE_CALL_*, GR_LIVE_STEP_* */

/* Once, from gr__observe_start (gr_observe.h) with the job id: decide on/off, make the job directory,
 * publish the first state, start the publisher thread, and at exit stop it and publish the last
 * state ("exited"). */
void gr__live_setup(const char *job);
/* A communicator creation (gr_comm_create, gr_comm_split) in progress on the calling thread,
 * published as a "creating" line (base/gr_live_file.h) from begin until end, so that gpurun-top
 * sees a rank that waits in one. call and step are static strings (GR_LIVE_CALL_*,
 * GR_LIVE_STEP_*); over is copied. Recorded whether or not the live state is on yet (it may come
 * on during the creation); a mutex per change, and creation is rare. At most
 * GR_LIVE_MAX_CREATING at a time (threads); more are not shown. step outside a creation is a
 * no-op, so that a backend may call it from any set-up. */
void gr__live_create_begin(const char *call, const char *step, const char *over, int rank,
                           int size);
void gr__live_create_step(const char *step);
void gr__live_create_end(void);
/* Stop publishing without a last state (the MPI layer's copy, when the program's libgpurun
 * starts its own: gr_mpitrace.h). */
void gr__live_stop(void);
/* The MPI layer's per-rank figures, written as the file's mpi_s, mpi_coll_s,
 * mpi_inside_since and mpi_waited lines (base/gr_live_file.h). fn is called by the publisher on every write, with
 * the live state's lock held: it must not call back into it. It returns 0 to write no lines. Set
 * it before gr__observe_start; NULL: none (a gpurun API program's file has none). */
#define GR_LIVE_MPI_PEERS 8 /* the most per-peer waits a live file carries */
typedef struct {
  double in_s;         /* seconds inside the MPI calls it records, all threads */
  double coll_s;       /* of them, inside blocking collectives */
  double inside_since; /* when the longest call a thread is inside now began (epoch s); 0: none */
  /* The seconds this rank was blocked on each peer's sends and receives since it started (a
   * blocking send or receive, or a wait's share for each peer whose request it completed), by
   * world rank, the largest first: written as the mpi_waited line, "mpi_waited R:S,R:S,..." (at
   * most GR_LIVE_MPI_PEERS items, none of them this rank; no line when nwaited is 0). A reader
   * that does not know the line ignores it (an unknown key). */
  int nwaited;
  struct {
    int rank;
    double s;
  } waited[GR_LIVE_MPI_PEERS];
} gr__live_mpi;
void gr__live_set_mpi(int (*fn)(gr__live_mpi *out));
/* Publish now regardless of the interval (state "running" or "exited"). 0 when written. */
int gr__live_publish(const char *state);

#endif
