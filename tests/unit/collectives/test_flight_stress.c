/* The flight recorder's lock-free recording (observe/gr_flight.h) under concurrent writers and
 * readers, all on one recorder: two threads begin and end their own calls, a third begins calls
 * that a fourth ends (a request finished on another thread than the one that started it), while a
 * reader thread takes gr__flight_latest and a dumper thread writes and parses the flight file
 * over and over. Every field of a record is a function of its seq, so a torn copy (fields of two
 * calls, or a begin's fields with the end of another) shows. At the end the recorder must hold
 * every call begun, and busy_s the exact sum of the ends that were recorded. Meant for the TSan
 * build too (scripts/build tsan). No MPI job: MPI is never initialised. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gr_dtype.h"
#include "gr_flight.h"

#define CALLS 20000 /* per beginning thread */
#define OWN 2       /* threads that begin and end their own calls */
#define QUEUE 16    /* calls the handing thread may have waiting for the ending one */
#define BEGINNERS (OWN + 1)
/* each call takes this long by its timestamps: a power of two, so that the sum is exact */
#define TOOK (1.0 / 1024)

/* Checks inside the threads (cmocka's assertions belong to the test's own thread): print, abort. */
#define CHECK(c)                                                                                   \
  do {                                                                                             \
    if (!(c)) {                                                                                    \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c);                        \
      abort();                                                                                     \
    }                                                                                              \
  } while (0)
#define CHECK_EQ(a, b) CHECK((long long)(a) == (long long)(b))
#define CHECK_STR(a, b) CHECK(strcmp((a), (b)) == 0)

static gr__flight *f;
static atomic_int stop;
static _Atomic long recorded_ends; /* ends that found their record */
static long latest_reads, dumps, dumped_records;
static char dir[128], dumpdir[256];

static gr__kind kind_of(uint64_t seq) {
  return seq % 3 == 0 ? GR__SEND : seq % 3 == 1 ? GR__RECV : GR__ALLREDUCE;
}
static int p2p(uint64_t seq) { return kind_of(seq) != GR__ALLREDUCE; }
static gr_dtype dtype_of(uint64_t seq) { return seq % 2 ? GR_FLOAT32 : GR_INT32; }
static double start_of(uint64_t seq) { return 1000.0 + (double)seq; }

static int begin(uint64_t seq) {
  return gr__flight_begin(f, seq, (int)kind_of(seq), (size_t)(seq * 3), (int)dtype_of(seq),
                          p2p(seq) ? -1 : (int)(seq % 7), p2p(seq) ? (int)(seq % 5) : -1,
                          (int)(seq % 1000), start_of(seq));
}
static void end(int slot, uint64_t seq) {
  if (gr__flight_end(f, slot, seq, GR__FL_DONE, start_of(seq) + TOOK))
    atomic_fetch_add(&recorded_ends, 1);
}

static void *own(void *arg) {
  uint64_t base = (uint64_t)(long)arg * CALLS;
  for (uint64_t i = 1; i <= CALLS; i++)
    end(begin(base + i), base + i);
  return NULL;
}

/* The hand-over from the beginning thread to the ending one: a single-producer ring. */
static struct {
  int slot;
  uint64_t seq;
} queue[QUEUE];
static atomic_ulong q_put, q_take;

static void *hander(void *arg) {
  (void)arg;
  uint64_t base = (uint64_t)OWN * CALLS;
  for (uint64_t i = 1; i <= CALLS; i++) {
    unsigned long p = atomic_load_explicit(&q_put, memory_order_relaxed);
    while (p - atomic_load_explicit(&q_take, memory_order_acquire) >= QUEUE)
      sched_yield();
    queue[p % QUEUE].slot = begin(base + i);
    queue[p % QUEUE].seq = base + i;
    atomic_store_explicit(&q_put, p + 1, memory_order_release);
  }
  return NULL;
}

static void *ender(void *arg) {
  (void)arg;
  for (unsigned long t = 0; t < CALLS; t++) {
    while (atomic_load_explicit(&q_put, memory_order_acquire) == t)
      sched_yield();
    int slot = queue[t % QUEUE].slot;
    uint64_t seq = queue[t % QUEUE].seq;
    atomic_store_explicit(&q_take, t + 1, memory_order_release);
    end(slot, seq);
  }
  return NULL;
}

static void *reader(void *arg) {
  (void)arg;
  while (!atomic_load(&stop)) {
    gr__flight_now now[2];
    CHECK_EQ(gr__flight_latest(now, 2), 1);
    gr__flight_now *o = &now[0];
    CHECK(o->calls <= (uint64_t)BEGINNERS * CALLS);
    latest_reads++;
    if (!o->calls) continue;
    uint64_t seq = o->seq;
    CHECK(seq >= 1 && seq <= (uint64_t)BEGINNERS * CALLS);
    CHECK_STR(o->op, gr__kind_name(kind_of(seq)));
    CHECK_EQ(o->count, seq * 3);
    CHECK(o->start == start_of(seq));
    if (o->state == GR__FL_RUNNING)
      CHECK(o->end == 0.0);
    else
      CHECK(o->state == GR__FL_DONE && o->end == start_of(seq) + TOOK);
    CHECK(o->busy_s >= 0.0 && o->busy_s <= BEGINNERS * CALLS * TOOK);
    for (int i = 0; i < o->nwaits; i++) {
      CHECK(o->waits[i].peer >= 0 && o->waits[i].peer < 5);
      CHECK(o->waits[i].tag >= 0 && o->waits[i].tag < 1000);
    }
  }
  return NULL;
}

