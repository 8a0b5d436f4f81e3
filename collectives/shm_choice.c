/* Private buffers on one node: single copy or the slots, per kind and size (gr_shm.h), decided at
 * a communicator's creation and agreed on every rank (gr__shm_choose, collective over c->mpi).
 *
 * Which side wins depends on the machine: the single copy moves each byte once, through
 * process_vm_readv/writev (the kernel pins the peer's pages and copies in its own loop), the slots
 * move each byte twice with memcpy and synchronise the ranks once per slot-sized round. Neither a
 * copy rate nor a syscall's cost alone predicts the difference; what a call pays is both, and the
 * pipelining of the rounds and the sharing of the reduction between the ranks. So the measurement
 * times the protocol's own code on the new segment: for each kind that has both sides (allreduce,
 * reduce-scatter, allgather, broadcast), a call at each of a few sizes (bytes per rank) forced by
 * single copy and forced through the slots, alternating blocks of calls (timed_block), on rank 0.
 * A kind's crossover is the smallest measured size from which the slots win (by WIN_MARGIN_PCT:
 * a near tie is no verdict) at every larger measured size; where they win at none, the fixed
 * crossover stays (gr__shm_private_defaults), moved past the largest measured size if it lies at
 * or below it; below the smallest size the single copy stays (its syscall is amortised from the
 * policy's single_min on, shm_policy.c, and there a round's synchronisation weighs most). Rank
 * 0's verdict is broadcast, so every rank holds the same crossovers. Every round among the ranks
 * is the agreement helper's (gr_agree.h), and the measuring calls end at the communicator's
 * deadline where that comes first: nothing here waits past the communicator's timeout. The process keeps it per
 * communicator size: a later communicator of that size on which every rank knows one takes rank
 * 0's without measuring (communicators are created often, and the measurement costs tens of
 * calls).
 *
 * Two ranks also measure how far an allreduce takes one exchange of whole copies (the pair mode:
 * one synchronisation, each rank reduces all n bytes itself) before the single copy (each byte
 * read once, the reduction shared) wins: timed at a few sizes up to a slot, the pair mode keeping
 * every size up to its first loss. The limit travels with rank 0's crossovers. */
#include "shm_int.h"

#include "gr_agree.h"
#include "gr_clock.h"
#include "gr_log.h"
#include "gr_param.h"

#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bytes per rank measured: above the two-rank allreduce's one-round limit (a slot), where
 * the machines in bench/README.md differ; few enough that all kinds together take tens of calls.
 * A reduce-scatter's input and an allgather's output are size times that: a size whose buffer
 * would exceed MEASURE_MAX_BYTES is not measured (the same on every rank), and counts as a win of
 * the single copy (the fixed crossover stays for it and above). */
static const size_t sizes[] = {256u << 10, 1u << 20};
#define MEASURE_MAX_BYTES (16u << 20)
#define NSIZES (sizeof sizes / sizeof sizes[0])
#define REPEATS 1
#define MEASURE_TIMEOUT_S 30.0
/* Two ranks also time the allreduce at the fixed crossover's size, where the machines in
 * bench/README.md part ways (the single copy ran at 0.58-0.67x raw against the slots' 0.77-0.80x
 * on one, the slots at 0.74x against 0.87x on another). A call of that size lasts milliseconds,
 * so its blocks are of LARGE_BLOCK calls; the warm-up blocks stay (the first six calls of that
 * size in a process ran 1.3-3x slower than the later ones, of either side). */
#define PAIR_LARGE (16u << 20)
#define LARGE_BLOCK 3
/* A side beats the other at a size only by this share of the other's time (percent): cold calls
 * timed a few times tie within a few percent where repeated calls differ by a quarter (two ranks,
 * 1 MiB: single copy 153-176 us against the slots' 157-165 us, while at 4-16 MiB the single copy
 * runs at 0.59-0.64x raw and the slots at 0.76-0.83x), so a near tie keeps the fixed rule. */
#define WIN_MARGIN_PCT 10

static const int kinds[GR__SHM_PRIVATE_KINDS] = {GR__ALLREDUCE, GR__REDUCE_SCATTER, GR__ALLGATHER,
                                                 GR__BROADCAST};

static const char *const kind_name[GR__SHM_PRIVATE_KINDS] = {"allreduce", "reduce-scatter",
                                                             "allgather", "broadcast"};

