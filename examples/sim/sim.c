/* sim: 2-D heat diffusion on a grid split over all ranks.
 *
 * The explicit update u' = u + r (uN + uS + uW + uE - 4u) runs on an NX x NY interior with zero
 * boundary values; r = 1/4 is exactly the Jacobi iteration for Laplace's equation. Each rank owns
 * one block of a 2-D process grid and swaps one-point halos with its four neighbours every step
 * (gr_send/gr_recv inside gr_group_start/gr_group_end); the global residual max|u' - u| comes from
 * gr_allreduce(GR_MAX). On the CPU the task pool updates the block tile by tile; with a GPU (and a
 * CUDA build) a kernel does.
 *
 * Self-check: the starting field sin(pi x) sin(pi y) is an eigenvector of the discrete operator,
 * so after n steps the exact answer is g^n sin(pi x) sin(pi y) with
 * g = 1 - 4r (sin^2(pi / 2(NX+1)) + sin^2(pi / 2(NY+1))). The program compares every point with it
 * and exits 1 when the largest difference exceeds rounding. Every point is computed by the same
 * operations in the same order whatever the decomposition, so the field (and the printed checksum,
 * an order-independent sum of per-point hashes) is bit-identical for any number of ranks. */
#include <errno.h>
#include <gpurun/runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim.h"

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

typedef struct {
  int nx, ny; /* global interior size */
  int steps;
  double r;
  int tile;        /* rows per task */
  int check_every; /* residual allreduce period */
  int use_gpu;     /* -1 auto, 0 no, 1 yes */
  int quiet;
  int perturb;         /* test hook: spoil one point so the self-check must fail */
  const char *dump;    /* write the final field to DUMP.RANK ("gx gy value" lines) */
  const char *scaling; /* NULL, "strong" or "weak" */
} sim_opts;

typedef struct {
  double seconds, max_err, resid, tol;
  uint64_t checksum;
  double rate_min, rate_avg, rate_max; /* grid points / s per rank */
  int ok;
} sim_result;

typedef struct {
  gr_comm *comm;  /* the ranks of this run */
  gr_comm *hcomm; /* the same ranks, MPI backend, for host buffers */
  int rank, size, px, py, cx, cy;
  sim_block b;
  int peer_n, peer_s, peer_w, peer_e; /* -1 on the global boundary */
  double *u, *un;
  double *sendw, *sende, *recvw, *recve;
  double *tile_resid;
  int tile, ntiles;
  sim_gpu *gpu;
} sim_rank;

static const char *g_host = "?";
static int g_world_rank = -1;

/* A failed gpurun call: say which, where and why, then take the whole job down. */
static void fail_call(const char *what, gr_status st) {
  fprintf(stderr, "sim: rank %d on %s: %s failed: %s (%s)\n", g_world_rank, g_host, what,
          gr_last_error()[0] ? gr_last_error() : gr_strerror(st), gr_status_name(st));
  fflush(stderr);
  if (gr_world()) gr_comm_abort(gr_world());
  MPI_Abort(MPI_COMM_WORLD, 3);
  exit(3);
}
#define CHECK(call)                                                                                \
  do {                                                                                             \
    gr_status st_ = (call);                                                                        \
    if (st_ != GR_OK) fail_call(#call, st_);                                                       \
  } while (0)

#ifdef SIM_HAVE_CUDA
static void fail_gpu(const char *err) {
  fprintf(stderr, "sim: rank %d on %s: %s\n", g_world_rank, g_host, err);
  MPI_Abort(MPI_COMM_WORLD, 3);
  exit(3);
}
#endif

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: sim [options]     (run under mpirun/srun, each rank through gpurun)\n"
          "2-D heat diffusion (Jacobi stencil) with halo exchange over all ranks; checks itself\n"
          "against the closed-form solution and exits 1 when the answer is wrong.\n"
          "  --n N            global grid N x N interior points (default 512)\n"
          "  --nx N --ny N    rectangular grid\n"
          "  --steps S        time steps (default 200)\n"
          "  --r R            diffusion number dt/h^2, 0 < R <= 0.25 (default 0.25 = Jacobi)\n"
          "  --tile T         rows per CPU task (default 16)\n"
          "  --check-every K  global residual every K steps (default 10)\n"
          "  --cpu | --gpu    force the CPU path / require a GPU (default: GPU when present)\n"
          "  --scaling strong|weak  rerun on 1, 2, 4, ... ranks and print a scaling table\n"
          "                   (weak: the grid grows with the ranks, NX x (NY * ranks))\n"
          "  --quiet          no progress lines\n"
          "  --perturb        spoil one point after the last step (tests the self-check)\n"
          "  --dump PREFIX    write the final field to PREFIX.RANK, one \"gx gy value\" per line\n"
          "  --help           this text\n");
}

