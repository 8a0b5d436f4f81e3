/* The algorithms by single copy and direct in windows (gr_shm.h): the peers' data is read from,
 * and the results written into, the peers' own buffers, either through process_vm_readv/writev
 * (single copy: each byte crosses once) or, where every rank's buffers lie in windows every rank
 * maps, with plain loads and stores (direct). A call is one piece of the protocol's rounds
 * (shm_coll.c): publish the buffers' addresses and the descriptor, raise, check every rank's
 * descriptor, move the data in pieces a pass's budget bounds, raise, and wait for every rank's
 * raise, after which nobody touches this rank's buffers any more. Which calls come here is the
 * policy's (shm_policy.c). */
#include "shm_int.h"

#include "gr_dtype.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

/* Per peer: a reduction's block read from it, kept in L2 (tmp_bytes: the same on every rank, from
 * the size alone). Two ranks take larger blocks: a quarter of the syscalls and claims, and at 2
 * ranks the single copy ran 0.53-0.60x raw at 4-16 MiB against 0.61-0.70x with 64 KiB blocks
 * (bench/README.md, session 15); at 4 ranks the larger block lost at 256 KiB (fewer chunks to
 * share) and is not taken. */
#define CMA_TMP_BYTES 65536
#define CMA_TMP_BYTES_PAIR (256u << 10)
/* Bytes per rank a request's gr_test reduces at most when it does a piece of a chunk: a test
 * returns within microseconds, and gr_wait or the progress thread do whole chunks. */
#define TEST_PIECE 4096

size_t gr__shm_tmp_bytes(int size) { return size == 2 ? CMA_TMP_BYTES_PAIR : CMA_TMP_BYTES; }

/* Copy n bytes between local and the address remote in rank q's memory: read (write = 0) or
 * write. SHM_STEP_DONE done; SHM_STEP_WAIT the peer's process is gone or gave up (wait: the
 * deadline will name it); SHM_STEP_SYSFAIL another failure (cma_errno). */
static shm_step cma_copy_in(gr__shm *s, int q, void *local, uint64_t remote, size_t n, int write);
static shm_step cma_copy(gr__shm *s, int q, void *local, uint64_t remote, size_t n, int write) {
  atomic_fetch_add(shm_cma_gen(s, s->rank), 1); /* odd: inside */
  shm_step rc;
  if (shm_has_left(
          s, q)) { /* it gave up: its buffers are its program's again; wait, as for one gone */
    s->wait_rank = s->lag = q;
    s->wait_for = UINT64_MAX;
    rc = SHM_STEP_WAIT;
  } else {
    rc = cma_copy_in(s, q, local, remote, n, write);
  }
  atomic_fetch_add(shm_cma_gen(s, s->rank), 1);
  return rc;
}

static shm_step cma_copy_in(gr__shm *s, int q, void *local, uint64_t remote, size_t n, int write) {
  pid_t pid = (pid_t)atomic_load_explicit(shm_pid_of(s->base, q), memory_order_relaxed);
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
    if (k < 0 && (errno == ESRCH || errno == EFAULT || gr__shm_peer_gone(pid))) {
      s->wait_rank = s->lag = q;
      s->wait_for = UINT64_MAX;
      return SHM_STEP_WAIT;
    }
    if (k <= 0) {
      s->cma_errno = k < 0 ? errno : EFAULT;
      return SHM_STEP_SYSFAIL;
    }
    done += (size_t)k;
  }
  return SHM_STEP_DONE;
}
static shm_step cma_read(gr__shm *s, int q, void *dst, uint64_t src, size_t n) {
  return cma_copy(s, q, dst, src, n, 0);
}
static shm_step cma_write(gr__shm *s, int q, uint64_t dst, const void *src, size_t n) {
  return cma_copy(s, q, (void *)(uintptr_t)src, dst, n, 1);
}

int gr__shm_cma_errno(const gr__shm *s) { return s->cma_errno; }