/* Two ranks: allreduce sizes (bytes) at which the one-exchange pair mode is timed against what the
 * call takes otherwise (the single copy below the crossover); each at most a slot, the pair mode's
 * one round. Below the smallest the pair mode always stays: the single copy starts at the
 * policy's single_min (gr__shm_single_min) and its syscalls weigh most there. */
static const size_t pair_sizes[] = {32u << 10, 64u << 10, GR__SHM_SLOT};
#define PAIR_NSIZES (sizeof pair_sizes / sizeof pair_sizes[0])

static pthread_mutex_t known_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
  int known;
  size_t cross[GR__SHM_PRIVATE_KINDS];
  size_t pair_max;
} known[GR__SHM_MAX_RANKS + 1];

/* One call, posted and progressed to its end; its time in ns, 0 when it failed or ran past the
 * deadline (the segment is then unusable). The protocol's own test: no MPI round, so the deadline
 * is checked here: the measurement's, or the communicator's timeout (call_s, 0: none) from the
 * call's start where that comes first, as for any call of the program's. */
static uint64_t timed_call(gr__shm *s, int kind, size_t bytes, void *send, void *recv,
                           double deadline, double call_s) {
  gr__shm_op call = {.kind = kind,
                     .send = send,
                     .recv = recv,
                     .count = bytes / sizeof(float),
                     .dtype = GR_FLOAT32,
                     .op = GR_SUM,
                     .root = 0};
  gr__shm_op *op = NULL;
  double until = gr__deadline(call_s);
  if (until > 0 && until < deadline) deadline = until;
  uint64_t t0 = gr__mono_ns();
  if (gr__shm_post(s, &op, &call) != GR_OK) return 0;
  for (unsigned spin = 0;; spin++) {
    int done = 0;
    if (gr__shm_test(s, op, &done) != GR_OK) return 0;
    if (done) break;
    if ((spin & 15) == 15 && gr__mono_now() > deadline) {
      char why[320];
      gr__shm_forget(s, op, why, sizeof why);
      GR_DEBUG("collectives: shared-memory path: measuring the single copy: %s", why);
      return 0;
    }
  }
  uint64_t t = gr__mono_ns() - t0;
  return t ? t : 1;
}

/* Whether a time of a ns beats one of b ns by WIN_MARGIN_PCT. */
static int beats(uint64_t a, uint64_t b) { return a < b && b - a >= b / 100 * WIN_MARGIN_PCT; }

/* A side's time at a size: `calls` calls back to back (BLOCK, LARGE_BLOCK), the mean of all but
 * the first (which pays for the switch from the other side: caches and pages the other left). A
 * program repeats the side a size takes, so the steady state is what decides; single calls
 * alternating between the sides tied at 1 MiB where repeated calls differ by a quarter. 0 when a
 * call failed. */
#define BLOCK 4
static uint64_t timed_block(gr__shm *s, int kind, size_t bytes, void *send, void *recv,
                            double deadline, double call_s, int calls) {
  uint64_t sum = 0;
  for (int i = 0; i < calls; i++) {
    uint64_t t = timed_call(s, kind, bytes, send, recv, deadline, call_s);
    if (!t) return 0;
    if (i) sum += t;
  }
  return sum / (uint64_t)(calls - 1) ? sum / (uint64_t)(calls - 1) : 1;
}

static size_t need(int k, size_t bytes, int size) {
  return kinds[k] == GR__REDUCE_SCATTER || kinds[k] == GR__ALLGATHER ? bytes * (size_t)size : bytes;
}

/* Two ranks: the pair mode against the rest of auto's rule (cross already chosen) at each of
 * pair_sizes; *pair_max is the largest size up to which the other side beats the pair mode (by
 * WIN_MARGIN_PCT) at no measured size, the single copy's least size where it does at the first. 0
 * when a call failed. */
