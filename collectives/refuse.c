/* Refusals without check mode, the arithmetic: the verdict word and its sentence, the agreement on
 * it before a call (ROUTE_AGREE), and the in-band form's pack and flag. Nothing here runs a call:
 * the sequencer (sequencer.c) runs the in-band form and the refusing rank's part in the exchange
 * (gr__run_inband, gr__join_refused), calling down into this file, never the other way round. */
#include "gr_front.h"

#include "gr_agree.h"
#include "gr_dtype.h"
#include "gr_error.h"
#include "gr_path.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- refusals without check mode (coll.h, Errors) ------------------------------------------- */

/* The part of this thread's last error after "rank R: fn: ", to record again after the exchange. */
void gr__own_sentence(char *buf, size_t len, const char *fn) {
  const char *e = gr_last_error(), *p = strstr(e, fn);
  p = p ? p + strlen(fn) : e;
  if (p[0] == ':' && p[1] == ' ') p += 2;
  snprintf(buf, len, "%s", p);
}

/* The verdict word: 0, or the lowest refusing rank and its argument win under MAX. */
int gr__verdict_word(const gr_comm *c, int arg) {
  int r = c->rank < 0xfffff ? c->rank : 0xfffff;
  return arg ? 1 << 30 | (0xfffff - r) << 8 | (arg & 0xff) : 0;
}

gr_status gr__verdict_fail(const char *fn, const gr_comm *c, int all, const char *what) {
  return gr__fail(GR_ERR_INVALID, fn,
                  "rank %d of communicator %s rejected its own %s in %s; no "
                  "rank sent anything",
                  0xfffff - ((all >> 8) & 0xfffff), c->id, gr__arg_name(all & 0xff), what);
}

/* ROUTE_AGREE for one call; arg is this rank's refusal (GR__ARG_NONE: none). One agreement round
 * (gr__agree, MAX of the verdict word) over c->mpi: the same round as a group's on each of its
 * communicators (group.c's agree_group), which a rank that refused one buffer of
 * gr_allreduce_multi alone meets here (fused.c). */
gr_status gr__agree_call(const char *fn, gr__call *k, int arg) {
  gr_comm *c = k->comm;
  int64_t word = gr__verdict_word(c, arg), all = 0;
  gr_status st = gr__agree(c, "the arguments", GR__AGREE_MAX, &word, &all, 1);
  if (st == GR_ERR_TIMEOUT) { /* its words went to the lost list with the request */
    k->seq = c->seq + 1;
    c->err[0] = '\0';
    return gr__timed_out(fn, k, "the agreement on the arguments before");
  }
  if (st == GR_ERR_MPI)
    return gr__fail(GR_ERR_MPI, fn, "the agreement on the arguments: MPI_Iallreduce failed");
  if (st != GR_OK) return gr__fail(st, fn, "%s", c->err);
  if (!all) return GR_OK;
  char what[96];
  snprintf(what, sizeof what, "%s(count=%zu)", gr__kind_name(k->kind), k->count);
  return gr__verdict_fail(fn, c, (int)all, what);
}

/* ROUTE_AGREE's in-band form, for allreduces of up to INBAND_MAX bytes on host buffers: one more
 * element of the call's dtype carries whether a rank refused, as a value the op keeps apart from
 * the others' (SUM, AVG, MAX: 0 and 1; PROD, MIN: 1 and 0), so that the others learn it with the
 * data and only a refusal costs a second round (agree_call, which names the rank and argument).
 * Broadcasts of up to BCAST_INBAND_MAX bytes take it too, as an allreduce (MAX) of their bytes as
 * uint8 to which every rank but the root contributes zeros: exact for any data (MAX(x, 0) = x for
 * unsigned bytes), with the flag as one more byte. A broadcast cannot carry a refusal from the
 * other ranks to the root; an allreduce of a few KiB costs less than a verdict round followed by
 * the broadcast (bench/README.md, "Refusals").
 * The same choice on every rank: kind, count, dtype, op and the communicator decide it. 8-bit SUM
 * could wrap 256 refusals back to 0, so it needs fewer than 256 ranks. */
#define INBAND_MAX 65536
#define BCAST_INBAND_MAX 16384
int gr__inband(const gr__call *k) {
  size_t es = gr__dtype_size(k->dtype);
  if (k->comm->gpu_buffers || !es) return 0; /* es 0: not a gr_dtype (a refusal) */
  if (k->kind == GR__BROADCAST) return k->count < BCAST_INBAND_MAX / es;
  return k->kind == GR__ALLREDUCE && gr__op_defined(k->dtype, k->op) &&
         k->count < INBAND_MAX / es && !(es == 1 && k->op == GR_SUM && k->comm->size > 255);
}

static void inband_flag(gr_dtype t, gr_op op, int refused, unsigned char *out) {
  size_t es = gr__dtype_size(t);
  memset(out, 0, es);
  if ((op == GR_PROD || op == GR_MIN) == !!refused) return; /* 0 */
  uint16_t h = t == GR_FLOAT16 ? 0x3c00 : 0x3f80;           /* 1.0 in fp16, bf16 */
  uint32_t i32 = 1;
  uint64_t i64 = 1;
  float f = 1.0f;
  double d = 1.0;
  const void *one = t == GR_FLOAT16 || t == GR_BFLOAT16 ? (const void *)&h
                    : t == GR_FLOAT32                   ? (const void *)&f
                    : t == GR_FLOAT64                   ? (const void *)&d
                    : es == 8                           ? (const void *)&i64
                                                        : (const void *)&i32;
  if (es == 1)
    out[0] = 1;
  else
    memcpy(out, one, es);
}

/* Bytes of the in-band form of k (gr__inband(k)): the data and the flag element. */
size_t gr__inband_bytes(const gr__call *k) {
  size_t es = gr__dtype_size(k->dtype), n = k->count * es;
  return k->kind == GR__BROADCAST ? n + 1 : n + es;
}

/* j = the in-band form of the user's call k on the buffer p (gr__inband_bytes(k)): this rank's
 * data, or zeros where it has none to give (a broadcast's non-root) or refused (arg), then the
 * flag. */
void gr__inband_pack(const gr__call *k, int arg, unsigned char *p, gr__call *j) {
  size_t n = k->count * gr__dtype_size(k->dtype);
  int bcast = k->kind == GR__BROADCAST;
  if (!arg && n && (!bcast || k->root == k->comm->rank))
    memcpy(p, k->send, n);
  else
    memset(p, 0, n);
  *j = *k;
  j->send = j->recv = p;
  j->count = k->count + 1;
  if (bcast) {
    j->kind = GR__ALLREDUCE, j->dtype = GR_UINT8, j->op = GR_MAX, j->root = -1;
    j->count = n + 1;
  }
  inband_flag(j->dtype, j->op, arg, p + n);
  j->fe_flags |= GR__FE_INBAND;
  j->fe_refused = GR__ARG_NONE;
  j->fe_shown = k;
}

/* Whether the flag of the in-band call j (done) says nobody refused. */
int gr__inband_clear(const gr__call *j) {
  size_t es = gr__dtype_size(j->dtype);
  _Alignas(16) unsigned char ok[16];
  inband_flag(j->dtype, j->op, 0, ok);
  return memcmp((const unsigned char *)j->recv + (j->count - 1) * es, ok, es) == 0;
}
