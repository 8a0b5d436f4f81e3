/* Loading a job directory for gpurun-top and naming the rank the others wait for. Every file may
 * be hostile (another user's job, a half-written CSV): fields are bounded and cleaned. */
#include "gr_top.h"

#include "gr_monitor_csv.h"

#include "gr_median.h"
#include "gr_strbuf.h"
#include "gr_waitfor.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int ends_with(const char *s, const char *suffix) {
  size_t a = strlen(s), b = strlen(suffix);
  return a >= b && !strcmp(s + a - b, suffix);
}

static int is_job_file(const char *name) {
  return (strncmp(name, "live.", 5) == 0 && name[5] >= '0' && name[5] <= '9') ||
         (ends_with(name, ".csv") && name[0] != '.');
}

static int holds_job(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  int yes = 0;
  for (struct dirent *e; !yes && (e = readdir(d));)
    yes = is_job_file(e->d_name);
  closedir(d);
  return yes;
}

int gr__top_find_job(const char *dir, char *out, size_t cap, char *err, size_t errlen) {
  if (holds_job(dir)) {
    snprintf(out, cap, "%s", dir);
    return 0;
  }
  DIR *d = opendir(dir);
  if (!d) {
    snprintf(err, errlen, "cannot open %s: %s", dir, strerror(errno));
    return -1;
  }
  double best = -1;
  char path[2048];
  for (struct dirent *e; (e = readdir(d));) {
    if (e->d_name[0] == '.') continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode) || !holds_job(path)) continue;
    double t = (double)st.st_mtim.tv_sec + (double)st.st_mtim.tv_nsec * 1e-9;
    if (t > best && strlen(path) < cap) {
      best = t;
      snprintf(out, cap, "%s", path);
    }
  }
  closedir(d);
  if (best < 0) {
    snprintf(err, errlen, "%s holds no job (no live.<rank> or <node>.<local_rank>.csv files)", dir);
    return -1;
  }
  return 0;
}

/* Reads up to cap-1 bytes at offset into buf; returns the length or -1. */
static ssize_t read_at(int fd, char *buf, size_t cap, off_t off) {
  size_t len = 0;
  while (len < cap - 1) {
    ssize_t r = pread(fd, buf + len, cap - 1 - len, off + (off_t)len);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    len += (size_t)r;
  }
  buf[len] = '\0';
  return (ssize_t)len;
}

/* The row of a rank: rows are appended as files name ranks (job->index maps rank -> row) and
 * sorted by rank once everything is loaded. */
static gr__top_rank *rank_slot(gr__top_job *job, int rank) {
  if (rank < 0 || rank > GR__TOP_MAX_RANK) return NULL;
  if ((size_t)rank >= job->index.count) {
    static const int none = -1;
    if (gr__array_reserve(&job->index, (size_t)rank + 1) != GR_OK) return NULL;
    while (job->index.count <= (size_t)rank)
      gr__array_push(&job->index, &none); /* within the reserve: cannot fail */
  }
  int *row = &GR_ARRAY_AT(&job->index, int, rank);
  if (*row >= 0) return &GR__TOP_ROW(job, *row);
  if (gr__array_push(&job->r, NULL) != GR_OK) return NULL;
  *row = gr__top_nranks(job) - 1;
  gr__top_rank *t = &GR__TOP_ROW(job, *row);
  t->rank = rank;
  t->local_rank = -1;
  t->cpu_pct = t->rss_mib = -1;
  return t;
}

static int by_rank(const void *a, const void *b) {
  int x = ((const gr__top_rank *)a)->rank, y = ((const gr__top_rank *)b)->rank;
  return (x > y) - (x < y);
}

static char proc_state(long pid) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%ld/stat", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 'X';
  ssize_t n = read_at(fd, buf, sizeof buf, 0);
  close(fd);
  if (n <= 0) return 'X';
  const char *p = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
  return p && p[1] == ' ' && p[2] ? p[2] : 0;
}

/* One "R:S" item of an mpi_waited line (len bytes). */
static int waited_item(const char *p, size_t len, int rank, gr__top_waited *out) {
  const char *colon = memchr(p, ':', len);
  char buf[48];
  if (!colon || len >= sizeof buf || colon == p) return -1;
  size_t rl = (size_t)(colon - p);
  memcpy(buf, p, rl);
  buf[rl] = '\0';
  long long peer;
  if (gr__parse_ll(buf, 0, GR__TOP_MAX_RANK, &peer) != GR_OK || peer == rank) return -1;
  size_t sl = len - rl - 1;
  if (!sl) return -1;
  memcpy(buf, colon + 1, sl);
  buf[sl] = '\0';
  char *e;
  errno = 0;
  double v = strtod(buf, &e);
  /* decimal only (strtod also takes hex, "inf" and "nan"), starting with a digit */
  if (errno || *e || !isfinite(v) || v < 0 || v >= 1e12 || !(buf[0] >= '0' && buf[0] <= '9') ||
      strspn(buf, "0123456789.eE+-") != sl)
    return -1;
  for (int k = 0; k < out->n; k++)
    if (out->peer[k] == (int)peer) return -1; /* a rank twice: not the layer's line */
  if (out->n == GR__TOP_MAX_WAITED) return -1;
  out->peer[out->n] = (int)peer;
  out->s[out->n++] = v;
  return 0;
}

int gr__top_parse_waited(const char *text, size_t len, int rank, gr__top_waited *out) {
  static const char key[] = "mpi_waited";
  const size_t kl = sizeof key - 1;
  out->n = 0;
  for (const char *p = text, *end = text + len; p < end;) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    const char *le = nl ? nl : end;
    const char *line = p;
    p = nl ? nl + 1 : end;
    if ((size_t)(le - line) <= kl || memcmp(line, key, kl) != 0 ||
        (line[kl] != ' ' && line[kl] != '\t'))
      continue;
    const char *t = line + kl;
    while (t < le && (*t == ' ' || *t == '\t'))
      t++;
    const char *te = t;
    while (te < le && *te != ' ' && *te != '\t' && *te != '\r')
      te++;
    for (const char *r = te; r < le; r++) /* one token, then only blanks */
      if (*r != ' ' && *r != '\t' && *r != '\r') return -1;
    if (t == te) return -1;
    for (const char *i = t; i < te;) {
      const char *c = memchr(i, ',', (size_t)(te - i));
      const char *ie = c ? c : te;
      if (waited_item(i, (size_t)(ie - i), rank, out) != 0 || (c && c + 1 == te)) {
        out->n = 0;
        return -1;
      }
      i = c ? c + 1 : te;
    }
    return 0; /* the first such line is the layer's */
  }
  return -1;
}

static void load_live(gr__top_job *job, const char *path, const char *name, const char *myhost) {
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return;
  char buf[8192];
  ssize_t n = read_at(fd, buf, sizeof buf, 0);
  close(fd);
  gr__live lv;
  if (n <= 0 || gr__live_parse(buf, (size_t)n, &lv) != 0) return;
  /* live.<rank>: a file that claims another rank than its name is not that rank's */
  long long named;
  if (gr__parse_ll(name + 5, 0, LLONG_MAX, &named) != GR_OK || named != lv.rank) return;
  gr__top_rank *t = rank_slot(job, lv.rank);
  if (!t) return;
  t->live = lv;
  t->have_live = 1;
  gr__top_parse_waited(buf, (size_t)n, lv.rank, &t->waited);
  t->age_s = job->now - lv.time;
  if (!t->host[0]) snprintf(t->host, sizeof t->host, "%s", lv.host);
  if (lv.pid > 0 && !strcmp(lv.host, myhost)) t->proc_state = proc_state(lv.pid);
  if (t->cpu_pct < 0) t->cpu_pct = lv.cpu_pct;
  if (t->rss_mib < 0 && lv.rss_kib >= 0) t->rss_mib = (double)lv.rss_kib / 1024.0;
  if (lv.size > job->world) job->world = lv.size;
  job->nlive++;
}

