/* gpurun(1)'s ENVIRONMENT section is the GPURUN_* table (base/param.c) printed as roff: the text
 * between the two marker lines of launcher/gpurun.1 must be what gr__param_man prints now.
 *   test_man_env PAGE           compare (exit 1 and the first differing line when they differ)
 *   test_man_env --write PAGE   replace the section in PAGE with the table's text */
#include "gr_param.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char begin[] = ".\\\" BEGIN GPURUN_* table (generated from base/param.c)\n";
static const char end[] = ".\\\" END GPURUN_* table\n";

static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "r");
  if (!f) return NULL;
  char *buf = NULL;
  size_t cap = 0, n = 0;
  for (;;) {
    if (n + 4096 + 1 > cap) {
      cap = (n + 4096 + 1) * 2;
      char *nb = realloc(buf, cap);
      if (!nb) {
        free(buf);
        fclose(f);
        return NULL;
      }
      buf = nb;
    }
    size_t got = fread(buf + n, 1, 4096, f);
    n += got;
    if (got < 4096) break;
  }
  fclose(f);
  buf[n] = '\0';
  *len = n;
  return buf;
}

/* Says where the page and the table part: the first line that differs. */
static void report(const char *page, const char *have, size_t have_len, const char *want,
                   size_t want_len) {
  size_t i = 0, line = 1;
  while (i < have_len && i < want_len && have[i] == want[i])
    if (have[i++] == '\n') line++;
  const char *hl = have + i, *wl = want + i;
  while (hl > have && hl[-1] != '\n')
    hl--;
  while (wl > want && wl[-1] != '\n')
    wl--;
  fprintf(stderr,
          "test_man_env: %s's ENVIRONMENT section differs from base/param.c's table at its line "
          "%zu:\n  page:  %.*s\n  table: %.*s\nregenerate it with: test_man_env --write %s\n",
          page, line, (int)strcspn(hl, "\n"), hl, (int)strcspn(wl, "\n"), wl, page);
}

int main(int argc, char **argv) {
  int write = argc == 3 && strcmp(argv[1], "--write") == 0;
  if (argc != 2 && !write) {
    fprintf(stderr, "usage: test_man_env [--write] PAGE\n");
    return 2;
  }
  const char *page = argv[argc - 1];
  size_t len = 0;
  char *text = slurp(page, &len);
  if (!text) {
    fprintf(stderr, "test_man_env: cannot read %s\n", page);
    return 2;
  }
  char *b = strstr(text, begin), *e = b ? strstr(b, end) : NULL;
  if (!b || !e) {
    fprintf(stderr, "test_man_env: %s has no section between the marker lines %.*s and %.*s\n",
            page, (int)strlen(begin) - 1, begin, (int)strlen(end) - 1, end);
    free(text);
    return 1;
  }
  char *want = NULL;
  size_t want_len = 0;
  FILE *m = open_memstream(&want, &want_len);
  gr__param_man(m);
  fclose(m);
  char *have = b + strlen(begin);
  size_t have_len = (size_t)(e - have);
  int rc = 0;
  if (write) {
    FILE *o = fopen(page, "w");
    if (o) {
      fwrite(text, 1, (size_t)(have - text), o);
      fwrite(want, 1, want_len, o);
      fputs(e, o);
    }
    if (!o || fclose(o) != 0) {
      fprintf(stderr, "test_man_env: cannot write %s\n", page);
      rc = 2;
    }
  } else if (have_len == want_len && memcmp(have, want, want_len) == 0) {
    printf("test_man_env: %s's ENVIRONMENT section is the table (%d variables)\n", page,
           GR_PARAM_COUNT);
  } else {
    report(page, have, have_len, want, want_len);
    rc = 1;
  }
  free(want);
  free(text);
  return rc;
}
