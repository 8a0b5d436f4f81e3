/* gpurun-top's model on job directories written here: the live-file parser against hostile input,
 * the CSV tail reader, the analysis that names the rank the others wait for, and the 80-column
 * frame. The expected answers are stated per case from the files the case writes. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "gr_test_tmpdir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gr_live_file.h"
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

/* A live file: rank r of size n, one world line (state, seq, started/ended ago seconds). */
static void live(int r, int n, const char *state, unsigned seq, double start_ago, double end_ago,
                 double written_ago) {
  char name[32], text[1024];
  double t = now_s();
  snprintf(name, sizeof name, "live.%d", r);
  snprintf(text, sizeof text,
           "gpurun-live 1\nrank %d\nsize %d\nhost fakehost\npid 999999\nstate running\n"
           "time %.3f\ninterval 0.25\ncpu_pct 50\nrss_kib 2048\n"
           "comm world %d %d mpi %u allreduce 1 %s %.6f %.6f %u 0.5\n",
           r, n, t - written_ago, r, n, seq, state, t - start_ago, end_ago >= 0 ? t - end_ago : 0.0,
           seq);
  put_file(name, text);
}

/* A live file of rank r (of n) inside a communicator creation for start_ago seconds, with the
 * given comm lines (may be ""). */
static void live_creating(int r, int n, const char *call, const char *step, const char *over,
                          int orank, int osize, double start_ago, const char *comms) {
  char name[32], text[1024];
  double t = now_s();
  snprintf(name, sizeof name, "live.%d", r);
  snprintf(text, sizeof text,
           "gpurun-live 1\nrank %d\nsize %d\nhost fakehost\npid 999999\nstate running\n"
           "time %.3f\ninterval 0.25\n%screating %s %s %s %d %d %.6f\n",
           r, n, t - 0.1, comms, call, step, over, orank, osize, t - start_ago);
  put_file(name, text);
}

static int setup(void **state) {
  (void)state;
  return gr_test_tmpdir_make(dir, sizeof dir, "gr_test_top");
}

static int teardown(void **state) {
  (void)state;
  return gr_test_tmpdir_remove(dir);
}

static void load(gr__top_job *job, double hang) {
  gr__top_job_init(job);
  snprintf(job->dir, sizeof job->dir, "%s", dir);
  job->hang_s = hang;
  assert_int_equal(gr__top_load(job), 0);
}