enum {
  C_TIME,
  C_RANK,
  C_LRANK,
  C_GPU,
  C_UTIL,
  C_MUSED,
  C_MTOTAL,
  C_TEMP,
  C_POWER,
  C_THR,
  C_CPU,
  C_RSS,
  C_RSM,
  C_OSM,
  C_CPUT,
  C_N
};
static const char *const col_names[C_N] = {
    "time",          "rank",           "local_rank",     "gpu",      "gpu_util", "mem_used_mib",
    "mem_total_mib", "temp_c",         "power_w",        "throttle", "cpu_util", "rss_mib",
    "rank_sm_util",  "others_sm_util", GR_CSV_CPU_TIME_S};

static int split(char *line, char **f, int max) {
  int n = 0;
  for (char *p = line;; p++) {
    if (n < max) f[n] = p;
    n++;
    p = strchr(p, ',');
    if (!p) break;
    *p = '\0';
  }
  return n;
}

static double fnum(const char *s) {
  if (!s || !*s) return -1;
  char *e;
  double v = strtod(s, &e);
  return *e || !isfinite(v) || v < 0 ? -1 : v;
}

/* The latest sample of one supervisor CSV: its header names the columns, its last lines with one
 * timestamp are the rank's GPUs at that moment. */
static void load_csv(gr__top_job *job, const char *path, const char *name) {
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return;
  struct stat st;
  char head[1024], tail[4096]; /* a sample of 8 GPUs is ~1.2 KB */
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || read_at(fd, head, sizeof head, 0) <= 0) {
    close(fd);
    return;
  }
  off_t off = st.st_size > (off_t)sizeof tail - 1 ? st.st_size - (off_t)sizeof tail + 1 : 0;
  ssize_t tn = read_at(fd, tail, sizeof tail, off);
  close(fd);
  char *nl = strchr(head, '\n');
  if (!nl || tn <= 0) return;
  *nl = '\0';
  int col[C_N];
  for (int c = 0; c < C_N; c++)
    col[c] = -1;
  char *hf[64];
  int hn = split(head, hf, 64);
  for (int i = 0; i < hn && i < 64; i++)
    for (int c = 0; c < C_N; c++)
      if (!strcmp(hf[i], col_names[c])) col[c] = i;
  if (col[C_RANK] < 0 || col[C_TIME] < 0) return;
  /* Complete lines only: cut after the last newline; skip the first (maybe partial) line. */
  char *last_nl = strrchr(tail, '\n');
  if (!last_nl) return;
  *last_nl = '\0';
  char *lines[GR__TOP_MAX_GPUS + 1];
  int nl_count = 0;
  double t0 = -1, prev_t = -1, prev_cpu = -1;
  for (char *p = last_nl; p > tail && nl_count <= GR__TOP_MAX_GPUS;) {
    char *q = p - 1;
    while (q > tail && *q != '\n')
      q--;
    if (*q != '\n' && off > 0) break; /* partial first line of the tail window */
    char *line = *q == '\n' ? q + 1 : q;
    char copy[1024];
    size_t ll = strlen(line);
    if (ll >= sizeof copy) break;
    memcpy(copy, line, ll + 1);
    char *f[64];
    int n = split(copy, f, 64);
    if (n <= col[C_TIME] || n > 64) break;
    double t = fnum(f[col[C_TIME]]);
    if (t0 < 0) t0 = t;
    if (t != t0 && t >= 0 && t < t0 && col[C_CPUT] >= 0 && col[C_CPUT] < n) {
      prev_t = t; /* the sample before: the program's own CPU time then */
      prev_cpu = fnum(f[col[C_CPUT]]);
    }
    if (t != t0 || !strcmp(line, col_names[0])) break;
    lines[nl_count++] = line;
    if (*q != '\n') break;
    *q = '\0';
    p = q;
  }
  if (!nl_count) return;
  /* lines[] is newest-first; GPUs in file order. */
  for (int i = nl_count - 1; i >= 0; i--) {
    char *f[64];
    int n = split(lines[i], f, 64);
    if (n > 64) continue;
    double v;
    v = col[C_RANK] < n ? fnum(f[col[C_RANK]]) : -1;
    if (v < 0 || v > GR__TOP_MAX_RANK) continue;
    gr__top_rank *t = rank_slot(job, (int)v);
    if (!t) return;
    if (i == nl_count - 1) t->ngpus = 0;
    t->have_csv = 1;
    if (!t->host[0]) {
      size_t l = strlen(name) - 4; /* "<node>.<local_rank>.csv" */
      const char *dot = NULL;
      for (size_t k = 0; k < l; k++)
        if (name[k] == '.') dot = name + k;
      gr__live_clean(t->host, sizeof t->host, name, dot ? (size_t)(dot - name) : l);
    }
    if (col[C_LRANK] >= 0 && col[C_LRANK] < n && (v = fnum(f[col[C_LRANK]])) >= 0 && v < 1e6)
      t->local_rank = (int)v;
    /* CPU%: the program's own CPU time over the last interval (the supervisor's cpu_time_s: a
     * stopped rank shows 0 whoever else runs on its core); the cores' busy share only from a
     * supervisor that does not write it */
    double cput = col[C_CPUT] >= 0 && col[C_CPUT] < n ? fnum(f[col[C_CPUT]]) : -1;
    if (cput >= 0 && prev_cpu >= 0 && prev_t >= 0 && t0 > prev_t)
      t->cpu_pct = 100.0 * (cput >= prev_cpu ? cput - prev_cpu : 0) / (t0 - prev_t);
    else if (col[C_CPU] >= 0 && col[C_CPU] < n && (v = fnum(f[col[C_CPU]])) >= 0)
      t->cpu_pct = v;
    if (col[C_RSS] >= 0 && col[C_RSS] < n && (v = fnum(f[col[C_RSS]])) >= 0) t->rss_mib = v;
    const char *pci = col[C_GPU] >= 0 && col[C_GPU] < n ? f[col[C_GPU]] : "-";
    if (!strcmp(pci, "-") || t->ngpus == GR__TOP_MAX_GPUS) continue;
    gr__top_gpu *g = &t->gpu[t->ngpus++];
    gr__live_clean(g->pci, sizeof g->pci, pci, strlen(pci));
    g->util = col[C_UTIL] >= 0 && col[C_UTIL] < n ? fnum(f[col[C_UTIL]]) : -1;
    g->mem_used_mib = col[C_MUSED] >= 0 && col[C_MUSED] < n ? fnum(f[col[C_MUSED]]) : -1;
    g->mem_total_mib = col[C_MTOTAL] >= 0 && col[C_MTOTAL] < n ? fnum(f[col[C_MTOTAL]]) : -1;
    g->temp_c = col[C_TEMP] >= 0 && col[C_TEMP] < n ? fnum(f[col[C_TEMP]]) : -1;
    g->power_w = col[C_POWER] >= 0 && col[C_POWER] < n ? fnum(f[col[C_POWER]]) : -1;
    g->rank_sm = col[C_RSM] >= 0 && col[C_RSM] < n ? fnum(f[col[C_RSM]]) : -1;
    g->others_sm = col[C_OSM] >= 0 && col[C_OSM] < n ? fnum(f[col[C_OSM]]) : -1;
    g->throttle = -1;
    if (col[C_THR] >= 0 && col[C_THR] < n && f[col[C_THR]][0]) {
      char *e;
      errno = 0;
      unsigned long long x = strtoull(f[col[C_THR]], &e, 16);
      if (!*e && !errno && x < (1ull << 62)) g->throttle = (long long)x;
    }
  }
}

