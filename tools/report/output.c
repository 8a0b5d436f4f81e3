/* gpurun-report's outputs: the table on stdout, the JSON file, the SVG timeline. */
#include "gr_report.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gr_error.h"
#include "gr_escape.h"
#include "gr_safefile.h"

/* s escaped for a terminal, left-aligned in width columns. */
static void term_cell(FILE *out, const char *s, int width) {
  char *buf = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&buf, &len);
  if (!m) return;
  gr__esc_term(m, s);
  fclose(m);
  fprintf(out, "%-*s", width, buf ? buf : "");
  free(buf);
}

static int is_slowest(const gr__rpt_job *job, const gr__rpt_series *s) {
  return job->slowest >= 0 && gr__rpt_same_rank(&GR__RPT_SERIES(job, job->slowest), s);
}

static void cell(FILE *out, int width, int prec, double v) {
  if (isnan(v)) {
    fprintf(out, "%*s", width, "-");
  } else {
    char b[64];
    snprintf(b, sizeof b, "%.*f", prec, v);
    fprintf(out, "%*s", width, b);
  }
}

static void print_ends(const gr__rpt_job *job, FILE *out);

void gr__rpt_print_table(const gr__rpt_job *job, FILE *out) {
  int ngpu = 0;
  double energy = 0;
  for (int i = 0; i < gr__rpt_nseries(job); i++)
    if (strcmp(GR__RPT_SERIES(job, i).gpu, "-")) {
      ngpu++;
      if (!isnan(GR__RPT_SERIES(job, i).energy_j)) energy += GR__RPT_SERIES(job, i).energy_j;
    }
  fprintf(out, "%d series (%d GPU), %.1f s of samples\n\n", gr__rpt_nseries(job), ngpu,
          job->t1 - job->t0);
  /* "coll wait": time inside collectives, waiting for the other ranks included (the straggler
   * signal: the rank that waits least is the one the others wait for). */
  fprintf(out, "%5s %-16s %-13s %6s %6s %10s %10s %6s %10s %6s %6s %9s %10s\n", "rank",
          "node:local", "gpu", "util", "util", "mem peak", "mem total", "temp", "energy", "cpu",
          "cpu", "rss peak", "coll wait");
  fprintf(out, "%5s %-16s %-13s %6s %6s %10s %10s %6s %10s %6s %6s %9s %10s\n", "", "", "", "mean%",
          "max%", "MiB", "MiB", "max C", "J", "mean%", "max%", "MiB", "s");
  for (int i = 0; i < gr__rpt_nseries(job); i++) {
    const gr__rpt_series *s = &GR__RPT_SERIES(job, i);
    const gr__rpt_counters *c = gr__rpt_counters_for(job, s);
    char who[160];
    snprintf(who, sizeof who, "%.140s:%d", s->node, s->local_rank);
    if (s->rank >= 0)
      fprintf(out, "%5d ", s->rank);
    else
      fprintf(out, "%5s ", "?");
    term_cell(out, who, 16);
    fputc(' ', out);
    term_cell(out, s->gpu, 13);
    cell(out, 7, 1, s->util_mean);
    cell(out, 7, 1, s->util_max);
    cell(out, 11, 0, s->mem_peak);
    cell(out, 11, 0, s->mem_total);
    cell(out, 7, 0, s->temp_max);
    cell(out, 11, 1, s->energy_j);
    cell(out, 7, 1, s->cpu_mean);
    cell(out, 7, 1, s->cpu_max);
    cell(out, 10, 1, s->rss_peak);
    cell(out, 11, 3, c && c->have_coll ? c->coll_wait_s : NAN);
    if (is_slowest(job, s)) fprintf(out, "  <- slowest");
    if (s->throttle_any) fprintf(out, "  throttled(0x%llx)", s->throttle_any);
    if (s->ecc_max > 0) fprintf(out, "  ECC errors: %.0f", s->ecc_max);
    /* co-tenants seen: how the GPU was split between this rank and the others */
    if (!isnan(s->others_sm_mean) && s->others_sm_mean > 0)
      fprintf(out, "  shared: rank %.1f%% others %.1f%% (mean SM)",
              isnan(s->rank_sm_mean) ? 0.0 : s->rank_sm_mean, s->others_sm_mean);
    fputc('\n', out);
  }
  if (ngpu) fprintf(out, "\nenergy, all GPUs: %.1f J\n", energy);
  if (job->slowest >= 0) {
    const gr__rpt_series *s = &GR__RPT_SERIES(job, job->slowest);
    fprintf(out, "slowest rank: %d (", s->rank);
    gr__esc_term(out, s->node);
    fprintf(out, ":%d): %s\n", s->local_rank, job->slowest_why);
  } else if (job->slowest_why) {
    fprintf(out, "slowest rank: none, %s\n", job->slowest_why);
  }
  /* each rank's priority (gpurun --priority), one line per level, when any rank recorded one */
  static const char *const levels[] = {"high", "normal", "low"};
  for (int l = 0; l < 3; l++) {
    int n = 0;
    for (int i = 0; i < gr__rpt_ncounters(job); i++)
      if (!strcmp(GR__RPT_COUNTERS(job, i).priority, levels[l])) {
        if (n++)
          fputc(',', out);
        else
          fprintf(out, "priority %s: ranks ", levels[l]);
        fprintf(out, "%d", GR__RPT_COUNTERS(job, i).rank);
      }
    if (n) fputc('\n', out);
  }
  /* ranks whose placement receipt (gr_init) differed from gpurun's plan */
  for (int i = 0; i < gr__rpt_ncounters(job); i++)
    if (GR__RPT_COUNTERS(job, i).receipt[0])
      fprintf(out, "placement differed: rank %d (%.120s:%d): %s\n", GR__RPT_COUNTERS(job, i).rank,
              GR__RPT_COUNTERS(job, i).node, GR__RPT_COUNTERS(job, i).local_rank,
              GR__RPT_COUNTERS(job, i).receipt);
  print_ends(job, out);
}

