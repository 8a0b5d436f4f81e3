/* Internal: which allreduce algorithm ran, counted per process (tests and measurements ask it;
 * nothing in the library reads it). The MPI backend notes each allreduce it starts, under the
 * algorithm it chose; the counts only grow. Relaxed atomics: a count read while calls run on
 * other threads may lag by the calls in flight. */
#ifndef GR_ALGO_COUNT_H
#define GR_ALGO_COUNT_H

#include <stdatomic.h>
#include <stdint.h>

typedef enum {
  GR__ALGO_MPI_LIB,      /* MPI's own MPI_Allreduce / MPI_Iallreduce */
  GR__ALGO_RD,           /* gpurun's recursive doubling (<= 32 KiB, with a timeout) */
  GR__ALGO_RING,         /* gpurun's pipelined ring (above 32 KiB, not a power of two >= 4) */
  GR__ALGO_RABENSEIFNER, /* gpurun's Rabenseifner (above 32 KiB, 4, 8, ... ranks) */
  GR__ALGO_SHM,          /* the node-local shared-memory path (shm_coll.c) */
  GR__ALGO_HIER,         /* the hierarchical path across nodes (hier.c); its leaders' step is
                          * counted as well, under the algorithm the leaders' communicator ran */
  GR__ALGO_SHM_WINDOW, /* the shared-memory path on this rank's buffers in gr_mem_alloc memory (the first round
                          * decides whether the call runs direct: every rank's are) */
  GR__ALGO_HIER_ML, /* the multi-leader hierarchical allreduce (mpi_path_hier_ml.c); its
                        * steps are counted as well, under the algorithms their communicators ran */
  GR__ALGO_SELF,    /* a communicator of one rank: a copy (mpi_path_self.c) */
  GR__ALGO_COUNT
} gr__algo;

/* Inline: the MPI backend notes every allreduce it starts. */
extern _Atomic uint64_t gr__algo_counts[GR__ALGO_COUNT];
static inline void gr__algo_note(gr__algo a) {
  if ((unsigned)a < GR__ALGO_COUNT)
    atomic_fetch_add_explicit(&gr__algo_counts[a], 1, memory_order_relaxed);
}
/* Allreduces this process started with algorithm a (0 for a value out of range). */
uint64_t gr__algo_count(gr__algo a);
/* "mpi", "rd", "ring", "rabenseifner", "shm", "hier", "shm-window", "hier-ml", "self"; "?" out of
 * range. */
const char *gr__algo_name(gr__algo a);

#endif
