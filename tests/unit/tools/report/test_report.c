/* gpurun-report's pieces on fixture jobs whose answers were worked out by hand, plus the round trip
 * from the supervisor's CSV into the report. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <errno.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "gr_supervise.h"
#include "gr_json_read.h"
#include "gr_report.h"

#define FIX GR_REPORT_FIXTURES

static const gr__rpt_series *find(const gr__rpt_job *j, int local_rank, const char *gpu) {
  for (int i = 0; i < gr__rpt_nseries(j); i++)
    if (GR__RPT_SERIES(j, i).local_rank == local_rank && !strcmp(GR__RPT_SERIES(j, i).gpu, gpu))
      return &GR__RPT_SERIES(j, i);
  return NULL;
}

static void test_integrate(void **state) {
  (void)state;
  double t[] = {0, 1, 3, 4};
  double y[] = {10, 20, NAN, 40};
  /* 0..1: (10+20)/2 = 15; the NAN point is skipped: 1..4 joined directly: (20+40)/2*3 = 90. */
  assert_float_equal(gr__rpt_integrate(t, y, 4), 105.0, 1e-9);
  assert_float_equal(gr__rpt_integrate(t, y, 1), 0.0, 1e-12);
}

static void test_gpu_job(void **state) {
  (void)state;
  gr__rpt_job j;
  assert_int_equal(gr__rpt_load(FIX "/gpu_job", &j), GR_OK);
  gr__rpt_summarize(&j);
  assert_int_equal(gr__rpt_nseries(&j), 2);
  const gr__rpt_series *a = find(&j, 0, "0000:17:00.0"), *b = find(&j, 1, "0000:65:00.0");
  assert_non_null(a);
  assert_non_null(b);
  assert_int_equal(a->n, 4);
  assert_int_equal(b->n, 5); /* the cut sixth line is ignored */
  /* Rank 0 by hand: power 100,200,200 at t=0,1,2 (last empty): (100+200)/2 + (200+200)/2 = 350 J.
   */
  assert_float_equal(a->energy_j, 350.0, 1e-9);
  assert_float_equal(a->util_mean, (50 + 100 + 0 + 10) / 4.0, 1e-9);
  assert_float_equal(a->util_max, 100.0, 1e-9);
  assert_float_equal(a->mem_peak, 3000.0, 1e-9);
  assert_float_equal(a->temp_max, 70.0, 1e-9);
  assert_true(a->throttle_any == 0x4);
  assert_float_equal(a->ecc_max, 1.0, 1e-9);
  assert_float_equal(a->cpu_mean, 40.0, 1e-9);
  assert_float_equal(a->rss_peak, 600.0, 1e-9);
  /* Rank 1: 300 W for 4 s = 1200 J; the cut line's 900 W and 9999 MiB must not count. */
  assert_float_equal(b->energy_j, 1200.0, 1e-9);
  assert_float_equal(b->mem_peak, 4000.0, 1e-9);
  assert_float_equal(b->temp_max, 69.0, 1e-9);
  /* Counters: rank 0 waited 2.0 + 0.5 s, rank 1 0.25 s: rank 1 is the one the others wait for. */
  const gr__rpt_counters *ca = gr__rpt_counters_for(&j, a), *cb = gr__rpt_counters_for(&j, b);
  assert_non_null(ca);
  assert_non_null(cb);
  assert_float_equal(ca->coll_wait_s, 2.5, 1e-9);
  assert_float_equal(ca->coll_time_s, 3.0, 1e-9);
  assert_float_equal(ca->coll_bytes, 4800, 1e-9);
  assert_float_equal(ca->pool_steals, 12, 1e-9);
  assert_float_equal(cb->coll_wait_s, 0.25, 1e-9);
  assert_true(j.slowest >= 0);
  assert_int_equal(GR__RPT_SERIES(&j, j.slowest).rank, 1);
  assert_float_equal(j.t0, 1000.0, 1e-9);
  assert_float_equal(j.t1, 1004.5, 1e-9);
  gr__rpt_free(&j);
}

