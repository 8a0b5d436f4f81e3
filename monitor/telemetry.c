/* Per-rank telemetry: NVML (gr_nvml.h) for the GPUs, /proc for the CPU side. */
#include "gr_telemetry.h"

#include "gr_error.h"
#include "gr_log.h"
#include "gr_nvml.h"
#include "gr_strbuf.h"

#include <errno.h>
#include <fcntl.h>
#include <hwloc.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

/* The layouts and constants of the NVML calls read here (the entry points: gr_nvml.h). */
typedef int nvml_ret;
typedef gr__nvml_dev nvml_dev;
typedef struct {
  unsigned int gpu, memory;
} nvml_util;
typedef struct {
  unsigned long long total, free, used;
} nvml_mem;
enum {
  NVML_OK = 0,
  NVML_TEMP_GPU = 0,
  NVML_CLOCK_SM = 1,
  NVML_ECC_UNCORRECTED = 1,
  NVML_ECC_VOLATILE = 0
};
typedef gr__nvml nvml_api;

/* nvmlProcessInfo_t (v2/v3) and nvmlProcessUtilizationSample_t. */
typedef struct {
  unsigned int pid;
  unsigned long long used;
  unsigned int gi, ci;
} nvml_proc;
typedef struct {
  unsigned int pid;
  unsigned long long ts;
  unsigned int sm, mem, enc, dec;
} nvml_putil;
#define GR_MAX_PROCS 64

#define GR_PCI_LEN 32

struct gr__telemetry {
  nvml_api nv;
  int nvml_up;
  int ngpus;
  nvml_dev dev[GR_TELEMETRY_MAX_GPUS];
  char pci[GR_TELEMETRY_MAX_GPUS][GR_PCI_LEN];
  double energy_j[GR_TELEMETRY_MAX_GPUS]; /* integrated from power when NVML has no counter */
  int mig_parent[GR_TELEMETRY_MAX_GPUS];  /* row of the parent GPU of a MIG device, -1 none */
  double last_unix;                       /* time of the previous sample (integration) */
  unsigned long long putil_seen[GR_TELEMETRY_MAX_GPUS]; /* NVML timestamp of the last sample read */
  int ncpus;                                            /* size of mask/prev/cur */
  unsigned char *mask;                                  /* the rank's cores */
  gr__cpu_times *prev, *cur;
  gr__cpu_times node_prev, node_cur; /* the all-CPU line: steal when the rank's cores have none */
  int have_prev;
  pid_t pid;
  int rank, local_rank;
};

/* ---- /proc parsers ---- */

/* The numbers after a "cpu" or "cpuN" label: user nice system idle iowait irq softirq steal
 * [guest guest_nice]. Guest time is already counted in user/nice, so it is left out of the total.
 * Returns 0, or -1 when fewer than 4 numbers parse. */
static int parse_cpu_fields(const char *p, gr__cpu_times *out) {
  unsigned long long v[10] = {0};
  int nv = 0;
  while (nv < 10) {
    char *e;
    errno = 0;
    unsigned long long x = strtoull(p, &e, 10);
    if (e == p || errno) break;
    v[nv++] = x;
    p = e;
  }
  if (nv < 4) return -1;
  unsigned long long total = 0;
  for (int i = 0; i < nv && i < 8; i++)
    total += v[i];
  unsigned long long idle = v[3] + (nv > 4 ? v[4] : 0);
  out->total = total;
  out->busy = total - idle;
  out->has_steal = nv >= 8;
  out->steal = nv >= 8 ? v[7] : 0;
  return 0;
}

int gr__parse_proc_stat(const char *text, gr__cpu_times *out, int max, gr__cpu_times *node) {
  int highest = -1;
  for (int i = 0; i < max; i++)
    memset(&out[i], 0, sizeof out[i]);
  if (node) memset(node, 0, sizeof *node);
  for (const char *line = text; line && *line;) {
    const char *next = strchr(line, '\n');
    if (strncmp(line, "cpu", 3) == 0 && line[3] >= '0' && line[3] <= '9') {
      char *end;
      errno = 0;
      long cpu = strtol(line + 3, &end, 10);
      gr__cpu_times t;
      if (!errno && cpu >= 0 && cpu < INT_MAX && parse_cpu_fields(end, &t) == 0) {
        if (cpu < max) out[cpu] = t;
        if (cpu > highest) highest = (int)cpu;
      }
    } else if (node && strncmp(line, "cpu ", 4) == 0) {
      if (parse_cpu_fields(line + 4, node) != 0) memset(node, 0, sizeof *node);
    }
    line = next ? next + 1 : NULL;
  }
  return highest < 0 ? -1 : highest + 1;
}

