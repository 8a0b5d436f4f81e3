/* What names one launch of MPICH's Hydra (gr_hydra.h), read from /proc. */
#include "gr_hydra.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

/* /proc/PID/NAME into buf (at most cap - 1 bytes, terminated); bytes read, -1 on failure. */
static ssize_t proc_read(int pid, const char *name, char *buf, size_t cap) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/%s", pid, name);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = read(fd, buf, cap - 1);
  close(fd);
  if (n < 0) return -1;
  buf[n] = '\0';
  return n;
}

/* The parent pid and start time from /proc/PID/stat (fields 4 and 22, counted after the ')' that
 * ends the name, which may hold spaces); 0 or -1. */
static int stat_of(int pid, int *ppid, unsigned long long *start) {
  char stat[1024];
  if (proc_read(pid, "stat", stat, sizeof stat) < 0) return -1;
  char *p = strrchr(stat, ')');
  if (!p || sscanf(p + 1, " %*c %d", ppid) != 1) return -1;
  for (int field = 2; p && field < 22; field++)
    p = strchr(p + 1, ' ');
  return p && sscanf(p + 1, "%llu", start) == 1 ? 0 : -1;
}

int gr__hydra_proxy(int *pid, unsigned long long *start) {
  int p = (int)getppid();
  for (int up = 0; up < 4 && p > 1; up++) {
    char comm[32];
    int pp = 0;
    unsigned long long st = 0;
    if (proc_read(p, "comm", comm, sizeof comm) < 0 || stat_of(p, &pp, &st) != 0) return -1;
    if (strncmp(comm, "hydra_pmi_proxy", 15) == 0) {
      *pid = p;
      *start = st;
      return 0;
    }
    p = pp;
  }
  return -1;
}

int gr__hydra_job(char *out, size_t cap) {
  int pid;
  unsigned long long start;
  char cmd[4096];
  ssize_t n;
  if (gr__hydra_proxy(&pid, &start) != 0 || (n = proc_read(pid, "cmdline", cmd, sizeof cmd)) <= 0)
    return -1;
  /* NUL-separated words: the one after --control-port */
  for (char *w = cmd; w < cmd + n; w += strlen(w) + 1) {
    if (strcmp(w, "--control-port") != 0) continue;
    char *v = w + strlen(w) + 1;
    if (v >= cmd + n || !*v) return -1;
    char *colon = strrchr(v, ':');
    if (!colon) return -1;
    int k = snprintf(out, cap, "hydra-%.*s-%s", (int)(colon - v), v, colon + 1);
    return k > 0 && (size_t)k < cap ? 0 : -1;
  }
  return -1;
}