static void test_cpu_job(void **state) {
  (void)state;
  gr__rpt_job j;
  assert_int_equal(gr__rpt_load(FIX "/cpu_job", &j), GR_OK);
  gr__rpt_summarize(&j);
  assert_int_equal(gr__rpt_nseries(&j), 2);
  const gr__rpt_series *a = find(&j, 0, "-"), *b = find(&j, 1, "-");
  assert_non_null(a);
  assert_non_null(b);
  /* A dotted host name survives the <node>.<local_rank>.csv split. */
  assert_string_equal(a->node, "node-a.example.org");
  assert_float_equal(a->cpu_mean, 50.0, 1e-9); /* first sample has no CPU figure */
  assert_float_equal(a->rss_peak, 300.0, 1e-9);
  assert_true(isnan(a->energy_j));
  assert_true(isnan(a->util_mean));
  /* No counters: the rank that ran longest (3 s against 1 s) is flagged. */
  assert_int_equal(GR__RPT_SERIES(&j, j.slowest).rank, 1);

  /* The JSON the report writes parses and carries the same figures. */
  char path[] = "/tmp/gr_report_json_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  assert_int_equal(gr__rpt_write_json(&j, path, NULL, NULL, 0), GR_OK);
  gr__rpt_json *doc = gr__rpt_json_parse_file(path, NULL);
  assert_non_null(doc);
  const gr__rpt_json *series = gr__rpt_json_get(doc, "series");
  assert_non_null(series);
  assert_float_equal(gr__rpt_json_num(series->child, "rss_peak_mib", -1), 300.0, 1e-9);
  assert_int_equal(gr__rpt_json_get(series->child, "energy_j")->type, GR__RPT_JSON_NULL);
  assert_float_equal(gr__rpt_json_num(gr__rpt_json_get(doc, "slowest"), "rank", -1), 1, 0);
  gr__rpt_json_free(doc);
  unlink(path);
  gr__rpt_free(&j);
}

static int has_rank(const gr__rpt_json *arr, int r) {
  for (const gr__rpt_json *c = arr ? arr->child : NULL; c; c = c->next)
    if (c->num == r) return 1;
  return 0;
}

static int count(const gr__rpt_json *arr) {
  int n = 0;
  for (const gr__rpt_json *c = arr ? arr->child : NULL; c; c = c->next)
    n++;
  return n;
}

static void test_flight(void **state) {
  (void)state;
  char *json = NULL;
  FILE *out = tmpfile();
  {
    int nd = -1;
    assert_int_equal(gr__rpt_flight(FIX "/hang_job", out, &json, NULL, &nd), GR_OK);
    assert_int_equal(nd, 4);
  }
  assert_non_null(json);
  gr__rpt_json *doc = gr__rpt_json_parse(json, NULL);
  assert_non_null(doc);
  int seen = 0;
  for (const gr__rpt_json *f = doc->child; f; f = f->next) {
    const char *comm = gr__rpt_json_str(f, "comm");
    if (!strcmp(comm, "world")) {
      seen++;
      assert_float_equal(gr__rpt_json_num(f, "seq", -1), 17, 0);
      assert_string_equal(gr__rpt_json_str(f, "op"), "allreduce");
      assert_int_equal(count(gr__rpt_json_get(f, "waiting")), 3);
      assert_int_equal(count(gr__rpt_json_get(f, "never_entered")), 1);
      assert_true(has_rank(gr__rpt_json_get(f, "never_entered"), 3));
      assert_int_equal(count(gr__rpt_json_get(f, "no_dump")), 1);
      assert_true(has_rank(gr__rpt_json_get(f, "no_dump"), 4));
    } else if (!strcmp(comm, "split-1")) {
      seen++;
      assert_float_equal(gr__rpt_json_num(f, "seq", -1), 5, 0);
      assert_string_equal(gr__rpt_json_str(f, "op"), "broadcast");
      assert_int_equal(count(gr__rpt_json_get(f, "waiting")), 1);
      assert_true(has_rank(gr__rpt_json_get(f, "waiting"), 0));
      assert_int_equal(count(gr__rpt_json_get(f, "never_entered")), 1);
      assert_true(has_rank(gr__rpt_json_get(f, "never_entered"), 2));
    }
  }
  assert_int_equal(seen, 2);
  gr__rpt_json_free(doc);
  free(json);
  /* The sentence an operator reads names the missing rank. */
  char text[4096];
  rewind(out);
  size_t n = fread(text, 1, sizeof text - 1, out);
  text[n] = '\0';
  fclose(out);
  assert_non_null(strstr(text, "NEVER ENTERED by rank(s) 3"));
  assert_non_null(strstr(text, "no dump from rank(s) 4"));
  /* No dumps: nothing to say. */
  {
    int nd = -1;
    assert_int_equal(gr__rpt_flight(FIX "/gpu_job", stdout, &json, NULL, &nd), GR_OK);
    assert_int_equal(nd, 0);
  }
  assert_null(json);
}

