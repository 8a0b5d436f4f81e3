/* Parser of the live-state file (see gr_live_file.h). Pure: no I/O, no allocation. */
#include "gr_live_file.h"

#include "gr_parse.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gr__live_clean(char *dst, size_t cap, const char *src, size_t srclen) {
  if (!cap) return;
  size_t n = 0;
  for (; n < srclen && n + 1 < cap; n++) {
    unsigned char c = (unsigned char)src[n];
    int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
             c == '.' || c == '_' || c == ':' || c == '-';
    dst[n] = ok ? (char)c : '?';
  }
  dst[n] = '\0';
}

/* Splits one line into at most max whitespace-separated tokens (pointer + length). */
static int tokens(const char *p, const char *end, const char **tok, size_t *tlen, int max) {
  int n = 0;
  while (p < end) {
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\r'))
      p++;
    if (p >= end) break;
    const char *s = p;
    while (p < end && *p != ' ' && *p != '\t' && *p != '\r')
      p++;
    if (n == max) return max + 1; /* too many: the line is not ours */
    tok[n] = s;
    tlen[n++] = (size_t)(p - s);
  }
  return n;
}

static int num(const char *t, size_t len, double *out) {
  char buf[40];
  if (len == 0 || len >= sizeof buf) return -1;
  memcpy(buf, t, len);
  buf[len] = '\0';
  errno = 0;
  char *e;
  double v = strtod(buf, &e);
  if (errno || *e || !isfinite(v)) return -1;
  *out = v;
  return 0;
}

static int integer(const char *t, size_t len, long long lo, long long hi, long long *out) {
  char buf[24];
  if (len == 0 || len >= sizeof buf) return -1;
  memcpy(buf, t, len);
  buf[len] = '\0';
  return gr__parse_ll(buf, lo, hi, out) == GR_OK ? 0 : -1;
}

static int is(const char *t, size_t len, const char *word) {
  return strlen(word) == len && memcmp(t, word, len) == 0;
}

/* The MPI layer's lines: 0 mpi_s, 1 mpi_coll_s, 2 mpi_inside_since; -1 another key. */
static int mpi_key(const char *t, size_t len) {
  static const char *const keys[] = {"mpi_s", "mpi_coll_s", "mpi_inside_since"};
  for (int k = 0; k < 3; k++)
    if (is(t, len, keys[k])) return k;
  return -1;
}

/* WAITS: "-" or items "rPEER:TAG" / "sPEER:TAG" joined by ','. */
static int parse_waits(const char *t, size_t len, gr__live_comm *c) {
  c->nwaits = 0;
  if (len == 1 && t[0] == '-') return 0;
  const char *p = t, *end = t + len;
  while (p < end) {
    const char *q = memchr(p, ',', (size_t)(end - p));
    const char *ie = q ? q : end;
    const char *colon = memchr(p, ':', (size_t)(ie - p));
    long long peer, tag;
    if (c->nwaits == GR_LIVE_MAX_WAITS || ie - p < 4 || (p[0] != 'r' && p[0] != 's') || !colon ||
        integer(p + 1, (size_t)(colon - p - 1), 0, 1 << 30, &peer) ||
        integer(colon + 1, (size_t)(ie - colon - 1), 0, 1 << 30, &tag))
      return -1;
    gr__live_wait *w = &c->waits[c->nwaits++];
    w->recv = p[0] == 'r';
    w->peer = (int)peer;
    w->tag = (int)tag;
    if (!q) break;
    p = q + 1;
    if (p == end) return -1; /* a trailing ',' */
  }
  return 0;
}

static int parse_comm(const char **tok, const size_t *tl, int n, int version, gr__live_comm *c) {
  if (n != (version == 1 ? 13 : 15)) return -1;
  long long rank, size, seq, count, calls;
  double start, end, busy;
  if (integer(tok[2], tl[2], 0, 1 << 30, &rank) || integer(tok[3], tl[3], 1, 1 << 30, &size) ||
      integer(tok[5], tl[5], 0, (long long)1 << 62, &seq) ||
      integer(tok[7], tl[7], 0, (long long)1 << 62, &count) || num(tok[9], tl[9], &start) ||
      num(tok[10], tl[10], &end) || integer(tok[11], tl[11], 0, (long long)1 << 62, &calls) ||
      num(tok[12], tl[12], &busy))
    return -1;
  gr__live_clean(c->id, sizeof c->id, tok[1], tl[1]);
  gr__live_clean(c->backend, sizeof c->backend, tok[4], tl[4]);
  gr__live_clean(c->op, sizeof c->op, tok[6], tl[6]);
  gr__live_clean(c->state, sizeof c->state, tok[8], tl[8]);
  c->rank = (int)rank;
  c->size = (int)size;
  c->seq = (unsigned long long)seq;
  c->count = (unsigned long long)count;
  c->calls = (unsigned long long)calls;
  c->start = start;
  c->end = end;
  c->busy_s = busy;
  c->nwaits = 0;
  if (version == 1)
    memcpy(c->name, c->id, sizeof c->id); /* both terminated; name is the longer */
  else if (parse_waits(tok[14], tl[14], c) != 0)
    return -1;
  else
    gr__live_clean(c->name, sizeof c->name, tok[13], tl[13]);
  return 0;
}

