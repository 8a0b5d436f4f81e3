/* Prometheus text exposition of one sample (see gr_prom.h). */
#include "gr_prom.h"

#include "gr_error.h"
#include "gr_escape.h"
#include "gr_safefile.h"
#include "gr_strbuf.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The most text one sample's exposition may take; far above what any node writes. */
#define GR_PROM_TEXT_MAX ((size_t)64 << 20)

/* A label value: backslash, double quote and newline escaped, other control bytes dropped. */
static void put_escaped(gr__strbuf *o, const char *src) {
  for (const char *p = src ? src : ""; *p; p++) {
    unsigned char c = (unsigned char)*p;
    if (c == '\\' || c == '"') {
      gr__strbuf_putc(o, '\\');
      gr__strbuf_putc(o, (char)c);
    } else if (c == '\n') {
      gr__strbuf_append(o, "\\n", 2);
    } else if (c >= 32 && c != 127) {
      gr__strbuf_putc(o, (char)c);
    }
  }
}

void gr__prom_text_free(gr__prom_text *t) {
  free(t->buf);
  t->buf = NULL;
  t->len = t->cap = 0;
}

typedef struct {
  const char *name, *type, *help;
} family;

static const family gpu_families[] = {
    {"gpurun_gpu_utilization_ratio", "gauge",
     "Share of time the GPU ran a kernel (NVML utilization.gpu / 100)."},
    {"gpurun_gpu_memory_utilization_ratio", "gauge",
     "Share of time device memory was read or written (NVML utilization.memory / 100)."},
    {"gpurun_gpu_memory_used_bytes", "gauge", "Device memory in use."},
    {"gpurun_gpu_memory_total_bytes", "gauge", "Device memory size."},
    {"gpurun_gpu_temperature_celsius", "gauge", "GPU core temperature."},
    {"gpurun_gpu_power_watts", "gauge", "Power draw."},
    {"gpurun_gpu_energy_joules_total", "counter",
     "Energy used: NVML's counter since the driver loaded, else power integrated since gpurun "
     "started."},
    {"gpurun_gpu_sm_clock_hertz", "gauge", "SM clock."},
    {"gpurun_gpu_throttle_reasons", "gauge",
     "NVML clocks-throttle reasons bit mask (0x4 power cap, 0x8 HW slowdown, 0x20 SW thermal, 0x40 "
     "HW thermal, 0x80 power brake)."},
    {"gpurun_gpu_ecc_uncorrected_volatile_errors", "gauge",
     "Uncorrected ECC errors since the driver loaded."},
    {"gpurun_gpu_rank_utilization_ratio", "gauge",
     "SM share used by this rank's process tree (NVML per-process utilization)."},
    {"gpurun_gpu_others_utilization_ratio", "gauge",
     "SM share used by every other process on the GPU (other ranks, other users)."},
    {"gpurun_gpu_rank_memory_used_bytes", "gauge", "Device memory of this rank's process tree."},
    {"gpurun_gpu_others_memory_used_bytes", "gauge",
     "Device memory of every other process on the GPU."},
};
enum {
  F_UTIL,
  F_MUTIL,
  F_MUSED,
  F_MTOTAL,
  F_TEMP,
  F_POWER,
  F_ENERGY,
  F_CLOCK,
  F_THR,
  F_ECC,
  F_RUTIL,
  F_OUTIL,
  F_RMEM,
  F_OMEM,
  F_N
};