/* The recorder marks the call it gave up on "timeout" before dumping: still the call it waited in.
 */
static void test_flight_timeout_state(void **state) {
  (void)state;
  char *json = NULL;
  FILE *out = tmpfile();
  {
    int nd = -1;
    assert_int_equal(gr__rpt_flight(FIX "/timeout_job", out, &json, NULL, &nd), GR_OK);
    assert_int_equal(nd, 2);
  }
  fclose(out);
  gr__rpt_json *doc = gr__rpt_json_parse(json, NULL);
  assert_non_null(doc);
  const gr__rpt_json *f = doc->child;
  assert_non_null(f);
  assert_string_equal(gr__rpt_json_str(f, "comm"), "world");
  assert_string_equal(gr__rpt_json_str(f, "op"), "reduce_scatter");
  assert_float_equal(gr__rpt_json_num(f, "seq", -1), 3, 0);
  assert_int_equal(count(gr__rpt_json_get(f, "waiting")), 1);
  assert_true(has_rank(gr__rpt_json_get(f, "waiting"), 0));
  assert_int_equal(count(gr__rpt_json_get(f, "never_entered")), 1);
  assert_true(has_rank(gr__rpt_json_get(f, "never_entered"), 1));
  assert_int_equal(count(gr__rpt_json_get(f, "no_dump")), 0);
  assert_null(f->next);
  gr__rpt_json_free(doc);
  free(json);
}

static void test_json_reader(void **state) {
  (void)state;
  gr__rpt_json *v = gr__rpt_json_parse(
      " {\"a\": [1, 2.5e1, -3], \"b\": \"x\\\"y\\u0041\", \"c\": null, \"d\": true} ", NULL);
  assert_non_null(v);
  const gr__rpt_json *a = gr__rpt_json_get(v, "a");
  assert_int_equal(count(a), 3);
  assert_float_equal(a->child->next->num, 25.0, 0);
  assert_string_equal(gr__rpt_json_str(v, "b"), "x\"yA");
  assert_int_equal(gr__rpt_json_get(v, "c")->type, GR__RPT_JSON_NULL);
  assert_float_equal(gr__rpt_json_num(v, "d", 0), 1, 0);
  gr__rpt_json_free(v);
  size_t at = 0;
  assert_null(gr__rpt_json_parse("{\"a\": [1, 2", &at));
  assert_null(gr__rpt_json_parse("{\"a\": 1} x", &at));
  assert_null(gr__rpt_json_parse("", &at));
}

/* The supervisor writes, the report reads: the column contract holds end to end. */
static void test_supervisor_csv_round_trip(void **state) {
  (void)state;
  char dir[] = "/tmp/gr_report_rt_XXXXXX";
  assert_non_null(mkdtemp(dir));
  setenv("GPURUN_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
  gr_supervise_opts o;
  gr__supervise_opts_init(&o);
  o.monitor_interval_s = 0.05;
  o.monitor_dir = dir;
  o.job_id = "rt";
  o.node_name = "n9";
  o.local_rank = 3;
  o.rank = 7;
  o.gpus_pci = "";
  char *argv[] = {"sh", "-c", "sleep 0.25", NULL};
  /* gr__supervise becomes the program (it keeps the caller's pid) and leaves the supervisor
   * beside it: a child of this test runs it, and this test, their subreaper, waits for both. */
  assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  pid_t h = fork();
  assert_true(h >= 0);
  if (h == 0) {
    int code = -1;
    _exit(gr__supervise(argv, &o, &code) == GR_OK ? code : 250);
  }
  int st;
  assert_int_equal(waitpid(h, &st, 0), h);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 0);
  while (waitpid(-1, &st, 0) > 0) { /* the supervisor, once it wrote the last sample */
  }
  assert_int_equal(errno, ECHILD);
  char job[300];
  snprintf(job, sizeof job, "%s/rt", dir);
  gr__rpt_job j;
  assert_int_equal(gr__rpt_load(job, &j), GR_OK);
  gr__rpt_summarize(&j);
  assert_int_equal(gr__rpt_nseries(&j), 1);
  assert_string_equal(GR__RPT_SERIES(&j, 0).node, "n9");
  assert_int_equal(GR__RPT_SERIES(&j, 0).local_rank, 3);
  assert_int_equal(GR__RPT_SERIES(&j, 0).rank, 7);
  assert_string_equal(GR__RPT_SERIES(&j, 0).gpu, "-");
  assert_true(GR__RPT_SERIES(&j, 0).n >= 2);
  assert_true(GR__RPT_SERIES(&j, 0).rss_peak > 0);
  gr__rpt_free(&j);
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
}