static void test_parse_hostile(void **state) {
  (void)state;
  gr__live lv;
  const char *good = "gpurun-live 1\nrank 7\nsize 8\nhost n\033[2Jx\npid 12\nstate running\n"
                     "comm world 7 8 mpi 5 allreduce 4 running 1.5 0 5 0.25\n"
                     "comm a\nb 1 2\n"
                     "comm x 0 1 mpi nan allreduce 1 done 1 1 1 1\n"     /* bad seq */
                     "comm y 0 1 mpi 1 allreduce 1 done inf 1 1 1\n"     /* bad start */
                     "comm z 0 1 mpi 1 allreduce 1 done 1 1 1 1 extra\n" /* 14 tokens */
                     "rss_kib -5\ncpu_pct 1e300\n";
  assert_int_equal(gr__live_parse(good, strlen(good), &lv), 0);
  assert_int_equal(lv.rank, 7);
  assert_int_equal(lv.size, 8);
  assert_string_equal(lv.host, "n??2Jx"); /* no escape sequence survives */
  assert_int_equal(lv.ncomms, 1);
  assert_string_equal(lv.comm[0].id, "world");
  assert_int_equal(lv.comm[0].seq, 5);
  assert_true(lv.rss_kib < 0);
  assert_true(lv.cpu_pct < 0);
  const char *bad[] = {"",
                       "gpurun-live 3\nrank 1\n",
                       "gpurun-live 1x\nrank 1\n",
                       "gpurun-live 1\nsize 3\n",
                       "gpurun-live 1\nrank -1\n",
                       "gpurun-live 1\nrank 99999999999999999999\n"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    assert_int_equal(gr__live_parse(bad[i], strlen(bad[i]), &lv), -1);
  /* not NUL-terminated: the parser stops at len */
  char raw[] = {'g', 'p', 'u',  'r', 'u', 'n', '-', 'l', 'i', 'v', 'e',
                ' ', '1', '\n', 'r', 'a', 'n', 'k', ' ', '4', '2'};
  assert_int_equal(gr__live_parse(raw, sizeof raw - 1, &lv), 0);
  assert_int_equal(lv.rank, 4);
  /* a host name of 64 bytes (Linux's longest) survives whole: gpurun-top compares it with its own
   * to read the rank's process state */
  char host64[65], text[200];
  memset(host64, 'h', 64);
  host64[64] = '\0';
  snprintf(text, sizeof text, "gpurun-live 1\nrank 1\nsize 2\nhost %s\npid 12\n", host64);
  assert_int_equal(gr__live_parse(text, strlen(text), &lv), 0);
  assert_string_equal(lv.host, host64);
}

/* Ranks 0, 1, 3 wait in allreduce #10; rank 2 finished #9 five seconds ago and is silent. */
static void test_names_rank_behind(void **state) {
  (void)state;
  live(0, 4, "running", 10, 5, -1, 0.1);
  live(1, 4, "running", 10, 4, -1, 0.1);
  live(2, 4, "done", 9, 5.1, 5, 5);
  live(3, 4, "running", 10, 5, -1, 0.1);
  gr__top_job job;
  load(&job, 2.0);
  assert_int_equal(gr__top_nranks(&job), 4);
  assert_int_equal(job.world, 4);
  assert_non_null(strstr(job.verdict, "WAITING FOR rank 2: ranks 0-1,3 in allreduce #10 on world"));
  assert_non_null(strstr(job.verdict, "last seen: allreduce #9 ended"));
  for (int i = 0; i < 4; i++)
    assert_int_equal(GR__TOP_ROW(&job, i).blocker, i == 2);
  gr__top_free(&job);

  /* below the hang threshold: nobody is named */
  load(&job, 10.0);
  assert_string_equal(job.verdict, "");
  for (int i = 0; i < 4; i++)
    assert_int_equal(GR__TOP_ROW(&job, i).blocker, 0);
  gr__top_free(&job);
}

/* A member of world that never published is the one the others wait for. */
static void test_missing_rank(void **state) {
  (void)state;
  live(0, 3, "running", 1, 3, -1, 0.1);
  live(1, 3, "running", 1, 3, -1, 0.1);
  gr__top_job job;
  load(&job, 1.0);
  /* rank 2 has no file: a row of its own, named as the one they wait for */
  assert_int_equal(gr__top_nranks(&job), 3);
  assert_non_null(strstr(job.verdict, "WAITING FOR rank 2: ranks 0-1 in allreduce #1 on world"));
  assert_non_null(strstr(job.verdict, "rank 2 never published its state"));
  assert_int_equal(job.nlive, 2);
  gr__top_free(&job);
  /* a file named for one rank that claims another is ignored */
  put_file("live.7", "gpurun-live 1\nrank 0\nsize 3\nstate exited\n");
  load(&job, 1.0);
  assert_int_equal(gr__top_nranks(&job), 3);
  assert_string_equal(GR__TOP_ROW(&job, 0).live.state, "running");
  gr__top_free(&job);
  /* everybody inside #1, rank 1 silent for 60 s: the suspect */
  live(2, 3, "running", 1, 3, -1, 0.1);
  live(1, 3, "running", 1, 3, -1, 60);
  load(&job, 1.0);
  assert_non_null(strstr(job.verdict, "WAITING FOR rank 1: ranks 0,2 in allreduce #1"));
  assert_non_null(strstr(job.verdict, "silent 60 s"));
  gr__top_free(&job);
}

/* The "creating" lines: bounded and cleaned like the rest; a bad one is skipped. */
static void test_parse_creating(void **state) {
  (void)state;
  gr__live lv;
  const char *text = "gpurun-live 1\nrank 1\n"
                     "creating gr_comm_create dup world 1 3 1700000000.5\n"
                     "creating gr_comm_split sp\033[2J world 1 3 1700000001\n"
                     "creating gr_comm_split split world 3 3 1700000001\n" /* rank >= size */
                     "creating gr_comm_split split world 1 0 1700000001\n" /* size 0 */
                     "creating gr_comm_split split world 1 3 nan\n"
                     "creating gr_comm_split split world 1 3 0\n"
                     "creating gr_comm_split split world 1 3\n" /* 6 tokens */
                     "creating a b c 0 1 1 extra\n"             /* 8 tokens */
                     "creating a b c 0 1 1\ncreating a b c 0 1 1\ncreating a b c 0 1 1\n";
  assert_int_equal(gr__live_parse(text, strlen(text), &lv), 0);
  assert_int_equal(lv.ncreating, GR_LIVE_MAX_CREATING); /* the last one is over the bound */
  assert_string_equal(lv.creating[0].call, "gr_comm_create");
  assert_string_equal(lv.creating[0].step, "dup");
  assert_string_equal(lv.creating[0].over, "world");
  assert_int_equal(lv.creating[0].rank, 1);
  assert_int_equal(lv.creating[0].size, 3);
  assert_true(lv.creating[0].start == 1700000000.5);
  assert_string_equal(lv.creating[1].step, "sp??2J"); /* no escape sequence survives */
  assert_string_equal(lv.creating[2].call, "a");
}

/* Ranks 0-1 wait in gr_comm_create over the world for 5 s; rank 2 computes after allreduce #1. */
static void test_creation_names_rank_behind(void **state) {
  (void)state;
  live_creating(0, 3, "gr_comm_create", "dup", "world", 0, 3, 5, "");
  live_creating(1, 3, "gr_comm_create", "agree", "world", 1, 3, 4, "");
  live(2, 3, "done", 1, 6, 5.5, 0.1);
  gr__top_job job;
  load(&job, 2.0);
  assert_non_null(strstr(job.verdict,
                         "WAITING FOR rank 2: ranks 0-1 in gr_comm_create (dup/agree) on world "
                         "for 5.0 s; rank 2 has not entered gr_comm_create on world"));
  for (int i = 0; i < 3; i++)
    assert_int_equal(GR__TOP_ROW(&job, i).blocker, i == 2);
  /* the frame says where each rank is */
  char *buf = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&buf, &len);
  gr__top_render(m, &job, 0, -1, 0, 1.0);
  fclose(m);
  assert_non_null(strstr(buf, " create:dup "));
  assert_non_null(strstr(buf, " create:agree "));
  free(buf);
  gr__top_free(&job);
  /* below the threshold: nobody is named */
  load(&job, 10.0);
  assert_string_equal(job.verdict, "");
  gr__top_free(&job);

  /* A rank that never published: named (a creation over the world includes every rank). */
  char path[300];
  snprintf(path, sizeof path, "%s/live.2", dir);
  assert_int_equal(unlink(path), 0);
  load(&job, 2.0);
  assert_non_null(strstr(job.verdict, "WAITING FOR rank 2: "));
  assert_non_null(strstr(job.verdict, "rank 2 never published its state"));
  gr__top_free(&job);

  /* All inside, rank 1 silent for 60 s: the suspect. */
  live_creating(2, 3, "gr_comm_create", "dup", "world", 2, 3, 3, "");
  put_file("live.1", "gpurun-live 1\nrank 1\nsize 3\nstate running\ntime 1\ninterval 0.25\n"
                     "creating gr_comm_create agree world 1 3 1\n");
  load(&job, 2.0);
  assert_non_null(strstr(job.verdict, "WAITING FOR rank 1: ranks 0,2 in gr_comm_create (dup)"));
  assert_non_null(strstr(job.verdict, "rank 1 in gr_comm_create (agree) on world for"));
  gr__top_free(&job);
}

