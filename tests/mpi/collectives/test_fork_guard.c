/* A child of fork() and the parent's objects, at 2 ranks: every call the child makes on the
 * parent's communicator, request, memory or group refuses with GR_ERR_STATE and a sentence naming
 * the parent, and touches nothing: the parent's outstanding allreduce and the calls after it stay
 * exact. (Without the guard the child's gr_test completed the parent's request, and the parent's
 * gr_wait returned GR_OK with elements wrong.)
 * Compiled once more with FORK_NCCL_DOUBLE for the NCCL backend over the test double.
 *   test_fork_guard [--runtime]   (--runtime: through gr_init/gr_world, and gr_finalize in the
 *                                   child refuses too) */
#include <gpurun/coll.h>
#include <gpurun/runtime.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int world_rank;
#define GR_TEST_RANK world_rank
#include "gr_check.h"
#include "world_comm.h"
#ifdef FORK_NCCL_DOUBLE
extern const gr__coll_ops gr__coll_ops_nccl_double;
#define BACKEND_OPS (&gr__coll_ops_nccl_double)
#else
#define BACKEND_OPS NULL
#endif

#define N 300000

/* In the child: each call on the parent's objects must refuse (GR_ERR_STATE, naming the parent
 * process). Returns the number of calls that did not. */
static int child_calls(gr_comm *c, gr_request *req, float *buf, gr_mem_handle *h, int runtime,
                       int group_open) {
  int bad = 0;
  char parent[32];
  snprintf(parent, sizeof parent, "process %d", (int)getppid());
#define REFUSES(call)                                                                              \
  do {                                                                                             \
    gr_clear_error();                                                                              \
    gr_status st_ = (call);                                                                        \
    if (st_ != GR_ERR_STATE || !strstr(gr_last_error(), "child of fork()") ||                      \
        !strstr(gr_last_error(), parent)) {                                                        \
      fprintf(stderr, "[rank %d child] %s gave %s: %s\n", world_rank, #call, gr_status_name(st_),  \
              gr_last_error());                                                                    \
      bad++;                                                                                       \
    }                                                                                              \
  } while (0)
  /* a group the parent left open at fork() (one allreduce queued) runs nothing here; in a group
   * the child opens, the call refuses at once and the group is empty */
  if (group_open) {
    REFUSES(gr_group_end());
  } else {
    gr_group_start();
    REFUSES(gr_allreduce(buf, buf, 16, GR_FLOAT32, GR_SUM, c, NULL));
    if (gr_group_end() != GR_OK) bad++, fprintf(stderr, "an empty group failed in the child\n");
  }
  int done = 0;
  gr_request *copy = req;
  REFUSES(gr_test(&copy, &done));
  if (done || copy != req) bad++, fprintf(stderr, "gr_test in the child touched the request\n");
  REFUSES(gr_wait(&copy));
  REFUSES(gr_allreduce(buf, buf, 16, GR_FLOAT32, GR_SUM, c, NULL));
  gr_request *r2 = NULL;
  REFUSES(gr_ibarrier(c, &r2));
  REFUSES(gr_barrier(c));
  REFUSES(gr_send(buf, 1, GR_FLOAT32, 0, c, NULL));
  REFUSES(gr_mem_deregister(c, h));
  gr_mem_handle *h2 = NULL;
  REFUSES(gr_mem_register(c, buf, 4096, &h2));
  void *p = NULL;
  REFUSES(gr_mem_alloc(c, 4096, &p));
  gr_comm *sub = NULL;
  REFUSES(gr_comm_split(c, 0, 0, &sub));
  REFUSES(gr_comm_abort(c));
  REFUSES(gr_comm_destroy(c));
  REFUSES(gr_comm_synchronize(c, NULL));
  if (runtime) REFUSES(gr_finalize());
#undef REFUSES
  return bad;
}

int main(int argc, char **argv) {
  int runtime = argc > 1 && strcmp(argv[1], "--runtime") == 0;
  gr_comm *c = NULL;
  if (runtime) {
    REQUIRE_OK(gr_init(&argc, &argv));
    c = gr_world();
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  } else {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    c = world_comm(BACKEND_OPS, 20, 0);
  }
  REQUIRE(c != NULL);
  int P = gr_comm_size(c);
  float *in = NULL, *out = malloc(N * sizeof *out), *small = NULL;
  REQUIRE(posix_memalign((void **)&in, 4096, N * sizeof *in) == 0 && out);
  REQUIRE(posix_memalign((void **)&small, 4096, 4096) == 0);
  for (size_t i = 0; i < N; i++)
    in[i] = (float)(world_rank + 1) * (float)(i % 11);
  gr_mem_handle *h = NULL;
  REQUIRE_OK(gr_mem_register(c, small, 4096, &h));

  for (int round = 0; round < 3; round++) {
    memset(out, 0, N * sizeof *out);
    gr_request *req = NULL;
    REQUIRE_OK(gr_iallreduce(in, out, N, GR_FLOAT32, GR_SUM, c, NULL, &req));
    int group_open = round == 1; /* the second round forks inside a group with a call queued */
    float g[4] = {1, 2, 3, 4};
    if (group_open) {
      REQUIRE_OK(gr_group_start());
      REQUIRE_OK(gr_allreduce(g, g, 4, GR_FLOAT32, GR_SUM, c, NULL));
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) _exit(child_calls(c, req, small, h, runtime, group_open) ? 3 : 0);
    REQUIRE(pid > 0);
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
      FAIL("round %d: the child's calls did not all refuse (status %#x)", round, status);
    if (group_open) {
      EXPECT_OK(gr_group_end());
      EXPECT(g[0] == (float)P && g[3] == 4.0f * (float)P);
    }
    EXPECT_OK(gr_wait(&req));
    size_t bad = 0;
    for (size_t i = 0; i < N; i++)
      bad += out[i] != (float)(P * (P + 1) / 2) * (float)(i % 11);
    if (bad) FAIL("round %d: after the child, %zu of %d elements are wrong", round, bad, N);
  }
  /* the communicator, its registration and its memory are still the parent's to use */
  for (int i = 0; i < 1024; i++)
    small[i] = 1;
  EXPECT_OK(gr_allreduce(small, small, 1024, GR_FLOAT32, GR_SUM, c, NULL));
  EXPECT(small[1023] == (float)P);
  EXPECT_OK(gr_mem_deregister(c, h));
  int total = 0;
  MPI_Allreduce(&gr_test_failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (!world_rank) printf("fork guard at %d ranks: %d failures\n", P, total);
  if (runtime) {
    EXPECT_OK(gr_finalize());
  } else {
    EXPECT_OK(gr_comm_destroy(c));
    MPI_Finalize();
  }
  free(in), free(out), free(small);
  return total ? 1 : 0;
}
