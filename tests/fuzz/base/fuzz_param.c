/* libFuzzer target: the GPURUN_* parsers (base/param.c) on arbitrary text. What each accepts is
 * checked against properties computed here: a seconds value is finite and inside its range and
 * reads back the same from "%.17g"; a size is below 2^64 and its number part reads back; a word
 * is one of its vocabulary's, compared by hand without case or blanks; a boolean is one of the
 * eight spellings; a refusal leaves the output untouched; the bad-value sentence always fits and
 * ends. */
#include "gr_param.h"

#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* s without the blanks around it, compared case-blind with w */
static int same_word(const char *s, const char *w) {
  while (isspace((unsigned char)*s))
    s++;
  size_t n = strlen(s);
  while (n && isspace((unsigned char)s[n - 1]))
    n--;
  if (n != strlen(w)) return 0;
  for (size_t i = 0; i < n; i++)
    if (tolower((unsigned char)s[i]) != tolower((unsigned char)w[i])) return 0;
  return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  int id = data[0] % GR_PARAM_COUNT;
  char *s = malloc(size);
  if (!s) return 0;
  memcpy(s, data + 1, size - 1);
  s[size - 1] = '\0';

  double lo = 0.01, hi = 3600, v = -7;
  if (gr__parse_seconds(s, lo, hi, &v) == 0) {
    if (!isfinite(v) || v < lo || v > hi) abort();
  } else if (v != -7) {
    abort();
  }
  if (gr__parse_seconds(s, 0, INFINITY, &v) == 0) {
    char back[64];
    double w = -1;
    snprintf(back, sizeof back, "%.17g", v);
    if (gr__parse_seconds(back, 0, INFINITY, &w) != 0 || w != v) abort();
  }

  unsigned long long z = 7;
  if (gr__parse_size(s, &z) == 0) {
    char plain[64];
    snprintf(plain, sizeof plain, "%llu", z);
    unsigned long long z2 = 0;
    if (gr__parse_size(plain, &z2) != 0) abort();
    /* an integer below 2^53 reads back exactly; above, within double rounding */
    if (z < (1ull << 53) ? z2 != z : fabs((double)z2 - (double)z) > (double)z * 1e-15) abort();
  } else if (z != 7) {
    abort();
  }

  int b = gr__parse_bool(s);
  static const char *const spell[] = {"1", "yes", "true", "on", "0", "no", "false", "off"};
  int want = -1;
  for (int i = 0; i < 8; i++)
    if (same_word(s, spell[i])) want = i < 4;
  if (b != want) abort();

  const gr_param_def *d = gr__param_def(id);
  if (d->type == GR_PARAM_WORD) {
    int w = -99, hit = 0;
    for (const gr_param_word *p = d->words; p->word; p++)
      hit |= same_word(s, p->word);
    if ((gr__parse_word(s, d->words, &w) == 0) != hit) abort();
    if (!hit && w != -99) abort();
  }

  gr_param_value pv;
  (void)gr__param_parse((gr_param_id)id, s, &pv);
  char sentence[160];
  gr__param_bad_sentence((gr_param_id)id, s, sentence, sizeof sentence);
  if (strnlen(sentence, sizeof sentence) >= sizeof sentence) abort();
  free(s);
  return 0;
}