static int parse_int(const char *s, int lo, int hi, int *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || *end || v < lo || v > hi) return -1;
  *out = (int)v;
  return 0;
}

static int parse_args(int argc, char **argv, sim_opts *o) {
  *o = (sim_opts){
      .nx = 512, .ny = 512, .steps = 200, .r = 0.25, .tile = 16, .check_every = 10, .use_gpu = -1};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    int bad = 0, n;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      return 1;
    } else if (!strcmp(a, "--cpu")) {
      o->use_gpu = 0;
    } else if (!strcmp(a, "--gpu")) {
      o->use_gpu = 1;
    } else if (!strcmp(a, "--quiet")) {
      o->quiet = 1;
    } else if (!strcmp(a, "--perturb")) {
      o->perturb = 1;
    } else if (!v) {
      bad = 1;
    } else if (!strcmp(a, "--n")) {
      bad = parse_int(v, 1, 1 << 20, &n);
      o->nx = o->ny = n;
      i++;
    } else if (!strcmp(a, "--nx")) {
      bad = parse_int(v, 1, 1 << 20, &o->nx), i++;
    } else if (!strcmp(a, "--ny")) {
      bad = parse_int(v, 1, 1 << 20, &o->ny), i++;
    } else if (!strcmp(a, "--steps")) {
      bad = parse_int(v, 0, 1 << 30, &o->steps), i++;
    } else if (!strcmp(a, "--tile")) {
      bad = parse_int(v, 1, 1 << 20, &o->tile), i++;
    } else if (!strcmp(a, "--check-every")) {
      bad = parse_int(v, 1, 1 << 30, &o->check_every), i++;
    } else if (!strcmp(a, "--r")) {
      char *end;
      o->r = strtod(v, &end);
      bad = *end || !(o->r > 0 && o->r <= 0.25);
      i++;
    } else if (!strcmp(a, "--dump")) {
      o->dump = v;
      i++;
    } else if (!strcmp(a, "--scaling")) {
      o->scaling = v;
      bad = strcmp(v, "strong") && strcmp(v, "weak");
      i++;
    } else {
      bad = 1;
    }
    if (bad) {
      fprintf(stderr, "sim: bad option '%s%s%s' (see --help)\n", a, v ? " " : "", v ? v : "");
      return 2;
    }
  }
  return 0;
}

/* The most nearly square px x py = size, px <= py (px splits x, py splits y). */
static void dims(int size, int *px, int *py) {
  int best = 1;
  for (int d = 1; d * d <= size; d++)
    if (size % d == 0) best = d;
  *px = best;
  *py = size / best;
}

static double gfactor(const sim_opts *o, int nx, int ny) {
  double sx = sin(M_PI / (2.0 * (nx + 1))), sy = sin(M_PI / (2.0 * (ny + 1)));
  return 1.0 - 4.0 * o->r * (sx * sx + sy * sy);
}

/* splitmix64: a strong 64-bit mix, to hash (global index, value bits). */
static uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

typedef struct {
  sim_rank *s;
  double r;
} step_args;

