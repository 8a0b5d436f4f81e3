/* Node-local snapshots that make all local ranks of a job decide from the same readings (the GPU
 * health gate, least-loaded placement): local rank 0 produces the text and publishes it with
 * temp + rename; the others wait for it and read it. Named after the user, the kind, the job id
 * (and Slurm step) and the node's GPUs, in $TMPDIR (else /tmp); trusted only when it is a regular
 * file of this user, not writable by others, and under a minute old. */
#include "gr_launcher.h"

#include "gr_jobdir.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static unsigned long hash(const char *s) {
  unsigned long h = 5381;
  for (; *s; s++)
    h = h * 33 + (unsigned char)*s;
  return h;
}

static int snapshot_path(const gr__node *n, const char *kind, char *path, size_t cap) {
  char job[128];
  if (gr__monitor_job_from_env(job, sizeof job) != 0) return -1;
  const char *step = getenv("SLURM_STEP_ID");
  char gpus[2048] = "";
  size_t len = 0;
  for (int g = 0; g < n->ngpus && len + 24 < sizeof gpus; g++)
    len += (size_t)snprintf(gpus + len, sizeof gpus - len, "%s,", n->gpus[g].pci);
  const char *tmp = getenv("TMPDIR");
  if (!tmp || tmp[0] != '/') tmp = "/tmp";
  for (char *p = job; *p; p++) /* one path segment of safe characters */
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
          *p == '-' || *p == '.'))
      *p = '_';
  return (size_t)snprintf(path, cap, "%s/gpurun-%s-%u-%s-%s-%lx", tmp, kind, (unsigned)geteuid(),
                          job, step ? step : "", hash(gpus)) < cap
             ? 0
             : -1;
}

static int write_text(const char *path, const char *text, size_t len) {
  char tmp[1200];
  snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
  unlink(tmp);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return -1;
  ssize_t w = write(fd, text, len);
  int bad = w != (ssize_t)len;
  if (close(fd) != 0) bad = 1;
  if (bad || rename(tmp, path) != 0) {
    unlink(tmp);
    return -1;
  }
  return 0;
}

static ssize_t read_text(const char *path, time_t not_before, char *buf, size_t cap) {
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return -1;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 022) ||
      st.st_mtime < not_before || st.st_size >= (off_t)cap) {
    close(fd);
    return -1;
  }
  ssize_t n = read(fd, buf, cap - 1);
  close(fd);
  if (n < 0) return -1;
  buf[n] = '\0';
  return n;
}

ssize_t gr__snapshot_share(const char *kind, const gr__node *n, int local_rank, int local_size,
                           gr__snapshot_fn produce, void *ctx, char *buf, size_t cap) {
  char path[1024];
  int shared = local_size > 1 && snapshot_path(n, kind, path, sizeof path) == 0;
  if (!shared || local_rank == 0) {
    ssize_t len = produce(ctx, buf, cap);
    if (shared && len >= 0 && write_text(path, buf, (size_t)len) != 0)
      fprintf(stderr, "gpurun: warning: cannot write the %s snapshot %s: %s\n", kind, path,
              strerror(errno));
    return len;
  }
  /* Local rank 0 starts at about the same time; past 10 s judge alone and say so. */
  time_t not_before = time(NULL) - 60;
  for (int i = 0; i < 200; i++) {
    ssize_t len = read_text(path, not_before, buf, cap);
    if (len >= 0) return len;
    usleep(50000);
  }
  fprintf(stderr,
          "gpurun: warning: local rank %d: no %s snapshot from local rank 0 (%s); "
          "judging alone\n",
          local_rank, kind, path);
  return produce(ctx, buf, cap);
}
