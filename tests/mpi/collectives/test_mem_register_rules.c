/* gr_mem_register's rules on the MPI backend, at 2 or 3 ranks on one node: the registration is the
 * memory's, not one communicator's, and it never writes memory the buffer does not cover.
 * - a buffer that starts or ends inside a page is refused with the sentence that says why, and
 *   the page's other bytes are never rolled back: a thread that increments a counter on the
 *   buffer's first page (or on the pages beside a page-aligned buffer) while the main thread
 *   registers and deregisters loses no increment;
 * - a page registered or allocated on communicator A is refused on communicator B with a sentence
 *   naming A, and every allreduce on A and on B stays exact; once A lets go of it, B registers it
 *   and both stay exact.
 *   test_mem_register_rules */
#include <gpurun/coll.h>
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int world_rank;
#define GR_TEST_RANK world_rank
#include "gr_check.h"
#include "world_comm.h"

#define PAGE 4096u

/* n floats of buf allreduced (SUM) on c, several times, each exact: rank r sends (r + 1) * (i % 7 +
 * round), so the sum is P (P + 1) / 2 * (i % 7 + round). */
static void exact(gr_comm *c, float *buf, size_t n, const char *what) {
  int P = gr_comm_size(c);
  for (int round = 0; round < 4; round++) {
    for (size_t i = 0; i < n; i++)
      buf[i] = (float)(world_rank + 1) * (float)(i % 7 + (size_t)round);
    EXPECT_OK_IN(gr_allreduce(buf, buf, n, GR_FLOAT32, GR_SUM, c, NULL), what);
    size_t bad = 0, first = n;
    for (size_t i = 0; i < n; i++)
      if (buf[i] != (float)(P * (P + 1) / 2) * (float)(i % 7 + (size_t)round)) {
        bad++;
        if (first == n) first = i;
      }
    if (bad) {
      FAIL("%s: round %d: %zu of %zu elements wrong (first: %zu is %g)", what, round, bad, n, first,
           buf[first]);
      return;
    }
  }
}

static void *pages(size_t n) {
  void *p = NULL;
  REQUIRE(posix_memalign(&p, PAGE, n * PAGE) == 0);
  memset(p, 0, n * PAGE);
  return p;
}

/* ---- another thread's writes beside the buffer ------------------------------------------- */
typedef struct {
  volatile uint64_t *counter[2];
  int stop;     /* atomic */
  uint64_t did; /* increments made to each counter */
} writer;

static void *write_loop(void *arg) {
  writer *w = arg;
  while (!__atomic_load_n(&w->stop, __ATOMIC_ACQUIRE)) {
    for (int j = 0; j < 2; j++)
      if (w->counter[j]) *w->counter[j] += 1;
    w->did++;
  }
  return NULL;
}

/* Register and deregister buf (bytes) rounds times on c while a thread increments the counters;
 * want: the status every registration must give. */
static void race(gr_comm *c, void *buf, size_t bytes, volatile uint64_t *c0, volatile uint64_t *c1,
                 gr_status want, const char *what) {
  writer w = {{c0, c1}, 0, 0};
  *c0 = 0;
  if (c1) *c1 = 0;
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, write_loop, &w) == 0);
  for (int i = 0; i < 40; i++) {
    gr_mem_handle *h = NULL;
    gr_status st = gr_mem_register(c, buf, bytes, &h);
    if (st != want)
      FAIL("%s: registration %d gave %s (%s)", what, i, gr_status_name(st), gr_last_error());
    if (st == GR_OK) EXPECT_OK_IN(gr_mem_deregister(c, h), what);
  }
  __atomic_store_n(&w.stop, 1, __ATOMIC_RELEASE);
  pthread_join(t, NULL);
  if (*c0 != w.did || (c1 && *c1 != w.did))
    FAIL("%s: the thread made %llu increments beside the buffer; the counters hold %llu and %llu",
         what, (unsigned long long)w.did, (unsigned long long)*c0,
         (unsigned long long)(c1 ? *c1 : w.did));
}