int gr__shm_cma_probe(gr__shm *s) {
  if (s->size < 2) return 0;
  int q = (s->rank + 1) % s->size;
  uint64_t peer_base = atomic_load_explicit(shm_ctl(s, q, CTL_BASE), memory_order_relaxed),
           magic = 0;
  if (!peer_base || cma_read(s, q, &magic, peer_base, sizeof magic) != SHM_STEP_DONE) return 0;
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
  atomic_store_explicit(shm_ctl(s, s->rank, CTL_SEND), (uint64_t)(uintptr_t)send,
                        memory_order_relaxed);
  atomic_store_explicit(shm_ctl(s, s->rank, CTL_RECV), (uint64_t)(uintptr_t)recv,
                        memory_order_relaxed);
}
static uint64_t peer_addr(const gr__shm *s, int q, size_t field) {
  return atomic_load_explicit(shm_ctl(s, q, field), memory_order_relaxed);
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
  gr__shm_lock_caller(s, 0);
  struct shm_window w = {token, b, n};
  int ok = gr__array_push(&s->wins, &w) == GR_OK;
  gr__shm_unlock(s);
  if (!ok) free(b);
  return ok;
}

void gr__shm_window_remove(gr__shm *s, uint64_t token) {
  gr__shm_lock_caller(s, 0);
  for (size_t i = 0; i < s->wins.count; i++)
    if (WIN(s, i).token == token) {
      free(WIN(s, i).base);
      WIN(s, i) = WIN(s, s->wins.count - 1);
      s->wins.count--;
      break;
    }
  gr__shm_unlock(s);
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
      atomic_load_explicit(shm_ctl(s, q, which ? CTL_WR_TOK : CTL_WS_TOK), memory_order_relaxed);
  uint64_t off =
      atomic_load_explicit(shm_ctl(s, q, which ? CTL_WR_OFF : CTL_WS_OFF), memory_order_relaxed);
  return window_at(s, q, tok, off, 0);
}

/* Whether any rank posted the current call as a request (CTL_REQUEST, published before the first
 * raise: read after every rank's). */
static int any_request(const gr__shm *s) {
  for (int q = 0; q < s->size; q++)
    if (atomic_load_explicit(shm_ctl(s, q, CTL_REQUEST), memory_order_relaxed)) return 1;
  return 0;
}

/* What the first round's verdict reads (window_verdict): where this rank's buffers lie in the
 * windows, and whether it posted the call as a request. */