/* Writes mpistats.<rank>.json for one rank of a 3-rank world into dir. */
static void write_mpistats(const char *dir, int rank, const char *waited_on, const char *durs,
                           double mpi_s) {
  char path[400];
  snprintf(path, sizeof path, "%s/mpistats.%d.json", dir, rank);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fprintf(f,
          "{\"rank\": %d, \"size\": 3, \"node\": \"n\", \"reason\": \"finalize\", \"comms\": "
          "[{\"id\": \"w\", \"name\": \"world\", \"rank\": %d, \"size\": 3, \"calls\": 100, "
          "\"mpi_s\": %g, \"coll_s\": 1, \"first\": 0, \"durs\": [%s], \"waited_on\": [%s]}]}\n",
          rank, rank, mpi_s, durs, waited_on);
  assert_int_equal(fclose(f), 0);
}

/* The layer's statistics decide the slowest rank: ranks 0 and 2 were blocked 4 s on rank 1 in
 * sends and receives, and rank 1 arrived last at each of the 4 collectives (it spent the least
 * time inside them); with every rank blocked alike, no rank is flagged, the CSVs' guess neither. */
static void test_arrivals_name_the_waited_for(void **state) {
  (void)state;
  char dir[] = "/tmp/gr_report_arr_XXXXXX";
  assert_non_null(mkdtemp(dir));
  write_mpistats(dir, 0, "0, 4, 0.1", "0.5, 0.5, 0.5, 0.5", 6);
  write_mpistats(dir, 1, "0.1, 0, 0.1", "0.01, 0.01, 0.01, 0.01", 1);
  write_mpistats(dir, 2, "0.1, 4, 0", "0.4, 0.4, 0.4, 0.4", 6);
  gr__rpt_arrivals *a = NULL;
  assert_int_equal(gr__rpt_arrivals_load(dir, &a), GR_OK);
  int r = -2;
  assert_int_equal(gr__rpt_arrivals_world(a, &r, NULL), 1);
  assert_int_equal(r, 1);
  char *text = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&text, &len);
  assert_non_null(out);
  gr__rpt_arrivals_print(a, NULL, out);
  assert_int_equal(fclose(out), 0);
  assert_non_null(strstr(text, "4 blocking collectives joined"));
  assert_non_null(strstr(text, "waited for: rank 1, the others blocked on it 8.000 s"));
  assert_non_null(strstr(text, "last to arrive: rank 1, in 100% of the collectives"));
  free(text);
  gr__rpt_arrivals_free(a);

  /* a job whose CSVs flagged rank 2 (it ran longest): the layer's verdict replaces that */
  gr__rpt_job j;
  gr__rpt_job_init(&j);
  gr__rpt_series one;
  memset(&one, 0, sizeof one);
  one.rank = 1;
  assert_int_equal(gr__array_push(&j.s, &one), GR_OK);
  j.slowest = 0;
  j.slowest_rank = 2;
  gr__rpt_set_slowest_from_mpi(&j, 1, 1);
  assert_int_equal(j.slowest, 0);
  assert_int_equal(j.slowest_rank, 1);
  gr__rpt_set_slowest_from_mpi(&j, -1, -1);
  assert_int_equal(j.slowest, -1);
  assert_non_null(strstr(j.slowest_why, "no rank stands out"));
  gr__array_free(&j.s);

  write_mpistats(dir, 0, "0, 1, 1", "0.5, 0.5", 6);
  write_mpistats(dir, 1, "1, 0, 1", "0.5, 0.5", 6);
  write_mpistats(dir, 2, "1, 1, 0", "0.5, 0.5", 6);
  assert_int_equal(gr__rpt_arrivals_load(dir, &a), GR_OK);
  assert_int_equal(gr__rpt_arrivals_world(a, &r, NULL), 1);
  assert_int_equal(r, -1);
  gr__rpt_arrivals_free(a);
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
  /* no statistics: nothing to say */
  assert_int_equal(gr__rpt_arrivals_load(FIX "/gpu_job", &a), GR_OK);
  assert_int_equal(gr__rpt_arrivals_world(a, &r, NULL), 0);
  gr__rpt_arrivals_free(a);
}