int gr__top_load(gr__top_job *job) {
  for (int i = 0; i < gr__top_nranks(job); i++)
    GR_ARRAY_AT(&job->index, int, GR__TOP_ROW(job, i).rank) = -1;
  job->r.count = 0;
  job->nlive = 0;
  job->world = 0;
  job->verdict[0] = '\0';
  job->now = gr__wall_now();
  char myhost[256] = "", clean[GR_LIVE_HOST_BYTES];
  gethostname(myhost, sizeof myhost - 1);
  gr__live_clean(clean, sizeof clean, myhost, strlen(myhost));
  DIR *d = opendir(job->dir);
  if (!d) return -1;
  char path[2048];
  /* Live files first (they name host and pid), then the CSVs override CPU/RSS with the
   * supervisor's samples and add the GPUs. */
  for (int pass = 0; pass < 2; pass++) {
    rewinddir(d);
    for (struct dirent *e; (e = readdir(d));) {
      const char *nm = e->d_name;
      int live = strncmp(nm, "live.", 5) == 0 && nm[5] >= '0' && nm[5] <= '9';
      int csv = !live && nm[0] != '.' && ends_with(nm, ".csv");
      if ((pass == 0 && !live) || (pass == 1 && !csv)) continue;
      if ((size_t)snprintf(path, sizeof path, "%s/%s", job->dir, nm) >= sizeof path) continue;
      if (live)
        load_live(job, path, nm, clean);
      else
        load_csv(job, path, nm);
    }
  }
  closedir(d);
  for (int i = 0; i < gr__top_nranks(job); i++)
    if (GR__TOP_ROW(job, i).rank + 1 > job->world) job->world = GR__TOP_ROW(job, i).rank + 1;
  /* Every rank of the job gets a row, also one that never wrote a file (it may be the culprit). */
  if (job->world <= 65536)
    for (int r = 0; r < job->world; r++)
      rank_slot(job, r);
  if (job->r.count > 1) /* r's data is NULL when empty */
    qsort(job->r.data, job->r.count, sizeof(gr__top_rank), by_rank);
  for (int i = 0; i < gr__top_nranks(job); i++)
    GR_ARRAY_AT(&job->index, int, GR__TOP_ROW(job, i).rank) = i;
  gr__top_analyse(job);
  return 0;
}

void gr__top_job_init(gr__top_job *job) {
  memset(job, 0, sizeof *job);
  gr__array_init(&job->r, sizeof(gr__top_rank));
  gr__array_init(&job->index, sizeof(int));
}

void gr__top_free(gr__top_job *job) {
  gr__array_free(&job->r);
  gr__array_free(&job->index);
  for (int h = 0; h < job->nhist; h++)
    free(job->hist[h].rows);
  job->nhist = 0;
}

/* ---- who waits for whom ---------------------------------------------------------------- */

static const gr__live_comm *comm_in(const gr__top_rank *t, const char *id, int size) {
  if (!t->have_live) return NULL;
  for (int i = 0; i < t->live.ncomms; i++)
    if (!strcmp(t->live.comm[i].id, id) && t->live.comm[i].size == size) return &t->live.comm[i];
  return NULL;
}

static int exited(const gr__top_rank *t) {
  return t->have_live && !strcmp(t->live.state, "exited");
}

/* "NAME[ID]" of a communicator line, or the id alone where the file has no other name. */
static void comm_label(char *out, size_t cap, const gr__live_comm *lc) {
  if (!strcmp(lc->name, lc->id))
    snprintf(out, cap, "%s", lc->id);
  else
    snprintf(out, cap, "%s[%s]", lc->name, lc->id);
}

/* The label of the communicator with this id as any rank's file names it, else the id. */
static void label_of(char *out, size_t cap, const gr__top_job *job, const char *id) {
  for (int i = 0; i < gr__top_nranks(job); i++)
    for (int k = 0; GR__TOP_ROW(job, i).have_live && k < GR__TOP_ROW(job, i).live.ncomms; k++)
      if (!strcmp(GR__TOP_ROW(job, i).live.comm[k].id, id)) {
        comm_label(out, cap, &GR__TOP_ROW(job, i).live.comm[k]);
        return;
      }
  snprintf(out, cap, "%s", id);
}

/* A communicator over the whole world: every rank of the job is a member, also one that has not
 * called on it yet (for any other communicator only the ranks whose files list it are known). */
static int spans_world(const gr__top_job *job, const char *id, int size) {
  if (size != job->world) return 0;
  for (int i = 0; i < gr__top_nranks(job); i++)
    for (int k = 0; GR__TOP_ROW(job, i).have_live && k < GR__TOP_ROW(job, i).live.ncomms; k++) {
      const gr__live_comm *lc = &GR__TOP_ROW(job, i).live.comm[k];
      if (!strcmp(lc->id, id) && lc->size == size) return !strcmp(lc->name, GR_FL_WORLD);
    }
  return 0;
}

/* The world rank of rank crank of communicator id, or -1 when no file says. */
static int world_rank_of(const gr__top_job *job, const char *id, int size, int crank) {
  for (int i = 0; i < gr__top_nranks(job); i++) {
    const gr__live_comm *lc = comm_in(&GR__TOP_ROW(job, i), id, size);
    if (lc && lc->rank == crank) return GR__TOP_ROW(job, i).rank;
  }
  return spans_world(job, id, size) ? crank : -1;
}

/* What the verdict knows of a rank's fault, strongest first: its process (same host: /proc says
 * stopped, zombie or gone, and it did not exit), then its heartbeat (the live file is rewritten
 * every interval; silent for several means stopped, dead or cut off: the only evidence for a
 * rank on another host). */
enum { FAULT_NONE, FAULT_SILENT, FAULT_PROC };

static double silent_after(const gr__top_rank *t) {
  return t->live.interval > 0 ? 4 * t->live.interval + 2 : 3;
}

static int fault_of(const gr__top_rank *t) {
  if (!t->have_live || exited(t)) return FAULT_NONE;
  char s = t->proc_state;
  /* A file rewritten within the last two intervals comes from a live process, whatever /proc
   * says here (a reused pid, another PID namespace under the same host name). */
  double fresh = t->live.interval > 0 ? 2 * t->live.interval + 0.5 : 1;
  if ((s == 'T' || s == 't' || s == 'Z' || s == 'X') && t->age_s > fresh) return FAULT_PROC;
  if (s == 0 && t->age_s > silent_after(t)) return FAULT_SILENT; /* /proc cannot tell */
  return FAULT_NONE;
}

/* "0-2,4" of the ranks whose flag is set, at most a few runs. */
static void put_ranks(gr__strbuf *o, const gr__top_job *job, const unsigned char *flag) {
  int runs = 0, first = 1;
  for (int i = 0; i < gr__top_nranks(job);) {
    if (!flag[i]) {
      i++;
      continue;
    }
    int j = i;
    while (j + 1 < gr__top_nranks(job) && flag[j + 1] &&
           GR__TOP_ROW(job, j + 1).rank == GR__TOP_ROW(job, j).rank + 1)
      j++;
    if (runs == 6) {
      gr__strbuf_appendf(o, ",...");
      return;
    }
    gr__strbuf_appendf(o, "%s%d", first ? "" : ",", GR__TOP_ROW(job, i).rank);
    if (j > i) gr__strbuf_appendf(o, "-%d", GR__TOP_ROW(job, j).rank);
    first = 0;
    runs++;
    i = j + 1;
  }
}

static const char *state_word(char s) {
  switch (s) {
  case 'T':
  case 't':
    return "STOPPED";
  case 'Z':
  case 'X':
    return "GONE";
  case 'D':
    return "in disk wait";
  default:
    return NULL;
  }
}

/* "; rank R" and, where the process is stopped or gone, " (pid P) is STOPPED": 1 when said. */
static int put_rank_state(gr__strbuf *o, const gr__top_rank *t) {
  gr__strbuf_appendf(o, "; rank %d", t->rank);
  const char *sw = state_word(t->proc_state);
  if (sw) gr__strbuf_appendf(o, " (pid %ld) is %s", t->live.pid, sw);
  return sw != NULL;
}

