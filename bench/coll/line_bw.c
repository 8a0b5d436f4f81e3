/* gpurun-bench-line: what moving data between two cores costs on this machine, the floor under
 * every node-local collective (bench/README.md, "What two cores can exchange"):
 * - the one-way latency of one cache line: two processes on two CPUs bounce a counter in a shared
 *   line (each store is a line the other core holds, so each step is one transfer);
 * - the rate of a stream through shared memory: one process copies CHUNK bytes into a ring of
 *   slots and raises a counter, the other waits for it and copies the chunk out; every byte is
 *   written by one core and read by the other, which is what any segment-based exchange (Open
 *   MPI's shared-memory transport below its single-copy limit, gpurun's segment) does per byte.
 * Against these, gpurun-bench-cma gives the kernel's single copy and memcpy within one core.
 * Median and min-max over ROUNDS rounds. The two processes are pinned to the first two CPUs this
 * process may run on; with fewer than two the figures would measure the scheduler, so it refuses.
 *   gpurun-bench-line [ROUNDS]   (default 9) */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define LINE 64
#define PINGS 100000
#define SLOTS 4

/* The shared page: the two counters on lines of their own (128 bytes apart: the adjacent-line
 * prefetcher would pair neighbours), then the ring. */
typedef struct {
  _Alignas(128) _Atomic uint64_t a;
  _Alignas(128) _Atomic uint64_t b;
  _Alignas(128) unsigned char ring[];
} shared;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

/* Ping-pong: the parent stores i into a and waits for b == i; the child waits for a == i and
 * stores i into b. Returns the parent's seconds per one-way transfer (the child returns 0). */
static double pingpong(shared *s, int parent, uint64_t base) {
  double t0 = now();
  for (uint64_t i = base + 1; i <= base + PINGS; i++) {
    if (parent) {
      atomic_store_explicit(&s->a, i, memory_order_release);
      while (atomic_load_explicit(&s->b, memory_order_acquire) < i) {
      }
    } else {
      while (atomic_load_explicit(&s->a, memory_order_acquire) < i) {
      }
      atomic_store_explicit(&s->b, i, memory_order_release);
    }
  }
  return parent ? (now() - t0) / (2.0 * PINGS) : 0.0;
}

/* Stream total bytes in chunks of chunk through SLOTS slots: the parent copies in (a = chunks
 * produced), the child copies out (b = chunks consumed). The child's clock: it ends when the last
 * byte arrived. Counters continue from base (chunks already streamed). */
static double stream(shared *s, int parent, unsigned char *buf, size_t total, size_t chunk,
                     uint64_t base) {
  size_t n = total / chunk;
  double t0 = now();
  for (size_t i = 0; i < n; i++) {
    uint64_t g = base + i;
    unsigned char *slot = s->ring + (g % SLOTS) * chunk;
    if (parent) {
      while (g >= SLOTS && atomic_load_explicit(&s->b, memory_order_acquire) < g - SLOTS + 1) {
      }
      memcpy(slot, buf + i * chunk, chunk);
      atomic_store_explicit(&s->a, g + 1, memory_order_release);
    } else {
      while (atomic_load_explicit(&s->a, memory_order_acquire) < g + 1) {
      }
      memcpy(buf + i * chunk, slot, chunk);
      atomic_store_explicit(&s->b, g + 1, memory_order_release);
    }
  }
  return now() - t0;
}

static int pin(int nth) {
  cpu_set_t all, one;
  if (sched_getaffinity(0, sizeof all, &all) != 0) return -1;
  for (int c = 0, seen = 0; c < CPU_SETSIZE; c++)
    if (CPU_ISSET(c, &all) && seen++ == nth) {
      CPU_ZERO(&one);
      CPU_SET(c, &one);
      return sched_setaffinity(0, sizeof one, &one) == 0 ? c : -1;
    }
  return -1;
}

static void report(const char *what, double *v, int n, double scale, const char *unit) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  printf("%-34s %10.2f %10.2f %10.2f  %s\n", what, v[n / 2] * scale, v[0] * scale, v[n - 1] * scale,
         unit);
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 9;
  if (rounds <= 0 || rounds > 1000) {
    fprintf(stderr, "usage: gpurun-bench-line [ROUNDS]   (1-1000, default 9)\n");
    return 2;
  }
  cpu_set_t all;
  if (sched_getaffinity(0, sizeof all, &all) != 0 || CPU_COUNT(&all) < 2) {
    fprintf(stderr,
            "gpurun-bench-line: needs two CPUs to run on (has %d): a transfer between "
            "cores cannot be measured on one\n",
            CPU_COUNT(&all));
    return 1;
  }
  const size_t totals[] = {1 << 20, 16 << 20};
  const size_t chunks[] = {4096, 65536};
  size_t ring_bytes = SLOTS * 65536;
  shared *s = mmap(NULL, sizeof(shared) + ring_bytes, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  unsigned char *buf = malloc(16 << 20);
  if (s == MAP_FAILED || !buf) {
    perror("gpurun-bench-line");
    return 1;
  }
  memset(buf, 7, 16 << 20);
  memset(s->ring, 0, ring_bytes);
  /* the parent's results come back through a second shared page */
  double *res = mmap(NULL, 5 * 1000 * sizeof(double), PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (res == MAP_FAILED) return 1;
  pid_t child = fork();
  if (child < 0) return 1;
  int parent = child != 0;
  int cpu = pin(parent ? 0 : 1);
  if (cpu < 0) {
    perror("gpurun-bench-line: sched_setaffinity");
    if (parent) waitpid(child, NULL, 0);
    return 1;
  }
  /* rounds interleave the cases, so that a disturbance hits all of them alike */
  uint64_t pings = 0, chunks_done = 0;
  for (int r = 0; r < rounds; r++) {
    double t = pingpong(s, parent, pings);
    pings += PINGS;
    if (parent) res[r] = t;
    int k = 1;
    for (size_t ti = 0; ti < 2; ti++)
      for (size_t ci = 0; ci < 2; ci++, k++) {
        double d = stream(s, parent, buf, totals[ti], chunks[ci], chunks_done);
        chunks_done += totals[ti] / chunks[ci];
        if (!parent) res[k * 1000 + r] = d;
      }
  }
  if (!parent) return 0;
  int st = 0;
  waitpid(child, &st, 0);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) return 1;
  printf("# two processes on the first two CPUs this process may use; %d rounds\n", rounds);
  printf("%-34s %10s %10s %10s\n", "#", "median", "min", "max");
  report("cache line, one way", res, rounds, 1e9, "ns");
  int k = 1;
  for (size_t ti = 0; ti < 2; ti++)
    for (size_t ci = 0; ci < 2; ci++, k++) {
      double *v = res + k * 1000;
      for (int r = 0; r < rounds; r++)
        v[r] = (double)totals[ti] / v[r] / 1e9; /* GB/s: the median of rates */
      char what[64];
      snprintf(what, sizeof what, "stream %zu MiB in %zu KiB chunks", totals[ti] >> 20,
               chunks[ci] >> 10);
      report(what, v, rounds, 1.0, "GB/s");
    }
  return 0;
}
