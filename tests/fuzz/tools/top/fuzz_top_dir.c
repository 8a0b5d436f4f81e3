/* libFuzzer target: gpurun-top's loader and frame on a job directory whose files are the input
 * (hostile CSV tails, live files): input = CSV bytes, NUL, live-file bytes. Each run writes the two
 * files into one scratch directory, loads, analyses and draws; ASan/UBSan watch, and a frame
 * line wider than 79 columns aborts. */
#include "gr_top.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[64];

static void put(const char *name, const uint8_t *p, size_t n) {
  char path[128];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f) abort();
  if (n) fwrite(p, 1, n, f);
  fclose(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!dir[0]) {
    snprintf(dir, sizeof dir, "/tmp/gr_fuzz_top.XXXXXX");
    if (!mkdtemp(dir)) abort();
  }
  const uint8_t *nul = memchr(data, 0, size);
  size_t csv = nul ? (size_t)(nul - data) : size;
  put("node.0.csv", data, csv);
  put("live.0", nul ? nul + 1 : data, nul ? size - csv - 1 : 0);
  static gr__top_job job; /* one job reloaded for every input, as gpurun-top reloads its own */
  static int ready;
  if (!ready) {
    gr__top_job_init(&job);
    ready = 1;
  }
  snprintf(job.dir, sizeof job.dir, "%s", dir);
  job.hang_s = 0;
  if (gr__top_load(&job) != 0) abort();
  /* the man page's promise: every line of a frame fits 80 columns (79 used), uncut too */
  char *buf = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&buf, &len);
  if (!m) abort();
  gr__top_render(m, &job, 0, -1, 0, 1.0);
  fclose(m);
  for (const char *line = buf, *nl; line && *line; line = nl ? nl + 1 : NULL) {
    nl = strchr(line, '\n');
    if ((nl ? (size_t)(nl - line) : strlen(line)) > 79) abort();
  }
  free(buf);
  FILE *null = fopen("/dev/null", "w");
  gr__top_render(null, &job, 1, 3, 40, 1.0);
  fclose(null);
  return 0;
}