/* Everyone waiting is inside the call: the waiting ranks that stopped publishing (stopped, gone,
 * or silent for long) become the ones blocking it. */
static void suspect_silent(const gr__top_job *job, unsigned char *wait, unsigned char *block,
                           int *nwait, int *nblock) {
  for (int i = 0; i < gr__top_nranks(job); i++) {
    const gr__top_rank *t = &GR__TOP_ROW(job, i);
    double silent = t->live.interval > 0 ? 4 * t->live.interval + 2 : 3;
    if (wait[i] && (state_word(t->proc_state) || t->age_s > silent)) {
      block[i] = 1;
      wait[i] = 0;
      (*nblock)++;
      (*nwait)--;
    }
  }
}

/* The communicator creation the rank is inside (the longest when several threads create), or
 * NULL. */
static const gr__live_creating *creating_of(const gr__top_rank *t) {
  if (!t->have_live || exited(t)) return NULL;
  const gr__live_creating *best = NULL;
  for (int i = 0; i < t->live.ncreating; i++)
    if (!best || t->live.creating[i].start < best->start) best = &t->live.creating[i];
  return best;
}

static int same_creation(const gr__live_creating *a, const gr__live_creating *b) {
  return !strcmp(a->call, b->call) && !strcmp(a->over, b->over) && a->size == b->size;
}

/* "; rank R (pid P) is STOPPED, in gr_comm_split (split) on world for 4.0 s" etc.: what a
 * blocker does, for either verdict. */
static void label_of(char *out, size_t cap, const gr__top_job *job, const char *id);
static void put_creating(gr__strbuf *o, const gr__top_job *job, const gr__live_creating *cr,
                         int comma) {
  char over[80];
  label_of(over, sizeof over, job, cr->over);
  gr__strbuf_appendf(o, "%s in %s (%s) on %s for %.1f s", comma ? "," : "", cr->call, cr->step,
                     over, job->now - cr->start);
}

/* A communicator creation (gr_comm_create, gr_comm_split) waited in for longest: the ranks of the
 * communicator it is collective over that are not inside it are the blockers. The members are
 * known for the world (every rank below its size) and for a split of a communicator the ranks
 * list; a creation over another MPI communicator only names its silent or stopped ranks. */
static void creation_verdict(gr__top_job *job, const gr__live_creating *key, unsigned char *wait,
                             unsigned char *block) {
  int world = !strcmp(key->over, GR_LIVE_OVER_WORLD) || spans_world(job, key->over, key->size);
  int nwait = 0, nblock = 0;
  double longest = 0;
  const char *steps[3] = {NULL, NULL, NULL};
  int nsteps = 0, more_steps = 0;
  for (int i = 0; i < gr__top_nranks(job); i++) {
    const gr__top_rank *t = &GR__TOP_ROW(job, i);
    const gr__live_creating *mine = NULL;
    for (int k = 0; t->have_live && !exited(t) && k < t->live.ncreating && !mine; k++)
      if (same_creation(&t->live.creating[k], key)) mine = &t->live.creating[k];
    if (mine) {
      wait[i] = 1;
      nwait++;
      continue;
    }
    int member = world ? t->rank < key->size : comm_in(t, key->over, key->size) != NULL;
    if (member && !exited(t)) {
      block[i] = 1;
      nblock++;
    }
  }
  if (!nblock) /* everyone is inside: a rank that stopped publishing is the suspect */
    suspect_silent(job, wait, block, &nwait, &nblock);
  for (int i = 0; i < gr__top_nranks(job);
       i++) /* the longest wait and the steps of those still waiting */
    for (int k = 0; wait[i] && k < GR__TOP_ROW(job, i).live.ncreating; k++) {
      const gr__live_creating *mine = &GR__TOP_ROW(job, i).live.creating[k];
      if (!same_creation(mine, key)) continue;
      if (job->now - mine->start > longest) longest = job->now - mine->start;
      int seen = 0;
      for (int j = 0; j < nsteps; j++)
        seen |= !strcmp(steps[j], mine->step);
      if (!seen && nsteps < 3)
        steps[nsteps++] = mine->step;
      else if (!seen)
        more_steps = 1;
      break;
    }
  char step[48] = "";
  gr__strbuf so;
  gr__strbuf_init_fixed(&so, step, sizeof step);
  for (int k = 0; k < nsteps; k++)
    gr__strbuf_appendf(&so, "%s%s", k ? "/" : "", steps[k]);
  if (more_steps) gr__strbuf_appendf(&so, "/...");
  char over[80];
  label_of(over, sizeof over, job, key->over);
  gr__strbuf o;
  gr__strbuf_init_fixed(&o, job->verdict, sizeof job->verdict);
  if (!nblock) {
    gr__strbuf_appendf(
        &o, "%d rank%s in %s (%s) on %s for %.1f s (no rank behind: slow, or all waiting)", nwait,
        nwait == 1 ? "" : "s", key->call, step, over, longest);
    return;
  }
  gr__strbuf_appendf(&o, "WAITING FOR rank%s ", nblock == 1 ? "" : "s");
  put_ranks(&o, job, block);
  if (nwait) { /* else the ones inside stopped: each says how long below */
    gr__strbuf_appendf(&o, ": rank%s ", nwait == 1 ? "" : "s");
    put_ranks(&o, job, wait);
    gr__strbuf_appendf(&o, " in %s (%s) on %s for %.1f s", key->call, step, over, longest);
  }
  int said = 0;
  for (int i = 0; i < gr__top_nranks(job); i++) {
    if (!block[i]) continue;
    gr__top_rank *t = &GR__TOP_ROW(job, i);
    t->blocker = 1;
    if (said++ >= 3) continue;
    int sw = put_rank_state(&o, t);
    const gr__live_creating *cr = creating_of(t);
    if (!t->have_live)
      gr__strbuf_appendf(&o, " never published its state");
    else if (cr)
      put_creating(&o, job, cr, sw);
    else
      gr__strbuf_appendf(&o, "%s has not entered %s on %s", sw ? "," : "", key->call, over);
    /* what it does instead: a collective it waits in (a program that calls in another order, or
     * a rank already past the creation and waiting for the others on the new communicator) */
    const gr__live_comm *run = NULL;
    for (int k = 0; t->have_live && !cr && k < t->live.ncomms; k++) {
      const gr__live_comm *lc = &t->live.comm[k];
      if (!strcmp(lc->state, "running") && lc->start > 0 && (!run || lc->start < run->start))
        run = lc;
    }
    if (run)
      gr__strbuf_appendf(&o, " (in %s #%llu on %s for %.1f s)", run->op, run->seq, run->id,
                         job->now - run->start);
    if (t->have_live && t->age_s > 2) gr__strbuf_appendf(&o, " (silent %.0f s)", t->age_s);
  }
}

/* The running call of a rank that started first (any communicator), else the call it finished
 * last, or NULL. */
static const gr__live_comm *oldest_running(const gr__top_rank *t) {
  const gr__live_comm *run = NULL, *last = NULL;
  for (int k = 0; t->have_live && k < t->live.ncomms; k++) {
    const gr__live_comm *lc = &t->live.comm[k];
    if (!strcmp(lc->state, "running") && lc->start > 0 && (!run || lc->start < run->start))
      run = lc;
    if (lc->calls && lc->end > 0 && (!last || lc->end > last->end)) last = lc;
  }
  return run ? run : last;
}

