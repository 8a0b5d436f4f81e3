/* Prometheus text exposition of one sample (see gr_prom.h). */
#include "gr_prom.h"

#include "gr_error.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef struct {
  char *buf;
  size_t cap, len;
  int overflow;
} out;

static void put(out *o, const char *fmt, ...) GR_PRINTF(2, 3);
static void put(out *o, const char *fmt, ...) {
  if (o->overflow) return;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(o->buf + o->len, o->cap - o->len, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= o->cap - o->len)
    o->overflow = 1;
  else
    o->len += (size_t)n;
}

/* A label value: backslash, double quote and newline escaped, other control bytes dropped. */
static void escape(char *dst, size_t cap, const char *src) {
  size_t n = 0;
  for (; src && *src && n + 3 < cap; src++) {
    unsigned char c = (unsigned char)*src;
    if (c == '\\' || c == '"') {
      dst[n++] = '\\';
      dst[n++] = (char)c;
    } else if (c == '\n') {
      dst[n++] = '\\';
      dst[n++] = 'n';
    } else if (c >= 32 && c != 127) {
      dst[n++] = (char)c;
    }
  }
  dst[n] = '\0';
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
    {"gpurun_rank_collective_seconds_total", "counter",
     "Seconds the rank spent inside finished gpurun collective calls."},
    {"gpurun_rank_collective_calls_total", "counter",
     "gpurun collective and point-to-point calls made."},
    {"gpurun_rank_collective_wait_seconds", "gauge",
     "Seconds inside the collective call or communicator creation the rank is in now (0 between "
     "calls)."},
    {"gpurun_sample_time_seconds", "gauge", "Unix time of this sample."},
};
enum { R_CPU, R_RSS, R_CSEC, R_CALLS, R_WAIT, R_TIME, R_N };

static void header(out *o, const family *f) {
  put(o, "# HELP %s %s\n# TYPE %s %s\n", f->name, f->help, f->name, f->type);
}

size_t gr__prom_format(const gr__sample *s, const char *job, const char *host, const gr__live *live,
                       char *buf, size_t cap) {
  out o = {buf, cap, 0, 0};
  char ej[256], eh[256], rank[16] = "";
  escape(ej, sizeof ej, job);
  escape(eh, sizeof eh, host);
  if (s->rank >= 0) snprintf(rank, sizeof rank, "%d", s->rank);
  char base[700];
  snprintf(base, sizeof base, "job=\"%s\",host=\"%s\",rank=\"%s\",local_rank=\"%d\"", ej, eh, rank,
           s->local_rank);
  for (int f = 0; f < F_N && s->ngpus; f++) {
    header(&o, &gpu_families[f]);
    for (int g = 0; g < s->ngpus; g++) {
      const gr__gpu_sample *G = &s->gpu[g];
      char pci[64];
      escape(pci, sizeof pci, G->pci);
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
      put(&o, "%s{%s,gpu=\"%d\",pci=\"%s\"} %.15g\n", gpu_families[f].name, base, G->index, pci, v);
    }
  }
  double csec = 0, calls = 0, wait = 0;
  if (live)
    for (int i = 0; i < live->ncomms; i++) {
      const gr__live_comm *c = &live->comm[i];
      csec += c->busy_s;
      calls += (double)c->calls;
      if (!strcmp(c->state, "running") && c->start > 0 && s->unix_s - c->start > wait)
        wait = s->unix_s - c->start;
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
    case R_CSEC:
      if (live) v = csec;
      break;
    case R_CALLS:
      if (live) v = calls;
      break;
    case R_WAIT:
      if (live) v = wait;
      break;
    case R_TIME:
      v = s->unix_s;
      break;
    default:
      break;
    }
    if (isnan(v)) continue;
    header(&o, &rank_families[f]);
    put(&o, "%s{%s} %.15g\n", rank_families[f].name, base, v);
  }
  return o.overflow ? 0 : o.len;
}

int gr__prom_write(const char *dir, const char *name, const char *text, size_t len) {
  char path[PATH_MAX], tmp[PATH_MAX];
  if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path ||
      (size_t)snprintf(tmp, sizeof tmp, "%s/.%s.tmp.%d", dir, name, (int)getpid()) >= sizeof tmp) {
    errno = ENAMETOOLONG;
    return -1;
  }
  unlink(tmp); /* ours from a killed predecessor with this pid, or a planted link: never followed */
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return -1;
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
    errno = e;
    return -1;
  }
  return 0;
}
