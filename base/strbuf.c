/* The string builder (gr_strbuf.h). */
#include "gr_strbuf.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GR_STRBUF_FIRST 256

void gr__strbuf_init_fixed(gr__strbuf *sb, char *buf, size_t cap) {
  memset(sb, 0, sizeof *sb);
  sb->buf = cap ? buf : NULL;
  sb->cap = sb->buf ? cap : 0;
  if (sb->cap) sb->buf[0] = '\0';
}

void gr__strbuf_init_tail(gr__strbuf *sb, char *buf, size_t cap) {
  memset(sb, 0, sizeof *sb);
  sb->buf = buf;
  sb->cap = cap;
  sb->len = strnlen(buf, cap - 1);
  buf[sb->len] = '\0';
}

void gr__strbuf_init_heap(gr__strbuf *sb, size_t max) {
  memset(sb, 0, sizeof *sb);
  sb->heap = 1;
  sb->max = max < SIZE_MAX / 4 ? max : SIZE_MAX / 4; /* so doubling and +1 cannot overflow */
}

/* Room for n more bytes of text and the NUL, or as much as the limit and memory allow. Returns
 * whether all of it is there. */
static int grow(gr__strbuf *sb, size_t n) {
  size_t room = sb->cap > sb->len ? sb->cap - sb->len - 1 : 0;
  if (n <= room) return 1;
  if (!sb->heap) return 0;
  size_t most = sb->max; /* bytes of text */
  size_t want = sb->len + n;
  int all = want >= sb->len && want <= most;
  if (!all) want = most;
  if (want + 1 <= sb->cap) return 0;
  size_t cap = sb->cap ? sb->cap : GR_STRBUF_FIRST;
  while (cap < want + 1 && cap <= (most + 1) / 2)
    cap *= 2;
  if (cap < want + 1 || cap > most + 1) cap = want + 1;
  char *b = realloc(sb->buf, cap);
  if (!b) return 0;
  if (!sb->buf) b[0] = '\0';
  sb->buf = b;
  sb->cap = cap;
  return all;
}

/* The text was cut at sb->len: drop a UTF-8 sequence the cut left unfinished. */
static void cut(gr__strbuf *sb) {
  sb->truncated = 1;
  if (!sb->cap) return;
  size_t start = sb->len;
  while (start > 0 && sb->len - start < 4 && ((unsigned char)sb->buf[start - 1] & 0xC0) == 0x80)
    start--;
  if (start > 0) {
    unsigned char lead = (unsigned char)sb->buf[start - 1];
    size_t need = lead >= 0xF0 && lead <= 0xF7   ? 4
                  : lead >= 0xE0 && lead <= 0xEF ? 3
                  : lead >= 0xC2 && lead <= 0xDF ? 2
                                                 : 0;
    if (need && sb->len - (start - 1) < need) sb->len = start - 1;
  }
  sb->buf[sb->len] = '\0';
}

void gr__strbuf_vappendf(gr__strbuf *sb, const char *fmt, va_list ap) {
  if (sb->truncated) return;
  va_list aq;
  va_copy(aq, ap);
  size_t room = sb->cap > sb->len ? sb->cap - sb->len : 0;
  int n = vsnprintf(room ? sb->buf + sb->len : NULL, room, fmt, aq);
  va_end(aq);
  if (n < 0) {
    if (room) sb->buf[sb->len] = '\0';
    sb->truncated = 1;
    return;
  }
  if ((size_t)n < room || n == 0) {
    sb->len += (size_t)n;
    return;
  }
  if (grow(sb, (size_t)n)) {
    vsnprintf(sb->buf + sb->len, sb->cap - sb->len, fmt, ap);
    sb->len += (size_t)n;
    return;
  }
  if (!sb->cap) {
    sb->truncated = 1;
    return;
  }
  if (sb->cap - sb->len > room) vsnprintf(sb->buf + sb->len, sb->cap - sb->len, fmt, ap);
  sb->len = sb->cap - 1; /* vsnprintf kept what fits */
  cut(sb);
}

void gr__strbuf_appendf(gr__strbuf *sb, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  gr__strbuf_vappendf(sb, fmt, ap);
  va_end(ap);
}

void gr__strbuf_append(gr__strbuf *sb, const void *p, size_t n) {
  if (sb->truncated || !n) return;
  int all = grow(sb, n);
  size_t room = sb->cap > sb->len ? sb->cap - sb->len - 1 : 0;
  size_t k = all ? n : room;
  if (k) memcpy(sb->buf + sb->len, p, k);
  sb->len += k;
  if (sb->cap) sb->buf[sb->len] = '\0';
  if (!all) cut(sb);
}

void gr__strbuf_putc(gr__strbuf *sb, char c) { gr__strbuf_append(sb, &c, 1); }

const char *gr__strbuf_str(const gr__strbuf *sb) { return sb->cap ? sb->buf : ""; }

size_t gr__strbuf_len(const gr__strbuf *sb) { return sb->len; }

char *gr__strbuf_release(gr__strbuf *sb, size_t *len) {
  char *b = sb->heap ? sb->buf : NULL;
  if (len) *len = b ? sb->len : 0;
  if (sb->heap)
    gr__strbuf_init_heap(sb, sb->max);
  else
    gr__strbuf_init_fixed(sb, sb->buf, sb->cap);
  return b;
}

void gr__strbuf_free(gr__strbuf *sb) { free(gr__strbuf_release(sb, NULL)); }
