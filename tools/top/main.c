/* gpurun-top [DIR]: the live terminal view of a job (see gpurun-top.1). Reads only files; never
 * talks to the ranks, so it can watch a job that hangs. */
#include "gr_top.h"

#include "gr_escape.h"
#include "gr_param.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop_flag, resized;
static void on_stop(int sig) {
  (void)sig;
  stop_flag = 1;
}
static void on_winch(int sig) {
  (void)sig;
  resized = 1;
}

static void usage(FILE *f) {
  fprintf(f, "usage: gpurun-top [--interval S] [--once | --count N] [--hang S] [--bench N] [DIR]\n"
             "  DIR         a job directory, or a monitor directory (its newest job);\n"
             "              default $GPURUN_MONITOR_DIR, else ./gpurun-monitor\n"
             "  --interval  seconds between refreshes (default 1)\n"
             "  --once      print one frame of every rank and exit (for scripts)\n"
             "  --count N   print N frames, --interval apart, and exit (for scripts: the\n"
             "              late line then compares with the earlier frames)\n"
             "  --hang      a collective or communicator creation waited in this long\n"
             "              counts as a hang (default 2 s)\n"
             "  --bench N   load and draw N frames off screen, print the mean refresh time\n"
             "keys: q quits; up/down, j/k, PgUp/PgDn, space/b, Home/End scroll\n");
}

static int parse_seconds(const char *s, double lo, double *out) {
  char *e;
  errno = 0;
  double v = strtod(s, &e);
  if (errno || e == s || *e || !isfinite(v) || v < lo || v > 86400) return -1;
  *out = v;
  return 0;
}

/* Keys: returns +1/-1 rows, +/-1000 pages, INT32 extremes for Home/End, 'q' to quit, 0 none. */
static int read_key(int *quit) {
  unsigned char b[8];
  ssize_t n = read(STDIN_FILENO, b, sizeof b);
  if (n <= 0) return 0;
  if (b[0] == 'q' || b[0] == 'Q' || b[0] == 3) {
    *quit = 1;
    return 0;
  }
  if (b[0] == 'j') return 1;
  if (b[0] == 'k') return -1;
  if (b[0] == ' ') return 1000;
  if (b[0] == 'b') return -1000;
  if (b[0] == 'g') return -1000000;
  if (b[0] == 'G') return 1000000;
  if (n >= 3 && b[0] == 27 && b[1] == '[') {
    switch (b[2]) {
    case 'A':
      return -1;
    case 'B':
      return 1;
    case 'H':
      return -1000000;
    case 'F':
      return 1000000;
    case '5':
      return -1000;
    case '6':
      return 1000;
    case '1':
      return -1000000;
    case '4':
      return 1000000;
    default:
      return 0;
    }
  }
  return 0;
}

/* The sentence for a job directory that can no longer be read (removed while watched: ENOENT). */
static void say_unreadable(char *out, size_t cap, const char *dir, int err) {
  char shown[600];
  gr__esc_term_str(shown, sizeof shown, dir);
  if (err == ENOENT)
    snprintf(out, cap, "job directory %s is gone: its files were removed", shown);
  else
    snprintf(out, cap, "cannot read job directory %s: %s", shown, strerror(err));
}

/* The frame in place of the table while the directory cannot be read (err: its errno), or shows
 * no rank (err 0: every live.<rank> and .csv file removed), cut to width columns: what happened
 * first (a long path is cut, the news is not), then the path. */
static void render_unreadable(FILE *f, const char *dir, int err, int width) {
  char head[200], shown[600];
  if (err == ENOENT)
    snprintf(head, sizeof head, "gpurun-top  the job directory is gone: its files were removed");
  else if (err == 0)
    snprintf(head, sizeof head,
             "gpurun-top  no rank left: the job's files were removed or do not parse");
  else
    snprintf(head, sizeof head, "gpurun-top  cannot read the job directory: %s", strerror(err));
  gr__esc_term_str(shown, sizeof shown, dir);
  const char *lines[] = {head, shown, "still looking every interval; q quits"};
  for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
    fprintf(f, "%.*s\n", width, lines[i]);
}