/* How one program ended, in words: "killed by signal 9 (SIGKILL)", "exit status 3". */
static void end_words(const gr__rpt_end *e, char *out, size_t cap) {
  if (e->how == GR__RPT_END_SIGNAL)
    snprintf(out, cap, "killed by signal %d%s%s%s%s", e->sig, e->sig_name[0] ? " (SIG" : "",
             e->sig_name, e->sig_name[0] ? ")" : "", e->core ? ", core dumped" : "");
  else if (e->how == GR__RPT_END_EXIT)
    snprintf(out, cap, "exit status %d", e->code);
  else
    snprintf(out, cap, "ended, status not seen");
}

/* The reference for end times: the earliest start among the records, else the first sample. */
static double ends_t0(const gr__rpt_job *job) {
  double t0 = INFINITY;
  for (int i = 0; i < gr__rpt_nends(job); i++)
    if (GR__RPT_END(job, i).start < t0) t0 = GR__RPT_END(job, i).start;
  return isfinite(t0) ? t0 : job->t0;
}

static void end_who(FILE *out, const gr__rpt_end *e) {
  if (e->rank >= 0)
    fprintf(out, "rank %d (", e->rank);
  else
    fputs("rank ? (", out);
  gr__esc_term(out, e->node);
  fprintf(out, ":%d)", e->local_rank);
}

/* The end records: a line per rank that died by signal or was ended by the time limit, which rank
 * ended first, and how many ends were not seen (the last two only for a job that did not end
 * cleanly). */
static void print_ends(const gr__rpt_job *job, FILE *out) {
  int n = gr__rpt_nends(job), unseen = 0;
  if (!n) return;
  double t0 = ends_t0(job);
  char words[128];
  for (int i = 0; i < n; i++) {
    const gr__rpt_end *e = &GR__RPT_END(job, i);
    unseen += e->how == GR__RPT_END_UNSEEN;
    if (e->how != GR__RPT_END_SIGNAL && !e->time_limit) continue;
    end_words(e, words, sizeof words);
    end_who(out, e);
    fprintf(out, " %s", words);
    if (isfinite(e->end) && isfinite(t0)) fprintf(out, " at +%.3f s", e->end - t0);
    if (e->time_limit)
      fprintf(out, ", ended by the time limit (%s)",
              e->time_limit == 2 ? "SIGKILL after the grace" : "SIGTERM");
    if (isfinite(e->cpu_s)) fprintf(out, "; %.2f s of CPU", e->cpu_s);
    fputc('\n', out);
  }
  /* Which rank ended first matters when the job did not end cleanly: a rank died by a signal,
   * exited non-zero or met the time limit; or the first end, not seen, came apart from the
   * others (0.5 s or more before the next), as a rank killed under mpirun does. A clean job's ranks
   * end together and get no lines. */
  const gr__rpt_end *first = &GR__RPT_END(job, 0); /* sorted by end time */
  int failed = 0;
  for (int i = 0; i < n; i++) {
    const gr__rpt_end *e = &GR__RPT_END(job, i);
    failed |= e->how == GR__RPT_END_SIGNAL || e->time_limit ||
              (e->how == GR__RPT_END_EXIT && e->code != 0);
  }
  double gap = n > 1 && isfinite(first->end) && isfinite(GR__RPT_END(job, 1).end)
                   ? GR__RPT_END(job, 1).end - first->end
                   : NAN;
  if (!failed && !(first->how == GR__RPT_END_UNSEEN && gap >= 0.5)) return;
  if (isfinite(first->end)) {
    end_words(first, words, sizeof words);
    fputs("ended first: ", out);
    end_who(out, first);
    fprintf(out, " at +%.3f s, %s", first->end - t0, words);
    if (isfinite(gap)) fprintf(out, "; the next %.3f s later", gap);
    fputc('\n', out);
  }
  if (unseen)
    fprintf(out, "%d of %d rank%s ended with the status not seen (the launcher reaped %s first)\n",
            unseen, n, n == 1 ? "" : "s", unseen == 1 ? "it" : "them");
}

