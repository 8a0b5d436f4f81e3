/* Segment files for the shared-memory collectives. A memfd is anonymous: it never appears in
 * /dev/shm, and its memory goes away when the last process that maps it ends, whether it returned,
 * crashed or was SIGKILLed. The other ranks reach it through /proc/<pid>/fd/<fd> of the creator
 * (same user, same PID namespace: what MPI_COMM_TYPE_SHARED ranks under one launcher are). */
#include "gr_shm.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int gr__shm_memfd(size_t bytes) {
  int fd = memfd_create("gpurun-coll", MFD_CLOEXEC);
  if (fd < 0) return -1;
  if (ftruncate(fd, (off_t)bytes) != 0) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

void *gr__shm_map(int fd, size_t bytes) {
  struct stat st;
  /* a smaller file would fault (SIGBUS) on the first access past its end */
  if (fstat(fd, &st) != 0) return NULL;
  if (!S_ISREG(st.st_mode) || (size_t)st.st_size != bytes) {
    errno = EINVAL;
    return NULL;
  }
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  return p == MAP_FAILED ? NULL : p;
}

int gr__shm_open_peer(pid_t pid, int fd) {
  char path[64];
  if (pid <= 0 || fd < 0) {
    errno = EINVAL;
    return -1;
  }
  snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)pid, fd);
  return open(path, O_RDWR | O_CLOEXEC);
}

int gr__shm_peer_gone(pid_t pid) {
  if (pid <= 0) return 0;
  if (kill(pid, 0) != 0) return errno == ESRCH;
  char path[64], buf[256];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *e = strrchr(buf, ')'); /* the state follows the command name, which may hold ')' */
  return e && e[1] == ' ' && (e[2] == 'Z' || e[2] == 'X');
}