/* A split of a sub-communicator names only its members; a creation over another MPI communicator
 * names nobody (its members are unknown); a collective hang names a rank that creates. */
static void test_creation_members(void **state) {
  (void)state;
  const char *sub = "comm split-1 0 2 mpi 3 allreduce 1 done 1 2 3 0.1\n";
  live_creating(0, 4, "gr_comm_split", "split", "split-1", 0, 2, 5, sub);
  live(1, 4, "done", 3, 9, 8, 0.1);
  put_file("live.2", "gpurun-live 1\nrank 2\nsize 4\nstate running\ntime 1e12\n"
                     "comm split-1 1 2 mpi 3 allreduce 1 done 1 2 3 0.1\n");
  live(3, 4, "done", 3, 9, 8, 0.1);
  gr__top_job job;
  load(&job, 2.0);
  assert_non_null(strstr(job.verdict, "WAITING FOR rank 2: rank 0 in gr_comm_split (split) on "
                                      "split-1 for 5.0 s; rank 2 has not entered gr_comm_split"));
  for (int i = 0; i < 4; i++)
    assert_int_equal(GR__TOP_ROW(&job, i).blocker, i == 2);
  gr__top_free(&job);
  /* a blocker inside a collective instead: said */
  char text[512];
  snprintf(text, sizeof text,
           "gpurun-live 1\nrank 2\nsize 4\nstate running\ntime %.3f\n"
           "comm split-1 1 2 mpi 4 barrier 0 running %.3f 0 4 0.1\n",
           now_s(), now_s() - 3);
  put_file("live.2", text);
  load(&job, 2.0);
  assert_non_null(strstr(job.verdict, "rank 2 has not entered gr_comm_split on split-1 (in barrier "
                                      "#4 on split-1 for 3.0 s)"));
  gr__top_free(&job);

  live_creating(0, 4, "gr_comm_create", "agree", "mpi", 0, 2, 5, "");
  live_creating(2, 4, "gr_comm_create", "agree", "mpi", 1, 2, 5, "");
  load(&job, 2.0);
  assert_non_null(strstr(job.verdict, "2 ranks in gr_comm_create (agree) on mpi for 5.0 s (no rank "
                                      "behind"));
  for (int i = 0; i < 4; i++)
    assert_int_equal(GR__TOP_ROW(&job, i).blocker, 0);
  gr__top_free(&job);

  /* ranks 0, 1, 3 in allreduce #4 on world for 8 s, rank 2 inside a creation since 3 s */
  live(0, 4, "running", 4, 8, -1, 0.1);
  live(1, 4, "running", 4, 8, -1, 0.1);
  live_creating(2, 4, "gr_comm_create", "dup", "mpi", 0, 2, 3,
                "comm world 2 4 mpi 3 allreduce 1 done 9 8.5 3 0.1\n");
  live(3, 4, "running", 4, 8, -1, 0.1);
  load(&job, 2.0);
  assert_non_null(strstr(job.verdict, "WAITING FOR rank 2: ranks 0-1,3 in allreduce #4 on world"));
  assert_non_null(strstr(job.verdict, "rank 2 in gr_comm_create (dup) on mpi for 3.0 s"));
  gr__top_free(&job);
}

