/* MPI_Comm_spawn for the MPI layer's tests (test_spawn.sh): the parents (every rank of the job
 * mpirun starts) spawn 2 children of this program, both sides merge the intercommunicator and
 * allreduce over the merged one, each result checked against a value computed without MPI.
 *   spawn_cases [DIR]  as a parent; with DIR, every process (parents and children) then keeps
 *                      allreducing over the merged communicator every 2 ms until DIR/stop exists,
 *                      so that a test can look at the live state meanwhile
 * Each process prints one line, "parent|child R of N: merged M of T, sum S, K failed" (R and N
 * in its own MPI_COMM_WORLD), and exits 1 on a failure. The children are this program run as
 * "spawn_cases child [DIR]". */
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define CHILDREN 2

static int failed;

#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      failed++;                                                                                    \
      fprintf(stderr, "spawn_cases: %s:%d: ", __FILE__, __LINE__);                                 \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fputc('\n', stderr);                                                                         \
    }                                                                                              \
  } while (0)

/* Allreduce over the merged communicator every 2 ms until dir/stop exists (its rank 0 looks and
 * tells the others, so that every process leaves after the same call). */
static void hold(MPI_Comm merged, int mrank, const char *dir) {
  char stop[4096];
  snprintf(stop, sizeof stop, "%s/stop", dir);
  for (int n = 0;; n++) {
    int done = mrank == 0 && access(stop, F_OK) == 0, any = 0;
    MPI_Allreduce(&done, &any, 1, MPI_INT, MPI_MAX, merged);
    if (any || n > 60 * 500) break; /* a minute at most: the test's own limit ends it first */
    usleep(2000);
  }
}

int main(int argc, char **argv) {
  int child = argc > 1 && !strcmp(argv[1], "child");
  const char *dir = argc > 1 + child ? argv[1 + child] : NULL;
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm inter = MPI_COMM_NULL, parent;
  MPI_Comm_get_parent(&parent);
  CHECK((parent != MPI_COMM_NULL) == child, "MPI_Comm_get_parent says %s, argv says %s",
        parent != MPI_COMM_NULL ? "spawned" : "not spawned", child ? "child" : "parent");
  if (child) {
    inter = parent;
  } else {
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    CHECK(n > 0, "cannot read /proc/self/exe");
    self[n > 0 ? n : 0] = '\0';
    char *args[] = {"child", (char *)dir, NULL};
    int errs[CHILDREN] = {-1, -1};
    int rc = MPI_Comm_spawn(self, args, CHILDREN, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter, errs);
    CHECK(rc == MPI_SUCCESS, "MPI_Comm_spawn returned %d", rc);
    for (int i = 0; i < CHILDREN; i++)
      CHECK(errs[i] == MPI_SUCCESS, "the spawn's error code %d is %d", i, errs[i]);
  }
  int remote = -1;
  MPI_Comm_remote_size(inter, &remote);
  CHECK(child || remote == CHILDREN, "the intercommunicator's remote size is %d", remote);
  /* the children high: the parents are ranks 0..P-1 of the merged communicator */
  MPI_Comm merged;
  MPI_Intercomm_merge(inter, child, &merged);
  int mrank, msize;
  MPI_Comm_rank(merged, &mrank);
  MPI_Comm_size(merged, &msize);
  int parents = child ? remote : size;
  CHECK(msize == parents + CHILDREN, "the merged size is %d, not %d", msize, parents + CHILDREN);
  CHECK(mrank == (child ? parents + rank : rank), "merged rank %d for %s %d", mrank,
        child ? "child" : "parent", rank);
  long long v = mrank + 1, sum = -1, want = (long long)msize * (msize + 1) / 2;
  MPI_Allreduce(&v, &sum, 1, MPI_LONG_LONG, MPI_SUM, merged);
  CHECK(sum == want, "allreduce over the merged communicator: %lld, not %lld", sum, want);
  int kids = child, nkids = -1;
  MPI_Allreduce(&kids, &nkids, 1, MPI_INT, MPI_SUM, merged);
  CHECK(nkids == CHILDREN, "%d children counted over the merged communicator", nkids);
  if (dir) hold(merged, mrank, dir);
  printf("%s %d of %d: merged %d of %d, sum %lld, %d failed\n", child ? "child" : "parent", rank,
         size, mrank, msize, sum, failed);
  fflush(stdout);
  MPI_Comm_free(&merged);
  MPI_Comm_disconnect(&inter);
  MPI_Finalize();
  return failed ? 1 : 0;
}