/* ---- JSON ---- */

static void jnum(FILE *f, const char *key, double v, int comma) {
  if (isnan(v) || isinf(v))
    fprintf(f, "\"%s\": null", key);
  else
    fprintf(f, "\"%s\": %.6g", key, v);
  if (comma) fputs(", ", f);
}

static void jstr(FILE *f, const char *key, const char *v, int comma) {
  fprintf(f, "\"%s\": ", key);
  gr__esc_json(f, v);
  if (comma) fputs(", ", f);
}

/* Renders with fn into memory, then writes the file whole or not at all (gr__file_replace in the
 * file's directory: a symlink or special file in its place is refused, never followed). With
 * check_dir, the directory must also be this user's and not writable by others (a job directory
 * of someone else is not written into). */
static gr_status save(const char *path, int check_dir,
                      void (*fn)(FILE *, const void *, const void *), const void *a,
                      const void *b) {
  char *buf = NULL, esc[512], esc_why[512];
  size_t len = 0;
  FILE *m = open_memstream(&buf, &len);
  if (!m) return gr__fail_msg(GR_ERR_NOMEM, "out of memory rendering %s", path);
  fn(m, a, b);
  int bad = ferror(m);
  if (fclose(m) != 0 || bad) {
    free(buf);
    return gr__fail_msg(GR_ERR_NOMEM, "out of memory rendering %s", path);
  }
  char d[4096], n[4096], why[512] = "";
  snprintf(d, sizeof d, "%s", path);
  snprintf(n, sizeof n, "%s", path);
  const char *dir = dirname(d), *name = basename(n);
  gr_status rc = GR_ERR_SYSTEM;
  int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirfd < 0)
    snprintf(why, sizeof why, "cannot open %s: %s", dir, strerror(errno));
  else if ((rc = check_dir ? gr__dir_check(dirfd, dir) : GR_OK) == GR_OK)
    rc = gr__file_replace(dirfd, name, buf, len);
  if (rc != GR_OK && dirfd >= 0) snprintf(why, sizeof why, "%s", gr_last_error());
  if (dirfd >= 0) close(dirfd);
  free(buf);
  if (rc != GR_OK)
    return gr__fail_msg(GR_ERR_SYSTEM, "cannot write %s: %s",
                        gr__esc_term_str(esc, sizeof esc, path),
                        gr__esc_term_str(esc_why, sizeof esc_why, why));
  return GR_OK;
}

typedef struct {
  const char *flight, *wait;
} flight_parts;

