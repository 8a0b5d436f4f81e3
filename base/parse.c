/* The decimal integer parser (see gr_parse.h). Written out rather than on strtoll, which skips
 * leading whitespace, depends on the locale and reports overflow only through errno. */
#include "gr_parse.h"

#include <limits.h>

gr_status gr__parse_ll(const char *s, long long lo, long long hi, long long *out) {
  if (!s) return GR_ERR_INVALID;
  int neg = 0;
  if (*s == '+' || *s == '-') neg = *s++ == '-';
  if (*s < '0' || *s > '9') return GR_ERR_INVALID;
  /* accumulate as a negative number: its range includes LLONG_MIN */
  long long v = 0;
  for (; *s >= '0' && *s <= '9'; s++) {
    int d = *s - '0';
    if (v < (LLONG_MIN + d) / 10) return GR_ERR_INVALID;
    v = v * 10 - d;
  }
  if (*s) return GR_ERR_INVALID;
  if (!neg) {
    if (v == LLONG_MIN) return GR_ERR_INVALID;
    v = -v;
  }
  if (v < lo || v > hi) return GR_ERR_INVALID;
  *out = v;
  return GR_OK;
}

gr_status gr__parse_int(const char *s, int lo, int hi, int *out) {
  long long v;
  if (gr__parse_ll(s, lo, hi, &v) != GR_OK) return GR_ERR_INVALID;
  *out = (int)v;
  return GR_OK;
}