static int run_terminal(gr__top_job *job, double interval) {
  struct termios saved, raw;
  if (tcgetattr(STDIN_FILENO, &saved) != 0) {
    fprintf(stderr, "gpurun-top: stdin is not a terminal (use --once)\n");
    return 2;
  }
  raw = saved;
  raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
  raw.c_cc[VMIN] = 0;
  raw.c_cc[VTIME] = 0;
  tcsetattr(STDIN_FILENO, TCSANOW, &raw);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL);
  sa.sa_handler = on_winch;
  sigaction(SIGWINCH, &sa, NULL);
  fputs("\033[?1049h\033[?25l", stdout); /* alternate screen, hide the cursor */
  int first = 0, quit = 0, load_err = 0;
  double next = 0;
  char *frame = NULL;
  size_t frame_len = 0;
  while (!quit && !stop_flag) {
    struct winsize ws;
    int rows = 24, cols = 80;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0) {
      rows = ws.ws_row;
      cols = ws.ws_col;
    }
    double now = gr__mono_now();
    if (now >= next) {
      load_err = gr__top_load(job) != 0 ? (errno ? errno : EIO) : 0;
      next = now + interval;
    }
    /* header, verdict (up to 3 lines), the late rank (up to 2), titles, scroll line */
    int body = rows - 6 - (job->late[0] ? 2 : 0);
    if (body < 1) body = 1;
    int total = gr__top_rows(job);
    if (first > total - body) first = total - body;
    if (first < 0) first = 0;
    FILE *m = open_memstream(&frame, &frame_len);
    if (!m) break;
    /* the directory held rank files when it was chosen: none now means they were removed */
    if (load_err || gr__top_nranks(job) == 0)
      render_unreadable(m, job->dir, load_err, cols > 1 ? cols - 1 : 1);
    else
      gr__top_render(m, job, first, body, cols > 1 ? cols - 1 : 1, interval);
    fclose(m);
    /* One write per frame: home, each line cleared to its end, the rest of the screen cleared. */
    fputs("\033[H", stdout);
    for (char *p = frame, *nl; p && *p; p = nl ? nl + 1 : NULL) {
      nl = strchr(p, '\n');
      fwrite(p, 1, nl ? (size_t)(nl - p) : strlen(p), stdout);
      fputs(nl && nl[1] ? "\033[K\r\n" : "\033[K", stdout);
      if (!nl) break;
    }
    fputs("\033[J", stdout);
    fflush(stdout);
    free(frame);
    frame = NULL;
    double wait = next - gr__mono_now();
    struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
    int pr = poll(&p, 1, wait > 0 ? (int)(wait * 1000) + 1 : 0);
    if (pr > 0) {
      int d = read_key(&quit);
      if (d == 1000 || d == -1000) d = d / 1000 * body;
      if (d == 1000000 || d == -1000000) d = d > 0 ? total : -total;
      first += d;
    }
    resized = 0;
  }
  fputs("\033[?25h\033[?1049l", stdout);
  fflush(stdout);
  tcsetattr(STDIN_FILENO, TCSANOW, &saved);
  return 0;
}

int main(int argc, char **argv) {
  double interval = 1.0, hang = 2.0;
  int once = 0, bench = 0, count = 0;
  const char *dir = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(a, "--once")) {
      once = 1;
    } else if (!strcmp(a, "--interval") || !strcmp(a, "--hang")) {
      double *dst = a[2] == 'i' ? &interval : &hang;
      if (!v || parse_seconds(v, a[2] == 'i' ? 0.05 : 0, dst)) {
        fprintf(stderr, "gpurun-top: %s needs seconds (%s), got '%s'\n", a,
                a[2] == 'i' ? ">= 0.05" : ">= 0", v ? v : "");
        return 2;
      }
      i++;
    } else if (!strcmp(a, "--count")) {
      if (gr__parse_int(v, 1, 100000, &count) != GR_OK) {
        fprintf(stderr, "gpurun-top: --count needs a frame count in [1, 100000]\n");
        return 2;
      }
      i++;
    } else if (!strcmp(a, "--bench")) {
      int n;
      if (gr__parse_int(v, 1, 100000, &n) != GR_OK) {
        fprintf(stderr, "gpurun-top: --bench needs a frame count in [1, 100000]\n");
        return 2;
      }
      bench = (int)n;
      i++;
    } else if (a[0] == '-' && a[1]) {
      fprintf(stderr, "gpurun-top: unknown option '%s' (see --help)\n", a);
      return 2;
    } else if (!dir) {
      dir = a;
    } else {
      fprintf(stderr, "gpurun-top: one directory only\n");
      return 2;
    }
  }
  if (!dir) dir = gr__param_str(GR_PARAM_MONITOR_DIR);
  if (!dir || !*dir) dir = "gpurun-monitor";
  static gr__top_job job;
  gr__top_job_init(&job);
  char err[1200];
  if (gr__top_find_job(dir, job.dir, sizeof job.dir, err, sizeof err) != 0) {
    fprintf(stderr, "gpurun-top: %s\n", err);
    return 1;
  }
  job.hang_s = hang;
  int rc = 0;
  if (bench) {
    FILE *null = fopen("/dev/null", "w");
    double best = INFINITY, sum = 0;
    for (int i = 0; i < bench && null; i++) {
      double t0 = gr__mono_now();
      gr__top_load(&job);
      gr__top_render(null, &job, 0, -1, 0, interval);
      fflush(null);
      double dt = gr__mono_now() - t0;
      sum += dt;
      if (dt < best) best = dt;
    }
    if (null) fclose(null);
    printf("gpurun-top: %d ranks, %d rows: refresh mean %.2f ms, best %.2f ms over %d frames\n",
           gr__top_nranks(&job), gr__top_rows(&job), 1e3 * sum / bench, 1e3 * best, bench);
  } else if (once || count || !isatty(STDOUT_FILENO) || !isatty(STDIN_FILENO)) {
    /* frames one after another, a blank line between, interval apart */
    for (int f = 0; f < (count ? count : 1) && !rc; f++) {
      if (f) {
        struct timespec ts = {(time_t)interval,
                              (long)((interval - (double)(time_t)interval) * 1e9)};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
        putchar('\n');
      }
      if (gr__top_load(&job) != 0) {
        char why[700];
        say_unreadable(why, sizeof why, job.dir, errno ? errno : EIO);
        fprintf(stderr, "gpurun-top: %s\n", why);
        rc = 1;
      } else {
        gr__top_render(stdout, &job, 0, -1, 0, interval);
        fflush(stdout);
      }
    }
  } else {
    rc = run_terminal(&job, interval);
  }
  gr__top_free(&job);
  return rc;
}