static void render_json(FILE *f, const void *vjob, const void *vflight) {
  const gr__rpt_job *job = vjob;
  const flight_parts *fp = vflight;
  fputs("{", f);
  jnum(f, "t0", job->t0, 1);
  jnum(f, "span_s", job->t1 - job->t0, 1);
  fputs("\"series\": [\n", f);
  for (int i = 0; i < gr__rpt_nseries(job); i++) {
    const gr__rpt_series *s = &GR__RPT_SERIES(job, i);
    const gr__rpt_counters *c = gr__rpt_counters_for(job, s);
    fputs("  {", f);
    fprintf(f, "\"rank\": %d, ", s->rank);
    jstr(f, "node", s->node, 1);
    fprintf(f, "\"local_rank\": %d, ", s->local_rank);
    jstr(f, "gpu", s->gpu, 1);
    fprintf(f, "\"samples\": %d, ", s->n);
    jnum(f, "util_mean", s->util_mean, 1);
    jnum(f, "util_max", s->util_max, 1);
    jnum(f, "mem_peak_mib", s->mem_peak, 1);
    jnum(f, "mem_total_mib", s->mem_total, 1);
    jnum(f, "temp_max_c", s->temp_max, 1);
    jnum(f, "energy_j", s->energy_j, 1);
    jnum(f, "cpu_util_mean", s->cpu_mean, 1);
    jnum(f, "cpu_util_max", s->cpu_max, 1);
    jnum(f, "rss_peak_mib", s->rss_peak, 1);
    fprintf(f, "\"throttle_reasons\": %llu, ", s->throttle_any);
    jnum(f, "ecc_uncorrected", s->ecc_max, 1);
    jnum(f, "rank_sm_mean", s->rank_sm_mean, 1);
    jnum(f, "others_sm_mean", s->others_sm_mean, 1);
    jnum(f, "cpu_steal_mean", s->steal_mean, 1);
    jnum(f, "coll_time_s", c && c->have_coll ? c->coll_time_s : NAN, 1);
    jnum(f, "coll_wait_s", c && c->have_coll ? c->coll_wait_s : NAN, 1);
    jnum(f, "coll_bytes", c && c->have_coll ? c->coll_bytes : NAN, 1);
    jnum(f, "pool_steals", c && c->have_pool ? c->pool_steals : NAN, 1);
    jnum(f, "pool_idle_s", c && c->have_pool ? c->pool_idle_s : NAN, 1);
    jnum(f, "cpu_time_s", s->cpu_time_s, 1);
    if (s->state)
      fprintf(f, "\"state\": \"%c\", ", s->state);
    else
      fputs("\"state\": null, ", f);
    fprintf(f, "\"slowest\": %s}%s\n", is_slowest(job, s) ? "true" : "false",
            i + 1 < gr__rpt_nseries(job) ? "," : "");
  }
  fputs("], ", f);
  if (job->slowest >= 0) {
    const gr__rpt_series *s = &GR__RPT_SERIES(job, job->slowest);
    fprintf(f, "\"slowest\": {\"rank\": %d, ", s->rank);
    jstr(f, "node", s->node, 1);
    fprintf(f, "\"local_rank\": %d, ", s->local_rank);
    jstr(f, "why", job->slowest_why, 0);
    fputs("}, ", f);
  } else {
    fputs("\"slowest\": null, ", f);
  }
  /* the end records, first to end first */
  fputs("\"ends\": [", f);
  double t0 = ends_t0(job);
  for (int i = 0; i < gr__rpt_nends(job); i++) {
    const gr__rpt_end *e = &GR__RPT_END(job, i);
    static const char *const hows[] = {"exit", "signal", "unseen"};
    static const char *const tls[] = {"none", "term", "kill"};
    fprintf(f, "%s{\"rank\": %d, ", i ? ", " : "", e->rank);
    jstr(f, "node", e->node, 1);
    fprintf(f, "\"local_rank\": %d, \"how\": \"%s\", ", e->local_rank, hows[e->how]);
    jnum(f, "exit_code", e->how == GR__RPT_END_EXIT ? e->code : NAN, 1);
    jnum(f, "signal", e->how == GR__RPT_END_SIGNAL ? e->sig : NAN, 1);
    fprintf(f, "\"time_limit\": \"%s\", ", tls[e->time_limit]);
    jnum(f, "end_s", isfinite(t0) ? e->end - t0 : NAN, 1);
    jnum(f, "cpu_time_s", e->cpu_s, 0);
    fputs("}", f);
  }
  fputs("], ", f);
  fprintf(f, "\"flight\": %s, \"wait_for\": %s}\n", fp->flight ? fp->flight : "[]",
          fp->wait ? fp->wait : "null");
}

gr_status gr__rpt_write_json(const gr__rpt_job *job, const char *path, const char *flight_json,
                             const char *wait_json, int check_dir) {
  flight_parts fp = {flight_json, wait_json};
  return save(path, check_dir, render_json, job, &fp);
}

/* ---- SVG ---- */

