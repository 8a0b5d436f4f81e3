/* The runtime's counters file for gpurun-report. */
#include "gr_counters.h"

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

/* "\"name\": " for a key of the contract (gr_counters_format.h) */
#define KEY(k) "\"" k "\": "

void gr__counters_json(FILE *f, const gr_rank_info_t *info, const char *job, const char *priority,
                       double wall_s,
                       const gr_coll_stats *coll, const gr__pool_stats *pool, int pool_threads) {
  fprintf(f, "{" KEY(GR_CTR_RANK) "%d, " KEY(GR_CTR_SIZE) "%d, " KEY(GR_CTR_LOCAL_RANK) "%d, "
             KEY(GR_CTR_NODE),
          info->rank, info->size, info->local_rank);
  jstr(f, info->node);
  fputs(", " KEY(GR_CTR_JOB), f);
  jstr(f, job ? job : "");
  fprintf(f, ", " KEY(GR_CTR_WALL_S) "%.6f", wall_s);
  /* the placement receipt: null unchecked, "" as planned, else what differed */
  fputs(", " KEY(GR_CTR_RECEIPT), f);
  if (info->receipt_differs < 0)
    fputs("null", f);
  else
    jstr(f, info->receipt);
  if (priority) {
    fputs(", " KEY(GR_CTR_PRIORITY), f);
    jstr(f, priority);
  }
  if (coll) {
    fputs(",\n " KEY(GR_CTR_COLLECTIVES) "{", f);
    int first = 1;
    for (int i = 0; i < GR_COLL_STATS_NOPS; i++) {
      if (!coll->calls[i]) continue;
      const char *name = gr__coll_stats_op_name(i);
      fprintf(f,
              "%s\n  \"%s\": {" KEY(GR_CTR_OP_CALLS) "%llu, " KEY(GR_CTR_OP_BYTES) "%llu, "
              KEY(GR_CTR_OP_TIME_S) "%.6f}",
              first ? "" : ",", name ? name : "?", (unsigned long long)coll->calls[i],
              (unsigned long long)coll->bytes[i], coll->seconds[i]);
      first = 0;
    }
    fprintf(f, "},\n " KEY(GR_CTR_COLL_TIMEOUTS) "%llu, " KEY(GR_CTR_COLL_FAILURES) "%llu",
            (unsigned long long)coll->timeouts, (unsigned long long)coll->failures);
  }
  if (pool)
    fprintf(f,
            ",\n " KEY(GR_CTR_POOL) "{" KEY(GR_CTR_POOL_THREADS) "%d, " KEY(GR_CTR_POOL_SPAWNED)
            "%llu, " KEY(GR_CTR_POOL_RUN) "%llu, " KEY(GR_CTR_POOL_STEALS) "%llu, "
            KEY(GR_CTR_POOL_SLEEPS) "%llu, " KEY(GR_CTR_POOL_IDLE_S) "%.6f}",
            pool_threads, (unsigned long long)pool->spawned, (unsigned long long)pool->run,
            (unsigned long long)pool->steals, (unsigned long long)pool->sleeps,
            (double)pool->idle_ns * 1e-9);
  fputs("}\n", f);
}

int gr__counters_write(const char *dir, const gr_rank_info_t *info, const char *job,
                       const char *priority, double wall_s,
                       const gr_coll_stats *coll, const gr__pool_stats *pool, int pool_threads,
                       char *why, size_t why_len) {
  char node[256], name[320];
  snprintf(node, sizeof node, "%s", info->node);
  gr__safe_name_fix(node);
  snprintf(name, sizeof name, "%.250s.%d" GR_COUNTERS_SUFFIX, node,
           info->local_rank < 0 ? 0 : info->local_rank);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) {
    snprintf(why, why_len, "out of memory");
    return -1;
  }
  gr__counters_json(f, info, job, priority, wall_s, coll, pool, pool_threads);
  int bad = ferror(f);
  if (fclose(f) != 0 || bad) {
    free(buf);
    snprintf(why, why_len, "out of memory");
    errno = ENOMEM;
    return -1;
  }
  int rc = -1;
  int dirfd = gr__jobdir_open(dir, job, why, why_len);
  if (dirfd >= 0) {
    rc = gr__file_replace(dirfd, name, buf, len, why, why_len);
    close(dirfd);
  }
  free(buf);
  return rc;
}
