/* libFuzzer target for the scheduler's GPU variables (visible.c): CUDA_VISIBLE_DEVICES /
 * ROCR_VISIBLE_DEVICES, SLURM_STEP_GPUS, SLURM_GPUS_ON_NODE, SLURM_LOCALID, on a recorded 8-GPU
 * node, then the plan and the exported variables for every local rank. Input: byte 0 the local
 * size (1-8), byte 1 the local rank, byte 2 bit 0: the AMD node; then newline-separated values of
 * the variables in that order (an absent line: unset). Invariants: never a GPU outside the node,
 * every error a single line. */
#include "gr_launcher.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  const char *name[5], *value[5];
} fenv;

static const char *fake_get(void *ctx, const char *name) {
  fenv *e = ctx;
  for (int i = 0; i < 5; i++)
    if (e->name[i] && e->value[i] && strcmp(e->name[i], name) == 0) return e->value[i];
  return NULL;
}

static gr__node nodes[2];
static gr__gpu *orig[2];
static int orig_n[2], loaded;

static void load_once(void) {
  if (loaded) return;
  static const char *const files[2] = {GR_TOPO_DIR "/mpibind-aws-g4dn-metal-8xT4.xml",
                                       GR_TOPO_DIR "/flux-tuolumne-4xMI300A-SPX.xml"};
  for (int i = 0; i < 2; i++) {
    if (gr__node_load(&nodes[i], files[i]) != GR_OK) abort();
    orig_n[i] = nodes[i].ngpus;
    orig[i] = malloc((size_t)orig_n[i] * sizeof *orig[i]);
    memcpy(orig[i], nodes[i].gpus, (size_t)orig_n[i] * sizeof *orig[i]);
  }
  loaded = 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 3 || size > 2048) return 0;
  load_once();
  int N = 1 + data[0] % 8, rank = data[1] % N, amd = data[2] & 1;
  gr__node *n = &nodes[amd];
  memcpy(n->gpus, orig[amd], (size_t)orig_n[amd] * sizeof *n->gpus);
  n->ngpus = orig_n[amd];
  n->gpu_var[0] = 0;
  n->pinned = 0;
  char all[16];
  memset(all, 1, sizeof all);
  gr__node_keep(n, all); /* links for the whole node again */
  char *buf = malloc(size - 2);
  memcpy(buf, data + 3, size - 3);
  buf[size - 3] = 0;
  fenv e = {{amd ? "ROCR_VISIBLE_DEVICES" : "CUDA_VISIBLE_DEVICES", "SLURM_STEP_GPUS",
             "SLURM_GPUS_ON_NODE", "SLURM_LOCALID", "GPU_DEVICE_ORDINAL"},
            {0}};
  char *p = buf;
  for (int i = 0; i < 5 && p; i++) {
    char *nl = strchr(p, '\n');
    if (nl) *nl = 0;
    if (*p != '#') e.value[i] = p; /* '#' alone: unset */
    p = nl ? nl + 1 : NULL;
  }
  gr__visible v;
  gr_clear_error();
  if (gr__visible_apply(n, rank, N, fake_get, &e, &v) != GR_OK) {
    if (strchr(gr_last_error(), '\n') || !gr_last_error()[0]) abort();
    free(buf);
    return 0;
  }
  if (n->ngpus > orig_n[amd]) abort();
  gr__node_plan pl;
  gr__node_plan_opts po = {.vis = &v};
  if (gr__node_plan_compute(n, N, &po, &pl) == GR_OK) {
    for (int r = 0; r < N; r++) {
      for (int i = 0; i < pl.ranks[r].ngpus; i++)
        if (pl.ranks[r].gpu[i] < 0 || pl.ranks[r].gpu[i] >= n->ngpus) abort();
      for (int mode = 0; mode < 3; mode++) {
        gr__options o;
        gr__options_init(&o);
        o.visible = mode;
        gr__envlist el;
        if (gr__plan_env(n, &pl, r, &o, &el) == GR_OK) gr__envlist_free(&el);
      }
    }
    gr__node_plan_free(&pl);
  }
  gr__visible_free(&v);
  free(buf);
  return 0;
}
