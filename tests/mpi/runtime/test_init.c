/* gr_init / gr_finalize under mpirun: the state machine, gr_rank_info against what MPI and the OS
 * say independently, the world communicator and the default pool, and the counters file.
 * usage: test_init [lifecycle|plan|monitored]
 *   lifecycle  no plan in the environment (local rank from MPI, cpuset from the OS), or, when
 *              started by gpurun, the plan it exported
 *   plan       GPURUN_* plan variables set by the test (one rank: local 0 of 1, cpus "0")
 *   monitored  like lifecycle, then checks <GPURUN_MONITOR_DIR>/<GPURUN_JOB_ID>/...counters.json
 * In every mode gr_init leaves GPURUN_JOB_ID as it found it. */
#include <gpurun/runtime.h>

#include <hwloc.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gr_config.h"
#if GPURUN_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

static int me = -1;
#define GR_TEST_RANK me
#include "gr_check.h"

/* Cores (not hardware threads) this process may run on, asked of hwloc directly. */
static int bound_cores(void) {
  hwloc_topology_t t;
  hwloc_topology_init(&t);
  hwloc_topology_load(t);
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  int n = -1;
  if (hwloc_get_cpubind(t, set, HWLOC_CPUBIND_PROCESS) == 0) {
    n = 0;
    int depth = hwloc_get_type_depth(t, HWLOC_OBJ_CORE);
    for (unsigned i = 0; depth >= 0 && i < hwloc_get_nbobjs_by_depth(t, depth); i++)
      n += hwloc_bitmap_intersects(hwloc_get_obj_by_depth(t, depth, i)->cpuset, set);
  }
  hwloc_bitmap_free(set);
  hwloc_topology_destroy(t);
  return n;
}

/* GPUs the CUDA runtime shows this process, asked of it directly (0 without CUDA in the build, or
 * without a driver or device: every machine without a GPU). */
static int cuda_devices(void) {
  int n = 0;
#if GPURUN_HAVE_CUDA
  if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
#endif
  return n;
}

/* Entries in a comma-separated list ("" and NULL: 0). */
static int list_len(const char *s) {
  if (!s || !*s) return 0;
  int n = 1;
  for (; *s; s++)
    n += *s == ',';
  return n;
}

/* The GPUs gr_rank_info must report: none in CPU mode (CUDA sees no device), whatever the plan
 * listed; else the plan's list when gpurun gave one, else every device CUDA sees (up to the cap). */