enum { CHART_W = 270, CHART_H = 110, PAD_L = 46, PAD_T = 22, PAD_B = 22, GAP = 18, LABEL_W = 170 };

typedef struct {
  int metric;
  const char *title;
  const char *unit;
  const char *color;
  double fixed_max; /* > 0: axis to this (percentages) */
} chart_def;

static const chart_def gpu_charts[] = {
    {GR__RPT_M_GPU_UTIL, "GPU utilisation", "%", "#1f77b4", 100},
    {GR__RPT_M_MEM_USED, "memory used", "MiB", "#2ca02c", 0},
    {GR__RPT_M_TEMP, "temperature", "C", "#d62728", 0},
    {GR__RPT_M_POWER, "power", "W", "#ff7f0e", 0},
};
static const chart_def cpu_charts[] = {
    {GR__RPT_M_CPU_UTIL, "CPU busy, rank's cores", "%", "#9467bd", 100},
    {GR__RPT_M_RSS, "resident memory", "MiB", "#8c564b", 0},
};

static void esc(FILE *f, const char *s) { gr__esc_xml(f, s); }

static double nice_max(double v) {
  if (!(v > 0)) return 1;
  double p = pow(10, floor(log10(v)));
  for (double m = 1; m <= 10; m += m < 2 ? 1 : (m < 5 ? 3 : 5))
    if (v <= m * p) return m * p;
  return 10 * p;
}

/* The bucket of a sample taken at t: clamped while still a double, because another job's CSV can
 * hold times far outside the job's span (converting such a quotient to int is undefined). */
static int svg_bucket(double t, double t0, double span) {
  double b = (t - t0) / span * GR__RPT_SVG_BUCKETS;
  if (!(b >= 0)) return 0;
  if (b >= GR__RPT_SVG_BUCKETS - 1) return GR__RPT_SVG_BUCKETS - 1;
  return (int)b;
}

static void chart(FILE *f, const gr__rpt_job *job, const gr__rpt_series *s, const chart_def *d,
                  double x0, double y0) {
  const double *v = s->m[d->metric];
  double peak = NAN;
  for (int i = 0; i < s->n; i++)
    if (!isnan(v[i]) && (isnan(peak) || v[i] > peak)) peak = v[i];
  double vmax = d->fixed_max;
  if (vmax <= 0) {
    vmax = 0;
    for (int i = 0; i < s->n; i++)
      if (!isnan(v[i]) && v[i] > vmax) vmax = v[i];
    if (d->metric == GR__RPT_M_MEM_USED && s->mem_total > vmax) vmax = s->mem_total;
    vmax = nice_max(vmax);
  }
  double span = job->t1 - job->t0;
  if (!(span > 0)) span = 1;
  double pw = CHART_W - PAD_L - 8, ph = CHART_H - PAD_T - PAD_B;
  double px = x0 + PAD_L, py = y0 + PAD_T;
  fprintf(f,
          "<g>\n<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#fafafa\" "
          "stroke=\"#bbb\"/>\n",
          px, py, pw, ph);
  fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"t\">%s (%s)", px, y0 + 14, d->title, d->unit);
  if (!isnan(peak)) fprintf(f, "<tspan class=\"a\" dx=\"6\">max %.4g</tspan>", peak);
  fputs("</text>\n", f);
  for (int g = 1; g < 4; g++)
    fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#e4e4e4\"/>\n", px,
            px + pw, py + ph * g / 4, py + ph * g / 4);
  fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"a\" text-anchor=\"end\">%g</text>\n", px - 4,
          py + 8, vmax);
  fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"a\" text-anchor=\"end\">0</text>\n", px - 4,
          py + ph);
  fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"a\">0 s</text>\n", px, py + ph + 14);
  fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"a\" text-anchor=\"end\">%.1f s</text>\n", px + pw,
          py + ph + 14, job->t1 - job->t0);
  /* One polyline per run of defined samples: a gap in the data stays a gap. The samples are
   * reduced to GR__RPT_SVG_BUCKETS buckets over the job's span, each drawn as its minimum and maximum
   * (in the order they occurred), so a million samples draw like a few hundred and no spike is
   * lost. A bucket without samples ends the line. */
  int open = 0, drawn = 0;
  for (int i = 0; i < s->n;) {
    int b = svg_bucket(s->t[i], job->t0, span);
    double lo = 0, hi = 0, t_lo = 0, t_hi = 0;
    int any = 0, gap = 0, j = i;
    for (; j < s->n; j++) {
      int bj = svg_bucket(s->t[j], job->t0, span);
      if (bj != b) break;
      if (isnan(v[j])) {
        gap = 1;
        continue;
      }
      if (!any || v[j] < lo) lo = v[j], t_lo = s->t[j];
      if (!any || v[j] > hi) hi = v[j], t_hi = s->t[j];
      any = 1;
    }
    i = j;
    if (any) {
      int lo_first = t_lo <= t_hi;
      double pt[2] = {lo_first ? t_lo : t_hi, lo_first ? t_hi : t_lo};
      double pv[2] = {lo_first ? lo : hi, lo_first ? hi : lo};
      if (!open)
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.8\" points=\"",
                d->color);
      for (int k = 0; k < (lo == hi ? 1 : 2); k++) {
        double x = px + pw * (pt[k] - job->t0) / span;
        double val = pv[k] > vmax ? vmax : (pv[k] < 0 ? 0 : pv[k]);
        fprintf(f, "%.1f,%.1f ", x, py + ph - ph * val / vmax);
      }
      open = 1;
      drawn++;
    }
    if (gap && open) { /* a missing sample in the bucket: the line breaks after it */
      fputs("\"/>\n", f);
      open = 0;
    }
  }
  if (open) fputs("\"/>\n", f);
  if (!drawn)
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"a\" text-anchor=\"middle\">no data</text>\n",
            px + pw / 2, py + ph / 2);
  fputs("</g>\n", f);
}

