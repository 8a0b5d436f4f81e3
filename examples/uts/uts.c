/* uts: the Unbalanced Tree Search benchmark on gpurun's distributed task pool.
 *
 *   mpirun -np 4 uts T1                 a published tree, by name (counts are checked)
 *   mpirun -np 4 uts -t 1 -a 3 -d 10 -b 4 -r 19
 *   mpirun -np 4 uts T3 -S              static split, no stealing (the comparison)
 *   mpirun -np 2 uts T1 -P 2            tasks on a local gr_pool of 2 workers per rank
 *
 * The whole tree starts at rank 0 (as one root task); stealing is what spreads it. One task = one
 * node: it counts the node and pushes its children. Exit status 1 when a named tree's counts differ
 * from the published ones. */
#include "uts_tree.h"

#include <gpurun/dpool.h>
#include <gpurun/pool.h>

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

typedef struct {
  uts_params p;
  int visit_id;
  uint64_t nodes, leaves; /* atomic */
  int depth;              /* atomic max */
} uts_ctx;

static void bump_depth(uts_ctx *c, int h) {
  int cur = __atomic_load_n(&c->depth, __ATOMIC_RELAXED);
  while (h > cur &&
         !__atomic_compare_exchange_n(&c->depth, &cur, h, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
}

static void visit(gr_dpool *dp, const void *payload, size_t len, void *vctx) {
  uts_ctx *c = vctx;
  uts_node n;
  if (len != sizeof n) abort();
  memcpy(&n, payload, sizeof n);
  __atomic_fetch_add(&c->nodes, 1, __ATOMIC_RELAXED);
  bump_depth(c, n.height);
  int k = uts_num_children(&c->p, &n);
  if (k == 0) __atomic_fetch_add(&c->leaves, 1, __ATOMIC_RELAXED);
  for (int i = 0; i < k; i++) {
    uts_node ch;
    uts_child(&c->p, &n, i, &ch);
    if (gr_dpool_push(dp, c->visit_id, &ch, sizeof ch) != GR_OK) abort();
  }
}

/* Static split: rank 0 expands the tree breadth first until the frontier holds 16 nodes per rank,
 * then deals the frontier out round robin; no rank steals afterwards. */
static int static_split(gr_dpool *dp, uts_ctx *c, int nranks) {
  size_t cap = 1024, n = 0;
  uts_node *q = malloc(cap * sizeof *q);
  if (!q) return -1;
  uts_root(&c->p, &q[n++]);
  size_t head = 0;
  while (n - head > 0 && n - head < (size_t)16 * (size_t)nranks) {
    uts_node cur = q[head++];
    c->nodes++;
    bump_depth(c, cur.height);
    int k = uts_num_children(&c->p, &cur);
    if (k == 0) c->leaves++;
    if (n + (size_t)k > cap) {
      while (n + (size_t)k > cap)
        cap *= 2;
      uts_node *nq = realloc(q, cap * sizeof *q);
      if (!nq) return -1;
      q = nq;
    }
    for (int i = 0; i < k; i++)
      uts_child(&c->p, &cur, i, &q[n++]);
  }
  for (size_t i = head; i < n; i++)
    if (gr_dpool_push_to(dp, (int)((i - head) % (size_t)nranks), c->visit_id, &q[i], sizeof q[i]) !=
        GR_OK)
      return -1;
  free(q);
  return 0;
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: uts [NAME] [-t type] [-a shape] [-d depth] [-b b0] [-r seed] [-q prob] [-m bf]\n"
          "           [-f shift] [-g gran] [-S] [-P nthreads] [-i poll_us] [-L 0|1] [-v]\n"
          "  NAME: a published tree:");
  for (const uts_named *t = uts_named_trees; t->name; t++)
    fprintf(f, " %s", t->name);
  fprintf(f, "\n  -S static split (no stealing)  -P run tasks on a local pool of N threads\n"
             "  -i poll interval in us  -L lifelines on/off  -v per-rank lines\n");
}

static double cpu_seconds(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
         (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
}

int main(int argc, char **argv) {
  int provided = 0;
  /* Open MPI makes every empty progress poll a sched_yield() when ranks outnumber cores; the dpool
   * polls between tasks of busy ranks, which would then hand their core away 20 000 times a
   * second (measured: 4 ranks on 2 cores spent 4x the CPU of 1 rank). Idle dpool ranks sleep by
   * themselves. A value given by the user wins. */
  setenv("OMPI_MCA_mpi_yield_when_idle", "0", 0);
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  static uts_ctx c;
  uts_params_default(&c.p);
  const uts_named *named = NULL;
  int static_mode = 0, nthreads = 0, verbose = 0, poll_us = 0, lifelines = 1;
  char err[128];
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (a[0] != '-') {
      named = uts_find_named(a);
      if (!named || uts_parse_args(&c.p, named->args, err, sizeof err) != 0) {
        if (rank == 0) fprintf(stderr, "uts: unknown tree '%s'\n", a), usage(stderr);
        MPI_Finalize();
        return 2;
      }
      continue;
    }
    if (a[1] == 'S' && !a[2]) {
      static_mode = 1;
      continue;
    }
    if (a[1] == 'v' && !a[2]) {
      verbose = 1;
      continue;
    }
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      if (rank == 0) usage(stdout);
      MPI_Finalize();
      return 0;
    }
    if (!a[1] || a[2] || i + 1 >= argc) {
      if (rank == 0) fprintf(stderr, "uts: bad argument '%s'\n", a), usage(stderr);
      MPI_Finalize();
      return 2;
    }
    const char *v = argv[++i];
    int bad = 0;
    if (a[1] == 'P')
      bad = (nthreads = atoi(v)) < 1;
    else if (a[1] == 'i')
      bad = (poll_us = atoi(v)) < 1;
    else if (a[1] == 'L')
      lifelines = atoi(v) != 0;
    else {
      bad = uts_parse_flag(&c.p, a[1], v, err, sizeof err) != 0;
      named = NULL; /* explicit flags: no published answer to check against */
    }
    if (bad) {
      if (rank == 0) fprintf(stderr, "uts: %s\n", a[1] == 'P' || a[1] == 'i' ? "bad value" : err);
      MPI_Finalize();
      return 2;
    }
  }

  gr_pool *pool = NULL;
  if (nthreads > 0) {
    gr_pool_config pc;
    gr_pool_config_init(&pc);
    pc.nthreads = nthreads;
    if (gr_pool_create(&pc, &pool) != GR_OK) {
      fprintf(stderr, "uts: %s\n", gr_last_error());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
  gr_dpool_config cfg;
  gr_dpool_config_init(&cfg);
  cfg.ctx = &c;
  cfg.steal = !static_mode;
  cfg.lifelines = lifelines;
  if (poll_us) cfg.poll_interval_us = poll_us;
  gr_dpool *dp = NULL;
  if (gr_dpool_create(MPI_COMM_WORLD, pool, &cfg, &dp) != GR_OK ||
      gr_dpool_register(dp, visit, &c.visit_id) != GR_OK) {
    fprintf(stderr, "uts: %s\n", gr_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }

  MPI_Barrier(MPI_COMM_WORLD);
  double cpu0 = cpu_seconds();
  double t0 = MPI_Wtime();
  if (rank == 0) {
    if (static_mode) {
      if (static_split(dp, &c, size) != 0) MPI_Abort(MPI_COMM_WORLD, 1);
    } else {
      uts_node root;
      uts_root(&c.p, &root);
      if (gr_dpool_push(dp, c.visit_id, &root, sizeof root) != GR_OK) MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
  if (gr_dpool_run(dp) != GR_OK) {
    fprintf(stderr, "uts: %s\n", gr_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  double t1 = MPI_Wtime();
  double cpu = cpu_seconds() - cpu0;
  double wall = t1 - t0, wall_max = 0;
  MPI_Reduce(&wall, &wall_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);

  struct gr_dpool_stats st;
  gr_dpool_stats(dp, &st);
  uint64_t mine[8] = {c.nodes,         c.leaves,      st.tasks_run,       st.tasks_pushed,
                      st.steals_tried, st.steals_won, st.lifeline_steals, st.bytes_sent};
  uint64_t tot[8];
  MPI_Reduce(mine, tot, 8, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
  int depth = 0;
  MPI_Reduce(&c.depth, &depth, 1, MPI_INT, MPI_MAX, 0, MPI_COMM_WORLD);
  double cpu_tot = 0, idle_tot = 0, cpu_max = 0;
  MPI_Reduce(&cpu, &cpu_tot, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  MPI_Reduce(&cpu, &cpu_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  MPI_Reduce(&st.idle_s, &idle_tot, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  uint64_t *per = rank == 0 ? malloc((size_t)size * sizeof *per) : NULL;
  MPI_Gather(&mine[0], 1, MPI_UINT64_T, per, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  if (verbose) {
    char host[MPI_MAX_PROCESSOR_NAME] = "";
    int hlen = 0;
    MPI_Get_processor_name(host, &hlen);
    for (int r = 0; r < size; r++) {
      MPI_Barrier(MPI_COMM_WORLD);
      if (r == rank)
        printf("rank %d on %s: nodes %llu tasks_run %llu steals %llu/%llu lifeline %llu sent %llu "
               "recv %llu msgs %llu bytes %llu polls %llu idle %.3f s cpu %.3f s\n",
               rank, host, (unsigned long long)c.nodes, (unsigned long long)st.tasks_run,
               (unsigned long long)st.steals_won, (unsigned long long)st.steals_tried,
               (unsigned long long)st.lifeline_steals, (unsigned long long)st.tasks_sent,
               (unsigned long long)st.tasks_received, (unsigned long long)st.msgs_sent,
               (unsigned long long)st.bytes_sent, (unsigned long long)st.polls, st.idle_s, cpu);
      fflush(stdout);
    }
  }
  int rc = 0;
  if (rank == 0) {
    char desc[160];
    uts_describe(&c.p, desc, sizeof desc);
    printf("uts: %s%s%s, %d ranks%s%s\n", named ? named->name : "", named ? " " : "", desc, size,
           static_mode ? ", static split" : ", stealing", pool ? ", local pool" : "");
    printf("nodes %llu leaves %llu maxdepth %d time %.4f s nodes/s %.4g cpu %.3f s cpumax %.3f s "
           "idle %.3f s steals %llu/%llu lifeline %llu bytes %llu\n",
           (unsigned long long)tot[0], (unsigned long long)tot[1], depth, wall_max,
           (double)tot[0] / wall_max, cpu_tot, cpu_max, idle_tot, (unsigned long long)tot[5],
           (unsigned long long)tot[4], (unsigned long long)tot[6], (unsigned long long)tot[7]);
    printf("per-rank nodes:");
    for (int r = 0; r < size; r++)
      printf(" %llu (%.1f%%)", (unsigned long long)per[r], 100.0 * (double)per[r] / (double)tot[0]);
    printf("\n");
    if (tot[2] != tot[3]) {
      printf("check: FAILED: tasks run %llu != tasks pushed %llu\n", (unsigned long long)tot[2],
             (unsigned long long)tot[3]);
      rc = 1;
    }
    if (named) {
      int ok = tot[0] == named->nodes && tot[1] == named->leaves && depth == named->depth;
      printf("check: %s (published for %s: nodes %llu leaves %llu depth %d)\n",
             ok ? "OK" : "FAILED", named->name, (unsigned long long)named->nodes,
             (unsigned long long)named->leaves, named->depth);
      if (!ok) rc = 1;
    }
    fflush(stdout);
  }
  free(per);
  MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
  gr_dpool_destroy(dp);
  if (pool) gr_pool_destroy(pool);
  MPI_Finalize();
  return rc;
}
