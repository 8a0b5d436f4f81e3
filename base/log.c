/* GPURUN_LOG-filtered logging to stderr with the rank as prefix. */
#include "gr_log.h"

#include "gr_error.h"
#include "gr_escape.h"
#include "gr_param.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static int level_cache = -1; /* -1: GPURUN_LOG not read yet */

int gr__log_parse_level(const char *s) {
  gr_param_value v;
  return s && gr__param_parse(GR_PARAM_LOG, s, &v) == 0 ? v.w : -1;
}

gr_log_level gr__log_level(void) {
  int lvl = __atomic_load_n(&level_cache, __ATOMIC_RELAXED);
  if (lvl >= 0) return (gr_log_level)lvl;
  const char *env = gr__param_raw(GR_PARAM_LOG);
  lvl = env ? gr__log_parse_level(env) : GR_LOG_WARN;
  int bad = lvl < 0;
  if (bad) lvl = gr__param_default(GR_PARAM_LOG).w;
  /* The level is stored before the warning, which is itself filtered by it. */
  __atomic_store_n(&level_cache, lvl, __ATOMIC_RELAXED);
  if (bad) {
    char why[256];
    gr__param_bad_sentence(GR_PARAM_LOG, env, why, sizeof why);
    gr__log(GR_LOG_WARN, "%s", why);
  }
  return (gr_log_level)lvl;
}

void gr__log_reset(void) { __atomic_store_n(&level_cache, -1, __ATOMIC_RELAXED); }

void gr__log(gr_log_level level, const char *fmt, ...) {
  static const char *const tags[] = {"error", "warn", "info", "debug"};
  char msg[2048], line[2048];
  int rank = gr__process_rank();
  int n = rank >= 0 ? snprintf(line, sizeof line, "gpurun[%d] %s: ", rank, tags[level])
                    : snprintf(line, sizeof line, "gpurun %s: ", tags[level]);
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (m < 0) msg[0] = '\0';
  /* Messages quote what gpurun did not write (environment variables, paths, host names, another
   * job's files): every control character and invalid UTF-8 byte is shown as \xNN here, once for
   * all callers, so no message can move the cursor or recolour the operator's terminal. */
  gr__esc_term_str(line + n, sizeof line - (size_t)n - 1, msg);
  size_t len = strlen(line);
  line[len++] = '\n';
  /* One write: lines from concurrent ranks/threads stay whole. */
  ssize_t w = write(STDERR_FILENO, line, len);
  (void)w;
}