static const family rank_families[] = {
    {"gpurun_rank_cpu_utilization_ratio", "gauge",
     "Busy share of the rank's cores since the previous sample."},
    {"gpurun_rank_resident_memory_bytes", "gauge", "Resident set size of the rank's program."},
    {"gpurun_rank_cpu_steal_ratio", "gauge",
     "Share of the rank's cores' time since the previous sample that the hypervisor gave to other "
     "guests (/proc/stat steal; the node's when /proc/stat has no line for those cores)."},
    {"gpurun_rank_collective_seconds_total", "counter",
     "Seconds the rank spent inside finished gpurun collective calls; under the MPI layer, inside "
     "the MPI calls it records (gpurun_rank_mpi_seconds_total)."},
    {"gpurun_rank_collective_calls_total", "counter",
     "gpurun collective and point-to-point calls made (under the MPI layer: the MPI calls it "
     "records on communicators)."},
    {"gpurun_rank_collective_wait_seconds", "gauge",
     "Seconds inside the collective call or communicator creation the rank is in now; under the "
     "MPI layer, inside the longest MPI call a thread of the rank is in now (0 between calls)."},
    {"gpurun_rank_mpi_seconds_total", "counter",
     "Seconds the rank's threads spent inside the MPI calls gpurun's MPI layer records (every "
     "call; a non-blocking call's start, not its request's life). Programs run under the layer "
     "only."},
    {"gpurun_rank_mpi_collective_seconds_total", "counter",
     "Of gpurun_rank_mpi_seconds_total, seconds inside blocking collectives (MPI_Barrier to "
     "MPI_Exscan). The last rank to arrive waits least: the job's highest rate minus this rank's "
     "is how late it arrives per second (a lower bound, exact when one rank is always first); "
     "one rank alone cannot know it, having no clock common to the others."},
    {"gpurun_up", "gauge",
     "1 while the supervisor that writes this series runs: the series goes away with it."},
    {"gpurun_sample_time_seconds", "gauge",
     "Unix time of this sample: a value falling behind time() is a writer that stopped."},
};
enum { R_CPU, R_RSS, R_STEAL, R_CSEC, R_CALLS, R_WAIT, R_MPI, R_MPICOLL, R_UP, R_TIME, R_N };

static void header(gr__strbuf *o, const family *f) {
  gr__strbuf_appendf(o, "# HELP %s %s\n# TYPE %s %s\n", f->name, f->help, f->name, f->type);
}