/* " (waiting for ranks 1,3)": the world ranks of the unfinished sends and receives of lc. */
static void put_waits(gr__strbuf *o, const gr__top_job *job, const gr__live_comm *lc) {
  if (!lc->nwaits) return;
  int seen[GR_LIVE_MAX_WAITS], n = 0, unknown = 0;
  for (int k = 0; k < lc->nwaits; k++) {
    int w = world_rank_of(job, lc->id, lc->size, lc->waits[k].peer);
    int dup = 0;
    for (int j = 0; j < n; j++)
      dup |= seen[j] == w;
    if (w < 0)
      unknown = 1;
    else if (!dup)
      seen[n++] = w;
  }
  int recvs = 0;
  for (int k = 0; k < lc->nwaits; k++)
    recvs += lc->waits[k].recv;
  gr__strbuf_appendf(o, " (%s rank%s ",
                     recvs == lc->nwaits ? "receiving from"
                     : recvs == 0        ? "sending to"
                                         : "sending to/receiving from",
                     n == 1 ? "" : "s");
  for (int j = 0; j < n; j++)
    gr__strbuf_appendf(o, "%s%d", j ? "," : "", seen[j]);
  if (unknown) gr__strbuf_appendf(o, "%s?", n ? "," : "");
  gr__strbuf_appendf(o, ")");
}

/* What a named rank does: its creation, its call on the communicator in question (id NULL: its
 * oldest running call), or the last call it finished. */
static void put_doing(gr__strbuf *o, const gr__top_job *job, const gr__top_rank *t, const char *id,
                      int size, int comma) {
  const gr__live_creating *cr = creating_of(t);
  const gr__live_comm *lc = id ? comm_in(t, id, size) : oldest_running(t);
  char lab[80] = "";
  if (lc) comm_label(lab, sizeof lab, lc);
  if (!t->have_live)
    gr__strbuf_appendf(o, " never published its state");
  else if (cr)
    put_creating(o, job, cr, comma);
  else if (!lc && id) {
    label_of(lab, sizeof lab, job, id);
    gr__strbuf_appendf(o, " has not called on %s yet", lab);
  } else if (!lc)
    gr__strbuf_appendf(o, "%s no call yet", comma ? "," : "");
  else if (!strcmp(lc->state, "running")) {
    gr__strbuf_appendf(o, "%s in %s #%llu%s%s for %.1f s", comma ? "," : "", lc->op, lc->seq,
                       id ? "" : " on ", id ? "" : lab, job->now - lc->start);
    put_waits(o, job, lc);
  } else
    gr__strbuf_appendf(o, "%s last seen: %s #%llu%s%s ended %.1f s ago", comma ? "," : "", lc->op,
                       lc->seq, id ? "" : " on ", id ? "" : lab,
                       lc->end > 0 ? job->now - lc->end : 0.0);
}

/* How sure: the evidence against one named rank. */
static void put_evidence(gr__strbuf *o, const gr__top_rank *t, int fault) {
  if (fault == FAULT_PROC && t->proc_state == 'X')
    gr__strbuf_appendf(o, " [certain: no process %ld on %s]", t->live.pid, t->host);
  else if (fault == FAULT_PROC)
    gr__strbuf_appendf(o, " [certain: process state %c]", t->proc_state);
  else if (fault == FAULT_SILENT)
    gr__strbuf_appendf(o, " [likely: no heartbeat for %.0f s]", t->age_s);
}

/* A rank whose process is stopped or gone (or, lacking that, whose heartbeat stopped): it is the
 * suspect before any reasoning about call numbers, whatever the others wait in. When several
 * processes are gone, the ones that went silent first are the cause (the others went down with
 * the job). */
static void fault_verdict(gr__top_job *job, const unsigned char *fault, int level, const char *desc,
                          const char *id, int size, unsigned char *wait, unsigned char *block) {
  double first = 0;
  int nf = 0;
  for (int i = 0; i < gr__top_nranks(job); i++)
    if (fault[i] == level && (!nf++ || GR__TOP_ROW(job, i).live.time < first))
      first = GR__TOP_ROW(job, i).live.time;
  double grace = 0;
  for (int i = 0; i < gr__top_nranks(job); i++)
    if (fault[i] == level && 2 * GR__TOP_ROW(job, i).live.interval > grace)
      grace = 2 * GR__TOP_ROW(job, i).live.interval;
  if (grace < 0.5) grace = 0.5;
  int nblock = 0, nwait = 0;
  double longest = 0;
  for (int i = 0; i < gr__top_nranks(job); i++) {
    const gr__top_rank *t = &GR__TOP_ROW(job, i);
    if (fault[i] == level && (nf == 1 || t->live.time <= first + grace)) {
      block[i] = 1;
      nblock++;
    } else if (!fault[i] && !exited(t) && t->have_live) {
      const gr__live_creating *cr = creating_of(t);
      const gr__live_comm *run = oldest_running(t);
      if (run && strcmp(run->state, "running")) run = NULL; /* between calls: not waiting */
      double w = cr ? job->now - cr->start : run ? job->now - run->start : 0;
      if ((cr || run) && w >= job->hang_s) {
        wait[i] = 1;
        nwait++;
        if (w > longest) longest = w;
      }
    }
  }
  gr__strbuf o;
  gr__strbuf_init_fixed(&o, job->verdict, sizeof job->verdict);
  if (nwait) {
    gr__strbuf_appendf(&o, "WAITING FOR rank%s ", nblock == 1 ? "" : "s");
    put_ranks(&o, job, block);
    gr__strbuf_appendf(&o, ": rank%s ", nwait == 1 ? "" : "s");
    put_ranks(&o, job, wait);
    gr__strbuf_appendf(&o, " in %s for %.1f s", desc, longest);
  } else {
    gr__strbuf_appendf(&o, "FAULT: rank%s ", nblock == 1 ? "" : "s");
    put_ranks(&o, job, block);
  }
  int said = 0;
  for (int i = 0; i < gr__top_nranks(job); i++) {
    if (!block[i]) continue;
    gr__top_rank *t = &GR__TOP_ROW(job, i);
    t->blocker = 1;
    if (said++ >= 3) continue;
    int sw = put_rank_state(&o, t);
    int member = id && comm_in(t, id, size);
    put_doing(&o, job, t, member ? id : NULL, size, sw);
    if (t->age_s > 2) gr__strbuf_appendf(&o, " (silent %.0f s)", t->age_s);
    put_evidence(&o, t, fault[i]);
  }
}

/* One communicator's rank -> world rank pairs, for the peers of the waits. */
typedef struct {
  int crank, wrank;
} rank_pair;

static int cmp_pair(const void *a, const void *b) {
  const rank_pair *x = a, *y = b;
  if (x->crank != y->crank) return (x->crank > y->crank) - (x->crank < y->crank);
  return (x->wrank > y->wrank) - (x->wrank < y->wrank);
}

/* The ranks the waiting ranks (wait) wait for on the communicator, by the shared wait-for
 * analysis (tools/waitfor): each rank as its line for the communicator shows it (a running call
 * with unfinished sends or receives waits for their peers; another running call is a collective at
 * its number, which waits for the members whose line is behind it and, on the world, for the ranks
 * without a line that did not exit), every rank waited for followed to the ones that wait for
 * nobody, and the ranks on a wait-for cycle (a deadlock); a rank that only waits for ranks further
 * along is held up and not named. The verdict names one communicator's hang, so its lines alone
 * are followed. In a verdict on sends and receives (p2p) a rank that exited is not named.
 * *deadlock: 1 when every rank named is on a cycle. Returns how many are named. */
static int count_of(const gr__top_job *job, const unsigned char *flag) {
  int n = 0;
  for (int i = 0; i < gr__top_nranks(job); i++)
    n += flag[i] != 0;
  return n;
}

/* A blocking collective, by the name a live line gives its call: the MPI layer's, libgpurun's and
 * NCCL's. Ranks waiting in two of them at the same number on one communicator are in calls that
 * never match. */