/* A version-2 live file for rank r (of n) on host (NULL: this machine's) with process pid,
 * written written_ago seconds ago, with the given comm lines. */
static void live2(int r, int n, const char *host, long pid, double written_ago, const char *comms) {
  char name[32], text[2048], me[256] = "";
  gethostname(me, sizeof me - 1);
  snprintf(name, sizeof name, "live.%d", r);
  snprintf(text, sizeof text,
           "gpurun-live 2\nrank %d\nsize %d\nhost %s\npid %ld\nstate running\ntime %.3f\n"
           "beat 40\ninterval 0.25\n%s",
           r, n, host ? host : me, pid, now_s() - written_ago, comms);
  put_file(name, text);
}

/* One version-2 comm line: communicator id/name, this rank in it, call state, seq, op, started
 * ago, ended ago (< 0: running), unfinished sends/receives. */
static const char *comm2(char *buf, size_t cap, const char *id, const char *name, int rank,
                         int size, unsigned seq, const char *op, const char *state,
                         double start_ago, double end_ago, const char *waits) {
  double t = now_s();
  snprintf(buf, cap, "comm %s %d %d mpi %u %s 1 %s %.6f %.6f %u 0.5 %s %s\n", id, rank, size, seq,
           op, state, t - start_ago, end_ago >= 0 ? t - end_ago : 0.0, seq, name, waits);
  return buf;
}

/* A child process that stays stopped (SIGSTOP) until kill_child. */
static pid_t stopped_child(void) {
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    raise(SIGSTOP);
    _exit(0);
  }
  int st;
  assert_int_equal(waitpid(pid, &st, WUNTRACED), pid);
  assert_true(WIFSTOPPED(st));
  return pid;
}

static void kill_child(pid_t pid) {
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
}

static void test_parse_v2(void **state) {
  (void)state;
  gr__live lv;
  const char *text = "gpurun-live 2\nrank 1\nbeat 12\n"
                     "comm 0.1 1 3 mpi 5 recv 4 running 1.5 0 5 0.25 world r2:0,s0:7\n"
                     "comm 0.2 1 3 mpi 5 recv 4 running 1.5 0 5 0.25 wo\033rld -\n"
                     "comm 0.3 1 3 mpi 5 recv 4 running 1.5 0 5 0.25 world r2:0,\n"
                     "comm 0.4 1 3 mpi 5 recv 4 running 1.5 0 5 0.25 world x2:0\n"
                     "comm 0.5 1 3 mpi 5 recv 4 running 1.5 0 5 0.25 world r-2:0\n"
                     "comm 0.6 1 3 mpi 5 recv 4 running 1.5 0 5 0.25 world r2\n"
                     "comm 0.7 1 3 mpi 5 recv 4 running 1.5 0 5 0.25 world "
                     "r1:0,r1:0,r1:0,r1:0,r1:0,r1:0,r1:0,r1:0,r1:0\n"         /* over the bound */
                     "comm 0.8 1 3 mpi 5 allreduce 4 running 1.5 0 5 0.25\n"; /* v1 form */
  assert_int_equal(gr__live_parse(text, strlen(text), &lv), 0);
  assert_int_equal(lv.beat, 12);
  assert_int_equal(lv.ncomms, 2);
  assert_string_equal(lv.comm[0].id, "0.1");
  assert_string_equal(lv.comm[0].name, "world");
  assert_int_equal(lv.comm[0].nwaits, 2);
  assert_int_equal(lv.comm[0].waits[0].recv, 1);
  assert_int_equal(lv.comm[0].waits[0].peer, 2);
  assert_int_equal(lv.comm[0].waits[1].recv, 0);
  assert_int_equal(lv.comm[0].waits[1].peer, 0);
  assert_int_equal(lv.comm[0].waits[1].tag, 7);
  assert_string_equal(lv.comm[1].name, "wo?rld");
  assert_int_equal(lv.comm[1].nwaits, 0);
  /* a version-1 file: the id is the name, no beat */
  const char *v1 = "gpurun-live 1\nrank 0\ncomm world 0 2 mpi 4 allreduce 1 running 9 0 4 0.1\n";
  assert_int_equal(gr__live_parse(v1, strlen(v1), &lv), 0);
  assert_int_equal(lv.ncomms, 1);
  assert_string_equal(lv.comm[0].name, "world");
  assert_true(lv.beat < 0);
}

/* The README's demo: a halo exchange of 3 ranks, rank 1 stopped inside a receive. Ranks 0 and 2
 * wait in receives from rank 1 whose numbers differ (point to point), rank 1's heartbeat is only
 * 1.5 s old (below the silence threshold): only its process state tells. */
