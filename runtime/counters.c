/* The runtime's counters file for gpurun-report. */
#include "gr_counters.h"

#include "gr_error.h"
#include "gr_escape.h"
#include "gr_jobdir.h"
#include "gr_safefile.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void jstr(FILE *f, const char *s) { gr__esc_json(f, s); }

/* sep, then "key": (the key names are the contract's, gr_counters_format.h) */
static void key(FILE *f, const char *sep, const char *k) { fprintf(f, "%s\"%s\": ", sep, k); }

void gr__counters_json(FILE *f, const gr_rank_info_t *info, const char *job, const char *priority,
                       double wall_s, const gr_coll_stats *coll, const gr__pool_stats *pool,
                       int pool_threads) {
  key(f, "{", GR_CTR_RANK);
  fprintf(f, "%d", info->rank);
  key(f, ", ", GR_CTR_SIZE);
  fprintf(f, "%d", info->size);
  key(f, ", ", GR_CTR_LOCAL_RANK);
  fprintf(f, "%d", info->local_rank);
  key(f, ", ", GR_CTR_NODE);
  jstr(f, info->node);
  key(f, ", ", GR_CTR_JOB);
  jstr(f, job ? job : "");
  key(f, ", ", GR_CTR_WALL_S);
  fprintf(f, "%.6f", wall_s);
  /* the placement receipt: null unchecked, "" as planned, else what differed */
  key(f, ", ", GR_CTR_RECEIPT);
  if (info->receipt_differs < 0)
    fputs("null", f);
  else
    jstr(f, info->receipt);
  if (priority) {
    key(f, ", ", GR_CTR_PRIORITY);
    jstr(f, priority);
  }
  if (coll) {
    key(f, ",\n ", GR_CTR_COLLECTIVES);
    fputc('{', f);
    int first = 1;
    for (int i = 0; i < GR_COLL_STATS_NOPS; i++) {
      if (!coll->calls[i]) continue;
      const char *name = gr__coll_stats_op_name(i);
      key(f, first ? "\n  " : ",\n  ", name ? name : "?");
      key(f, "{", GR_CTR_OP_CALLS);
      fprintf(f, "%llu", (unsigned long long)coll->calls[i]);
      key(f, ", ", GR_CTR_OP_BYTES);
      fprintf(f, "%llu", (unsigned long long)coll->bytes[i]);
      key(f, ", ", GR_CTR_OP_TIME_S);
      fprintf(f, "%.6f}", coll->seconds[i]);
      first = 0;
    }
    key(f, "},\n ", GR_CTR_COLL_TIMEOUTS);
    fprintf(f, "%llu", (unsigned long long)coll->timeouts);
    key(f, ", ", GR_CTR_COLL_FAILURES);
    fprintf(f, "%llu", (unsigned long long)coll->failures);
  }
  if (pool) {
    key(f, ",\n ", GR_CTR_POOL);
    key(f, "{", GR_CTR_POOL_THREADS);
    fprintf(f, "%d", pool_threads);
    key(f, ", ", GR_CTR_POOL_SPAWNED);
    fprintf(f, "%llu", (unsigned long long)pool->spawned);
    key(f, ", ", GR_CTR_POOL_RUN);
    fprintf(f, "%llu", (unsigned long long)pool->run);
    key(f, ", ", GR_CTR_POOL_STEALS);
    fprintf(f, "%llu", (unsigned long long)pool->steals);
    key(f, ", ", GR_CTR_POOL_SLEEPS);
    fprintf(f, "%llu", (unsigned long long)pool->sleeps);
    key(f, ", ", GR_CTR_POOL_IDLE_S);
    fprintf(f, "%.6f}", (double)pool->idle_ns * 1e-9);
  }
  fputs("}\n", f);
}

gr_status gr__counters_write(const char *dir, const gr_rank_info_t *info, const char *job,
                             const char *priority, double wall_s, const gr_coll_stats *coll,
                             const gr__pool_stats *pool, int pool_threads) {
  char node[256], name[320];
  snprintf(node, sizeof node, "%s", info->node);
  gr__safe_name_fix(node);
  snprintf(name, sizeof name, "%.250s.%d" GR_COUNTERS_SUFFIX, node,
           info->local_rank < 0 ? 0 : info->local_rank);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) return gr__fail_msg(GR_ERR_NOMEM, "out of memory");
  gr__counters_json(f, info, job, priority, wall_s, coll, pool, pool_threads);
  int bad = ferror(f);
  if (fclose(f) != 0 || bad) {
    free(buf);
    return gr__fail_msg(GR_ERR_NOMEM, "out of memory");
  }
  gr_status st = gr__jobdir_replace(dir, job, name, buf, len);
  free(buf);
  return st;
}
