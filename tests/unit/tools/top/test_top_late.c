/* gpurun-top's late line from the MPI layer's per-peer waits (the mpi_waited line): the parser
 * against hostile lines, and the analysis over a window of frames on job directories written
 * here, whose file times the test sets (the window is measured in them). Each case states the
 * expected answer from the figures it writes. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "gr_test_tmpdir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gr_top.h"

static char dir[256];

static int setup(void **state) {
  (void)state;
  return gr_test_tmpdir_make(dir, sizeof dir, "gr_test_top_late");
}

static int teardown(void **state) {
  (void)state;
  return gr_test_tmpdir_remove(dir);
}

/* live.<r> of a 3-rank job written at time t, with the MPI layer's lines (the same MPI time for
 * every rank: a halo exchange) and the given mpi_waited line (NULL: none). */
static void live(int r, int n, double t, const char *waited) {
  char path[512];
  snprintf(path, sizeof path, "%s/live.%d", dir, r);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fprintf(f,
          "gpurun-live 2\nrank %d\nsize %d\nhost fakehost\npid 999999\nstate running\n"
          "time %.3f\ninterval 0.25\nmpi_s 50.0\nmpi_coll_s 0.5\nmpi_inside_since 0\n"
          "comm world %d %d mpi 7 - 0 done 0 0 100 1.0 world -\n",
          r, n, t, r, n);
  if (waited) fprintf(f, "mpi_waited %s\n", waited);
  fclose(f);
}

static void load(gr__top_job *job) {
  snprintf(job->dir, sizeof job->dir, "%s", dir);
  job->hang_s = 1e9; /* no hang verdicts here: only the late line */
  assert_int_equal(gr__top_load(job), 0);
}

/* One frame of an n-rank job at time t: live.<r> with waited[r] for every rank (NULL: no
 * mpi_waited line), then a load. FRAME names the ranks' lines in order and counts them. */
static void frame(gr__top_job *job, double t, int n, const char *const waited[]) {
  for (int r = 0; r < n; r++)
    live(r, n, t, waited[r]);
  load(job);
}

#define FRAME(job, t, ...)                                                                         \
  frame((job), (t), (int)(sizeof((const char *const[]){__VA_ARGS__}) / sizeof(const char *)),      \
        (const char *const[]){__VA_ARGS__})

/* Removes live.0 .. live.<n-1>, so that the next job starts without a rank of the one before. */
static void unlink_live(int n) {
  char path[512];
  for (int r = 0; r < n; r++) {
    snprintf(path, sizeof path, "%s/live.%d", dir, r);
    unlink(path);
  }
}

static int parse(const char *text, int rank, gr__top_waited *w) {
  return gr__top_parse_waited(text, strlen(text), rank, w);
}

static void test_parse(void **state) {
  (void)state;
  gr__top_waited w;
  assert_int_equal(parse("gpurun-live 2\nrank 0\nmpi_waited 1:4.5,2:0.25\n", 0, &w), 0);
  assert_int_equal(w.n, 2);
  assert_int_equal(w.peer[0], 1);
  assert_true(w.s[0] == 4.5);
  assert_int_equal(w.peer[1], 2);
  assert_true(w.s[1] == 0.25);
  /* no line, an old file */
  assert_int_equal(parse("gpurun-live 1\nrank 0\nmpi_s 1\n", 0, &w), -1);
  assert_int_equal(w.n, 0);
  /* a line without a final newline, blanks around the token */
  assert_int_equal(parse("mpi_waited \t 3:1 \r", 0, &w), 0);
  assert_int_equal(w.n, 1);
  /* hostile lines: each counts as absent */
  static const char *const bad[] = {
      "mpi_waited\n",
      "mpi_waited \n",
      "mpi_waited 1:2 3:4\n",                             /* two tokens */
      "mpi_waited 1:2,\n",                                /* a trailing comma */
      "mpi_waited ,1:2\n",                                /* an empty item */
      "mpi_waited 1:2,,3:4\n",                            /* an empty item */
      "mpi_waited 0:2\n",                                 /* this rank itself */
      "mpi_waited 1:2,1:3\n",                             /* a rank twice */
      "mpi_waited -1:2\n",                                /* a negative rank */
      "mpi_waited 1048577:2\n",                           /* a rank past the bound */
      "mpi_waited 99999999999999999999999:2\n",           /* overflows */
      "mpi_waited 1:-2\n",                                /* negative seconds */
      "mpi_waited 1:nan\n",                               /* not finite */
      "mpi_waited 1:inf\n",                               /* not finite */
      "mpi_waited 1:1e12\n",                              /* past the bound */
      "mpi_waited 1:0x10\n",                              /* hex */
      "mpi_waited 1:\n",                                  /* no seconds */
      "mpi_waited :1\n",                                  /* no rank */
      "mpi_waited 1\n",                                   /* no colon */
      "mpi_waited 1:2:3\n",                               /* two colons */
      "mpi_waited 1:2,2:2,3:2,4:2,5:2,6:2,7:2,8:2,9:2\n", /* more than 8 items */
      "mpi_waited 1:1111111111111111111111111111111111111111111111111\n", /* too long */
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    w.n = 5;
    if (parse(bad[i], 0, &w) != -1 || w.n != 0) fail_msg("taken: %s", bad[i]);
  }
  /* a key that only starts like it is another key */
  assert_int_equal(parse("mpi_waited_x 1:2\n", 0, &w), -1);
  /* 8 items are the bound, and taken */
  assert_int_equal(parse("mpi_waited 1:8,2:7,3:6,4:5,5:4,6:3,7:2,8:1\n", 0, &w), 0);
  assert_int_equal(w.n, 8);
  /* a NUL or text past len is not read: the line ends at len */
  const char cut[] = "mpi_waited 1:2,3:4";
  assert_int_equal(gr__top_parse_waited(cut, 14, 0, &w), 0); /* "mpi_waited 1:2" */
  assert_int_equal(w.n, 1);
}

