/* libFuzzer target for the Slurm hostlist parser and the torch.distributed contract that reads it
 * (launcher/torchenv.c). Input: the hostlist text. Invariants: a list that parses has >= 1 host;
 * index count is out of range; every host is made of host characters only; the contract derived
 * from a Slurm environment with that list either fails with one line or names a valid host. */
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

static void check_host(const char *h) {
  if (!*h) abort();
  for (const char *c = h; *c; c++)
    if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._", *c)) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 2048) return 0;
  char *list = malloc(size + 1);
  if (!list) return 0;
  memcpy(list, data, size);
  list[size] = 0;
  char host[256];
  long n = gr__hostlist_count(list);
  if (n == 0 || n < -1) abort();
  if (n > 0) {
    int first = gr__hostlist_nth(list, 0, host, sizeof host);
    if (first == 0) check_host(host);
    if (gr__hostlist_nth(list, n, host, sizeof host) == 0) abort();
    if (gr__hostlist_nth(list, n - 1, host, sizeof host) == 0) check_host(host);
    if (n > 2 && gr__hostlist_nth(list, n / 2, host, sizeof host) == 0) check_host(host);
  } else if (gr__hostlist_nth(list, 0, host, sizeof host) == 0) {
    abort(); /* a list that does not count cannot name a host */
  }
  char nl[2100];
  snprintf(nl, sizeof nl, "SLURM_JOB_NODELIST=%s", list);
  char *env[] = {"SLURM_PROCID=1",
                 "SLURM_NTASKS=4",
                 "SLURM_LOCALID=1",
                 "SLURM_TASKS_PER_NODE=2(x2)",
                 "SLURM_NODEID=0",
                 nl,
                 NULL};
  gr__options o;
  gr__options_init(&o);
  gr__torch_env_t t;
  gr_clear_error();
  if (gr__torch_env_derive(&o, fake_get, env, &t) == GR_OK)
    check_host(t.master_addr);
  else if (!gr_last_error()[0] || strchr(gr_last_error(), '\n'))
    abort();
  free(list);
  return 0;
}
