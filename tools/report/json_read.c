/* Recursive-descent JSON reader (RFC 8259 grammar, depth-limited). */
#include "gr_json_read.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gr_error.h"
#include "gr_safefile.h"

typedef struct {
  const char *s, *p;
  int depth, bad;
} parser;

static void ws(parser *ps) {
  while (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r')
    ps->p++;
}

static gr__rpt_json *node(gr__rpt_json_type t) {
  gr__rpt_json *v = calloc(1, sizeof *v);
  if (v) v->type = t;
  return v;
}

static char *string(parser *ps) {
  if (*ps->p != '"') return NULL;
  ps->p++;
  size_t cap = 16, len = 0;
  char *out = malloc(cap);
  if (!out) return NULL;
  for (;;) {
    /* Never step past the terminating NUL: a failed string leaves p on it (the caller still
     * looks at *p). */
    char c = *ps->p;
    if (c == '\0' || (unsigned char)c < 0x20) {
      free(out);
      return NULL;
    }
    ps->p++;
    if (c == '"') break;
    if (c == '\\') {
      char e = *ps->p;
      if (e) ps->p++;
      switch (e) {
      case '"':
      case '\\':
      case '/':
        c = e;
        break;
      case 'b':
        c = '\b';
        break;
      case 'f':
        c = '\f';
        break;
      case 'n':
        c = '\n';
        break;
      case 'r':
        c = '\r';
        break;
      case 't':
        c = '\t';
        break;
      case 'u': {
        unsigned code = 0;
        for (int i = 0; i < 4; i++) {
          char h = *ps->p;
          if (!isxdigit((unsigned char)h)) {
            free(out);
            return NULL;
          }
          ps->p++;
          code =
              code * 16 + (unsigned)(isdigit((unsigned char)h) ? h - '0' : (tolower(h) - 'a' + 10));
        }
        c = code < 0x80 && code != 0 ? (char)code : '?'; /* never an embedded NUL */
        break;
      }
      default:
        free(out);
        return NULL;
      }
    }
    if (len + 2 > cap) {
      cap *= 2;
      char *n = realloc(out, cap);
      if (!n) {
        free(out);
        return NULL;
      }
      out = n;
    }
    out[len++] = c;
  }
  out[len] = '\0';
  return out;
}

static gr__rpt_json *value(parser *ps);

static gr__rpt_json *container(parser *ps, int obj) {
  gr__rpt_json *v = node(obj ? GR__RPT_JSON_OBJ : GR__RPT_JSON_ARR);
  if (!v) return NULL;
  ps->p++;
  ws(ps);
  char close = obj ? '}' : ']';
  if (*ps->p == close) {
    ps->p++;
    return v;
  }
  gr__rpt_json **tail = &v->child;
  for (;;) {
    ws(ps);
    char *key = NULL;
    if (obj) {
      key = string(ps);
      ws(ps);
      if (!key || *ps->p != ':') {
        free(key);
        gr__rpt_json_free(v);
        return NULL;
      }
      ps->p++;
    }
    gr__rpt_json *c = value(ps);
    if (!c) {
      free(key);
      gr__rpt_json_free(v);
      return NULL;
    }
    c->key = key;
    *tail = c;
    tail = &c->next;
    ws(ps);
    if (*ps->p == ',') {
      ps->p++;
      continue;
    }
    if (*ps->p == close) {
      ps->p++;
      return v;
    }
    gr__rpt_json_free(v);
    return NULL;
  }
}

static gr__rpt_json *value(parser *ps) {
  ws(ps);
  if (++ps->depth > GR__RPT_JSON_MAX_DEPTH) return NULL;
  gr__rpt_json *v = NULL;
  char c = *ps->p;
  if (c == '{' || c == '[') {
    v = container(ps, c == '{');
  } else if (c == '"') {
    char *s = string(ps);
    if (s && (v = node(GR__RPT_JSON_STR)))
      v->str = s;
    else
      free(s);
  } else if (!strncmp(ps->p, "true", 4) || !strncmp(ps->p, "false", 5)) {
    v = node(GR__RPT_JSON_BOOL);
    if (v) v->num = c == 't';
    ps->p += c == 't' ? 4 : 5;
  } else if (!strncmp(ps->p, "null", 4)) {
    v = node(GR__RPT_JSON_NULL);
    ps->p += 4;
  } else if (c == '-' || isdigit((unsigned char)c)) {
    /* RFC 8259 number grammar first (strtod alone would take "-inf", "nan", "0x1p4"), then a
     * finite value: 1e999 is refused, not turned into infinity. */
    const char *q = ps->p;
    if (*q == '-') q++;
    int ok = isdigit((unsigned char)*q);
    if (*q == '0')
      q++;
    else
      while (isdigit((unsigned char)*q))
        q++;
    if (ok && *q == '.') {
      q++;
      ok = isdigit((unsigned char)*q);
      while (isdigit((unsigned char)*q))
        q++;
    }
    if (ok && (*q == 'e' || *q == 'E')) {
      q++;
      if (*q == '+' || *q == '-') q++;
      ok = isdigit((unsigned char)*q);
      while (isdigit((unsigned char)*q))
        q++;
    }
    char *end;
    double d = ok ? strtod(ps->p, &end) : 0;
    if (ok && end == q && isfinite(d) && (v = node(GR__RPT_JSON_NUM))) {
      v->num = d;
      ps->p = end;
    }
  }
  ps->depth--;
  return v;
}

gr__rpt_json *gr__rpt_json_parse(const char *text, size_t *err_at) {
  parser ps = {text, text, 0, 0};
  gr__rpt_json *v = value(&ps);
  ws(&ps);
  if (v && *ps.p != '\0') {
    gr__rpt_json_free(v);
    v = NULL;
  }
  if (!v && err_at) *err_at = (size_t)(ps.p - text);
  return v;
}

gr__rpt_json *gr__rpt_json_parse_file(const char *path, size_t *err_at) {
  gr__rpt_json *v = NULL;
  gr__rpt_json_parse_file_at(AT_FDCWD, path, GR__RPT_JSON_MAX_FILE, err_at, &v);
  return v;
}

gr_status gr__rpt_json_parse_file_at(int dirfd, const char *name, size_t max, size_t *err_at,
                                     gr__rpt_json **out) {
  size_t len = 0, at = 0;
  *out = NULL;
  if (err_at) *err_at = 0;
  char *buf;
  gr_status st = gr__file_read(dirfd, name, max, &buf, &len);
  if (st != GR_OK) return st; /* its sentence stands */
  if (strlen(buf) != len) {
    if (err_at) *err_at = strlen(buf);
    st = gr__fail_msg(GR_ERR_INVALID, "a NUL byte at byte %zu", strlen(buf));
    free(buf);
    return st;
  }
  *out = gr__rpt_json_parse(buf, &at);
  free(buf);
  if (err_at) *err_at = at;
  return *out ? GR_OK : gr__fail_msg(GR_ERR_INVALID, "not valid JSON at byte %zu", at);
}

void gr__rpt_json_free(gr__rpt_json *v) {
  while (v) {
    gr__rpt_json *next = v->next;
    gr__rpt_json_free(v->child);
    free(v->str);
    free(v->key);
    free(v);
    v = next;
  }
}

const gr__rpt_json *gr__rpt_json_get(const gr__rpt_json *v, const char *key) {
  if (!v || v->type != GR__RPT_JSON_OBJ) return NULL;
  for (const gr__rpt_json *c = v->child; c; c = c->next)
    if (c->key && !strcmp(c->key, key)) return c;
  return NULL;
}

double gr__rpt_json_num(const gr__rpt_json *v, const char *key, double dflt) {
  const gr__rpt_json *m = gr__rpt_json_get(v, key);
  return m && (m->type == GR__RPT_JSON_NUM || m->type == GR__RPT_JSON_BOOL) ? m->num : dflt;
}

const char *gr__rpt_json_str(const gr__rpt_json *v, const char *key) {
  const gr__rpt_json *m = gr__rpt_json_get(v, key);
  return m && m->type == GR__RPT_JSON_STR ? m->str : NULL;
}