static void test_p2p_stopped(void **state) {
  (void)state;
  pid_t child = stopped_child();
  char a[256], b[256], c[256];
  live2(0, 3, NULL, (long)getpid(), 0.1,
        comm2(a, sizeof a, "0.1", "world", 0, 3, 500, "recv", "running", 4, -1, "r1:0"));
  live2(1, 3, NULL, (long)child, 1.5,
        comm2(b, sizeof b, "0.1", "world", 1, 3, 800, "recv", "running", 4.2, -1, "r2:0,s2:0"));
  live2(2, 4, NULL, (long)getpid(), 0.1,
        comm2(c, sizeof c, "0.1", "world", 2, 3, 650, "recv", "running", 4, -1, "r1:0,s1:0"));
  /* rank 3 is not in the exchange: its only call ended 9 s ago; it is neither waiting nor named */
  char d[256];
  live2(3, 4, NULL, (long)getpid(), 0.1,
        comm2(d, sizeof d, "3.1", "comm", 0, 1, 1, "barrier", "done", 10, 9, "-"));
  gr__top_job job;
  load(&job, 2.0);
  kill_child(child);
  assert_non_null(strstr(job.verdict, "WAITING FOR rank 1: ranks 0,2 in recv #"));
  assert_non_null(strstr(job.verdict, "on world[0.1]"));
  assert_non_null(strstr(job.verdict, "receiving from rank 1)"));
  assert_non_null(strstr(job.verdict, "is STOPPED"));
  assert_non_null(strstr(job.verdict, "[certain: process state T]"));
  for (int i = 0; i < 4; i++)
    assert_int_equal(GR__TOP_ROW(&job, i).blocker, i == 1);
  gr__top_free(&job);
}

/* A rank killed with SIGKILL: its pid is gone from this machine while its file says running. */
static void test_killed_rank(void **state) {
  (void)state;
  pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) _exit(0);
  waitpid(child, NULL, 0); /* reaped: no such process any more */
  char a[256], b[256], c[256];
  live2(0, 3, NULL, (long)getpid(), 0.1,
        comm2(a, sizeof a, "0.1", "world", 0, 3, 30, "allreduce", "running", 4, -1, "-"));
  live2(1, 3, NULL, (long)child, 1.5,
        comm2(b, sizeof b, "0.1", "world", 1, 3, 30, "allreduce", "running", 4, -1, "-"));
  live2(2, 3, NULL, (long)getpid(), 0.1,
        comm2(c, sizeof c, "0.1", "world", 2, 3, 30, "allreduce", "running", 4, -1, "-"));
  gr__top_job job;
  load(&job, 2.0);
  /* every rank is inside allreduce #30: the call numbers alone name nobody */
  assert_non_null(strstr(job.verdict, "WAITING FOR rank 1: ranks 0,2 in allreduce #30"));
  assert_non_null(strstr(job.verdict, "is GONE"));
  assert_non_null(strstr(job.verdict, "[certain: no process"));
  for (int i = 0; i < 3; i++)
    assert_int_equal(GR__TOP_ROW(&job, i).blocker, i == 1);
  gr__top_free(&job);
}

/* A fresh heartbeat outweighs /proc: a pid this machine does not know (another PID namespace
 * under the same host name) whose file was rewritten 0.1 s ago is alive; nobody is named. */
static void test_fresh_file_alive(void **state) {
  (void)state;
  pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) _exit(0);
  waitpid(child, NULL, 0);
  char a[256], b[256];
  live2(0, 2, NULL, (long)child, 0.1,
        comm2(a, sizeof a, "0.1", "world", 0, 2, 5, "allreduce", "done", 0.3, 0.2, "-"));
  live2(1, 2, NULL, (long)child, 0.1,
        comm2(b, sizeof b, "0.1", "world", 1, 2, 5, "allreduce", "done", 0.3, 0.2, "-"));
  gr__top_job job;
  load(&job, 2.0);
  assert_string_equal(job.verdict, "");
  assert_int_equal(GR__TOP_ROW(&job, 0).blocker + GR__TOP_ROW(&job, 1).blocker, 0);
  gr__top_free(&job);
}

/* Both halves of gr_comm_split(world, rank % 2) are named split-1 (with colours 0 and 1) but have
 * their own ids. Rank 2 is behind in the even half (rank 0 waits in allreduce #10, rank 2 ended
 * #9), both alive; the odd half (ranks 1, 3) computes between calls. Only rank 2 is named. */
static void test_split_halves(void **state) {
  (void)state;
  char w[4][200], h[4][200], l[4][512];
  for (int r = 0; r < 4; r++) {
    comm2(w[r], sizeof w[r], "0.1", "world", r, 4, 3, "allreduce", "done", 9, 8.9, "-");
    int even = r % 2 == 0;
    const char *id = even ? "0.2" : "1.2", *name = even ? "split-1:0" : "split-1:1";
    if (r == 0)
      comm2(h[r], sizeof h[r], id, name, 0, 2, 10, "allreduce", "running", 5, -1, "-");
    else if (r == 2)
      comm2(h[r], sizeof h[r], id, name, 1, 2, 9, "allreduce", "done", 5.1, 5, "-");
    else
      comm2(h[r], sizeof h[r], id, name, r / 2, 2, 40, "allreduce", "done", 0.3, 0.2, "-");
    snprintf(l[r], sizeof l[r], "%s%s", w[r], h[r]);
    live2(r, 4, NULL, (long)getpid(), 0.1, l[r]);
  }
  gr__top_job job;
  load(&job, 2.0);
  assert_non_null(
      strstr(job.verdict, "WAITING FOR rank 2: rank 0 in allreduce #10 on split-1:0[0.2]"));
  for (int i = 0; i < 4; i++)
    assert_int_equal(GR__TOP_ROW(&job, i).blocker, i == 2);
  /* the rows name a communicator by its name (cut to the column), never by its bare id */
  char *buf = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&buf, &len);
  gr__top_render(m, &job, 0, -1, 0, 1.0);
  fclose(m);
  assert_non_null(strstr(buf, "allred#10 spl"));
  assert_null(strstr(buf, " 0.2"));
  free(buf);
  gr__top_free(&job);
}

