/* GPURUN_LOG-filtered logging to stderr with the rank as prefix. */
#include "gr_log.h"

#include "gr_error.h"
#include "gr_escape.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static int level_cache = -1; /* -1: GPURUN_LOG not read yet */

int gr__log_parse_level(const char *s) {
  static const char *const names[] = {"error", "warn", "info", "debug"};
  if (!s) return -1;
  for (int i = 0; i < 4; i++)
    if (strcasecmp(s, names[i]) == 0) return i;
  if (strcasecmp(s, "warning") == 0) return GR_LOG_WARN;
  if (s[0] >= '0' && s[0] <= '3' && s[1] == '\0') return s[0] - '0';
  return -1;
}

gr_log_level gr__log_level(void) {
  int lvl = __atomic_load_n(&level_cache, __ATOMIC_RELAXED);
  if (lvl >= 0) return (gr_log_level)lvl;
  const char *env = getenv("GPURUN_LOG");
  lvl = GR_LOG_WARN;
  int bad = 0;
  if (env && *env) {
    int parsed = gr__log_parse_level(env);
    if (parsed >= 0)
      lvl = parsed;
    else
      bad = 1;
  }
  __atomic_store_n(&level_cache, lvl, __ATOMIC_RELAXED);
  if (bad)
    gr__log(GR_LOG_WARN, "GPURUN_LOG=%s is not one of error, warn, info, debug; using warn", env);
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
