/* The shared-memory path's policy: which calls it takes, which it only gates, and which algorithm
 * serves a call it takes (gr_shm.h). Every size that decides it is in the tables below; the
 * decisions depend on nothing but the call's kind and size and what every rank agreed at creation
 * (single copy on, the crossovers, the two-rank limit: shm_choice.c), so every rank that agrees on
 * a call decides the same. */
#include "shm_int.h"

#include "gr_dtype.h"
#include "gr_param.h"

#include <stdint.h>

/* The sizes that choose an algorithm (bytes per rank, except where said). */
static const struct {
  /* A small allreduce goes in one round through whole copies: P reads of n bytes each beat two
   * synchronisations while n is small. Reduce runs here up to it (the small mode: only the root
   * reduces); larger ones run in MPI after an agreement round. */
  size_t small_max;
  /* Two ranks: up to a whole slot. Each rank reads one peer's n bytes (what the sliced modes move
   * too) and reduces all n itself (twice the sliced mode's arithmetic), with one synchronisation
   * instead of three and no syscall, which wins up to a slot (bench/README.md, "node-local shared
   * memory"). Beyond, the single-copy pipeline moves less through memory and is kept. What Open
   * MPI's recursive doubling does for two ranks, through the segment instead of point to point.
   * The default; under GPURUN_SHM_PRIVATE=auto the allreduce's limit is measured at creation
   * (shm_choice.c: on a machine whose single copy is fast, it wins from 32 KiB). Reduce keeps
   * it. */
  size_t pair_small_max;
  /* Alltoall runs here up to this many bytes per rank (all its blocks), where the slot beats MPI;
   * beyond, Open MPI's single copy (CMA) point to point beats the two copies through the slot
   * (bench/README.md, "node-local shared memory"). */
  size_t alltoall_small_max;
  /* Single copy (CMA): from this many bytes per rank on, a rank that may read its peers' memory
   * (process_vm_readv: same user, no ptrace restriction) takes the peers' data straight out of
   * their own buffers instead of through the segment: one copy instead of two, which is what the
   * memory bandwidth of a large call is spent on. Below, the syscall costs more than the copy
   * saves. */
  size_t single_min;
  /* Windows: a call reaches its peers' buffers directly from this many bytes per rank on (below,
   * one round through the slots, with one synchronisation instead of two, costs less). */
  size_t window_min;
} lim = {
    .small_max = 8192,
    .pair_small_max = GR__SHM_SLOT,
    .alltoall_small_max = 4096,
    .single_min = 16384,
    .window_min = 4096,
};

/* ... and single copy up to a crossover per kind (bytes per rank: an allreduce's or a broadcast's
 * count, a reduce-scatter's or an allgather's block): from it on, copy in, reduce, copy out
 * through the segment's slots. The crossovers are the communicator's (gr__shm_set_private:
 * measured on the node at creation and agreed, shm_choice.c, or forced by GPURUN_SHM_PRIVATE), so
 * the same on every rank. Until then, and for what a measurement does not reach, these, one
 * machine's crossovers (bench/README.md): at two ranks and at more, of an allreduce's count or of
 * a reduce-scatter's whole input (whole: divided among the blocks). Indexed by
 * gr__shm_private_kind. */
static const struct {
  size_t pair, more;
  int whole;
} cross_default[GR__SHM_PRIVATE_KINDS] = {
    {16u << 20, 8u << 20, 0}, /* allreduce */
    {4u << 20, 8u << 20, 1},  /* reduce-scatter */
    {SIZE_MAX, SIZE_MAX, 0},  /* allgather: single copy at every size */
    {SIZE_MAX, SIZE_MAX, 0},  /* broadcast: likewise */
};

int gr__shm_private_kind(int kind) {
  switch (kind) {
  case GR__ALLREDUCE:
    return 0;
  case GR__REDUCE_SCATTER:
    return 1;
  case GR__ALLGATHER:
    return 2;
  case GR__BROADCAST:
    return 3;
  default:
    return -1;
  }
}

void gr__shm_private_defaults(int size, size_t cross[GR__SHM_PRIVATE_KINDS]) {
  size_t p = size > 0 ? (size_t)size : 1;
  for (int k = 0; k < GR__SHM_PRIVATE_KINDS; k++) {
    size_t v = size == 2 ? cross_default[k].pair : cross_default[k].more;
    cross[k] = cross_default[k].whole ? (v + p - 1) / p : v; /* bytes * size < v, per block */
  }
}

void gr__shm_set_private(gr__shm *s, int mode, const size_t cross[GR__SHM_PRIVATE_KINDS]) {
  s->priv = mode;
  for (int k = 0; k < GR__SHM_PRIVATE_KINDS; k++)
    s->cross[k] = cross[k];
}

void gr__shm_set_pair_max(gr__shm *s, size_t bytes) { s->pair_max = bytes; }

size_t gr__shm_pair_max_default(void) { return lim.pair_small_max; }

size_t gr__shm_single_min(void) { return lim.single_min; }

