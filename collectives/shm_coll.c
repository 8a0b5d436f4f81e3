/* The shared-memory protocol (gr_shm.h: the segment's layout and the rule that keeps it safe):
 * one rank's view of a segment, the queue of calls, the rounds that move them, the agreement on
 * each call in its first round, and the waits, the tests and the giving up. A call runs in rounds
 * (advance): the policy (shm_policy.c) picks its mode when it starts, and each round's step is an
 * algorithm's, through the slots (shm_slots.c) or by single copy and directly in windows
 * (shm_single.c). A step says what happened as a shm_step (shm_int.h); a call that fails records
 * what it saw, and its sentence is made once, when the call settles in its caller's thread
 * (gr__fail_msg: the sentence gr__shm_why returns). The progress engine (shm_progress.c) runs
 * passes of the same queue through gr__shm_engine_pump; the protocol calls the engine back only
 * through the hooks the engine hands over at registration. */
#include "shm_int.h"

#include "gr_clock.h"
#include "gr_dtype.h"
#include "gr_error.h"
#include "gr_log.h"
#include "gr_strbuf.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

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

typedef struct {
  uint64_t magic, nonce;
  uint32_t size, slot;
  uint64_t bytes;
} shm_header;

/* Each op also sits on the list of all ops ever allocated (freed with the context). */
typedef struct op_box {
  gr__shm_op op;
  gr_list_node all_node;
} op_box;
#define OP_OF(n) GR_LIST_ENTRY(n, gr__shm_op, node)

size_t gr__shm_bytes(int size) { return shm_data_off(size) + (size_t)size * 2 * GR__SHM_SLOT; }

void gr__shm_format(void *base, int size, uint64_t nonce) {
  shm_header h = {SHM_MAGIC, nonce, (uint32_t)size, GR__SHM_SLOT, gr__shm_bytes(size)};
  memset(base, 0, shm_data_off(size));
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
  s->pair_max = gr__shm_pair_max_default();
  s->tmp_bytes = gr__shm_tmp_bytes(size);
  gr__shm_private_defaults(size, s->cross);
  gr__array_init(&s->wins, sizeof(struct shm_window));
  gr__array_init(&s->deferred, sizeof(void *));
  s->budget = -1;
  int rc = pthread_mutex_init(&s->lock, NULL);
  if (rc != 0) {
    GR_DEBUG("collectives: shared-memory segment: pthread_mutex_init failed: %s", strerror(rc));
    free(s);
    return NULL;
  }
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN); /* not this rank's affinity: a bound rank has one */
  if (ncpu > 0 && ncpu < size) {
    s->spins = SPINS_OVERSUBSCRIBED;
    s->spin_ns = 0;
  }
  atomic_store_explicit(shm_pid_of(s->base, rank), (int32_t)getpid(), memory_order_relaxed);
  atomic_store_explicit(shm_ctl(s, rank, CTL_BASE), (uint64_t)(uintptr_t)base,
                        memory_order_relaxed);
  return s;
}

void gr__shm_own_mapping(gr__shm *s) { s->owns = 1; }
void gr__shm_name_ranks(gr__shm *s, const int *names) { s->names = names; }

void gr__shm_free(gr__shm *s) {
  if (!s) return;
  if (s->engine_on) s->engine_remove(s); /* the engine touches s no more */
  pthread_mutex_destroy(&s->lock);
  for (gr_list_node *n; (n = gr__list_pop_front(&s->all));)
    free(GR_LIST_ENTRY(n, op_box, all_node));
  if (s->owns && munmap(s->base, s->bytes) != 0) /* a mapping this view made: cannot fail */
    GR_DEBUG("collectives: shared-memory segment: munmap failed: %s", strerror(errno));
  free(s->tmp);
  gr__array_free(&s->deferred);
  for (size_t i = 0; i < s->wins.count; i++)
    free(WIN(s, i).base);
  gr__array_free(&s->wins);
  free(s);
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
  op->state = SHM_QUEUED;
  op->step = 0;
  op->pos = op->len = 0;
  op->mode = 0;
  op->sub = 0;
  op->peer = 0;
  op->reduced = 0;
  op->held = 0;
  op->scan = 0;
  op->direct = 0;
  op->plain = 0;
  op->win = s->wins.count > 0;
  if (!op->win) op->wtok[0] = op->wtok[1] = 0;
  op->failed = SHM_OK;
  op->seen = SHM_SEEN_NOTHING;
  gr__list_push_back(&s->queue, &op->node);
  *out = op;
  return GR_OK;
}

