/* Internal to the shm_*.c files: one rank's view of a segment, the segment's layout, and the
 * pieces the protocol (shm_coll.c), its algorithms (shm_slots.c, shm_single.c) and its policy
 * (shm_policy.c) share. gr_shm.h is what the rest of collectives/ sees.
 *
 * The node-local path reads top-down: shm_comm.c attaches a communicator (and takes the MPI
 * backend's calls), shm_coll.c runs the queue of calls in rounds and checks that the ranks agree
 * on each, shm_policy.c says which algorithm serves a call (every size threshold is there), and
 * shm_slots.c and shm_single.c move the data: through the segment's slots, or by single copy
 * (process_vm_readv/writev) and directly in windows. The hot helpers every step uses (raise,
 * reached, place, the descriptor check's fast path) are inline here, so that the split into files
 * costs no call on the way of a small call. */
#ifndef GR_SHM_INT_H
#define GR_SHM_INT_H

#include "gr_shm.h"

#include "gr_array.h"
#include "gr_list.h"

#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ---- the segment's layout ------------------------------------------------------------------ */

/* "grsmcol2": the layout below; a rank of a build with another layout fails to attach. */
#define SHM_MAGIC 0x6772736d636f6c32ull
#define FLAGS_OFF 2048
#define FLAG_STRIDE 128 /* two cache lines: the adjacent-line prefetcher would share one */
#define WAITERS_OFF 1920
/* Who gave up on the segment (gr__shm_forget: a timeout, an abort), a bit per rank, and per rank a
 * 16-bit count raised before and after each single-copy syscall (odd: inside one), in the header
 * between the pids and the waiters' word. A rank that gives up sets its bit, then waits for every
 * peer inside a syscall to leave it; a peer raises its count, then reads the bit before each
 * read or write of that rank's memory (both seq_cst: the two sides cannot miss each other). So
 * once gr__shm_forget returned, no peer's process_vm_writev reaches this rank's buffers again
 * (issue 40: a late peer wrote a timed-out rank's receive buffer after gr_comm_destroy). */
#define LEFT_OFF 1088
#define CMA_GEN_OFF 1152
_Static_assert(LEFT_OFF >= 64 + 4 * GR__SHM_MAX_RANKS &&
                   LEFT_OFF + GR__SHM_MAX_RANKS / 8 <= CMA_GEN_OFF &&
                   CMA_GEN_OFF + 2 * GR__SHM_MAX_RANKS <= WAITERS_OFF,
               "the header's places overlap");
/* Each rank's control line (the first of its FLAG_STRIDE bytes): its counter, then the
 * descriptors of its call (gr_shm.h, Agreement): two places of two words, used in alternation
 * with the buffers; in the counter's cache line, which a waiting peer reads anyway. */
#define CTL_DESC 8
/* ... then two inline places of INLINE_MAX bytes, used in alternation with the buffers instead of
 * them when a round writes at most that much per rank: the data then arrives with the counter, in
 * one transfer of one cache line, where the slot costs a second transfer after the counter's (Open
 * MPI's fastbox does the same for a message). 8 bytes: one double or int64, two floats; a scalar
 * allreduce, the commonest small collective, fits. */
#define CTL_INLINE 40
#define INLINE_MAX 8
/* ... then whether its current call was posted as a request (single copy past the crossover,
 * gr__shm_single_if_requested): written before the first raise, read after every rank's. */
#define CTL_REQUEST 56
/* The second line: the addresses of its buffers in the current call (single copy only). */
#define CTL_SEND 64
#define CTL_RECV 72
#define CTL_BASE 80
/* ... and the next unclaimed chunk of its slices in a single-copy allreduce, tagged with the
 * call's round number in the high 32 bits (any rank may claim a chunk, shm_single.c). */
#define CTL_CLAIM 96
/* ... and where its buffers lie when the communicator holds windows (gr__shm_window_add): the
 * window's token and the offset in it, of the send and of the recv buffer (token 0: not in one). */
#define CTL_WS_TOK 88
#define CTL_WS_OFF 104
#define CTL_WR_TOK 112
#define CTL_WR_OFF 120

/* ---- what a step says, and how a call moves ------------------------------------------------ */

/* What one step of an algorithm returns to the protocol's advance (shm_coll.c). A step resumes
 * where a wait stopped it (op->sub, op->peer: the peer or block it got to), so nothing is read or
 * reduced twice. */
