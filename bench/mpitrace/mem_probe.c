/* The MPI layer's memory per rank: COMMS communicators (the world and duplicates), CALLS calls on
 * each (blocking and non-blocking allreduces, a ring exchange with send/recv and isend/irecv +
 * waitall), enough to fill every ring the layer keeps; then, before MPI_Finalize, each rank
 * prints its anonymous memory (heap, the libraries' bss, anonymous maps: /proc/self/smaps_rollup's
 * Anonymous) and its heap in use (mallinfo2). Run plain and with libgpurun-mpi.so preloaded
 * (bench/mpitrace/memory.sh), the same binary both times: the difference is the layer's.
 * usage: mem_probe [COMMS [CALLS]]
 * prints, per rank: "mem RANK ANON_KIB HEAP_KIB" */
#include <malloc.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long anon_kib(void) {
  FILE *f = fopen("/proc/self/smaps_rollup", "r");
  if (!f) return -1;
  char line[256];
  long kib = -1;
  while (fgets(line, sizeof line, f))
    if (!strncmp(line, "Anonymous:", 10)) kib = strtol(line + 10, NULL, 10);
  fclose(f);
  return kib;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int ncomms = argc > 1 ? atoi(argv[1]) : 8, calls = argc > 2 ? atoi(argv[2]) : 3000;
  if (ncomms < 1 || ncomms > 64 || calls < 1) {
    if (!rank) fprintf(stderr, "usage: mem_probe [COMMS (1-64) [CALLS]]\n");
    MPI_Finalize();
    return 2;
  }
  MPI_Comm comms[64];
  comms[0] = MPI_COMM_WORLD;
  for (int c = 1; c < ncomms; c++)
    MPI_Comm_dup(MPI_COMM_WORLD, &comms[c]);
  int right = (rank + 1) % size, left = (rank + size - 1) % size;
  for (int i = 0; i < calls; i++)
    for (int c = 0; c < ncomms; c++) {
      double x = i, y;
      MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, comms[c]);
      MPI_Request r[3];
      int s = rank, got[2];
      MPI_Iallreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, comms[c], &r[0]);
      MPI_Irecv(&got[0], 1, MPI_INT, left, 1, comms[c], &r[1]);
      MPI_Isend(&s, 1, MPI_INT, right, 1, comms[c], &r[2]);
      MPI_Waitall(3, r, MPI_STATUSES_IGNORE);
      MPI_Sendrecv(&s, 1, MPI_INT, right, 2, &got[1], 1, MPI_INT, left, 2, comms[c],
                   MPI_STATUS_IGNORE);
    }
  struct mallinfo2 mi = mallinfo2();
  printf("mem %d %ld %zu\n", rank, anon_kib(), (mi.uordblks + mi.hblkhd) / 1024);
  fflush(stdout);
  for (int c = 1; c < ncomms; c++)
    MPI_Comm_free(&comms[c]);
  MPI_Finalize();
  return 0;
}
