/* libFuzzer target for everything gpurun parses from outside: argv, GPURUN_* and launcher
 * variables, config text, Slurm task counts, sizes. Input: NUL-separated fields; the first is
 * config text, "E" + NAME=value fields are the environment, the rest argv. */
#include "gr_launcher.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char *fake_get(void *ctx, const char *name) {
  for (char **e = ctx; *e; e++) {
    size_t l = strlen(name);
    if (strncmp(*e, name, l) == 0 && (*e)[l] == '=') return *e + l + 1;
  }
  return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 4096) return 0;
  char *buf = malloc(size + 1);
  if (!buf) return 0;
  memcpy(buf, data, size);
  buf[size] = 0;
  char *argv[64] = {"gpurun"}, *env[64];
  int argc = 1, nenv = 0;
  char *field = buf, *end = buf + size;
  size_t cfg_len = strlen(field);
  const char *cfg = field;
  field += cfg_len + 1;
  while (field < end && argc < 63 && nenv < 63) {
    size_t l = strlen(field);
    /* never let the input name a file to open: that would fuzz the file system */
    if (field[0] == 'E' && strncmp(field + 1, "GPURUN_CONFIG", 13) != 0)
      env[nenv++] = field + 1;
    else if (field[0] != 'E' && strncmp(field, "--config", 8) != 0)
      argv[argc++] = field;
    field += l + 1;
  }
  argv[argc] = NULL;
  env[nenv] = NULL;

  gr__options o;
  gr__options_init(&o);
  (void)gr__options_config_text(&o, cfg, cfg_len, "fuzz.conf");
  gr__options_init(&o);
  gr_clear_error();
  if (gr__options_parse(&o, argc, argv, fake_get, env) == GR_OK) {
    if (o.prog > argc) abort();
    gr__whoami_t w;
    if (gr__whoami(&o, fake_get, env, &w) == GR_OK &&
        (w.local_rank < 0 || w.local_rank >= w.local_size))
      abort(); /* the invariant every caller relies on */
  } else if (!gr_last_error()[0] || strchr(gr_last_error(), '\n')) {
    abort(); /* every rejection says why, on one line */
  }
  for (int id = 0; id < 4; id++) {
    int n = gr__slurm_tasks_on_node(cfg, id);
    if (n < -1) abort();
  }
  unsigned long long v;
  (void)gr__parse_size(cfg, &v);
  free(buf);
  return 0;
}
