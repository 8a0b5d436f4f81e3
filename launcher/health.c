/* The launch-time GPU health gate (--gpu-health off|warn|avoid). All local ranks must judge the
 * same readings, or two ranks could plan around different GPUs: local rank 0 reads NVML and
 * publishes its verdicts in a node-local snapshot file (temp + rename); the others wait for it and
 * read it. The snapshot is named after the user, the job id and the GPUs, lives in $TMPDIR (else
 * /tmp), and is trusted only when it is a regular file of this user, not writable by others, and
 * fresh (written after this job step could have started: 60 s). The snapshot stays in $TMPDIR
 * (a few hundred bytes per job step); without NVML none is written and nobody waits. */
#include "gr_launcher.h"

#include "gr_health.h"
#include "gr_jobdir.h"
#include "gr_telemetry.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

const char *gr__health_mode_name(int mode) {
  return mode == GR__HEALTH_OFF ? "off" : mode == GR__HEALTH_AVOID ? "avoid" : "warn";
}

static unsigned long hash(const char *s) {
  unsigned long h = 5381;
  for (; *s; s++)
    h = h * 33 + (unsigned char)*s;
  return h;
}

static int snapshot_path(const gr__node *n, char *path, size_t cap) {
  char job[128];
  if (gr__monitor_job_from_env(job, sizeof job) != 0) return -1;
  const char *step = getenv("SLURM_STEP_ID");
  char gpus[2048] = "";
  size_t len = 0;
  for (int g = 0; g < n->ngpus && len + 24 < sizeof gpus; g++)
    len += (size_t)snprintf(gpus + len, sizeof gpus - len, "%s,", n->gpus[g].pci);
  const char *tmp = getenv("TMPDIR");
  if (!tmp || tmp[0] != '/') tmp = "/tmp";
  return (size_t)snprintf(path, cap, "%s/gpurun-health-%u-%s-%s-%lx", tmp, (unsigned)geteuid(), job,
                          step ? step : "", hash(gpus)) < cap
             ? 0
             : -1;
}

/* "<0|1> <reason>" per GPU, in the node's order. */
static int write_snapshot(const char *path, const gr__gpu_health *h, int n) {
  char tmp[1100];
  snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
  unlink(tmp);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return -1;
  FILE *f = fdopen(fd, "w");
  if (!f) {
    close(fd);
    unlink(tmp);
    return -1;
  }
  for (int i = 0; i < n; i++)
    fprintf(f, "%d %s\n", h[i].known ? h[i].unhealthy : -1, h[i].why);
  int bad = ferror(f);
  if (fclose(f) != 0 || bad || rename(tmp, path) != 0) {
    unlink(tmp);
    return -1;
  }
  return 0;
}

static int read_snapshot(const char *path, gr__gpu_health *h, int n, time_t not_before) {
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return -1;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
      (st.st_mode & 022) || st.st_mtime < not_before || st.st_size > 65536) {
    close(fd);
    return -1;
  }
  FILE *f = fdopen(fd, "r");
  if (!f) {
    close(fd);
    return -1;
  }
  char line[GR_HEALTH_WHY + 16];
  int i = 0;
  for (; i < n && fgets(line, sizeof line, f); i++) {
    line[strcspn(line, "\n")] = '\0';
    int v = line[0] == '1' ? 1 : line[0] == '0' ? 0 : -1;
    if ((line[0] != '-' && v < 0) || (line[1] && line[1] != ' ' && v >= 0)) break;
    memset(&h[i], 0, sizeof h[i]);
    h[i].known = v >= 0;
    h[i].unhealthy = v == 1;
    const char *why = v >= 0 ? line + (line[1] ? 2 : 1) : strchr(line, ' ');
    if (why && *why == ' ') why++;
    /* printable ASCII only: it is printed to the terminal */
    for (size_t k = 0; why && why[k] && k + 1 < sizeof h[i].why; k++)
      h[i].why[k] = why[k] >= 32 && why[k] < 127 ? why[k] : '?';
  }
  fclose(f);
  return i == n ? 0 : -1;
}

