/* Safe file writing and reading in shared directories (see gr_safefile.h for the rules). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "gr_safefile.h"

#include "gr_error.h"
#include "gr_escape.h"
#include "gr_param.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

/* Records the sentence (names in it escaped for the terminal: a path may hold anything) with
 * gr__fail_msg and returns st. */
static gr_status fail(gr_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static gr_status fail(gr_status st, const char *fmt, ...) {
  char msg[1024], esc[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return gr__fail_msg(st, "%s", gr__esc_term_str(esc, sizeof esc, msg));
}

/* The status of a failed system call: what is there refused (a file where a directory belongs, a
 * symlink not followed, an object not ours to change) is GR_ERR_STATE, as the checks' refusals. */
static gr_status sys_status(int e) {
  switch (e) {
  case ENOENT:
    return GR_ERR_NOT_FOUND;
  case ENOMEM:
    return GR_ERR_NOMEM;
  case ENOTDIR:
  case ELOOP:
  case EPERM:
    return GR_ERR_STATE;
  default:
    return GR_ERR_SYSTEM;
  }
}

int gr__safe_char(int c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-' || c == '+' || c == '@';
}

int gr__safe_name(const char *s) {
  if (!s || !*s || *s == '.') return 0;
  size_t n = 0;
  for (; s[n]; n++)
    if (!gr__safe_char((unsigned char)s[n]) || n >= GR_SAFE_NAME_MAX) return 0;
  return 1;
}

void gr__safe_name_fix(char *s) {
  for (char *p = s; *p; p++)
    if (!gr__safe_char((unsigned char)*p) || (p == s && *p == '.')) *p = '_';
}

mode_t gr__jobdir_mode(void) { return gr__param_bool(GR_PARAM_MONITOR_GROUP) ? 0750 : 0700; }

static mode_t file_mode(void) { return gr__jobdir_mode() & 0666; }

gr_status gr__dir_check(int dirfd, const char *name) {
  struct stat st;
  if (fstat(dirfd, &st) != 0)
    return fail(sys_status(errno), "cannot stat %s: %s", name, strerror(errno));
  if (!S_ISDIR(st.st_mode)) return fail(GR_ERR_STATE, "%s is not a directory", name);
  if (st.st_uid != geteuid())
    return fail(GR_ERR_STATE, "%s is owned by uid %u, not by this user (uid %u)", name,
                (unsigned)st.st_uid, (unsigned)geteuid());
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    return fail(GR_ERR_STATE, "%s is writable by %s (mode %04o)", name,
                (st.st_mode & S_IWOTH) ? "everyone" : "its group", (unsigned)(st.st_mode & 07777));
  return GR_OK;
}

/* mkdir -p for the root: missing parts get mode; existing ones (symlinks included: the root is
 * the user's own choice) are used as they are. */
static int mkdir_p(const char *path, mode_t mode) {
  char tmp[PATH_MAX];
  if ((size_t)snprintf(tmp, sizeof tmp, "%s", path) >= sizeof tmp) {
    errno = ENAMETOOLONG;
    return -1;
  }
  for (char *p = tmp + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(tmp, mode) != 0 && errno != EEXIST) return -1;
    *p = '/';
  }
  return mkdir(tmp, mode) != 0 && errno != EEXIST ? -1 : 0;
}

gr_status gr__jobdir_open(const char *root, const char *job, int *dirfd) {
  *dirfd = -1;
  if (!root || !*root) root = ".";
  if (!gr__safe_name(job))
    return fail(GR_ERR_INVALID,
                "job id '%.*s' is not a safe directory name (1-%d of A-Z a-z 0-9 . _ - + @, not "
                "starting with '.')",
                64, job ? job : "", GR_SAFE_NAME_MAX);
  mode_t mode = gr__jobdir_mode();
  if (mkdir_p(root, mode) != 0)
    return fail(sys_status(errno), "cannot create %s: %s", root, strerror(errno));
  int rootfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (rootfd < 0) return fail(sys_status(errno), "cannot open %s: %s", root, strerror(errno));
  if (mkdirat(rootfd, job, mode) != 0 && errno != EEXIST) {
    int e = errno;
    close(rootfd);
    return fail(sys_status(e), "cannot create %s/%s: %s", root, job, strerror(e));
  }
  int fd = openat(rootfd, job, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  int e = errno;
  close(rootfd);
  if (fd < 0) {
    if (e == ELOOP || e == ENOTDIR)
      return fail(GR_ERR_STATE, "%s/%s is a symlink or a file, not a directory", root, job);
    return fail(sys_status(e), "cannot open %s/%s: %s", root, job, strerror(e));
  }
  char name[PATH_MAX];
  snprintf(name, sizeof name, "%s/%s", root, job);
  gr_status st = gr__dir_check(fd, name);
  if (st != GR_OK) {
    close(fd);
    return st;
  }
  *dirfd = fd;
  return GR_OK;
}

static int write_all(int fd, const char *p, size_t len) {
  while (len) {
    ssize_t w = write(fd, p, len);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return -1;
    if (w == 0) {
      errno = EIO;
      return -1;
    }
    p += w;
    len -= (size_t)w;
  }
  return 0;
}

gr_status gr__file_replace(int dirfd, const char *name, const void *buf, size_t len) {
  if (!name || !*name || strchr(name, '/'))
    return fail(GR_ERR_INVALID, "'%s' is not a plain file name", name ? name : "");
  struct stat st;
  if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(st.st_mode))
    return fail(GR_ERR_STATE, "%s exists and is not a regular file (%s); not replacing it", name,
                S_ISLNK(st.st_mode)   ? "a symlink"
                : S_ISDIR(st.st_mode) ? "a directory"
                                      : "a special file");
  static unsigned counter;
  char tmp[NAME_MAX + 64];
  int fd = -1;
  for (int tries = 0; fd < 0 && tries < 100; tries++) {
    unsigned n = __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED);
    if ((size_t)snprintf(tmp, sizeof tmp, ".%.200s.%d.%u.tmp", name, (int)getpid(), n) >=
        sizeof tmp)
      return fail(GR_ERR_INVALID, "file name %s too long", name);
    fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, file_mode());
    if (fd < 0 && errno != EEXIST)
      return fail(sys_status(errno), "cannot create %s: %s", tmp, strerror(errno));
  }
  if (fd < 0) return fail(GR_ERR_SYSTEM, "cannot find a free temporary name for %s", name);
  int e = 0;
  if (write_all(fd, buf, len) != 0 || fsync(fd) != 0) e = errno;
  if (close(fd) != 0 && !e) e = errno;
  if (!e && renameat(dirfd, tmp, dirfd, name) != 0) e = errno;
  if (e) {
    unlinkat(dirfd, tmp, 0);
    return fail(sys_status(e), "cannot write %s: %s", name, strerror(e));
  }
  return GR_OK;
}

