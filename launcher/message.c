/* The launcher's one-line error messages. */
#include "gr_launcher.h"

#include <stdarg.h>

gr_status gr__launcher_error(char *err, size_t errlen, gr_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (err && errlen) vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
  for (char *c = err; c && errlen && *c; c++)
    if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
  return st;
}
