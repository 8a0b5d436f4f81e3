/* train: data-parallel training of a softmax-regression classifier on a synthetic data set.
 *
 * Every rank can generate any sample from its index alone (a counter-based generator), so the data
 * set needs no files: sample i has label hash(i) mod C and features mean[label] + Gaussian noise.
 * Each step takes a fixed global batch of B samples, split into contiguous shares over the ranks;
 * each rank computes its share's gradient with the task pool (chunks of samples), and one fused
 * gr_allreduce per step sums the gradient of every weight and bias plus the loss and the count of
 * correct answers. Every rank then applies the same update.
 *
 * Reproducibility: by default (--reduce exact) the per-sample gradients are summed as 64-bit
 * fixed-point integers (2^-32 resolution). Integer addition is associative, so the summed
 * gradient, and therefore every weight, is bit-identical whatever the number of ranks, threads or
 * chunks; --reduce float sums doubles instead (the usual way; results then depend on the split).
 *
 * Self-check (exit 1 when it fails): the training loss fell below half its starting value, the
 * held-out accuracy is at least 80%, and all ranks hold bit-identical weights. */
#include <errno.h>
#include <gpurun/runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

#define FIXED_ONE 4294967296.0 /* 2^32 */
#define CHUNK 32               /* samples per task */

typedef struct {
  int classes, features, samples, batch, steps, test;
  double lr, noise;
  uint64_t seed;
  int exact, quiet, perturb;
} train_opts;

static const char *g_host = "?";
static int g_rank = -1;

