/* The live-state publisher (observe/live.c) under load: four threads make flight-recorder
 * calls on their own communicators as fast as they can, and six more (more than the
 * GR_LIVE_MAX_CREATING slots) enter and leave communicator creations, while the publisher thread
 * writes every 10 ms; a reader thread parses the file meanwhile (every read must parse: the
 * rename is atomic; never more creations than slots). At the end the published calls per
 * communicator must equal what each thread made and no creation may be left. Run it under
 * ThreadSanitizer too (GPURUN_SANITIZE=thread). No MPI job: MPI is never initialised. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gr_flight.h"
#include "gr_live.h"
#include "gr_live_file.h"

#define THREADS 4
#define CALLS 20000

#define CREATORS 6
#define CREATES 5000

static char dir[128], path[256];
static int stop_reader;
static long reads_ok, reads_bad, reads_creating;

static void *creator(void *arg) {
  char over[32];
  snprintf(over, sizeof over, "split-%d", (int)(long)arg);
  for (int i = 0; i < CREATES; i++) {
    gr__live_create_begin(GR_LIVE_CALL_SPLIT, GR_LIVE_STEP_SPLIT, over, 0, 1);
    gr__live_create_step(GR_LIVE_STEP_SHM);
    if (i % 16 == 0) usleep(100); /* inside for a while now and then, so that the reader sees it */
    gr__live_create_step(GR_LIVE_STEP_HIER);
    gr__live_create_end();
  }
  return NULL;
}

/* More creating threads than slots at once: each holds its creation until main has looked. */
static pthread_barrier_t inside, leave;
static void *holder(void *arg) {
  (void)arg;
  gr__live_create_begin(GR_LIVE_CALL_CREATE, GR_LIVE_STEP_AGREE, "world", 0, 1);
  pthread_barrier_wait(&inside);
  pthread_barrier_wait(&leave);
  gr__live_create_end();
  return NULL;
}

static void read_live(gr__live *lv) {
  char buf[8192];
  FILE *fp = fopen(path, "r");
  assert_non_null(fp);
  size_t n = fread(buf, 1, sizeof buf, fp);
  fclose(fp);
  assert_int_equal(gr__live_parse(buf, n, lv), 0);
}

static void *caller(void *arg) {
  int id = (int)(long)arg;
  char name[32];
  snprintf(name, sizeof name, "comm-%d", id);
  gr__flight *f = gr__flight_new(name, 0, 1, "mpi");
  for (int i = 1; i <= CALLS; i++) {
    int slot = gr__flight_begin(f, (uint64_t)i, 0, 8, 0, -1, -1, -1, 1000.0 + i);
    gr__flight_end(f, slot, (uint64_t)i, GR__FL_DONE, 1000.0 + i + 1e-6);
  }
  return f;
}

static void *reader(void *arg) {
  (void)arg;
  char buf[8192];
  while (!__atomic_load_n(&stop_reader, __ATOMIC_ACQUIRE)) {
    FILE *f = fopen(path, "r");
    if (!f) continue;
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    gr__live lv;
    if (gr__live_parse(buf, n, &lv) == 0 && lv.ncreating <= GR_LIVE_MAX_CREATING) {
      reads_ok++;
      reads_creating += lv.ncreating > 0;
    } else {
      reads_bad++;
    }
  }
  return NULL;
}

/* The publisher thread writes until its own exit handler stops it (registered by gr__live_setup),
 * so the directory is removed by a handler registered before that one: exit handlers run in
 * reverse order, and this one runs once the thread is gone. */
static void remove_dir(void) {
  char cmd[200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "test_live_stress: could not remove %s\n", dir);
}

