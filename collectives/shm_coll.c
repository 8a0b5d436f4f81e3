/* The shared-memory protocol (see gr_shm.h for the layout and the rule that keeps it safe).
 *
 * Per round, with b = this round's buffer and slot(q) = rank q's buffer b:
 * - allreduce, small (one round, at most SMALL_MAX bytes): copy the input to slot(me), raise;
 *   once all raised, reduce all slots (rank order) into recv. One synchronisation per call.
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
 * - barrier: raise; wait until all raised. */
#include "gr_shm.h"

#include "gr_dtype.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define SHM_MAGIC 0x6772736d636f6c31ull /* "grsmcol1" */
#define FLAGS_OFF 2048
#define FLAG_STRIDE 128 /* two cache lines: the adjacent-line prefetcher would share one */
/* A small allreduce goes in one round through whole copies: P reads of n bytes each beat two
 * synchronisations while n is small. */
#define SMALL_MAX 8192
/* Polls per gr__shm_test before returning to the caller; after IDLE_SLEEP fruitless calls in a
 * row, each one sleeps on the lagging rank's counter (a futex, at most SLEEP_NS) so that on an
 * oversubscribed node the core goes to the rank everyone waits for. A raise wakes sleepers only
 * when the segment's sleeper count says there are any. */
#define SPINS 256
#define IDLE_SLEEP 4
#define SLEEP_NS 1000000
#define WAITERS_OFF 1920

enum { MODE_SMALL = 1, MODE_LARGE };

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
  unsigned idle;
  gr__shm_op *head, *tail, *spare, *all;
};

/* Each op also sits on the list of all ops ever allocated (freed with the context). */
typedef struct op_box {
  gr__shm_op op;
  struct op_box *all_next;
} op_box;

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
static _Atomic uint32_t *waiters(const gr__shm *s) {
  return (_Atomic uint32_t *)(s->base + WAITERS_OFF);
}
/* The futex word of a counter: its low 32 bits, which change with every raise. */
static uint32_t *futex_word(_Atomic uint64_t *f) {
  return (uint32_t *)(void *)f + (__BYTE_ORDER__ == __ORDER_BIG_ENDIAN__);
}
static unsigned char *slot(const gr__shm *s, int q) {
  return s->base + data_off(s->size) + ((size_t)q * 2 + (size_t)((s->rounds - 1) & 1)) * GR__SHM_SLOT;
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
  atomic_store_explicit(pid_of(s->base, rank), (int32_t)getpid(), memory_order_relaxed);
  return s;
}

void gr__shm_own_mapping(gr__shm *s) { s->owns = 1; }

void gr__shm_free(gr__shm *s) {
  if (!s) return;
  for (op_box *b = (op_box *)s->all, *n; b; b = n) {
    n = b->all_next;
    free(b);
  }
  if (s->owns) munmap(s->base, s->bytes);
  free(s);
}

int gr__shm_takes(const gr__shm *s, int kind) {
  return s && (kind == GR__ALLREDUCE || kind == GR__REDUCE_SCATTER || kind == GR__ALLGATHER ||
               kind == GR__BROADCAST || kind == GR__BARRIER);
}

gr_status gr__shm_post(gr__shm *s, gr__shm_op **out, const gr__shm_op *call) {
  if (s->broken) return GR_ERR_ABORTED;
  gr__shm_op *op = s->spare;
  if (op) {
    s->spare = op->next;
  } else {
    op_box *b = calloc(1, sizeof *b);
    if (!b) return GR_ERR_NOMEM;
    b->all_next = (op_box *)s->all;
    s->all = &b->op; /* op is the box's first member */
    op = &b->op;
  }
  *op = *call;
  op->state = 0;
  op->step = 0;
  op->pos = op->len = 0;
  op->mode = 0;
  op->sub = 0;
  op->next = NULL;
  if (s->tail) s->tail->next = op;
  else s->head = op;
  s->tail = op;
  *out = op;
  return GR_OK;
}

/* ---- the rounds ---------------------------------------------------------------------------- */