static void fail_call(const char *what, gr_status st) {
  fprintf(stderr, "train: rank %d on %s: %s failed: %s (%s)\n", g_rank, g_host, what,
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

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
/* Uniform in (0, 1), from the top 53 bits. */
static double unit(uint64_t h) { return ((double)(h >> 11) + 0.5) / 9007199254740992.0; }

/* The data set, a pure function of (seed, index). */
static int label_of(const train_opts *o, uint64_t i) {
  return (int)(mix(o->seed ^ mix(i)) % (uint64_t)o->classes);
}
static double mean_of(const train_opts *o, int c, int d) {
  return 2.0 * unit(mix(o->seed + 0x51ed27ull * (uint64_t)(c * o->features + d + 1))) - 1.0;
}
static void features_of(const train_opts *o, uint64_t i, int y, double *x) {
  for (int d = 0; d < o->features; d++) {
    uint64_t h = mix(mix(o->seed ^ 0xabcdefull) ^ (i * (uint64_t)o->features + (uint64_t)d));
    /* Box-Muller from two uniforms of one hash. */
    double u1 = unit(h), u2 = unit(mix(h));
    x[d] = mean_of(o, y, d) + o->noise * sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
  }
}

typedef struct {
  const train_opts *o;
  const double *w; /* classes x (features + 1): weights then bias */
  uint64_t first;  /* global index of this rank's first sample this step */
  int count;       /* samples of this rank this step */
  int64_t *fixed;  /* per chunk: gradient, loss, correct */
  double *flt;     /* the same, --reduce float */
  size_t width;    /* classes * (features + 1) + 2 */
} grad_args;

/* Gradient of the cross-entropy over chunks [lo, hi) of this rank's share. */
static void grad_chunks(size_t lo, size_t hi, void *arg) {
  const grad_args *a = arg;
  const train_opts *o = a->o;
  const int C = o->classes, D = o->features, W = D + 1;
  double x[512], p[256]; /* bounded by the option limits */
  for (size_t ch = lo; ch < hi; ch++) {
    int64_t *gi = a->fixed + ch * a->width;
    double *gf = a->flt + ch * a->width;
    memset(gi, 0, a->width * sizeof *gi);
    memset(gf, 0, a->width * sizeof *gf);
    int k0 = (int)ch * CHUNK, k1 = k0 + CHUNK < a->count ? k0 + CHUNK : a->count;
    for (int k = k0; k < k1; k++) {
      uint64_t idx = (a->first + (uint64_t)k) % (uint64_t)o->samples;
      int y = label_of(o, idx);
      features_of(o, idx, y, x);
      double zmax = -INFINITY;
      int best = 0;
      for (int c = 0; c < C; c++) {
        const double *wc = a->w + (size_t)c * W;
        double z = wc[D];
        for (int d = 0; d < D; d++)
          z += wc[d] * x[d];
        p[c] = z;
        if (z > zmax) zmax = z, best = c;
      }
      double sum = 0;
      for (int c = 0; c < C; c++)
        sum += (p[c] = exp(p[c] - zmax));
      for (int c = 0; c < C; c++)
        p[c] /= sum;
      double loss = -log(p[y] > 1e-300 ? p[y] : 1e-300);
      for (int c = 0; c < C; c++) {
        double g = p[c] - (c == y);
        for (int d = 0; d <= D; d++) {
          double v = g * (d < D ? x[d] : 1.0);
          gi[(size_t)c * W + d] += llround(v * FIXED_ONE);
          gf[(size_t)c * W + d] += v;
        }
      }
      gi[a->width - 2] += llround(loss * FIXED_ONE);
      gf[a->width - 2] += loss;
      gi[a->width - 1] += best == y;
      gf[a->width - 1] += best == y;
    }
  }
}

static void usage(FILE *f) {
  fprintf(f, "usage: train [options]   (run under mpirun/srun, each rank through gpurun)\n"
             "Data-parallel softmax regression on a synthetic data set, one fused gradient\n"
             "allreduce per step; exits 1 unless the loss falls, the held-out accuracy is >= 80%%\n"
             "and every rank ends with bit-identical weights.\n"
             "  --classes C      classes (default 10, at most 256)\n"
             "  --features D     features per sample (default 32, at most 512)\n"
             "  --samples N      training set size (default 65536)\n"
             "  --batch B        global batch, split over the ranks (default 512)\n"
             "  --steps S        steps (default 200)\n"
             "  --lr X           learning rate (default 0.5)\n"
             "  --noise X        feature noise (default 1.0)\n"
             "  --seed N         data set seed (default 1)\n"
             "  --reduce exact|float  fixed-point gradient sums, bit-identical for any number of\n"
             "                   ranks (default), or plain double sums\n"
             "  --quiet          no progress lines\n"
             "  --perturb        one rank spoils a weight (tests the self-check)\n"
             "  --help           this text\n");
}

static int parse_args(int argc, char **argv, train_opts *o) {
  *o = (train_opts){.classes = 10,
                    .features = 32,
                    .samples = 65536,
                    .batch = 512,
                    .steps = 200,
                    .test = 4096,
                    .lr = 0.5,
                    .noise = 1.0,
                    .seed = 1,
                    .exact = 1};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    int bad = 0;
    long lv = 0;
    double dv = 0;
    char *end = NULL;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      return 1;
    }
    if (!strcmp(a, "--quiet")) {
      o->quiet = 1;
      continue;
    }
    if (!strcmp(a, "--perturb")) {
      o->perturb = 1;
      continue;
    }
    if (!v) {
      fprintf(stderr, "train: bad option '%s' (see --help)\n", a);
      return 2;
    }
    i++;
    errno = 0;
    if (!strcmp(a, "--reduce")) {
      o->exact = !strcmp(v, "exact");
      bad = !o->exact && strcmp(v, "float");
    } else if (!strcmp(a, "--lr") || !strcmp(a, "--noise")) {
      dv = strtod(v, &end);
      bad = *end || !(dv > 0 && dv < 100);
      *(!strcmp(a, "--lr") ? &o->lr : &o->noise) = dv;
    } else {
      lv = strtol(v, &end, 10);
      bad = errno || *end || lv < 1;
      if (!strcmp(a, "--classes"))
        bad |= lv < 2 || lv > 256, o->classes = (int)lv;
      else if (!strcmp(a, "--features"))
        bad |= lv > 512, o->features = (int)lv;
      else if (!strcmp(a, "--samples"))
        bad |= lv > (1L << 30), o->samples = (int)lv;
      else if (!strcmp(a, "--batch"))
        bad |= lv > (1L << 24), o->batch = (int)lv;
      else if (!strcmp(a, "--steps"))
        bad |= lv > (1L << 30), o->steps = (int)lv;
      else if (!strcmp(a, "--seed"))
        o->seed = (uint64_t)lv;
      else
        bad = 1;
    }
    if (bad) {
      fprintf(stderr, "train: bad option '%s %s' (see --help)\n", a, v);
      return 2;
    }
  }
  return 0;
}