/* What the monitor saw on the rank the others waited for: rank 1 ran on a CPU 50% of the wall
 * time against 95% for the others and was stopped in 4 of 10 samples; rank 2's cores were busy
 * while it ran 40%: shared. */
static void test_why(void **state) {
  (void)state;
  gr__rpt_job j;
  gr__rpt_job_init(&j);
  double on[] = {0.95, 0.5, 0.4, 0.95};
  for (int r = 0; r < 4; r++) {
    gr__rpt_series s;
    memset(&s, 0, sizeof s);
    snprintf(s.node, sizeof s.node, "n");
    snprintf(s.gpu, sizeof s.gpu, "-");
    s.rank = s.local_rank = r;
    s.n = 10;
    s.cpu_t0 = 100, s.cpu_t1 = 110, s.cpu_s0 = 1, s.cpu_time_s = 1 + 10 * on[r];
    s.nstates = 10;
    s.nstopped = r == 1 ? 4 : 0;
    s.cpu_mean = r == 2 ? 97 : 60;
    s.others_sm_mean = NAN;
    assert_int_equal(gr__array_push(&j.s, &s), GR_OK);
  }
  char *text = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&text, &len);
  assert_non_null(out);
  gr__rpt_print_why(&j, 1, out);
  gr__rpt_print_why(&j, 2, out);
  gr__rpt_print_why(&j, 7, out);  /* no samples: nothing */
  gr__rpt_print_why(&j, -1, out); /* no rank named: the stopped ones alone */
  assert_int_equal(fclose(out), 0);
  assert_string_equal(text,
                      "  on rank 1: its program ran on a CPU 50% of the wall time (the others: a "
                      "median of 95%); stopped in 4 of 10 samples\n"
                      "  on rank 2: its program ran on a CPU 40% of the wall time (the others: a "
                      "median of 95%); its cores were busy 97% of the time: shared with other "
                      "processes\n"
                      "  the monitor also saw: rank 1 stopped in 4 of 10 samples\n"
                      "  the monitor saw: rank 1 stopped in 4 of 10 samples\n");
  free(text);

  /* the monitor's suspect, and the slowest rank when the MPI calls single out none */
  char ev[160];
  assert_int_equal(gr__rpt_monitor_suspect(&j, ev, sizeof ev), 1);
  assert_string_equal(ev, "stopped in 4 of 10 samples");
  gr__rpt_set_slowest_from_mpi(&j, -1, 1);
  assert_int_equal(j.slowest_rank, 1);
  assert_string_equal(j.slowest_why,
                      "the others waited for it most in MPI, and the monitor saw it stopped in 4 "
                      "of 10 samples");
  gr__rpt_set_slowest_from_mpi(&j, -1, 3);
  assert_int_equal(j.slowest_rank, 1);
  assert_non_null(strstr(j.slowest_why, "; the MPI calls single out no rank"));
  gr__rpt_set_slowest_from_mpi(&j, 2, 1); /* the MPI verdict wins where it names a rank */
  assert_int_equal(j.slowest_rank, 2);
  /* nobody stopped: the lowest share of CPU time, at two thirds of the others' median or less */
  for (int r = 0; r < 4; r++)
    GR__RPT_SERIES(&j, r).nstopped = 0;
  assert_int_equal(gr__rpt_monitor_suspect(&j, ev, sizeof ev), 2);
  assert_string_equal(ev, "on a CPU 40% of the wall time against a median of 95%");
  GR__RPT_SERIES(&j, 2).cpu_time_s = 1 + 10 * 0.9; /* 90%: no suspect by itself */
  GR__RPT_SERIES(&j, 1).cpu_time_s = 1 + 10 * 0.95;
  assert_int_equal(gr__rpt_monitor_suspect(&j, ev, sizeof ev), -1);
  double mine, med;
  assert_int_equal(gr__rpt_monitor_least_cpu(&j, &mine, &med), 2);
  assert_float_equal(mine, 0.9, 1e-9);
  assert_float_equal(med, 0.95, 1e-9);
  /* the rank waited for most in MPI and the least on a CPU: two weak signals agreeing */
  gr__rpt_set_slowest_from_mpi(&j, -1, 2);
  assert_int_equal(j.slowest_rank, 2);
  assert_string_equal(j.slowest_why, "the others waited for it most in MPI, and its program ran on "
                                     "a CPU 90% of the wall time against a median of 95% for the "
                                     "others");
  gr__rpt_set_slowest_from_mpi(&j, -1, 1); /* they disagree: none */
  assert_int_equal(j.slowest, -1);
  gr__array_free(&j.s);
}

