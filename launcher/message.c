/* The launcher's one-line error messages. */
#include "gr_launcher.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

gr_status gr__launcher_error(char *err, size_t errlen, gr_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (err && errlen) vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
  for (char *c = err; c && errlen && *c; c++)
    if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
  return st;
}

/* Opened without blocking (a FIFO would wait for a writer forever) and checked on the open
 * descriptor, so that nothing can be swapped in between the check and the read. */
FILE *gr__open_regular(const char *path, char *err, size_t errlen, const char *what) {
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    gr__launcher_error(err, errlen, GR_ERR_INVALID, "%s %s: %s", what, path, strerror(errno));
    return NULL;
  }
  struct stat sb;
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    gr__launcher_error(err, errlen, GR_ERR_INVALID, "%s %s: not a regular file (%s)", what, path,
                       S_ISDIR(sb.st_mode)    ? "a directory"
                       : S_ISFIFO(sb.st_mode) ? "a FIFO"
                       : S_ISSOCK(sb.st_mode) ? "a socket"
                                              : "a device");
    close(fd);
    return NULL;
  }
  int fl = fcntl(fd, F_GETFL);
  if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  FILE *f = fdopen(fd, "rb");
  if (!f) {
    gr__launcher_error(err, errlen, GR_ERR_INVALID, "%s %s: %s", what, path, strerror(errno));
    close(fd);
  }
  return f;
}