static void publish_first(gr__shm *s, const gr__shm_op *op) {
  atomic_store_explicit(shm_ctl(s, s->rank, CTL_WS_TOK), op->wtok[0], memory_order_relaxed);
  atomic_store_explicit(shm_ctl(s, s->rank, CTL_WS_OFF), op->woff[0], memory_order_relaxed);
  atomic_store_explicit(shm_ctl(s, s->rank, CTL_WR_TOK), op->wtok[1], memory_order_relaxed);
  atomic_store_explicit(shm_ctl(s, s->rank, CTL_WR_OFF), op->woff[1], memory_order_relaxed);
  atomic_store_explicit(shm_ctl(s, s->rank, CTL_REQUEST), (uint64_t)(op->request != 0),
                        memory_order_relaxed);
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

/* Chunk claims (CTL_CLAIM): rank q's word holds the round number of its current call and the next
 * piece of its slices nobody has claimed; piece u is piece u % pieces(s) of q's slice of chunk
 * u / pieces(s). A claim is a compare-and-swap below the call's number of pieces, tagged with the
 * round that the claiming rank is in, so a rank still in an earlier call, or one that finished,
 * never takes a piece of a later call. A bounded pass claims one piece, any other the rest of the
 * chunk: [*u0, *u1). */
static size_t pieces(const gr__shm *s) { return s->tmp_bytes / TEST_PIECE; }
static uint64_t claim_tag(const gr__shm *s) { return (uint64_t)(uint32_t)s->rounds << 32; }
static int claim(gr__shm *s, int q, size_t units, size_t *u0, size_t *u1) {
  _Atomic uint64_t *w = shm_ctl(s, q, CTL_CLAIM);
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

static _Atomic uint64_t direct_calls;      /* gr__shm_direct_calls */
static _Atomic uint64_t single_copy_calls; /* gr__shm_single_copy_calls */

/* After the first round's agreement, from every rank's published windows and request flags (the
 * same data and the same windows on every rank, so the same verdict): 1 with op->direct set (1
 * every buffer the call reads or writes in a peer lies in a window, 0 the call goes on through
 * process_vm_readv: the mode it would have had anyway, or a request past the crossover); -3
 * neither: the call starts again in its plain mode, in fresh rounds (the counters agree: each
 * rank raised once). */
static shm_step window_verdict(gr__shm *s, gr__shm_op *op) {
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
          atomic_load_explicit(shm_ctl(s, q, w ? CTL_WR_TOK : CTL_WS_TOK), memory_order_relaxed);
      uint64_t off =
          atomic_load_explicit(shm_ctl(s, q, w ? CTL_WR_OFF : CTL_WS_OFF), memory_order_relaxed);
      direct = window_at(s, q, tok, off, need[w]) != NULL;
    }
  if (direct || gr__shm_mode(s, op) == SHM_MODE_SINGLE ||
      (gr__shm_single_if_requested(s, op) && any_request(s))) {
    op->direct = direct;
    atomic_fetch_add_explicit(direct ? &direct_calls : &single_copy_calls, 1, memory_order_relaxed);
    return SHM_STEP_DONE;
  }
  return SHM_STEP_RESTART;
}

uint64_t gr__shm_direct_calls(void) {
  return atomic_load_explicit(&direct_calls, memory_order_relaxed);
}

uint64_t gr__shm_single_copy_calls(void) {
  return atomic_load_explicit(&single_copy_calls, memory_order_relaxed);
}

/* Allreduce, in chunks that any rank may reduce: raise once the addresses are published (counter =
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
static shm_step cma_allreduce(gr__shm *s, gr__shm_op *op) {
  int P = s->size, r = s->rank;
  shm_step rc;
  size_t es = gr__dtype_size(op->dtype), off, n, lo, len, units = cma_chunks(s, op) * pieces(s);
  size_t pe = TEST_PIECE / es; /* elements per piece */
  const char *send = op->send;
  char *recv = op->recv;
  const void *in[GR__SHM_MAX_RANKS];
  if (op->step == 1) {
    if (!shm_reached(s, s->ready, -1)) return SHM_STEP_WAIT; /* the descriptor's place is free */
    publish(s, send, recv);
    if (op->direct < 0) publish_first(s, op);
    atomic_store_explicit(shm_ctl(s, r, CTL_CLAIM), claim_tag(s), memory_order_relaxed);
    shm_announce(s, op);
    shm_raise(s);
    op->step = 2;
    op->sub = 0;
    op->peer = 0;
    op->held = 0;
    op->scan = 0;
  }
  if (op->step == 2) { /* every peer published: check the call before touching its data */
    if (!shm_reached(s, s->first, -1)) return SHM_STEP_WAIT;
    if (!shm_all_agree(s, op)) return SHM_STEP_DISAGREE;
    if (op->direct < 0 && (rc = window_verdict(s, op)) != SHM_STEP_DONE) return rc;
    op->step = 3;
  }
  if (op->step == 3) {
    for (;;) {
      int fresh = !op->held;
      if (fresh) {
        if (!s->budget)
          return SHM_STEP_WAIT;          /* this pass's share is done: claim nothing to sit on */
        for (; op->scan < P; op->scan++) /* an exhausted word stays exhausted */
          if (claim(s, (r + op->scan) % P, units, &op->u0, &op->u1)) {
            op->held = 1;
            op->owner = (r + op->scan) % P;
            if (s->budget > 0) s->budget--;
            break;
          }
        if (!op->held) break;
      } else if (!shm_spend(
                     s)) { /* the rest of a range claimed in an earlier pass: one more piece */
        return SHM_STEP_WAIT;
      }
      size_t np = pieces(s), c = op->u0 / np, e0 = op->u0 % np * pe, e1 = (op->u1 - c * np) * pe;
      cma_chunk(s, op, c, &lo, &len);
      shm_slice(len, P, op->owner, &off, &n);
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
          if ((rc = cma_read(s, q, into, peer_addr(s, q, CTL_SEND) + at, m)) != SHM_STEP_DONE)
            return rc;
        }
        for (int i = 0; i < P; i++) { /* rank order, as every path reduces */
          int t = (i - r + P) % P;
          in[i] = t == 0 ? (const void *)(send + at) : s->tmp + (size_t)(t - 1) * s->tmp_bytes;
        }
        gr__shm_reduce(op->dtype, op->op, in, P, recv + at, NULL, m / es);
        op->peer = 1;
        if (s->bounded)
          return SHM_STEP_WAIT; /* a bounded pass makes one syscall per peer: writes next */
      }
      /* start after me, so that the ranks write different peers */
      for (; m && op->peer < P; op->peer++) {
        int q = (r + op->peer) % P;
        if ((rc = cma_write(s, q, peer_addr(s, q, CTL_RECV) + at, recv + at, m)) != SHM_STEP_DONE)
          return rc;
      }
      s->moves++;
      op->sub = 0;
      op->peer = 0;
      op->held = 0;
    }
    shm_raise(s);
    op->step = 4;
  }
  return shm_reached(s, s->first + 1, -1) ? SHM_STEP_DONE
                                          : SHM_STEP_WAIT; /* nobody touches my buffers any more */
}

