/* gpurun-report and gpurun-top on one hang each, written as the flight dumps the report reads and
 * as the live files gpurun-top reads: both name the same ranks, by the rules of the wait-for
 * analysis they share (tools/waitfor). The two rules they used to disagree on:
 *   - a world collective waits for the members behind it and for the ranks that left no data,
 *     together (the report named the ranks without a dump only when no member with one was
 *     behind);
 *   - ranks that wait for each other are named as a deadlock (gpurun-top found "no rank behind"
 *     when sends and receives closed a cycle). */
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

#include "gr_json_read.h"
#include "gr_report.h"
#include "gr_top.h"

static char dir[256];

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void put_file(const char *name, const char *text) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

/* Rank r's call on the world of n, as a flight dump and as a live file: its last collective done
 * (number done_seq), then, when op is not NULL, op running for 5 s (a collective at run_seq, or a
 * send/receive from peer when peer >= 0). */
static void rank_files(int r, int n, int done_seq, const char *op, int run_seq, int peer) {
  double t = now_s();
  char text[2048], name[64], running[512] = "";
  if (op && peer >= 0)
    snprintf(running, sizeof running,
             ", {\"seq\": %d, \"cseq\": null, \"op\": \"%s\", \"count\": 1, \"dtype\": \"int32\", "
             "\"root\": -1, \"peer\": %d, \"start\": %.3f, \"end\": null, \"state\": \"timeout\"}",
             done_seq + 1, op, peer, t - 5);
  else if (op)
    snprintf(running, sizeof running,
             ", {\"seq\": %d, \"cseq\": %d, \"op\": \"%s\", \"count\": 1, \"dtype\": \"int32\", "
             "\"root\": -1, \"peer\": -1, \"start\": %.3f, \"end\": null, \"state\": \"timeout\"}",
             run_seq, run_seq, op, t - 5);
  snprintf(text, sizeof text,
           "{\"rank\": %d, \"size\": %d, \"node\": \"n0\", \"reason\": \"timeout\", \"comms\": [\n"
           " {\"id\": \"0.1\", \"name\": \"world\", \"rank\": %d, \"size\": %d, \"backend\": "
           "\"mpi\", \"calls\": [{\"seq\": %d, \"cseq\": %d, \"op\": \"allreduce\", \"count\": 1, "
           "\"dtype\": \"int32\", \"root\": -1, \"peer\": -1, \"start\": %.3f, \"end\": %.3f, "
           "\"state\": \"done\"}%s]}]}\n",
           r, n, r, n, done_seq, done_seq, t - 9, t - 8.9, running);
  snprintf(name, sizeof name, "flight.%d.json", r);
  put_file(name, text);

  char me[256] = "", line[512], waits[32] = "-";
  gethostname(me, sizeof me - 1);
  if (op && peer >= 0) snprintf(waits, sizeof waits, "r%d:0", peer);
  if (op)
    snprintf(line, sizeof line, "comm 0.1 %d %d mpi %d %s 1 running %.6f 0 %d 0.5 world %s\n", r, n,
             peer >= 0 ? done_seq + 1 : run_seq, op, t - 5, done_seq + 1, waits);
  else
    snprintf(line, sizeof line, "comm 0.1 %d %d mpi %d allreduce 1 done %.6f %.6f %d 0.5 world -\n",
             r, n, done_seq, t - 9, t - 8.9, done_seq);
  snprintf(text, sizeof text,
           "gpurun-live 2\nrank %d\nsize %d\nhost %s\npid %ld\nstate running\ntime %.3f\n"
           "beat 40\ninterval 0.25\n%s",
           r, n, me, (long)getpid(), t - 0.1, line);
  snprintf(name, sizeof name, "live.%d", r);
  put_file(name, text);
}

static int setup(void **state) {
  (void)state;
  return gr_test_tmpdir_make(dir, sizeof dir, "gr_test_waitfor");
}

static int teardown(void **state) {
  (void)state;
  return gr_test_tmpdir_remove(dir);
}

/* The report's text and its wait-for JSON. */
static char *report(char **wait) {
  char *text = NULL, *json = NULL;
  size_t len = 0;
  int nd = 0;
  FILE *out = open_memstream(&text, &len);
  assert_non_null(out);
  assert_int_equal(gr__rpt_flight(dir, out, &json, wait, &nd), GR_OK);
  fclose(out);
  free(json);
  return text;
}

static void top(gr__top_job *job) {
  gr__top_job_init(job);
  snprintf(job->dir, sizeof job->dir, "%s", dir);
  job->hang_s = 1;
  assert_int_equal(gr__top_load(job), 0);
}

static int has_rank(const gr__rpt_json *arr, int r) {
  for (const gr__rpt_json *c = arr ? arr->child : NULL; c; c = c->next)
    if (c->num == r) return 1;
  return 0;
}

/* World of 4: ranks 0 and 1 in allreduce #10, rank 2 behind (its #9 done), rank 3 left nothing.
 * The allreduce waits for 2 and 3: the report's edges name both, gpurun-top both. */
static void test_behind_and_missing(void **state) {
  (void)state;
  rank_files(0, 4, 9, "allreduce", 10, -1);
  rank_files(1, 4, 9, "allreduce", 10, -1);
  rank_files(2, 4, 9, NULL, 0, -1);
  char *wait = NULL, *text = report(&wait);
  assert_non_null(
      strstr(text, "rank 0 waits in allreduce on world[0.1] (seq 10) for rank 2, rank 3"));
  assert_non_null(strstr(text, "chain: 0 -> 2: rank 2 is in no collective call"));
  gr__rpt_json *w = gr__rpt_json_parse(wait, NULL);
  assert_non_null(w);
  const gr__rpt_json *e = gr__rpt_json_get(w, "edges");
  assert_true(has_rank(gr__rpt_json_get(e->child, "waits_for"), 2));
  assert_true(has_rank(gr__rpt_json_get(e->child, "waits_for"), 3));
  gr__rpt_json_free(w);
  free(wait);
  free(text);

  gr__top_job job;
  top(&job);
  assert_non_null(
      strstr(job.verdict, "WAITING FOR ranks 2-3: ranks 0-1 in allreduce #10 on world"));
  for (int i = 0; i < 4; i++)
    assert_int_equal(GR__TOP_ROW(&job, i).blocker, i >= 2);
  gr__top_free(&job);
}

/* World of 3: rank 0 receives from 1, rank 1 from 0, rank 2 idle after its last allreduce: a
 * deadlock of 0 and 1. The report's chain closes on itself; gpurun-top names both. */
static void test_deadlock(void **state) {
  (void)state;
  rank_files(0, 3, 4, "recv", 0, 1);
  rank_files(1, 3, 4, "recv", 0, 0);
  rank_files(2, 3, 4, NULL, 0, -1);
  char *wait = NULL, *text = report(&wait);
  assert_non_null(strstr(text, "chain: 0 -> 1 -> 0: rank 0 is in a wait-for cycle (deadlock)"));
  free(wait);
  free(text);

  gr__top_job job;
  top(&job);
  assert_non_null(strstr(job.verdict, "WAITING FOR ranks 0-1: "));
  assert_non_null(strstr(job.verdict, "[deadlock: they wait for each other]"));
  for (int i = 0; i < 3; i++)
    assert_int_equal(GR__TOP_ROW(&job, i).blocker, i < 2);
  gr__top_free(&job);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_behind_and_missing, setup, teardown),
      cmocka_unit_test_setup_teardown(test_deadlock, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