/* Steal in the monitor's CSVs (report_fixtures/steal_job, written as the supervisor writes them):
 * rank 2's cores lost 23% of their time to the hypervisor against 1.5% and 0.5% on ranks 0 and 1,
 * and its program ran on a CPU 60% of the wall time against 95%; one of its rows says 250%, which
 * is no share and is taken as missing; rank 3's file is from before the column: unknown, left out
 * of the others' median. */
static char *why_text(const gr__rpt_job *j, int rank) {
  char *text = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&text, &len);
  assert_non_null(out);
  gr__rpt_print_why(j, rank, out);
  assert_int_equal(fclose(out), 0);
  return text;
}

static void test_why_steal(void **state) {
  (void)state;
  gr__rpt_job j;
  assert_int_equal(gr__rpt_load(FIX "/steal_job", &j), GR_OK);
  gr__rpt_summarize(&j);
  assert_int_equal(gr__rpt_nseries(&j), 4);
  gr__rpt_series *r0 = &GR__RPT_SERIES(&j, 0), *r2 = &GR__RPT_SERIES(&j, 2),
                 *r3 = &GR__RPT_SERIES(&j, 3);
  assert_int_equal(r2->rank, 2);
  assert_float_equal(r0->steal_mean, 1.5, 1e-9);
  assert_float_equal(r2->steal_mean, 23.0, 1e-9); /* the 250 left out: 207 / 9 */
  assert_float_equal(r2->steal_max, 26.0, 1e-9);
  assert_true(isnan(r3->steal_mean));
  char *text = why_text(&j, 2);
  assert_string_equal(text,
                      "  on rank 2: its program ran on a CPU 60% of the wall time (the others: "
                      "a median of 95%); its cores lost 23% of their time to the hypervisor "
                      "(steal; the others: a median of 1%)\n");
  free(text);
  text = why_text(&j, 0); /* 1.5%: nothing to say about steal */
  assert_string_equal(text,
                      "  on rank 0: its program ran on a CPU 95% of the wall time (the others: "
                      "a median of 95%)\n");
  free(text);

  /* cpu_util counts stolen time as busy: 100% busy with 15% stolen is 85% busy besides steal,
   * and other processes had the rest of the cores */
  r2->cpu_mean = 100;
  r2->steal_mean = 15;
  text = why_text(&j, 2);
  assert_non_null(strstr(text, "; its cores were busy 85% of the time besides steal: shared with "
                               "other processes; its cores lost 15% of their time to the "
                               "hypervisor (steal; the others: a median of 1%)\n"));
  free(text);
  /* the whole node stolen alike (20% on the others too): it explains no one rank */
  r2->cpu_mean = 95;
  r2->steal_mean = 23;
  r0->steal_mean = GR__RPT_SERIES(&j, 1).steal_mean = 20;
  text = why_text(&j, 2);
  assert_null(strstr(text, "steal"));
  free(text);
  /* below 5% is not worth a word, however far above the others */
  r0->steal_mean = GR__RPT_SERIES(&j, 1).steal_mean = 0;
  r2->steal_mean = 4.9;
  text = why_text(&j, 2);
  assert_null(strstr(text, "hypervisor"));
  /* (its cores' 95% busy less 4.9% stolen leave 90% to other processes) */
  assert_non_null(strstr(text, "its cores were busy 90% of the time besides steal"));
  free(text);
  /* no other rank has the column: said without a median */
  r0->steal_mean = GR__RPT_SERIES(&j, 1).steal_mean = NAN;
  r2->steal_mean = 23;
  text = why_text(&j, 2);
  assert_non_null(strstr(text, "; its cores lost 23% of their time to the hypervisor (steal)\n"));
  free(text);
  gr__rpt_free(&j);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_integrate),
      cmocka_unit_test(test_gpu_job),
      cmocka_unit_test(test_cpu_job),
      cmocka_unit_test(test_flight),
      cmocka_unit_test(test_flight_timeout_state),
      cmocka_unit_test(test_json_reader),
      cmocka_unit_test(test_supervisor_csv_round_trip),
      cmocka_unit_test(test_arrivals_name_the_waited_for),
      cmocka_unit_test(test_why),
      cmocka_unit_test(test_why_steal),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
