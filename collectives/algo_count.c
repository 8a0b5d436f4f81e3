/* Per-process counts of the allreduce algorithms the MPI backend chose (gr_algo_count.h). */
#include "gr_algo_count.h"

#include <stdatomic.h>

_Atomic uint64_t gr__algo_counts[GR__ALGO_COUNT];

uint64_t gr__algo_count(gr__algo a) {
  return (unsigned)a < GR__ALGO_COUNT
             ? atomic_load_explicit(&gr__algo_counts[a], memory_order_relaxed)
             : 0;
}

const char *gr__algo_name(gr__algo a) {
  static const char *const names[GR__ALGO_COUNT] = {
      "mpi", "rd", "ring", "rabenseifner", "shm", "hier", "shm-window", "hier-ml", "self"};
  return (unsigned)a < GR__ALGO_COUNT ? names[a] : "?";
}
