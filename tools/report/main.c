/* gpurun-report DIR: merge one job's monitor files into a table (stdout), DIR/report.json and
 * DIR/report.svg, and name the ranks the flight-recorder dumps show as missing from a collective.
 */
#include "gr_report.h"

#include "gr_counters_format.h"
#include "gr_error.h"
#include "gr_escape.h"
#include "gr_flight_format.h"
#include "gr_monitor_csv.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void usage(FILE *f) {
  fprintf(
      f, "usage: gpurun-report [--json FILE] [--svg FILE] DIR\n"
         "  DIR: a job directory, GPURUN_MONITOR_DIR/<job> (a root with a single job also works).\n"
         "  Prints a summary per rank and GPU; writes DIR/report.json and DIR/report.svg unless\n"
         "  --json/--svg name other files (into DIR only when it is yours and no one else can\n"
         "  write it). Reads regular files only; skips lines over 64 KiB and bad numbers with\n"
         "  file:line. With flight-recorder dumps, names the rank at the end of each wait-for\n"
         "  chain. Exit 1 when a file (or standard output) cannot be written.\n");
}

static int has_job_files(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  int found = 0;
  for (struct dirent *e; !found && (e = readdir(d));) {
    size_t n = strlen(e->d_name);
    size_t ncsv = sizeof GR_MONITOR_CSV_SUFFIX - 1, nctr = sizeof GR_COUNTERS_SUFFIX - 1;
    found = (n > ncsv && !strcmp(e->d_name + n - ncsv, GR_MONITOR_CSV_SUFFIX)) ||
            !strncmp(e->d_name, GR_FLIGHT_PREFIX, sizeof GR_FLIGHT_PREFIX - 1) ||
            (n > nctr && !strcmp(e->d_name + n - nctr, GR_COUNTERS_SUFFIX));
  }
  closedir(d);
  return found;
}

/* The one place an error is printed: the sentence the failing call recorded (report.h). */
static int fail(int code) {
  fprintf(stderr, "gpurun-report: %s\n", gr_last_error());
  return code;
}

/* DIR may be the monitor root: accept it when it holds exactly one job. Several jobs: their list
 * goes to stderr here (it is the answer, not one sentence) and GR_ERR_INVALID is returned with
 * nothing recorded. */
static gr_status resolve(const char *dir, char *out, size_t cap) {
  char esc[512];
  if (has_job_files(dir)) {
    snprintf(out, cap, "%s", dir);
    return GR_OK;
  }
  DIR *d = opendir(dir);
  if (!d)
    return gr__fail_msg(GR_ERR_SYSTEM, "cannot open directory %s",
                        gr__esc_term_str(esc, sizeof esc, dir));
  int jobs = 0;
  for (struct dirent *e; (e = readdir(d));) {
    if (e->d_name[0] == '.') continue;
    char sub[4096];
    snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name);
    struct stat st;
    if (stat(sub, &st) == 0 && S_ISDIR(st.st_mode) && has_job_files(sub)) {
      /* Directory names are other users' input: escaped for the terminal. */
      if (jobs++ == 0) {
        snprintf(out, cap, "%s", sub);
        continue;
      }
      if (jobs == 2) {
        fputs("gpurun-report: several jobs; name one:\n  ", stderr);
        gr__esc_term(stderr, out);
        fputc('\n', stderr);
      }
      fputs("  ", stderr);
      gr__esc_term(stderr, sub);
      fputc('\n', stderr);
    }
  }
  closedir(d);
  if (jobs == 1) return GR_OK;
  if (jobs == 0)
    return gr__fail_msg(GR_ERR_NOT_FOUND, "no monitor files (*.csv, flight.*.json) in %s",
                        gr__esc_term_str(esc, sizeof esc, dir));
  gr_clear_error();
  return GR_ERR_INVALID;
}

int main(int argc, char **argv) {
  const char *dir = NULL, *json_path = NULL, *svg_path = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--json") && i + 1 < argc)
      json_path = argv[++i];
    else if (!strcmp(argv[i], "--svg") && i + 1 < argc)
      svg_path = argv[++i];
    else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      usage(stdout);
      return 0;
    } else if (argv[i][0] == '-' || dir) {
      usage(stderr);
      return 2;
    } else {
      dir = argv[i];
    }
  }
  if (!dir) {
    usage(stderr);
    return 2;
  }
  char job_dir[4096];
  if (resolve(dir, job_dir, sizeof job_dir) != GR_OK) return gr_last_error()[0] ? fail(1) : 1;

  gr__rpt_job job;
  if (gr__rpt_load(job_dir, &job) != GR_OK) {
    gr__rpt_free(&job);
    return fail(1);
  }
  gr__rpt_summarize(&job);
  /* The MPI layer's statistics, where the program ran under it, say whom the others waited for:
   * that replaces the CSVs' guess at the slowest rank. */
  gr__rpt_arrivals *arr = NULL;
  if (gr__rpt_arrivals_load(job_dir, &arr) != GR_OK) fail(1);
  int waited_for, most;
  if (gr__rpt_arrivals_world(arr, &waited_for, &most))
    gr__rpt_set_slowest_from_mpi(&job, waited_for, most);
  printf("gpurun-report: ");
  gr__esc_term(stdout, job_dir);
  putchar('\n');
  gr__rpt_print_table(&job, stdout);
  char *flight = NULL, *wait = NULL;
  int nf = 0;
  gr_status fst = gr__rpt_flight(job_dir, stdout, &flight, &wait, &nf);
  if (fst != GR_OK) fail(1);
  gr__rpt_arrivals_print(arr, &job, stdout);
  gr__rpt_arrivals_free(arr);

  /* The default outputs go into the job directory only when it is this user's and no one else
   * can write it (an operator reading a user's job must not write where the user controls). */
  int check_dir = !json_path || !svg_path;
  char jp[4200], sp[4200];
  if (!json_path) {
    snprintf(jp, sizeof jp, "%s/report.json", job_dir);
    json_path = jp;
  }
  if (!svg_path) {
    snprintf(sp, sizeof sp, "%s/report.svg", job_dir);
    svg_path = sp;
  }
  int rc = 0;
  if (gr__rpt_write_json(&job, json_path, flight, wait, check_dir && json_path == jp) != GR_OK)
    rc = fail(1);
  if (gr__rpt_write_svg(&job, svg_path, check_dir && svg_path == sp) != GR_OK) rc = fail(1);
  if (rc == 0) {
    printf("\nwrote ");
    gr__esc_term(stdout, json_path);
    printf(" and ");
    gr__esc_term(stdout, svg_path);
    putchar('\n');
  }
  free(flight);
  free(wait);
  gr__rpt_free(&job);
  /* The table is output too: a full disk or a closed pipe on stdout is a failure. */
  if (fflush(stdout) != 0 || ferror(stdout)) {
    gr__fail_msg(GR_ERR_SYSTEM, "cannot write the summary to standard output: %s", strerror(errno));
    return fail(1);
  }
  return fst != GR_OK ? 1 : rc;
}