long long gr__parse_status_rss_kib(const char *text) {
  for (const char *p = text; p && *p;) {
    if (strncmp(p, "VmRSS:", 6) == 0) {
      char *end;
      long long kib = strtoll(p + 6, &end, 10);
      return end == p + 6 ? -1 : kib;
    }
    const char *nl = strchr(p, '\n');
    p = nl ? nl + 1 : NULL;
  }
  return -1;
}

double gr__cpu_util(const gr__cpu_times *prev, const gr__cpu_times *cur, const unsigned char *mask,
                    int n) {
  unsigned long long busy = 0, total = 0;
  for (int i = 0; i < n; i++) {
    if (!mask[i] || cur[i].total < prev[i].total || cur[i].busy < prev[i].busy) continue;
    busy += cur[i].busy - prev[i].busy;
    total += cur[i].total - prev[i].total;
  }
  return total ? 100.0 * (double)busy / (double)total : -1.0;
}

/* Adds one CPU's steal and total jiffies between two snapshots; a counter that went back (a CPU
 * taken offline and back) says nothing about the interval and is left out. */
static void add_steal(const gr__cpu_times *a, const gr__cpu_times *b, unsigned long long *steal,
                      unsigned long long *total) {
  if (!a->has_steal || !b->has_steal || b->total < a->total || b->steal < a->steal) return;
  *steal += b->steal - a->steal;
  *total += b->total - a->total;
}

double gr__cpu_steal(const gr__cpu_times *prev, const gr__cpu_times *cur, const unsigned char *mask,
                     int n, const gr__cpu_times *node_prev, const gr__cpu_times *node_cur) {
  unsigned long long steal = 0, total = 0;
  for (int i = 0; i < n; i++)
    if (mask[i]) add_steal(&prev[i], &cur[i], &steal, &total);
  if (!total && node_prev && node_cur) add_steal(node_prev, node_cur, &steal, &total);
  if (!total) return -1.0;
  double share = 100.0 * (double)steal / (double)total;
  return share > 100.0 ? 100.0 : share; /* steal is part of total: only a torn read passes 100 */
}

/* Reads a small /proc file whole into buf; returns its length or -1. */
static ssize_t read_small(const char *path, char *buf, size_t cap) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  size_t len = 0;
  for (;;) {
    ssize_t r = read(fd, buf + len, cap - 1 - len);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    len += (size_t)r;
    if (len == cap - 1) break;
  }
  close(fd);
  buf[len] = '\0';
  return (ssize_t)len;
}

int gr__read_proc_stat(const char *path, gr__cpu_times *out, int max, gr__cpu_times *node) {
  /* /proc/stat grows with the CPU count: ~150 bytes a CPU. The cpu lines come first, so a file
   * cut at cap still holds those of the first max CPUs. */
  size_t cap = 4096 + (size_t)(max > 0 ? max : 0) * 200;
  char *buf = malloc(cap);
  if (!buf) return -1;
  int r = read_small(path, buf, cap) > 0 ? gr__parse_proc_stat(buf, out, max, node) : -1;
  free(buf);
  return r;
}

/* 0 when the per-CPU lines or the all-CPU line parsed (a /proc/stat with only the latter still
 * gives the node's steal). */
static int snapshot_cpus(gr__telemetry *t) {
  int r = gr__read_proc_stat("/proc/stat", t->cur, t->ncpus, &t->node_cur);
  return r > 0 || t->node_cur.total > 0 ? 0 : -1;
}

/* ---- NVML ---- */

