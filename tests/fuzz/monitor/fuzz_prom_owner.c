/* libFuzzer target: the owner line of a .prom file (monitor/prom.c), which the supervisor's
 * sweep reads from files anyone may have planted in the textfile directory. On arbitrary bytes the
 * parser reads only within the bytes given, and whatever it accepts is a line that the writer can
 * write again and that parses back to the same owner. */
#include "gr_prom.h"
#include "gr_safefile.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* an exact-size copy, so that a read past the end is caught by the sanitizer */
  char *text = malloc(size ? size : 1);
  if (!text) return 0;
  memcpy(text, data, size);
  gr__prom_owner o, again;
  if (gr__prom_owner_parse(text, size, &o) == 0) {
    if (!o.host[0] || o.pid <= 0 || o.pid > INT_MAX) abort();
    for (const char *h = o.host; *h; h++)
      if (!gr__safe_char((unsigned char)*h)) abort();
    char line[GR_PROM_OWNER_MAX];
    size_t n = gr__prom_owner_line(&o, line, sizeof line);
    if (n == 0 || n > size) abort(); /* never longer than the text it came from */
    if (gr__prom_owner_parse(line, n, &again) != 0) abort();
    if (strcmp(o.host, again.host) || strcmp(o.boot, again.boot) || o.pidns != again.pidns ||
        o.pid != again.pid || o.start != again.start)
      abort();
  }
  free(text);
  return 0;
}