static int expected_gpus(const gr_rank_info_t *ri) {
  int cuda = cuda_devices();
  if (cuda <= 0) return 0;
  if (ri->from_plan) return list_len(getenv("GPURUN_GPUS"));
  return cuda < GR_MAX_RANK_GPUS ? cuda : GR_MAX_RANK_GPUS;
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return NULL;
  static char buf[8192];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = '\0';
  fclose(f);
  return buf;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "lifecycle";
  gr_rank_info_t ri;

  /* Before init: clear errors, no handles. */
  REQUIRE(!gr_initialized());
  REQUIRE(gr_world() == NULL && gr_default_pool() == NULL);
  REQUIRE(gr_rank_info(&ri) == GR_ERR_STATE);
  REQUIRE(strstr(gr_last_error(), "gr_rank_info") && strstr(gr_last_error(), "not initialised"));
  REQUIRE(gr_finalize() == GR_ERR_STATE);
  REQUIRE(strstr(gr_last_error(), "gr_finalize") && strstr(gr_last_error(), "gr_init first"));

  gr_stream early = (gr_stream)&ri;
  REQUIRE(gr_stream_create(&early) != GR_OK && early == NULL); /* STATE, or UNSUPPORTED w/o CUDA */
  REQUIRE(strstr(gr_last_error(), "gr_stream_create"));

  /* gr_init hands the job id to observability as an argument: the environment stays the
   * program's (a job id unset before is unset after, one set stays as it was). */
  const char *job_env = getenv("GPURUN_JOB_ID");
  char job_before[128];
  snprintf(job_before, sizeof job_before, "%s", job_env ? job_env : "");
  int job_was_set = job_env != NULL;
  REQUIRE(gr_init(&argc, &argv) == GR_OK);
  job_env = getenv("GPURUN_JOB_ID");
  REQUIRE((job_env != NULL) == job_was_set && (!job_env || !strcmp(job_env, job_before)));
  REQUIRE(gr_initialized());
  REQUIRE(gr_init(&argc, &argv) == GR_ERR_STATE);
  REQUIRE(strstr(gr_last_error(), "already initialised"));

  /* Independent answers: MPI itself and the OS. */
  int rank, size, thread;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  me = rank;
  MPI_Query_thread(&thread);
  /* gr_init asks for MPI_THREAD_MULTIPLE, which Debian's Open MPI grants. */
  REQUIRE(thread == MPI_THREAD_MULTIPLE);
  REQUIRE(gr_rank_info(NULL) == GR_ERR_INVALID);
  REQUIRE(gr_rank_info(&ri) == GR_OK);
  REQUIRE(ri.rank == rank && ri.size == size);
  char host[256];
  gethostname(host, sizeof host);
  REQUIRE(strcmp(ri.node, host) == 0);
  REQUIRE(ri.ngpus == expected_gpus(&ri));

  /* gr_stream at the rank's priority: a stream with a GPU, else GR_ERR_UNSUPPORTED and a
   * sentence naming the call; NULL arguments are invalid either way. */
  REQUIRE(gr_stream_create(NULL) == GR_ERR_INVALID);
  REQUIRE(gr_stream_destroy(NULL) == GR_ERR_INVALID);
  gr_stream st = (gr_stream)&ri;
  if (ri.ngpus > 0) {
    REQUIRE(gr_stream_create(&st) == GR_OK && st != NULL);
    REQUIRE(gr_stream_destroy(st) == GR_OK);
  } else {
    REQUIRE(gr_stream_create(&st) == GR_ERR_UNSUPPORTED);
    REQUIRE(st == NULL);
    REQUIRE(strstr(gr_last_error(), "gr_stream_create") &&
            (strstr(gr_last_error(), "no CUDA device") || strstr(gr_last_error(), "has no CUDA")));
  }

  gr_comm *w = gr_world();
  REQUIRE(w != NULL);
  REQUIRE(gr_comm_rank(w) == rank && gr_comm_size(w) == size);
  REQUIRE(ri.backend == gr_comm_backend(w));
  int64_t mine = rank + 1, sum = 0;
  REQUIRE(gr_allreduce(&mine, &sum, 1, GR_INT64, GR_SUM, w, NULL) == GR_OK);
  REQUIRE(sum == (int64_t)size * (size + 1) / 2);
  gr_pool *p = gr_default_pool();
  REQUIRE(p != NULL);

  if (!strcmp(mode, "plan")) {
    REQUIRE(ri.from_plan == 1);
    REQUIRE(ri.local_rank == 0 && ri.local_size == 1);
    REQUIRE(strcmp(ri.cpus, "0") == 0);
    REQUIRE(ri.numa == 0);
    REQUIRE(strcmp(ri.nic, "eth9") == 0);
    REQUIRE(gr_pool_nthreads(p) == 1); /* sized to the plan's one-CPU cpuset */
  } else if (getenv("GPURUN_PLAN_VERSION")) {
    /* Started by gpurun: the plan it exported, and the binding it applied. */
    REQUIRE(ri.from_plan == 1);
    REQUIRE(ri.local_rank == atoi(getenv("GPURUN_LOCAL_RANK")));
    REQUIRE(ri.local_size == atoi(getenv("GPURUN_LOCAL_SIZE")));
    REQUIRE(getenv("GPURUN_CPUS") && strcmp(ri.cpus, getenv("GPURUN_CPUS")) == 0);
    REQUIRE(gr_pool_nthreads(p) == bound_cores());
  } else {
    /* All ranks of these tests share one node: local == world. */
    REQUIRE(ri.from_plan == 0);
    REQUIRE(ri.local_rank == rank && ri.local_size == size);
    REQUIRE(ri.cpus[0] != '\0');
    REQUIRE(gr_pool_nthreads(p) == bound_cores());
  }

  if (!strcmp(mode, "monitored")) {
    /* Some traffic for the counters, and time for the supervisor (if any) to sample. */
    for (int i = 0; i < 20; i++) {
      REQUIRE(gr_allreduce(&mine, &sum, 1, GR_INT64, GR_SUM, w, NULL) == GR_OK);
      struct timespec ts = {0, 10 * 1000 * 1000};
      nanosleep(&ts, NULL);
    }
    REQUIRE(gr_barrier(w) == GR_OK);
  }

  /* A request outstanding on the world: gr_finalize refuses and finalizes nothing (MPI
   * included), the request's wait still works, and the next gr_finalize does it all. */
  gr_request *req = NULL;
  int64_t rsum = 0;
  REQUIRE(gr_iallreduce(&mine, &rsum, 1, GR_INT64, GR_SUM, w, NULL, &req) == GR_OK);
  REQUIRE(gr_finalize() == GR_ERR_STATE);
  REQUIRE(strstr(gr_last_error(), "outstanding") &&
          strstr(gr_last_error(), "nothing was finalized"));
  REQUIRE(gr_initialized());
  int mpi_fin = 1;
  MPI_Finalized(&mpi_fin);
  REQUIRE(!mpi_fin);
  REQUIRE(gr_wait(&req) == GR_OK);
  REQUIRE(rsum == (int64_t)size * (size + 1) / 2);

  REQUIRE(gr_finalize() == GR_OK);
  REQUIRE(!gr_initialized());
  REQUIRE(gr_world() == NULL && gr_default_pool() == NULL);
  REQUIRE(gr_finalize() == GR_ERR_STATE);
  REQUIRE(strstr(gr_last_error(), "already finalized"));
  REQUIRE(gr_rank_info(&ri) == GR_ERR_STATE);
  REQUIRE(strstr(gr_last_error(), "after gr_finalize"));
  REQUIRE(gr_init(&argc, &argv) == GR_ERR_STATE);
  REQUIRE(strstr(gr_last_error(), "after gr_finalize"));

  if (!strcmp(mode, "monitored")) {
    const char *dir = getenv("GPURUN_MONITOR_DIR"), *job = getenv("GPURUN_JOB_ID");
    REQUIRE(dir && job);
    char path[1024];
    snprintf(path, sizeof path, "%s/%s/%s.%d.counters.json", dir, job, host, ri.local_rank);
    char *text = slurp(path);
    REQUIRE(text != NULL);
    /* 1 + 20 allreduces of one int64 (8 bytes each), the request refused finalize waited for,
     * and one barrier. */
    REQUIRE(strstr(text, "\"allreduce\": {\"calls\": 22, \"bytes\": 176,"));
    REQUIRE(strstr(text, "\"barrier\": {\"calls\": 1,"));
    char want[64];
    snprintf(want, sizeof want, "{\"rank\": %d, \"size\": %d,", rank, size);
    REQUIRE(strncmp(text, want, strlen(want)) == 0);
    REQUIRE(strstr(text, "\"pool\": {\"threads\": "));
    /* the level gpurun --priority exported (normal when none) */
    const char *lvl = getenv("GPURUN_PRIORITY");
    snprintf(want, sizeof want, "\"priority\": \"%s\"", lvl && *lvl ? lvl : "normal");
    REQUIRE(strstr(text, want));
  }
  if (rank == 0) printf("test_init %s: OK on %d ranks\n", mode, size);
  return 0;
}
