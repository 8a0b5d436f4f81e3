/* The shared-memory protocol (see gr_shm.h for the layout and the rule that keeps it safe).
 *
 * Per round, with b = this round's buffer and slot(q) = rank q's buffer b:
 * - allreduce, small (at most SMALL_MAX bytes; at two ranks the pair limit, a slot or what auto
 *   measured at creation, shm_choice.c; rounds of a slot):
 *   copy the input to slot(me), raise; once all raised, reduce all slots (rank order) into recv.
 *   One synchronisation per round, no final one (the slot is rewritten two rounds later only).
 * - allreduce, large (rounds of GR__SHM_SLOT bytes): the round's elements are cut into one slice per
 *   rank; copy the slices the others reduce into slot(me), raise; once all raised, reduce my slice
 *   from my own input and the others' slots into recv and into slot(me), raise; once all raised,
 *   copy the others' reduced slices out of their slots. Every byte crosses between two processes
 *   once per direction.
 * - reduce-scatter: copy the blocks the others reduce into slot(me), raise; once all raised,
 *   reduce my block from my input and the others' slots.
 * - allgather: copy my block into slot(me), raise; copy each peer's block as soon as it raised.
 * - broadcast: the root copies into slot(root) and raises; the others raise at the start of the
 *   round (saying they finished the previous one) and copy once the root raised.
 * - barrier: raise; wait until all raised.
 * - reduce, alltoall (small): as the small allreduce; only the root reduces, or each rank takes its
 *   block from every slot. Larger ones: only the barrier's agreement round (gr_shm.h). */
#include "gr_shm.h"

#include "gr_array.h"
#include "gr_clock.h"
#include "gr_dtype.h"
#include "gr_param.h"
#include "gr_strbuf.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* "grsmcol2": the layout below; a rank of a build with another layout fails to attach. */
#define SHM_MAGIC 0x6772736d636f6c32ull
#define FLAGS_OFF 2048
#define FLAG_STRIDE 128 /* two cache lines: the adjacent-line prefetcher would share one */
/* A small allreduce goes in one round through whole copies: P reads of n bytes each beat two
 * synchronisations while n is small. */
#define SMALL_MAX 8192
/* Two ranks: up to a whole slot. Each rank reads one peer's n bytes (what the sliced modes move
 * too) and reduces all n itself (twice the sliced mode's arithmetic), with one synchronisation
 * instead of three and no syscall, which wins up to a slot (bench/README.md, "node-local shared
 * memory"). Beyond, the single-copy pipeline moves less through memory and is kept. What Open
 * MPI's recursive doubling does for two ranks, through the segment instead of point to point. */
/* The default; under GPURUN_SHM_PRIVATE=auto the allreduce's limit is measured at creation
 * (shm_choice.c: on a machine whose single copy is fast, it wins from 32 KiB). Reduce keeps it. */
#define PAIR_SMALL_MAX GR__SHM_SLOT
/* Polls per gr__shm_test before returning to the caller. A rank that has waited SPIN_NS without
 * progress yields the core at every call; after SLEEP_AFTER_NS it sleeps on the lagging rank's
 * counter (a futex, at most SLEEP_NS at a time), so that on an oversubscribed node the core goes to
 * the rank everyone waits for. A raise wakes sleepers only when the segment counts any. Waits
 * shorter than a round's copies (tens of microseconds) never pay a wake-up. */
#define SPINS 256
#define SPIN_NS 20000
/* More ranks than the node has cores: a peer is likely waiting for this very core, so
 * poll briefly and yield at once (what Open MPI does when it knows it is oversubscribed). */
#define SPINS_OVERSUBSCRIBED 16
#define SLEEP_AFTER_NS 200000
#define SLEEP_NS 1000000
/* Pieces of work (whole chunks, rounds) the progress engine does per pass before it lets go of
 * the segment's lock and looks at the other segments. */
#define ENGINE_BUDGET 8
#define WAITERS_OFF 1920

/* Single copy (CMA): from this many bytes per rank on, a rank that may read its peers' memory
 * (process_vm_readv: same user, no ptrace restriction) takes the peers' data straight out of their
 * own buffers instead of through the segment: one copy instead of two, which is what the memory
 * bandwidth of a large call is spent on. Below, the syscall costs more than the copy saves. */
#define CMA_MIN 16384
/* ... and up to a crossover per kind (bytes per rank: an allreduce's or a broadcast's count, a
 * reduce-scatter's or an allgather's block): from it on, copy in, reduce, copy out through the
 * segment's slots. The crossovers are the communicator's (gr__shm_set_private: measured on the
 * node at creation and agreed, shm_choice.c, or forced by GPURUN_SHM_PRIVATE), so the same on
 * every rank. Until then, and for what a measurement does not reach, these (an allreduce's count,
 * a reduce-scatter's whole input), one machine's crossovers (bench/README.md). */
#define CMA_ALLREDUCE_MAX_PAIR (16u << 20)
#define CMA_ALLREDUCE_MAX (8u << 20)
#define CMA_REDUCE_SCATTER_MAX_PAIR (4u << 20)
#define CMA_REDUCE_SCATTER_MAX (8u << 20)
/* Per peer: a reduction's block read from it, kept in L2 (tmp_bytes: the same on every rank, from
 * the size alone). Two ranks take larger blocks: a quarter of the syscalls and claims, and at 2
 * ranks the single copy ran 0.53-0.60x raw at 4-16 MiB against 0.61-0.70x with 64 KiB blocks
 * (bench/README.md, session 15); at 4 ranks the larger block lost at 256 KiB (fewer chunks to
 * share) and is not taken. */
#define CMA_TMP_BYTES 65536
#define CMA_TMP_BYTES_PAIR (256u << 10)
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
/* The second line: the addresses of its buffers in the current call (single copy only). */
#define CTL_SEND 64
#define CTL_RECV 72
#define CTL_BASE 80
/* ... and the next unclaimed chunk of its slices in a single-copy allreduce, tagged with the
 * call's round number in the high 32 bits (any rank may claim a chunk, cma_allreduce). */
#define CTL_CLAIM 96
/* ... and where its buffers lie when the communicator holds windows (gr__shm_window_add): the
 * window's token and the offset in it, of the send and of the recv buffer (token 0: not in one). */
#define CTL_WS_TOK 88
#define CTL_WS_OFF 104
#define CTL_WR_TOK 112
#define CTL_WR_OFF 120
/* Windows: a call reaches its peers' buffers directly from this many bytes per rank on (below,
 * one round through the slots, with one synchronisation instead of two, costs less). */
#define WIN_MIN 4096
/* Bytes per rank a request's gr_test reduces at most when it does a piece of a chunk: a test
 * returns within microseconds, and gr_wait or the progress thread do whole chunks. */
#define TEST_PIECE 4096

enum { MODE_SMALL = 1, MODE_LARGE, MODE_CMA };

typedef struct {
  uint64_t magic, nonce;
  uint32_t size, slot;
  uint64_t bytes;
} shm_header;

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
                       * PAIR_SMALL_MAX, or measured at creation, gr__shm_set_pair_max) */
  int cma_errno;      /* a failed read (not a vanished peer): the call fails */
  size_t tmp_bytes;   /* CMA_TMP_BYTES, or CMA_TMP_BYTES_PAIR at two ranks */
  unsigned char *tmp; /* (size - 1) * tmp_bytes */
  uint64_t moves;     /* raises and copies done: progress, for the idle clock */
  uint64_t idle_t0;   /* when the current fruitless wait began (ns), 0 = not waiting */
  char why[320];      /* the last failed call's sentence (gr__shm_why) */
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
  gr_list queue;            /* gr__shm_op: posted, in post order (the same on every rank) */
  gr_list spare;            /* gr__shm_op: settled, for reuse */
  gr_list all;              /* op_box: every op ever allocated, freed with the context */
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
#define DEFERRED(s, i) GR_ARRAY_AT(&(s)->deferred, void *, i)

/* Each op also sits on the list of all ops ever allocated (freed with the context). */
typedef struct op_box {
  gr__shm_op op;
  gr_list_node all_node;
} op_box;
#define OP_OF(n) GR_LIST_ENTRY(n, gr__shm_op, node)

static size_t data_off(int size) {
  size_t o = FLAGS_OFF + (size_t)FLAG_STRIDE * (size_t)size;
  return (o + 4095) & ~(size_t)4095;
}

size_t gr__shm_bytes(int size) { return data_off(size) + (size_t)size * 2 * GR__SHM_SLOT; }