gr_status gr__prom_format(const gr__sample *s, const char *job, const char *host,
                          const gr__live *live, const gr__prom_owner *owner, gr__prom_text *t) {
  /* The labels every series carries, escaped once per sample. */
  gr__strbuf lo;
  gr__strbuf_init_heap(&lo, GR_PROM_TEXT_MAX);
  gr__strbuf_appendf(&lo, "job=\"");
  put_escaped(&lo, job);
  gr__strbuf_appendf(&lo, "\",host=\"");
  put_escaped(&lo, host);
  gr__strbuf_appendf(&lo, "\",rank=\"");
  if (s->rank >= 0) gr__strbuf_appendf(&lo, "%d", s->rank);
  gr__strbuf_appendf(&lo, "\",local_rank=\"%d\"", s->local_rank);
  if (lo.truncated) {
    gr__strbuf_free(&lo);
    return gr__fail_msg(GR_ERR_NOMEM, "out of memory formatting the exposition text");
  }
  const char *base = gr__strbuf_str(&lo);
  gr__strbuf o;
  gr__strbuf_init_heap(&o, GR_PROM_TEXT_MAX);
  if (owner) {
    char line[GR_PROM_OWNER_MAX];
    size_t n = gr__prom_owner_line(owner, line, sizeof line);
    if (n) gr__strbuf_appendf(&o, "%s", line);
  }
  for (int f = 0; f < F_N && s->ngpus; f++) {
    header(&o, &gpu_families[f]);
    for (int g = 0; g < s->ngpus; g++) {
      const gr__gpu_sample *G = &s->gpu[g];
      double v = NAN;
      switch (f) {
      case F_UTIL:
        if (G->has_util) v = G->util / 100.0;
        break;
      case F_MUTIL:
        if (G->has_util) v = G->mem_util / 100.0;
        break;
      case F_MUSED:
        if (G->has_mem) v = (double)G->mem_used;
        break;
      case F_MTOTAL:
        if (G->has_mem) v = (double)G->mem_total;
        break;
      case F_TEMP:
        if (G->has_temp) v = G->temp_c;
        break;
      case F_POWER:
        if (G->has_power) v = G->power_w;
        break;
      case F_ENERGY:
        if (G->has_energy) v = G->energy_j;
        break;
      case F_CLOCK:
        if (G->has_clock) v = G->sm_mhz * 1e6;
        break;
      case F_THR:
        if (G->has_throttle) v = (double)G->throttle;
        break;
      case F_ECC:
        if (G->has_ecc) v = (double)G->ecc_uncorrected;
        break;
      case F_RUTIL:
        if (G->has_share_util) v = G->rank_sm / 100.0;
        break;
      case F_OUTIL:
        if (G->has_share_util) v = G->others_sm / 100.0;
        break;
      case F_RMEM:
        if (G->has_share_mem) v = (double)G->rank_mem;
        break;
      case F_OMEM:
        if (G->has_share_mem) v = (double)G->others_mem;
        break;
      default:
        break;
      }
      if (isnan(v)) continue; /* NVML could not say: no series rather than a made-up value */
      gr__strbuf_appendf(&o, "%s{%s,gpu=\"%d\",pci=\"", gpu_families[f].name, base, G->index);
      put_escaped(&o, G->pci);
      gr__strbuf_appendf(&o, "\"} %.15g\n", v);
    }
  }
  double csec = 0, calls = 0, wait = 0;
  const int layer = live && live->has_mpi;
  if (live)
    for (int i = 0; i < live->ncomms; i++) {
      const gr__live_comm *c = &live->comm[i];
      csec += c->busy_s;
      calls += (double)c->calls;
      /* The MPI layer's records of non-blocking calls run until their request completes: an
       * MPI_Irecv posted long ago is no call the rank is in, so the layer's own clock decides. */
      if (!layer && !strcmp(c->state, "running") && c->start > 0 && s->unix_s - c->start > wait)
        wait = s->unix_s - c->start;
    }
  if (layer) {
    /* The records' busy time counts a request's life besides the wait that completes it (more
     * seconds than the wall clock had): the time inside the calls instead. */
    csec = live->mpi_s;
    if (live->mpi_inside_since > 0 && s->unix_s - live->mpi_inside_since > wait)
      wait = s->unix_s - live->mpi_inside_since;
  }
  /* a rank hung in gr_comm_create or gr_comm_split is as stuck as one in a collective */
  for (int i = 0; live && i < live->ncreating; i++)
    if (s->unix_s - live->creating[i].start > wait) wait = s->unix_s - live->creating[i].start;
  for (int f = 0; f < R_N; f++) {
    double v = NAN;
    switch (f) {
    case R_CPU:
      if (s->cpu_util >= 0) v = s->cpu_util / 100.0;
      break;
    case R_RSS:
      if (s->rss_kib >= 0) v = (double)s->rss_kib * 1024.0;
      break;
    case R_STEAL:
      if (s->cpu_steal >= 0) v = s->cpu_steal / 100.0;
      break;
    case R_CSEC:
      if (live) v = csec;
      break;
    case R_CALLS:
      if (live) v = calls;
      break;
    case R_WAIT:
      if (live) v = wait;
      break;
    case R_MPI:
      if (layer) v = live->mpi_s;
      break;
    case R_MPICOLL:
      if (layer) v = live->mpi_coll_s;
      break;
    case R_UP:
      v = 1;
      break;
    case R_TIME:
      v = s->unix_s;
      break;
    default:
      break;
    }
    if (isnan(v)) continue;
    header(&o, &rank_families[f]);
    gr__strbuf_appendf(&o, "%s{%s} %.15g\n", rank_families[f].name, base, v);
  }
  gr__strbuf_free(&lo);
  gr__prom_text_free(t);
  if (o.truncated) {
    gr__strbuf_free(&o);
    return gr__fail_msg(GR_ERR_NOMEM, "out of memory formatting the exposition text");
  }
  t->buf = gr__strbuf_release(&o, &t->len);
  t->cap = t->buf ? t->len + 1 : 0;
  return GR_OK;
}

/* Records "cannot write DIR/NAME: <reason>" (escaped for the terminal) and returns st. */
static gr_status write_failed(gr_status st, const char *dir, const char *name, int e) {
  char esc_dir[512], esc_name[512];
  return gr__fail_msg(st, "cannot write %s/%s: %s", gr__esc_term_str(esc_dir, sizeof esc_dir, dir),
                      gr__esc_term_str(esc_name, sizeof esc_name, name), strerror(e));
}