/* One task: the update and the local residual for rows [1 + t*tile, ...) of tiles t in [lo, hi). */
static void step_tiles(size_t lo, size_t hi, void *arg) {
  const step_args *a = arg;
  sim_rank *s = a->s;
  const int nx = s->b.nx, stride = nx + 2, tile = s->tile;
  const double r = a->r;
  for (size_t t = lo; t < hi; t++) {
    int j0 = 1 + (int)t * tile, j1 = j0 + tile;
    if (j1 > s->b.ny + 1) j1 = s->b.ny + 1;
    double m = 0;
    for (int j = j0; j < j1; j++) {
      const double *u = s->u + (size_t)j * stride;
      double *un = s->un + (size_t)j * stride;
      for (int i = 1; i <= nx; i++) {
        double v = u[i] + r * ((u[i - stride] + u[i + stride] + u[i - 1] + u[i + 1]) - 4.0 * u[i]);
        double d = fabs(v - u[i]);
        if (d > m) m = d;
        un[i] = v;
      }
    }
    s->tile_resid[t] = m;
  }
}

static void halo_exchange_cpu(sim_rank *s) {
  const int nx = s->b.nx, ny = s->b.ny, stride = nx + 2;
  double *u = s->u;
  for (int j = 1; j <= ny; j++) {
    s->sendw[j - 1] = u[(size_t)j * stride + 1];
    s->sende[j - 1] = u[(size_t)j * stride + nx];
  }
  CHECK(gr_group_start());
  if (s->peer_n >= 0) {
    CHECK(gr_send(u + stride + 1, nx, GR_FLOAT64, s->peer_n, s->comm, NULL));
    CHECK(gr_recv(u + 1, nx, GR_FLOAT64, s->peer_n, s->comm, NULL));
  }
  if (s->peer_s >= 0) {
    CHECK(gr_send(u + (size_t)ny * stride + 1, nx, GR_FLOAT64, s->peer_s, s->comm, NULL));
    CHECK(gr_recv(u + (size_t)(ny + 1) * stride + 1, nx, GR_FLOAT64, s->peer_s, s->comm, NULL));
  }
  if (s->peer_w >= 0) {
    CHECK(gr_send(s->sendw, ny, GR_FLOAT64, s->peer_w, s->comm, NULL));
    CHECK(gr_recv(s->recvw, ny, GR_FLOAT64, s->peer_w, s->comm, NULL));
  }
  if (s->peer_e >= 0) {
    CHECK(gr_send(s->sende, ny, GR_FLOAT64, s->peer_e, s->comm, NULL));
    CHECK(gr_recv(s->recve, ny, GR_FLOAT64, s->peer_e, s->comm, NULL));
  }
  CHECK(gr_group_end());
  for (int j = 1; j <= ny; j++) {
    if (s->peer_w >= 0) u[(size_t)j * stride] = s->recvw[j - 1];
    if (s->peer_e >= 0) u[(size_t)j * stride + nx + 1] = s->recve[j - 1];
  }
}

#ifdef SIM_HAVE_CUDA
/* The GPU variant: pack on the device; hand device buffers to the communicator when its backend
 * is NCCL, stage through host buffers when it is MPI (Debian's Open MPI is not CUDA-aware). */
static void halo_exchange_gpu(sim_rank *s, double *hsend, double *hrecv) {
  char err[256];
  const int nx = s->b.nx, ny = s->b.ny;
  const size_t total = 2 * (size_t)nx + 2 * (size_t)ny;
  const int dev = gr_comm_backend(s->comm) == GR_BACKEND_NCCL;
  if (sim_gpu_pack(s->gpu, err, sizeof err)) fail_gpu(err);
  double *sb = sim_gpu_send_buf(s->gpu), *rb = sim_gpu_recv_buf(s->gpu);
  if (!dev) {
    if (sim_gpu_copy(s->gpu, hsend, sb, total * sizeof(double), 0, err, sizeof err)) fail_gpu(err);
    sb = hsend;
    rb = hrecv;
  }
  const size_t off[4] = {0, (size_t)nx, 2 * (size_t)nx, 2 * (size_t)nx + (size_t)ny};
  const size_t cnt[4] = {(size_t)nx, (size_t)nx, (size_t)ny, (size_t)ny};
  const int peer[4] = {s->peer_n, s->peer_s, s->peer_w, s->peer_e};
  CHECK(gr_group_start());
  for (int k = 0; k < 4; k++) {
    if (peer[k] < 0) continue;
    CHECK(gr_send(sb + off[k], cnt[k], GR_FLOAT64, peer[k], s->comm, NULL));
    CHECK(gr_recv(rb + off[k], cnt[k], GR_FLOAT64, peer[k], s->comm, NULL));
  }
  CHECK(gr_group_end());
  if (dev) {
    CHECK(gr_comm_synchronize(s->comm, NULL));
  } else if (sim_gpu_copy(s->gpu, sim_gpu_recv_buf(s->gpu), hrecv, total * sizeof(double), 1, err,
                          sizeof err)) {
    fail_gpu(err);
  }
  if (sim_gpu_unpack(s->gpu, peer[0] >= 0, peer[1] >= 0, peer[2] >= 0, peer[3] >= 0, err,
                     sizeof err))
    fail_gpu(err);
}
#endif