static _Atomic int32_t *pid_of(unsigned char *base, int q) {
  return (_Atomic int32_t *)(base + 64 + 4 * (size_t)q);
}
static _Atomic uint64_t *flag(const gr__shm *s, int q) {
  return (_Atomic uint64_t *)(s->base + FLAGS_OFF + (size_t)FLAG_STRIDE * (size_t)q);
}
static _Atomic uint64_t *ctl(const gr__shm *s, int q, size_t field) {
  return (_Atomic uint64_t *)(s->base + FLAGS_OFF + (size_t)FLAG_STRIDE * (size_t)q + field);
}
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
static _Atomic uint64_t *left_word(const gr__shm *s, int q) {
  return (_Atomic uint64_t *)(s->base + LEFT_OFF + 8 * (size_t)(q / 64));
}
static int has_left(const gr__shm *s, int q) {
  return (int)((atomic_load(left_word(s, q)) >> (q % 64)) & 1);
}
static _Atomic uint16_t *cma_gen(const gr__shm *s, int q) {
  return (_Atomic uint16_t *)(s->base + CMA_GEN_OFF + 2 * (size_t)q);
}
static _Atomic uint32_t *waiters(const gr__shm *s) {
  return (_Atomic uint32_t *)(s->base + WAITERS_OFF);
}
/* The futex word of a counter: its low 32 bits, which change with every raise. */
static uint32_t *futex_word(_Atomic uint64_t *f) {
  return (uint32_t *)(void *)f + (__BYTE_ORDER__ == __ORDER_BIG_ENDIAN__);
}
static unsigned char *slot(const gr__shm *s, int q) {
  return s->base + data_off(s->size) +
         ((size_t)q * 2 + (size_t)((s->rounds - 1) & 1)) * GR__SHM_SLOT;
}
/* Where rank q's data of the current round is, for a round that writes bytes per rank: its inline
 * place up to INLINE_MAX (8-byte aligned, as the reduction kernel reads it), else its slot. Writer
 * and readers ask with the same bytes whenever they agree on the call, and every reader checks the
 * descriptor before it reads. */
static unsigned char *place(const gr__shm *s, int q, size_t bytes) {
  if (bytes > INLINE_MAX) return slot(s, q);
  return s->base + FLAGS_OFF + (size_t)FLAG_STRIDE * (size_t)q + CTL_INLINE +
         (size_t)((s->rounds - 1) & 1) * INLINE_MAX;
}

void gr__shm_format(void *base, int size, uint64_t nonce) {
  shm_header h = {SHM_MAGIC, nonce, (uint32_t)size, GR__SHM_SLOT, gr__shm_bytes(size)};
  memset(base, 0, data_off(size));
  memcpy(base, &h, sizeof h);
}

int gr__shm_valid(const void *base, size_t bytes, int size, uint64_t nonce) {
  shm_header h;
  if (size < 1 || size > GR__SHM_MAX_RANKS || bytes < sizeof h) return 0;
  memcpy(&h, base, sizeof h);
  return h.magic == SHM_MAGIC && h.nonce == nonce && h.size == (uint32_t)size &&
         h.slot == GR__SHM_SLOT && h.bytes == bytes && bytes == gr__shm_bytes(size);
}

gr__shm *gr__shm_new(void *base, size_t bytes, int rank, int size) {
  if (size < 1 || size > GR__SHM_MAX_RANKS || rank < 0 || rank >= size) return NULL;
  gr__shm *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->base = base;
  s->bytes = bytes;
  s->rank = rank;
  s->size = size;
  s->wait_rank = -1;
  s->spins = SPINS;
  s->spin_ns = SPIN_NS;
  s->pair_max = PAIR_SMALL_MAX;
  s->tmp_bytes = size == 2 ? CMA_TMP_BYTES_PAIR : CMA_TMP_BYTES;
  gr__shm_private_defaults(size, s->cross);
  gr__array_init(&s->wins, sizeof(struct shm_window));
  gr__array_init(&s->deferred, sizeof(void *));
  s->budget = -1;
  pthread_mutex_init(&s->lock, NULL);
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN); /* not this rank's affinity: a bound rank has one */
  if (ncpu > 0 && ncpu < size) {
    s->spins = SPINS_OVERSUBSCRIBED;
    s->spin_ns = 0;
  }
  atomic_store_explicit(pid_of(s->base, rank), (int32_t)getpid(), memory_order_relaxed);
  atomic_store_explicit(ctl(s, rank, CTL_BASE), (uint64_t)(uintptr_t)base, memory_order_relaxed);
  return s;
}

void gr__shm_own_mapping(gr__shm *s) { s->owns = 1; }
void gr__shm_name_ranks(gr__shm *s, const int *names) { s->names = names; }
static int name_of(const gr__shm *s, int q) { return s->names ? s->names[q] : q; }

void gr__shm_free(gr__shm *s) {
  if (!s) return;
  if (s->engine_on) gr__shm_engine_remove(s); /* the engine touches s no more */
  pthread_mutex_destroy(&s->lock);
  for (gr_list_node *n; (n = gr__list_pop_front(&s->all));)
    free(GR_LIST_ENTRY(n, op_box, all_node));
  if (s->owns) munmap(s->base, s->bytes);
  free(s->tmp);
  gr__array_free(&s->deferred);
  for (size_t i = 0; i < s->wins.count; i++)
    free(WIN(s, i).base);
  gr__array_free(&s->wins);
  free(s);
}

/* Reduce and alltoall run here while they are small (the small mode: one round, one
 * synchronisation, no syscall); larger ones run in MPI after an agreement round. Reduce: as the
 * small allreduce. Alltoall: up to A2A_SMALL_MAX bytes per rank, where the slot beats MPI; beyond,
 * Open MPI's single copy (CMA) point to point beats the two copies through the slot
 * (bench/README.md, "node-local shared memory"). */
#define A2A_SMALL_MAX 4096
static int small_here(const gr__shm *s, int kind, size_t count, gr_dtype t) {
  size_t es = gr__dtype_size(t), lim = s->size == 2 ? PAIR_SMALL_MAX : SMALL_MAX;
  if (!es) return 0;
  if (kind == GR__REDUCE) return count <= lim / es;
  if (kind == GR__ALLTOALL) return count <= A2A_SMALL_MAX / es / (size_t)s->size;
  return 0;
}

int gr__shm_takes(const gr__shm *s, int kind, size_t count, gr_dtype t) {
  return s && (kind == GR__ALLREDUCE || kind == GR__REDUCE_SCATTER || kind == GR__ALLGATHER ||
               kind == GR__BROADCAST || kind == GR__BARRIER || small_here(s, kind, count, t));
}

/* The collectives that run elsewhere: on the segment they only agree (gr_shm.h, Agreement). */
static int agreement_only(const gr__shm *s, const gr__shm_op *op) {
  return (op->kind == GR__REDUCE || op->kind == GR__ALLTOALL) &&
         !small_here(s, op->kind, op->count, op->dtype);
}
int gr__shm_gates(const gr__shm *s, int kind, size_t count, gr_dtype t) {
  return s && (kind == GR__REDUCE || kind == GR__ALLTOALL) && !small_here(s, kind, count, t);
}

int gr__shm_defer(gr__shm *s, void *item) {
  gr_array *d = &s->deferred;
  if (s->dfirst == d->count) s->dfirst = d->count = 0;
  if (d->count == d->cap && s->dfirst) { /* slide down before growing */
    memmove(d->data, &DEFERRED(s, s->dfirst), (d->count - s->dfirst) * sizeof(void *));
    d->count -= s->dfirst;
    s->dfirst = 0;
  }
  return gr__array_push(d, &item) == GR_OK;
}

void *gr__shm_deferred(const gr__shm *s) {
  return s->dfirst < s->deferred.count ? DEFERRED(s, s->dfirst) : NULL;
}

void gr__shm_undefer(gr__shm *s, void *item) {
  gr_array *d = &s->deferred;
  for (size_t i = s->dfirst; i < d->count; i++) {
    if (DEFERRED(s, i) != item) continue;
    memmove(&DEFERRED(s, i), &DEFERRED(s, i + 1), (d->count - i - 1) * sizeof(void *));
    d->count--;
    return;
  }
}

/* The caller's side of the lock. A caller that finds it taken (by the engine's pass) asks the pass
 * to stop at its next piece; the engine then leaves the segment alone until a caller has had it
 * (gr__shm_engine_pump). try: 0 when taken (the caller returns). A segment no request was ever
 * posted on is the caller's alone (the engine sees only registered ones, and registration happens
 * outside every locked stretch): no lock, so blocking calls pay nothing for the engine. */
static int lock_caller(gr__shm *s, int try) {
  if (!s->engine_on) return 1;
  if (pthread_mutex_trylock(&s->lock) != 0) {
    atomic_store_explicit(&s->caller_wants, 1, memory_order_relaxed);
    if (try) return 0;
    pthread_mutex_lock(&s->lock);
  }
  atomic_store_explicit(&s->caller_wants, 0, memory_order_relaxed);
  return 1;
}

static void unlock(gr__shm *s) {
  if (!s->engine_on) return;
  pthread_mutex_unlock(&s->lock);
  if (atomic_load_explicit(&s->engine_wants, memory_order_relaxed) &&
      atomic_exchange_explicit(&s->engine_wants, 0, memory_order_relaxed))
    gr__shm_engine_kick();
}

static gr_status post_locked(gr__shm *s, gr__shm_op **out, const gr__shm_op *call) {
  if (s->broken) return GR_ERR_ABORTED;
  gr_list_node *n = gr__list_pop_front(&s->spare);
  gr__shm_op *op = n ? OP_OF(n) : NULL;
  if (!op) {
    op_box *b = calloc(1, sizeof *b);
    if (!b) return GR_ERR_NOMEM;
    gr__list_push_back(&s->all, &b->all_node);
    op = &b->op;
  }
  *op = *call;
  op->state = 0;
  op->step = 0;
  op->pos = op->len = 0;
  op->mode = 0;
  op->sub = 0;
  op->peer = 0;
  op->reduced = 0;
  op->held = 0;
  op->scan = 0;
  op->direct = 0;
  op->win = s->wins.count > 0;
  if (!op->win) op->wtok[0] = op->wtok[1] = 0;
  op->failed = 0;
  op->why[0] = '\0';
  gr__list_push_back(&s->queue, &op->node);
  *out = op;
  return GR_OK;
}

