/* Internal: logging to stderr, filtered by GPURUN_LOG=error|warn|info|debug (default warn).
 * Each message is one line, written with a single write(2) so that lines from many ranks and
 * threads do not interleave: "gpurun[3] info: message". Library code prints only through this. */
#ifndef GR_LOG_H
#define GR_LOG_H

#include <gpurun/export.h>

typedef enum { GR_LOG_ERROR = 0, GR_LOG_WARN, GR_LOG_INFO, GR_LOG_DEBUG } gr_log_level;

/* The level from GPURUN_LOG, parsed once. */
gr_log_level gr__log_level(void);
/* Parse a level name ("error", "warn"/"warning", "info", "debug", or 0-3); -1 when unknown. */
int gr__log_parse_level(const char *s);
/* Re-read GPURUN_LOG (tests change it). */
void gr__log_reset(void);
void gr__log(gr_log_level level, const char *fmt, ...) GR_PRINTF(2, 3);

#define GR_LOG_ENABLED(level) (gr__log_level() >= (level))
#define GR_LOG(level, ...)                                                                         \
  do {                                                                                             \
    if (GR_LOG_ENABLED(level)) gr__log(level, __VA_ARGS__);                                        \
  } while (0)
#define GR_ERROR(...) GR_LOG(GR_LOG_ERROR, __VA_ARGS__)
#define GR_WARN(...) GR_LOG(GR_LOG_WARN, __VA_ARGS__)
#define GR_INFO(...) GR_LOG(GR_LOG_INFO, __VA_ARGS__)
#define GR_DEBUG(...) GR_LOG(GR_LOG_DEBUG, __VA_ARGS__)

/* Log a message at most once per process from this call site. */
#define GR_LOG_ONCE(level, ...)                                                                    \
  do {                                                                                             \
    static int gr_once_;                                                                           \
    if (GR_LOG_ENABLED(level) && !__atomic_exchange_n(&gr_once_, 1, __ATOMIC_RELAXED))             \
      gr__log(level, __VA_ARGS__);                                                                 \
  } while (0)

#endif