/* A halo exchange of 3 ranks where rank 1 is slow from time 100 on: before, everyone waits a
 * little for everyone (no verdict); in the 10 s after, ranks 0 and 2 wait 4 s each for rank 1,
 * rank 1 waits 0.2 s for them. */
static void test_window(void **state) {
  (void)state;
  static gr__top_job job;
  gr__top_job_init(&job);
  double t = 1.0e9;
  /* frame 1 (the start): 100 s of a balanced exchange, 3 s waited on each peer */
  FRAME(&job, t, "1:3,2:3", "0:3,2:3", "0:3,1:3");
  assert_string_equal(job.late, ""); /* since the start: balanced */
  /* frame 2, 10 s later: rank 1 slow */
  FRAME(&job, t + 10, "1:7,2:3.1", "0:3.1,2:3.1", "1:7,0:3.1");
  assert_string_equal(job.late, "late: rank 1: ranks 0,2 waited 8.0 s for it in point-to-point "
                                "in the last 10 s");
  /* the frame's text carries it, within 79 columns */
  char *text = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&text, &len);
  gr__top_render(m, &job, 0, -1, 0, 1.0);
  fclose(m);
  assert_non_null(strstr(text, "late: rank 1: ranks 0,2 waited 8.0 s"));
  for (const char *l = text, *nl; l && *l; l = nl ? nl + 1 : NULL) {
    nl = strchr(l, '\n');
    assert_true((nl ? (size_t)(nl - l) : strlen(l)) <= 79);
  }
  free(text);
  /* frames 3 and 4: balanced again; once the slow spell is older than the window, no verdict,
   * though since the start rank 1 was waited for most */
  FRAME(&job, t + 20, "1:8,2:4", "0:4,2:4", "1:8,0:4");
  assert_string_equal(job.late, "");
  FRAME(&job, t + 30, "1:9,2:5", "0:5,2:5", "1:9,0:5");
  assert_string_equal(job.late, "");
  /* frame 5: rank 2 slow now, and rank 1 stopped (its file does not change): the window names
   * rank 2, waited for by rank 0 (rank 1's figures are as in the frame compared with: no news,
   * left out) */
  live(0, 3, t + 40, "2:9,1:9.2");
  live(2, 3, t + 40, "1:9.1,0:5.1");
  load(&job);
  assert_string_equal(job.late, "late: rank 2: rank 0 waited 4.0 s for it in point-to-point "
                                "in the last 10 s");
  gr__top_free(&job);
}

/* Frames closer than a tenth of the window are not kept, and the compared frame is the newest
 * one at least a window old: a slow spell 12 s ago is out of the window after frames every 2 s. */
