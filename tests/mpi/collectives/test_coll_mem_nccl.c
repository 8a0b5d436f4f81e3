/* gr_mem_alloc, gr_mem_free, gr_mem_register and gr_mem_deregister on the NCCL backend, over the
 * NCCL test double (which counts what it holds: grdbl_mem_census):
 * - gr_mem_alloc gives ncclMemAlloc memory registered as a symmetric window on every rank, or
 *   plain device memory on every rank when one rank's NCCL has no windows (or the ranks share a
 *   GPU), zeroed; allreduce, allgather, reduce-scatter and broadcast in place on it are exact;
 * - gr_mem_register registers a device buffer with NCCL once (a host buffer: nothing), exact the
 *   same way, and gr_mem_deregister undoes it;
 * - misuse (sizes that differ, another communicator's pointer, freed or deregistered twice) and a
 *   failure on one rank (ncclMemAlloc, the window) give every rank one error naming the rank, and
 *   leave nothing allocated or registered;
 * - gr_comm_destroy frees what is left and deregisters it before NCCL's destroy; so does a destroy
 *   after gr_comm_abort. The double refuses a double free and a pointer it did not give.
 *   test_coll_mem_nccl [--shared]   (--shared: GRDBL_GPUS puts every rank on one GPU) */
#include <gpurun/coll.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static int world_rank;
#define GR_TEST_RANK world_rank
#include "gr_check.h"
#include "nccl_double/include/nccl.h"
#include "world_comm.h"

extern const gr__coll_ops gr__coll_ops_nccl_double;

static int P;

/* The first element of buf[0, n) that is not want(i), reported. */
#define CHECK_ALL(what, where, n, buf, want)                                                       \
  do {                                                                                             \
    for (size_t i_ = 0; i_ < (n); i_++) {                                                          \
      size_t i = i_;                                                                               \
      if ((buf)[i] != (int32_t)(want)) {                                                           \
        FAIL("%s on %s: element %zu is %d, not %d", what, where, i, (int)(buf)[i], (int)(want));   \
        break;                                                                                     \
      }                                                                                            \
    }                                                                                              \
  } while (0)

/* In place on buf (room for n * P int32): an allreduce of n, an allgather of n per rank, a
 * reduce-scatter to n per rank and a broadcast of n from the last rank, each exact. */
static void exact_in_place(gr_comm *c, int32_t *buf, size_t n, const char *where) {
  const int32_t tri = P * (P + 1) / 2, me = world_rank;
  for (size_t i = 0; i < n; i++)
    buf[i] = (me + 1) * (int32_t)(i % 7 + 1);
  EXPECT_OK(gr_allreduce(buf, buf, n, GR_INT32, GR_SUM, c, NULL));
  EXPECT_OK(gr_comm_synchronize(c, NULL));
  CHECK_ALL("allreduce", where, n, buf, tri * (int32_t)(i % 7 + 1));

  for (size_t i = 0; i < n * (size_t)P; i++)
    buf[i] = -1;
  for (size_t i = 0; i < n; i++)
    buf[(size_t)me * n + i] = me * 1000 + (int32_t)i;
  EXPECT_OK(gr_allgather(buf + (size_t)me * n, buf, n, GR_INT32, c, NULL));
  EXPECT_OK(gr_comm_synchronize(c, NULL));
  CHECK_ALL("allgather", where, n * (size_t)P, buf, (int32_t)(i / n) * 1000 + (int32_t)(i % n));

  for (size_t i = 0; i < n * (size_t)P; i++)
    buf[i] = (me + 1) * (int32_t)(i % 11);
  EXPECT_OK(gr_reduce_scatter(buf, buf + (size_t)me * n, n, GR_INT32, GR_SUM, c, NULL));
  EXPECT_OK(gr_comm_synchronize(c, NULL));
  int32_t *mine = buf + (size_t)me * n;
  CHECK_ALL("reduce-scatter", where, n, mine, tri * (int32_t)(((size_t)me * n + i) % 11));

  int root = P - 1;
  for (size_t i = 0; i < n; i++)
    buf[i] = me == root ? 5 * (int32_t)i + 3 : -1;
  EXPECT_OK(gr_broadcast(buf, buf, n, GR_INT32, root, c, NULL));
  EXPECT_OK(gr_comm_synchronize(c, NULL));
  CHECK_ALL("broadcast", where, n, buf, 5 * (int32_t)i + 3);
}