/* A second communicator over MPI_COMM_WORLD is also named world: the loop runs on it (id 0.3)
 * while gr_world (0.1) is idle. Rank 2 ended #9 on it, the others wait in #10. */
static void test_second_world(void **state) {
  (void)state;
  char w[4][200], h[4][200], l[4][512];
  for (int r = 0; r < 4; r++) {
    comm2(w[r], sizeof w[r], "0.1", "world", r, 4, 2, "barrier", "done", 9, 8.9, "-");
    if (r == 2)
      comm2(h[r], sizeof h[r], "0.3", "world", r, 4, 9, "allreduce", "done", 5.1, 5, "-");
    else
      comm2(h[r], sizeof h[r], "0.3", "world", r, 4, 10, "allreduce", "running", 5, -1, "-");
    snprintf(l[r], sizeof l[r], "%s%s", w[r], h[r]);
    live2(r, 4, NULL, (long)getpid(), 0.1, l[r]);
  }
  gr__top_job job;
  load(&job, 2.0);
  assert_non_null(
      strstr(job.verdict, "WAITING FOR rank 2: ranks 0-1,3 in allreduce #10 on world[0.3]"));
  assert_non_null(strstr(job.verdict, "last seen: allreduce #9 ended"));
  for (int i = 0; i < 4; i++)
    assert_int_equal(GR__TOP_ROW(&job, i).blocker, i == 2);
  gr__top_free(&job);
}

/* A rank on another host (no /proc to look at) whose heartbeat stopped 10 s ago while the others
 * wait: named, and said to be likely rather than certain. */
static void test_silent_other_host(void **state) {
  (void)state;
  char a[256], b[256];
  live2(0, 2, NULL, (long)getpid(), 0.1,
        comm2(a, sizeof a, "0.1", "world", 0, 2, 7, "allreduce", "running", 10, -1, "-"));
  live2(1, 2, "otherhost", 4242, 10,
        comm2(b, sizeof b, "0.1", "world", 1, 2, 7, "allreduce", "running", 10.1, -1, "-"));
  gr__top_job job;
  load(&job, 2.0);
  assert_non_null(strstr(job.verdict, "WAITING FOR rank 1: rank 0 in allreduce #7"));
  assert_non_null(strstr(job.verdict, "[likely: no heartbeat for 10 s]"));
  for (int i = 0; i < 2; i++)
    assert_int_equal(GR__TOP_ROW(&job, i).blocker, i == 1);
  gr__top_free(&job);
}

/* The supervisor's CSV: the last complete sample's lines (one per GPU) win; a torn last line is
 * ignored; columns are found by the header's names. */
