/* libFuzzer target: the integer parser (base/parse.c) against an independent reference on
 * arbitrary bytes and ranges. The reference decides the grammar by hand (optional sign, digits,
 * nothing else) and computes the value in __int128 from at most 25 significant digits, so it
 * cannot overflow where the parser under test must detect it. */
#include "gr_parse.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int reference(const char *s, long long lo, long long hi, long long *out) {
  const char *p = s;
  int neg = 0;
  if (*p == '+' || *p == '-') neg = *p++ == '-';
  if (!*p) return -1;
  for (const char *q = p; *q; q++)
    if (*q < '0' || *q > '9') return -1;
  while (*p == '0' && p[1])
    p++;                         /* leading zeros */
  if (strlen(p) > 25) return -1; /* beyond any long long, within __int128 */
  __int128 v = 0;
  for (; *p; p++)
    v = v * 10 + (*p - '0');
  if (neg) v = -v;
  if (v < lo || v > hi) return -1;
  *out = (long long)v;
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* the first 16 bytes pick the range, the rest is the text */
  long long b[2] = {LLONG_MIN, LLONG_MAX};
  if (size >= 16) {
    memcpy(b, data, 16);
    data += 16, size -= 16;
    if (b[0] > b[1]) {
      long long t = b[0];
      b[0] = b[1], b[1] = t;
    }
  }
  char *s = malloc(size + 1);
  if (!s) return 0;
  memcpy(s, data, size);
  s[size] = '\0'; /* an embedded NUL ends the text for both */
  long long got = 7, want = 7;
  int ok = gr__parse_ll(s, b[0], b[1], &got) == GR_OK;
  int ref_ok = reference(s, b[0], b[1], &want) == 0;
  if (ok != ref_ok || got != want) abort();
  int gi = 7, lo = b[0] < INT_MIN ? INT_MIN : b[0] > INT_MAX ? INT_MAX : (int)b[0];
  int hi = b[1] < INT_MIN ? INT_MIN : b[1] > INT_MAX ? INT_MAX : (int)b[1];
  ok = gr__parse_int(s, lo, hi, &gi) == GR_OK;
  ref_ok = reference(s, lo, hi, &want) == 0;
  if (ok != ref_ok || (ok && gi != want) || (!ok && gi != 7)) abort();
  free(s);
  return 0;
}