static int measure_pair(gr__shm *s, const size_t cross[GR__SHM_PRIVATE_KINDS], void *send,
                        void *recv, double deadline, double call_s, size_t *pair_max) {
  int ok = 1;
  int lost = 0; /* every rank times every size: a local verdict must not end the loop early */
  *pair_max = gr__shm_single_min();
  gr__shm_set_private(s, GR_SHM_PRIVATE_AUTO, cross);
  for (size_t z = 0; ok && z < PAIR_NSIZES; z++) {
    uint64_t best[2] = {UINT64_MAX, UINT64_MAX}; /* pair, otherwise */
    for (int rep = 0; ok && rep <= REPEATS; rep++)
      for (int side = 0; ok && side < 2; side++) {
        gr__shm_set_pair_max(s, side ? 0 : GR__SHM_SLOT);
        uint64_t t =
            timed_block(s, GR__ALLREDUCE, pair_sizes[z], send, recv, deadline, call_s, BLOCK);
        ok = t != 0;
        if (rep && t < best[side]) best[side] = t;
      }
    if (!ok) break;
    GR_DEBUG("collectives: shared-memory path: allreduce of %zu bytes at two ranks: one exchange "
             "%.1f us, otherwise %.1f us",
             pair_sizes[z], (double)best[0] / 1e3, (double)best[1] / 1e3);
    lost |= beats(best[1], best[0]); /* the pair mode stops at its first loss */
    if (!lost) *pair_max = pair_sizes[z];
  }
  return ok;
}

/* Every kind at every size, both sides; the crossovers from this rank's times into cross. 0 when a
 * call failed (the segment is unusable); *st: the buffers' round's failure (gr_agree.h), else
 * GR_OK. */
static int measure(gr_comm *c, gr__shm *s, int size, size_t cross[GR__SHM_PRIVATE_KINDS],
                   size_t *pair_max, gr_status *st) {
  size_t most = size == 2 ? PAIR_LARGE : 0;
  for (int k = 0; k < GR__SHM_PRIVATE_KINDS; k++)
    for (size_t z = 0; z < NSIZES; z++) {
      size_t n = need(k, sizes[z], size);
      if (n <= MEASURE_MAX_BYTES && n > most) most = n;
    }
  unsigned char *send = malloc(most), *recv = malloc(most);
  /* on every rank, or no rank starts a call */
  int ok = 0;
  *st = gr__agree_ok(c, "the measurement's buffers", send && recv, &ok);
  if (ok) {
    memset(send, 0, most);
    memset(recv, 0, most);
  }
  gr__shm_private_defaults(size, cross);
  double deadline = gr__mono_now() + MEASURE_TIMEOUT_S;
  /* every size of every kind, on every rank: the calls are the same sequence everywhere (the
   * protocol needs it), and only rank 0's times decide */
  for (int k = 0; ok && k < GR__SHM_PRIVATE_KINDS; k++) {
    size_t at[NSIZES + 1], nz = 0, largest = 0; /* this kind's sizes; the largest measured */
    for (size_t z = 0; z < NSIZES; z++)
      at[nz++] = sizes[z];
    if (size == 2 && kinds[k] == GR__ALLREDUCE) at[nz++] = PAIR_LARGE;
    int slots_win[NSIZES + 1];
    for (size_t z = 0; ok && z < nz; z++) {
      slots_win[z] = 0;
      if (need(k, at[z], size) > MEASURE_MAX_BYTES) continue;
      int large = at[z] == PAIR_LARGE;
      uint64_t best[2] = {UINT64_MAX, UINT64_MAX}; /* single, slots */
      for (int rep = 0; ok && rep <= REPEATS; rep++)
        for (int side = 0; ok && side < 2; side++) {
          gr__shm_set_private(s, side ? GR_SHM_PRIVATE_SLOTS : GR_SHM_PRIVATE_SINGLE, cross);
          uint64_t t = timed_block(s, kinds[k], at[z], send, recv, deadline, c->timeout_s,
                                   large ? LARGE_BLOCK : BLOCK);
          ok = t != 0;
          if (rep && t < best[side]) best[side] = t; /* rep 0 warms pages and caches */
        }
      slots_win[z] = beats(best[1], best[0]);
      largest = at[z];
      if (ok)
        GR_DEBUG("collectives: shared-memory path: %s of %zu bytes per rank: single copy %.1f us, "
                 "slots %.1f us",
                 kind_name[k], at[z], (double)best[0] / 1e3, (double)best[1] / 1e3);
    }
    for (size_t z = nz; ok && z-- > 0 && slots_win[z];) /* down from the largest */
      cross[k] = at[z];
    /* the slots won at no size from which they win at every larger one: the fixed crossover
     * stays, but never at or below the largest measured size, where the single copy held */
    if (ok && nz && !slots_win[nz - 1] && largest && cross[k] <= largest) cross[k] = largest + 1;
  }
  if (ok && size == 2) ok = measure_pair(s, cross, send, recv, deadline, c->timeout_s, pair_max);
  free(send);
  free(recv);
  return ok;
}