/* Loss and accuracy of w over n samples starting at index first, split over the ranks. */
static void evaluate(const double *w, uint64_t first, int n, gr_comm *comm, grad_args *ga,
                     int64_t *red, double *loss, double *acc) {
  int rank = gr_comm_rank(comm), size = gr_comm_size(comm);
  int lo = (int)((int64_t)n * rank / size), hi = (int)((int64_t)n * (rank + 1) / size);
  ga->w = w;
  ga->first = first + (uint64_t)lo;
  ga->count = hi - lo;
  size_t nch = ((size_t)ga->count + CHUNK - 1) / CHUNK;
  CHECK(gr_parallel_for(gr_default_pool(), 0, nch, 1, grad_chunks, ga));
  int64_t s[2] = {0, 0};
  for (size_t ch = 0; ch < nch; ch++) {
    s[0] += ga->fixed[ch * ga->width + ga->width - 2];
    s[1] += ga->fixed[ch * ga->width + ga->width - 1];
  }
  CHECK(gr_allreduce(s, red, 2, GR_INT64, GR_SUM, comm, NULL));
  *loss = (double)red[0] / FIXED_ONE / n;
  *acc = (double)red[1] / n;
}

int main(int argc, char **argv) {
  train_opts o;
  int pr = parse_args(argc, argv, &o);
  if (pr) return pr == 1 ? 0 : 2;

  CHECK(gr_init(&argc, &argv));
  gr_comm *world = gr_world();
  static gr_rank_info_t me;
  CHECK(gr_rank_info(&me));
  g_host = me.node;
  g_rank = gr_comm_rank(world);
  /* The buffers here are host memory: use an MPI-backend communicator if the world is NCCL. */
  gr_comm *comm = world;
  if (gr_comm_backend(world) != GR_BACKEND_MPI) {
    gr_comm_config cfg;
    gr_comm_config_init(&cfg);
    cfg.backend = GR_BACKEND_MPI;
    CHECK(gr_comm_create(MPI_COMM_WORLD, &cfg, &comm));
  }
  const int rank = gr_comm_rank(comm), size = gr_comm_size(comm);
  const int C = o.classes, D = o.features;
  const size_t nw = (size_t)C * (D + 1), width = nw + 2;
  if (o.batch < size) {
    if (rank == 0) fprintf(stderr, "train: batch %d is smaller than %d ranks\n", o.batch, size);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const int share_max = (o.batch + size - 1) / size + 1;
  const size_t nch_max = (size_t)(share_max > o.test ? share_max : o.test) / CHUNK + 2;
  double *w = calloc(nw, sizeof *w);
  int64_t *fixed = calloc(nch_max * width, sizeof *fixed);
  double *flt = calloc(nch_max * width, sizeof *flt);
  int64_t *gsum = calloc(width, sizeof *gsum);
  double *gfsum = calloc(width, sizeof *gfsum);
  if (!w || !fixed || !flt || !gsum || !gfsum) {
    fprintf(stderr, "train: rank %d: out of memory\n", rank);
    MPI_Abort(MPI_COMM_WORLD, 3);
  }

  if (rank == 0) {
    printf("train: softmax regression, %d classes x %d features, %d samples, global batch %d "
           "over %d ranks, %d steps, lr %g, %s gradient allreduce of %zu values, %d pool threads "
           "per rank\n",
           C, D, o.samples, o.batch, size, o.steps, o.lr, o.exact ? "fixed-point" : "double", width,
           gr_pool_nthreads(gr_default_pool()));
  }
  {
    char line[512], *all = malloc((size_t)size * sizeof line);
    const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
    snprintf(line, sizeof line,
             "train: rank %d/%d host %.64s local_rank %d/%d "
             "CUDA_VISIBLE_DEVICES=%.64s plan %s",
             me.rank, me.size, me.node, me.local_rank, me.local_size, cvd ? cvd : "unset",
             me.from_plan ? "gpurun" : "none");
    if (!all) MPI_Abort(MPI_COMM_WORLD, 3);
    CHECK(gr_allgather(line, all, sizeof line, GR_UINT8, comm, NULL));
    if (rank == 0)
      for (int r = 0; r < size; r++)
        printf("%s\n", all + (size_t)r * sizeof line);
    free(all);
    fflush(stdout);
  }

  grad_args ga = {.o = &o, .w = w, .fixed = fixed, .flt = flt, .width = width};
  const int lo = (int)((int64_t)o.batch * rank / size);
  const int hi = (int)((int64_t)o.batch * (rank + 1) / size);
  const int every = o.steps >= 10 ? o.steps / 10 : 1;
  double first_loss = 0, last_loss = 0, t_comm = 0;
  int64_t *local = calloc(width, sizeof *local);
  double *localf = calloc(width, sizeof *localf);
  if (!local || !localf) MPI_Abort(MPI_COMM_WORLD, 3);
  CHECK(gr_barrier(comm));
  const double t0 = now();
  for (int step = 0; step < o.steps; step++) {
    ga.first = (uint64_t)step * (uint64_t)o.batch + (uint64_t)lo;
    ga.count = hi - lo;
    size_t nch = ((size_t)ga.count + CHUNK - 1) / CHUNK;
    CHECK(gr_parallel_for(gr_default_pool(), 0, nch, 1, grad_chunks, &ga));
    memset(local, 0, width * sizeof *local);
    memset(localf, 0, width * sizeof *localf);
    for (size_t ch = 0; ch < nch; ch++)
      for (size_t k = 0; k < width; k++) {
        local[k] += fixed[ch * width + k];
        localf[k] += flt[ch * width + k];
      }
    /* The fused allreduce: every gradient, the loss and the hit count in one call. */
    double tc = now();
    double loss;
    if (o.exact) {
      CHECK(gr_allreduce(local, gsum, width, GR_INT64, GR_SUM, comm, NULL));
      for (size_t k = 0; k < nw; k++)
        w[k] -= o.lr * ((double)gsum[k] / FIXED_ONE) / o.batch;
      loss = (double)gsum[width - 2] / FIXED_ONE / o.batch;
    } else {
      CHECK(gr_allreduce(localf, gfsum, width, GR_FLOAT64, GR_SUM, comm, NULL));
      for (size_t k = 0; k < nw; k++)
        w[k] -= o.lr * gfsum[k] / o.batch;
      loss = gfsum[width - 2] / o.batch;
    }
    t_comm += now() - tc;
    if (step == 0) first_loss = loss;
    last_loss = loss;
    if (!o.quiet && rank == 0 && ((step + 1) % every == 0 || step + 1 == o.steps)) {
      printf("train: step %d/%d  batch loss %.4f  %.1f s\n", step + 1, o.steps, loss, now() - t0);
      fflush(stdout);
    }
  }
  CHECK(gr_barrier(comm));
  const double secs = now() - t0;

  if (o.perturb && rank == size - 1) w[0] = nextafter(w[0], INFINITY);

  /* All ranks bit-identical: the min and max of a hash of the weights must agree. */
  uint64_t h = 0;
  for (size_t k = 0; k < nw; k++) {
    uint64_t bits;
    memcpy(&bits, &w[k], sizeof bits);
    h = mix(h ^ bits);
  }
  uint64_t hmin = h, hmax = h;
  CHECK(gr_allreduce(&hmin, &hmin, 1, GR_UINT64, GR_MIN, comm, NULL));
  CHECK(gr_allreduce(&hmax, &hmax, 1, GR_UINT64, GR_MAX, comm, NULL));

  /* Held-out set: the indices right after the training set (the generator's labels are fresh). */
  double test_loss, test_acc;
  int64_t red[2];
  evaluate(w, (uint64_t)o.samples, o.test, comm, &ga, red, &test_loss, &test_acc);

  const int fell = last_loss < 0.5 * first_loss, identical = hmin == hmax, good = test_acc >= 0.8;
  const int ok = fell && identical && good;
  if (rank == 0) {
    printf("train: loss %.4f -> %.4f (%s), held-out loss %.4f accuracy %.2f%% (%s)\n", first_loss,
           last_loss, fell ? "fell" : "DID NOT FALL", test_loss, 100 * test_acc,
           good ? ">= 80%" : "BELOW 80%");
    printf("train: weights %s on all %d ranks, checksum %016llx\n",
           identical ? "bit-identical" : "DIFFER", size, (unsigned long long)hmax);
    printf("train: %.3f s, %.3e samples/s, allreduce %.1f%% of the time (%zu values/step)\n", secs,
           secs > 0 ? (double)o.batch * o.steps / secs : 0.0, secs > 0 ? 100 * t_comm / secs : 0.0,
           width);
    printf("train: self-check %s\n", ok ? "PASS" : "FAIL");
    fflush(stdout);
  }
  free(w);
  free(fixed);
  free(flt);
  free(gsum);
  free(gfsum);
  free(local);
  free(localf);
  if (comm != world) CHECK(gr_comm_destroy(comm));
  CHECK(gr_finalize());
  return ok ? 0 : 1;
}
