/* Pool benchmark, OpenMP tasks. Built twice: gcc -fopenmp (GCC's libgomp) and clang
 * -fopenmp=libomp (LLVM's libomp). The team is created by an untimed warm-up region; each timed
 * run is one parallel region whose single thread starts the recursion. */
#include "bench_common.h"

#include <omp.h>

#ifndef PEER_NAME
#define PEER_NAME "omp"
#endif

static int nthreads;

static long fib_task(int n, int cutoff) {
  if (n < cutoff) return fib_serial(n);
  long x, y;
#pragma omp task shared(x) firstprivate(n, cutoff)
  x = fib_task(n - 1, cutoff);
  y = fib_task(n - 2, cutoff);
#pragma omp taskwait
  return x + y;
}

static long nq_task(int row, const signed char *board) {
  if (row == NQ_N) return 1;
  signed char kids[NQ_MAX][NQ_MAX];
  long r[NQ_MAX];
  int k = 0;
  for (int c = 0; c < NQ_N; c++)
    if (nq_ok(board, row, c)) {
      memcpy(kids[k], board, (size_t)row);
      kids[k][row] = (signed char)c;
      k++;
    }
  if (k == 0) return 0;
  for (int i = 0; i < k - 1; i++) {
#pragma omp task shared(kids, r) firstprivate(i, row)
    r[i] = nq_task(row + 1, kids[i]);
  }
  r[k - 1] = nq_task(row + 1, kids[k - 1]);
#pragma omp taskwait
  long s = 0;
  for (int i = 0; i < k; i++)
    s += r[i];
  return s;
}

static long uts_task(const uts_node *n) {
  int k = uts_num_children(n);
  if (k == 0) return 1;
  uts_node kids[UTS_MAX_CHILDREN];
  long r[UTS_MAX_CHILDREN];
  for (int i = 0; i < k; i++)
    uts_child(n, i, &kids[i]);
  for (int i = 0; i < k - 1; i++) {
#pragma omp task shared(kids, r) firstprivate(i)
    r[i] = uts_task(&kids[i]);
  }
  r[k - 1] = uts_task(&kids[k - 1]);
#pragma omp taskwait
  long s = 1;
  for (int i = 0; i < k; i++)
    s += r[i];
  return s;
}

static void *setup(int threads) {
  nthreads = threads;
  omp_set_dynamic(0);
  return NULL;
}

static long run(int bench, void *ctx) {
  (void)ctx;
  long result = -1;
#pragma omp parallel num_threads(nthreads)
#pragma omp single
  {
    switch (bench) {
    case B_FIB30:
      result = fib_task(FIB30_N, FIB30_CUTOFF);
      break;
    case B_FIB40:
      result = fib_task(FIB40_N, FIB40_CUTOFF);
      break;
    case B_NQUEENS: {
      signed char board[NQ_MAX] = {0};
      result = nq_task(0, board);
      break;
    }
    default: {
      uts_node root;
      uts_root(&root);
      result = uts_task(&root);
      break;
    }
    }
  }
  return result;
}

static void teardown(void *ctx) { (void)ctx; }

int main(int argc, char **argv) { return bench_main(PEER_NAME, argc, argv, setup, run, teardown); }
