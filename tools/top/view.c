/* Drawing one gpurun-top frame: fits 80 columns (79 used, so that no terminal wraps). Every string
 * drawn was cleaned when loaded (gr__live_clean), so a file cannot send escape sequences. */
#include "gr_top.h"

#include <math.h>
#include <string.h>
#include <time.h>

int gr__top_rows(const gr__top_job *job) {
  int n = 0;
  for (int i = 0; i < gr__top_nranks(job); i++)
    n += GR__TOP_ROW(job, i).ngpus > 1 ? GR__TOP_ROW(job, i).ngpus : 1;
  return n;
}

static const char *short_op(const char *op) {
  static const char *const map[][2] = {{"allreduce", "allred"},      {"broadcast", "bcast"},
                                       {"reduce_scatter", "redsct"}, {"allgather", "allgat"},
                                       {"alltoall", "alltoall"},     {"barrier", "barrier"}};
  for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
    if (!strcmp(op, map[i][0])) return map[i][1];
  return op;
}

/* The worst active throttle reason, in 4 characters (NVML clocks-event bits). */
static const char *throttle_word(long long r) {
  if (r < 0) return "";
  if (r & 0x40) return "HWth"; /* hardware thermal slowdown */
  if (r & 0x80) return "PBrk"; /* power brake */
  if (r & 0x08) return "HWsl"; /* hardware slowdown */
  if (r & 0x20) return "SWth"; /* software thermal */
  if (r & 0x04) return "Pcap"; /* software power cap */
  if (r & 0x10) return "sync";
  if (r & 0x02) return "app";
  return "-";
}

/* A value too large for its width columns: ">9...9" of the largest suffix (and unit) that fits,
 * which is a true lower bound of it. */
static void fmt_saturated(char *b, size_t cap, int width, char suffix, const char *unit) {
  int digits = width - 2 - (int)strlen(unit);
  if (digits < 1) unit = "", digits = width - 2;
  if (digits < 1) digits = 1;
  size_t k = 0;
  if (cap < 4) {
    if (cap) b[0] = '\0';
    return;
  }
  b[k++] = '>';
  for (int i = 0; i < digits && k + 2 < cap; i++)
    b[k++] = '9';
  b[k++] = suffix;
  snprintf(b + k, cap - k, "%s", unit);
}

/* v rounded in at most width columns: "%.0f" and the unit, else scaled by 1000 (k M G T P E;
 * the unit left out where only the suffix fits: 123k in POW), never rounded to 0, else
 * saturated; "-" when unknown (< 0, NaN). */
static void fmt_num(char *b, size_t cap, int width, const char *unit, double v) {
  static const char sfx[] = "kMGTPE";
  if (!(v >= 0)) {
    snprintf(b, cap, "-");
    return;
  }
  if (isfinite(v)) {
    if (snprintf(b, cap, "%.0f%s", v, unit) <= width) return;
    double x = v;
    for (int k = 0; k < 6; k++) {
      x /= 1000;
      if (x < 0.5) break;
      if (snprintf(b, cap, "%.0f%c%s", x, sfx[k], unit) <= width) return;
      if (snprintf(b, cap, "%.0f%c", x, sfx[k]) <= width) return;
    }
  }
  fmt_saturated(b, cap, width, 'E', unit);
}

/* MiB in at most width (>= 4) columns: 512M, 1.5G, 64G, 2T ... (1024-based), else saturated. */
static void fmt_size_mib(char *b, size_t cap, int width, double mib) {
  static const char unit[] = "GTPE";
  if (!(mib >= 0)) {
    snprintf(b, cap, "-");
    return;
  }
  if (mib < 1000) {
    snprintf(b, cap, "%.0fM", mib);
    return;
  }
  if (mib < 1024 * 9.95) {
    snprintf(b, cap, "%.1fG", mib / 1024);
    return;
  }
  double x = mib;
  for (int k = 0; k < 4 && isfinite(x); k++) {
    x /= 1024;
    if (snprintf(b, cap, "%.0f%c", x, unit[k]) <= width) return;
  }
  fmt_saturated(b, cap, width, 'E', "");
}

/* Seconds in at most 5 columns: 12.3, 12345, then minutes, hours, days, else saturated; a
 * negative time (another host's clock ahead) within 10 s as it is, "-" beyond. */
static void fmt_secs(char *b, size_t cap, double v) {
  if (v > -10 && v < 999.95) {
    snprintf(b, cap, "%.1f", v);
    return;
  }
  if (!(v >= 0)) {
    snprintf(b, cap, "-");
    return;
  }
  static const struct {
    double div;
    const char *unit;
  } u[] = {{1, ""}, {60, "m"}, {3600, "h"}, {86400, "d"}};
  for (size_t k = 0; k < sizeof u / sizeof u[0] && isfinite(v); k++)
    if (snprintf(b, cap, "%.0f%s", v / u[k].div, u[k].unit) <= 5) return;
  snprintf(b, cap, ">999d");
}