static void test_csv_tail(void **state) {
  (void)state;
  live(0, 1, "done", 3, 2, 1, 0.1);
  put_file("node.a.0.csv",
           "time,elapsed_s,rank,local_rank,gpu,gpu_util,mem_util,mem_used_mib,mem_total_mib,"
           "temp_c,power_w,sm_clock_mhz,throttle,ecc_uncorrected,cpu_util,rss_mib,rank_sm_util,"
           "others_sm_util,rank_mem_mib,others_mem_mib\n"
           "100.0,0,0,0,0000:17:00.0,10,1,1024,81920,40,100,1980,0x0,0,10,100,,,,\n"
           "100.0,0,0,0,0000:65:00.0,11,1,1024,81920,41,101,1980,0x0,0,10,100,,,,\n"
           "101.0,1,0,0,0000:17:00.0,77,33,2048,81920,61,312.5,1980,0x4,2,55.5,321.0,60.0,25.0,"
           "1024,512\n"
           "101.0,1,0,0,0000:65:00.0,78,33,4096,81920,62,313.5,1980,0x40,2,55.5,321.0,,,,\n"
           "102.0,2,0,0,0000:17:00.0,99,99,9");
  gr__top_job job;
  load(&job, 2.0);
  assert_int_equal(gr__top_nranks(&job), 1);
  const gr__top_rank *t = &GR__TOP_ROW(&job, 0);
  assert_int_equal(t->ngpus, 2);
  assert_string_equal(t->gpu[0].pci, "0000:17:00.0");
  assert_string_equal(t->gpu[1].pci, "0000:65:00.0");
  assert_true(t->gpu[0].util == 77 && t->gpu[1].util == 78);
  assert_true(t->gpu[0].rank_sm == 60 && t->gpu[0].others_sm == 25 && t->gpu[1].rank_sm < 0);
  assert_true(t->gpu[1].mem_used_mib == 4096 && t->gpu[1].temp_c == 62);
  assert_int_equal(t->gpu[0].throttle, 4);
  assert_int_equal(t->gpu[1].throttle, 0x40);
  assert_true(t->cpu_pct == 55.5 &&
              t->rss_mib == 321.0);         /* the supervisor's, not the live file's */
  assert_string_equal(t->host, "fakehost"); /* the live file's; the CSV name's when none */

  /* the frame: every line within 80 columns, printable ASCII only */
  char *buf = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&buf, &len);
  assert_int_equal(gr__top_render(m, &job, 0, -1, 0, 1.0), 2);
  fclose(m);
  assert_non_null(strstr(buf, "HWth"));     /* hardware thermal slowdown on the second GPU */
  assert_non_null(strstr(buf, " 60/77% ")); /* shared GPU: the rank's share / the total */
  assert_non_null(strstr(buf, "    78% ")); /* no per-process rows: the total only */
  for (char *line = buf, *nl; line && *line; line = nl ? nl + 1 : NULL) {
    nl = strchr(line, '\n');
    size_t l = nl ? (size_t)(nl - line) : strlen(line);
    assert_true(l <= 80);
    for (size_t i = 0; i < l; i++)
      assert_true(line[i] >= 32 && line[i] < 127);
  }
  free(buf);
  gr__top_free(&job);
}

/* Every line of a frame within 80 columns (79 used), printable ASCII only. */
static void assert_frame_fits(const char *buf) {
  for (const char *line = buf, *nl; line && *line; line = nl ? nl + 1 : NULL) {
    nl = strchr(line, '\n');
    size_t l = nl ? (size_t)(nl - line) : strlen(line);
    if (l > 79) print_message("too wide (%zu): %.*s\n", l, (int)l, line);
    assert_true(l <= 79);
    for (size_t i = 0; i < l; i++)
      assert_true(line[i] >= 32 && line[i] < 127);
  }
}

/* Huge but finite values (rss 1e300, cpu 1e200, 1e30 W, a call started 31 years ago), a rank
 * number of 7 digits and a 60-character job name: every row stays within the 80 columns the man
 * page promises, the values saturated (">...") rather than cut into a wrong number. */
static void test_huge_values(void **state) {
  (void)state;
  char root[sizeof dir];
  memcpy(root, dir, sizeof dir);
  char sub[sizeof dir];
  snprintf(sub, sizeof sub, "%.100s/%s", root,
           "job-with-a-very-long-name-0123456789012345678901234567890123");
  assert_int_equal(mkdir(sub, 0700), 0);
  memcpy(dir, sub, sizeof dir);
  double t = now_s();
  char text[1024];
  snprintf(text, sizeof text,
           "gpurun-live 1\nrank 0\nsize 2\nhost fakehost\npid 999999\nstate running\n"
           "time %.3f\ninterval 0.25\ncpu_pct 1e200\nrss_kib 1e300\n"
           "comm world 0 2 mpi 7 allreduce 1 running %.6f 0 7 0.5\n",
           t - 0.1, t - 1e9);
  put_file("live.0", text);
  snprintf(text, sizeof text,
           "gpurun-live 1\nrank 1048575\nsize 2\nhost fakehost\npid 999999\nstate running\n"
           "time %.3f\ninterval 0.25\ncpu_pct 99999\nrss_kib 5e12\n",
           t - 0.1);
  put_file("live.1048575", text);
  put_file("node.a.0.csv",
           "time,elapsed_s,rank,local_rank,gpu,gpu_util,mem_util,mem_used_mib,mem_total_mib,"
           "temp_c,power_w,sm_clock_mhz,throttle,ecc_uncorrected,cpu_util,rss_mib,rank_sm_util,"
           "others_sm_util,rank_mem_mib,others_mem_mib\n"
           "101.0,1,0,0,0000:17:00.0,1e300,1,1e300,1e300,1e300,1e30,1980,0x0,0,1e200,1e300,1e300,"
           "1,1,1\n"
           "101.0,1,0,0,0000:65:00.0,99999,1,123456789,987654321,1234,123456,1980,0x0,0,1e200,"
           "1e300,,,,\n");
  gr__top_job job;
  load(&job, 2.0);
  memcpy(dir, root, sizeof dir);
  assert_int_equal(gr__top_nranks(&job), 2);
  assert_true(GR__TOP_ROW(&job, 0).rss_mib > 1e290 &&
              GR__TOP_ROW(&job, 0).gpu[0].power_w > 1e29); /* read as given */
  char *buf = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&buf, &len);
  assert_int_equal(gr__top_render(m, &job, 0, -1, 0, 1.0), 3);
  fclose(m);
  print_message("%s", buf);
  assert_frame_fits(buf);
  assert_non_null(strstr(buf, "1048575")); /* the rank number whole */
  assert_non_null(strstr(buf, ">9EW"));    /* 1e30 W */
  assert_non_null(strstr(buf, ">99E"));    /* CPU% and RSS */
  assert_non_null(strstr(buf, ">999d"));   /* inside the call for 31 years */
  assert_null(strstr(buf, "e+"));          /* no exponent cut into a number */
  free(buf);
  /* the terminal's cut (width 40) still holds */
  m = open_memstream(&buf, &len);
  gr__top_render(m, &job, 0, 5, 40, 1.0);
  fclose(m);
  for (const char *line = buf, *nl; line && *line; line = nl ? nl + 1 : NULL) {
    nl = strchr(line, '\n');
    assert_true((nl ? (size_t)(nl - line) : strlen(line)) <= 40);
  }
  free(buf);
  gr__top_free(&job);
}