gr_status gr__shm_post(gr__shm *s, gr__shm_op **out, const gr__shm_op *call) {
  gr__shm_lock_caller(s, 0);
  gr_status st = post_locked(s, out, call);
  gr__shm_unlock(s);
  return st;
}

/* ---- the rounds ---------------------------------------------------------------------------- */

/* Sleep on rank lag's counter until it moves past wait_for, ns at most. */
static void sleep_on(gr__shm *s, int lag, uint64_t wait_for, long ns) {
  _Atomic uint64_t *f = shm_flag(s, lag);
  atomic_fetch_add_explicit(shm_waiters(s), 1, memory_order_relaxed);
  atomic_thread_fence(memory_order_seq_cst);
  uint64_t v = atomic_load_explicit(f, memory_order_relaxed);
  if (v < wait_for) {
    struct timespec ts = {0, ns};
    /* EAGAIN (it moved), ETIMEDOUT, EINTR: each ends the nap, and the caller looks again */
    (void)syscall(SYS_futex, shm_futex_word(f), FUTEX_WAIT, (uint32_t)v, &ts, NULL, 0);
  }
  atomic_fetch_sub_explicit(shm_waiters(s), 1, memory_order_relaxed);
}

static void begin_round(gr__shm *s) {
  s->ready = s->first;
  s->first = s->tick + 1;
  s->rounds++;
}

/* ---- agreement on the call (gr_shm.h) ------------------------------------------------------ */

/* A descriptor as the sentences show it: "allreduce(count=4, dtype=float32, op=sum)". */
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

/* Records the sentence of a call that failed its first round (what op->seen says) as this thread's
 * last error, and returns st. */
static gr_status fail_seen(const gr__shm *s, const gr__shm_op *op, gr_status st) {
  char a[96], b[96], at[64] = "";
  if (op->seen == SHM_SEEN_SELF_REFUSED)
    return gr__fail_msg(st, "this rank refused its own arguments");
  describe_text(a, sizeof a, op->seen_desc[0], op->seen_desc[1]);
  if (op->seen == SHM_SEEN_PEER_REFUSED)
    return gr__fail_msg(st, "rank %d rejected its own arguments to %s: %s", op->seen_rank, a,
                        gr__arg_name((int)((op->seen_desc[1] >> 36) & 0xf)));
  describe_text(b, sizeof b, op->own_desc[0], op->own_desc[1]);
  if ((op->seen_desc[1] >> 40) != (op->own_desc[1] >> 40))
    snprintf(at, sizeof at, " (at shared-memory rounds %llu and %llu)",
             (unsigned long long)(op->seen_desc[1] >> 40),
             (unsigned long long)(op->own_desc[1] >> 40));
  return gr__fail_msg(st, "rank %d called %s while rank %d called %s%s",
                      shm_name_of(s, op->seen_rank), a, shm_name_of(s, s->rank), b, at);
}

/* ---- a call, round by round ---------------------------------------------------------------- */

/* The step of op's current round: the algorithm its mode names. */
static shm_step algo_step(gr__shm *s, gr__shm_op *op) {
  return op->mode == SHM_MODE_SINGLE ? gr__shm_single_step(s, op) : gr__shm_slots_step(s, op);
}

/* Run op as far as it goes: SHM_STEP_DONE when it finished, SHM_STEP_WAIT when it waits (a peer,
 * the pass's budget), SHM_STEP_SYSFAIL when a single copy failed (cma_errno), SHM_STEP_DISAGREE
 * when the ranks disagree on what it is or one refused it (op->seen). */