static int nvml_load(gr__telemetry *t) {
  const char *lib = gr__nvml_library_name();
  gr_status f = gr__nvml_open(&t->nv);
  if (f == GR_ERR_NOT_FOUND) {
    GR_LOG_ONCE(GR_LOG_INFO,
                "NVML not available (%s could not be loaded): sampling the CPU side only", lib);
    return -1;
  }
  if (f == GR_ERR_UNSUPPORTED || (f == GR_OK && (!t->nv.count || !t->nv.by_index))) {
    gr__nvml_close(&t->nv);
    GR_LOG_ONCE(GR_LOG_INFO,
                "NVML not available (%s lacks nvmlInit_v2 or the device lookups): "
                "sampling the CPU side only",
                lib);
    return -1;
  }
  if (f != GR_OK) {
    GR_LOG_ONCE(GR_LOG_INFO, "NVML not available (%s): sampling the CPU side only",
                gr_last_error());
    return -1;
  }
  t->nvml_up = 1;
  return 0;
}

/* nvmlPciInfo_t (v3): busIdLegacy[16], domain, bus, device, pciDeviceId, pciSubSystemId,
 * busId[32]. Only the domain/bus/device words are read, to print ids in the plan's format. */
typedef struct {
  char bus_id_legacy[16];
  unsigned int domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
} nvml_pci;

/* A GPU in MIG mode: each MIG device is sampled as a device of its own after its parent, named
 * "<pci>/mig<i>" (memory and, where the driver allows, utilisation are the slice's; temperature
 * and power stay the parent's). */
static void add_migs(gr__telemetry *t, nvml_dev parent, const char *pci, int parent_row) {
  nvml_api *nv = &t->nv;
  unsigned int cur = 0, pend = 0, max = 0;
  if (!nv->mig_mode || !nv->mig_count || !nv->mig_by_index ||
      nv->mig_mode(parent, &cur, &pend) != NVML_OK || cur != 1 ||
      nv->mig_count(parent, &max) != NVML_OK)
    return;
  for (unsigned int i = 0; i < max && t->ngpus < GR_TELEMETRY_MAX_GPUS; i++) {
    nvml_dev m;
    if (nv->mig_by_index(parent, i, &m) != NVML_OK) continue; /* slot not populated */
    t->dev[t->ngpus] = m;
    t->mig_parent[t->ngpus] = parent_row;
    snprintf(t->pci[t->ngpus], GR_PCI_LEN, "%.16s/mig%u", pci, i);
    t->ngpus++;
  }
}

static void nvml_match(gr__telemetry *t, const char *gpus_pci) {
  nvml_api *nv = &t->nv;
  if (gpus_pci) {
    char list[1024];
    snprintf(list, sizeof list, "%s", gpus_pci);
    char *save = NULL;
    for (char *id = strtok_r(list, ", ", &save); id && t->ngpus < GR_TELEMETRY_MAX_GPUS;
         id = strtok_r(NULL, ", ", &save)) {
      nvml_dev d;
      nvml_ret rc = nv->by_pci(id, &d);
      if (rc != NVML_OK) {
        GR_WARN("telemetry: NVML does not know GPU %s (%s); not sampling it", id,
                nv->error_string ? nv->error_string(rc) : "error");
        continue;
      }
      int row = t->ngpus;
      t->dev[t->ngpus] = d;
      t->mig_parent[t->ngpus] = -1;
      snprintf(t->pci[t->ngpus], GR_PCI_LEN, "%s", id);
      t->ngpus++;
      add_migs(t, d, id, row);
    }
    return;
  }
  unsigned int n = 0;
  if (nv->count(&n) != NVML_OK) return;
  for (unsigned int i = 0; i < n && t->ngpus < GR_TELEMETRY_MAX_GPUS; i++) {
    nvml_dev d;
    if (nv->by_index(i, &d) != NVML_OK) continue;
    nvml_pci pci;
    memset(&pci, 0, sizeof pci);
    if (nv->pci_info && nv->pci_info(d, &pci) == NVML_OK)
      snprintf(t->pci[t->ngpus], GR_PCI_LEN, "%04x:%02x:%02x.0", pci.domain & 0xffff, pci.bus,
               pci.device);
    else
      snprintf(t->pci[t->ngpus], GR_PCI_LEN, "nvml%u", i);
    int row = t->ngpus;
    t->mig_parent[t->ngpus] = -1;
    t->dev[t->ngpus++] = d;
    char parent_pci[GR_PCI_LEN];
    snprintf(parent_pci, sizeof parent_pci, "%s", t->pci[row]);
    add_migs(t, d, parent_pci, row);
  }
}

/* ---- lifecycle ---- */