static shm_step cma_reduce_scatter(gr__shm *s, gr__shm_op *op) {
  int P = s->size, r = s->rank;
  shm_step rc;
  size_t es = gr__dtype_size(op->dtype), per = s->tmp_bytes / es, blk = op->count * es;
  const char *send = op->send;
  const void *in[GR__SHM_MAX_RANKS];
  if (op->step == 1) {
    if (!shm_reached(s, s->ready, -1)) return SHM_STEP_WAIT;
    publish(s, send, op->recv);
    if (op->direct < 0) publish_first(s, op);
    shm_announce(s, op);
    shm_raise(s);
    op->step = 2;
    op->sub = 0;
  }
  if (op->step == 2) {
    if (!shm_reached(s, s->first, -1)) return SHM_STEP_WAIT;
    if (!op->sub && !shm_all_agree(s, op)) return SHM_STEP_DISAGREE;
    if (op->direct < 0 && (rc = window_verdict(s, op)) != SHM_STEP_DONE) return rc;
    for (size_t b = (size_t)op->sub * per; b < op->count; b += per, op->sub++) {
      if (!shm_spend(s)) return SHM_STEP_WAIT;
      size_t m = op->count - b < per ? op->count - b : per, at = (size_t)r * blk + b * es;
      for (int q = 0, t = 0; q < P; q++) {
        if (q == r || op->direct) {
          in[q] = q == r ? (const void *)(send + at) : peer_buf(s, q, 0) + at;
          continue;
        }
        unsigned char *into = s->tmp + (size_t)t++ * s->tmp_bytes;
        if ((rc = cma_read(s, q, into, peer_addr(s, q, CTL_SEND) + at, m * es)) != SHM_STEP_DONE)
          return rc;
        in[q] = into;
      }
      gr__shm_reduce(op->dtype, op->op, in, P, (char *)op->recv + b * es, NULL, m);
    }
    shm_raise(s);
    op->step = 3;
  }
  return shm_reached(s, s->first + 1, -1) ? SHM_STEP_DONE : SHM_STEP_WAIT;
}

/* Allgather: publish, raise; copy my block into my recv (in pieces of CMA_PIECE bytes); once every
 * rank published, write each piece into every peer's recv (process_vm_writev) right after copying
 * it locally, while it is still in my cache: my send is read from memory once, where a peer's read
 * of it would be a second pass (and from another core's cache or memory). Raise, and wait for
 * every rank's raise: my recv is complete, and nobody touches my buffers any more. */