int gr__shm_private(const gr__shm *s, size_t cross[GR__SHM_PRIVATE_KINDS]) {
  for (int k = 0; cross && k < GR__SHM_PRIVATE_KINDS; k++)
    cross[k] = s->cross[k];
  return s->priv;
}

/* Reduce and alltoall run here while they are small (the small mode: one round, one
 * synchronisation, no syscall); larger ones run in MPI after an agreement round. */
static int small_here(const gr__shm *s, int kind, size_t count, gr_dtype t) {
  size_t es = gr__dtype_size(t), max = s->size == 2 ? lim.pair_small_max : lim.small_max;
  if (!es) return 0;
  if (kind == GR__REDUCE) return count <= max / es;
  if (kind == GR__ALLTOALL) return count <= lim.alltoall_small_max / es / (size_t)s->size;
  return 0;
}

int gr__shm_takes(const gr__shm *s, int kind, size_t count, gr_dtype t) {
  return s && (kind == GR__ALLREDUCE || kind == GR__REDUCE_SCATTER || kind == GR__ALLGATHER ||
               kind == GR__BROADCAST || kind == GR__BARRIER || small_here(s, kind, count, t));
}

/* The collectives that run elsewhere: on the segment they only agree (gr_shm.h, Agreement). */
int gr__shm_gates(const gr__shm *s, int kind, size_t count, gr_dtype t) {
  return s && (kind == GR__REDUCE || kind == GR__ALLTOALL) && !small_here(s, kind, count, t);
}

/* Whether single copy suits a call of this kind moving `bytes` per rank: from single_min, and
 * below the kind's crossover unless GPURUN_SHM_PRIVATE forced a side or past_cross waives it
 * (agreed: the same on every rank). */
static int single_copy_suits(const gr__shm *s, int kind, size_t bytes, int past_cross) {
  if (bytes < lim.single_min) return 0;
  if (s->priv == GR_SHM_PRIVATE_SINGLE) return 1;
  if (s->priv == GR_SHM_PRIVATE_SLOTS) return 0;
  int k = gr__shm_private_kind(kind);
  return k >= 0 && (past_cross || bytes < s->cross[k]);
}

/* The mode of op, with the kind's crossover waived where past_cross. */
static int mode_of(const gr__shm *s, const gr__shm_op *op, int past_cross) {
  size_t es = gr__dtype_size(op->dtype), bytes = op->count * es;
  if (op->kind == GR__BARRIER || op->refused) return SHM_MODE_AGREE;
  if (op->kind == GR__REDUCE || op->kind == GR__ALLTOALL)
    return small_here(s, op->kind, op->count, op->dtype) ? SHM_MODE_SMALL : SHM_MODE_AGREE;
  if (op->kind == GR__ALLREDUCE && s->size == 2 && bytes <= s->pair_max) return SHM_MODE_SMALL;
  if (s->cma && op->count >= (size_t)s->size && single_copy_suits(s, op->kind, bytes, past_cross))
    return SHM_MODE_SINGLE;
  if (op->kind == GR__ALLREDUCE)
    return bytes <= lim.small_max || op->count < (size_t)s->size ? SHM_MODE_SMALL : SHM_MODE_LARGE;
  return SHM_MODE_ROUNDS;
}

int gr__shm_mode(const gr__shm *s, const gr__shm_op *op) { return mode_of(s, op, 0); }

/* Past the crossover the slots are faster for a call whose every rank waits in it, but they copy
 * each rank's data in and out in that rank's own process: a rank that computes while its request
 * is outstanding leaves that work to its progress thread, which gets a tenth of its core
 * (shm_progress.c), so its peers wait for it. Single copy lets the peers do its share (they read
 * and write its buffers), so a request keeps it at every size: 64 MiB allreduce at 2 ranks, the
 * late rank not testing, 1.08-1.10x the longer of compute and allreduce against 1.38-1.43x through
 * the slots (bench/README.md, "Requests that progress on their own"). Blocking calls on the same
 * communicator keep the crossover; where ranks mix the two forms for one call, any rank's request
 * decides, from what every rank published in the first round, so every rank runs the same. Only
 * under auto: a forced side holds for requests too. */
int gr__shm_single_if_requested(const gr__shm *s, const gr__shm_op *op) {
  return s->priv == GR_SHM_PRIVATE_AUTO && mode_of(s, op, 0) != SHM_MODE_SINGLE &&
         mode_of(s, op, 1) == SHM_MODE_SINGLE;
}

int gr__shm_window_fits(const gr__shm *s, const gr__shm_op *op) {
  if (!op->win || op->refused) return 0;
  size_t bytes = op->count * gr__dtype_size(op->dtype);
  switch (op->kind) {
  case GR__ALLREDUCE:
    return bytes >= lim.window_min && op->count >= (size_t)s->size;
  case GR__REDUCE_SCATTER:
  case GR__ALLGATHER:
  case GR__BROADCAST:
    return bytes >= lim.window_min;
  default:
    return 0;
  }
}