static void setup_rank(sim_rank *s, gr_comm *comm, gr_comm *hcomm, const sim_opts *o, int nx,
                       int ny) {
  memset(s, 0, sizeof *s);
  s->comm = comm;
  s->hcomm = hcomm;
  s->rank = gr_comm_rank(comm);
  s->size = gr_comm_size(comm);
  dims(s->size, &s->px, &s->py);
  if (s->px > nx || s->py > ny) {
    if (s->rank == 0)
      fprintf(stderr, "sim: grid %dx%d too small for %dx%d ranks\n", nx, ny, s->px, s->py);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  s->cx = s->rank % s->px;
  s->cy = s->rank / s->px;
  s->b.x0 = (int)((int64_t)nx * s->cx / s->px);
  s->b.nx = (int)((int64_t)nx * (s->cx + 1) / s->px) - s->b.x0;
  s->b.y0 = (int)((int64_t)ny * s->cy / s->py);
  s->b.ny = (int)((int64_t)ny * (s->cy + 1) / s->py) - s->b.y0;
  s->peer_n = s->cy > 0 ? s->rank - s->px : -1;
  s->peer_s = s->cy < s->py - 1 ? s->rank + s->px : -1;
  s->peer_w = s->cx > 0 ? s->rank - 1 : -1;
  s->peer_e = s->cx < s->px - 1 ? s->rank + 1 : -1;
  const size_t cells = (size_t)(s->b.nx + 2) * (size_t)(s->b.ny + 2);
  s->u = calloc(cells, sizeof(double));
  s->un = calloc(cells, sizeof(double));
  s->sendw = malloc(4 * (size_t)s->b.ny * sizeof(double));
  s->tile = o->tile;
  s->ntiles = (s->b.ny + o->tile - 1) / o->tile;
  s->tile_resid = calloc((size_t)s->ntiles, sizeof(double));
  if (!s->u || !s->un || !s->sendw || !s->tile_resid) {
    fprintf(stderr, "sim: rank %d: out of memory for a %dx%d block\n", g_world_rank, s->b.nx,
            s->b.ny);
    MPI_Abort(MPI_COMM_WORLD, 3);
  }
  s->sende = s->sendw + s->b.ny;
  s->recvw = s->sende + s->b.ny;
  s->recve = s->recvw + s->b.ny;
  const int stride = s->b.nx + 2;
  for (int j = 1; j <= s->b.ny; j++) {
    double sy = sin(M_PI * (s->b.y0 + j) / (ny + 1));
    for (int i = 1; i <= s->b.nx; i++)
      s->u[(size_t)j * stride + i] = sin(M_PI * (s->b.x0 + i) / (nx + 1)) * sy;
  }
}

static void free_rank(sim_rank *s) {
#ifdef SIM_HAVE_CUDA
  if (s->gpu) sim_gpu_destroy(s->gpu);
#endif
  free(s->u);
  free(s->un);
  free(s->sendw);
  free(s->tile_resid);
}

static void dump_field(const sim_rank *s, const char *prefix) {
  char path[4096];
  snprintf(path, sizeof path, "%s.%d", prefix, s->rank);
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "sim: rank %d: cannot write %s: %s\n", g_world_rank, path, strerror(errno));
    MPI_Abort(MPI_COMM_WORLD, 3);
    return;
  }
  const int stride = s->b.nx + 2;
  for (int j = 1; j <= s->b.ny; j++)
    for (int i = 1; i <= s->b.nx; i++)
      fprintf(f, "%d %d %.17g\n", s->b.x0 + i - 1, s->b.y0 + j - 1, s->u[(size_t)j * stride + i]);
  fclose(f);
}