static int blocking_collective(const char *op) {
  static const char *const names[] = {
      "MPI_Barrier",       "MPI_Bcast",          "MPI_Reduce",
      "MPI_Allreduce",     "MPI_Gather",         "MPI_Gatherv",
      "MPI_Scatter",       "MPI_Scatterv",       "MPI_Allgather",
      "MPI_Allgatherv",    "MPI_Alltoall",       "MPI_Alltoallv",
      "MPI_Alltoallw",     "MPI_Reduce_scatter", "MPI_Reduce_scatter_block",
      "MPI_Scan",          "MPI_Exscan",         "gr_allreduce",
      "gr_broadcast",      "gr_reduce",          "gr_allgather",
      "gr_reduce_scatter", "gr_alltoall",        "gr_barrier",
      "ncclAllReduce",     "ncclBroadcast",      "ncclReduce",
      "ncclAllGather",     "ncclReduceScatter"};
  for (size_t i = 0; op && i < sizeof names / sizeof names[0]; i++)
    if (!strcmp(op, names[i])) return 1;
  return 0;
}

/* Waiters (wait[]) in different blocking collectives at the same number: the ranks in a call
 * other than the one most of them are in go to odd[] (all of them when no call has a majority).
 * 1 when there is such a mismatch; *major: the majority's call, NULL without one. */
static int mismatch(const gr__top_job *job, const char *id, int size, const unsigned char *wait,
                    unsigned char *odd, const char **major) {
  int n = gr__top_nranks(job), ops = 0, best = 0, tie = 0;
  const char *seen[8] = {0};
  int count[8] = {0};
  for (int i = 0; i < n; i++) {
    const gr__live_comm *lc = wait[i] ? comm_in(&GR__TOP_ROW(job, i), id, size) : NULL;
    if (!lc) continue;
    if (!blocking_collective(lc->op)) return 0; /* a wait or a send among them: not this case */
    int k = 0;
    while (k < ops && strcmp(seen[k], lc->op))
      k++;
    if (k == ops) {
      if (ops == 8) return 0;
      seen[ops++] = lc->op;
    }
    count[k]++;
  }
  if (ops < 2) return 0;
  for (int k = 1; k < ops; k++)
    if (count[k] > count[best])
      best = k, tie = 0;
    else if (count[k] == count[best])
      tie = 1;
  *major = tie ? NULL : seen[best];
  for (int i = 0; i < n; i++) {
    const gr__live_comm *lc = wait[i] ? comm_in(&GR__TOP_ROW(job, i), id, size) : NULL;
    odd[i] = lc && (tie || strcmp(lc->op, seen[best]));
  }
  return 1;
}

static int blockers(const gr__top_job *job, const char *id, int size, int world, int p2p,
                    const unsigned char *wait, unsigned char *block, int *deadlock) {
  int n = gr__top_nranks(job), nm = 0, np = 0, nblock = 0;
  *deadlock = 0;
  gr__wf_rank *r = calloc((size_t)n + 1, sizeof *r);
  gr__wf_member *m = calloc((size_t)n + 1, sizeof *m);
  int *peers = malloc(((size_t)n * GR_LIVE_MAX_WAITS + 1) * sizeof *peers);
  rank_pair *pairs = malloc(((size_t)n + 1) * sizeof *pairs);
  gr__wf *w = NULL;
  if (!r || !m || !peers || !pairs) goto out;
  for (int i = 0; i < n; i++) {
    const gr__live_comm *lc = comm_in(&GR__TOP_ROW(job, i), id, size);
    if (lc) pairs[np++] = (rank_pair){lc->rank, GR__TOP_ROW(job, i).rank};
  }
  if (np > 1) qsort(pairs, (size_t)np, sizeof *pairs, cmp_pair);
  int npeers = 0;
  for (int i = 0; i < n; i++) {
    const gr__top_rank *t = &GR__TOP_ROW(job, i);
    const gr__live_comm *lc = comm_in(t, id, size);
    r[i] = (gr__wf_rank){.rank = t->rank, .have = t->have_live, .exited = exited(t), .comm = -1};
    if (!lc) continue;
    m[nm++] = (gr__wf_member){i, 0, (double)lc->seq};
    if (strcmp(lc->state, "running")) continue;
    r[i].comm = 0;
    r[i].pos = (double)lc->seq;
    r[i].p2p = lc->nwaits > 0;
    r[i].peers = peers + npeers;
    for (int k = 0; k < lc->nwaits && k < GR_LIVE_MAX_WAITS; k++) {
      /* the peer's world rank: the rank whose line has its number, else itself on the world */
      int lo = 0, hi = np - 1, wr = -1, crank = lc->waits[k].peer;
      while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (pairs[mid].crank < crank)
          lo = mid + 1;
        else
          hi = mid - 1;
      }
      if (lo < np && pairs[lo].crank == crank)
        wr = pairs[lo].wrank;
      else if (world && crank >= 0)
        wr = crank;
      peers[npeers++] = wr;
      r[i].npeers++;
    }
  }
  gr__wf_comm comm = {size, world};
  gr__wf_input in = {r, n, &comm, 1, m, nm};
  if (gr__wf_analyse(&in, &w) != GR_OK) goto out;
  nblock = gr__wf_blockers(w, wait, block);
  if (nblock < 0) {
    nblock = 0;
    goto out;
  }
  int cycle = 0;
  for (int i = 0; i < n; i++) {
    if (p2p && block[i] == GR__WF_BLOCKS && exited(&GR__TOP_ROW(job, i)) &&
        comm_in(&GR__TOP_ROW(job, i), id, size)) {
      block[i] = 0;
      nblock--;
    }
    cycle += block[i] == GR__WF_DEADLOCK;
  }
  *deadlock = nblock > 0 && cycle == nblock;
out:
  gr__wf_free(w);
  free(r);
  free(m);
  free(peers);
  free(pairs);
  return nblock;
}

/* ---- the late rank of point-to-point codes: per-peer waits over a recent window ------------ */

