/* libFuzzer target for the watchdog reading another rank's answer, hang.<rank>
 * (observe/hang_answer.c, gr__hang_parse): any text is an answer or refused, never a crash or
 * a read past it. Checked against the format (docs/formats.md): accepted exactly when its first
 * line is "gpurun-hang 1" and it fits in GR__HANG_MAX bytes; a refusal leaves the answer
 * zeroed; every string terminated inside its field and in the live files' alphabet (or '?'); the
 * time inside a call in [0, 1e9). The answer is read for the world's id and for the communicator it
 * names itself. */
#include "gr_hang.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void check_str(const char *s, size_t cap) {
  const char *end = memchr(s, '\0', cap);
  if (!end) abort();
  for (; s < end; s++) {
    unsigned char c = (unsigned char)*s;
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
          c == '_' || c == ':' || c == '-' || c == '?'))
      abort();
  }
}

/* What the format says of acceptance: the first non-empty line (lines end at '\n'; the text at
 * its first NUL) is the magic. */
static int well_formed(const uint8_t *data, size_t size) {
  if (size > GR__HANG_MAX) return 0;
  size_t i = 0;
  while (i < size && data[i] == '\n')
    i++;
  size_t m = sizeof GR__HANG_MAGIC - 1;
  if (size - i < m || memcmp(data + i, GR__HANG_MAGIC, m)) return 0;
  return i + m == size || data[i + m] == '\n' || data[i + m] == '\0';
}

static void check(const uint8_t *data, size_t size, const char *comm) {
  gr__hang_answer a;
  memset(&a, 0x5a, sizeof a); /* the parser must set every field */
  int rc = gr__hang_parse((const char *)data, size, comm, &a);
  if (rc != 0 && rc != -1) abort();
  if ((rc == 0) != well_formed(data, size)) abort();
  if (rc != 0) {
    static const gr__hang_answer zero;
    if (memcmp(&a, &zero, sizeof a)) abort();
    return;
  }
  if (a.have != 1 || (a.on_comm != 0 && a.on_comm != 1)) abort();
  check_str(a.in_op, sizeof a.in_op);
  check_str(a.in_comm, sizeof a.in_comm);
  check_str(a.op, sizeof a.op);
  check_str(a.state, sizeof a.state);
  if (!(a.in_for >= 0 && a.in_for < 1e9)) abort();
  if (a.on_comm && !a.op[0]) abort();
  if (!a.on_comm && (a.op[0] || a.state[0] || a.seq)) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* an exact copy, so that AddressSanitizer sees any read past the text */
  uint8_t *copy = malloc(size ? size : 1);
  if (!copy) abort();
  memcpy(copy, data, size);
  check(copy, size, "w");
  gr__hang_answer first;
  if (gr__hang_parse((const char *)copy, size, "w", &first) == 0 && first.in_comm[0])
    check(copy, size, first.in_comm);
  free(copy);
  return 0;
}
