/* Per-process counts of the allreduce algorithms the MPI backend chose (gr_algo_count.h). */
#include "gr_algo_count.h"

#include <stdatomic.h>

_Atomic uint64_t gr__algo_counts[GR__ALGO_COUNT];

uint64_t gr__algo_count(gr__algo a) {
  return (unsigned)a < GR__ALGO_COUNT
             ? atomic_load_explicit(&gr__algo_counts[a], memory_order_relaxed)
             : 0;
}

const struct gr__algo_names gr__algo_names = {
#define GR__ALGO_INIT(id, name) .id = name,
    GR__ALGO_LIST(GR__ALGO_INIT)
#undef GR__ALGO_INIT
};

const char *gr__algo_name(gr__algo a) {
  static const char *const names[GR__ALGO_COUNT] = {
#define GR__ALGO_ENTRY(id, name) [GR__ALGO_##id] = gr__algo_names.id,
      GR__ALGO_LIST(GR__ALGO_ENTRY)
#undef GR__ALGO_ENTRY
  };
  return (unsigned)a < GR__ALGO_COUNT ? names[a] : "?";
}