/* One record line of the dump, checked against its seq. */
static void check_line(const char *l) {
  unsigned long long seq;
  char op[16], dtype[16];
  size_t count;
  int root, peer, n = 0;
  CHECK_EQ(sscanf(l,
                  "{\"seq\": %llu, \"op\": \"%15[^\"]\", \"count\": %zu, \"dtype\": "
                  "\"%15[^\"]\", \"root\": %d, \"peer\": %d, %n",
                  &seq, op, &count, dtype, &root, &peer, &n),
           6);
  CHECK(seq >= 1 && seq <= (unsigned long long)BEGINNERS * CALLS);
  CHECK_STR(op, gr__kind_name(kind_of(seq)));
  CHECK_EQ(count, seq * 3);
  CHECK_STR(dtype, gr__dtype_name(dtype_of(seq)));
  CHECK_EQ(root, p2p(seq) ? -1 : (int)(seq % 7));
  CHECK_EQ(peer, p2p(seq) ? (int)(seq % 5) : -1);
  l += n;
  if (p2p(seq)) {
    int tag;
    CHECK_EQ(sscanf(l, "\"tag\": %d, %n", &tag, &n), 1);
    CHECK_EQ(tag, (int)(seq % 1000));
    l += n;
  }
  double start;
  CHECK_EQ(sscanf(l, "\"start\": %lf, %n", &start, &n), 1);
  CHECK(start == start_of(seq));
  l += n;
  double e = 0.0;
  int running = strncmp(l, "\"end\": null", 11) == 0;
  if (!running) {
    CHECK_EQ(sscanf(l, "\"end\": %lf", &e), 1);
    CHECK(e > start_of(seq) + TOOK - 1e-6 && e < start_of(seq) + TOOK + 1e-6);
  }
  CHECK(strstr(l, running ? "\"state\": \"running\"" : "\"state\": \"done\""));
  CHECK(strstr(l, p2p(seq) ? "\"cseq\": null" : "\"cseq\": "));
  dumped_records++;
}

static void *dumper(void *arg) {
  (void)arg;
  char path[512], line[512];
  while (!atomic_load(&stop)) {
    CHECK_EQ(gr__flight_dump("test", path, sizeof path), GR_OK);
    CHECK(strncmp(path, dumpdir, strlen(dumpdir)) == 0);
    FILE *fp = fopen(path, "r");
    CHECK(fp);
    int records = 0;
    while (fgets(line, sizeof line, fp)) {
      const char *l = line + strspn(line, " ,");
      if (strncmp(l, "{\"seq\"", 6) != 0) continue;
      check_line(l);
      records++;
    }
    fclose(fp);
    CHECK(records <= GR__FLIGHT_N);
    dumps++;
    usleep(500);
  }
  return NULL;
}

static void test_stress(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/gr_flight_stress.XXXXXX");
  assert_non_null(mkdtemp(dir));
  setenv("GPURUN_MONITOR_DIR", dir, 1);
  snprintf(dumpdir, sizeof dumpdir, "%s/fstress/", dir);
  gr__flight_arm("fstress");
  f = gr__flight_new("comm-stress", 0, 1, "mpi");
  assert_non_null(f);
  pthread_t rd, dp, th[BEGINNERS + 1];
  assert_int_equal(pthread_create(&rd, NULL, reader, NULL), 0);
  assert_int_equal(pthread_create(&dp, NULL, dumper, NULL), 0);
  for (long i = 0; i < OWN; i++)
    assert_int_equal(pthread_create(&th[i], NULL, own, (void *)i), 0);
  assert_int_equal(pthread_create(&th[OWN], NULL, hander, NULL), 0);
  assert_int_equal(pthread_create(&th[OWN + 1], NULL, ender, NULL), 0);
  for (int i = 0; i < BEGINNERS + 1; i++)
    pthread_join(th[i], NULL);
  usleep(20000);
  atomic_store(&stop, 1);
  pthread_join(rd, NULL);
  pthread_join(dp, NULL);

  gr__flight_now now;
  assert_int_equal(gr__flight_latest(&now, 1), 1);
  assert_int_equal(now.calls, (uint64_t)BEGINNERS * CALLS);
  assert_int_equal(now.state, GR__FL_DONE);
  /* every recorded end added exactly TOOK, concurrently: the sum is exact */
  assert_true(now.busy_s == (double)atomic_load(&recorded_ends) * TOOK);
  assert_true(atomic_load(&recorded_ends) > BEGINNERS * CALLS / 2);
  printf("recorded ends %ld of %d, latest read %ld times, %ld dumps (%ld records)\n",
         atomic_load(&recorded_ends), BEGINNERS * CALLS, latest_reads, dumps, dumped_records);
  assert_true(latest_reads > 0 && dumps > 0 && dumped_records > 0);

  /* the last dump, with every writer gone: the newest GR__FLIGHT_N records, all done */
  char path[512], line[512];
  assert_int_equal(gr__flight_dump("test", path, sizeof path), GR_OK);
  FILE *fp = fopen(path, "r");
  assert_non_null(fp);
  int records = 0, done = 0;
  while (fgets(line, sizeof line, fp)) {
    const char *l = line + strspn(line, " ,");
    if (strncmp(l, "{\"seq\"", 6) != 0) continue;
    check_line(l);
    records++;
    done += strstr(l, "\"state\": \"done\"") != NULL;
  }
  fclose(fp);
  assert_int_equal(records, GR__FLIGHT_N);
  assert_int_equal(done, GR__FLIGHT_N);
  gr__flight_release(f);
  char cmd[200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_stress)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
