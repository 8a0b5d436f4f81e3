/* libFuzzer target for gpurun-report's JSON reader (counters files and flight dumps): any input
 * either parses into a tree that can be walked and freed, or is refused; never a crash, a read
 * past the input, unbounded recursion or a non-finite number. */
#include "json.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void walk(const grj *v) {
  for (; v; v = v->next) {
    if (v->type == GRJ_NUM && !isfinite(v->num)) abort();
    if (v->type == GRJ_STR && !v->str) abort();
    walk(v->child);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 1 << 16) return 0;
  char *buf = malloc(size + 1);
  if (!buf) return 0;
  memcpy(buf, data, size);
  buf[size] = '\0';
  size_t at = 0;
  grj *v = grj_parse(buf, &at);
  if (!v && at > size) abort();
  walk(v);
  (void)grj_num(v, "rank", -1);
  (void)grj_str(v, "node");
  grj_free(v);
  free(buf);
  return 0;
}
