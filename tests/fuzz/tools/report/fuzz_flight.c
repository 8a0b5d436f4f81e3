/* libFuzzer target for the flight-dump analysis: the input is split at 0xff bytes into up to four
 * dumps (flight.0.json ... flight.3.json) of one job, which gpurun-report reads, matches across
 * ranks and follows wait-for chains through; the findings it produces must be valid JSON. */
#include "gr_json_read.h"
#include "gr_report.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 1 << 16) return 0;
  if (!dir[0]) {
    snprintf(dir, sizeof dir, "/tmp/gr_fuzz_flight_%d", (int)getpid());
    mkdir(dir, 0700);
  }
  size_t start = 0;
  for (int r = 0; r < 4; r++) {
    char path[128];
    snprintf(path, sizeof path, "%s/flight.%d.json", dir, r);
    unlink(path);
    if (start > size) continue;
    size_t end = start;
    while (end < size && data[end] != 0xff)
      end++;
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    fwrite(data + start, 1, end - start, f);
    fclose(f);
    start = end + 1;
  }
  FILE *null = fopen("/dev/null", "w");
  if (!null) return 0;
  char *json = NULL, *wait = NULL;
  int nd = 0;
  if (gr__rpt_flight(dir, null, &json, &wait, &nd) == GR_OK && nd > 0) {
    gr__rpt_json *v = json ? gr__rpt_json_parse(json, NULL) : NULL;
    if (json && !v) abort();
    gr__rpt_json_free(v);
    v = wait ? gr__rpt_json_parse(wait, NULL) : NULL;
    if (wait && !v) abort();
    gr__rpt_json_free(v);
  }
  free(json);
  free(wait);
  fclose(null);
  return 0;
}
