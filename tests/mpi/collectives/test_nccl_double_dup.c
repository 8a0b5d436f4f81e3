/* Plain NCCL (the test double, no grouping) refuses two ranks on one GPU as NCCL 2.28 does
 * (init.cc, initTransportsRank: ncclInvalidUsage, "Duplicate GPU detected : rank R and rank Q both
 * on CUDA device <busId in hex>", Q the first other rank on R's GPU), blocking and non-blocking,
 * over the world and over a subset; gpurun's NCCL backend with the grouping switched off
 * (GPURUN_NCCL_SHARE=0) fails the same way, and with it on creates the communicator.
 * The expected message is computed here from GRDBL_GPUS, independently of the double.
 * Usage (under mpirun, GRDBL_GPUS set so that every rank shares its GPU with another):
 *   test_nccl_double_dup */
#include <gpurun/coll.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gr_coll.h"
#include "nccl_double/include/nccl.h"

extern const gr__coll_ops gr__coll_ops_nccl_double;

static int wrank, wsize, failures;
#define GR_TEST_RANK wrank
#define GR_TEST_FAILURES failures
#include "gr_check.h"

/* World rank r's bus id as a number (hex digits of the id up to any "/mig" suffix). */
static unsigned long bus_of(int r) {
  const char *env = getenv("GRDBL_GPUS");
  int n = 1;
  for (const char *p = env; *p; p++)
    n += *p == ',';
  const char *p = env;
  for (int i = 0; i < r % n; i++)
    p = strchr(p, ',') + 1;
  unsigned long v = 0;
  for (; *p && *p != ',' && *p != '/'; p++)
    if (*p != ':' && *p != '.')
      v = v * 16 + (unsigned long)(*p <= '9' ? *p - '0' : (*p | 32) - 'a' + 10);
  return v;
}

/* The message NCCL gives rank `me` of a communicator whose members are world ranks world[]. */
static int expected(const int *world, int n, int me, char *out, size_t len) {
  for (int i = 0; i < n; i++)
    if (i != me && bus_of(world[i]) == bus_of(world[me])) {
      snprintf(out, len, "Duplicate GPU detected : rank %d and rank %d both on CUDA device %lx", me,
               i, bus_of(world[me]));
      return 1;
    }
  return 0;
}

/* ncclCommInitRankConfig over `sub` (a communicator of the world ranks world[]). */
static void init_over(MPI_Comm sub, const int *world, int blocking, const char *what) {
  int r, n;
  MPI_Comm_rank(sub, &r);
  MPI_Comm_size(sub, &n);
  ncclUniqueId id;
  if (r == 0 && ncclGetUniqueId(&id) != ncclSuccess) FAIL("%s: ncclGetUniqueId", what);
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, sub);
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = blocking;
  ncclComm_t nc = NULL;
  ncclResult_t rc = ncclCommInitRankConfig(&nc, n, id, r, &cfg);
  if (!blocking && rc == ncclInProgress) {
    ncclResult_t a = ncclInProgress;
    while (a == ncclInProgress)
      if (ncclCommGetAsyncError(nc, &a) != ncclSuccess) {
        FAIL("%s: ncclCommGetAsyncError", what);
        a = ncclInternalError;
      }
    rc = a;
  }
  char want[256];
  int dup = expected(world, n, r, want, sizeof want);
  if (!dup) {
    if (rc != ncclSuccess)
      FAIL("%s: rank %d has a GPU of its own but got %s", what, r, ncclGetErrorString(rc));
  } else {
    const char *got = ncclGetLastError(blocking ? NULL : nc);
    if (rc != ncclInvalidUsage)
      FAIL("%s: rank %d: %s, want invalid usage", what, r, ncclGetErrorString(rc));
    if (strcmp(got, want) != 0) FAIL("%s: rank %d: message '%s', want '%s'", what, r, got, want);
  }
  if (nc) ncclCommAbort(nc);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
  MPI_Comm_size(MPI_COMM_WORLD, &wsize);
  if (!getenv("GRDBL_GPUS")) {
    fprintf(stderr, "set GRDBL_GPUS\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  int *world = malloc(sizeof(int) * (size_t)wsize);
  for (int i = 0; i < wsize; i++)
    world[i] = i;
  init_over(MPI_COMM_WORLD, world, 1, "world, blocking");
  init_over(MPI_COMM_WORLD, world, 0, "world, non-blocking");
  /* A subset in reverse order (the double's point-to-point bootstrap): ranks >= 1. */
  if (wsize > 2) {
    MPI_Comm sub;
    MPI_Comm_split(MPI_COMM_WORLD, wrank >= 1 ? 0 : MPI_UNDEFINED, -wrank, &sub);
    if (sub != MPI_COMM_NULL) {
      for (int i = 0; i < wsize - 1; i++)
        world[i] = wsize - 1 - i;
      init_over(sub, world, 0, "subset, non-blocking");
      MPI_Comm_free(&sub);
    }
  }
  /* gpurun's NCCL backend: grouping off -> NCCL's refusal; on -> a communicator. */
  gr_comm_config cfg;
  gr_comm_config_init(&cfg);
  cfg.timeout_s = 60;
  gr_comm *c = NULL;
  setenv("GPURUN_NCCL_SHARE", "0", 1);
  gr_status st = gr__comm_create_ops(MPI_COMM_WORLD, &cfg, &gr__coll_ops_nccl_double, &c);
  char want[256];
  for (int i = 0; i < wsize; i++)
    world[i] = i;
  if (expected(world, wsize, wrank, want, sizeof want)) {
    if (st != GR_ERR_NCCL || !strstr(gr_last_error(), want))
      FAIL("grouping off: %s (%s), want GR_ERR_NCCL naming '%s'", gr_status_name(st),
           gr_last_error(), want);
  }
  if (c) gr_comm_destroy(c);
  c = NULL;
  unsetenv("GPURUN_NCCL_SHARE");
  st = gr__comm_create_ops(MPI_COMM_WORLD, &cfg, &gr__coll_ops_nccl_double, &c);
  if (st != GR_OK) FAIL("grouping on: %s (%s)", gr_status_name(st), gr_last_error());
  if (c) {
    /* one allreduce against the closed form: sum of (rank + 1) */
    int v = wrank + 1, out = 0;
    st = gr_allreduce(&v, &out, 1, GR_INT32, GR_SUM, c, NULL);
    if (st != GR_OK || out != wsize * (wsize + 1) / 2)
      FAIL("allreduce: %s, %d want %d", gr_status_name(st), out, wsize * (wsize + 1) / 2);
    gr_comm_destroy(c);
  }
  free(world);
  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (wrank == 0)
    printf("nccl double duplicate-GPU refusal at %d ranks: %d failures\n", wsize, total);
  MPI_Finalize();
  return total ? 1 : 0;
}