/* The whole simulation on comm's ranks; every rank gets the same result. */
static void run(gr_comm *comm, gr_comm *hcomm, const sim_opts *o, int nx, int ny, int use_gpu,
                sim_result *res) {
  sim_rank s;
  setup_rank(&s, comm, hcomm, o, nx, ny);
  double *hsend = NULL, *hrecv = NULL;
  char err[256];
  (void)err;
#ifdef SIM_HAVE_CUDA
  if (use_gpu) {
    if (sim_gpu_create(&s.b, s.u, &s.gpu, err, sizeof err)) fail_gpu(err);
    size_t total = 2 * (size_t)s.b.nx + 2 * (size_t)s.b.ny;
    hsend = malloc(total * sizeof(double));
    hrecv = malloc(total * sizeof(double));
  }
#else
  (void)use_gpu;
#endif
  gr_pool *pool = gr_default_pool();
  step_args sa = {&s, o->r};
  double resid = 0;
  int every = o->steps >= 10 ? o->steps / 10 : 1;
  CHECK(gr_barrier(hcomm));
  double t0 = now();
  for (int n = 1; n <= o->steps; n++) {
    double local = 0;
#ifdef SIM_HAVE_CUDA
    if (s.gpu) {
      halo_exchange_gpu(&s, hsend, hrecv);
      if (sim_gpu_step(s.gpu, o->r, &local, err, sizeof err)) fail_gpu(err);
    } else
#endif
    {
      halo_exchange_cpu(&s);
      CHECK(gr_parallel_for(pool, 0, (size_t)s.ntiles, 1, step_tiles, &sa));
      for (int t = 0; t < s.ntiles; t++)
        if (s.tile_resid[t] > local) local = s.tile_resid[t];
      double *tmp = s.u;
      s.u = s.un;
      s.un = tmp;
    }
    const int progress = !o->quiet && !o->scaling && (n % every == 0 || n == o->steps);
    if (progress || n % o->check_every == 0 || n == o->steps)
      CHECK(gr_allreduce(&local, &resid, 1, GR_FLOAT64, GR_MAX, hcomm, NULL));
    if (progress && s.rank == 0) {
      printf("sim: step %d/%d  residual %.6e  %.1f s\n", n, o->steps, resid, now() - t0);
      fflush(stdout);
    }
  }
  CHECK(gr_barrier(hcomm));
  double secs = now() - t0;
#ifdef SIM_HAVE_CUDA
  if (s.gpu && sim_gpu_download(s.gpu, s.u, err, sizeof err)) fail_gpu(err);
#endif
  free(hsend);
  free(hrecv);
  if (o->perturb && s.rank == s.size - 1) s.u[(size_t)(s.b.ny / 2 + 1) * (s.b.nx + 2) + 1] += 1e-9;

  /* Compare with the closed form; hash the field. */
  const double amp = pow(gfactor(o, nx, ny), o->steps);
  const int stride = s.b.nx + 2;
  double maxerr = 0;
  uint64_t sum = 0;
  for (int j = 1; j <= s.b.ny; j++) {
    int gy = s.b.y0 + j - 1;
    double sy = sin(M_PI * (gy + 1) / (ny + 1));
    for (int i = 1; i <= s.b.nx; i++) {
      int gx = s.b.x0 + i - 1;
      double v = s.u[(size_t)j * stride + i];
      double e = fabs(v - amp * sin(M_PI * (gx + 1) / (nx + 1)) * sy);
      if (!(e <= maxerr)) maxerr = e; /* NaN wins */
      uint64_t bits;
      memcpy(&bits, &v, sizeof bits);
      sum += mix(bits ^ mix((uint64_t)gy * (uint64_t)nx + (uint64_t)gx));
    }
  }
  if (o->dump && !o->scaling) dump_field(&s, o->dump);
  double rate = secs > 0 ? (double)s.b.nx * s.b.ny * o->steps / secs : 0;
  double mins[2] = {-rate, -secs}, maxs[2] = {rate, maxerr}, sumrate = rate;
  CHECK(gr_allreduce(mins, mins, 2, GR_FLOAT64, GR_MAX, hcomm, NULL));
  CHECK(gr_allreduce(maxs, maxs, 2, GR_FLOAT64, GR_MAX, hcomm, NULL));
  CHECK(gr_allreduce(&sumrate, &sumrate, 1, GR_FLOAT64, GR_SUM, hcomm, NULL));
  CHECK(gr_allreduce(&sum, &res->checksum, 1, GR_UINT64, GR_SUM, hcomm, NULL));
  res->seconds = secs;
  res->rate_min = -mins[0];
  res->rate_max = maxs[0];
  res->rate_avg = sumrate / s.size;
  res->max_err = maxs[1];
  res->resid = resid;
  /* Rounding: each step adds at most a few ulps of the amplitude (<= 1) per point. */
  res->tol = 2e-15 * (o->steps + 10);
  res->ok = res->max_err <= res->tol;
  free_rank(&s);
}