/* DIR may be the monitor root: its newest job directory is used. */
static void test_find_job(void **state) {
  (void)state;
  char sub[300], out[1024], err[256];
  snprintf(sub, sizeof sub, "%s/job1", dir);
  assert_int_equal(mkdir(sub, 0755), 0);
  assert_int_equal(gr__top_find_job(dir, out, sizeof out, err, sizeof err), -1);
  char f[400];
  snprintf(f, sizeof f, "%s/live.0", sub);
  FILE *fp = fopen(f, "w");
  assert_non_null(fp);
  fclose(fp);
  assert_int_equal(gr__top_find_job(dir, out, sizeof out, err, sizeof err), 0);
  assert_string_equal(out, sub);
}

/* Rank r of 3 with the MPI layer's sums: coll seconds in blocking collectives, mpi in MPI. */
static void live_mpi(int r, double coll, double mpi) {
  char name[32], text[1024];
  double t = now_s();
  snprintf(name, sizeof name, "live.%d", r);
  snprintf(text, sizeof text,
           "gpurun-live 2\nrank %d\nsize 3\nhost fakehost\npid 999999\nstate running\n"
           "time %.3f\ninterval 0.25\nbeat 3\nmpi_s %.3f\nmpi_coll_s %.3f\nmpi_inside_since 0\n",
           r, t - 0.1, mpi, coll);
  put_file(name, text);
}

/* The late rank while the job runs: the one that waits least in blocking collectives (two thirds
 * of the others' median or less, that median a second or more); else in MPI; else none. */
static void test_late_rank(void **state) {
  (void)state;
  gr__top_job job;
  live_mpi(0, 9.0, 20.0);
  live_mpi(1, 2.0, 20.0);
  live_mpi(2, 8.0, 20.0);
  load(&job, 3);
  assert_string_equal(job.late, "late: rank 1 waited 2.0 s in blocking collectives, the others a "
                                "median of 8.5 s: they wait for it");
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  gr__top_render(f, &job, 0, -1, 0, 1);
  fclose(f);
  assert_non_null(strstr(text, "late: rank 1 waited 2.0 s"));
  free(text);
  gr__top_free(&job);
  live_mpi(1, 9.0, 5.0); /* collectives alike; in MPI it waits least */
  load(&job, 3);
  assert_non_null(strstr(job.late, "late: rank 1 waited 5.0 s in MPI"));
  gr__top_free(&job);
  live_mpi(1, 9.0, 19.0); /* alike everywhere */
  load(&job, 3);
  assert_string_equal(job.late, "");
  gr__top_free(&job);
  live_mpi(0, 0.3, 0.5); /* too little time to say */
  live_mpi(1, 0.0, 0.1);
  live_mpi(2, 0.3, 0.5);
  load(&job, 3);
  assert_string_equal(job.late, "");
  gr__top_free(&job);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse_hostile),
      cmocka_unit_test_setup_teardown(test_names_rank_behind, setup, teardown),
      cmocka_unit_test_setup_teardown(test_missing_rank, setup, teardown),
      cmocka_unit_test(test_parse_creating),
      cmocka_unit_test_setup_teardown(test_creation_names_rank_behind, setup, teardown),
      cmocka_unit_test_setup_teardown(test_creation_members, setup, teardown),
      cmocka_unit_test(test_parse_v2),
      cmocka_unit_test_setup_teardown(test_p2p_stopped, setup, teardown),
      cmocka_unit_test_setup_teardown(test_killed_rank, setup, teardown),
      cmocka_unit_test_setup_teardown(test_fresh_file_alive, setup, teardown),
      cmocka_unit_test_setup_teardown(test_split_halves, setup, teardown),
      cmocka_unit_test_setup_teardown(test_second_world, setup, teardown),
      cmocka_unit_test_setup_teardown(test_silent_other_host, setup, teardown),
      cmocka_unit_test_setup_teardown(test_csv_tail, setup, teardown),
      cmocka_unit_test_setup_teardown(test_find_job, setup, teardown),
      cmocka_unit_test_setup_teardown(test_huge_values, setup, teardown),
      cmocka_unit_test_setup_teardown(test_late_rank, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