/* The rank's current collective: the running call on any communicator, else the latest one. */
static void fmt_coll(const gr__top_job *job, const gr__top_rank *t, char *what, size_t wcap,
                     char *secs, size_t scap) {
  snprintf(what, wcap, "-");
  secs[0] = '\0';
  if (!t->have_live) {
    snprintf(what, wcap, "%s", t->have_csv ? "-" : "(no state)");
    return;
  }
  if (!strcmp(t->live.state, "exited")) {
    snprintf(what, wcap, "(exited)");
    return;
  }
  /* Inside a communicator creation: "create:agree", "split:nccl" (the calls' short names). */
  const gr__live_creating *cr = NULL;
  for (int i = 0; i < t->live.ncreating; i++)
    if (!cr || t->live.creating[i].start < cr->start) cr = &t->live.creating[i];
  if (cr) {
    const char *call = !strcmp(cr->call, GR_LIVE_CALL_CREATE)  ? "create"
                       : !strcmp(cr->call, GR_LIVE_CALL_SPLIT) ? "split"
                                                               : cr->call;
    snprintf(what, wcap, "%s:%s", call, cr->step);
    fmt_secs(secs, scap, job->now - cr->start);
    return;
  }
  const gr__live_comm *best = NULL;
  for (int i = 0; i < t->live.ncomms; i++) {
    const gr__live_comm *c = &t->live.comm[i];
    if (!strcmp(c->op, "-")) continue;
    int run = !strcmp(c->state, "running");
    if (!best || (run && strcmp(best->state, "running")) ||
        (run == !strcmp(best->state, "running") && c->start > best->start))
      best = c;
  }
  if (!best) return;
  /* the world communicator goes without saying; another by its name (the parser gives a
   * version-1 file's id as the name) */
  int world = !strcmp(best->name, "world");
  snprintf(what, wcap, "%s#%llu%s%.7s", short_op(best->op), best->seq, world ? "" : " ",
           world ? "" : best->name);
  if (!strcmp(best->state, "running"))
    fmt_secs(secs, scap, job->now - best->start);
  else /* not inside a call: the last one and how it ended */
    snprintf(secs, scap, "%s", best->state);
}

/* Column layout, 79 characters; every field is formatted to its width (a value too large shows
 * saturated), a rank number longer than 4 digits takes its room from HOST. IN s: seconds inside
 * the current call, or how the last one ended (done, failed, timeout) between calls. */
#define ROW_FMT "%c%4.10s %-*.*s %-4.4s %7.7s %7.7s %4.4s %4.4s %-4.4s %4.4s %4.4s %-13.13s %5.5s"

static void line_out(FILE *f, const char *s, int width) {
  int n = (int)strlen(s);
  if (width > 0 && n > width) n = width;
  fprintf(f, "%.*s\n", n, s);
}

/* Word-wraps s into at most max_lines lines of width columns; returns the lines used. */
static int wrap_out(FILE *f, const char *s, int width, int max_lines) {
  int used = 0;
  size_t len = strlen(s);
  while (len && used < max_lines) {
    size_t n = len;
    if (n > (size_t)width) {
      n = (size_t)width;
      while (n > (size_t)width / 2 && s[n] != ' ')
        n--;
      if (s[n] != ' ') n = (size_t)width;
    }
    if (used == max_lines - 1 && n < len && n >= 3) /* the last line: say it goes on */
      fprintf(f, "%.*s...\n", (int)n - 3, s);
    else
      fprintf(f, "%.*s\n", (int)n, s);
    used++;
    s += n;
    len -= n;
    while (len && *s == ' ')
      s++, len--;
  }
  return used;
}