static shm_step advance(gr__shm *s, gr__shm_op *op) {
  for (;;) {
    if (op->step == 0) {
      if (op->state == SHM_QUEUED) {
        op->state = SHM_RUNNING;
        op->pos = 0;
        if (op->win && gr__shm_window_fits(s, op)) {
          op->mode = SHM_MODE_SINGLE; /* its first step; the first round decides how it reaches
                                       * peers */
          op->direct = -1;
        } else {
          op->mode = gr__shm_mode(s, op);
          /* past a crossover a request may keep single copy; only the slots' sliced modes lie
           * there, so the small calls skip the policy's second look */
          if (op->mode == SHM_MODE_SINGLE) {
            gr__shm_count_single_copy();
          } else if ((op->mode == SHM_MODE_LARGE || op->mode == SHM_MODE_ROUNDS) && !op->plain &&
                     gr__shm_single_if_requested(s, op)) {
            op->mode = SHM_MODE_SINGLE; /* its first step; the first round decides whether a
                                         * rank's request keeps it single copy */
            op->direct = -1;
          }
        }
        if (op->mode == SHM_MODE_AGREE) { /* one round, no data */
          begin_round(s);
          op->step = 1;
          continue;
        }
      } else {
        op->pos += op->len;
      }
      if (op->mode == SHM_MODE_AGREE || op->pos >= op->count) return SHM_STEP_DONE;
      size_t m = gr__shm_round_elems(s, op);
      op->len = op->count - op->pos < m ? op->count - op->pos : m;
      begin_round(s);
      op->step = 1;
    }
    shm_step fin = algo_step(s, op);
    if (fin == SHM_STEP_RESTART) { /* not every buffer in a window, no single copy: again, through
                                    * the slots */
      op->win = 0;                 /* window_fits no longer: the plain mode */
      op->plain = 1;
      op->direct = 0;
      op->state = SHM_QUEUED;
      op->step = 0;
      continue;
    }
    if (fin != SHM_STEP_DONE) return fin;
    op->step = 0;
    s->moves++;
    if (op->mode != SHM_MODE_SINGLE && op->pos + op->len < op->count && !shm_spend(s))
      return SHM_STEP_WAIT; /* resumes with the next round */
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
 * budget stops it, or a single-copy syscall fails (the segment is then broken, and the next test
 * of any op reports it). Under s->lock. */
static void pump(gr__shm *s, gr__shm_op *op) {
  while (!gr__list_empty(&s->queue) && (!op || op->state != SHM_SETTLED)) {
    gr__shm_op *h = OP_OF(s->queue.head);
    shm_step rc = advance(s, h);
    if (rc == SHM_STEP_SYSFAIL) {
      s->broken = 1;
      s->sys_failed = 1;
      return;
    }
    if (rc == SHM_STEP_WAIT) break;
    h->state = SHM_SETTLED; /* done, or dropped (failed): every rank drops it at the same point */
    gr__list_pop_front(&s->queue);
  }
}

/* op's outcome once it settled (op released; a failed call's sentence recorded, fail_seen), or
 * GR_OK with *done 0. Under s->lock. */
static gr_status settled(gr__shm *s, gr__shm_op *op, int *done) {
  if (s->sys_failed) {
    s->sys_failed = 0;
    return GR_ERR_SYSTEM;
  }
  if (s->broken) return GR_ERR_ABORTED;
  if (op->state != SHM_SETTLED) return GR_OK;
  gr__list_push_back(&s->spare, &op->node);
  s->idle_t0 = 0;
  *done = 1;
  if (op->failed == SHM_OK) return GR_OK;
  return fail_seen(s, op, op->failed == SHM_FAILED_REFUSED ? GR_ERR_INVALID : GR_ERR_MISMATCH);
}

gr_status gr__shm_test(gr__shm *s, gr__shm_op *op, int *done) {
  *done = 0;
  gr__shm_lock_caller(s, 0);
  uint64_t moves = s->moves;
  gr_status st = GR_OK;
  for (int spin = 0; spin < s->spins; spin++) {
    if (!s->broken) pump(s, op);
    if ((st = settled(s, op, done)) != GR_OK || *done) {
      gr__shm_unlock(s);
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
  gr__shm_unlock(s);
  if (nap == 2 && lag >= 0)
    sleep_on(s, lag, wait_for, SLEEP_NS);
  else if (nap)
    sched_yield();
  return GR_OK;
}

gr_status gr__shm_test_some(gr__shm *s, gr__shm_op *op, int *done) {
  *done = 0;
  if (!gr__shm_lock_caller(s, 1)) return GR_OK; /* the engine is at it, and now stops soon */
  s->bounded = 1;
  s->budget = 1;
  if (!s->broken) pump(s, op);
  s->bounded = 0;
  s->budget = -1;
  gr_status st = settled(s, op, done);
  gr__shm_unlock(s);
  return st;
}

void gr__shm_nudge(gr__shm *s) {
  if (!gr__shm_lock_caller(s, 1)) return;
  s->bounded = 1;
  s->budget = 1;
  if (!s->broken) pump(s, NULL);
  s->bounded = 0;
  s->budget = -1;
  gr__shm_unlock(s);
}

int gr__shm_settled(gr__shm *s, const gr__shm_op *op, int *failed) {
  gr__shm_lock_caller(s, 0);
  int st = op->state == SHM_SETTLED;
  *failed = op->failed;
  gr__shm_unlock(s);
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
    w->word = shm_futex_word(shm_flag(s, lag));
    w->val = (uint32_t)atomic_load_explicit(shm_flag(s, lag), memory_order_relaxed);
    if (atomic_load_explicit(shm_flag(s, lag), memory_order_acquire) >= s->wait_for)
      rc = GR__SHM_MOVED; /* it moved since: look again */
    w->seg = s;
  } else if (gr__list_empty(&s->queue) || s->broken) {
    rc = GR__SHM_MOVED;
  }
  pthread_mutex_unlock(&s->lock);
  return rc;
}

void gr__shm_engine_waiting(gr__shm *s, int delta) {
  atomic_fetch_add_explicit(shm_waiters(s), (uint32_t)delta, memory_order_relaxed);
  atomic_thread_fence(memory_order_seq_cst);
}

int gr__shm_engine_registered(gr__shm *s, void (*kick)(void), void (*remove)(gr__shm *s)) {
  if (s->engine_on) return 1;
  s->engine_kick = kick;
  s->engine_remove = remove;
  s->engine_on = 1; /* the hooks first: a locked stretch rings the bell once this is set */
  return 0;
}

/* The sentence settled() recorded for the call that failed (fail_seen), on this thread. */
const char *gr__shm_why(const gr__shm *s) {
  (void)s;
  return gr_last_error();
}

int gr__shm_gone(const gr__shm *s, char *buf, size_t len) {
  int named = 0;
  gr__strbuf sb;
  gr__strbuf_init_fixed(&sb, buf, len);
  for (int q = 0; q < s->size && len && !sb.truncated; q++) {
    pid_t pid = (pid_t)atomic_load_explicit(shm_pid_of(s->base, q), memory_order_relaxed);
    if (q == s->rank || !gr__shm_peer_gone(pid)) continue;
    gr__strbuf_appendf(&sb, "%srank %d (process %d no longer exists)", named ? ", " : "",
                       shm_name_of(s, q), (int)pid);
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
  atomic_fetch_or(shm_left_word(s, s->rank), 1ull << (s->rank % 64));
  uint64_t t0 = 0;
  for (int q = 0; q < s->size; q++) {
    uint16_t g = atomic_load(shm_cma_gen(s, q));
    if (q == s->rank || !(g & 1)) continue;
    pid_t pid = (pid_t)atomic_load_explicit(shm_pid_of(s->base, q), memory_order_relaxed);
    if (!t0) t0 = gr__mono_ns();
    for (unsigned i = 1; atomic_load(shm_cma_gen(s, q)) == g; i++) {
      if ((i & 63) == 0 && (gr__shm_peer_gone(pid) || gr__mono_ns() - t0 > LEAVE_NS)) break;
      sched_yield();
    }
  }
}

void gr__shm_forget(gr__shm *s, gr__shm_op *op, char *why, size_t len) {
  (void)op;
  gr__shm_lock_caller(s, 0);
  s->broken = 1;
  uint64_t wait_for = s->wait_for, rounds = s->rounds;
  int wait_rank = s->wait_rank;
  gr__shm_unlock(s);
  leave(s);
  if (!why || !len) return;
  gr__strbuf sb;
  gr__strbuf_init_fixed(&sb, why, len);
  gr__strbuf_appendf(&sb, "shared-memory round %llu: waiting for", (unsigned long long)rounds);
  int named = 0;
  for (int q = 0; q < s->size && !sb.truncated; q++) {
    /* the ranks this one waits for, and any whose process has vanished (a survivor that timed
     * out and exited may be the one a single-copy read found gone) */
    pid_t pid = (pid_t)atomic_load_explicit(shm_pid_of(s->base, q), memory_order_relaxed);
    int gone = q != s->rank && gr__shm_peer_gone(pid);
    int quit = q != s->rank && !gone && shm_has_left(s, q);
    int behind = (wait_rank < 0 || q == wait_rank) &&
                 atomic_load_explicit(shm_flag(s, q), memory_order_acquire) < wait_for;
    if (!gone && !behind) continue;
    gr__strbuf_appendf(&sb, "%s rank %d (process %d%s)", named ? "," : "", shm_name_of(s, q),
                       (int)pid,
                       gone   ? " no longer exists"
                       : quit ? ", which gave up on the communicator (a timeout or an abort)"
                              : " still running");
    named++;
  }
  if (!named) gr__strbuf_appendf(&sb, " no rank (all arrived)");
}