static void render_svg(FILE *f, const void *vjob, const void *unused) {
  (void)unused;
  const gr__rpt_job *job = vjob;
  int any_gpu = 0;
  for (int i = 0; i < gr__rpt_nseries(job); i++)
    any_gpu |= strcmp(GR__RPT_SERIES(job, i).gpu, "-") != 0;
  int width = LABEL_W + (any_gpu ? 4 : 2) * (CHART_W + GAP) + 10;
  int row_h = CHART_H + 12;
  int height = 50 + (gr__rpt_nseries(job) ? gr__rpt_nseries(job) : 1) * row_h + 10;
  fprintf(f,
          "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
          "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d "
          "%d\">\n",
          width, height, width, height);
  fputs("<style>text{font-family:sans-serif;fill:#222}.t{font-size:12px;font-weight:bold}"
        ".a{font-size:10px;fill:#555}.h{font-size:16px;font-weight:bold}.l{font-size:12px}"
        ".s{font-size:12px;fill:#c00;font-weight:bold}</style>\n",
        f);
  fprintf(f, "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n", width, height);
  fprintf(f, "<text x=\"10\" y=\"24\" class=\"h\">gpurun monitor: %d series over %.1f s</text>\n",
          gr__rpt_nseries(job), job->t1 - job->t0);
  if (!gr__rpt_nseries(job)) fputs("<text x=\"10\" y=\"60\" class=\"l\">no samples</text>\n", f);
  for (int i = 0; i < gr__rpt_nseries(job); i++) {
    const gr__rpt_series *s = &GR__RPT_SERIES(job, i);
    double y = 40 + i * row_h;
    fprintf(f, "<text x=\"10\" y=\"%.1f\" class=\"l\">rank %d</text>\n", y + 40, s->rank);
    fprintf(f, "<text x=\"10\" y=\"%.1f\" class=\"l\">", y + 56);
    esc(f, s->node);
    fprintf(f, ":%d</text>\n", s->local_rank);
    fprintf(f, "<text x=\"10\" y=\"%.1f\" class=\"l\">", y + 72);
    esc(f, strcmp(s->gpu, "-") ? s->gpu : "no GPU (CPU side)");
    fputs("</text>\n", f);
    if (is_slowest(job, s))
      fprintf(f, "<text x=\"10\" y=\"%.1f\" class=\"s\">slowest rank</text>\n", y + 90);
    int gpu = strcmp(s->gpu, "-") != 0;
    const chart_def *defs = gpu ? gpu_charts : cpu_charts;
    int nd = gpu ? 4 : 2;
    for (int k = 0; k < nd; k++)
      chart(f, job, s, &defs[k], LABEL_W + k * (CHART_W + GAP), y);
  }
  fputs("</svg>\n", f);
}

gr_status gr__rpt_write_svg(const gr__rpt_job *job, const char *path, int check_dir) {
  return save(path, check_dir, render_svg, job, NULL);
}