typedef enum {
  SHM_STEP_WAIT = 0,     /* waiting for a peer (or this pass's budget is spent): call again */
  SHM_STEP_DONE = 1,     /* the round (or the whole single-copy call) is done */
  SHM_STEP_SYSFAIL = -1, /* a single-copy read or write failed (s->cma_errno): the segment breaks */
  SHM_STEP_DISAGREE = -2, /* the ranks disagree on the call, or one refused it (op->seen) */
  /* not every buffer in a window and no single copy: start again through the slots, in fresh
   * rounds (the counters agree: each rank raised once) */
  SHM_STEP_RESTART = -3
} shm_step;

/* How a call moves (op->mode), chosen by the policy (shm_policy.c) the same on every rank. */
enum {
  SHM_MODE_ROUNDS = 0, /* reduce-scatter, allgather, broadcast: rounds through the slots */
  SHM_MODE_SMALL,      /* one round of whole copies (allreduce, reduce, alltoall) */
  SHM_MODE_LARGE,      /* allreduce in sliced rounds: each rank reduces its slice */
  SHM_MODE_SINGLE,     /* single copy, or direct in windows (shm_single.c) */
  SHM_MODE_AGREE       /* only the agreement round, no data: barrier, a refusal, a gated call */
};

/* op->state: where a call is. */
enum { SHM_QUEUED = 0, SHM_RUNNING, SHM_SETTLED };
/* op->failed: why a call failed its first round (the status it returns). */
enum { SHM_OK = 0, SHM_FAILED_MISMATCH = 1, SHM_FAILED_REFUSED = 2 };
/* op->seen: what the first round saw, from which the sentence is made when the call settles. */
enum { SHM_SEEN_NOTHING = 0, SHM_SEEN_SELF_REFUSED, SHM_SEEN_PEER_REFUSED, SHM_SEEN_DIFFERS };

/* ---- one rank's view ----------------------------------------------------------------------- */

struct gr__shm {
  unsigned char *base;
  size_t bytes;
  int rank, size, owns;
  uint64_t tick;   /* this rank's counter as last raised */
  uint64_t first;  /* the counter value of the current round's first raise */
  uint64_t ready;  /* every counter at least this before the current round's buffer is written */
  uint64_t rounds; /* rounds started: the current round's buffer is (rounds - 1) % 2 */
  uint64_t wait_for;
  int wait_rank; /* the wait in progress: counter value, rank (-1 = all) */
  int lag;       /* a rank that had not reached wait_for at the last look */
  int broken;
  int spins;        /* polls per gr__shm_test */
  uint64_t spin_ns; /* fruitless waiting before yielding */
  int cma;          /* single copy through process_vm_readv (all ranks agreed) */
  int priv;         /* GR_SHM_PRIVATE_*: how private buffers move (all ranks agreed) */
  size_t cross[GR__SHM_PRIVATE_KINDS]; /* auto: bytes per rank from which the slots win */
  size_t pair_max;    /* two ranks: allreduces up to this many bytes take the small mode (agreed:
                       * the policy's default, or measured at creation, gr__shm_set_pair_max) */
  int cma_errno;      /* a failed read (not a vanished peer): the call fails */
  size_t tmp_bytes;   /* a single-copy reduction's block per peer (shm_single.c) */
  unsigned char *tmp; /* (size - 1) * tmp_bytes */
  uint64_t moves;     /* raises and copies done: progress, for the idle clock */
  uint64_t idle_t0;   /* when the current fruitless wait began (ns), 0 = not waiting */
  const int *names;   /* the ranks' numbers in sentences (gr__shm_name_ranks), NULL = own */
  int sys_failed;     /* a single-copy read or write failed (cma_errno): the next test reports it */
  int budget;         /* pieces of work this pass may still do; -1 = no limit */
  int bounded;        /* this pass claims single pieces (a request's gr_test) */
  /* Everything above and the op queue belong to whichever thread holds lock: the caller's
   * test, post and forget, or the progress engine's slice (shm_progress.c). */
  pthread_mutex_t lock;
  _Atomic int engine_wants; /* the engine found lock taken: the holder kicks it on unlock */
  _Atomic int caller_wants; /* a caller found it taken by the engine: the engine's pass ends */
  int engine_pass;          /* the pass under way is the engine's */
  int engine_on;            /* registered with the engine (the caller's thread only) */
  /* Once registered: the engine's bell and its farewell, which the
   * engine hands over at registration (gr__shm_engine_registered), so that the protocol calls
   * the engine only through them and shm_coll.c does not depend on shm_progress.c. */
  void (*engine_kick)(void);
  void (*engine_remove)(gr__shm *s);
  gr_list queue; /* gr__shm_op: posted, in post order (the same on every rank) */
  gr_list spare; /* gr__shm_op: settled, for reuse */
  gr_list all;   /* op_box: every op ever allocated, freed with the context */
  gr_array wins; /* struct shm_window (gr__shm_window_add): every rank of the segment maps them */
  gr_array deferred; /* void * (gr__shm_defer's FIFO): the items from dfirst to the end */
  size_t dfirst;
};

