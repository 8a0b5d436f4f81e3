/* libFuzzer target for gpurun-report's CSV reader and everything downstream of it: the input is
 * one monitor CSV (<node>.<local_rank>.csv) another job wrote; it is loaded, summarised, printed
 * as the table and as what the monitor saw on its first rank (why.c: CPU share, stopped samples,
 * steal), and rendered as JSON and SVG, which must then be valid (the JSON re-parses). */
#include "gr_json_read.h"
#include "gr_report.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64], csv[128], svg[128], js[128];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 1 << 16) return 0;
  if (!dir[0]) {
    snprintf(dir, sizeof dir, "/tmp/gr_fuzz_csv_%d", (int)getpid());
    mkdir(dir, 0700);
    snprintf(csv, sizeof csv, "%s/n0.0.csv", dir);
    snprintf(svg, sizeof svg, "%s/r.svg", dir);
    snprintf(js, sizeof js, "%s/r.json", dir);
  }
  FILE *f = fopen(csv, "wb");
  if (!f) return 0;
  fwrite(data, 1, size, f);
  fclose(f);
  gr__rpt_job job;
  if (gr__rpt_load(dir, &job) == GR_OK) {
    gr__rpt_summarize(&job);
    FILE *null = fopen("/dev/null", "w");
    if (null) {
      gr__rpt_print_table(&job, null);
      gr__rpt_print_why(&job, gr__rpt_nseries(&job) ? GR__RPT_SERIES(&job, 0).rank : -1, null);
      fclose(null);
    }
    if (gr__rpt_write_json(&job, js, NULL, NULL, 0) == GR_OK) {
      size_t at;
      gr__rpt_json *v = gr__rpt_json_parse_file(js, &at);
      if (!v) abort(); /* the report's own JSON must always parse */
      gr__rpt_json_free(v);
    }
    gr__rpt_write_svg(&job, svg, 0);
  }
  gr__rpt_free(&job);
  return 0;
}