gr_status gr__telemetry_open(const char *gpus_pci, const char *cpus, pid_t pid, int rank,
                             int local_rank, gr__telemetry **out) {
  *out = NULL;
  gr__telemetry *t = calloc(1, sizeof *t);
  if (!t) return GR_ERR_NOMEM;
  t->pid = pid;
  t->rank = rank;
  t->local_rank = local_rank;

  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  if (!set) {
    free(t);
    return GR_ERR_NOMEM;
  }
  int have = 0;
  if (cpus && *cpus) {
    have = hwloc_bitmap_list_sscanf(set, cpus) == 0 && !hwloc_bitmap_iszero(set);
    if (!have)
      GR_WARN("telemetry: cpuset '%s' does not parse; using this process's affinity", cpus);
  }
  if (!have) {
    cpu_set_t aff;
    CPU_ZERO(&aff);
    if (sched_getaffinity(0, sizeof aff, &aff) == 0)
      for (int i = 0; i < CPU_SETSIZE; i++)
        if (CPU_ISSET(i, &aff)) hwloc_bitmap_set(set, (unsigned)i);
  }
  int last = hwloc_bitmap_last(set);
  t->ncpus = last < 0 ? 1 : last + 1;
  t->mask = calloc((size_t)t->ncpus, 1);
  t->prev = calloc((size_t)t->ncpus, sizeof *t->prev);
  t->cur = calloc((size_t)t->ncpus, sizeof *t->cur);
  if (!t->mask || !t->prev || !t->cur) {
    hwloc_bitmap_free(set);
    gr__telemetry_close(t);
    return GR_ERR_NOMEM;
  }
  unsigned idx;
  hwloc_bitmap_foreach_begin(idx, set) { t->mask[idx] = 1; }
  hwloc_bitmap_foreach_end();
  hwloc_bitmap_free(set);

  if (snapshot_cpus(t) == 0) {
    memcpy(t->prev, t->cur, (size_t)t->ncpus * sizeof *t->cur);
    t->node_prev = t->node_cur;
    t->have_prev = 1;
  }
  if (!(gpus_pci && !*gpus_pci) && nvml_load(t) == 0) nvml_match(t, gpus_pci);
  *out = t;
  return GR_OK;
}

int gr__telemetry_ngpus(const gr__telemetry *t) { return t ? t->ngpus : 0; }

void gr__telemetry_close(gr__telemetry *t) {
  if (!t) return;
  if (t->nvml_up) gr__nvml_close(&t->nv);
  free(t->mask);
  free(t->prev);
  free(t->cur);
  free(t);
}

/* ---- sampling ---- */

/* Whether pid is root or one of its descendants: walk up the parent chain (a few /proc reads). */
static int in_tree(pid_t pid, pid_t root) {
  for (int depth = 0; depth < 64 && pid > 1; depth++) {
    if (pid == root) return 1;
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    if (read_small(path, buf, sizeof buf) <= 0) return 0;
    const char *p = strrchr(buf, ')'); /* the command may hold spaces and parentheses */
    char st;
    int ppid;
    if (!p || sscanf(p + 1, " %c %d", &st, &ppid) != 2) return 0;
    pid = (pid_t)ppid;
  }
  return pid == root;
}

