/* The algorithms through the segment's slots (gr_shm.h): every byte is copied into the writer's
 * slot (or, up to INLINE_MAX bytes, its inline place next to its counter) and out of it by the
 * readers. A call runs in rounds of at most GR__SHM_SLOT bytes per rank (shm_coll.c starts each);
 * per round, with slot(q) = rank q's buffer of the round:
 * - allreduce, small (at most the policy's small size; at two ranks the pair limit, a slot or
 *   what auto measured at creation, shm_choice.c; rounds of a slot):
 *   copy the input to slot(me), raise; once all raised, reduce all slots (rank order) into recv.
 *   One synchronisation per round, no final one (the slot is rewritten two rounds later only).
 * - allreduce, large (rounds of GR__SHM_SLOT bytes): the round's elements are cut into one
 *   slice per rank; copy the slices the others reduce into slot(me), raise; once all raised,
 *   reduce my slice from my own input and the others' slots into recv and into slot(me), raise;
 *   once all raised, copy the others' reduced slices out of their slots. Every byte crosses
 *   between two processes once per direction.
 * - reduce-scatter: copy the blocks the others reduce into slot(me), raise; once all raised,
 *   reduce my block from my input and the others' slots.
 * - allgather: copy my block into slot(me), raise; copy each peer's block as soon as it raised.
 * - broadcast: the root copies into slot(root) and raises; the others raise at the start of the
 *   round (saying they finished the previous one) and copy once the root raised.
 * - barrier: raise; wait until all raised.
 * - reduce, alltoall (small): as the small allreduce; only the root reduces, or each rank takes its
 *   block from every slot. Larger ones: only the barrier's agreement round (gr_shm.h).
 * Every step checks the peers' descriptors (shm_all_agree) before it reads their data. */
#include "shm_int.h"

#include "gr_dtype.h"

#include <string.h>

