/* A plain MPI program (no gpurun API) for test_prometheus_mpi.sh: what the MPI layer's Prometheus
 * series say about a rank that comes late to the collectives.
 *   prom_mpi DIR LATE MS
 * Every rank first posts an MPI_Irecv on a duplicate of the world that completes only at the end
 * (a request outstanding for the whole run: no call the rank is inside). Then, until DIR/stop
 * exists (rank 0 looks, the allreduce tells the others): rank LATE sleeps MS milliseconds (it
 * computes while the others wait), every rank joins an MPI_Allreduce on the world (where the
 * others wait for rank LATE) and exchanges a message with its ring neighbours (MPI_Irecv,
 * MPI_Isend, MPI_Waitall: requests whose life overlaps the wait that completes them). At the end
 * each rank sends the message the first receive waits for, and prints
 * "prom_mpi: rank R: N steps". */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc != 4) {
    if (rank == 0) fprintf(stderr, "usage: prom_mpi DIR LATE MS\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const char *dir = argv[1];
  int late = atoi(argv[2]), ms = atoi(argv[3]);
  char stop[4096];
  snprintf(stop, sizeof stop, "%s/stop", dir);
  MPI_Comm side;
  MPI_Comm_dup(MPI_COMM_WORLD, &side);
  int last = -1, next = (rank + 1) % size, prev = (rank + size - 1) % size;
  MPI_Request first;
  MPI_Irecv(&last, 1, MPI_INT, next, 7, side, &first);
  long steps = 0;
  for (int done = 0; !done; steps++) {
    if (rank == late) sleep_ms(ms);
    int want = rank == 0 && access(stop, F_OK) == 0;
    MPI_Allreduce(&want, &done, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    int in = -1, out = rank;
    MPI_Request q[2];
    MPI_Irecv(&in, 1, MPI_INT, prev, 1, MPI_COMM_WORLD, &q[0]);
    MPI_Isend(&out, 1, MPI_INT, next, 1, MPI_COMM_WORLD, &q[1]);
    MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
    if (in != prev) {
      fprintf(stderr, "prom_mpi: rank %d: got %d from rank %d\n", rank, in, prev);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
  MPI_Send(&rank, 1, MPI_INT, prev, 7, side);
  MPI_Wait(&first, MPI_STATUS_IGNORE);
  if (last != next) {
    fprintf(stderr, "prom_mpi: rank %d: the first receive got %d, not %d\n", rank, last, next);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Comm_free(&side);
  printf("prom_mpi: rank %d: %ld steps\n", rank, steps);
  MPI_Finalize();
  return 0;
}
