/* Internal: which allreduce algorithm ran, counted per process (tests and measurements ask it;
 * nothing in the library reads it). The MPI backend notes each allreduce it starts, under the
 * algorithm its row names (gr__path.algo); the counts only grow. Relaxed atomics: a count read
 * while calls run on other threads may lag by the calls in flight. */
#ifndef GR_ALGO_COUNT_H
#define GR_ALGO_COUNT_H

#include <stdatomic.h>
#include <stdint.h>

/* The algorithms, one line each: the enum's name (GR__ALGO_<id>) and the name gr__algo_name gives,
 * which is the name of the row that runs it (gr__path.name, path.c; test_path_table checks it).
 * The enum and the names are both made from this list, so neither can lack the other. */
#define GR__ALGO_LIST(X)                                                                           \
  X(MPI_LIB, "mpi")               /* MPI's own MPI_Allreduce / MPI_Iallreduce */                   \
  X(RD, "rd")                     /* gpurun's recursive doubling (<= 32 KiB, with a timeout) */    \
  X(RING, "ring")                 /* gpurun's pipelined ring (above 32 KiB) */                     \
  X(RABENSEIFNER, "rabenseifner") /* gpurun's Rabenseifner (above 32 KiB, 4, 8, ... ranks) */      \
  X(SHM, "shm")                   /* the node-local shared-memory path (gr_shm.h) */               \
  X(HIER, "hier")                 /* across nodes (hier.c); its steps counted as well */           \
  X(SHM_WINDOW, "shm-window")     /* the shm path on buffers in gr_mem_alloc memory */             \
  X(HIER_ML, "hier-ml")           /* multi-leader (mpi_path_hier_ml.c); its steps as well */       \
  X(SELF, "self")                 /* a communicator of one rank: a copy (mpi_path_self.c) */       \
  X(PAIR, "pair")                 /* two ranks, tiny: one exchange (mpi_allreduce_pair.c) */

typedef enum {
#define GR__ALGO_ENUM(id, name) GR__ALGO_##id,
  GR__ALGO_LIST(GR__ALGO_ENUM)
#undef GR__ALGO_ENUM
      GR__ALGO_COUNT
} gr__algo;

/* The names as one object, a member per algorithm (gr__algo_names.RD is "rd"): a row's name is
 * an address constant taken from it (GR__ALGO_NAME), so a row cannot name an algorithm the list
 * lacks, nor spell it otherwise (test_path_table checks that its .algo is the same id). */
struct gr__algo_names {
#define GR__ALGO_FIELD(id, name) char id[sizeof name];
  GR__ALGO_LIST(GR__ALGO_FIELD)
#undef GR__ALGO_FIELD
};
extern const struct gr__algo_names gr__algo_names;
/* In a row's initializer (gr__path): .name = GR__ALGO_NAME(RD), .algo = GR__ALGO_RD. */
#define GR__ALGO_NAME(id) (gr__algo_names.id)

/* Inline: the MPI backend notes every allreduce it starts. */
extern _Atomic uint64_t gr__algo_counts[GR__ALGO_COUNT];
static inline void gr__algo_note(gr__algo a) {
  if ((unsigned)a < GR__ALGO_COUNT)
    atomic_fetch_add_explicit(&gr__algo_counts[a], 1, memory_order_relaxed);
}
/* Allreduces this process started with algorithm a (0 for a value out of range). */
uint64_t gr__algo_count(gr__algo a);
/* The algorithm's name from GR__ALGO_LIST ("mpi", "rd", ...); "?" out of range. */
const char *gr__algo_name(gr__algo a);

#endif
