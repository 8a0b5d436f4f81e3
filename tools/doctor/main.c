/* gpurun-doctor [--format text|json] [--topology FILE] [-n N] [--mpi-timeout S]: what is wrong with this node for
 * gpurun, one line per check (see gpurun-doctor.1). Exit 0 when nothing fails, 1 when something
 * does, 2 for a usage error or a topology that does not load. */
#include "gr_doctor.h"

#include "gr_escape.h"
#include "gr_parse.h"

#include <gpurun/status.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
  fputs("usage: gpurun-doctor [--format text|json] [--topology FILE] [-n N] [--mpi-timeout S]\n"
        "  --format      text (default: one line per check, 80 columns) or json\n"
        "  --topology    diagnose a recorded hwloc XML topology instead of this node;\n"
        "                every live-only check skips\n"
        "  -n N          ranks to plan for (default: the GPU count, at least 1)\n"
        "  --mpi-timeout seconds ompi_info may take (default 1.5)\n"
        "  -h, --help    this text\n"
        "exit: 0 nothing failed, 1 a check failed, 2 usage or topology error\n",
        f);
}

static int bad_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int bad_usage(const char *fmt, ...) {
  fputs("gpurun-doctor: ", stderr);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputs(" (gpurun-doctor --help)\n", stderr);
  return 2;
}

int main(int argc, char **argv) {
  gr__dr_opts o = {NULL, 0, 1.5};
  int json = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *val = NULL;
    char opt[32];
    const char *eq = strchr(a, '=');
    if (strncmp(a, "--", 2) == 0 && eq && (size_t)(eq - a) < sizeof opt) {
      memcpy(opt, a, (size_t)(eq - a));
      opt[eq - a] = 0;
      a = opt;
      val = eq + 1;
    }
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      return 0;
    }
    int takes = !strcmp(a, "--format") || !strcmp(a, "--topology") || !strcmp(a, "-n") ||
                !strcmp(a, "--mpi-timeout");
    if (!takes) {
      char shown[200];
      return bad_usage("unknown option '%s'", gr__esc_term_str(shown, sizeof shown, argv[i]));
    }
    if (!val) {
      if (i + 1 >= argc) return bad_usage("%s needs a value", a);
      val = argv[++i];
    }
    if (!strcmp(a, "--format")) {
      if (!strcmp(val, "json"))
        json = 1;
      else if (!strcmp(val, "text"))
        json = 0;
      else {
        char shown[200];
        return bad_usage("--format: '%s' is neither text nor json",
                         gr__esc_term_str(shown, sizeof shown, val));
      }
    } else if (!strcmp(a, "--topology")) {
      if (!val[0]) return bad_usage("--topology needs a file");
      o.topology = val;
    } else if (!strcmp(a, "--mpi-timeout")) {
      char *end;
      errno = 0;
      double t = strtod(val, &end);
      if (errno || end == val || *end || !(t >= 0.1 && t <= 600)) {
        char shown[200];
        return bad_usage("--mpi-timeout: '%s' is not a number of seconds from 0.1 to 600",
                         gr__esc_term_str(shown, sizeof shown, val));
      }
      o.mpi_timeout = t;
    } else {
      int n;
      if (gr__parse_int(val, 1, 65536, &n) != 0) {
        char shown[200];
        return bad_usage("-n: '%s' is not a rank count from 1 to 65536",
                         gr__esc_term_str(shown, sizeof shown, val));
      }
      o.ranks = n;
    }
  }
  gr__dr_report r;
  gr__dr_report_init(&r);
  gr_status st = gr__dr_run(&o, &r);
  if (st == GR_ERR_TOPOLOGY) {
    /* the sentence names the file (escaped for the terminal where it was recorded) */
    fprintf(stderr, "gpurun-doctor: %s\n", gr_last_error());
    gr__dr_free(&r);
    return 2;
  }
  if (json)
    gr__dr_print_json(stdout, &r);
  else
    gr__dr_print_text(stdout, &r, GR__DR_WIDTH);
  int rc = gr__dr_worst(&r) == GR__DR_FAIL ? 1 : 0;
  gr__dr_free(&r);
  if (fflush(stdout) != 0) {
    fputs("gpurun-doctor: cannot write the report\n", stderr);
    return 1;
  }
  return rc;
}