static void test_window_slides(void **state) {
  (void)state;
  static gr__top_job job;
  gr__top_job_init(&job);
  double t = 2.0e9;
  FRAME(&job, t, "1:1,2:1", "0:1,2:1", "0:1,1:1");
  /* 2 s later: rank 1 was slow (3 s waited on it by each) */
  FRAME(&job, t + 2, "1:4,2:1.1", "0:1.1,2:1.1", "1:4,0:1.1");
  assert_string_equal(job.late, "late: rank 1: ranks 0,2 waited 6.0 s for it in point-to-point "
                                "in the last 2 s");
  /* frames 0.5 s apart are not kept; the verdict still compares with the first frame */
  FRAME(&job, t + 2.5, "1:4.1,2:1.2", "0:1.2,2:1.2", "1:4.1,0:1.2");
  assert_int_equal(job.nhist, 2);
  /* balanced from then on, every 2 s up to t + 14: the spell (t to t + 2) leaves the window */
  for (int k = 2; k <= 7; k++) {
    char a[64], b[64], c[64];
    double x = 4 + 0.2 * k, y = 1 + 0.2 * k;
    snprintf(a, sizeof a, "1:%.1f,2:%.1f", x, y);
    snprintf(b, sizeof b, "0:%.1f,2:%.1f", y, y);
    snprintf(c, sizeof c, "1:%.1f,0:%.1f", x, y);
    FRAME(&job, t + 2 * k, a, b, c);
    if (k >= 6) assert_string_equal(job.late, ""); /* base at t + 2 or later */
    assert_true(job.nhist <= GR__TOP_LATE_HIST);
  }
  /* time going back (another job's files): the history starts over, since the start */
  FRAME(&job, t - 100, "1:5,2:0.1", "0:0.1,2:0.1", "1:5,0:0.1");
  assert_int_equal(job.nhist, 1);
  assert_string_equal(job.late, "late: rank 1: ranks 0,2 waited 10.0 s for it in point-to-point "
                                "since the start");
  gr__top_free(&job);
}

/* A full list of 8 that did not name a peer before bounds its earlier figure by the smallest
 * listed; a chain names the rank it ends at; two ranks waited for alike are not named, nor one
 * waited for less than a tenth of the window, nor one that waits for the others about as long. */
static void test_bounds_and_fallback(void **state) {
  (void)state;
  static gr__top_job job;
  gr__top_job_init(&job);
  double t = 3.0e9;
  /* 10 ranks; rank 0 lists 8 peers (1..8) at 1 s each, then 9 appears with 5 s: at least 4 s
   * more on 9 in the window (it was at most 1 s before) */
  const char *w10[10] = {"1:1,2:1,3:1,4:1,5:1,6:1,7:1,8:1"}; /* ranks 1..9: no line */
  frame(&job, t, 10, w10);
  assert_string_equal(job.late, "");
  w10[0] = "9:5,1:1,2:1,3:1,4:1,5:1,6:1,7:1";
  frame(&job, t + 10, 10, w10);
  assert_string_equal(job.late, "late: rank 9: rank 0 waited 4.0 s for it in point-to-point "
                                "in the last 10 s");
  gr__top_free(&job);
  unlink_live(10);
  /* a chain (2 waits for 0, which waits for 1): the rank it ends at is named, with whoever
   * waited for it directly; then less than a tenth of the window: none; then 1 again */
  gr__top_job_init(&job);
  FRAME(&job, t, "1:0", "0:0", "0:0");
  FRAME(&job, t + 10, "1:3", "0:0.1", "0:2.5");
  assert_string_equal(job.late, "late: rank 1: rank 0 waited 3.0 s for it in point-to-point "
                                "in the last 10 s");
  FRAME(&job, t + 20, "1:3.9", "0:0.1", "0:2.5");
  assert_string_equal(job.late, "");
  FRAME(&job, t + 30, "1:4.5", "0:0.1", "0:2.5,1:0.5");
  assert_string_equal(job.late, "late: rank 1: ranks 0,2 waited 1.1 s for it in point-to-point "
                                "in the last 10 s");
  gr__top_free(&job);
  unlink_live(3);
  /* two ranks waited for alike (0 for 1, 2 for 3): none; a rank the others wait for that waits
   * as long for them (its balance under a third of their waits): none */
  gr__top_job_init(&job);
  FRAME(&job, t, "1:0", "0:0", "1:0", "0:0");
  FRAME(&job, t + 10, "1:3", "0:0.1", "3:3", "0:0.1");
  assert_string_equal(job.late, "");
  FRAME(&job, t + 20, "1:6", "0:4.1,2:0.1", "1:3", "0:0.1");
  assert_string_equal(job.late, "");
  gr__top_free(&job);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse),
      cmocka_unit_test_setup_teardown(test_window, setup, teardown),
      cmocka_unit_test_setup_teardown(test_window_slides, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bounds_and_fallback, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
