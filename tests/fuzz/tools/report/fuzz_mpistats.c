/* libFuzzer target for gpurun-report's reader of the MPI layer's call statistics
 * (mpistats.<rank>.json, stragglers.c): the input is a job's files, one per rank, separated by
 * form feeds (a byte valid JSON never holds outside a string, and no string may hold raw). Any
 * set of files is read, joined, analysed, printed and freed without a crash, a leak, a read past a
 * file or a hang (libFuzzer's -timeout); the printed table holds finite numbers only, and the rank
 * named as waited for is one whose file was read. */
#include "gr_stragglers.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TEXTS 80 /* past the 64 members a communicator joins */

/* Checks the report: valid UTF-8 without a control character but newlines (names are escaped for
 * a terminal: gr_escape.h), every table row's numbers finite, and the verdicts' too. */
static void check_report(const char *rep, size_t len) {
  const unsigned char *u = (const unsigned char *)rep;
  for (size_t i = 0; i < len;) {
    unsigned c = u[i], cp;
    size_t n = c < 0x80             ? 1
               : (c & 0xe0) == 0xc0 ? 2
               : (c & 0xf0) == 0xe0 ? 3
               : (c & 0xf8) == 0xf0 ? 4
                                    : 0;
    if (!n || i + n > len) abort();
    cp = n == 1 ? c : c & (0x7fu >> n);
    for (size_t k = 1; k < n; k++) {
      if ((u[i + k] & 0xc0) != 0x80) abort();
      cp = cp << 6 | (u[i + k] & 0x3fu);
    }
    if ((cp < 0x20 && cp != '\n') || (cp >= 0x7f && cp < 0xa0)) abort();
    i += n;
  }
  const char *line = rep;
  while (line && *line) {
    int rank, last;
    double share, mean, max, in_mpi;
    if (sscanf(line, " %d %d %lf%% %lf %lf %lf", &rank, &last, &share, &mean, &max, &in_mpi) == 6) {
      if (last < 0 || !isfinite(share) || !isfinite(mean) || !isfinite(max) || !isfinite(in_mpi) ||
          share < 0 || share > 100 || mean < 0 || max < 0)
        abort();
    }
    /* the verdicts name ranks by number, never a communicator: "inf" or "nan" is a number */
    const char *eol = strchr(line, '\n');
    size_t ll = eol ? (size_t)(eol - line) : strlen(line);
    if ((memmem(line, ll, "waited for:", 11) || memmem(line, ll, "last to arrive:", 15)) &&
        (memmem(line, ll, "inf", 3) || memmem(line, ll, "nan", 3)))
      abort();
    line = eol ? eol + 1 : NULL;
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static FILE *devnull;
  if (!devnull && !(devnull = fopen("/dev/null", "w"))) abort();
  if (size > 1 << 20) return 0;
  /* each file in a buffer of its own size, so that AddressSanitizer sees a read past its end */
  char *texts[MAX_TEXTS];
  int n = 0;
  size_t start = 0;
  for (size_t i = 0; i <= size && n < MAX_TEXTS; i++) {
    if (i < size && data[i] != '\f') continue;
    size_t len = i - start;
    if (!(texts[n] = malloc(len + 1))) abort();
    memcpy(texts[n], data + start, len);
    texts[n][len] = '\0';
    n++;
    start = i + 1;
  }
  gr__rpt_arrivals *a = NULL;
  if (gr__rpt_arrivals_parse((const char *const *)texts, n, devnull, &a) != GR_OK || !a) abort();
  int waited_for = -2;
  if (gr__rpt_arrivals_world(a, &waited_for, NULL)) {
    /* -1 (none stands out) or the rank of a file that was read: 0 <= rank < 65536 */
    if (waited_for < -1 || waited_for >= 65536) abort();
  }
  char *rep = NULL;
  size_t replen = 0;
  FILE *out = open_memstream(&rep, &replen);
  if (!out) abort();
  gr__rpt_arrivals_print(a, NULL, out);
  fclose(out);
  check_report(rep, replen);
  free(rep);
  gr__rpt_arrivals_free(a);
  for (int i = 0; i < n; i++)
    free(texts[i]);
  return 0;
}
