/* Pool benchmark, gpurun's pool. The timed computation runs entirely on the pool's `threads`
 * workers: this thread hands the root task over and sleeps on a semaphore, so that gpurun uses
 * the same number of threads as the peers (oneTBB's arena and OpenMP's team count their master
 * thread). Also the "serial" peer (plain recursion, threads ignored). */
#include "bench_common.h"

#include <gpurun/pool.h>
#include "gr_pool.h" /* internal counters, printed with BENCH_POOL_STATS=1 */
#include <semaphore.h>

static gr_pool *P;

typedef struct {
  int n, cutoff;
  long r;
} fib_arg;

static void fib_task(void *a) {
  fib_arg *f = a;
  if (f->n < f->cutoff) {
    f->r = fib_serial(f->n);
    return;
  }
  fib_arg x = {f->n - 1, f->cutoff, 0}, y = {f->n - 2, f->cutoff, 0};
  gr_taskgroup g;
  gr_taskgroup_init(&g, P);
  gr_spawn(&g, fib_task, &x);
  fib_task(&y);
  gr_taskgroup_wait(&g);
  f->r = x.r + y.r;
}

typedef struct {
  int row;
  signed char board[NQ_MAX];
  long r;
} nq_arg;

static void nq_task(void *a) {
  nq_arg *q = a;
  if (q->row == NQ_N) {
    q->r = 1;
    return;
  }
  nq_arg kids[NQ_MAX];
  int k = 0;
  for (int c = 0; c < NQ_N; c++)
    if (nq_ok(q->board, q->row, c)) {
      memcpy(kids[k].board, q->board, (size_t)q->row);
      kids[k].board[q->row] = (signed char)c;
      kids[k].row = q->row + 1;
      kids[k].r = 0;
      k++;
    }
  long s = 0;
  if (k > 0) {
    gr_taskgroup g;
    gr_taskgroup_init(&g, P);
    for (int i = 0; i < k - 1; i++)
      gr_spawn(&g, nq_task, &kids[i]);
    nq_task(&kids[k - 1]);
    gr_taskgroup_wait(&g);
    for (int i = 0; i < k; i++)
      s += kids[i].r;
  }
  q->r = s;
}

typedef struct {
  uts_node node;
  long r;
} uts_arg;

static void uts_task(void *a) {
  uts_arg *u = a;
  int k = uts_num_children(&u->node);
  long s = 1;
  if (k > 0) {
    uts_arg kids[UTS_MAX_CHILDREN];
    for (int i = 0; i < k; i++) {
      uts_child(&u->node, i, &kids[i].node);
      kids[i].r = 0;
    }
    gr_taskgroup g;
    gr_taskgroup_init(&g, P);
    for (int i = 0; i < k - 1; i++)
      gr_spawn(&g, uts_task, &kids[i]);
    uts_task(&kids[k - 1]);
    gr_taskgroup_wait(&g);
    for (int i = 0; i < k; i++)
      s += kids[i].r;
  }
  u->r = s;
}

typedef struct {
  int bench;
  long result;
  sem_t done;
} root_arg;

static void root_task(void *a) {
  root_arg *ra = a;
  switch (ra->bench) {
  case B_FIB30:
  case B_FIB40: {
    fib_arg f = {ra->bench == B_FIB30 ? FIB30_N : FIB40_N,
                 ra->bench == B_FIB30 ? FIB30_CUTOFF : FIB40_CUTOFF, 0};
    fib_task(&f);
    ra->result = f.r;
    break;
  }
  case B_NQUEENS: {
    nq_arg q;
    memset(&q, 0, sizeof q);
    nq_task(&q);
    ra->result = q.r;
    break;
  }
  default: {
    uts_arg u;
    uts_root(&u.node);
    uts_task(&u);
    ra->result = u.r;
    break;
  }
  }
  sem_post(&ra->done);
}

static void *setup(int threads) {
  gr_pool_config cfg;
  gr_pool_config_init(&cfg);
  cfg.nthreads = threads;
  if (gr_pool_create(&cfg, &P) != GR_OK) {
    fprintf(stderr, "gr_pool_create: %s\n", gr_last_error());
    exit(1);
  }
  return P;
}

static long run(int bench, void *ctx) {
  (void)ctx;
  root_arg ra;
  ra.bench = bench;
  ra.result = -1;
  sem_init(&ra.done, 0, 0);
  gr_taskgroup g;
  gr_taskgroup_init(&g, P);
  gr_spawn(&g, root_task, &ra);
  while (sem_wait(&ra.done) != 0) {
  }
  gr_taskgroup_wait(&g); /* returns at once: the root task has finished */
  sem_destroy(&ra.done);
  return ra.result;
}

static void teardown(void *ctx) {
  if (getenv("BENCH_POOL_STATS")) {
    gr__pool_stats st;
    gr__pool_get_stats(ctx, &st);
    fprintf(stderr,
            "gpurun stats: spawned %llu run %llu steals %llu injected %llu sleeps %llu "
            "idle %.3f s\n",
            (unsigned long long)st.spawned, (unsigned long long)st.run,
            (unsigned long long)st.steals, (unsigned long long)st.injected,
            (unsigned long long)st.sleeps, 1e-9 * (double)st.idle_ns);
  }
  gr_pool_destroy(ctx);
}

/* serial: the same recursion as plain function calls. */
static void *serial_setup(int threads) {
  (void)threads;
  return NULL;
}
static long serial_run(int bench, void *ctx) {
  (void)ctx;
  switch (bench) {
  case B_FIB30:
    return fib_serial(FIB30_N);
  case B_FIB40:
    return fib_serial(FIB40_N);
  case B_NQUEENS: {
    signed char board[NQ_MAX];
    return nq_serial(NQ_N, 0, board);
  }
  default: {
    uts_node r;
    uts_root(&r);
    return uts_serial(&r);
  }
  }
}
static void serial_teardown(void *ctx) { (void)ctx; }

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--serial") == 0)
    return bench_main("serial", argc - 1, argv + 1, serial_setup, serial_run, serial_teardown);
  return bench_main("gpurun", argc, argv, setup, run, teardown);
}