/* Elements per round, per block. */
size_t gr__shm_round_elems(const gr__shm *s, const gr__shm_op *op) {
  size_t es = gr__dtype_size(op->dtype);
  if (op->mode == SHM_MODE_SINGLE) return op->count;
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

static shm_step allreduce_step(gr__shm *s, gr__shm_op *op) {
  int P = s->size, r = s->rank;
  size_t es = gr__dtype_size(op->dtype), at = op->pos * es;
  const char *send = op->send;
  char *recv = op->recv;
  const void *in[GR__SHM_MAX_RANKS];
  if (op->mode == SHM_MODE_SMALL) {
    if (op->step == 1) {
      if (!shm_reached(s, s->ready, -1)) return SHM_STEP_WAIT;
      memcpy(shm_place(s, r, op->len * es), send + at, op->len * es);
      shm_announce(s, op);
      shm_raise(s);
      op->step = 2;
    }
    if (!shm_reached(s, s->first, -1)) return SHM_STEP_WAIT;
    if (!shm_all_agree(s, op)) return SHM_STEP_DISAGREE;
    for (int q = 0; q < P; q++)
      in[q] = q == r ? (const void *)(send + at) : shm_place(s, q, op->len * es);
    gr__shm_reduce(op->dtype, op->op, in, P, recv + at, NULL, op->len);
    return SHM_STEP_DONE;
  }
  size_t off, n;
  if (op->step == 1) {
    if (!shm_reached(s, s->ready, -1)) return SHM_STEP_WAIT;
    unsigned char *mine = shm_slot(s, r);
    for (int q = 0; q < P; q++) {
      if (q == r) continue;
      shm_slice(op->len, P, q, &off, &n);
      memcpy(mine + off * es, send + at + off * es, n * es);
    }
    shm_announce(s, op);
    shm_raise(s);
    op->step = 2;
  }
  if (op->step == 2) {
    if (!shm_reached(s, s->first, -1)) return SHM_STEP_WAIT;
    if (!shm_all_agree(s, op)) return SHM_STEP_DISAGREE;
    shm_slice(op->len, P, r, &off, &n);
    for (int q = 0; q < P; q++)
      in[q] = q == r ? (const void *)(send + at + off * es) : shm_slot(s, q) + off * es;
    gr__shm_reduce(op->dtype, op->op, in, P, recv + at + off * es, shm_slot(s, r) + off * es, n);
    shm_raise(s);
    op->step = 3;
  }
  if (!shm_reached(s, s->first + 1, -1)) return SHM_STEP_WAIT;
  for (int i = 1; i < P; i++) { /* start after me, so that the ranks read different slots */
    int q = (r + i) % P;
    shm_slice(op->len, P, q, &off, &n);
    memcpy(recv + at + off * es, shm_slot(s, q) + off * es, n * es);
  }
  return SHM_STEP_DONE;
}

static shm_step reduce_scatter_step(gr__shm *s, gr__shm_op *op) {
  int P = s->size, r = s->rank;
  size_t es = gr__dtype_size(op->dtype), sub = gr__shm_round_elems(s, op) * es, at = op->pos * es;
  size_t blk = op->count * es;
  const char *send = op->send;
  const void *in[GR__SHM_MAX_RANKS];
  if (op->step == 1) {
    if (!shm_reached(s, s->ready, -1)) return SHM_STEP_WAIT;
    unsigned char *mine = shm_slot(s, r);
    for (int q = 0; q < P; q++)
      if (q != r) memcpy(mine + (size_t)q * sub, send + (size_t)q * blk + at, op->len * es);
    shm_announce(s, op);
    shm_raise(s);
    op->step = 2;
  }
  if (!shm_reached(s, s->first, -1)) return SHM_STEP_WAIT;
  if (!shm_all_agree(s, op)) return SHM_STEP_DISAGREE;
  for (int q = 0; q < P; q++)
    in[q] = q == r ? (const void *)(send + (size_t)r * blk + at) : shm_slot(s, q) + (size_t)r * sub;
  gr__shm_reduce(op->dtype, op->op, in, P, (char *)op->recv + at, NULL, op->len);
  return SHM_STEP_DONE;
}

static shm_step allgather_step(gr__shm *s, gr__shm_op *op) {
  int P = s->size, r = s->rank;
  size_t es = gr__dtype_size(op->dtype), at = op->pos * es, blk = op->count * es;
  char *recv = op->recv;
  if (op->step == 1) {
    if (!shm_reached(s, s->ready, -1)) return SHM_STEP_WAIT;
    memcpy(shm_place(s, r, op->len * es), (const char *)op->send + at, op->len * es);
    shm_announce(s, op);
    shm_raise(s);
    if (op->send != recv + (size_t)r * blk)
      memcpy(recv + (size_t)r * blk + at, (const char *)op->send + at, op->len * es);
    op->step = 2;
    op->sub = 1;
  }
  for (; op->sub < P; op->sub++) { /* each peer's block as soon as it is there */
    int q = (r + op->sub) % P;
    if (!shm_reached(s, s->first, q)) return SHM_STEP_WAIT;
    if (!shm_agrees(s, op, q)) return SHM_STEP_DISAGREE;
    memcpy(recv + (size_t)q * blk + at, shm_place(s, q, op->len * es), op->len * es);
    s->moves++;
  }
  return SHM_STEP_DONE;
}

static shm_step broadcast_step(gr__shm *s, gr__shm_op *op) {
  size_t es = gr__dtype_size(op->dtype), at = op->pos * es;
  if (s->rank == op->root) {
    if (op->step == 1) {
      if (!shm_reached(s, s->ready, -1)) return SHM_STEP_WAIT;
      memcpy(shm_place(s, op->root, op->len * es), (const char *)op->send + at, op->len * es);
      shm_announce(s, op);
      shm_raise(s);
      if (op->send != op->recv)
        memcpy((char *)op->recv + at, (const char *)op->send + at, op->len * es);
      op->step = 2;
    }
    /* the first round: the root, too, waits for every descriptor, so that all ranks agree */
    if (op->pos) return SHM_STEP_DONE;
    if (!shm_reached(s, s->first, -1)) return SHM_STEP_WAIT;
    return shm_all_agree(s, op) ? SHM_STEP_DONE : SHM_STEP_DISAGREE;
  }
  if (op->step == 1) {
    /* the first round writes a descriptor: its place must be free, as a buffer's */
    if (!op->pos && !shm_reached(s, s->ready, -1)) return SHM_STEP_WAIT;
    shm_announce(s, op);
    shm_raise(s); /* this rank is done with the previous round */
    op->step = 2;
  }
  if (!shm_reached(s, s->first, op->pos ? op->root : -1)) return SHM_STEP_WAIT;
  if (!shm_all_agree(s, op)) return SHM_STEP_DISAGREE;
  memcpy((char *)op->recv + at, shm_place(s, op->root, op->len * es), op->len * es);
  return SHM_STEP_DONE;
}

/* A refusing rank: the first round's shape of every kind (descriptor, one raise, a wait for every
 * rank's), no data; the call fails here on this rank whatever the others' descriptors say. */
static shm_step refused_step(gr__shm *s, gr__shm_op *op) {
  if (op->step == 1) {
    if (!shm_reached(s, s->ready, -1)) return SHM_STEP_WAIT;
    shm_announce(s, op);
    shm_raise(s);
    op->step = 2;
  }
  if (!shm_reached(s, s->first, -1)) return SHM_STEP_WAIT;
  if (shm_all_agree(s, op)) op->seen = SHM_SEEN_SELF_REFUSED; /* else: what differed, first */
  op->failed = SHM_FAILED_REFUSED;
  return SHM_STEP_DISAGREE;
}

/* Reduce (small_here): every rank's input in its slot, one synchronisation, the root reduces them
 * all (rank order) into recv. A non-root is done once it has seen every descriptor: its slot is
 * rewritten two rounds later only, after the root has started the next round. */
static shm_step reduce_step(gr__shm *s, gr__shm_op *op) {
  int P = s->size, r = s->rank;
  size_t es = gr__dtype_size(op->dtype);
  const void *in[GR__SHM_MAX_RANKS];
  if (op->step == 1) {
    if (!shm_reached(s, s->ready, -1)) return SHM_STEP_WAIT;
    if (r != op->root) memcpy(shm_place(s, r, op->count * es), op->send, op->count * es);
    shm_announce(s, op);
    shm_raise(s);
    op->step = 2;
  }
  if (!shm_reached(s, s->first, -1)) return SHM_STEP_WAIT;
  if (!shm_all_agree(s, op)) return SHM_STEP_DISAGREE;
  if (r != op->root) return SHM_STEP_DONE;
  for (int q = 0; q < P; q++)
    in[q] = q == r ? op->send : (const void *)shm_place(s, q, op->count * es);
  gr__shm_reduce(op->dtype, op->op, in, P, op->recv, NULL, op->count);
  return SHM_STEP_DONE;
}

/* Alltoall (small_here): every rank's P blocks in its slot, one synchronisation, then block r of
 * every peer's slot. In place is safe: the input is in the slot before recv is written. */
static shm_step alltoall_step(gr__shm *s, gr__shm_op *op) {
  int P = s->size, r = s->rank;
  size_t blk = op->count * gr__dtype_size(op->dtype);
  const char *send = op->send;
  char *recv = op->recv;
  if (op->step == 1) {
    if (!shm_reached(s, s->ready, -1)) return SHM_STEP_WAIT;
    memcpy(shm_place(s, r, (size_t)P * blk), send, (size_t)P * blk);
    shm_announce(s, op);
    shm_raise(s);
    op->step = 2;
  }
  if (!shm_reached(s, s->first, -1)) return SHM_STEP_WAIT;
  if (!shm_all_agree(s, op)) return SHM_STEP_DISAGREE;
  for (int i = 0; i < P; i++) { /* start after me, so that the ranks read different slots */
    int q = (r + i) % P;
    memcpy(recv + (size_t)q * blk, shm_place(s, q, (size_t)P * blk) + (size_t)r * blk, blk);
  }
  return SHM_STEP_DONE;
}

static shm_step barrier_step(gr__shm *s, gr__shm_op *op) {
  if (op->step == 1) {
    if (!shm_reached(s, s->ready, -1)) return SHM_STEP_WAIT; /* the descriptor's place is free */
    shm_announce(s, op);
    shm_raise(s);
    op->step = 2;
  }
  if (!shm_reached(s, s->first, -1)) return SHM_STEP_WAIT;
  return shm_all_agree(s, op) ? SHM_STEP_DONE : SHM_STEP_DISAGREE;
}

shm_step gr__shm_slots_step(gr__shm *s, gr__shm_op *op) {
  if (op->refused) return refused_step(s, op);
  switch (op->kind) {
  case GR__ALLREDUCE:
    return allreduce_step(s, op);
  case GR__REDUCE_SCATTER:
    return reduce_scatter_step(s, op);
  case GR__ALLGATHER:
    return allgather_step(s, op);
  case GR__BROADCAST:
    return broadcast_step(s, op);
  case GR__REDUCE:
    return op->mode == SHM_MODE_AGREE ? barrier_step(s, op) : reduce_step(s, op);
  case GR__ALLTOALL:
    return op->mode == SHM_MODE_AGREE ? barrier_step(s, op) : alltoall_step(s, op);
  default:
    return barrier_step(s, op);
  }
}
