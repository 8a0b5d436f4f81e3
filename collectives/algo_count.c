/* Per-process counts of the allreduce algorithms the MPI backend chose (gr_algo_count.h). */
#include "gr_algo_count.h"

#include <stdatomic.h>

static _Atomic uint64_t counts[GR__ALGO_COUNT];

void gr__algo_note(gr__algo a) {
  if ((unsigned)a < GR__ALGO_COUNT) atomic_fetch_add_explicit(&counts[a], 1, memory_order_relaxed);
}

uint64_t gr__algo_count(gr__algo a) {
  return (unsigned)a < GR__ALGO_COUNT ? atomic_load_explicit(&counts[a], memory_order_relaxed) : 0;
}

const char *gr__algo_name(gr__algo a) {
  static const char *const names[GR__ALGO_COUNT] = {"mpi", "rd",   "ring",      "rabenseifner",
                                                    "shm", "hier", "shm-window"};
  return (unsigned)a < GR__ALGO_COUNT ? names[a] : "?";
}