static void test_stress(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/gr_live_stress.XXXXXX");
  assert_non_null(mkdtemp(dir));
  assert_int_equal(atexit(remove_dir), 0);
  setenv("GPURUN_MONITOR_DIR", dir, 1);
  setenv("GPURUN_LIVE_INTERVAL", "0.01", 1);
  gr__live_setup("stress");
  snprintf(path, sizeof path, "%s/stress/live.0", dir);
  assert_int_equal(access(path, F_OK), 0);
  pthread_t rd, th[THREADS], cr[CREATORS];
  assert_int_equal(pthread_create(&rd, NULL, reader, NULL), 0);
  for (long i = 0; i < THREADS; i++)
    assert_int_equal(pthread_create(&th[i], NULL, caller, (void *)i), 0);
  for (long i = 0; i < CREATORS; i++)
    assert_int_equal(pthread_create(&cr[i], NULL, creator, (void *)i), 0);
  gr__flight *f[THREADS];
  for (int i = 0; i < THREADS; i++)
    pthread_join(th[i], (void **)&f[i]);
  for (int i = 0; i < CREATORS; i++)
    pthread_join(cr[i], NULL);
  usleep(50000);
  __atomic_store_n(&stop_reader, 1, __ATOMIC_RELEASE);
  pthread_join(rd, NULL);
  assert_int_equal(gr__live_publish("running"), 0);
  char buf[8192];
  FILE *fp = fopen(path, "r");
  assert_non_null(fp);
  size_t n = fread(buf, 1, sizeof buf, fp);
  fclose(fp);
  gr__live lv;
  assert_int_equal(gr__live_parse(buf, n, &lv), 0);
  assert_int_equal(lv.ncomms, THREADS);
  assert_int_equal(lv.ncreating, 0); /* every creation ended */
  for (int i = 0; i < lv.ncomms; i++) {
    assert_int_equal(lv.comm[i].calls, CALLS);
    assert_int_equal(lv.comm[i].seq, CALLS);
    assert_string_equal(lv.comm[i].state, "done");
    /* each call took 1 us by its timestamps */
    assert_true(lv.comm[i].busy_s > CALLS * 0.9e-6 && lv.comm[i].busy_s < CALLS * 1.1e-6);
  }
  printf("reader: %ld parsed (%ld with a creation), %ld torn or over the bound\n", reads_ok,
         reads_creating, reads_bad);
  assert_int_equal(reads_bad, 0);
  assert_true(reads_ok > 0);
  for (int i = 0; i < THREADS; i++)
    gr__flight_release(f[i]);

  /* One creation, step by step, as published; a step or an end outside one changes nothing. */
  gr__live_create_step(GR_LIVE_STEP_AGREE);
  gr__live_create_end();
  gr__live_create_begin(GR_LIVE_CALL_CREATE, GR_LIVE_STEP_DUP, "bad name\n", 2, 3);
  assert_int_equal(gr__live_publish("running"), 0);
  read_live(&lv);
  assert_int_equal(lv.ncreating, 1);
  assert_string_equal(lv.creating[0].call, "gr_comm_create");
  assert_string_equal(lv.creating[0].step, "dup");
  assert_string_equal(lv.creating[0].over, "bad?name?"); /* still one token */
  assert_int_equal(lv.creating[0].rank, 2);
  assert_int_equal(lv.creating[0].size, 3);
  gr__live_create_step(GR_LIVE_STEP_NCCL);
  assert_int_equal(gr__live_publish("running"), 0);
  read_live(&lv);
  assert_int_equal(lv.ncreating, 1);
  assert_string_equal(lv.creating[0].step, "nccl");
  gr__live_create_end();
  assert_int_equal(gr__live_publish("running"), 0);
  read_live(&lv);
  assert_int_equal(lv.ncreating, 0);

  /* GR_LIVE_MAX_CREATING + 1 threads inside at once: the slots are shown, the extra one is not
   * (and ends without a slot to free). */
  enum { H = GR_LIVE_MAX_CREATING + 1 };
  pthread_t h[H];
  pthread_barrier_init(&inside, NULL, H + 1);
  pthread_barrier_init(&leave, NULL, H + 1);
  for (int i = 0; i < H; i++)
    assert_int_equal(pthread_create(&h[i], NULL, holder, NULL), 0);
  pthread_barrier_wait(&inside);
  assert_int_equal(gr__live_publish("running"), 0);
  read_live(&lv);
  assert_int_equal(lv.ncreating, GR_LIVE_MAX_CREATING);
  pthread_barrier_wait(&leave);
  for (int i = 0; i < H; i++)
    pthread_join(h[i], NULL);
  pthread_barrier_destroy(&inside);
  pthread_barrier_destroy(&leave);
  assert_int_equal(gr__live_publish("running"), 0);
  read_live(&lv);
  assert_int_equal(lv.ncreating, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_stress)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