gr_status gr__shm_post(gr__shm *s, gr__shm_op **out, const gr__shm_op *call) {
  lock_caller(s, 0);
  gr_status st = post_locked(s, out, call);
  unlock(s);
  return st;
}

/* ---- the rounds ---------------------------------------------------------------------------- */

static void raise_flag(gr__shm *s) {
  s->tick++;
  s->moves++;
  _Atomic uint64_t *f = flag(s, s->rank);
  atomic_store_explicit(f, s->tick, memory_order_release);
  /* store then load, against the sleeper's increment then load: one of the two sees the other */
  atomic_thread_fence(memory_order_seq_cst);
  if (atomic_load_explicit(waiters(s), memory_order_relaxed))
    syscall(SYS_futex, futex_word(f), FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static void sleep_on(gr__shm *s, int lag, uint64_t wait_for, long ns) {
  _Atomic uint64_t *f = flag(s, lag);
  atomic_fetch_add_explicit(waiters(s), 1, memory_order_relaxed);
  atomic_thread_fence(memory_order_seq_cst);
  uint64_t v = atomic_load_explicit(f, memory_order_relaxed);
  if (v < wait_for) {
    struct timespec ts = {0, ns};
    syscall(SYS_futex, futex_word(f), FUTEX_WAIT, (uint32_t)v, &ts, NULL, 0);
  }
  atomic_fetch_sub_explicit(waiters(s), 1, memory_order_relaxed);
}

/* Whether rank who (-1: every rank) has raised its counter to v; remembered for diagnostics. */
static int reached(gr__shm *s, uint64_t v, int who) {
  s->wait_for = v;
  s->wait_rank = who;
  s->lag = who;
  if (who >= 0) return atomic_load_explicit(flag(s, who), memory_order_acquire) >= v;
  for (int q = 0; q < s->size; q++)
    if (atomic_load_explicit(flag(s, q), memory_order_acquire) < v) {
      s->lag = q;
      return 0;
    }
  return 1;
}

/* Slice q of a round of len elements: [*off, *off + *n). */
static void slice(size_t len, int P, int q, size_t *off, size_t *n) {
  size_t base = len / (size_t)P, rem = len % (size_t)P, uq = (size_t)q;
  *off = uq * base + (uq < rem ? uq : rem);
  *n = base + (uq < rem);
}

/* ---- agreement on the call (gr_shm.h) --------------------------------------------------------- */

static _Atomic uint64_t *desc(const gr__shm *s, int q) {
  return ctl(s, q, CTL_DESC + 16 * (size_t)((s->rounds - 1) & 1));
}

/* The fields that decide the byte layout and the arithmetic, those a kind ignores zeroed, and the
 * round number (which agrees whenever the earlier calls did). */
static void describe(const gr__shm *s, const gr__shm_op *op, uint64_t d[2]) {
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
static void announce(gr__shm *s, const gr__shm_op *op) {
  if (op->pos) return;
  uint64_t d[2];
  describe(s, op, d);
  _Atomic uint64_t *p = desc(s, s->rank);
  atomic_store_explicit(&p[0], d[0], memory_order_relaxed);
  atomic_store_explicit(&p[1], d[1], memory_order_relaxed);
}

static void describe_text(char *b, size_t len, uint64_t d0, uint64_t d1) {
  int kind = (int)(d1 & 0xff);
  gr__strbuf sb;
  gr__strbuf_init_fixed(&sb, b, len);
  if (kind == GR__BARRIER) {
    gr__strbuf_appendf(&sb, "barrier()");
    return;
  }
  gr__strbuf_appendf(&sb, "%s(count=%llu, dtype=%s", gr__kind_name((gr__kind)kind),
                     (unsigned long long)d0, gr__dtype_name((gr_dtype)((d1 >> 8) & 0xff)));
  if (kind == GR__ALLREDUCE || kind == GR__REDUCE_SCATTER || kind == GR__REDUCE)
    gr__strbuf_appendf(&sb, ", op=%s", gr__op_name((gr_op)((d1 >> 16) & 0xff)));
  if (kind == GR__BROADCAST || kind == GR__REDUCE)
    gr__strbuf_appendf(&sb, ", root=%d", (int)((d1 >> 24) & 0xfff));
  gr__strbuf_putc(&sb, ')');
}

/* Whether rank q (who has raised in this round) describes the call as this rank does; 1 yes (or
 * not the call's first round), 0 no: op->why names both. Call before touching q's data. */
static int agrees(gr__shm *s, gr__shm_op *op, int q) {
  if (op->pos || q == s->rank) return 1;
  uint64_t mine[2];
  describe(s, op, mine);
  _Atomic uint64_t *p = desc(s, q);
  uint64_t d0 = atomic_load_explicit(&p[0], memory_order_relaxed);
  uint64_t d1 = atomic_load_explicit(&p[1], memory_order_relaxed);
  if (d0 == mine[0] && d1 == mine[1]) return 1;
  char a[96], b[96];
  describe_text(a, sizeof a, d0, d1);
  if ((d1 >> 36) & 0xf) { /* q refused its own arguments (gr_shm.h) */
    snprintf(op->why, sizeof op->why, "rank %d rejected its own arguments to %s: %s", q, a,
             gr__arg_name((int)((d1 >> 36) & 0xf)));
    op->failed = 2;
    return 0;
  }
  describe_text(b, sizeof b, mine[0], mine[1]);
  gr__strbuf sb;
  gr__strbuf_init_fixed(&sb, op->why, sizeof op->why);
  gr__strbuf_appendf(&sb, "rank %d called %s while rank %d called %s", name_of(s, q), a,
                     name_of(s, s->rank), b);
  if ((d1 >> 40) != (mine[1] >> 40))
    gr__strbuf_appendf(&sb, " (at shared-memory rounds %llu and %llu)",
                       (unsigned long long)(d1 >> 40), (unsigned long long)(mine[1] >> 40));
  op->failed = 1;
  return 0;
}

/* Every peer's descriptor (all have raised in this round). */
static int all_agree(gr__shm *s, gr__shm_op *op) {
  if (op->pos) return 1;
  for (int q = 0; q < s->size; q++)
    if (!agrees(s, op, q)) return 0;
  return 1;
}

/* Whether process pid has ended (a zombie included: its memory is gone). */
static int peer_gone(pid_t pid) {
  if (pid <= 0) return 0;
  if (kill(pid, 0) != 0) return errno == ESRCH;
  char path[64], buf[256];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *e = strrchr(buf, ')'); /* the state follows the command name, which may hold ')' */
  return e && e[1] == ' ' && (e[2] == 'Z' || e[2] == 'X');
}

/* Copy n bytes between local and the address remote in rank q's memory: read (write = 0) or
 * write. 1 done; 0 the peer's process is gone (wait: the deadline will name it); -1 another
 * failure (cma_errno). */
static int cma_copy_in(gr__shm *s, int q, void *local, uint64_t remote, size_t n, int write);
static int cma_copy(gr__shm *s, int q, void *local, uint64_t remote, size_t n, int write) {
  atomic_fetch_add(cma_gen(s, s->rank), 1); /* odd: inside */
  int rc;
  if (has_left(s, q)) { /* it gave up: its buffers are its program's again; wait, as for one gone */
    s->wait_rank = s->lag = q;
    s->wait_for = UINT64_MAX;
    rc = 0;
  } else {
    rc = cma_copy_in(s, q, local, remote, n, write);
  }
  atomic_fetch_add(cma_gen(s, s->rank), 1);
  return rc;
}

static int cma_copy_in(gr__shm *s, int q, void *local, uint64_t remote, size_t n, int write) {
  pid_t pid = (pid_t)atomic_load_explicit(pid_of(s->base, q), memory_order_relaxed);
  size_t done = 0;
  while (done < n) {
    struct iovec l = {(char *)local + done, n - done},
                 r = {(void *)(uintptr_t)(remote + done), n - done};
    ssize_t k =
        write ? process_vm_writev(pid, &l, 1, &r, 1, 0) : process_vm_readv(pid, &l, 1, &r, 1, 0);
    if (k < 0 && errno == EINTR) continue;
    /* gone (ESRCH), or dying: a process whose memory is being torn down fails with EFAULT. A
     * live peer's bad buffer would have failed in its own hands first. Either way: wait, and let
     * the deadline name who is gone. */
    if (k < 0 && (errno == ESRCH || errno == EFAULT || peer_gone(pid))) {
      s->wait_rank = s->lag = q;
      s->wait_for = UINT64_MAX;
      return 0;
    }
    if (k <= 0) {
      s->cma_errno = k < 0 ? errno : EFAULT;
      return -1;
    }
    done += (size_t)k;
  }
  return 1;
}
static int cma_read(gr__shm *s, int q, void *dst, uint64_t src, size_t n) {
  return cma_copy(s, q, dst, src, n, 0);
}
static int cma_write(gr__shm *s, int q, uint64_t dst, const void *src, size_t n) {
  return cma_copy(s, q, (void *)(uintptr_t)src, dst, n, 1);
}

int gr__shm_cma_errno(const gr__shm *s) { return s->cma_errno; }

int gr__shm_cma_probe(gr__shm *s) {
  if (s->size < 2) return 0;
  int q = (s->rank + 1) % s->size;
  uint64_t peer_base = atomic_load_explicit(ctl(s, q, CTL_BASE), memory_order_relaxed), magic = 0;
  if (!peer_base || cma_read(s, q, &magic, peer_base, sizeof magic) != 1) return 0;
  return magic == SHM_MAGIC;
}

int gr__shm_set_cma(gr__shm *s, int on) {
  s->cma = 0;
  if (!on || s->size < 2) return 1;
  free(s->tmp);
  s->tmp = malloc((size_t)(s->size - 1) * s->tmp_bytes);
  s->cma = s->tmp != NULL;
  return s->cma;
}

static void publish(gr__shm *s, const void *send, const void *recv) {
  atomic_store_explicit(ctl(s, s->rank, CTL_SEND), (uint64_t)(uintptr_t)send, memory_order_relaxed);
  atomic_store_explicit(ctl(s, s->rank, CTL_RECV), (uint64_t)(uintptr_t)recv, memory_order_relaxed);
}
static uint64_t peer_addr(const gr__shm *s, int q, size_t field) {
  return atomic_load_explicit(ctl(s, q, field), memory_order_relaxed);
}

/* ---- windows ------------------------------------------------------------------------------- */

int gr__shm_window_add(gr__shm *s, uint64_t token, void *const *base, const size_t *bytes) {
  if (!token) return 0;
  /* one allocation: the bases, then the sizes */
  unsigned char **b = malloc((size_t)s->size * (sizeof *b + sizeof(size_t)));
  if (!b) return 0;
  size_t *n = (size_t *)(void *)(b + s->size);
  for (int q = 0; q < s->size; q++) {
    b[q] = base[q];
    n[q] = bytes[q];
  }
  lock_caller(s, 0);
  struct shm_window w = {token, b, n};
  int ok = gr__array_push(&s->wins, &w) == GR_OK;
  unlock(s);
  if (!ok) free(b);
  return ok;
}

void gr__shm_window_remove(gr__shm *s, uint64_t token) {
  lock_caller(s, 0);
  for (size_t i = 0; i < s->wins.count; i++)
    if (WIN(s, i).token == token) {
      free(WIN(s, i).base);
      WIN(s, i) = WIN(s, s->wins.count - 1);
      s->wins.count--;
      break;
    }
  unlock(s);
}

int gr__shm_windows(const gr__shm *s) { return s ? (int)s->wins.count : 0; }

uint64_t gr__shm_window_of(const gr__shm *s, const void *p, size_t bytes, size_t *off) {
  uintptr_t a = (uintptr_t)p;
  for (size_t i = 0; s && p && i < s->wins.count; i++) {
    uintptr_t b = (uintptr_t)WIN(s, i).base[s->rank];
    size_t n = WIN(s, i).bytes[s->rank];
    if (a >= b && a - b <= n && bytes <= n - (a - b)) {
      *off = (size_t)(a - b);
      return WIN(s, i).token;
    }
  }
  return 0;
}

/* Rank q's bytes at offset off of its region of window token, in this rank's mapping, if all of
 * [off, off + n) lies in that region; NULL otherwise (a token this rank does not hold, a range
 * past the region's end). */
static unsigned char *window_at(const gr__shm *s, int q, uint64_t token, uint64_t off, size_t n) {
  for (size_t i = 0; token && i < s->wins.count; i++)
    if (WIN(s, i).token == token)
      return off <= WIN(s, i).bytes[q] && n <= WIN(s, i).bytes[q] - off ? WIN(s, i).base[q] + off
                                                                        : NULL;
  return NULL;
}

/* Rank q's send (which 0) or recv (1) buffer of the current call in this rank's mapping (the
 * first round checked that it is there, window_verdict). */
static unsigned char *peer_buf(const gr__shm *s, int q, int which) {
  if (q == s->rank) return NULL;
  uint64_t tok =
      atomic_load_explicit(ctl(s, q, which ? CTL_WR_TOK : CTL_WS_TOK), memory_order_relaxed);
  uint64_t off =
      atomic_load_explicit(ctl(s, q, which ? CTL_WR_OFF : CTL_WS_OFF), memory_order_relaxed);
  return window_at(s, q, tok, off, 0);
}

static void publish_windows(gr__shm *s, const gr__shm_op *op) {
  atomic_store_explicit(ctl(s, s->rank, CTL_WS_TOK), op->wtok[0], memory_order_relaxed);
  atomic_store_explicit(ctl(s, s->rank, CTL_WS_OFF), op->woff[0], memory_order_relaxed);
  atomic_store_explicit(ctl(s, s->rank, CTL_WR_TOK), op->wtok[1], memory_order_relaxed);
  atomic_store_explicit(ctl(s, s->rank, CTL_WR_OFF), op->woff[1], memory_order_relaxed);
}

/* Chunk c of a single-copy allreduce: elements [*lo, *lo + *len). Each chunk holds one slice of
 * at most tmp_bytes per rank, so a rank's slice of it is one read per peer into its tmp block
 * and the result a peer copies back is still in cache (L2, or the shared L3) when it does. */
static size_t cma_chunk_elems(const gr__shm *s, size_t es) {
  return (size_t)s->size * (s->tmp_bytes / es);
}
static size_t cma_chunks(const gr__shm *s, const gr__shm_op *op) {
  size_t ce = cma_chunk_elems(s, gr__dtype_size(op->dtype));
  return (op->count + ce - 1) / ce;
}
static void cma_chunk(const gr__shm *s, const gr__shm_op *op, size_t c, size_t *lo, size_t *len) {
  size_t ce = cma_chunk_elems(s, gr__dtype_size(op->dtype));
  *lo = c * ce;
  *len = op->count - *lo < ce ? op->count - *lo : ce;
}

/* Whether this pass may do one more piece of work (a chunk, a piece, a round); counts it. */
static int spend(gr__shm *s) {
  if (s->engine_pass && atomic_load_explicit(&s->caller_wants, memory_order_relaxed)) return 0;
  if (s->budget < 0) return 1;
  if (!s->budget) return 0;
  s->budget--;
  return 1;
}

/* Chunk claims (CTL_CLAIM): rank q's word holds the round number of its current call and the next
 * piece of its slices nobody has claimed; piece u is piece u % pieces(s) of q's slice of chunk
 * u / pieces(s). A claim is a compare-and-swap below the call's number of pieces, tagged with the
 * round that the claiming rank is in, so a rank still in an earlier call, or one that finished,
 * never takes a piece of a later call. A bounded pass claims one piece, any other the rest of the
 * chunk: [*u0, *u1). */
static size_t pieces(const gr__shm *s) { return s->tmp_bytes / TEST_PIECE; }
static uint64_t claim_tag(const gr__shm *s) { return (uint64_t)(uint32_t)s->rounds << 32; }
static int claim(gr__shm *s, int q, size_t units, size_t *u0, size_t *u1) {
  _Atomic uint64_t *w = ctl(s, q, CTL_CLAIM);
  uint64_t v = atomic_load_explicit(w, memory_order_relaxed);
  for (;;) {
    size_t at = (size_t)(v & UINT32_MAX);
    if ((v & ~(uint64_t)UINT32_MAX) != claim_tag(s) || at >= units) return 0;
    size_t to = s->bounded ? at + 1 : (at / pieces(s) + 1) * pieces(s);
    if (to > units) to = units;
    if (atomic_compare_exchange_weak_explicit(w, &v, claim_tag(s) | (uint64_t)to,
                                              memory_order_relaxed, memory_order_relaxed)) {
      *u0 = at;
      *u1 = to;
      return 1;
    }
  }
}

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
  size_t rs = size == 2 ? CMA_REDUCE_SCATTER_MAX_PAIR : CMA_REDUCE_SCATTER_MAX;
  cross[0] = size == 2 ? CMA_ALLREDUCE_MAX_PAIR : CMA_ALLREDUCE_MAX;
  cross[1] = (rs + p - 1) / p; /* bytes * size < rs, per block */
  cross[2] = cross[3] = SIZE_MAX;
}

void gr__shm_set_private(gr__shm *s, int mode, const size_t cross[GR__SHM_PRIVATE_KINDS]) {
  s->priv = mode;
  for (int k = 0; k < GR__SHM_PRIVATE_KINDS; k++)
    s->cross[k] = cross[k];
}

void gr__shm_set_pair_max(gr__shm *s, size_t bytes) { s->pair_max = bytes; }

size_t gr__shm_pair_max_default(void) { return PAIR_SMALL_MAX; }

int gr__shm_private(const gr__shm *s, size_t cross[GR__SHM_PRIVATE_KINDS]) {
  for (int k = 0; cross && k < GR__SHM_PRIVATE_KINDS; k++)
    cross[k] = s->cross[k];
  return s->priv;
}

/* Whether single copy suits a call of this kind moving `bytes` per rank: from CMA_MIN, and below
 * the kind's crossover unless GPURUN_SHM_PRIVATE forced a side (agreed: the same on every rank). */
static int single_copy_suits(const gr__shm *s, int kind, size_t bytes) {
  if (bytes < CMA_MIN) return 0;
  if (s->priv == GR_SHM_PRIVATE_SINGLE) return 1;
  if (s->priv == GR_SHM_PRIVATE_SLOTS) return 0;
  int k = gr__shm_private_kind(kind);
  return k >= 0 && bytes < s->cross[k];
}

/* The mode of a call whose peers' buffers are not in windows (the same on every rank): 0 when no
 * data moves here (barrier, a refusal, an agreement round). */
static int plain_mode(const gr__shm *s, const gr__shm_op *op) {
  size_t es = gr__dtype_size(op->dtype);
  if (op->kind == GR__BARRIER || op->refused || agreement_only(s, op)) return 0;
  if (op->kind == GR__REDUCE || op->kind == GR__ALLTOALL) return MODE_SMALL;
  if (op->kind == GR__ALLREDUCE && s->size == 2 && op->count * es <= s->pair_max) return MODE_SMALL;
  if (s->cma && op->count >= (size_t)s->size && single_copy_suits(s, op->kind, op->count * es))
    return MODE_CMA;
  if (op->kind == GR__ALLREDUCE)
    return op->count * es <= SMALL_MAX || op->count < (size_t)s->size ? MODE_SMALL : MODE_LARGE;
  return 0; /* reduce-scatter, allgather, broadcast: rounds through the slots */
}

/* Whether a call may run direct in the windows, if every rank's buffers lie in them: it then
 * starts with the single copy's first step (publish, raise) on every rank. */
static int window_fits(const gr__shm *s, const gr__shm_op *op) {
  if (!op->win || op->refused) return 0;
  size_t bytes = op->count * gr__dtype_size(op->dtype);
  switch (op->kind) {
  case GR__ALLREDUCE:
    return bytes >= WIN_MIN && op->count >= (size_t)s->size;
  case GR__REDUCE_SCATTER:
  case GR__ALLGATHER:
  case GR__BROADCAST:
    return bytes >= WIN_MIN;
  default:
    return 0;
  }
}

static _Atomic uint64_t direct_calls;      /* gr__shm_direct_calls */
static _Atomic uint64_t single_copy_calls; /* gr__shm_single_copy_calls */

/* After the first round's agreement, from every rank's published windows (the same data and the
 * same windows on every rank, so the same verdict): 1 with op->direct set (1 every buffer the call
 * reads or writes in a peer lies in a window, 0 the call goes on through process_vm_readv, the
 * mode it would have had anyway); -3 neither: the call starts again in the mode it would have had
 * (plain_mode), in fresh rounds (the counters agree: each rank raised once). */
static int window_verdict(gr__shm *s, gr__shm_op *op) {
  size_t n = op->count * gr__dtype_size(op->dtype), all = n * (size_t)s->size;
  size_t need[2] = {0, 0}; /* bytes of every rank's send and recv the peers reach */
  switch (op->kind) {
  case GR__ALLREDUCE:
    need[0] = need[1] = n;
    break;
  case GR__REDUCE_SCATTER:
    need[0] = all;
    break;
  case GR__ALLGATHER:
    need[1] = all;
    break;
  default: /* broadcast: the root's send */
    need[0] = n;
    break;
  }
  int direct = 1;
  for (int q = 0; q < s->size && direct; q++)
    for (int w = 0; w < 2 && direct; w++) {
      if (!need[w] || (op->kind == GR__BROADCAST && q != op->root)) continue;
      uint64_t tok =
          atomic_load_explicit(ctl(s, q, w ? CTL_WR_TOK : CTL_WS_TOK), memory_order_relaxed);
      uint64_t off =
          atomic_load_explicit(ctl(s, q, w ? CTL_WR_OFF : CTL_WS_OFF), memory_order_relaxed);
      direct = window_at(s, q, tok, off, need[w]) != NULL;
    }
  if (direct || plain_mode(s, op) == MODE_CMA) {
    op->direct = direct;
    atomic_fetch_add_explicit(direct ? &direct_calls : &single_copy_calls, 1, memory_order_relaxed);
    return 1;
  }
  return -3;
}

uint64_t gr__shm_direct_calls(void) {
  return atomic_load_explicit(&direct_calls, memory_order_relaxed);
}

uint64_t gr__shm_single_copy_calls(void) {
  return atomic_load_explicit(&single_copy_calls, memory_order_relaxed);
}

/* The steps return 1 done, 0 waiting, -1 failed. A step resumes where a wait stopped it (op->sub:
 * the peer or block it got to), so nothing is read or reduced twice.
 *
 * Allreduce, in chunks that any rank may reduce: raise once the addresses are published (counter =
 * first) and wait for every rank's; then claim pieces (CTL_CLAIM), this rank's own slices first,
 * then each peer's in turn, until none is left. A claimed range, a part of rank q's slice of chunk
 * c, is read from every other rank's send buffer (one process_vm_readv per peer, into a tmp block
 * that stays in L2), reduced with this rank's own in rank order into this rank's recv, and written
 * from there into every peer's recv (one process_vm_writev per peer, from the block just written,
 * still in cache). The per-element order of the reduction is rank order whoever does it, so the
 * result is the same bit for bit; a rank that computes while its peers wait has its share done by
 * them, its buffers read and written by their syscalls. Nothing else orders the chunks. A rank
 * raises (first + 1) once it can claim nothing more and its last range is written, and the call
 * ends when every rank has: every piece is then in every recv, and nobody touches my buffers any
 * more. A bounded pass (a request's gr_test) claims one piece of TEST_PIECE bytes, reads and
 * reduces it and returns; the next writes it out (one syscall per peer and pass).
 * Safe in place: a piece of every send is read only by the rank that claimed it, before it writes
 * the result there. */
static int cma_allreduce(gr__shm *s, gr__shm_op *op) {
  int P = s->size, r = s->rank, rc;
  size_t es = gr__dtype_size(op->dtype), off, n, lo, len, units = cma_chunks(s, op) * pieces(s);
  size_t pe = TEST_PIECE / es; /* elements per piece */
  const char *send = op->send;
  char *recv = op->recv;
  const void *in[GR__SHM_MAX_RANKS];
  if (op->step == 1) {
    if (!reached(s, s->ready, -1)) return 0; /* the descriptor's place is free */
    publish(s, send, recv);
    if (op->win) publish_windows(s, op);
    atomic_store_explicit(ctl(s, r, CTL_CLAIM), claim_tag(s), memory_order_relaxed);
    announce(s, op);
    raise_flag(s);
    op->step = 2;
    op->sub = 0;
    op->peer = 0;
    op->held = 0;
    op->scan = 0;
  }
  if (op->step == 2) { /* every peer published: check the call before touching its data */
    if (!reached(s, s->first, -1)) return 0;
    if (!all_agree(s, op)) return -2;
    if (op->direct < 0 && (rc = window_verdict(s, op)) < 0) return rc;
    op->step = 3;
  }
  if (op->step == 3) {
    for (;;) {
      int fresh = !op->held;
      if (fresh) {
        if (!s->budget) return 0;        /* this pass's share is done: claim nothing to sit on */
        for (; op->scan < P; op->scan++) /* an exhausted word stays exhausted */
          if (claim(s, (r + op->scan) % P, units, &op->u0, &op->u1)) {
            op->held = 1;
            op->owner = (r + op->scan) % P;
            if (s->budget > 0) s->budget--;
            break;
          }
        if (!op->held) break;
      } else if (!spend(s)) { /* the rest of a range claimed in an earlier pass: one more piece */
        return 0;
      }
      size_t np = pieces(s), c = op->u0 / np, e0 = op->u0 % np * pe, e1 = (op->u1 - c * np) * pe;
      cma_chunk(s, op, c, &lo, &len);
      slice(len, P, op->owner, &off, &n);
      if (e1 > n) e1 = n;
      size_t m = e1 > e0 ? (e1 - e0) * es : 0, at = (lo + off + e0) * es;
      if (m && op->direct) { /* the peers' buffers in this rank's mapping: loads and stores */
        for (int i = 0; i < P; i++)
          in[i] = i == r ? (const void *)(send + at) : peer_buf(s, i, 0) + at;
        gr__shm_reduce(op->dtype, op->op, in, P, recv + at, peer_buf(s, (r + 1) % P, 1) + at,
                       m / es);
        for (int i = 2; i < P; i++) /* start after me, so that the ranks write different peers */
          memcpy(peer_buf(s, (r + i) % P, 1) + at, recv + at, m);
        op->peer = P;
      }
      if (m &&
          !op->peer) { /* read and reduce, unless a write to a vanished peer stopped us after */
        for (op->sub = op->sub ? op->sub : 1; op->sub < P; op->sub++) {
          int q = (r + op->sub) % P; /* op->sub 0 is me: nothing to read */
          unsigned char *into = s->tmp + (size_t)(op->sub - 1) * s->tmp_bytes;
          if ((rc = cma_read(s, q, into, peer_addr(s, q, CTL_SEND) + at, m)) != 1) return rc;
        }
        for (int i = 0; i < P; i++) { /* rank order, as every path reduces */
          int t = (i - r + P) % P;
          in[i] = t == 0 ? (const void *)(send + at) : s->tmp + (size_t)(t - 1) * s->tmp_bytes;
        }
        gr__shm_reduce(op->dtype, op->op, in, P, recv + at, NULL, m / es);
        op->peer = 1;
        if (s->bounded) return 0; /* a bounded pass makes one syscall per peer: writes next */
      }
      /* start after me, so that the ranks write different peers */
      for (; m && op->peer < P; op->peer++) {
        int q = (r + op->peer) % P;
        if ((rc = cma_write(s, q, peer_addr(s, q, CTL_RECV) + at, recv + at, m)) != 1) return rc;
      }
      s->moves++;
      op->sub = 0;
      op->peer = 0;
      op->held = 0;
    }
    raise_flag(s);
    op->step = 4;
  }
  return reached(s, s->first + 1, -1); /* nobody touches my buffers any more */
}

static int cma_reduce_scatter(gr__shm *s, gr__shm_op *op) {
  int P = s->size, r = s->rank, rc;
  size_t es = gr__dtype_size(op->dtype), per = s->tmp_bytes / es, blk = op->count * es;
  const char *send = op->send;
  const void *in[GR__SHM_MAX_RANKS];
  if (op->step == 1) {
    if (!reached(s, s->ready, -1)) return 0;
    publish(s, send, op->recv);
    if (op->win) publish_windows(s, op);
    announce(s, op);
    raise_flag(s);
    op->step = 2;
    op->sub = 0;
  }
  if (op->step == 2) {
    if (!reached(s, s->first, -1)) return 0;
    if (!op->sub && !all_agree(s, op)) return -2;
    if (op->direct < 0 && (rc = window_verdict(s, op)) < 0) return rc;
    for (size_t b = (size_t)op->sub * per; b < op->count; b += per, op->sub++) {
      if (!spend(s)) return 0;
      size_t m = op->count - b < per ? op->count - b : per, at = (size_t)r * blk + b * es;
      for (int q = 0, t = 0; q < P; q++) {
        if (q == r || op->direct) {
          in[q] = q == r ? (const void *)(send + at) : peer_buf(s, q, 0) + at;
          continue;
        }
        unsigned char *into = s->tmp + (size_t)t++ * s->tmp_bytes;
        if ((rc = cma_read(s, q, into, peer_addr(s, q, CTL_SEND) + at, m * es)) != 1) return rc;
        in[q] = into;
      }
      gr__shm_reduce(op->dtype, op->op, in, P, (char *)op->recv + b * es, NULL, m);
    }
    raise_flag(s);
    op->step = 3;
  }
  return reached(s, s->first + 1, -1);
}

/* Allgather: publish, raise; copy my block into my recv (in pieces of CMA_PIECE bytes); once every
 * rank published, write each piece into every peer's recv (process_vm_writev) right after copying
 * it locally, while it is still in my cache: my send is read from memory once, where a peer's read
 * of it would be a second pass (and from another core's cache or memory). Raise, and wait for
 * every rank's raise: my recv is complete, and nobody touches my buffers any more. */
#define CMA_PIECE (256 * 1024)
static int cma_allgather(gr__shm *s, gr__shm_op *op) {
  int P = s->size, r = s->rank, rc;
  size_t blk = op->count * gr__dtype_size(op->dtype), mine = (size_t)r * blk;
  const char *send = op->send;
  char *recv = op->recv;
  if (op->step == 1) {
    if (!reached(s, s->ready, -1)) return 0;
    publish(s, send, recv);
    if (op->win) publish_windows(s, op);
    announce(s, op);
    raise_flag(s);
    op->step = 2;
    op->sub = 0;  /* pieces written to every peer */
    op->peer = 0; /* 0: the piece not copied locally yet, else the next peer written */
  }
  if (op->step == 2) { /* every peer published: check the call before touching its memory */
    if (!reached(s, s->first, -1)) return 0;
    if (!all_agree(s, op)) return -2;
    if (op->direct < 0 && (rc = window_verdict(s, op)) < 0) return rc;
    op->step = 3;
  }
  if (op->step == 3) {
    for (size_t at = (size_t)op->sub * CMA_PIECE; at < blk; at += CMA_PIECE, op->sub++) {
      size_t m = blk - at < CMA_PIECE ? blk - at : CMA_PIECE;
      if (!op->peer) {
        if (!spend(s)) return 0;
        if (send != recv + mine) memcpy(recv + mine + at, send + at, m);
        op->peer = 1;
      }
      /* start after me, so that the ranks write different peers */
      for (; op->peer < P; op->peer++) {
        int q = (r + op->peer) % P;
        if (op->direct)
          memcpy(peer_buf(s, q, 1) + mine + at, send + at, m);
        else if ((rc = cma_write(s, q, peer_addr(s, q, CTL_RECV) + mine + at, send + at, m)) != 1)
          return rc;
        s->moves++;
      }
      op->peer = 0;
    }
    raise_flag(s);
    op->step = 4;
  }
  return reached(s, s->first + 1, -1);
}

static int cma_broadcast(gr__shm *s, gr__shm_op *op) {
  size_t bytes = op->count * gr__dtype_size(op->dtype);
  int rc;
  if (op->step == 1) {
    if (!reached(s, s->ready, -1)) return 0;
    publish(s, op->send, op->recv);
    if (op->win) publish_windows(s, op);
    announce(s, op);
    raise_flag(s); /* the root: its data is there; the others: they are here */
    op->step = 2;
    op->sub = 0; /* pieces of CMA_PIECE bytes copied (the root) or read (the others) */
  }
  if (op->step == 2) { /* every rank checks every descriptor, the root too: all give one verdict */
    if (!reached(s, s->first, -1)) return 0;
    if (!op->sub && !all_agree(s, op)) return -2;
    if (op->direct < 0 && (rc = window_verdict(s, op)) < 0) return rc;
    for (size_t at = (size_t)op->sub * CMA_PIECE; at < bytes; at += CMA_PIECE, op->sub++) {
      size_t m = bytes - at < CMA_PIECE ? bytes - at : CMA_PIECE;
      if (!spend(s)) return 0;
      if (s->rank == op->root) {
        if (op->send != op->recv) memcpy((char *)op->recv + at, (const char *)op->send + at, m);
      } else if (op->direct) {
        memcpy((char *)op->recv + at, peer_buf(s, op->root, 0) + at, m);
      } else if ((rc = cma_read(s, op->root, (char *)op->recv + at,
                                peer_addr(s, op->root, CTL_SEND) + at, m)) != 1) {
        return rc;
      }
      s->moves++;
    }
    op->step = 3;
  }
  if (op->step == 3) {
    raise_flag(s);
    op->step = 4;
  }
  return reached(s, s->first + 1, -1);
}

static void begin_round(gr__shm *s) {
  s->ready = s->first;
  s->first = s->tick + 1;
  s->rounds++;
}

/* Elements per round, per block. */
static size_t round_elems(const gr__shm *s, const gr__shm_op *op) {
  size_t es = gr__dtype_size(op->dtype);
  if (op->mode == MODE_CMA) return op->count;
  switch (op->kind) {
  case GR__REDUCE_SCATTER:
    return GR__SHM_SLOT / (size_t)s->size / es;
  case GR__ALLREDUCE:
    return GR__SHM_SLOT / es; /* small: one round unless two ranks (pair_max) */
  case GR__REDUCE:
  case GR__ALLTOALL:
    return op->count; /* small_here: one round */
  default:
    return GR__SHM_SLOT / es;
  }
}

static int allreduce_step(gr__shm *s, gr__shm_op *op) {
  int P = s->size, r = s->rank;
  size_t es = gr__dtype_size(op->dtype), at = op->pos * es;
  const char *send = op->send;
  char *recv = op->recv;
  const void *in[GR__SHM_MAX_RANKS];
  if (op->mode == MODE_SMALL) {
    if (op->step == 1) {
      if (!reached(s, s->ready, -1)) return 0;
      memcpy(place(s, r, op->len * es), send + at, op->len * es);
      announce(s, op);
      raise_flag(s);
      op->step = 2;
    }
    if (!reached(s, s->first, -1)) return 0;
    if (!all_agree(s, op)) return -2;
    for (int q = 0; q < P; q++)
      in[q] = q == r ? (const void *)(send + at) : place(s, q, op->len * es);
    gr__shm_reduce(op->dtype, op->op, in, P, recv + at, NULL, op->len);
    return 1;
  }
  size_t off, n;
  if (op->step == 1) {
    if (!reached(s, s->ready, -1)) return 0;
    unsigned char *mine = slot(s, r);
    for (int q = 0; q < P; q++) {
      if (q == r) continue;
      slice(op->len, P, q, &off, &n);
      memcpy(mine + off * es, send + at + off * es, n * es);
    }
    announce(s, op);
    raise_flag(s);
    op->step = 2;
  }
  if (op->step == 2) {
    if (!reached(s, s->first, -1)) return 0;
    if (!all_agree(s, op)) return -2;
    slice(op->len, P, r, &off, &n);
    for (int q = 0; q < P; q++)
      in[q] = q == r ? (const void *)(send + at + off * es) : slot(s, q) + off * es;
    gr__shm_reduce(op->dtype, op->op, in, P, recv + at + off * es, slot(s, r) + off * es, n);
    raise_flag(s);
    op->step = 3;
  }
  if (!reached(s, s->first + 1, -1)) return 0;
  for (int i = 1; i < P; i++) { /* start after me, so that the ranks read different slots */
    int q = (r + i) % P;
    slice(op->len, P, q, &off, &n);
    memcpy(recv + at + off * es, slot(s, q) + off * es, n * es);
  }
  return 1;
}

static int reduce_scatter_step(gr__shm *s, gr__shm_op *op) {
  int P = s->size, r = s->rank;
  size_t es = gr__dtype_size(op->dtype), sub = round_elems(s, op) * es, at = op->pos * es;
  size_t blk = op->count * es;
  const char *send = op->send;
  const void *in[GR__SHM_MAX_RANKS];
  if (op->step == 1) {
    if (!reached(s, s->ready, -1)) return 0;
    unsigned char *mine = slot(s, r);
    for (int q = 0; q < P; q++)
      if (q != r) memcpy(mine + (size_t)q * sub, send + (size_t)q * blk + at, op->len * es);
    announce(s, op);
    raise_flag(s);
    op->step = 2;
  }
  if (!reached(s, s->first, -1)) return 0;
  if (!all_agree(s, op)) return -2;
  for (int q = 0; q < P; q++)
    in[q] = q == r ? (const void *)(send + (size_t)r * blk + at) : slot(s, q) + (size_t)r * sub;
  gr__shm_reduce(op->dtype, op->op, in, P, (char *)op->recv + at, NULL, op->len);
  return 1;
}

static int allgather_step(gr__shm *s, gr__shm_op *op) {
  int P = s->size, r = s->rank;
  size_t es = gr__dtype_size(op->dtype), at = op->pos * es, blk = op->count * es;
  char *recv = op->recv;
  if (op->step == 1) {
    if (!reached(s, s->ready, -1)) return 0;
    memcpy(place(s, r, op->len * es), (const char *)op->send + at, op->len * es);
    announce(s, op);
    raise_flag(s);
    if (op->send != recv + (size_t)r * blk)
      memcpy(recv + (size_t)r * blk + at, (const char *)op->send + at, op->len * es);
    op->step = 2;
    op->sub = 1;
  }
  for (; op->sub < P; op->sub++) { /* each peer's block as soon as it is there */
    int q = (r + op->sub) % P;
    if (!reached(s, s->first, q)) return 0;
    if (!agrees(s, op, q)) return -2;
    memcpy(recv + (size_t)q * blk + at, place(s, q, op->len * es), op->len * es);
    s->moves++;
  }
  return 1;
}

static int broadcast_step(gr__shm *s, gr__shm_op *op) {
  size_t es = gr__dtype_size(op->dtype), at = op->pos * es;
  if (s->rank == op->root) {
    if (op->step == 1) {
      if (!reached(s, s->ready, -1)) return 0;
      memcpy(place(s, op->root, op->len * es), (const char *)op->send + at, op->len * es);
      announce(s, op);
      raise_flag(s);
      if (op->send != op->recv)
        memcpy((char *)op->recv + at, (const char *)op->send + at, op->len * es);
      op->step = 2;
    }
    /* the first round: the root, too, waits for every descriptor, so that all ranks agree */
    if (op->pos) return 1;
    if (!reached(s, s->first, -1)) return 0;
    return all_agree(s, op) ? 1 : -2;
  }
  if (op->step == 1) {
    /* the first round writes a descriptor: its place must be free, as a buffer's */
    if (!op->pos && !reached(s, s->ready, -1)) return 0;
    announce(s, op);
    raise_flag(s); /* this rank is done with the previous round */
    op->step = 2;
  }
  if (!reached(s, s->first, op->pos ? op->root : -1)) return 0;
  if (!all_agree(s, op)) return -2;
  memcpy((char *)op->recv + at, place(s, op->root, op->len * es), op->len * es);
  return 1;
}

/* A refusing rank: the first round's shape of every kind (descriptor, one raise, a wait for every
 * rank's), no data; the call fails here on this rank whatever the others' descriptors say. */
static int refused_step(gr__shm *s, gr__shm_op *op) {
  if (op->step == 1) {
    if (!reached(s, s->ready, -1)) return 0;
    announce(s, op);
    raise_flag(s);
    op->step = 2;
  }
  if (!reached(s, s->first, -1)) return 0;
  if (all_agree(s, op)) snprintf(op->why, sizeof op->why, "this rank refused its own arguments");
  op->failed = 2;
  return -2;
}

/* Reduce (small_here): every rank's input in its slot, one synchronisation, the root reduces them
 * all (rank order) into recv. A non-root is done once it has seen every descriptor: its slot is
 * rewritten two rounds later only, after the root has started the next round. */
static int reduce_step(gr__shm *s, gr__shm_op *op) {
  int P = s->size, r = s->rank;
  size_t es = gr__dtype_size(op->dtype);
  const void *in[GR__SHM_MAX_RANKS];
  if (op->step == 1) {
    if (!reached(s, s->ready, -1)) return 0;
    if (r != op->root) memcpy(place(s, r, op->count * es), op->send, op->count * es);
    announce(s, op);
    raise_flag(s);
    op->step = 2;
  }
  if (!reached(s, s->first, -1)) return 0;
  if (!all_agree(s, op)) return -2;
  if (r != op->root) return 1;
  for (int q = 0; q < P; q++)
    in[q] = q == r ? op->send : (const void *)place(s, q, op->count * es);
  gr__shm_reduce(op->dtype, op->op, in, P, op->recv, NULL, op->count);
  return 1;
}

/* Alltoall (small_here): every rank's P blocks in its slot, one synchronisation, then block r of
 * every peer's slot. In place is safe: the input is in the slot before recv is written. */
static int alltoall_step(gr__shm *s, gr__shm_op *op) {
  int P = s->size, r = s->rank;
  size_t blk = op->count * gr__dtype_size(op->dtype);
  const char *send = op->send;
  char *recv = op->recv;
  if (op->step == 1) {
    if (!reached(s, s->ready, -1)) return 0;
    memcpy(place(s, r, (size_t)P * blk), send, (size_t)P * blk);
    announce(s, op);
    raise_flag(s);
    op->step = 2;
  }
  if (!reached(s, s->first, -1)) return 0;
  if (!all_agree(s, op)) return -2;
  for (int i = 0; i < P; i++) { /* start after me, so that the ranks read different slots */
    int q = (r + i) % P;
    memcpy(recv + (size_t)q * blk, place(s, q, (size_t)P * blk) + (size_t)r * blk, blk);
  }
  return 1;
}

static int barrier_step(gr__shm *s, gr__shm_op *op) {
  if (op->step == 1) {
    if (!reached(s, s->ready, -1)) return 0; /* the descriptor's place is free */
    announce(s, op);
    raise_flag(s);
    op->step = 2;
  }
  if (!reached(s, s->first, -1)) return 0;
  return all_agree(s, op) ? 1 : -2;
}

/* Run op as far as it goes; 1 when it finished, -1 when it failed (cma_errno), -2 when the ranks
 * disagree on what it is (op->why). */
static int advance(gr__shm *s, gr__shm_op *op) {
  for (;;) {
    if (op->step == 0) {
      if (op->state == 0) {
        op->state = 1;
        op->pos = 0;
        if (window_fits(s, op)) {
          op->mode = MODE_CMA; /* its first step; the first round decides how it reaches peers */
          op->direct = -1;
        } else {
          op->mode = plain_mode(s, op);
          if (op->mode == MODE_CMA)
            atomic_fetch_add_explicit(&single_copy_calls, 1, memory_order_relaxed);
        }
        if (op->kind == GR__BARRIER || op->refused || agreement_only(s, op)) {
          begin_round(s);
          op->step = 1;
          continue;
        }
      } else {
        op->pos += op->len;
      }
      if (op->kind == GR__BARRIER || agreement_only(s, op) || op->pos >= op->count) return 1;
      size_t m = round_elems(s, op);
      op->len = op->count - op->pos < m ? op->count - op->pos : m;
      begin_round(s);
      op->step = 1;
    }
    int fin;
    if (op->refused)
      fin = refused_step(s, op);
    else if (op->mode == MODE_CMA) {
      switch (op->kind) {
      case GR__ALLREDUCE:
        fin = cma_allreduce(s, op);
        break;
      case GR__REDUCE_SCATTER:
        fin = cma_reduce_scatter(s, op);
        break;
      case GR__ALLGATHER:
        fin = cma_allgather(s, op);
        break;
      default:
        fin = cma_broadcast(s, op);
        break;
      }
    } else
      switch (op->kind) {
      case GR__ALLREDUCE:
        fin = allreduce_step(s, op);
        break;
      case GR__REDUCE_SCATTER:
        fin = reduce_scatter_step(s, op);
        break;
      case GR__ALLGATHER:
        fin = allgather_step(s, op);
        break;
      case GR__BROADCAST:
        fin = broadcast_step(s, op);
        break;
      case GR__REDUCE:
        fin = op->mode ? reduce_step(s, op) : barrier_step(s, op);
        break;
      case GR__ALLTOALL:
        fin = op->mode ? alltoall_step(s, op) : barrier_step(s, op);
        break;
      default:
        fin = barrier_step(s, op);
        break;
      }
    if (fin == -3) { /* not every buffer in a window, no single copy: again, through the slots */
      op->win = 0;   /* window_fits no longer: plain_mode */
      op->direct = 0;
      op->state = 0;
      op->step = 0;
      continue;
    }
    if (fin != 1) return fin;
    op->step = 0;
    s->moves++;
    if (op->mode != MODE_CMA && op->pos + op->len < op->count && !spend(s))
      return 0; /* resumes with the next round */
  }
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

/* Advance the queue from its head until op (NULL: every op) is settled, a wait or the pass's
 * budget stops it, or a single-copy syscall fails (-1: the segment is broken, the next test of any
 * op reports it). Under s->lock. */
static int pump(gr__shm *s, gr__shm_op *op) {
  while (!gr__list_empty(&s->queue) && (!op || op->state != 2)) {
    gr__shm_op *h = OP_OF(s->queue.head);
    int rc = advance(s, h);
    if (rc == -1) {
      s->broken = 1;
      s->sys_failed = 1;
      return -1;
    }
    if (!rc) break;
    h->state = 2; /* done, or dropped (failed): every rank drops it at the same point */
    gr__list_pop_front(&s->queue);
  }
  return 0;
}

/* op's outcome once it settled (op released), or GR_OK with *done 0. Under s->lock. */
static gr_status settled(gr__shm *s, gr__shm_op *op, int *done) {
  if (s->sys_failed) {
    s->sys_failed = 0;
    return GR_ERR_SYSTEM;
  }
  if (s->broken) return GR_ERR_ABORTED;
  if (op->state != 2) return GR_OK;
  int failed = op->failed;
  if (failed) memcpy(s->why, op->why, sizeof s->why);
  gr__list_push_back(&s->spare, &op->node);
  s->idle_t0 = 0;
  *done = 1;
  return failed == 2 ? GR_ERR_INVALID : failed ? GR_ERR_MISMATCH : GR_OK;
}

gr_status gr__shm_test(gr__shm *s, gr__shm_op *op, int *done) {
  *done = 0;
  lock_caller(s, 0);
  uint64_t moves = s->moves;
  gr_status st = GR_OK;
  for (int spin = 0; spin < s->spins; spin++) {
    if (!s->broken) pump(s, op);
    if ((st = settled(s, op, done)) != GR_OK || *done) {
      unlock(s);
      return st;
    }
    cpu_relax();
  }
  /* no progress: yield or sleep outside the lock, so the engine may take its turn */
  uint64_t t = gr__mono_ns();
  int nap = 0;
  if (s->moves != moves || !s->idle_t0)
    s->idle_t0 = t;
  else if (t - s->idle_t0 > SLEEP_AFTER_NS)
    nap = 2;
  else if (t - s->idle_t0 >= s->spin_ns)
    nap = 1;
  int lag = s->lag;
  uint64_t wait_for = s->wait_for;
  unlock(s);
  if (nap == 2 && lag >= 0)
    sleep_on(s, lag, wait_for, SLEEP_NS);
  else if (nap)
    sched_yield();
  return GR_OK;
}

gr_status gr__shm_test_some(gr__shm *s, gr__shm_op *op, int *done) {
  *done = 0;
  if (!lock_caller(s, 1)) return GR_OK; /* the engine is at it, and now stops soon */
  s->bounded = 1;
  s->budget = 1;
  if (!s->broken) pump(s, op);
  s->bounded = 0;
  s->budget = -1;
  gr_status st = settled(s, op, done);
  unlock(s);
  return st;
}

void gr__shm_nudge(gr__shm *s) {
  if (!lock_caller(s, 1)) return;
  s->bounded = 1;
  s->budget = 1;
  if (!s->broken) pump(s, NULL);
  s->bounded = 0;
  s->budget = -1;
  unlock(s);
}

int gr__shm_settled(gr__shm *s, const gr__shm_op *op, int *failed) {
  lock_caller(s, 0);
  int st = op->state == 2;
  *failed = op->failed;
  unlock(s);
  return st;
}

/* ---- the progress engine's side (shm_progress.c) ------------------------------------------- */

int gr__shm_engine_pump(gr__shm *s, gr__shm_wait *w) {
  if (atomic_load_explicit(&s->caller_wants, memory_order_relaxed)) {
    /* a caller waits for the lock: leave it the segment; its unlock rings the bell */
    atomic_store_explicit(&s->engine_wants, 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&s->caller_wants, memory_order_relaxed)) return GR__SHM_BUSY;
  }
  if (pthread_mutex_trylock(&s->lock) != 0) {
    atomic_store_explicit(&s->engine_wants, 1, memory_order_relaxed);
    /* the holder may have unlocked before it could see the flag: look once more */
    if (pthread_mutex_trylock(&s->lock) != 0) return GR__SHM_BUSY;
    atomic_store_explicit(&s->engine_wants, 0, memory_order_relaxed);
  }
  if (s->broken || gr__list_empty(&s->queue)) {
    pthread_mutex_unlock(&s->lock);
    return GR__SHM_IDLE;
  }
  uint64_t moves = s->moves;
  s->budget = ENGINE_BUDGET;
  s->engine_pass = 1;
  pump(s, NULL);
  s->engine_pass = 0;
  s->budget = -1;
  int rc = GR__SHM_MOVED;
  if (s->moves == moves && !gr__list_empty(&s->queue) && !s->broken) {
    rc = GR__SHM_BLOCKED;
    int lag = s->lag >= 0 ? s->lag : 0;
    w->word = futex_word(flag(s, lag));
    w->val = (uint32_t)atomic_load_explicit(flag(s, lag), memory_order_relaxed);
    if (atomic_load_explicit(flag(s, lag), memory_order_acquire) >= s->wait_for)
      rc = GR__SHM_MOVED; /* it moved since: look again */
    w->seg = s;
  } else if (gr__list_empty(&s->queue) || s->broken) {
    rc = GR__SHM_MOVED;
  }
  pthread_mutex_unlock(&s->lock);
  return rc;
}

void gr__shm_engine_waiting(gr__shm *s, int delta) {
  atomic_fetch_add_explicit(waiters(s), (uint32_t)delta, memory_order_relaxed);
  atomic_thread_fence(memory_order_seq_cst);
}

int gr__shm_engine_registered(gr__shm *s) {
  if (s->engine_on) return 1;
  s->engine_on = 1;
  return 0;
}

const char *gr__shm_why(const gr__shm *s) { return s->why; }

int gr__shm_gone(const gr__shm *s, char *buf, size_t len) {
  int named = 0;
  gr__strbuf sb;
  gr__strbuf_init_fixed(&sb, buf, len);
  for (int q = 0; q < s->size && len && !sb.truncated; q++) {
    pid_t pid = (pid_t)atomic_load_explicit(pid_of(s->base, q), memory_order_relaxed);
    if (q == s->rank || !peer_gone(pid)) continue;
    gr__strbuf_appendf(&sb, "%srank %d (process %d no longer exists)", named ? ", " : "",
                       name_of(s, q), (int)pid);
    named++;
  }
  return named;
}

/* A peer stopped inside a single-copy syscall (SIGSTOP between its check and its syscall) holds
 * gr__shm_forget up to this long; one that ran on finished its copy of a piece long before. */
#define LEAVE_NS 2000000000ull

/* Give up on the segment: the mark, then every peer inside a single-copy syscall waited for (its
 * count changes, its process ends, or LEAVE_NS pass). */
static void leave(gr__shm *s) {
  atomic_fetch_or(left_word(s, s->rank), 1ull << (s->rank % 64));
  uint64_t t0 = 0;
  for (int q = 0; q < s->size; q++) {
    uint16_t g = atomic_load(cma_gen(s, q));
    if (q == s->rank || !(g & 1)) continue;
    pid_t pid = (pid_t)atomic_load_explicit(pid_of(s->base, q), memory_order_relaxed);
    if (!t0) t0 = gr__mono_ns();
    for (unsigned i = 1; atomic_load(cma_gen(s, q)) == g; i++) {
      if ((i & 63) == 0 && (peer_gone(pid) || gr__mono_ns() - t0 > LEAVE_NS)) break;
      sched_yield();
    }
  }
}

void gr__shm_forget(gr__shm *s, gr__shm_op *op, char *why, size_t len) {
  (void)op;
  lock_caller(s, 0);
  s->broken = 1;
  uint64_t wait_for = s->wait_for, rounds = s->rounds;
  int wait_rank = s->wait_rank;
  unlock(s);
  leave(s);
  if (!why || !len) return;
  gr__strbuf sb;
  gr__strbuf_init_fixed(&sb, why, len);
  gr__strbuf_appendf(&sb, "shared-memory round %llu: waiting for", (unsigned long long)rounds);
  int named = 0;
  for (int q = 0; q < s->size && !sb.truncated; q++) {
    /* the ranks this one waits for, and any whose process has vanished (a survivor that timed
     * out and exited may be the one a single-copy read found gone) */
    pid_t pid = (pid_t)atomic_load_explicit(pid_of(s->base, q), memory_order_relaxed);
    int gone = q != s->rank && peer_gone(pid);
    int quit = q != s->rank && !gone && has_left(s, q);
    int behind = (wait_rank < 0 || q == wait_rank) &&
                 atomic_load_explicit(flag(s, q), memory_order_acquire) < wait_for;
    if (!gone && !behind) continue;
    gr__strbuf_appendf(&sb, "%s rank %d (process %d%s)", named ? "," : "", name_of(s, q), (int)pid,
                       gone   ? " no longer exists"
                       : quit ? ", which gave up on the communicator (a timeout or an abort)"
                              : " still running");
    named++;
  }
  if (!named) gr__strbuf_appendf(&sb, " no rank (all arrived)");
}
