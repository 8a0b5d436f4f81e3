/* Internal: the one string builder. Text is appended into either a caller's fixed buffer or a
 * heap buffer that grows up to a limit. Whatever does not fit is cut: the buffer then holds a
 * prefix of the text (never half a UTF-8 sequence), stays NUL-terminated, `truncated` is set and
 * later appends add nothing. Running out of memory or a failing format cuts the same way, so no
 * append ever fails loudly and the caller checks `truncated` once at the end.
 * MPI-free; the tools use it too. */
#ifndef GR_STRBUF_H
#define GR_STRBUF_H

#include <stdarg.h>
#include <stddef.h>

#include "gpurun/export.h"

typedef struct gr__strbuf {
  char *buf;     /* the text, NUL-terminated once cap > 0; NULL for a heap one not yet grown */
  size_t len;    /* bytes of text, NUL not counted */
  size_t cap;    /* bytes of buf, NUL included */
  size_t max;    /* heap: the most bytes of text it may hold; 0 for a fixed one */
  int heap;      /* buf is malloc'd and may grow */
  int truncated; /* some text was cut: no room, the heap limit, no memory or a bad format */
} gr__strbuf;

/* Into buf (cap bytes, cap 0 allowed: then buf may be NULL and nothing is kept). */
void gr__strbuf_init_fixed(gr__strbuf *sb, char *buf, size_t cap);
/* Into buf after the text it already holds (NUL-terminated within cap bytes; cap > 0): for a
 * field that several calls extend. */
void gr__strbuf_init_tail(gr__strbuf *sb, char *buf, size_t cap);
/* On the heap, up to max bytes of text. Allocates nothing until the first append. */
void gr__strbuf_init_heap(gr__strbuf *sb, size_t max);

void gr__strbuf_appendf(gr__strbuf *sb, const char *fmt, ...) GR_PRINTF(2, 3);
void gr__strbuf_vappendf(gr__strbuf *sb, const char *fmt, va_list ap) GR_PRINTF(2, 0);
/* n bytes of p as they are (a NUL among them included). */
void gr__strbuf_append(gr__strbuf *sb, const void *p, size_t n);
void gr__strbuf_putc(gr__strbuf *sb, char c);

/* The text so far; "" for an empty one, never NULL. Valid until the next append or free. */
const char *gr__strbuf_str(const gr__strbuf *sb);
size_t gr__strbuf_len(const gr__strbuf *sb);

/* Heap: the buffer, handed to the caller (free() it; NULL when nothing was ever allocated) and
 * *len its length when len is given; sb is left empty. Fixed: NULL. */
char *gr__strbuf_release(gr__strbuf *sb, size_t *len);
/* Heap: frees the buffer. Fixed: nothing. Either way sb is left empty. */
void gr__strbuf_free(gr__strbuf *sb);

#endif
