/* Opening the files the user names (--config, --topology). */
#include "gr_launcher.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Opened without blocking (a FIFO would wait for a writer forever) and checked on the open
 * descriptor, so that nothing can be swapped in between the check and the read. */
FILE *gr__open_regular(const char *path, const char *what) {
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    gr__fail_msg(GR_ERR_INVALID, "%s %s: %s", what, path, strerror(errno));
    return NULL;
  }
  struct stat sb;
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    gr__fail_msg(GR_ERR_INVALID, "%s %s: not a regular file (%s)", what, path,
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
    gr__fail_msg(GR_ERR_INVALID, "%s %s: %s", what, path, strerror(errno));
    close(fd);
  }
  return f;
}
