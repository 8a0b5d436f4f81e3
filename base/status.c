/* Status codes, their names and descriptions, and the thread-local last-error sentence. */
#include "gr_error.h"

#include "gr_parse.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GR_ERROR_MAX 1024

static _Thread_local char last_error[GR_ERROR_MAX];

/* Written once by the runtime (gr_init / comm creation), read by every thread afterwards. */
static int process_rank = -2; /* -2: not looked up yet */

GR_API const char *gr_strerror(gr_status st) {
  switch (st) {
#define GR_STATUS_TEXT_(name, value, text)                                                         \
  case name:                                                                                       \
    return text;
    GR_STATUS_MAP(GR_STATUS_TEXT_)
#undef GR_STATUS_TEXT_
  default:
    return "unknown status";
  }
}

GR_API const char *gr_status_name(gr_status st) {
  switch (st) {
#define GR_STATUS_NAME_(name, value, text)                                                         \
  case name:                                                                                       \
    return #name;
    GR_STATUS_MAP(GR_STATUS_NAME_)
#undef GR_STATUS_NAME_
  default:
    return "GR_UNKNOWN";
  }
}

GR_API const char *gr_last_error(void) { return last_error; }

GR_API void gr_clear_error(void) { last_error[0] = '\0'; }

static int rank_from_env(void) {
  static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK",
                                     "SLURM_PROCID", "FLUX_TASK_RANK"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
    const char *v = getenv(vars[i]);
    int r;
    if (gr__parse_int(v, 0, (1 << 30) - 1, &r) == GR_OK) return r;
  }
  return -1;
}

int gr__process_rank(void) {
  int r = __atomic_load_n(&process_rank, __ATOMIC_RELAXED);
  if (r == -2) {
    r = rank_from_env();
    __atomic_store_n(&process_rank, r, __ATOMIC_RELAXED);
  }
  return r;
}

void gr__set_process_rank(int rank) { __atomic_store_n(&process_rank, rank, __ATOMIC_RELAXED); }

/* Both recorders format into a local buffer first, so an argument may be gr_last_error() itself
 * (a caller wrapping the sentence a helper recorded: "cannot write X: %s", gr_last_error()). */
gr_status gr__fail(gr_status st, const char *call, const char *fmt, ...) {
  char msg[GR_ERROR_MAX] = "";
  int rank = gr__process_rank();
  int n = rank >= 0 ? snprintf(msg, sizeof msg, "rank %d: %s: ", rank, call)
                    : snprintf(msg, sizeof msg, "%s: ", call);
  if (n >= 0 && (size_t)n < sizeof msg) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
    va_end(ap);
  }
  memcpy(last_error, msg, strlen(msg) + 1);
  return st;
}

gr_status gr__fail_msg(gr_status st, const char *fmt, ...) {
  char msg[GR_ERROR_MAX] = "";
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  for (char *c = msg; *c; c++)
    if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
  memcpy(last_error, msg, strlen(msg) + 1);
  return st;
}