struct shm_window {
  uint64_t token;
  unsigned char **base; /* rank q's region in this rank's mapping, size entries */
  size_t *bytes;
};
#define WIN(s, i) GR_ARRAY_AT(&(s)->wins, struct shm_window, i)

static inline size_t shm_data_off(int size) {
  size_t o = FLAGS_OFF + (size_t)FLAG_STRIDE * (size_t)size;
  return (o + 4095) & ~(size_t)4095;
}
static inline _Atomic int32_t *shm_pid_of(unsigned char *base, int q) {
  return (_Atomic int32_t *)(base + 64 + 4 * (size_t)q);
}
static inline _Atomic uint64_t *shm_flag(const gr__shm *s, int q) {
  return (_Atomic uint64_t *)(s->base + FLAGS_OFF + (size_t)FLAG_STRIDE * (size_t)q);
}
static inline _Atomic uint64_t *shm_ctl(const gr__shm *s, int q, size_t field) {
  return (_Atomic uint64_t *)(s->base + FLAGS_OFF + (size_t)FLAG_STRIDE * (size_t)q + field);
}
static inline _Atomic uint64_t *shm_left_word(const gr__shm *s, int q) {
  return (_Atomic uint64_t *)(s->base + LEFT_OFF + 8 * (size_t)(q / 64));
}
static inline int shm_has_left(const gr__shm *s, int q) {
  return (int)((atomic_load(shm_left_word(s, q)) >> (q % 64)) & 1);
}
static inline _Atomic uint16_t *shm_cma_gen(const gr__shm *s, int q) {
  return (_Atomic uint16_t *)(s->base + CMA_GEN_OFF + 2 * (size_t)q);
}
static inline _Atomic uint32_t *shm_waiters(const gr__shm *s) {
  return (_Atomic uint32_t *)(s->base + WAITERS_OFF);
}
/* The futex word of a counter: its low 32 bits, which change with every raise. */
static inline uint32_t *shm_futex_word(_Atomic uint64_t *f) {
  return (uint32_t *)(void *)f + (__BYTE_ORDER__ == __ORDER_BIG_ENDIAN__);
}
/* Rank q's buffer of the current round. */
static inline unsigned char *shm_slot(const gr__shm *s, int q) {
  return s->base + shm_data_off(s->size) +
         ((size_t)q * 2 + (size_t)((s->rounds - 1) & 1)) * GR__SHM_SLOT;
}
/* Where rank q's data of the current round is, for a round that writes bytes per rank: its inline
 * place up to INLINE_MAX (8-byte aligned, as the reduction kernel reads it), else its slot. Writer
 * and readers ask with the same bytes whenever they agree on the call, and every reader checks the
 * descriptor before it reads. */
static inline unsigned char *shm_place(const gr__shm *s, int q, size_t bytes) {
  if (bytes > INLINE_MAX) return shm_slot(s, q);
  return s->base + FLAGS_OFF + (size_t)FLAG_STRIDE * (size_t)q + CTL_INLINE +
         (size_t)((s->rounds - 1) & 1) * INLINE_MAX;
}
static inline int shm_name_of(const gr__shm *s, int q) { return s->names ? s->names[q] : q; }

/* ---- the rounds (the protocol's primitives every step uses) -------------------------------- */