int gr__shm_private_known(int size, size_t cross[GR__SHM_PRIVATE_KINDS], size_t *pair_max) {
  if (size < 0 || size > GR__SHM_MAX_RANKS) return 0;
  pthread_mutex_lock(&known_lock);
  int have = known[size].known;
  if (have) memcpy(cross, known[size].cross, sizeof known[size].cross);
  if (have && pair_max) *pair_max = known[size].pair_max;
  pthread_mutex_unlock(&known_lock);
  return have;
}

gr_status gr__shm_choose(gr_comm *c, gr__shm *s, int *usable) {
  *usable = 0;
  size_t cross[GR__SHM_PRIVATE_KINDS], pair_max = gr__shm_pair_max_default();
  gr__shm_private_defaults(c->size, cross);
  int size = c->size < 0 || c->size > GR__SHM_MAX_RANKS ? 0 : c->size;
  pthread_mutex_lock(&known_lock);
  int have = known[size].known;
  if (have) memcpy(cross, known[size].cross, sizeof cross);
  if (have) pair_max = known[size].pair_max;
  pthread_mutex_unlock(&known_lock);
  /* rank 0's setting, and whether some rank knows no crossovers for this size */
  int64_t mine[2] = {c->rank == 0 ? gr__param_word(GR_PARAM_SHM_PRIVATE) : -1, !have}, v[2];
  gr_status st = gr__agree(c, "GPURUN_SHM_PRIVATE", GR__AGREE_MAX, mine, v, 2);
  if (st != GR_OK) return st;
  int mode = (int)v[0];
  if (mode != GR_SHM_PRIVATE_AUTO) {
    gr__shm_private_defaults(c->size, cross);
    gr__shm_set_private(s, mode, cross);
    *usable = 1;
    return GR_OK;
  }
  uint64_t t0 = gr__mono_ns();
  if (v[1]) {
    int ok = measure(c, s, c->size, cross, &pair_max, &st);
    if (st == GR_OK) st = gr__agree_ok(c, "the measurement", ok, &ok);
    if (st != GR_OK || !ok) return st;
  }
  uint64_t agreed[GR__SHM_PRIVATE_KINDS + 1]; /* the crossovers, then the pair limit */
  for (int k = 0; k < GR__SHM_PRIVATE_KINDS; k++)
    agreed[k] = cross[k];
  agreed[GR__SHM_PRIVATE_KINDS] = pair_max;
  st = gr__agree_bcast(c, "the measured crossovers", agreed, sizeof agreed, 0);
  if (st != GR_OK) return st;
  for (int k = 0; k <= GR__SHM_PRIVATE_KINDS; k++)
    if (agreed[k] > SIZE_MAX) agreed[k] = SIZE_MAX;
  for (int k = 0; k < GR__SHM_PRIVATE_KINDS; k++)
    cross[k] = (size_t)agreed[k];
  pair_max = (size_t)agreed[GR__SHM_PRIVATE_KINDS];
  pthread_mutex_lock(&known_lock);
  known[size].known = 1;
  memcpy(known[size].cross, cross, sizeof cross);
  known[size].pair_max = pair_max;
  pthread_mutex_unlock(&known_lock);
  gr__shm_set_private(s, GR_SHM_PRIVATE_AUTO, cross);
  gr__shm_set_pair_max(s, pair_max);
  if (v[1]) {
    char pair[80] = ""; /* the pair limit applies at two ranks only */
    if (c->size == 2)
      snprintf(pair, sizeof pair, "; two ranks' allreduce in one exchange up to %zu bytes",
               pair_max);
    GR_DEBUG("collectives: communicator %s: private buffers by single copy below %zu (allreduce), "
             "%zu (reduce-scatter), %zu (allgather), %zu (broadcast) bytes per rank, measured in "
             "%.2f ms%s",
             c->id, cross[0], cross[1], cross[2], cross[3], (double)(gr__mono_ns() - t0) / 1e6,
             pair);
  }
  *usable = 1;
  return GR_OK;
}