static int gr__nvml_loadable(void) {
  void *dl = dlopen(gr__nvml_library_name(), RTLD_LAZY | RTLD_LOCAL);
  if (dl) dlclose(dl);
  return dl != NULL;
}

static void read_nvml(const gr__node *n, gr__gpu_health *h) {
  const char *pci[GR__MAX_RANK_GPUS * 4];
  int m = n->ngpus < (int)(sizeof pci / sizeof pci[0]) ? n->ngpus : (int)(sizeof pci / sizeof pci[0]);
  for (int g = 0; g < m; g++)
    pci[g] = n->gpus[g].pci;
  gr__gpu_health_read(pci, m, h);
}

int gr__health_gate(gr__node *n, int mode, int local_rank, int local_size, gr__plan *notes,
                    char *err, size_t errlen) {
  if (mode == GR__HEALTH_OFF || n->ngpus == 0) return 0;
  gr__gpu_health *h = calloc((size_t)n->ngpus, sizeof *h);
  if (!h) return 0;
  char path[1024];
  int shared = local_size > 1 && snapshot_path(n, path, sizeof path) == 0;
  if (shared && local_rank != 0 && !gr__nvml_loadable()) {
    shared = 0; /* no NVML here, so none for local rank 0 either: nothing to wait for */
  } else if (!shared || local_rank == 0) {
    read_nvml(n, h);
    if (shared && write_snapshot(path, h, n->ngpus) != 0)
      fprintf(stderr, "gpurun: warning: cannot write the GPU health snapshot %s: %s\n", path,
              strerror(errno));
  } else {
    /* Wait for local rank 0's verdicts (it starts at about the same time); past 10 s, judge
     * alone and say so. */
    time_t not_before = time(NULL) - 60;
    int ok = -1;
    for (int i = 0; i < 200 && (ok = read_snapshot(path, h, n->ngpus, not_before)) != 0; i++)
      usleep(50000);
    if (ok != 0) {
      fprintf(stderr, "gpurun: warning: local rank %d: no GPU health snapshot from local rank 0 "
                      "(%s); judging the GPUs alone\n", local_rank, path);
      read_nvml(n, h);
    }
  }
  char keep[4096] = "";
  size_t klen = 0;
  int healthy = 0, rc = 0;
  for (int g = 0; g < n->ngpus; g++) {
    if (!h[g].unhealthy) {
      if (klen + 8 < sizeof keep) klen += (size_t)snprintf(keep + klen, sizeof keep - klen, "%s%d", klen ? "," : "", g);
      healthy++;
      continue;
    }
    char line[300];
    snprintf(line, sizeof line, "GPU %d %s %s: %s", n->gpus[g].index, n->gpus[g].pci,
             mode == GR__HEALTH_AVOID ? "avoided" : "is unhealthy", h[g].why);
    if (local_rank == 0) fprintf(stderr, "gpurun: warning: %s\n", line);
    if (notes && notes->nwarn < GR__MAX_WARN) snprintf(notes->warn[notes->nwarn++], sizeof notes->warn[0], "%.199s", line);
  }
  if (mode == GR__HEALTH_AVOID && healthy < n->ngpus) {
    if (!healthy) {
      size_t len = (size_t)snprintf(err, errlen, "--gpu-health avoid: no healthy GPU left:");
      for (int g = 0; g < n->ngpus && len < errlen; g++)
        len += (size_t)snprintf(err + len, errlen - len, "%s GPU %d %s: %s", g ? ";" : "",
                                n->gpus[g].index, n->gpus[g].pci, h[g].why);
      rc = 2;
    } else {
      gr__node_restrict(n, keep, NULL, 0);
    }
  }
  free(h);
  return rc;
}
