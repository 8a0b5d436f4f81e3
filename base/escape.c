/* JSON, XML and terminal escapers (see gr_escape.h). */
#include "gr_escape.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* Length of the valid UTF-8 sequence at s (1-4) with its code point in *cp, or 0 when the byte
 * at s does not start one (overlong forms, surrogates and code points past U+10FFFF are invalid). */
static int utf8_seq(const unsigned char *s, unsigned *cp) {
  unsigned c = s[0];
  if (c < 0x80) {
    *cp = c;
    return 1;
  }
  int n;
  unsigned v, min;
  if ((c & 0xe0) == 0xc0) {
    n = 2, v = c & 0x1f, min = 0x80;
  } else if ((c & 0xf0) == 0xe0) {
    n = 3, v = c & 0x0f, min = 0x800;
  } else if ((c & 0xf8) == 0xf0) {
    n = 4, v = c & 0x07, min = 0x10000;
  } else {
    return 0;
  }
  for (int i = 1; i < n; i++) {
    if ((s[i] & 0xc0) != 0x80) return 0; /* also stops at the terminating NUL */
    v = (v << 6) | (s[i] & 0x3f);
  }
  if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) return 0;
  *cp = v;
  return n;
}

static int is_control(unsigned cp) { return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f); }

void gr__esc_json(FILE *f, const char *str) {
  const unsigned char *s = (const unsigned char *)(str ? str : "");
  fputc('"', f);
  while (*s) {
    unsigned cp;
    int n = utf8_seq(s, &cp);
    if (n == 0) {
      fputs("\\ufffd", f);
      s++;
      continue;
    }
    if (cp == '"' || cp == '\\')
      fprintf(f, "\\%c", (char)cp);
    else if (is_control(cp) || cp == 0x2028 || cp == 0x2029)
      fprintf(f, "\\u%04x", cp);
    else
      fwrite(s, 1, (size_t)n, f);
    s += n;
  }
  fputc('"', f);
}

void gr__esc_xml(FILE *f, const char *str) {
  const unsigned char *s = (const unsigned char *)(str ? str : "");
  while (*s) {
    unsigned cp;
    int n = utf8_seq(s, &cp);
    if (n == 0 || is_control(cp) || cp == 0xfffe || cp == 0xffff) {
      fputs("\xef\xbf\xbd", f); /* U+FFFD */
      s += n ? n : 1;
      continue;
    }
    switch (cp) {
    case '&': fputs("&amp;", f); break;
    case '<': fputs("&lt;", f); break;
    case '>': fputs("&gt;", f); break;
    case '"': fputs("&quot;", f); break;
    case '\'': fputs("&apos;", f); break;
    default: fwrite(s, 1, (size_t)n, f);
    }
    s += n;
  }
}

void gr__esc_term(FILE *f, const char *str) {
  const unsigned char *s = (const unsigned char *)(str ? str : "");
  while (*s) {
    unsigned cp;
    int n = utf8_seq(s, &cp);
    if (n == 0) {
      fprintf(f, "\\x%02x", *s);
      s++;
      continue;
    }
    if (is_control(cp))
      fprintf(f, "\\x%02x", cp);
    else
      fwrite(s, 1, (size_t)n, f);
    s += n;
  }
}

const char *gr__esc_term_str(char *out, size_t cap, const char *s) {
  char *buf = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&buf, &len);
  out[0] = '\0';
  if (!m) return out;
  gr__esc_term(m, s);
  if (fclose(m) != 0 || !buf) {
    free(buf);
    return out;
  }
  /* the escapes are ASCII: cut before a partial "\\xNN" or a partial UTF-8 sequence */
  size_t n = len < cap ? len : cap - 1;
  if (n < len) {
    while (n > 0 && ((unsigned char)buf[n] & 0xc0) == 0x80)
      n--;
    for (size_t k = n >= 3 ? n - 3 : 0; k < n; k++)
      if (buf[k] == '\\') n = k;
  }
  memcpy(out, buf, n);
  out[n] = '\0';
  free(buf);
  return out;
}