int gr__top_render(FILE *f, const gr__top_job *job, int first, int max_rows, int width,
                   double interval) {
  char line[1200];
  time_t now = (time_t)job->now;
  struct tm tm;
  localtime_r(&now, &tm);
  char clock[16];
  strftime(clock, sizeof clock, "%H:%M:%S", &tm);
  char job_name[64];
  const char *slash = strrchr(job->dir, '/');
  gr__live_clean(job_name, sizeof job_name, slash && slash[1] ? slash + 1 : job->dir,
                 strlen(slash && slash[1] ? slash + 1 : job->dir));
  int total = gr__top_rows(job);
  /* the job name gives way so that the header fits 79 columns */
  char tail[200];
  int tl = snprintf(tail, sizeof tail, "  %d rank%s (%d live)  %s  every %gs%s", job->world,
                    job->world == 1 ? "" : "s", job->nlive, clock, interval,
                    max_rows >= 0 ? "  q quits" : "");
  int room = 79 - (int)strlen("gpurun-top  job ") - tl;
  snprintf(line, sizeof line, "gpurun-top  job %.*s%s", room > 1 ? room : 1, job_name, tail);
  line_out(f, line, width);
  /* The verdict is the point of the view: wrapped, not cut (3 lines at most on the screen, all of
   * it for a script's --once). Without any rank's call state there is nothing to wait in. */
  const char *v = job->verdict[0] ? job->verdict
                  : job->nlive    ? "no collective waits longer than the hang threshold"
                                  : "no rank publishes its calls (a program the MPI layer does not "
                                    "see: --trace=none, statically linked, or not MPI); process "
                                    "state only";
  wrap_out(f, v, width > 0 && width < 79 ? width : 79, max_rows >= 0 ? 3 : 16);
  if (job->late[0]) wrap_out(f, job->late, width > 0 && width < 79 ? width : 79, 2);
  snprintf(line, sizeof line, ROW_FMT, ' ', "RANK", 6, 6, "HOST", "GPU", "UTIL", "MEM", "TEMP",
           "POW", "THR", "CPU%", "RSS", "COLLECTIVE", "IN s");
  line_out(f, line, width);
  int row = 0, drawn = 0;
  for (int i = 0; i < gr__top_nranks(job); i++) {
    const gr__top_rank *t = &GR__TOP_ROW(job, i);
    int rows = t->ngpus > 1 ? t->ngpus : 1;
    for (int g = 0; g < rows; g++, row++) {
      if (row < first || (max_rows >= 0 && drawn >= max_rows)) continue;
      char rank[12] = "", cpu[12] = "", rss[12] = "", what[40] = "", secs[16] = "";
      char util[12] = "-", mem[24] = "-", temp[12] = "-", pow[12] = "-", gpu[8] = "-";
      const char *thr = "";
      if (g == 0) {
        snprintf(rank, sizeof rank, "%d", t->rank);
        fmt_num(cpu, sizeof cpu, 4, "", t->cpu_pct);
        fmt_size_mib(rss, sizeof rss, 4, t->rss_mib);
        fmt_coll(job, t, what, sizeof what, secs, sizeof secs);
      }
      if (t->ngpus) {
        const gr__top_gpu *G = &t->gpu[g];
        /* "0000:17:00.0" -> "17:0": bus and device */
        const char *bus = strchr(G->pci, ':');
        const char *mig = strstr(G->pci, "mig"); /* "<pci>/mig<i>", '/' cleaned to '?' */
        if (mig)                                 /* a MIG slice under its parent's row */
          snprintf(gpu, sizeof gpu, "m%.3s", mig + 3);
        else if (bus && strlen(bus) >= 6)
          snprintf(gpu, sizeof gpu, "%.2s:%c", bus + 1, bus[5]);
        else
          snprintf(gpu, sizeof gpu, "%.4s", G->pci);
        fmt_num(util, sizeof util, 7, "%", G->util);
        /* a shared GPU: this rank's SM share / the GPU's total, when both fit */
        if (G->rank_sm >= 0 && G->util >= 0 &&
            snprintf(util, sizeof util, "%.0f/%.0f%%", G->rank_sm, G->util) > 7)
          fmt_num(util, sizeof util, 7, "%", G->util);
        if (G->mem_used_mib >= 0 && G->mem_total_mib > 0) {
          /* one decimal while it fits the 7 columns: 1.5/32G; else sizes with their units */
          int w = snprintf(mem, sizeof mem, "%.1f/%.0fG", G->mem_used_mib / 1024,
                           G->mem_total_mib / 1024);
          if (w > 7)
            w = snprintf(mem, sizeof mem, "%.0f/%.0fG", G->mem_used_mib / 1024,
                         G->mem_total_mib / 1024);
          if (w > 7) {
            char used[12], tot[12];
            fmt_size_mib(used, sizeof used, 4, G->mem_used_mib);
            fmt_size_mib(tot, sizeof tot, 4, G->mem_total_mib);
            if (snprintf(mem, sizeof mem, "%s/%s", used, tot) > 7)
              snprintf(mem, sizeof mem, "%s", used);
          }
        }
        fmt_num(temp, sizeof temp, 4, "C", G->temp_c);
        fmt_num(pow, sizeof pow, 4, "W", G->power_w);
        thr = throttle_word(G->throttle);
      } else {
        snprintf(util, sizeof util, "-");
      }
      int hostw = 6 - ((int)strlen(rank) > 4 ? (int)strlen(rank) - 4 : 0);
      if (hostw < 0) hostw = 0;
      snprintf(line, sizeof line, ROW_FMT, t->blocker ? '!' : ' ', rank, hostw, hostw,
               g == 0 ? t->host : "", gpu, util, mem, temp, pow, thr, cpu, rss, what, secs);
      line_out(f, line, width);
      drawn++;
    }
  }
  if (max_rows >= 0 && total > max_rows) {
    snprintf(line, sizeof line, "rows %d-%d of %d  (up/down, PgUp/PgDn, Home/End)", first + 1,
             first + drawn, total);
    line_out(f, line, width);
  }
  return total;
}