/* Splits a shared GPU between this rank's process tree and the others (NVML per-process rows). */
static void sample_share(gr__telemetry *t, int g, gr__gpu_sample *G) {
  nvml_api *nv = &t->nv;
  nvml_dev d = t->dev[g];
  if (nv->procs) {
    nvml_proc rows[GR_MAX_PROCS];
    unsigned int n = GR_MAX_PROCS;
    if (nv->procs(d, &n, rows) == NVML_OK && n <= GR_MAX_PROCS) {
      G->has_share_mem = 1;
      for (unsigned i = 0; i < n; i++) {
        /* usedGpuMemory is ~0ULL (NVML_VALUE_NOT_AVAILABLE) on some Windows/MIG setups */
        unsigned long long used = rows[i].used == ~0ULL ? 0 : rows[i].used;
        if (in_tree((pid_t)rows[i].pid, t->pid))
          G->rank_mem += used;
        else
          G->others_mem += used;
      }
    }
  }
  if (nv->proc_util) {
    nvml_putil stack[GR_MAX_PROCS], *rows = stack;
    unsigned int n = GR_MAX_PROCS;
    nvml_ret rc = nv->proc_util(d, rows, &n, t->putil_seen[g]);
    if (rc == 7 /* NVML_ERROR_INSUFFICIENT_SIZE: many samples since the last call */ && n > 0 &&
        n < 4096 && (rows = malloc(n * sizeof *rows)) != NULL)
      rc = nv->proc_util(d, rows, &n, t->putil_seen[g]);
    if (!rows) rows = stack;
    if (rc == NVML_OK) {
      /* NVML may return several samples of one process since the last call: average per pid,
       * then sum by owner. */
      G->has_share_util = 1;
      for (unsigned i = 0; i < n; i++) {
        if (rows[i].ts > t->putil_seen[g]) t->putil_seen[g] = rows[i].ts;
        int seen = 0;
        for (unsigned j = 0; j < i; j++)
          seen |= rows[j].pid == rows[i].pid;
        if (seen) continue;
        double sum = 0;
        int cnt = 0;
        for (unsigned j = i; j < n; j++)
          if (rows[j].pid == rows[i].pid) sum += rows[j].sm, cnt++;
        if (in_tree((pid_t)rows[i].pid, t->pid))
          G->rank_sm += sum / cnt;
        else
          G->others_sm += sum / cnt;
      }
    } else if (rc == 6 /* NVML_ERROR_NOT_FOUND: no process ran since the last call */) {
      G->has_share_util = 1;
    }
    if (rows != stack) free(rows);
  }
}

void gr__telemetry_read(gr__telemetry *t, double elapsed_s, gr__sample *out) {
  memset(out, 0, sizeof *out);
  struct timeval now;
  gettimeofday(&now, NULL);
  out->unix_s = (double)now.tv_sec + (double)now.tv_usec * 1e-6;
  out->elapsed_s = elapsed_s;
  out->rank = t->rank;
  out->local_rank = t->local_rank;
  out->cpu_util = -1.0;
  out->cpu_steal = -1.0;
  if (snapshot_cpus(t) == 0) {
    if (t->have_prev) {
      out->cpu_util = gr__cpu_util(t->prev, t->cur, t->mask, t->ncpus);
      out->cpu_steal =
          gr__cpu_steal(t->prev, t->cur, t->mask, t->ncpus, &t->node_prev, &t->node_cur);
    }
    gr__cpu_times *tmp = t->prev;
    t->prev = t->cur;
    t->cur = tmp;
    t->node_prev = t->node_cur;
    t->have_prev = 1;
  }
  out->rss_kib = -1;
  char path[64], status[8192];
  snprintf(path, sizeof path, "/proc/%d/status", (int)t->pid);
  if (read_small(path, status, sizeof status) > 0) out->rss_kib = gr__parse_status_rss_kib(status);

  double dt = t->last_unix > 0 ? out->unix_s - t->last_unix : 0;
  t->last_unix = out->unix_s;
  out->ngpus = t->ngpus;
  for (int g = 0; g < t->ngpus; g++) {
    gr__gpu_sample *G = &out->gpu[g];
    nvml_api *nv = &t->nv;
    nvml_dev d = t->dev[g];
    nvml_util u;
    nvml_mem m;
    unsigned int temp, mw, mhz, idx;
    unsigned long long thr, ecc, mj;
    snprintf(G->pci, sizeof G->pci, "%s", t->pci[g]);
    G->index = nv->index && nv->index(d, &idx) == NVML_OK ? (int)idx : g;
    if (t->mig_parent[g] >= 0) G->index = out->gpu[t->mig_parent[g]].index; /* a MIG slice */
    G->has_util = nv->utilization && nv->utilization(d, &u) == NVML_OK;
    if (G->has_util) G->util = u.gpu, G->mem_util = u.memory;
    G->has_mem = nv->memory && nv->memory(d, &m) == NVML_OK;
    if (G->has_mem) G->mem_used = m.used, G->mem_total = m.total;
    G->has_temp = nv->temperature && nv->temperature(d, NVML_TEMP_GPU, &temp) == NVML_OK;
    if (G->has_temp) G->temp_c = temp;
    G->has_power = nv->power && nv->power(d, &mw) == NVML_OK;
    if (G->has_power) G->power_w = mw / 1000.0;
    G->has_clock = nv->clock && nv->clock(d, NVML_CLOCK_SM, &mhz) == NVML_OK;
    if (G->has_clock) G->sm_mhz = mhz;
    G->has_throttle = nv->throttle && nv->throttle(d, &thr) == NVML_OK;
    if (G->has_throttle) G->throttle = thr;
    G->has_ecc = nv->ecc && nv->ecc(d, NVML_ECC_UNCORRECTED, NVML_ECC_VOLATILE, &ecc) == NVML_OK;
    if (G->has_ecc) G->ecc_uncorrected = ecc;
    /* The driver's energy counter when it has one (dcgm-exporter's total energy), else power
     * integrated over the samples since gpurun started. */
    if (nv->energy && nv->energy(d, &mj) == NVML_OK) {
      G->has_energy = 1;
      G->energy_j = (double)mj / 1000.0;
    } else if (G->has_power) {
      t->energy_j[g] += G->power_w * dt;
      G->has_energy = 1;
      G->energy_j = t->energy_j[g];
    }
    sample_share(t, g, G);
  }
}

