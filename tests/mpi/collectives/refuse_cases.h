/* The refusal cases test_coll_refuse.c (the MPI backend) and test_coll_refuse_nccl.c (the NCCL
 * backend over its test double) both run, each followed by the file's own still_works(). Every
 * case is refused by the last rank R only unless it says otherwise. Include after expect.h and
 * expect_refused.h in a file that defines `static int rank, size, failures, opt_timeout,
 * opt_check;` and `static void still_works(gr_comm *c, const char *after)`. a and b: buffers of at least 64 int32
 * per rank, readable here once the communicator is synchronised; a holds data, b is scratch. */
#ifndef REFUSE_CASES_H
#define REFUSE_CASES_H

#include <gpurun/coll.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void still_works(gr_comm *c, const char *after);

/* An allreduce with a NULL recv: the first case of both. */
static void refuse_null_recv(gr_comm *c, int32_t *a, int32_t *b) {
  const int R = size - 1, me = rank == R;
  gr_status st = gr_allreduce(a, me ? NULL : b, 4, GR_INT32, GR_SUM, c, NULL);
  refused("allreduce with a NULL recv", st, R, "recv is NULL", "recv");
  still_works(c, "allreduce with a NULL recv");
}

/* Overlapping buffers; then a root out of range on one rank, after which a correct broadcast gets
 * the new data there too. */
static void refuse_overlap_and_root(gr_comm *c, int32_t *a, int32_t *b) {
  const int R = size - 1, me = rank == R;
  gr_status st = gr_allreduce(a, me ? a + 1 : b, 8, GR_FLOAT32, GR_MAX, c, NULL);
  refused("allreduce with overlapping buffers", st, R, "overlap", "overlap");
  still_works(c, "allreduce with overlapping buffers");

  for (int i = 0; i < 4; i++)
    b[i] = rank == 0 ? 100 + i : -1;
  st = gr_broadcast(b, b, 4, GR_INT32, me ? size : 0, c, NULL);
  refused("broadcast with a root out of range", st, R, "out of range", "root");
  for (int i = 0; i < 4; i++)
    b[i] = rank == 0 ? 200 + i : -1;
  EXPECT_ST(gr_broadcast(b, b, 4, GR_INT32, 0, c, NULL), GR_OK);
  EXPECT_ST(gr_comm_synchronize(c, NULL), GR_OK);
  for (int i = 0; i < 4; i++)
    if (b[i] != 200 + i)
      FAIL("broadcast after a refused one: b[%d] = %d, expected %d", i, b[i], 200 + i);
  still_works(c, "broadcast with a root out of range");
}

/* A reduce with a NULL send; gr_allgather(v, v, n): in place on rank 0, overlapping elsewhere
 * (refused by ranks 1 and up). */
static void refuse_reduce_and_allgather(gr_comm *c, int32_t *a, int32_t *b) {
  const int R = size - 1, me = rank == R;
  gr_status st = gr_reduce(me ? NULL : a, b, 6, GR_INT64, GR_SUM, 0, c, NULL);
  refused("reduce with a NULL send", st, R, "send is NULL", "send");
  still_works(c, "reduce with a NULL send");

  st = gr_allgather(b, b, 4, GR_INT32, c, NULL);
  refused("allgather(v, v, n)", st, rank == 0 ? 1 : rank, "overlaps recv", "overlap");
  still_works(c, "allgather(v, v, n)");
}

/* reduce_scatter and alltoall; then requests: where the refusing rank gets no request (the
 * shared-memory path, check mode, the NCCL backend) the others fail at the start or the wait; on
 * the MPI algorithms every rank gets a request whose wait fails (test_coll_reqrefuse.c has the
 * cases there). */
static void refuse_scatter_alltoall_requests(gr_comm *c, int32_t *a, int32_t *b) {
  const int R = size - 1, me = rank == R;
  gr_status st = gr_reduce_scatter(a, me ? NULL : b, 5, GR_INT32, GR_MIN, c, NULL);
  refused("reduce_scatter with a NULL recv", st, R, "recv is NULL", "recv");
  still_works(c, "reduce_scatter with a NULL recv");

  st = gr_alltoall(me ? NULL : a, b, 2, GR_INT32, c, NULL);
  refused("alltoall with a NULL send", st, R, "send is NULL", "send");
  still_works(c, "alltoall with a NULL send");

  gr_request *q = NULL;
  st = gr_iallreduce(a, me ? NULL : b, 4, GR_INT32, GR_SUM, c, NULL, &q);
  if (st == GR_OK && q)
    st = gr_wait(&q);
  else if (q)
    FAIL("a refused gr_iallreduce left a request");
  refused("gr_iallreduce with a NULL recv", st, R, "recv is NULL", "recv");
  still_works(c, "gr_iallreduce with a NULL recv");
  st = gr_ibroadcast(a, b, 4, GR_INT32, me ? -1 : 0, c, NULL, &q);
  if (st == GR_OK && q) st = gr_wait(&q);
  refused("gr_ibroadcast with a root out of range", st, R, "out of range", "root");
  still_works(c, "gr_ibroadcast with a root out of range");
}

/* A group (the refusing rank's second call), gr_allreduce_multi with a NULL buffer on one rank,
 * and calls every rank refuses alike (the same status everywhere, and nothing hangs). */
static void refuse_group_multi_everyone(gr_comm *c, int32_t *a, int32_t *b) {
  const int R = size - 1, me = rank == R;
  EXPECT_ST(gr_group_start(), GR_OK);
  EXPECT_ST(gr_allreduce(a, b, 4, GR_INT32, GR_SUM, c, NULL), GR_OK);
  EXPECT_ST(gr_allreduce(me ? NULL : a, b + 4, 4, GR_INT32, GR_SUM, c, NULL),
            me ? GR_ERR_INVALID : GR_OK);
  gr_status st = gr_group_end();
  refused("a group with a refused call", st, R, "", "send");
  still_works(c, "a group with a refused call");

  const void *s2[2] = {a, a + 8};
  void *r2[2] = {b, me ? NULL : b + 8};
  size_t n2[2] = {8, 8};
  st = gr_allreduce_multi(s2, r2, n2, 2, GR_INT32, GR_SUM, c, NULL);
  refused("gr_allreduce_multi with a NULL buffer", st, R, "recv is NULL", "recv");
  still_works(c, "gr_allreduce_multi with a NULL buffer");

  EXPECT_ST(gr_allreduce(a, b, 4, GR_INT32, GR_AVG, c, NULL), GR_ERR_INVALID);
  EXPECT_ST(gr_broadcast(a, b, 4, GR_INT32, -3, c, NULL), GR_ERR_INVALID);
  still_works(c, "refusals on every rank");
}

/* main() of both: options --timeout and --check, run() when there is more than one rank, and the
 * failures of all ranks summed on rank 0 ("LABEL[ --timeout][ --check][ (ENV set)]: N failures");
 * 1 if there are any. */
static int refuse_main(int argc, char **argv, void (*run)(void), const char *label,
                       const char *env) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  for (int i = 1; i < argc; i++) {
    opt_timeout |= strcmp(argv[i], "--timeout") == 0;
    opt_check |= strcmp(argv[i], "--check") == 0;
  }
  if (size > 1) run();
  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  char note[64] = "";
  if (getenv(env)) snprintf(note, sizeof note, " (%s set)", env);
  if (rank == 0)
    printf("%s%s%s%s: %d failures\n", label, opt_timeout ? " --timeout" : "",
           opt_check ? " --check" : "", note, total);
  MPI_Finalize();
  return total ? 1 : 0;
}

#endif
