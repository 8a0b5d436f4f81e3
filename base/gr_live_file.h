/* Internal: the live-state file a rank publishes while it runs (collectives/live.c writes it,
 * gpurun-top and the supervisor's Prometheus output read it).
 *
 * <GPURUN_MONITOR_DIR>/<job>/live.<world_rank>, replaced atomically (temp file + rename) at most
 * every GPURUN_LIVE_INTERVAL seconds (default 0.25) while the rank makes collective calls or waits
 * in one. Text, one "key value" per line, unknown keys ignored (version 1):
 *   gpurun-live 1
 *   rank 3 | size 4 | host n01 | pid 1234 | state running|exited
 *   time 1764500000.123        (seconds since the epoch, when written)
 *   interval 0.25 | cpu_pct 99.5 (busy share of one core since the last write) | rss_kib 12345
 *   comm ID RANK SIZE BACKEND SEQ OP COUNT STATE START END CALLS BUSY_S
 *        (one line per communicator: its latest call; OP "-" before the first; STATE
 *         running|done|failed|timeout; END 0 while running; BUSY_S seconds inside finished calls)
 * The file may come from another job or user: the parser bounds every field and keeps strings to
 * [A-Za-z0-9._:-] (anything else becomes '?'), so they are safe to print on a terminal. */
#ifndef GR_LIVE_FILE_H
#define GR_LIVE_FILE_H

#include <stddef.h>

#define GR_LIVE_MAX_COMMS 16
#define GR_LIVE_MAGIC "gpurun-live 1"

typedef struct {
  char id[32], backend[8], op[20], state[12];
  int rank, size;
  unsigned long long seq, count, calls;
  double start, end, busy_s;
} gr__live_comm;

typedef struct {
  int rank, size; /* -1 when absent */
  long pid;       /* 0 when absent */
  char host[64], state[12];
  double time, interval, cpu_pct; /* cpu_pct -1 when absent */
  long long rss_kib;              /* -1 when absent */
  int ncomms;
  gr__live_comm comm[GR_LIVE_MAX_COMMS];
} gr__live;

/* Parses len bytes of text (need not be NUL-terminated). 0 on success, -1 when it is not a
 * version-1 live file or names no rank. */
int gr__live_parse(const char *text, size_t len, gr__live *out);

/* Copies src into dst (cap bytes, always terminated), every byte outside [A-Za-z0-9._:-] as '?'. */
void gr__live_clean(char *dst, size_t cap, const char *src, size_t srclen);

#endif