int main(int argc, char **argv) {
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  gr_comm *a = world_comm(NULL, 20, 0), *b = world_comm(NULL, 20, 0);
  REQUIRE(a != NULL && b != NULL);
  char want[200];
  gr_mem_handle *h = NULL, *hb = NULL;

  /* 1. a buffer that starts inside a page, or ends inside one, is refused (every rank) */
  unsigned char *blk = pages(4);
  EXPECT_ST_MSG(gr_mem_register(a, blk + 16, 2 * PAGE, &h), GR_ERR_INVALID,
                "rank 0: the buffer shares a page with memory it does not cover");
  EXPECT_MSG("it starts 16 bytes into a page");
  EXPECT_ST_MSG(gr_mem_register(a, blk + PAGE, PAGE + 100, &h), GR_ERR_INVALID,
                "it ends 3996 bytes before the end of a page");
  /* only rank 1's is off a page boundary: all refuse, naming rank 1 */
  EXPECT_ST_MSG(gr_mem_register(a, blk + PAGE + (world_rank == 1 ? 8 : 0), PAGE, &h),
                GR_ERR_INVALID, "rank 1: the buffer shares a page");
  if (h) FAIL("a refused registration gave a handle");

  /* 2. the same page-aligned buffer on two communicators: A's, and B refuses it naming A */
  float *x = pages(8);
  size_t xn = 8 * PAGE / sizeof *x;
  REQUIRE_OK(gr_mem_register(a, x, 8 * PAGE, &h));
  snprintf(want, sizeof want, "communicator %s holds them; nothing was registered", a->id);
  EXPECT_ST_MSG(gr_mem_register(b, x + xn / 2, 2 * PAGE, &hb), GR_ERR_INVALID,
                "rank 0: some of the buffer's pages are registered or allocated on another "
                "communicator");
  EXPECT_MSG(want);
  exact(a, x, xn, "x registered on A, allreduce on A");
  exact(b, x, xn, "x registered on A, allreduce on B");
  exact(a, x + 1000, 3000, "x registered on A, part of it on A");

  /* 3. A's gr_mem_alloc memory: B refuses to register it */
  float *m = NULL;
  REQUIRE_OK(gr_mem_alloc(a, 4 * PAGE, (void **)&m));
  EXPECT_ST_MSG(gr_mem_register(b, m, 4 * PAGE, &hb), GR_ERR_INVALID,
                "pages are registered or allocated on another communicator");
  exact(a, m, 4 * PAGE / sizeof *m, "A's memory, allreduce on A");
  exact(b, m, 4 * PAGE / sizeof *m, "A's memory, allreduce on B");
  EXPECT_OK(gr_mem_free(a, m));

  /* 4. deregistered on A: B may take it, and both communicators stay exact */
  EXPECT_OK(gr_mem_deregister(a, h));
  exact(b, x, xn, "x deregistered on A, allreduce on B");
  REQUIRE_OK(gr_mem_register(b, x, 8 * PAGE, &hb));
  EXPECT_ST_MSG(gr_mem_register(a, x, PAGE, &h), GR_ERR_INVALID, "pages are registered");
  exact(b, x, xn, "x registered on B, allreduce on B");
  exact(a, x, xn, "x registered on B, allreduce on A");
  EXPECT_OK(gr_mem_deregister(b, hb));
  exact(a, x, xn, "x deregistered on B, allreduce on A");

  /* 5. another thread's writes beside the buffer survive registration: on the buffer's own first
   * page (refused), and on the pages around a page-aligned buffer (taken) */
  unsigned char *r = pages(4);
  race(a, r + 64, 2 * PAGE, (volatile uint64_t *)(void *)r, NULL, GR_ERR_INVALID,
       "a counter on the first page");
  race(a, r + PAGE, 2 * PAGE, (volatile uint64_t *)(void *)(r + PAGE - 8),
       (volatile uint64_t *)(void *)(r + 3 * PAGE), GR_OK, "counters on the pages around");
  free(r);

  /* 6. destroying A lets its pages go: B registers what A held when destroyed */
  REQUIRE_OK(gr_mem_register(a, x, 8 * PAGE, &h));
  EXPECT_OK(gr_comm_destroy(a));
  REQUIRE_OK(gr_mem_register(b, x, 8 * PAGE, &hb));
  exact(b, x, xn, "x registered on B after A's destroy");
  EXPECT_OK(gr_mem_deregister(b, hb));
  EXPECT_OK(gr_comm_destroy(b));
  free(x);
  free(blk);
  int total = 0;
  MPI_Allreduce(&gr_test_failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (!world_rank) printf("gr_mem_register's rules: %d failures\n", total);
  MPI_Finalize();
  return total ? 1 : 0;
}