static void expect_counts(const char *when, grdbl_mem_counts got, grdbl_mem_counts want) {
  if (got.device_allocs != want.device_allocs || got.nccl_allocs != want.nccl_allocs ||
      got.registrations != want.registrations || got.windows != want.windows ||
      got.left_at_destroy != want.left_at_destroy)
    FAIL("%s: the double holds %d device allocations (%d ncclMemAlloc), %d registrations, %d "
         "windows, %d left at destroy; expected %d (%d), %d, %d, %d",
         when, got.device_allocs, got.nccl_allocs, got.registrations, got.windows,
         got.left_at_destroy, want.device_allocs, want.nccl_allocs, want.registrations,
         want.windows, want.left_at_destroy);
}

/* The double's own model, on two communicators of its own (blocking): what real NCCL refuses with
 * ncclInvalidArgument it refuses too, and its destroy counts what was left registered. */
static void double_refuses(void) {
  ncclUniqueId id;
  memset(&id, 0, sizeof id);
  if (world_rank == 0) REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t one = NULL, two = NULL;
  REQUIRE(ncclCommInitRankConfig(&one, P, id, world_rank, NULL) == ncclSuccess && one);
  REQUIRE(ncclCommSplit(one, 0, world_rank, &two, NULL) == ncclSuccess && two);
  grdbl_mem_counts k = grdbl_mem_census();
  void *dev = NULL, *mem = NULL, *h = NULL, *h2 = NULL;
  int host[64];
  REQUIRE(cudaMalloc(&dev, 8192) == cudaSuccess);
  REQUIRE(ncclMemAlloc(&mem, 8192) == ncclSuccess && mem);
  /* registrations: device memory only, deregistered once, on their own communicator */
  EXPECT(ncclCommRegister(one, host, sizeof host, &h) == ncclInvalidArgument && !h);
  EXPECT(ncclCommRegister(one, dev, 8192 + 1, &h) == ncclInvalidArgument);
  EXPECT(ncclCommRegister(one, dev, 8192, &h) == ncclSuccess && h);
  EXPECT(ncclCommDeregister(two, h) == ncclInvalidArgument);
  EXPECT(ncclCommDeregister(one, host) == ncclInvalidArgument);
  EXPECT(ncclCommDeregister(one, h) == ncclSuccess);
  EXPECT(ncclCommDeregister(one, h) == ncclInvalidArgument);
  /* windows: ncclMemAlloc's memory and one size on every rank, or an error on every rank */
  ncclWindow_t w = NULL;
  EXPECT(ncclCommWindowRegister(one, dev, 8192, &w, NCCL_WIN_COLL_SYMMETRIC) ==
             ncclInvalidArgument &&
         !w);
  EXPECT(ncclCommWindowRegister(one, mem, world_rank == 0 ? 4096 : 8192, &w,
                                NCCL_WIN_COLL_SYMMETRIC) == ncclInvalidArgument);
  EXPECT(ncclCommWindowRegister(one, mem, 8192, &w, NCCL_WIN_COLL_SYMMETRIC) == ncclSuccess && w);
  EXPECT(ncclCommWindowDeregister(two, w) == ncclInvalidArgument);
  EXPECT(ncclCommDeregister(one, w) == ncclInvalidArgument); /* a window is not a registration */
  EXPECT(ncclCommWindowDeregister(one, w) == ncclSuccess);
  EXPECT(ncclCommWindowDeregister(one, w) == ncclInvalidArgument);
  /* memory: ncclMemFree of its own once, cudaFree refuses it */
  EXPECT(cudaFree(mem) == cudaErrorInvalidValue);
  cudaGetLastError();
  EXPECT(ncclMemFree(dev) == ncclInvalidArgument);
  EXPECT(ncclMemFree(mem) == ncclSuccess);
  EXPECT(ncclMemFree(mem) == ncclInvalidArgument);
  /* destroy with a registration and a window left: dropped and counted */
  REQUIRE(ncclMemAlloc(&mem, 4096) == ncclSuccess);
  EXPECT(ncclCommRegister(two, dev, 4096, &h2) == ncclSuccess);
  EXPECT(ncclCommWindowRegister(two, mem, 4096, &w, NCCL_WIN_COLL_SYMMETRIC) == ncclSuccess);
  k.left_at_destroy += 2;
  EXPECT(ncclCommDestroy(two) == ncclSuccess);
  EXPECT(ncclCommDestroy(one) == ncclSuccess);
  EXPECT(ncclMemFree(mem) == ncclSuccess);
  EXPECT(cudaFree(dev) == cudaSuccess);
  expect_counts("after the double's own checks", grdbl_mem_census(), k);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  int shared = argc > 1 && strcmp(argv[1], "--shared") == 0;
  const int last = P - 1;
  char want[200];

  if (!shared) double_refuses(); /* the double's NCCL refuses two ranks on one GPU */
  const grdbl_mem_counts base = grdbl_mem_census();
  gr_comm *c = world_comm(&gr__coll_ops_nccl_double, 20, 0);
  REQUIRE(c != NULL);
  grdbl_mem_counts k = grdbl_mem_census(); /* what the communicator holds of its own */
  const size_t n = 1000, bytes = n * (size_t)P * sizeof(int32_t);

  /* gr_mem_alloc: windows on NCCL's memory (plain device memory with a shared GPU) */
  int32_t *a = NULL, *b = NULL;
  REQUIRE_OK(gr_mem_alloc(c, bytes, (void **)&a));
  REQUIRE_OK(gr_mem_alloc(c, bytes, (void **)&b));
  REQUIRE(a && b && a != b);
  CHECK_ALL("gr_mem_alloc", "new memory", n * (size_t)P, a, 0);
  CHECK_ALL("gr_mem_alloc", "new memory", n * (size_t)P, b, 0);
  k.device_allocs += 2;
  if (!shared) k.nccl_allocs += 2, k.windows += 2;
  expect_counts("after two gr_mem_alloc", grdbl_mem_census(), k);
  exact_in_place(c, a, n, "gr_mem_alloc memory");
  exact_in_place(c, b, n, "more gr_mem_alloc memory");
  for (size_t i = 0; i < n; i++) /* and out of place, from one to the other */
    a[i] = world_rank + (int32_t)i;
  EXPECT_OK(gr_allreduce(a, b, n, GR_INT32, GR_MAX, c, NULL));
  EXPECT_OK(gr_comm_synchronize(c, NULL));
  CHECK_ALL("allreduce a -> b", "gr_mem_alloc memory", n, b, last + (int32_t)i);

  /* the double refuses what NCCL and CUDA refuse: ncclMemFree of a pointer it did not give,
   * cudaFree of ncclMemAlloc's memory */
  int on_stack = 0;
  EXPECT(ncclMemFree(&on_stack) == ncclInvalidArgument);
  EXPECT(ncclMemFree(a + 1) == ncclInvalidArgument);
  if (!shared) {
    EXPECT(cudaFree(a) == cudaErrorInvalidValue);
    cudaGetLastError();
  }

  /* sizes that differ: rank 1 asks for twice as much */
  void *p = (void *)1;
  EXPECT_ST_MSG(gr_mem_alloc(c, world_rank == 1 ? 2 * bytes : bytes, &p), GR_ERR_MISMATCH,
                "rank 1 asks for");
  EXPECT(p == NULL);
  expect_counts("after sizes that differ", grdbl_mem_census(), k);

  /* ncclMemAlloc (cudaMalloc with a shared GPU: then the failure is the window's, below) fails
   * on the last rank only */
  if (!shared) {
    if (world_rank == last) grdbl_fail_next_mem_alloc(ncclUnhandledCudaError);
    snprintf(want, sizeof want, "rank %d: ncclMemAlloc failed", last);
    EXPECT_ST_MSG(gr_mem_alloc(c, bytes, &p), GR_ERR_NCCL, want);
    EXPECT(p == NULL);
    expect_counts("after ncclMemAlloc failed on one rank", grdbl_mem_census(), k);
    /* the window fails on rank 0: the others' windows are deregistered, all memory freed */
    if (world_rank == 0) grdbl_fail_next_window(ncclInternalError);
    EXPECT_ST_MSG(gr_mem_alloc(c, bytes, &p), GR_ERR_NCCL, "rank 0: ncclCommWindowRegister failed");
    EXPECT(p == NULL);
    expect_counts("after the window failed on one rank", grdbl_mem_census(), k);
  }

  /* another communicator's memory, on the last rank only */
  gr_comm *dup = NULL;
  void *other = NULL;
  REQUIRE_OK(gr_comm_split(c, 0, world_rank, &dup));
  grdbl_mem_counts kd = grdbl_mem_census();
  REQUIRE_OK(gr_mem_alloc(dup, 4096, &other));
  snprintf(want, sizeof want,
           "rank %d: the pointer is not memory gr_mem_alloc gave on this communicator", last);
  EXPECT_ST_MSG(gr_mem_free(c, world_rank == last ? other : a), GR_ERR_INVALID, want);
  k = kd; /* with dup's own */
  k.device_allocs++;
  if (!shared) k.nccl_allocs++, k.windows++;
  expect_counts("after freeing another communicator's memory", grdbl_mem_census(), k);

  /* freed, then freed again */
  EXPECT_OK(gr_mem_free(c, a));
  k.device_allocs--;
  if (!shared) k.nccl_allocs--, k.windows--;
  expect_counts("after gr_mem_free", grdbl_mem_census(), k);
  EXPECT_ST_MSG(gr_mem_free(c, a), GR_ERR_INVALID,
                "rank 0: the pointer is not memory gr_mem_alloc");
  expect_counts("after freeing twice", grdbl_mem_census(), k);

  /* gr_mem_register on a device buffer: registered once with NCCL, reused by every call */
  int32_t *d = NULL,
          *h = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(cudaMalloc((void **)&d, bytes) == cudaSuccess && d && h != MAP_FAILED);
  k.device_allocs++;
  gr_mem_handle *hd = NULL, *hh = NULL;
  REQUIRE_OK(gr_mem_register(c, d, bytes, &hd));
  if (!shared) k.registrations++;
  expect_counts("after gr_mem_register of device memory", grdbl_mem_census(), k);
  exact_in_place(c, d, n, "a registered device buffer");
  exact_in_place(c, d, n, "a registered device buffer, again");
  EXPECT_OK(gr_mem_deregister(c, hd));
  if (!shared) k.registrations--;
  expect_counts("after gr_mem_deregister", grdbl_mem_census(), k);
  EXPECT_ST_MSG(gr_mem_deregister(c, hd), GR_ERR_INVALID,
                "rank 0: the handle is not one gr_mem_register gave");
  /* a host buffer: accepted, nothing registered with NCCL, the calls stage it */
  REQUIRE_OK(gr_mem_register(c, h, bytes, &hh));
  expect_counts("after gr_mem_register of host memory", grdbl_mem_census(), k);
  exact_in_place(c, h, n, "a registered host buffer");
  EXPECT_OK(gr_mem_deregister(c, hh));
  munmap(h, bytes);
  /* two small device buffers side by side (one page): each registers alone, by its bytes; a
   * range over both overlaps them */
  unsigned char *pair = NULL;
  REQUIRE(cudaMalloc((void **)&pair, 512) == cudaSuccess && pair);
  gr_mem_handle *h1 = NULL, *h2 = NULL, *h3 = NULL;
  EXPECT_OK(gr_mem_register(c, pair, 256, &h1));
  EXPECT_OK(gr_mem_register(c, pair + 256, 256, &h2));
  EXPECT_ST_MSG(gr_mem_register(c, pair + 128, 256, &h3), GR_ERR_INVALID,
                "rank 0: the buffer overlaps memory already registered");
  EXPECT(h3 == NULL);
  EXPECT_OK(gr_mem_deregister(c, h1));
  EXPECT_OK(gr_mem_deregister(c, h2));
  cudaFree(pair);
  expect_counts("after the two small registrations", grdbl_mem_census(), k);

  /* one rank's NCCL without windows: plain device memory on every rank */
  if (world_rank == last) grdbl_set_version(NCCL_VERSION(2, 26, 0));
  int32_t *plain = NULL;
  REQUIRE_OK(gr_mem_alloc(c, bytes, (void **)&plain));
  grdbl_set_version(0);
  CHECK_ALL("gr_mem_alloc", "new plain memory", n * (size_t)P, plain, 0);
  k.device_allocs++;
  expect_counts("after gr_mem_alloc with one rank's NCCL without windows", grdbl_mem_census(), k);
  exact_in_place(c, plain, n, "plain device memory from gr_mem_alloc");

  /* destroy with b, plain and a registration of d left: all freed and deregistered before
   * NCCL's destroy (which would count them) */
  REQUIRE_OK(gr_mem_register(c, d, bytes, &hd));
  EXPECT_OK(gr_comm_destroy(dup));
  EXPECT_OK(gr_comm_destroy(c));
  grdbl_mem_counts end = base;
  end.device_allocs++; /* d, the test's own */
  expect_counts("after gr_comm_destroy with memory left", grdbl_mem_census(), end);
  cudaFree(d);

  /* an aborted communicator: its NCCL registrations went with NCCL's, the memory is freed */
  gr_comm *ab = world_comm(&gr__coll_ops_nccl_double, 20, 0);
  REQUIRE(ab != NULL);
  REQUIRE_OK(gr_mem_alloc(ab, bytes, &p));
  EXPECT_OK(gr_comm_abort(ab));
  gr_comm_destroy(ab); /* the status of an aborted communicator's destroy is not this test's */
  expect_counts("after gr_comm_destroy of an aborted communicator", grdbl_mem_census(), base);

  int total = 0;
  MPI_Allreduce(&gr_test_failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (!world_rank)
    printf("gr_mem_alloc on the NCCL double at %d ranks%s: %d failures\n", P,
           shared ? " (one GPU)" : "", total);
  MPI_Finalize();
  return total ? 1 : 0;
}
