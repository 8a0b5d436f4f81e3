/* gr_mem_alloc and gr_mem_free misused, at 3 ranks on one node: each mistake on one rank gives
 * every rank the same error and a sentence naming that rank, nothing hangs, and the communicator
 * stays usable (an allreduce on a window afterwards is exact and runs direct). /dev/shm holds the
 * same gpurun names before and after (the script-free census: the test counts them itself; with
 * GPURUN_SHM_SEGMENT=posix the windows take the named fallback, unlinked at once). The same for
 * gr_mem_register: a handle NULL, pages that overlap, deregistered twice, contents kept.
 *   test_coll_mem */
#include <gpurun/coll.h>
#include <dirent.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int world_rank;
#define GR_TEST_RANK world_rank
#include "gr_check.h"
#include "gr_shm.h" /* gr__shm_direct_calls */
#include "world_comm.h"

static int shm_names(void) {
  DIR *d = opendir("/dev/shm");
  int n = 0;
  for (struct dirent *e; d && (e = readdir(d));)
    n += strncmp(e->d_name, "gpurun-", 7) == 0;
  if (d) closedir(d);
  return n;
}

/* An allreduce of 8 KiB floats on two window buffers: exact, and direct. */
static void exact_on(gr_comm *c, float *send, float *recv, int P) {
  size_t n = 2048;
  for (size_t i = 0; i < n; i++)
    send[i] = (float)(world_rank + 1) * (float)(i % 5);
  uint64_t before = gr__shm_direct_calls();
  EXPECT_OK(gr_allreduce(send, recv, n, GR_FLOAT32, GR_SUM, c, NULL));
  for (size_t i = 0; i < n; i++)
    if (recv[i] != (float)(P * (P + 1) / 2) * (float)(i % 5)) {
      FAIL("element %zu is %g", i, recv[i]);
      break;
    }
  EXPECT(gr__shm_direct_calls() == before + 1);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  int P;
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  if (P != 3) {
    if (!world_rank) fprintf(stderr, "test_coll_mem runs at 3 ranks\n");
    MPI_Finalize();
    return 1;
  }
  int names_before = shm_names();
  gr_comm *c = world_comm(NULL, 20, 0);
  REQUIRE(c != NULL);
  void *p = (void *)1, *q = NULL, *other = NULL;
  char want[160];

  /* sizes that differ: rank 1 asks for twice as much */
  EXPECT_ST_MSG(gr_mem_alloc(c, world_rank == 1 ? 8192 : 4096, &p), GR_ERR_MISMATCH,
                "rank 0 asks for 4096 bytes, rank 1 asks for 8192 bytes; nothing was allocated");
  EXPECT(p == NULL);
  /* bytes 0 on rank 2, ptr NULL on rank 0 */
  EXPECT_ST_MSG(gr_mem_alloc(c, world_rank == 2 ? 0 : 4096, &p), GR_ERR_INVALID,
                "rank 2: bytes is 0");
  EXPECT_ST_MSG(gr_mem_alloc(c, 4096, world_rank == 0 ? NULL : &p), GR_ERR_INVALID,
                "rank 0: ptr is NULL");

  /* two good ones */
  REQUIRE_OK(gr_mem_alloc(c, 1 << 16, &p));
  REQUIRE_OK(gr_mem_alloc(c, 1 << 16, &q));
  REQUIRE(p && q && p != q);
  exact_on(c, p, q, P);
  exact_on(c, q, q, P); /* in place */

  /* memory of another communicator, on rank 1 only */
  gr_comm *dup = NULL;
  REQUIRE_OK(gr_comm_split(c, 0, world_rank, &dup));
  REQUIRE_OK(gr_mem_alloc(dup, 4096, &other));
  EXPECT_ST_MSG(gr_mem_free(c, world_rank == 1 ? other : p), GR_ERR_INVALID,
                "rank 1: the pointer is not memory gr_mem_alloc gave on this communicator");
  /* a pointer inside an allocation is not the allocation */
  EXPECT_ST_MSG(gr_mem_free(c, (char *)p + 64), GR_ERR_INVALID,
                "rank 0: the pointer is not memory");
  /* ranks that free different allocations */
  EXPECT_ST_MSG(gr_mem_free(c, world_rank == 2 ? q : p), GR_ERR_MISMATCH,
                "rank 0 frees allocation #0, rank 2 frees allocation #1; nothing was freed");
  /* NULL on one rank only; NULL on every rank is nothing to do */
  EXPECT_ST_MSG(gr_mem_free(c, world_rank == 1 ? NULL : p), GR_ERR_MISMATCH,
                "rank 1 passes NULL while rank 0 passes memory");
  EXPECT_OK(gr_mem_free(c, NULL));

  /* a request outstanding on the communicator (every rank has one; each names rank 0) */
  gr_request *req = NULL;
  REQUIRE_OK(gr_iallreduce(p, q, 2048, GR_FLOAT32, GR_SUM, c, NULL, &req));
  EXPECT_ST_MSG(gr_mem_free(c, p), GR_ERR_STATE,
                "rank 0: requests or grouped calls are outstanding");
  EXPECT_OK(gr_wait(&req));

  /* after all that, p and q are still windows */
  exact_on(c, p, q, P);
  EXPECT_OK(gr_mem_free(c, p));
  /* freed twice */
  snprintf(want, sizeof want, "rank 0: the pointer is not memory gr_mem_alloc gave");
  EXPECT_ST_MSG(gr_mem_free(c, p), GR_ERR_INVALID, want);
  /* registration: a page-aligned buffer of whole pages made reachable in place; one off a page
   * boundary, overlapping pages, a NULL handle, deregistered twice */
  size_t rn = 2048;
  float *rb = NULL, *rsend, *rrecv;
  REQUIRE(posix_memalign((void **)&rb, 4096, 3 * rn * sizeof *rb) == 0);
  rsend = rb, rrecv = rb + rn;
  gr_mem_handle *h = NULL, *h2 = NULL;
  EXPECT_ST_MSG(gr_mem_register(c, rb + 3, 2 * rn * sizeof *rb, &h), GR_ERR_INVALID,
                "rank 0: the buffer shares a page with memory it does not cover");
  EXPECT_ST_MSG(gr_mem_register(c, rsend, 2 * rn * sizeof *rb, world_rank == 2 ? NULL : &h),
                GR_ERR_INVALID, "rank 2: handle is NULL");
  REQUIRE_OK(gr_mem_register(c, rsend, 2 * rn * sizeof *rb, &h));
  EXPECT_ST_MSG(gr_mem_register(c, rrecv + rn - 1024, 4096, &h2), GR_ERR_INVALID,
                "rank 0: the buffer's pages overlap memory already registered");
  EXPECT_ST_MSG(gr_mem_register(c, q, 4096, &h2), GR_ERR_INVALID,
                "rank 0: the buffer's pages overlap");
  exact_on(c, rsend, rrecv, P);
  EXPECT_OK(gr_mem_deregister(c, h));
  EXPECT_ST_MSG(gr_mem_deregister(c, h), GR_ERR_INVALID,
                "rank 0: the handle is not one gr_mem_register gave");
  EXPECT_ST_MSG(gr_mem_free(c, rsend), GR_ERR_INVALID, "rank 0: the pointer is not memory");
  for (size_t i = 0; i < rn; i++) /* the contents stayed (the sum of the last allreduce) */
    if (rrecv[i] != (float)(P * (P + 1) / 2) * (float)(i % 5)) {
      FAIL("registered recv element %zu is %g after gr_mem_deregister", i, rrecv[i]);
      break;
    }
  free(rb);

  /* q is left for gr_comm_destroy; dup's with its own destroy */
  EXPECT_OK(gr_comm_destroy(dup));
  EXPECT_OK(gr_comm_destroy(c));

  /* a communicator without the segment (GPURUN_COLL_ALGO=mpi is read at creation): private
   * memory, usable by every call */
  setenv("GPURUN_COLL_ALGO", "mpi", 1);
  gr_comm *m = world_comm(NULL, 20, 0);
  REQUIRE(m != NULL);
  float *x = NULL;
  REQUIRE_OK(gr_mem_alloc(m, 4096 * sizeof *x, (void **)&x));
  for (int i = 0; i < 4096; i++)
    x[i] = 1;
  uint64_t before = gr__shm_direct_calls();
  EXPECT_OK(gr_allreduce(x, x, 4096, GR_FLOAT32, GR_SUM, m, NULL));
  EXPECT(x[4095] == (float)P && gr__shm_direct_calls() == before);
  EXPECT_OK(gr_mem_free(m, x));
  EXPECT_OK(gr_comm_destroy(m));
  unsetenv("GPURUN_COLL_ALGO");

  int names_after = shm_names();
  EXPECT_EQ(names_after, names_before);
  int total = 0;
  MPI_Allreduce(&gr_test_failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (!world_rank) printf("gr_mem_alloc misuse at %d ranks: %d failures\n", P, total);
  MPI_Finalize();
  return total ? 1 : 0;
}
