/* libFuzzer target for gpurun-report's JSON reader (counters files and flight dumps): any input
 * either parses into a tree that can be walked and freed, or is refused; never a crash, a read
 * past the input, unbounded recursion or a non-finite number. */
#include "gr_json_read.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void walk(const gr__rpt_json *v) {
  for (; v; v = v->next) {
    if (v->type == GR__RPT_JSON_NUM && !isfinite(v->num)) abort();
    if (v->type == GR__RPT_JSON_STR && !v->str) abort();
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
  gr__rpt_json *v = gr__rpt_json_parse(buf, &at);
  if (!v && at > size) abort();
  walk(v);
  (void)gr__rpt_json_num(v, "rank", -1);
  (void)gr__rpt_json_str(v, "node");
  gr__rpt_json_free(v);
  free(buf);
  return 0;
}
