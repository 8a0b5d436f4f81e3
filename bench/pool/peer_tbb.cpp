// Pool benchmark, oneTBB task_group inside a task_arena of `threads` slots (the calling thread
// takes one, as in TBB's default). The arena is initialised before any timer.
#include "bench_common.h"

#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_group.h>

#include <memory>

static long fib_task(int n, int cutoff) {
  if (n < cutoff) return fib_serial(n);
  long x = 0, y = 0;
  tbb::task_group g;
  g.run([&x, n, cutoff] { x = fib_task(n - 1, cutoff); });
  y = fib_task(n - 2, cutoff);
  g.wait();
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
  tbb::task_group g;
  for (int i = 0; i < k - 1; i++)
    g.run([&kids, &r, i, row] { r[i] = nq_task(row + 1, kids[i]); });
  r[k - 1] = nq_task(row + 1, kids[k - 1]);
  g.wait();
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
  tbb::task_group g;
  for (int i = 0; i < k - 1; i++)
    g.run([&kids, &r, i] { r[i] = uts_task(&kids[i]); });
  r[k - 1] = uts_task(&kids[k - 1]);
  g.wait();
  long s = 1;
  for (int i = 0; i < k; i++)
    s += r[i];
  return s;
}

struct tbb_ctx {
  std::unique_ptr<tbb::global_control> gc;
  std::unique_ptr<tbb::task_arena> arena;
};

static void *setup(int threads) {
  auto *c = new tbb_ctx;
  c->gc.reset(
      new tbb::global_control(tbb::global_control::max_allowed_parallelism, (size_t)threads));
  c->arena.reset(new tbb::task_arena(threads));
  c->arena->initialize();
  return c;
}

static long run(int bench, void *ctx) {
  auto *c = static_cast<tbb_ctx *>(ctx);
  long result = -1;
  c->arena->execute([&] {
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
  });
  return result;
}

static void teardown(void *ctx) { delete static_cast<tbb_ctx *>(ctx); }

int main(int argc, char **argv) { return bench_main("oneTBB", argc, argv, setup, run, teardown); }