gr_status gr__file_append_open(int dirfd, const char *name, const char *header, int *out) {
  *out = -1;
  if (!name || !*name || strchr(name, '/'))
    return fail(GR_ERR_INVALID, "'%s' is not a plain file name", name ? name : "");
  int fd = openat(dirfd, name, O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                  file_mode());
  if (fd < 0 && errno == EEXIST) {
    fd = openat(dirfd, name, O_WRONLY | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0 && (errno == ELOOP || errno == EMLINK))
      return fail(GR_ERR_STATE, "%s is a symlink; not writing through it", name);
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid())) {
      close(fd);
      return fail(GR_ERR_STATE, "%s exists and is not a regular file of this user", name);
    }
  }
  if (fd < 0) return fail(sys_status(errno), "cannot open %s: %s", name, strerror(errno));
  struct stat st;
  if (header && *header && fstat(fd, &st) == 0 && st.st_size == 0) {
    gr_status hs = gr__file_append_row(fd, name, header, strlen(header));
    if (hs != GR_OK) {
      close(fd);
      return hs;
    }
  }
  *out = fd;
  return GR_OK;
}

gr_status gr__file_append_row(int fd, const char *name, const void *buf, size_t len) {
  off_t end = lseek(fd, 0, SEEK_END);
  int e = errno;
  if (end >= 0 && write_all(fd, buf, len) == 0) return GR_OK;
  if (end >= 0) {
    e = errno;
    /* Take back whatever part of the row got in, so the file ends on a whole row. */
    while (ftruncate(fd, end) != 0 && errno == EINTR) {
    }
  }
  return fail(sys_status(e), "cannot append to %s: %s", name, strerror(e));
}

gr_status gr__file_open_read(int dirfd, const char *name, int *out) {
  *out = -1;
  int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ELOOP) return fail(GR_ERR_STATE, "%s is a symlink; not following it", name);
    return fail(sys_status(errno), "cannot open %s: %s", name, strerror(errno));
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return fail(GR_ERR_STATE, "%s is not a regular file (a FIFO, device or directory)", name);
  }
  /* Regular file: blocking reads from here on. */
  int fl = fcntl(fd, F_GETFL);
  if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  *out = fd;
  return GR_OK;
}

gr_status gr__file_read(int dirfd, const char *name, size_t max, char **out, size_t *len) {
  *out = NULL;
  int fd;
  GR_CHECK(gr__file_open_read(dirfd, name, &fd));
  struct stat st;
  if (fstat(fd, &st) == 0 && (unsigned long long)st.st_size > max) {
    close(fd);
    return fail(GR_ERR_INVALID, "%s is larger than %zu bytes", name, max);
  }
  size_t cap = (size_t)st.st_size + 1, n = 0;
  if (cap < 4096) cap = 4096;
  if (cap > max + 1) cap = max + 1;
  char *buf = malloc(cap + 1);
  if (!buf) {
    close(fd);
    return fail(GR_ERR_NOMEM, "out of memory reading %s", name);
  }
  for (;;) {
    if (n == cap) {
      if (cap > max) break; /* it grew past max while being read */
      size_t ncap = cap * 2 > max + 1 ? max + 1 : cap * 2;
      char *nb = realloc(buf, ncap + 1);
      if (!nb) {
        free(buf);
        close(fd);
        return fail(GR_ERR_NOMEM, "out of memory reading %s", name);
      }
      buf = nb;
      cap = ncap;
    }
    ssize_t r = read(fd, buf + n, cap - n);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      int e = errno;
      free(buf);
      close(fd);
      return fail(sys_status(e), "cannot read %s: %s", name, strerror(e));
    }
    if (r == 0) break;
    n += (size_t)r;
  }
  close(fd);
  if (n > max) {
    free(buf);
    return fail(GR_ERR_INVALID, "%s is larger than %zu bytes", name, max);
  }
  buf[n] = '\0';
  if (len) *len = n;
  *out = buf;
  return GR_OK;
}

gr_status gr__jobdir_replace(const char *root, const char *job, const char *name, const void *buf,
                             size_t len) {
  int dirfd;
  gr_status st = gr__jobdir_open(root, job, &dirfd);
  if (st != GR_OK) return st;
  st = gr__file_replace(dirfd, name, buf, len);
  close(dirfd);
  return st;
}