/* One line per rank, printed by rank 0 in rank order: where it ran and what gpurun gave it. */
static void print_ranks(gr_comm *hcomm, int use_gpu) {
  enum { W = 512 };
  gr_rank_info_t info;
  CHECK(gr_rank_info(&info));
  const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
  char line[W];
  snprintf(
      line, sizeof line,
      "sim: rank %d/%d host %.64s local_rank %d/%d CUDA_VISIBLE_DEVICES=%.64s cpus %.64s device %s "
      "plan %s",
      info.rank, info.size, info.node, info.local_rank, info.local_size, cvd ? cvd : "unset",
      info.cpus[0] ? info.cpus : "?", use_gpu ? "gpu" : "cpu", info.from_plan ? "gpurun" : "none");
  int size = gr_comm_size(hcomm), rank = gr_comm_rank(hcomm);
  /* allgather (the API has no gather); only rank 0 prints. */
  char *recv = malloc((size_t)size * W);
  if (!recv) MPI_Abort(MPI_COMM_WORLD, 3);
  CHECK(gr_allgather(line, recv, W, GR_UINT8, hcomm, NULL));
  if (rank == 0)
    for (int r = 0; r < size; r++)
      printf("%s\n", recv + (size_t)r * W);
  free(recv);
  fflush(stdout);
}

static int run_scaling(gr_comm *world, gr_comm *hworld, const sim_opts *o, int use_gpu) {
  int size = gr_comm_size(world), rank = gr_comm_rank(world), ok = 1;
  int weak = !strcmp(o->scaling, "weak");
  double t1 = 0;
  if (rank == 0) {
    printf("sim: %s scaling, %s grid %dx%d%s, %d steps\n", o->scaling, weak ? "per-rank" : "global",
           o->nx, o->ny, weak ? " x ranks" : "", o->steps);
    printf("%6s %14s %10s %14s %14s %10s %s\n", "ranks", "grid", "time_s", "Mpts/s", "Mpts/s/rank",
           "efficiency", "check");
  }
  for (int k = 1;; k = k * 2 > size && k < size ? size : k * 2) {
    gr_comm *sub, *hsub;
    CHECK(gr_comm_split(world, rank < k ? 0 : 1, rank, &sub));
    CHECK(gr_comm_split(hworld, rank < k ? 0 : 1, rank, &hsub));
    if (rank < k) {
      int ny = weak ? o->ny * k : o->ny;
      sim_result r;
      run(sub, hsub, o, o->nx, ny, use_gpu, &r);
      if (k == 1) t1 = r.seconds;
      ok &= r.ok;
      if (rank == 0) {
        double eff = r.seconds > 0 ? (weak ? t1 / r.seconds : t1 / (k * r.seconds)) : 0;
        char grid[32];
        snprintf(grid, sizeof grid, "%dx%d", o->nx, ny);
        printf("%6d %14s %10.3f %14.1f %14.1f %9.0f%% %s\n", k, grid, r.seconds,
               r.rate_avg * k / 1e6, r.rate_avg / 1e6, 100 * eff, r.ok ? "ok" : "WRONG");
        fflush(stdout);
      }
    }
    CHECK(gr_comm_destroy(sub));
    CHECK(gr_comm_destroy(hsub));
    CHECK(gr_barrier(hworld));
    if (k >= size) break;
  }
  CHECK(gr_allreduce(&ok, &ok, 1, GR_INT32, GR_MIN, hworld, NULL));
  return ok;
}