size_t gr__telemetry_format_csv(const gr__sample *smp, char *buf, size_t cap) {
  char cpu_col[64] = "", rss_col[64] = "";
  if (smp->cpu_util >= 0) snprintf(cpu_col, sizeof cpu_col, "%.1f", smp->cpu_util);
  if (smp->rss_kib >= 0) snprintf(rss_col, sizeof rss_col, "%.1f", (double)smp->rss_kib / 1024.0);
  gr__strbuf s;
  gr__strbuf_init_fixed(&s, buf, cap);
  int rows = smp->ngpus > 0 ? smp->ngpus : 1;
  for (int g = 0; g < rows; g++) {
    const gr__gpu_sample *G = &smp->gpu[g];
    gr__strbuf_appendf(&s, "%.3f,%.3f,%d,%d,%s,", smp->unix_s, smp->elapsed_s, smp->rank,
                       smp->local_rank, smp->ngpus ? G->pci : "-");
    if (smp->ngpus) {
      if (G->has_util)
        gr__strbuf_appendf(&s, "%u,%u,", G->util, G->mem_util);
      else
        gr__strbuf_appendf(&s, ",,");
      if (G->has_mem)
        gr__strbuf_appendf(&s, "%.1f,%.1f,", (double)G->mem_used / 1048576.0,
                           (double)G->mem_total / 1048576.0);
      else
        gr__strbuf_appendf(&s, ",,");
      if (G->has_temp)
        gr__strbuf_appendf(&s, "%u,", G->temp_c);
      else
        gr__strbuf_appendf(&s, ",");
      if (G->has_power)
        gr__strbuf_appendf(&s, "%.3f,", G->power_w);
      else
        gr__strbuf_appendf(&s, ",");
      if (G->has_clock)
        gr__strbuf_appendf(&s, "%u,", G->sm_mhz);
      else
        gr__strbuf_appendf(&s, ",");
      if (G->has_throttle)
        gr__strbuf_appendf(&s, "0x%llx,", G->throttle);
      else
        gr__strbuf_appendf(&s, ",");
      if (G->has_ecc)
        gr__strbuf_appendf(&s, "%llu,", G->ecc_uncorrected);
      else
        gr__strbuf_appendf(&s, ",");
    } else {
      gr__strbuf_appendf(&s, ",,,,,,,,,");
    }
    gr__strbuf_appendf(&s, "%s,%s,", cpu_col, rss_col);
    if (smp->ngpus && G->has_share_util)
      gr__strbuf_appendf(&s, "%.1f,%.1f,", G->rank_sm, G->others_sm);
    else
      gr__strbuf_appendf(&s, ",,");
    if (smp->ngpus && G->has_share_mem)
      gr__strbuf_appendf(&s, "%.1f,%.1f\n", (double)G->rank_mem / 1048576.0,
                         (double)G->others_mem / 1048576.0);
    else
      gr__strbuf_appendf(&s, ",\n");
  }
  return s.truncated ? 0 : gr__strbuf_len(&s);
}

size_t gr__telemetry_sample(gr__telemetry *t, double elapsed_s, char *buf, size_t cap) {
  gr__sample smp;
  gr__telemetry_read(t, elapsed_s, &smp);
  return gr__telemetry_format_csv(&smp, buf, cap);
}