gr_status gr__prom_write(const char *dir, const char *name, const char *text, size_t len) {
  char path[PATH_MAX], tmp[PATH_MAX];
  if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path ||
      (size_t)snprintf(tmp, sizeof tmp, "%s/.%s.tmp.%d", dir, name, (int)getpid()) >= sizeof tmp)
    return write_failed(GR_ERR_INVALID, dir, name, ENAMETOOLONG);
  unlink(tmp); /* ours from a killed predecessor with this pid, or a planted link: never followed */
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  /* Another user's file that this user cannot remove (a sticky directory; the pid is public):
   * another name, .<name>.tmp.<pid>-<k>, rather than no file at all. */
  for (int k = 1; fd < 0 && errno == EEXIST && k < 100; k++) {
    if ((size_t)snprintf(tmp, sizeof tmp, "%s/.%s.tmp.%d-%d", dir, name, (int)getpid(), k) >=
        sizeof tmp)
      return write_failed(GR_ERR_INVALID, dir, name, ENAMETOOLONG);
    unlink(tmp);
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  }
  if (fd < 0) return write_failed(GR_ERR_SYSTEM, dir, name, errno);
  size_t off = 0;
  while (off < len) {
    ssize_t w = write(fd, text + off, len - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break;
    off += (size_t)w;
  }
  int e = 0;
  if (off != len) e = errno ? errno : EIO;
  if (close(fd) != 0 && !e) e = errno;
  if (e || rename(tmp, path) != 0) {
    if (!e) e = errno;
    unlink(tmp);
    return write_failed(GR_ERR_SYSTEM, dir, name, e);
  }
  return GR_OK;
}

/* Reads a small /proc file whole into buf (terminated). Its length, or -1 with errno. */
static ssize_t read_small(const char *path, char *buf, size_t cap) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  size_t n = 0;
  while (n + 1 < cap) {
    ssize_t r = read(fd, buf + n, cap - 1 - n);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      int e = errno;
      close(fd);
      errno = e;
      return -1;
    }
    if (r == 0) break;
    n += (size_t)r;
  }
  close(fd);
  buf[n] = '\0';
  return (ssize_t)n;
}

int gr__prom_proc_start(long pid, unsigned long long *start) {
  char path[64], buf[1024];
  if (pid <= 0) {
    errno = ESRCH;
    return -1;
  }
  snprintf(path, sizeof path, "/proc/%ld/stat", pid);
  if (read_small(path, buf, sizeof buf) < 0) {
    if (errno == ENOENT) errno = ESRCH;
    return -1;
  }
  /* "pid (comm) state ppid ...": comm may hold spaces and parentheses, so the fields start after
   * the last ')'; the state is field 3 and the start time field 22. */
  char *p = strrchr(buf, ')');
  if (!p || p[1] != ' ') {
    errno = EINVAL;
    return -1;
  }
  p += 2;
  if (*p == 'Z' || *p == 'X') { /* dead, only not reaped yet */
    errno = ESRCH;
    return -1;
  }
  for (int field = 3; field < 22; field++) {
    p = strchr(p, ' ');
    if (!p) {
      errno = EINVAL;
      return -1;
    }
    p++;
  }
  char *end;
  errno = 0;
  unsigned long long v = strtoull(p, &end, 10);
  if (errno || end == p || (*end != ' ' && *end != '\n' && *end != '\0')) {
    errno = EINVAL;
    return -1;
  }
  *start = v;
  return 0;
}

/* The boot id without its newline, "" unknown; only hex digits and dashes are kept. */
static void boot_id(char *dst, size_t cap) {
  char buf[64];
  dst[0] = '\0';
  if (read_small("/proc/sys/kernel/random/boot_id", buf, sizeof buf) <= 0) return;
  size_t n = 0;
  for (const char *p = buf; *p && *p != '\n' && n + 1 < cap; p++) {
    if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f') || *p == '-')) {
      n = 0;
      break;
    }
    dst[n++] = *p;
  }
  dst[n] = '\0';
}

/* The pid namespace's inode, 0 unknown. */
static unsigned long long pid_ns(void) {
  struct stat st;
  if (stat("/proc/self/ns/pid", &st) != 0) return 0;
  return (unsigned long long)st.st_ino;
}