static int parse_creating(const char **tok, const size_t *tl, int n, gr__live_creating *c) {
  if (n != 7) return -1;
  long long rank, size;
  double start;
  if (integer(tok[4], tl[4], 0, 1 << 30, &rank) || integer(tok[5], tl[5], 1, 1 << 30, &size) ||
      rank >= size || num(tok[6], tl[6], &start) || !(start > 0))
    return -1;
  gr__live_clean(c->call, sizeof c->call, tok[1], tl[1]);
  gr__live_clean(c->step, sizeof c->step, tok[2], tl[2]);
  gr__live_clean(c->over, sizeof c->over, tok[3], tl[3]);
  c->rank = (int)rank;
  c->size = (int)size;
  c->start = start;
  return 0;
}

int gr__live_parse(const char *text, size_t len, gr__live *out) {
  memset(out, 0, sizeof *out);
  out->rank = out->size = -1;
  out->cpu_pct = -1;
  out->rss_kib = -1;
  out->beat = -1;
  int mpi = 0; /* the mpi_ lines seen, a bit each */
  double mv[3] = {0, 0, 0};
  size_t ml = strlen(GR_LIVE_MAGIC);
  int version = 2;
  if (len >= ml && memcmp(text, GR_LIVE_MAGIC_V1, ml) == 0)
    version = 1;
  else if (len < ml || memcmp(text, GR_LIVE_MAGIC, ml) != 0)
    return -1;
  if (len > ml && text[ml] != '\n') return -1;
  const char *p = text, *end = text + len;
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    const char *le = nl ? nl : end;
    const char *tok[16];
    size_t tl[16];
    int n = tokens(p, le, tok, tl, 16);
    p = nl ? nl + 1 : end;
    if (n < 2 || n > 16) continue;
    long long v;
    double d;
    int k = mpi_key(tok[0], tl[0]);
    if (k >= 0) { /* the MPI layer's figures (seconds, or a time since the epoch) */
      if (n == 2 && !num(tok[1], tl[1], &d) && d >= 0 && d < 1e12) {
        mv[k] = d;
        mpi |= 1 << k;
      }
      continue;
    }
    if (is(tok[0], tl[0], "rank") && n == 2 && !integer(tok[1], tl[1], 0, 1 << 30, &v))
      out->rank = (int)v;
    else if (is(tok[0], tl[0], "size") && n == 2 && !integer(tok[1], tl[1], 1, 1 << 30, &v))
      out->size = (int)v;
    else if (is(tok[0], tl[0], "pid") && n == 2 && !integer(tok[1], tl[1], 1, 1 << 30, &v))
      out->pid = (long)v;
    else if (is(tok[0], tl[0], "host") && n == 2)
      gr__live_clean(out->host, sizeof out->host, tok[1], tl[1]);
    else if (is(tok[0], tl[0], "state") && n == 2)
      gr__live_clean(out->state, sizeof out->state, tok[1], tl[1]);
    else if (is(tok[0], tl[0], "time") && n == 2 && !num(tok[1], tl[1], &d) && d >= 0)
      out->time = d;
    else if (is(tok[0], tl[0], "beat") && n == 2 &&
             !integer(tok[1], tl[1], 0, (long long)1 << 62, &v))
      out->beat = v;
    else if (is(tok[0], tl[0], "interval") && n == 2 && !num(tok[1], tl[1], &d) && d >= 0)
      out->interval = d;
    else if (is(tok[0], tl[0], "cpu_pct") && n == 2 && !num(tok[1], tl[1], &d) && d >= 0 && d < 1e6)
      out->cpu_pct = d;
    else if (is(tok[0], tl[0], "rss_kib") && n == 2 &&
             !integer(tok[1], tl[1], 0, (long long)1 << 50, &v))
      out->rss_kib = v;
    else if (is(tok[0], tl[0], "comm") && out->ncomms < GR_LIVE_MAX_COMMS &&
             parse_comm(tok, tl, n, version, &out->comm[out->ncomms]) == 0)
      out->ncomms++;
    else if (is(tok[0], tl[0], "creating") && out->ncreating < GR_LIVE_MAX_CREATING &&
             parse_creating(tok, tl, n, &out->creating[out->ncreating]) == 0)
      out->ncreating++;
  }
  if (mpi == 7) { /* all three or none: the layer writes them together */
    out->has_mpi = 1;
    out->mpi_s = mv[0];
    out->mpi_coll_s = mv[1];
    out->mpi_inside_since = mv[2];
  }
  return out->rank >= 0 ? 0 : -1;
}