/* Raise this rank's counter: the round's step is done (its release publishes what was written). */
static inline void shm_raise(gr__shm *s) {
  s->tick++;
  s->moves++;
  _Atomic uint64_t *f = shm_flag(s, s->rank);
  atomic_store_explicit(f, s->tick, memory_order_release);
  /* store then load, against the sleeper's increment then load: one of the two sees the other */
  atomic_thread_fence(memory_order_seq_cst);
  /* a failed wake leaves the sleeper to its bounded sleep (SLEEP_NS): nothing to undo */
  if (atomic_load_explicit(shm_waiters(s), memory_order_relaxed))
    (void)syscall(SYS_futex, shm_futex_word(f), FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* Whether rank who (-1: every rank) has raised its counter to v; remembered for diagnostics. */
static inline int shm_reached(gr__shm *s, uint64_t v, int who) {
  s->wait_for = v;
  s->wait_rank = who;
  s->lag = who;
  if (who >= 0) return atomic_load_explicit(shm_flag(s, who), memory_order_acquire) >= v;
  for (int q = 0; q < s->size; q++)
    if (atomic_load_explicit(shm_flag(s, q), memory_order_acquire) < v) {
      s->lag = q;
      return 0;
    }
  return 1;
}

/* Slice q of a round of len elements: [*off, *off + *n). */
static inline void shm_slice(size_t len, int P, int q, size_t *off, size_t *n) {
  size_t base = len / (size_t)P, rem = len % (size_t)P, uq = (size_t)q;
  *off = uq * base + (uq < rem ? uq : rem);
  *n = base + (uq < rem);
}

/* Whether this pass may do one more piece of work (a chunk, a piece, a round); counts it. */
static inline int shm_spend(gr__shm *s) {
  if (s->engine_pass && atomic_load_explicit(&s->caller_wants, memory_order_relaxed)) return 0;
  if (s->budget < 0) return 1;
  if (!s->budget) return 0;
  s->budget--;
  return 1;
}

/* ---- agreement on the call (gr_shm.h) ------------------------------------------------------ */

static inline _Atomic uint64_t *shm_desc(const gr__shm *s, int q) {
  return shm_ctl(s, q, CTL_DESC + 16 * (size_t)((s->rounds - 1) & 1));
}

/* The fields that decide the byte layout and the arithmetic, those a kind ignores zeroed, and the
 * round number (which agrees whenever the earlier calls did). */
static inline void shm_describe(const gr__shm *s, const gr__shm_op *op, uint64_t d[2]) {
  int reduces =
      op->kind == GR__ALLREDUCE || op->kind == GR__REDUCE_SCATTER || op->kind == GR__REDUCE;
  int rooted = op->kind == GR__BROADCAST || op->kind == GR__REDUCE;
  int data = op->kind != GR__BARRIER;
  d[0] = data ? (uint64_t)op->count : 0;
  d[1] = (uint64_t)(op->kind & 0xff) | (uint64_t)(data ? op->dtype & 0xff : 0) << 8 |
         (uint64_t)(reduces ? op->op & 0xff : 0) << 16 |
         (uint64_t)(rooted ? op->root & 0xfff : 0) << 24 | (uint64_t)(op->refused & 0xf) << 36 |
         (s->rounds & 0xffffff) << 40;
}

/* Written before the round's first raise (whose release publishes it), in the first round only. */
static inline void shm_announce(gr__shm *s, const gr__shm_op *op) {
  if (op->pos) return;
  uint64_t d[2];
  shm_describe(s, op, d);
  _Atomic uint64_t *p = shm_desc(s, s->rank);
  atomic_store_explicit(&p[0], d[0], memory_order_relaxed);
  atomic_store_explicit(&p[1], d[1], memory_order_relaxed);
}

/* Records on op that rank q described the call as d (mine: this rank's): op->failed and op->seen,
 * from which the protocol makes the sentence when the call settles. Here, not in shm_coll.c, so
 * that the helpers above call nothing outside this header (the algorithms reach the protocol's
 * lower layer only). */
static inline void gr__shm_disagree(gr__shm_op *op, int q, const uint64_t d[2],
                                    const uint64_t mine[2]) {
  op->seen_rank = q;
  for (int i = 0; i < 2; i++) {
    op->seen_desc[i] = d[i];
    op->own_desc[i] = mine[i];
  }
  if ((d[1] >> 36) & 0xf) { /* q refused its own arguments (gr_shm.h) */
    op->seen = SHM_SEEN_PEER_REFUSED;
    op->failed = SHM_FAILED_REFUSED;
  } else {
    op->seen = SHM_SEEN_DIFFERS;
    op->failed = SHM_FAILED_MISMATCH;
  }
}

/* Whether rank q (who has raised in this round) describes the call as this rank does; 1 yes (or
 * not the call's first round), 0 no: op->seen says what differs. Call before touching q's data. */
static inline int shm_agrees(gr__shm *s, gr__shm_op *op, int q) {
  if (op->pos || q == s->rank) return 1;
  uint64_t mine[2];
  shm_describe(s, op, mine);
  _Atomic uint64_t *p = shm_desc(s, q);
  uint64_t d[2] = {atomic_load_explicit(&p[0], memory_order_relaxed),
                   atomic_load_explicit(&p[1], memory_order_relaxed)};
  if (d[0] == mine[0] && d[1] == mine[1]) return 1;
  gr__shm_disagree(op, q, d, mine);
  return 0;
}

/* Every peer's descriptor (all have raised in this round). */
static inline int shm_all_agree(gr__shm *s, gr__shm_op *op) {
  if (op->pos) return 1;
  for (int q = 0; q < s->size; q++)
    if (!shm_agrees(s, op, q)) return 0;
  return 1;
}

/* The caller's side of the lock. A caller that finds it taken (by the engine's pass) asks the pass
 * to stop at its next piece; the engine then leaves the segment alone until a caller has had it
 * (gr__shm_engine_pump). try: 0 when taken (the caller returns). A segment no request was ever
 * posted on is the caller's alone (the engine sees only registered ones, and registration happens
 * outside every locked stretch): no lock, so blocking calls pay nothing for the engine. */
static inline int gr__shm_lock_caller(gr__shm *s, int try) {
  if (!s->engine_on) return 1;
  if (pthread_mutex_trylock(&s->lock) != 0) {
    atomic_store_explicit(&s->caller_wants, 1, memory_order_relaxed);
    if (try) return 0;
    pthread_mutex_lock(&s->lock);
  }
  atomic_store_explicit(&s->caller_wants, 0, memory_order_relaxed);
  return 1;
}

static inline void gr__shm_unlock(gr__shm *s) {
  if (!s->engine_on) return;
  pthread_mutex_unlock(&s->lock);
  if (atomic_load_explicit(&s->engine_wants, memory_order_relaxed) &&
      atomic_exchange_explicit(&s->engine_wants, 0, memory_order_relaxed))
    s->engine_kick();
}

/* ---- the policy (shm_policy.c): which algorithm serves a call ------------------------------- */

/* The mode of a call whose peers' buffers are not in windows (the same on every rank). */
int gr__shm_mode(const gr__shm *s, const gr__shm_op *op);
/* Whether a call may run direct in the windows, if every rank's buffers lie in them: it then
 * starts with the single copy's first step (publish, raise) on every rank. */
int gr__shm_window_fits(const gr__shm *s, const gr__shm_op *op);
/* Whether a call past its kind's crossover would run single copy but for the crossover: it then
 * starts with the single copy's first step too, each rank publishing whether it posted the call
 * as a request, and runs single copy where any rank did, through the slots where none did. */
int gr__shm_single_if_requested(const gr__shm *s, const gr__shm_op *op);
/* The least bytes per rank a call moves by single copy (below, the pair mode or the slots): the
 * floor of the two-rank limit that shm_choice.c measures. */
size_t gr__shm_single_min(void);

/* ---- the algorithms ------------------------------------------------------------------------ */

/* Through the slots (shm_slots.c): one round of op (op->pos, op->len), and the elements per round
 * (per block). The refusing rank's and the agreement round's step are there too. */
shm_step gr__shm_slots_step(gr__shm *s, gr__shm_op *op);
size_t gr__shm_round_elems(const gr__shm *s, const gr__shm_op *op);
/* By single copy or direct in windows (shm_single.c): the whole call, in steps. */
shm_step gr__shm_single_step(gr__shm *s, gr__shm_op *op);
/* Counts a call that runs by single copy from private buffers (gr__shm_single_copy_calls). */
void gr__shm_count_single_copy(void);
/* A single-copy reduction's block per peer, for a segment of size ranks. */
size_t gr__shm_tmp_bytes(int size);

#endif