#define CMA_PIECE (256 * 1024)
static shm_step cma_allgather(gr__shm *s, gr__shm_op *op) {
  int P = s->size, r = s->rank;
  shm_step rc;
  size_t blk = op->count * gr__dtype_size(op->dtype), mine = (size_t)r * blk;
  const char *send = op->send;
  char *recv = op->recv;
  if (op->step == 1) {
    if (!shm_reached(s, s->ready, -1)) return SHM_STEP_WAIT;
    publish(s, send, recv);
    if (op->direct < 0) publish_first(s, op);
    shm_announce(s, op);
    shm_raise(s);
    op->step = 2;
    op->sub = 0;  /* pieces written to every peer */
    op->peer = 0; /* 0: the piece not copied locally yet, else the next peer written */
  }
  if (op->step == 2) { /* every peer published: check the call before touching its memory */
    if (!shm_reached(s, s->first, -1)) return SHM_STEP_WAIT;
    if (!shm_all_agree(s, op)) return SHM_STEP_DISAGREE;
    if (op->direct < 0 && (rc = window_verdict(s, op)) != SHM_STEP_DONE) return rc;
    op->step = 3;
  }
  if (op->step == 3) {
    for (size_t at = (size_t)op->sub * CMA_PIECE; at < blk; at += CMA_PIECE, op->sub++) {
      size_t m = blk - at < CMA_PIECE ? blk - at : CMA_PIECE;
      if (!op->peer) {
        if (!shm_spend(s)) return SHM_STEP_WAIT;
        if (send != recv + mine) memcpy(recv + mine + at, send + at, m);
        op->peer = 1;
      }
      /* start after me, so that the ranks write different peers */
      for (; op->peer < P; op->peer++) {
        int q = (r + op->peer) % P;
        if (op->direct)
          memcpy(peer_buf(s, q, 1) + mine + at, send + at, m);
        else if ((rc = cma_write(s, q, peer_addr(s, q, CTL_RECV) + mine + at, send + at, m)) !=
                 SHM_STEP_DONE)
          return rc;
        s->moves++;
      }
      op->peer = 0;
    }
    shm_raise(s);
    op->step = 4;
  }
  return shm_reached(s, s->first + 1, -1) ? SHM_STEP_DONE : SHM_STEP_WAIT;
}

static shm_step cma_broadcast(gr__shm *s, gr__shm_op *op) {
  size_t bytes = op->count * gr__dtype_size(op->dtype);
  shm_step rc;
  if (op->step == 1) {
    if (!shm_reached(s, s->ready, -1)) return SHM_STEP_WAIT;
    publish(s, op->send, op->recv);
    if (op->direct < 0) publish_first(s, op);
    shm_announce(s, op);
    shm_raise(s); /* the root: its data is there; the others: they are here */
    op->step = 2;
    op->sub = 0; /* pieces of CMA_PIECE bytes copied (the root) or read (the others) */
  }
  if (op->step == 2) { /* every rank checks every descriptor, the root too: all give one verdict */
    if (!shm_reached(s, s->first, -1)) return SHM_STEP_WAIT;
    if (!op->sub && !shm_all_agree(s, op)) return SHM_STEP_DISAGREE;
    if (op->direct < 0 && (rc = window_verdict(s, op)) != SHM_STEP_DONE) return rc;
    for (size_t at = (size_t)op->sub * CMA_PIECE; at < bytes; at += CMA_PIECE, op->sub++) {
      size_t m = bytes - at < CMA_PIECE ? bytes - at : CMA_PIECE;
      if (!shm_spend(s)) return SHM_STEP_WAIT;
      if (s->rank == op->root) {
        if (op->send != op->recv) memcpy((char *)op->recv + at, (const char *)op->send + at, m);
      } else if (op->direct) {
        memcpy((char *)op->recv + at, peer_buf(s, op->root, 0) + at, m);
      } else if ((rc = cma_read(s, op->root, (char *)op->recv + at,
                                peer_addr(s, op->root, CTL_SEND) + at, m)) != SHM_STEP_DONE) {
        return rc;
      }
      s->moves++;
    }
    op->step = 3;
  }
  if (op->step == 3) {
    shm_raise(s);
    op->step = 4;
  }
  return shm_reached(s, s->first + 1, -1) ? SHM_STEP_DONE : SHM_STEP_WAIT;
}

shm_step gr__shm_single_step(gr__shm *s, gr__shm_op *op) {
  switch (op->kind) {
  case GR__ALLREDUCE:
    return cma_allreduce(s, op);
  case GR__REDUCE_SCATTER:
    return cma_reduce_scatter(s, op);
  case GR__ALLGATHER:
    return cma_allgather(s, op);
  default:
    return cma_broadcast(s, op);
  }
}

void gr__shm_count_single_copy(void) {
  atomic_fetch_add_explicit(&single_copy_calls, 1, memory_order_relaxed);
}