/* When this boot began (/proc/stat btime, Unix seconds), -1 unknown. Read line by line: btime
 * comes after a line per core and the interrupt counts, tens of KiB into the file on a big node. */
static long long boot_time(void) {
  FILE *f = fopen("/proc/stat", "re");
  if (!f) return -1;
  char *line = NULL;
  size_t cap = 0;
  long long v = -1;
  while (getline(&line, &cap, f) > 0) {
    if (strncmp(line, "btime ", 6) != 0) continue;
    char *end;
    errno = 0;
    long long b = strtoll(line + 6, &end, 10);
    if (!errno && end != line + 6 && b > 0) v = b;
    break;
  }
  free(line);
  fclose(f);
  return v;
}

int gr__prom_owner_self(gr__prom_owner *o) {
  memset(o, 0, sizeof *o);
  if (gethostname(o->host, sizeof o->host - 1) != 0 || !o->host[0])
    snprintf(o->host, sizeof o->host, "localhost");
  gr__safe_name_fix(o->host);
  boot_id(o->boot, sizeof o->boot);
  o->pidns = pid_ns();
  o->pid = (long)getpid();
  /* /proc must be of our own pid namespace (it is not after unshare --pid without a new /proc):
   * else the pids a sweep looks up there are other processes', and a live file could go. */
  char self[64];
  if (read_small("/proc/self/stat", self, sizeof self) <= 0 || strtol(self, NULL, 10) != o->pid)
    return -1;
  if (gr__prom_proc_start(o->pid, &o->start) != 0) return -1;
  return 0;
}

size_t gr__prom_owner_line(const gr__prom_owner *o, char *buf, size_t cap) {
  int n = snprintf(buf, cap, GR_PROM_OWNER_TAG "%d host=%s boot=%s pidns=%llu pid=%ld start=%llu\n",
                   GR_PROM_OWNER_VERSION, o->host, o->boot, o->pidns, o->pid, o->start);
  return n < 0 || (size_t)n >= cap ? 0 : (size_t)n;
}

/* "key=" at *p, then the value up to the next space or the end: copied into dst (cap bytes). */
static int owner_field(const char **p, const char *end, const char *key, char *dst, size_t cap) {
  size_t kl = strlen(key);
  if ((size_t)(end - *p) < kl || memcmp(*p, key, kl) != 0) return -1;
  const char *v = *p + kl, *e = v;
  while (e < end && *e != ' ')
    e++;
  if ((size_t)(e - v) >= cap) return -1;
  memcpy(dst, v, (size_t)(e - v));
  dst[e - v] = '\0';
  *p = e < end ? e + 1 : e;
  return 0;
}

static int owner_number(const char *s, unsigned long long *v) {
  if (!*s || *s < '0' || *s > '9') return -1;
  char *end;
  errno = 0;
  *v = strtoull(s, &end, 10);
  return errno || *end ? -1 : 0;
}

int gr__prom_owner_parse(const char *text, size_t len, gr__prom_owner *o) {
  memset(o, 0, sizeof *o);
  const size_t tl = sizeof GR_PROM_OWNER_TAG - 1;
  const char *nl = memchr(text, '\n', len < GR_PROM_OWNER_MAX ? len : GR_PROM_OWNER_MAX);
  if (!nl || (size_t)(nl - text) < tl || memcmp(text, GR_PROM_OWNER_TAG, tl) != 0) return -1;
  const char *p = text + tl, *end = nl;
  char version[8], pidns[24], pid[24], start[24];
  unsigned long long ver, ns, pd, st;
  const char *sp = memchr(p, ' ', (size_t)(end - p));
  if (!sp || (size_t)(sp - p) >= sizeof version) return -1;
  memcpy(version, p, (size_t)(sp - p));
  version[sp - p] = '\0';
  p = sp + 1;
  if (owner_number(version, &ver) != 0 || ver != GR_PROM_OWNER_VERSION) return -1;
  if (owner_field(&p, end, "host=", o->host, sizeof o->host) != 0 ||
      owner_field(&p, end, "boot=", o->boot, sizeof o->boot) != 0 ||
      owner_field(&p, end, "pidns=", pidns, sizeof pidns) != 0 ||
      owner_field(&p, end, "pid=", pid, sizeof pid) != 0 ||
      owner_field(&p, end, "start=", start, sizeof start) != 0 || p != end)
    return -1;
  if (!o->host[0] || owner_number(pidns, &ns) != 0 || owner_number(pid, &pd) != 0 ||
      owner_number(start, &st) != 0 || pd == 0 || pd > INT_MAX)
    return -1;
  for (const char *h = o->host; *h; h++)
    if (!gr__safe_char((unsigned char)*h)) return -1;
  o->pidns = ns;
  o->pid = (long)pd;
  o->start = st;
  return 0;
}