static void raise_flag(gr__shm *s) {
  s->tick++;
  _Atomic uint64_t *f = flag(s, s->rank);
  atomic_store_explicit(f, s->tick, memory_order_release);
  /* store then load, against the sleeper's increment then load: one of the two sees the other */
  atomic_thread_fence(memory_order_seq_cst);
  if (atomic_load_explicit(waiters(s), memory_order_relaxed))
    syscall(SYS_futex, futex_word(f), FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static void sleep_on_lag(gr__shm *s) {
  _Atomic uint64_t *f = flag(s, s->lag);
  atomic_fetch_add_explicit(waiters(s), 1, memory_order_relaxed);
  atomic_thread_fence(memory_order_seq_cst);
  uint64_t v = atomic_load_explicit(f, memory_order_relaxed);
  if (v < s->wait_for) {
    struct timespec ts = {0, SLEEP_NS};
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

static void begin_round(gr__shm *s) {
  s->ready = s->first;
  s->first = s->tick + 1;
  s->rounds++;
}

/* Slice q of a round of len elements: [*off, *off + *n). */
static void slice(size_t len, int P, int q, size_t *off, size_t *n) {
  size_t base = len / (size_t)P, rem = len % (size_t)P, uq = (size_t)q;
  *off = uq * base + (uq < rem ? uq : rem);
  *n = base + (uq < rem);
}

/* Elements per round, per block. */
static size_t round_elems(const gr__shm *s, const gr__shm_op *op) {
  size_t es = gr__dtype_size(op->dtype);
  switch (op->kind) {
  case GR__REDUCE_SCATTER: return GR__SHM_SLOT / (size_t)s->size / es;
  case GR__ALLREDUCE: return op->mode == MODE_SMALL ? op->count : GR__SHM_SLOT / es;
  default: return GR__SHM_SLOT / es;
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
      memcpy(slot(s, r), send, op->len * es);
      raise_flag(s);
      op->step = 2;
    }
    if (!reached(s, s->first, -1)) return 0;
    for (int q = 0; q < P; q++) in[q] = q == r ? (const void *)send : slot(s, q);
    gr__shm_reduce(op->dtype, op->op, in, P, recv, NULL, op->len);
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
    raise_flag(s);
    op->step = 2;
  }
  if (op->step == 2) {
    if (!reached(s, s->first, -1)) return 0;
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
    raise_flag(s);
    op->step = 2;
  }
  if (!reached(s, s->first, -1)) return 0;
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
    memcpy(slot(s, r), (const char *)op->send + at, op->len * es);
    raise_flag(s);
    if (op->send != recv + (size_t)r * blk)
      memcpy(recv + (size_t)r * blk + at, (const char *)op->send + at, op->len * es);
    op->step = 2;
    op->sub = 1;
  }
  for (; op->sub < P; op->sub++) { /* each peer's block as soon as it is there */
    int q = (r + op->sub) % P;
    if (!reached(s, s->first, q)) return 0;
    memcpy(recv + (size_t)q * blk + at, slot(s, q), op->len * es);
  }
  return 1;
}

static int broadcast_step(gr__shm *s, gr__shm_op *op) {
  size_t es = gr__dtype_size(op->dtype), at = op->pos * es;
  if (s->rank == op->root) {
    if (!reached(s, s->ready, -1)) return 0;
    memcpy(slot(s, op->root), (const char *)op->send + at, op->len * es);
    raise_flag(s);
    if (op->send != op->recv) memcpy((char *)op->recv + at, (const char *)op->send + at, op->len * es);
    return 1;
  }
  if (op->step == 1) {
    raise_flag(s); /* this rank is done with the previous round */
    op->step = 2;
  }
  if (!reached(s, s->first, op->root)) return 0;
  memcpy((char *)op->recv + at, slot(s, op->root), op->len * es);
  return 1;
}

/* Run op as far as it goes; 1 when it finished. */
static int advance(gr__shm *s, gr__shm_op *op) {
  for (;;) {
    if (op->step == 0) {
      if (op->state == 0) {
        op->state = 1;
        op->pos = 0;
        size_t es = gr__dtype_size(op->dtype);
        if (op->kind == GR__ALLREDUCE)
          op->mode = op->count * es <= SMALL_MAX || op->count < (size_t)s->size ? MODE_SMALL
                                                                                 : MODE_LARGE;
        if (op->kind == GR__BARRIER) {
          begin_round(s);
          raise_flag(s);
          op->step = 2;
          continue;
        }
      } else {
        op->pos += op->len;
      }
      if (op->kind == GR__BARRIER || op->pos >= op->count) return 1;
      size_t m = round_elems(s, op);
      op->len = op->count - op->pos < m ? op->count - op->pos : m;
      begin_round(s);
      op->step = 1;
    }
    int fin;
    switch (op->kind) {
    case GR__ALLREDUCE: fin = allreduce_step(s, op); break;
    case GR__REDUCE_SCATTER: fin = reduce_scatter_step(s, op); break;
    case GR__ALLGATHER: fin = allgather_step(s, op); break;
    case GR__BROADCAST: fin = broadcast_step(s, op); break;
    default: fin = reached(s, s->first, -1); break; /* barrier */
    }
    if (!fin) return 0;
    op->step = 0;
  }
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

gr_status gr__shm_test(gr__shm *s, gr__shm_op *op, int *done) {
  *done = 0;
  if (s->broken) return GR_ERR_ABORTED;
  for (int spin = 0; spin < SPINS; spin++) {
    while (s->head && op->state != 2) {
      gr__shm_op *h = s->head;
      if (!advance(s, h)) break;
      h->state = 2;
      s->head = h->next;
      if (!s->head) s->tail = NULL;
      s->idle = 0;
    }
    if (op->state == 2) {
      op->next = s->spare;
      s->spare = op;
      *done = 1;
      return GR_OK;
    }
    cpu_relax();
  }
  if (++s->idle > IDLE_SLEEP) sleep_on_lag(s);
  return GR_OK;
}

void gr__shm_forget(gr__shm *s, gr__shm_op *op, char *why, size_t len) {
  (void)op;
  s->broken = 1;
  if (!why || !len) return;
  int n = snprintf(why, len, "shared-memory round %llu: waiting for", (unsigned long long)s->rounds);
  int named = 0;
  for (int q = 0; q < s->size && n >= 0 && (size_t)n < len; q++) {
    if (s->wait_rank >= 0 && q != s->wait_rank) continue;
    if (atomic_load_explicit(flag(s, q), memory_order_acquire) >= s->wait_for) continue;
    pid_t pid = (pid_t)atomic_load_explicit(pid_of(s->base, q), memory_order_relaxed);
    int gone = pid > 0 && kill(pid, 0) != 0 && errno == ESRCH;
    n += snprintf(why + n, len - (size_t)n, "%s rank %d (process %d%s)", named ? "," : "", q,
                  (int)pid, gone ? " no longer exists" : " still running");
    named++;
  }
  if (!named && n >= 0 && (size_t)n < len) snprintf(why + n, len - (size_t)n, " no rank (all arrived)");
}
