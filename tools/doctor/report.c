/* gpurun-doctor's report: the lines the checks add, printed as 80-column text or as JSON. Every
 * string is escaped where it leaves (base/escape.c): found text quotes host names, paths, the
 * environment and other programs' output. */
#include "gr_doctor.h"

#include "gr_escape.h"

#include <gpurun/version.h>
#include <stdarg.h>
#include <string.h>

const char *gr__dr_verdict_name(gr__dr_verdict v) {
  switch (v) {
  case GR__DR_OK:
    return "ok";
  case GR__DR_SKIP:
    return "skip";
  case GR__DR_WARN:
    return "warn";
  case GR__DR_FAIL:
    return "fail";
  }
  return "?";
}

void gr__dr_report_init(gr__dr_report *r) {
  memset(r, 0, sizeof *r);
  gr__array_init(&r->line, sizeof(gr__dr_line));
}

void gr__dr_add(gr__dr_report *r, const char *check, gr__dr_verdict v, const char *advice,
                const char *fmt, ...) {
  if (gr__array_push(&r->line, NULL) != GR_OK) {
    r->nomem = 1;
    return;
  }
  gr__dr_line *l = &GR__DR_LINE(r, r->line.count - 1);
  snprintf(l->check, sizeof l->check, "%s", check);
  l->verdict = v;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(l->found, sizeof l->found, fmt, ap);
  va_end(ap);
  snprintf(l->advice, sizeof l->advice, "%s", advice ? advice : "");
}

gr__dr_verdict gr__dr_worst(const gr__dr_report *r) {
  gr__dr_verdict w = r->nomem ? GR__DR_FAIL : GR__DR_OK;
  for (size_t i = 0; i < r->line.count; i++)
    if (GR__DR_LINE(r, i).verdict > w) w = GR__DR_LINE(r, i).verdict;
  return w == GR__DR_SKIP ? GR__DR_OK : w;
}

void gr__dr_free(gr__dr_report *r) { gr__array_free(&r->line); }

/* Prints s (already escaped for the terminal) after first (indent columns wide), then on further
 * lines indented by indent, breaking at spaces so that no line passes width; a word longer than a
 * line is cut. */
static void wrap(FILE *f, const char *first, int indent, const char *s, int width) {
  int avail = width - indent;
  if (avail < 10) avail = 10;
  while (*s == ' ')
    s++;
  int first_line = 1;
  do {
    size_t len = strlen(s), take = len;
    if (len > (size_t)avail) {
      size_t k = (size_t)avail;
      while (k > 0 && s[k] != ' ')
        k--;
      take = k > 0 ? k : (size_t)avail;
    }
    while (take > 0 && s[take - 1] == ' ')
      take--;
    if (first_line)
      fputs(first, f);
    else
      fprintf(f, "%*s", indent, "");
    fprintf(f, "%.*s\n", (int)take, s);
    s += take;
    while (*s == ' ')
      s++;
    first_line = 0;
  } while (*s);
}

#define COL_FOUND 16 /* "warn  check     " */
#define COL_ADVICE 19

void gr__dr_print_text(FILE *f, const gr__dr_report *r, int width) {
  char buf[4 * GR__DR_FOUND], head[2 * COL_FOUND];
  gr__esc_term_str(buf, sizeof buf, r->host);
  char src[512];
  gr__esc_term_str(src, sizeof src, r->source);
  char title[sizeof buf + sizeof src + 128];
  snprintf(title, sizeof title, "gpurun-doctor %s on %s (%s), plan for %d rank%s", gr_version(),
           buf, src, r->ranks, r->ranks == 1 ? "" : "s");
  wrap(f, "", 2, title, width);
  for (size_t i = 0; i < r->line.count; i++) {
    const gr__dr_line *l = &GR__DR_LINE(r, i);
    char name[GR__DR_CHECK * 4];
    gr__esc_term_str(name, sizeof name, l->check);
    snprintf(head, sizeof head, "%-5s %-9.9s ", gr__dr_verdict_name(l->verdict), name);
    gr__esc_term_str(buf, sizeof buf, l->found);
    wrap(f, head, COL_FOUND, buf, width);
    if (l->advice[0]) {
      gr__esc_term_str(buf, sizeof buf, l->advice);
      snprintf(head, sizeof head, "%*s-> ", COL_FOUND, "");
      wrap(f, head, COL_ADVICE, buf, width);
    }
  }
  if (r->nomem)
    wrap(f, "fail  report    ", COL_FOUND, "out of memory: some lines are missing", width);
  gr__dr_verdict w = gr__dr_worst(r);
  int nfail = 0, nwarn = 0;
  for (size_t i = 0; i < r->line.count; i++) {
    nfail += GR__DR_LINE(r, i).verdict == GR__DR_FAIL;
    nwarn += GR__DR_LINE(r, i).verdict == GR__DR_WARN;
  }
  fprintf(f, "%s: %d failed, %d warned\n",
          w == GR__DR_FAIL   ? "FAIL"
          : w == GR__DR_WARN ? "WARN"
                             : "OK",
          nfail + r->nomem, nwarn);
}

void gr__dr_print_json(FILE *f, const gr__dr_report *r) {
  fputs("{\"tool\": \"gpurun-doctor\", \"version\": ", f);
  gr__esc_json(f, gr_version());
  fputs(", \"host\": ", f);
  gr__esc_json(f, r->host);
  fputs(", \"source\": ", f);
  gr__esc_json(f, r->source);
  fprintf(f, ", \"ranks\": %d, \"verdict\": \"%s\", \"complete\": %s,\n \"checks\": [", r->ranks,
          gr__dr_verdict_name(gr__dr_worst(r)), r->nomem ? "false" : "true");
  for (size_t i = 0; i < r->line.count; i++) {
    const gr__dr_line *l = &GR__DR_LINE(r, i);
    fputs(i ? ",\n  {\"check\": " : "\n  {\"check\": ", f);
    gr__esc_json(f, l->check);
    fprintf(f, ", \"verdict\": \"%s\", \"found\": ", gr__dr_verdict_name(l->verdict));
    gr__esc_json(f, l->found);
    fputs(", \"advice\": ", f);
    gr__esc_json(f, l->advice);
    fputc('}', f);
  }
  fputs("\n ]}\n", f);
}