/* Whether a sweep may remove a file of owner o that was last written at mtime. */
static int owner_gone(const gr__prom_owner *o, const gr__prom_owner *self, time_t mtime,
                      long long btime) {
  if (strcmp(o->host, self->host) != 0) return 0; /* another host's: it sweeps its own */
  if (!o->boot[0] || !self->boot[0]) return 0;
  if (strcmp(o->boot, self->boot) != 0) /* before a reboot, or a namesake host sharing dir */
    return btime > 0 && (long long)mtime < btime;
  if (!o->pidns || o->pidns != self->pidns) return 0; /* pids we cannot see */
  if (o->pid == self->pid) return o->start != self->start;
  unsigned long long start;
  if (gr__prom_proc_start(o->pid, &start) != 0) return errno == ESRCH;
  return start != o->start; /* the pid now belongs to another process */
}

/* Whether name is gpurun_<something>.prom, or a writer's temp file of one,
 * .gpurun_<something>.prom.tmp.<pid>[-<k>] (left behind by a writer killed between open and rename;
 * it starts with the owner line too). */
static int sweep_name(const char *name) {
  size_t n = strlen(name);
  if (n > 12 && !strncmp(name, "gpurun_", 7) && !strcmp(name + n - 5, ".prom")) return 1;
  if (strncmp(name, ".gpurun_", 8) != 0) return 0;
  const char *tmp = strstr(name, ".prom.tmp.");
  if (!tmp || tmp - name < 9) return 0;
  const char *d = tmp + 10; /* <pid>, or <pid>-<k> */
  if (*d < '0' || *d > '9') return 0;
  while (*d >= '0' && *d <= '9')
    d++;
  if (*d == '-' && d[1] >= '0' && d[1] <= '9') {
    d++;
    while (*d >= '0' && *d <= '9')
      d++;
  }
  return *d == '\0';
}

int gr__prom_sweep(const char *dir, const gr__prom_owner *self) {
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return -1;
  DIR *d = fdopendir(dfd);
  if (!d) {
    int e = errno;
    close(dfd);
    errno = e;
    return -1;
  }
  const uid_t me = geteuid();
  long long btime = -2;
  int removed = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    if (!sweep_name(de->d_name)) continue;
    /* lstat first: a link, a device or a FIFO is never opened */
    struct stat ls, fs;
    if (fstatat(dfd, de->d_name, &ls, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(ls.st_mode) ||
        ls.st_uid != me)
      continue;
    int fd = openat(dfd, de->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) continue;
    char head[GR_PROM_OWNER_MAX];
    ssize_t n = -1;
    if (fstat(fd, &fs) == 0 && S_ISREG(fs.st_mode) && fs.st_uid == me && fs.st_dev == ls.st_dev &&
        fs.st_ino == ls.st_ino) {
      do
        n = read(fd, head, sizeof head);
      while (n < 0 && errno == EINTR);
    }
    close(fd);
    gr__prom_owner o;
    if (n <= 0 || gr__prom_owner_parse(head, (size_t)n, &o) != 0) continue;
    if (btime == -2) btime = boot_time();
    if (!owner_gone(&o, self, fs.st_mtime, btime)) continue;
    /* Still the file that was read: a live writer may have renamed a new one over it since. */
    struct stat now;
    if (fstatat(dfd, de->d_name, &now, AT_SYMLINK_NOFOLLOW) != 0 || now.st_dev != fs.st_dev ||
        now.st_ino != fs.st_ino)
      continue;
    if (unlinkat(dfd, de->d_name, 0) == 0) removed++;
  }
  closedir(d);
  return removed;
}
