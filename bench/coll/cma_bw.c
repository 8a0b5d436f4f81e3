/* gpurun-bench-cma: what one rank's share of a 2-rank allgather costs on this machine, piece by
 * piece: memcpy of a block, the same block across processes with process_vm_readv (one call, as
 * Open MPI reads it) and with process_vm_writev in 256 KiB pieces (as gpurun writes it), and
 * gpurun's allgather step (memcpy a piece, then write it). Best of REPEATS (the least disturbed
 * on a shared machine), on buffers already faulted in; the peer is a forked child that sleeps.
 *   gpurun-bench-cma [BLOCK_BYTES [REPEATS]]   (default 8 MiB, 40) */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PIECE (256 * 1024)

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cross(pid_t peer, int write, char *mine, char *theirs, size_t n) {
  struct iovec l = {mine, n}, r = {theirs, n};
  ssize_t k =
      write ? process_vm_writev(peer, &l, 1, &r, 1, 0) : process_vm_readv(peer, &l, 1, &r, 1, 0);
  return k == (ssize_t)n;
}

int main(int argc, char **argv) {
  size_t b = argc > 1 ? strtoull(argv[1], NULL, 0) : (size_t)8 << 20;
  int reps = argc > 2 ? atoi(argv[2]) : 40;
  if (b == 0 || reps <= 0) {
    fprintf(stderr, "usage: gpurun-bench-cma [BLOCK_BYTES [REPEATS]]\n");
    return 2;
  }
  char *src = malloc(b), *dst = malloc(b), *peer = malloc(b);
  if (!src || !dst || !peer) return 1;
  memset(src, 1, b);
  memset(dst, 2, b);
  memset(peer, 3, b); /* the child's copy of this buffer is the peer's memory */
  pid_t c = fork();
  if (c < 0) return 1;
  if (c == 0)
    for (;;)
      pause();
  double best[4] = {1e9, 1e9, 1e9, 1e9};
  int ok = 1;
  for (int k = 0; k < reps && ok; k++) {
    double t = now();
    memcpy(dst, src, b);
    __asm__ volatile("" : : "r"(dst) : "memory");
    t = now() - t;
    if (t < best[0]) best[0] = t;
    t = now();
    ok &= cross(c, 0, dst, peer, b);
    t = now() - t;
    if (t < best[1]) best[1] = t;
    t = now();
    for (size_t o = 0; o < b; o += PIECE)
      ok &= cross(c, 1, src + o, peer + o, b - o < PIECE ? b - o : PIECE);
    t = now() - t;
    if (t < best[2]) best[2] = t;
    t = now();
    for (size_t o = 0; o < b; o += PIECE) {
      size_t m = b - o < PIECE ? b - o : PIECE;
      memcpy(dst + o, src + o, m);
      ok &= cross(c, 1, src + o, peer + o, m);
    }
    t = now() - t;
    if (t < best[3]) best[3] = t;
  }
  kill(c, SIGKILL);
  waitpid(c, NULL, 0);
  if (!ok) {
    perror("gpurun-bench-cma: process_vm_readv/writev");
    return 1;
  }
  printf("# block %zu B, best of %d: time (us) and GB/s\n", b, reps);
  const char *what[4] = {"memcpy", "process_vm_readv", "process_vm_writev/256K",
                         "memcpy+writev/256K"};
  for (int i = 0; i < 4; i++)
    printf("%-24s %10.1f %7.2f\n", what[i], best[i] * 1e6, (double)b / best[i] / 1e9);
  free(src);
  free(dst);
  free(peer);
  return 0;
}
