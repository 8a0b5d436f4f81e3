/* libFuzzer target: the live-state parser (base/live_file.c) on arbitrary bytes. Every string it
 * returns must be terminated and hold only [A-Za-z0-9._:-?]: they are printed on terminals; the
 * version-2 fields (beat, a communicator's name and its unfinished sends and receives) stay in
 * their bounds. */
#include "gr_live_file.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void check_clean(const char *s, size_t cap) {
  size_t n = strnlen(s, cap);
  if (n == cap) abort();
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
          strchr("._:-?", c)))
      abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  gr__live lv;
  if (gr__live_parse((const char *)data, size, &lv) != 0) return 0;
  if (lv.rank < 0 || lv.ncomms < 0 || lv.ncomms > GR_LIVE_MAX_COMMS) abort();
  check_clean(lv.host, sizeof lv.host);
  check_clean(lv.state, sizeof lv.state);
  for (int i = 0; i < lv.ncomms; i++) {
    check_clean(lv.comm[i].id, sizeof lv.comm[i].id);
    check_clean(lv.comm[i].op, sizeof lv.comm[i].op);
    check_clean(lv.comm[i].backend, sizeof lv.comm[i].backend);
    check_clean(lv.comm[i].state, sizeof lv.comm[i].state);
    check_clean(lv.comm[i].name, sizeof lv.comm[i].name);
    if (lv.comm[i].nwaits < 0 || lv.comm[i].nwaits > GR_LIVE_MAX_WAITS) abort();
    for (int k = 0; k < lv.comm[i].nwaits; k++) {
      const gr__live_wait *w = &lv.comm[i].waits[k];
      if (w->peer < 0 || w->tag < 0 || (w->recv != 0 && w->recv != 1)) abort();
    }
  }
  if (lv.beat < -1) abort();
  if (lv.ncreating < 0 || lv.ncreating > GR_LIVE_MAX_CREATING) abort();
  for (int i = 0; i < lv.ncreating; i++) {
    check_clean(lv.creating[i].call, sizeof lv.creating[i].call);
    check_clean(lv.creating[i].step, sizeof lv.creating[i].step);
    check_clean(lv.creating[i].over, sizeof lv.creating[i].over);
    if (lv.creating[i].rank < 0 || lv.creating[i].rank >= lv.creating[i].size) abort();
  }
  return 0;
}