static const gr__top_wrow *wrow_of(const gr__top_wframe *f, int rank) {
  size_t lo = 0, hi = f->n;
  while (lo < hi) { /* rows are in rank order */
    size_t mid = (lo + hi) / 2;
    if (f->rows[mid].rank < rank)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < f->n && f->rows[lo].rank == rank ? &f->rows[lo] : NULL;
}

/* Seconds cur waited on peer since base (NULL: since the start). A peer base did not list when
 * base listed a full set waited at most base's smallest then: the difference to that is a lower
 * bound. Never below zero (a freed communicator's waits leave the sums). */
static double waited_since(const gr__top_waited *cur, int k, const gr__top_waited *base) {
  double prev = 0;
  if (base) {
    int found = 0;
    for (int j = 0; j < base->n && !found; j++)
      if (base->peer[j] == cur->peer[k]) {
        prev = base->s[j];
        found = 1;
      }
    if (!found && base->n == GR__TOP_MAX_WAITED) {
      prev = base->s[0];
      for (int j = 1; j < base->n; j++)
        if (base->s[j] < prev) prev = base->s[j];
    }
  }
  return cur->s[k] > prev ? cur->s[k] - prev : 0;
}

/* This frame's per-peer waits into the history (rows in rank order), and the frame to compare
 * with: the newest one at least the window older, else the oldest kept; NULL on the first frame.
 * Frames closer than a tenth of the window to the last kept one are not kept. */
static const gr__top_wframe *window_base(gr__top_job *job) {
  gr__top_wframe cur = {0, 0, NULL};
  int n = gr__top_nranks(job);
  for (int i = 0; i < n; i++) {
    const gr__top_rank *t = &GR__TOP_ROW(job, i);
    if (t->have_live && t->waited.n && t->live.time > cur.time) cur.time = t->live.time;
  }
  if (!(cur.time > 0)) return job->nhist ? &job->hist[0] : NULL;
  /* time going back (the files were replaced): the history is another job's */
  if (job->nhist && cur.time < job->hist[job->nhist - 1].time) {
    for (int h = 0; h < job->nhist; h++)
      free(job->hist[h].rows);
    job->nhist = 0;
  }
  /* the frames older than the newest one at least a window old are no longer needed */
  int keep_from = 0;
  for (int h = 0; h < job->nhist; h++)
    if (cur.time - job->hist[h].time >= GR__TOP_LATE_WINDOW) keep_from = h;
  if (keep_from > 0) {
    for (int h = 0; h < keep_from; h++)
      free(job->hist[h].rows);
    memmove(job->hist, job->hist + keep_from,
            (size_t)(job->nhist - keep_from) * sizeof job->hist[0]);
    job->nhist -= keep_from;
  }
  int first = job->nhist == 0;
  if (first || cur.time - job->hist[job->nhist - 1].time >= GR__TOP_LATE_WINDOW / 10) {
    if (job->nhist == GR__TOP_LATE_HIST) { /* full: the second oldest goes, the base stays */
      free(job->hist[1].rows);
      memmove(job->hist + 1, job->hist + 2, (size_t)(job->nhist - 2) * sizeof job->hist[0]);
      job->nhist--;
    }
    cur.rows = malloc((size_t)(n ? n : 1) * sizeof *cur.rows);
    if (cur.rows) {
      for (int i = 0; i < n; i++) {
        const gr__top_rank *t = &GR__TOP_ROW(job, i);
        if (!t->have_live || !t->waited.n) continue;
        gr__top_wrow *r = &cur.rows[cur.n++];
        r->rank = t->rank;
        r->time = t->live.time;
        r->w = t->waited;
      }
      job->hist[job->nhist++] = cur;
    }
  }
  return first ? NULL : &job->hist[0];
}

/* The late line from the per-peer waits (a halo exchange: every rank's time in MPI is alike,
 * but the others are blocked on the late rank's sends and receives). Over the window, each
 * rank's balance: the seconds the others waited for it less the seconds it waited for them. A
 * slowed rank's own waits are not small (stopped or descheduled inside a wait, that time counts
 * as waiting), but the others wait for it longer; in a chain (2 waits for 0, which waits for 1)
 * the balance is highest at the rank the chain ends at. Named: the highest balance, when it is at
 * least a tenth of the window (a second since the start) and a third of the others' waits for it
 * (they waited for it 1.5 times as long as it for them), and one and a half times any other
 * rank's. 1 when it wrote job->late. */
static int late_p2p(gr__top_job *job) {
  const gr__top_wframe *base = window_base(job);
  int n = gr__top_nranks(job);
  double *on = calloc((size_t)(n ? n : 1), sizeof *on);
  double *net = calloc((size_t)(n ? n : 1), sizeof *net);
  int said = 0;
  double newest = 0;
  if (!on || !net) goto out;
  /* on[row]: the seconds the others waited for the rank of that row; net[row]: less its own */
  for (int i = 0; i < n; i++) {
    const gr__top_rank *t = &GR__TOP_ROW(job, i);
    if (!t->have_live || !t->waited.n) continue;
    const gr__top_wrow *b = base ? wrow_of(base, t->rank) : NULL;
    if (base && !b) continue; /* no earlier figure: its waits may be older than the window */
    if (b && t->live.time <= b->time) continue; /* no news from it since */
    if (t->live.time > newest) newest = t->live.time;
    for (int k = 0; k < t->waited.n; k++) {
      double d = waited_since(&t->waited, k, b ? &b->w : NULL);
      int p = t->waited.peer[k];
      int row = p < (int)job->index.count ? GR_ARRAY_AT(&job->index, int, p) : -1;
      net[i] -= d;
      if (row >= 0) {
        on[row] += d;
        net[row] += d;
      }
    }
  }
  int top = -1, second = -1;
  for (int i = 0; i < n; i++) {
    if (top < 0 || net[i] > net[top]) {
      second = top;
      top = i;
    } else if (second < 0 || net[i] > net[second]) {
      second = i;
    }
  }
  if (top < 0) goto out;
  double span = base ? newest - base->time : 0;
  double need = base ? GR__TOP_LATE_WINDOW / 10 : 1.0;
  if (base && span * 0.1 > need) need = span * 0.1;
  if (!(net[top] >= need) || net[top] * 3 < on[top] ||
      (second >= 0 && net[second] * 1.5 > net[top]))
    goto out;
  /* the ranks that waited for it: each a twentieth of the total at least */
  int top_rank = GR__TOP_ROW(job, top).rank, nw = 0, listed = 0;
  char who[120];
  gr__strbuf w;
  gr__strbuf_init_fixed(&w, who, sizeof who);
  for (int i = 0; i < n; i++) {
    const gr__top_rank *t = &GR__TOP_ROW(job, i);
    if (i == top || !t->have_live || !t->waited.n) continue;
    const gr__top_wrow *b = base ? wrow_of(base, t->rank) : NULL;
    if ((base && !b) || (b && t->live.time <= b->time)) continue;
    for (int k = 0; k < t->waited.n; k++)
      if (t->waited.peer[k] == top_rank &&
          waited_since(&t->waited, k, b ? &b->w : NULL) >= on[top] / 20) {
        nw++;
        if (listed < 8) gr__strbuf_appendf(&w, "%s%d", listed++ ? "," : "", t->rank);
      }
  }
  if (nw > listed) gr__strbuf_appendf(&w, " and %d more", nw - listed);
  char when[48];
  if (base)
    snprintf(when, sizeof when, "in the last %.0f s", span);
  else
    snprintf(when, sizeof when, "since the start");
  snprintf(job->late, sizeof job->late,
           "late: rank %d: rank%s %s waited %.1f s for it in point-to-point %s", top_rank,
           nw == 1 ? "" : "s", who, on[top], when);
  said = 1;
out:
  free(on);
  free(net);
  return said;
}

/* The straggler while the job runs, from the MPI layer's sums in the live files: a rank that
 * arrives late waits least, so the one whose time in blocking collectives (else in MPI at all, for
 * a code that exchanges point to point) is at most two thirds of the others' median, with that
 * median at least a second, is the one they wait for. "" otherwise. */
static void late_rank(gr__top_job *job) {
  job->late[0] = '\0';
  if (late_p2p(job)) return;
  int n = gr__top_nranks(job);
  double *v = malloc((size_t)n * sizeof *v);
  if (!v) return;
  for (int pass = 0; pass < 2 && !job->late[0]; pass++) {
    int k = 0, low = -1;
    for (int i = 0; i < n; i++) {
      const gr__top_rank *t = &GR__TOP_ROW(job, i);
      if (!t->have_live || !t->live.has_mpi) continue;
      double x = pass ? t->live.mpi_s : t->live.mpi_coll_s;
      if (low < 0 ||
          x < (pass ? GR__TOP_ROW(job, low).live.mpi_s : GR__TOP_ROW(job, low).live.mpi_coll_s))
        low = i;
    }
    if (low < 0) break;
    const gr__top_rank *l = &GR__TOP_ROW(job, low);
    double mine = pass ? l->live.mpi_s : l->live.mpi_coll_s;
    for (int i = 0; i < n; i++) {
      const gr__top_rank *t = &GR__TOP_ROW(job, i);
      if (i != low && t->have_live && t->live.has_mpi)
        v[k++] = pass ? t->live.mpi_s : t->live.mpi_coll_s;
    }
    if (!k) break;
    double med = gr__median(v, k);
    if (med >= 1.0 && mine <= med * 2.0 / 3.0)
      snprintf(job->late, sizeof job->late,
               "late: rank %d waited %.1f s in %s, the others a median of %.1f s: they wait for "
               "it",
               l->rank, mine, pass ? "MPI" : "blocking collectives", med);
  }
  free(v);
}

void gr__top_analyse(gr__top_job *job) {
  job->verdict[0] = '\0';
  late_rank(job);
  for (int i = 0; i < gr__top_nranks(job); i++)
    GR__TOP_ROW(job, i).blocker = 0;
  if (!gr__top_nranks(job)) return;
  unsigned char *wait = calloc((size_t)gr__top_nranks(job), 1),
                *block = calloc((size_t)gr__top_nranks(job), 1),
                *fault = calloc((size_t)gr__top_nranks(job), 1);
  if (!wait || !block || !fault) {
    free(wait);
    free(block);
    free(fault);
    return;
  }
  int nproc = 0, nsilent = 0;
  for (int i = 0; i < gr__top_nranks(job); i++) {
    fault[i] = (unsigned char)fault_of(&GR__TOP_ROW(job, i));
    nproc += fault[i] == FAULT_PROC;
    nsilent += fault[i] == FAULT_SILENT;
  }
  /* The communicator with the longest wait among the ranks not at fault: its running call is the
   * one the others are stuck in. Its members that have not entered that call (or are silent
   * inside it) are the blockers. */
  const char *best_id = NULL;
  int best_size = 0;
  unsigned long long best_seq = 0;
  double best_wait = 0;
  const char *best_op = "";
  for (int i = 0; i < gr__top_nranks(job); i++) {
    const gr__top_rank *t = &GR__TOP_ROW(job, i);
    if (!t->have_live || exited(t) || fault[i]) continue;
    for (int c = 0; c < t->live.ncomms; c++) {
      const gr__live_comm *lc = &t->live.comm[c];
      if (strcmp(lc->state, "running") || lc->start <= 0) continue;
      double w = job->now - lc->start;
      if (w > best_wait || (best_id && !strcmp(best_id, lc->id) && lc->seq > best_seq)) {
        if (best_id && !strcmp(best_id, lc->id) && lc->size == best_size && lc->seq < best_seq)
          continue;
        best_wait = w;
        best_id = lc->id;
        best_size = lc->size;
        best_seq = lc->seq;
        best_op = lc->op;
      }
    }
  }
  /* A communicator creation waited in longer than any collective call is the hang to name. */
  const gr__live_creating *cbest = NULL;
  for (int i = 0; i < gr__top_nranks(job); i++) {
    const gr__live_creating *cr = fault[i] ? NULL : creating_of(&GR__TOP_ROW(job, i));
    if (cr && (!cbest || cr->start < cbest->start)) cbest = cr;
  }
  int in_creation =
      cbest && job->now - cbest->start >= job->hang_s && job->now - cbest->start >= best_wait;
  int hang = in_creation || (best_id && best_wait >= job->hang_s);
  char lab[80] = "", desc[160] = "";
  if (best_id) label_of(lab, sizeof lab, job, best_id);
  if (in_creation) {
    char over[80];
    label_of(over, sizeof over, job, cbest->over);
    snprintf(desc, sizeof desc, "%s (%s) on %s", cbest->call, cbest->step, over);
  } else if (best_id) {
    /* what the longest waiter waits in, and for whom when that is a send or receive */
    gr__strbuf d;
    gr__strbuf_init_fixed(&d, desc, sizeof desc);
    gr__strbuf_appendf(&d, "%s #%llu on %s", best_op, best_seq, lab);
    for (int i = 0; i < gr__top_nranks(job); i++) {
      const gr__live_comm *lc = fault[i] ? NULL : comm_in(&GR__TOP_ROW(job, i), best_id, best_size);
      if (lc && lc->seq == best_seq && !strcmp(lc->op, best_op) && !strcmp(lc->state, "running")) {
        put_waits(&d, job, lc);
        break;
      }
    }
  }
  /* Evidence first: a stopped or vanished process is named whether or not anyone waits yet (it
   * did not exit); a silent heartbeat only when someone waits. */
  if (nproc || (nsilent && hang)) {
    fault_verdict(job, fault, nproc ? FAULT_PROC : FAULT_SILENT, desc, in_creation ? NULL : best_id,
                  best_size, wait, block);
    goto out;
  }
  if (in_creation) {
    creation_verdict(job, cbest, wait, block);
    goto out;
  }
  if (!hang) goto out;
  /* The call with the highest number that someone waits in on this communicator. */
  double longest = 0;
  for (int i = 0; i < gr__top_nranks(job); i++) {
    const gr__live_comm *lc = comm_in(&GR__TOP_ROW(job, i), best_id, best_size);
    if (lc && !strcmp(lc->state, "running") && lc->seq > best_seq) {
      best_seq = lc->seq;
      best_op = lc->op;
    }
  }
  int nwait = 0, nblock = 0, world = spans_world(job, best_id, best_size), p2p = 0;
  for (int i = 0; i < gr__top_nranks(job); i++) {
    const gr__top_rank *t = &GR__TOP_ROW(job, i);
    const gr__live_comm *lc = comm_in(t, best_id, best_size);
    if (lc && !strcmp(lc->state, "running") && lc->seq == best_seq) {
      wait[i] = 1;
      nwait++;
      p2p |= lc->nwaits > 0;
      if (job->now - lc->start > longest) longest = job->now - lc->start;
    }
  }
  const char *major = NULL;
  if (!p2p && mismatch(job, best_id, best_size, wait, block, &major)) {
    gr__strbuf o;
    gr__strbuf_init_fixed(&o, job->verdict, sizeof job->verdict);
    gr__strbuf_appendf(&o, "WAITING FOR rank%s ", count_of(job, block) == 1 ? "" : "s");
    put_ranks(&o, job, block);
    if (major) {
      for (int i = 0; i < gr__top_nranks(job); i++)
        if (block[i]) wait[i] = 0;
      gr__strbuf_appendf(&o, ": rank%s ", count_of(job, wait) == 1 ? "" : "s");
      put_ranks(&o, job, wait);
      gr__strbuf_appendf(&o, " in %s #%llu on %s for %.1f s;", major, best_seq, lab, longest);
    } else {
      gr__strbuf_appendf(&o, ": collectives #%llu on %s differ for %.1f s:", best_seq, lab,
                         longest);
    }
    int said = 0;
    for (int i = 0; i < gr__top_nranks(job); i++) {
      if (!block[i]) continue;
      GR__TOP_ROW(job, i).blocker = 1;
      if (said++ >= 4) continue;
      gr__strbuf_appendf(&o, "%s rank %d in %s", said > 1 ? "," : "", GR__TOP_ROW(job, i).rank,
                         comm_in(&GR__TOP_ROW(job, i), best_id, best_size)->op);
    }
    gr__strbuf_appendf(&o, " [certain: a different collective at the same number]");
    goto out;
  }
  /* sequence numbers of sends and receives differ between ranks: there the peers say more */
  int deadlock = 0;
  nblock = blockers(job, best_id, best_size, world, p2p, wait, block, &deadlock);
  gr__strbuf o;
  gr__strbuf_init_fixed(&o, job->verdict, sizeof job->verdict);
  if (!nblock) {
    gr__strbuf_appendf(
        &o, "%d rank%s in %s #%llu on %s for %.1f s (no rank behind: slow, or all waiting)", nwait,
        nwait == 1 ? "" : "s", best_op, best_seq, lab, longest);
    goto out;
  }
  gr__strbuf_appendf(&o, "WAITING FOR rank%s ", nblock == 1 ? "" : "s");
  put_ranks(&o, job, block);
  gr__strbuf_appendf(&o, ": rank%s ", nwait == 1 ? "" : "s");
  put_ranks(&o, job, wait);
  gr__strbuf_appendf(&o, " in %s #%llu on %s for %.1f s", best_op, best_seq, lab, longest);
  int said = 0;
  for (int i = 0; i < gr__top_nranks(job); i++) {
    if (!block[i]) continue;
    gr__top_rank *t = &GR__TOP_ROW(job, i);
    t->blocker = 1;
    if (said++ >= 3) continue;
    int sw = put_rank_state(&o, t);
    put_doing(&o, job, t, best_id, best_size, sw);
    if (t->have_live && t->age_s > 2) gr__strbuf_appendf(&o, " (silent %.0f s)", t->age_s);
  }
  gr__strbuf_appendf(&o, " [%s]",
                     deadlock ? "deadlock: they wait for each other"
                     : p2p    ? "unsure: the peers it waits for are alive and not waiting"
                              : "unsure: behind in the call sequence");
out:
  free(wait);
  free(block);
  free(fault);
}