int main(int argc, char **argv) {
  sim_opts o;
  int pr = parse_args(argc, argv, &o);
  if (pr) return pr == 1 ? 0 : 2;

  CHECK(gr_init(&argc, &argv));
  gr_comm *world = gr_world();
  g_world_rank = gr_comm_rank(world);
  static gr_rank_info_t me;
  CHECK(gr_rank_info(&me));
  g_host = me.node;
  int rank = g_world_rank, size = gr_comm_size(world);

  /* Host-buffer collectives need the MPI backend; the world may be NCCL on GPU nodes. */
  gr_comm *hworld = world;
  if (gr_comm_backend(world) != GR_BACKEND_MPI) {
    gr_comm_config cfg;
    gr_comm_config_init(&cfg);
    cfg.backend = GR_BACKEND_MPI;
    CHECK(gr_comm_create(MPI_COMM_WORLD, &cfg, &hworld));
  }

  int ngpu = 0;
#ifdef SIM_HAVE_CUDA
  ngpu = sim_gpu_count();
#endif
  int use_gpu = o.use_gpu == 0 ? 0 : ngpu > 0;
  if (o.use_gpu == 1 && !use_gpu) {
    fprintf(stderr, "sim: rank %d on %s: --gpu given but no GPU is usable (%s)\n", rank, g_host,
#ifdef SIM_HAVE_CUDA
            "no CUDA device visible"
#else
            "built without CUDA"
#endif
    );
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  /* All ranks take the same path, or none: a mixed job would still be correct but unbalanced. */
  int any_gpu = use_gpu, all_gpu = use_gpu;
  CHECK(gr_allreduce(&any_gpu, &any_gpu, 1, GR_INT32, GR_MAX, hworld, NULL));
  CHECK(gr_allreduce(&all_gpu, &all_gpu, 1, GR_INT32, GR_MIN, hworld, NULL));
  if (any_gpu != all_gpu) use_gpu = 0;

  int px, py;
  dims(size, &px, &py);
  if (rank == 0) {
    printf("sim: %dx%d grid, %d steps, r=%g, %d ranks as %dx%d, %s\n", o.nx, o.ny, o.steps, o.r,
           size, px, py, use_gpu ? "CUDA kernel per rank" : "CPU task pool per rank");
  }
  print_ranks(hworld, use_gpu);
  if (rank == 0 && !use_gpu)
    printf("sim: %d pool threads per rank, %d rows per task\n", gr_pool_nthreads(gr_default_pool()),
           o.tile);

  int ok;
  if (o.scaling) {
    ok = run_scaling(world, hworld, &o, use_gpu);
    if (rank == 0) printf("sim: self-check %s\n", ok ? "PASS" : "FAIL");
  } else {
    sim_result r;
    run(world, hworld, &o, o.nx, o.ny, use_gpu, &r);
    ok = r.ok;
    if (rank == 0) {
      printf("sim: max |u - exact| = %.3e (tolerance %.1e), final residual %.6e\n", r.max_err,
             r.tol, r.resid);
      printf("sim: checksum %016llx\n", (unsigned long long)r.checksum);
      printf("sim: %.3f s, %.3e grid-points/s per rank (min %.3e, max %.3e), %.3e total\n",
             r.seconds, r.rate_avg, r.rate_min, r.rate_max, r.rate_avg * size);
      printf("sim: self-check %s\n", ok ? "PASS" : "FAIL");
    }
  }
  fflush(stdout);
  if (hworld != world) CHECK(gr_comm_destroy(hworld));
  CHECK(gr_finalize());
  return ok ? 0 : 1;
}
