/* The runtime's counters file for gpurun-report. */
#include "gr_counters.h"

#include "gr_jobdir.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void jstr(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') fputc('\\', f);
    if ((unsigned char)*s >= 0x20) fputc(*s, f);
  }
  fputc('"', f);
}

void gr__counters_json(FILE *f, const gr_rank_info_t *info, const char *job, double wall_s,
                       const gr_coll_stats *coll, const gr__pool_stats *pool, int pool_threads) {
  fprintf(f, "{\"rank\": %d, \"size\": %d, \"local_rank\": %d, \"node\": ", info->rank, info->size,
          info->local_rank);
  jstr(f, info->node);
  fputs(", \"job\": ", f);
  jstr(f, job ? job : "");
  fprintf(f, ", \"wall_s\": %.6f", wall_s);
  /* the placement receipt: null unchecked, "" as planned, else what differed */
  fputs(", \"receipt\": ", f);
  if (info->receipt_differs < 0)
    fputs("null", f);
  else
    jstr(f, info->receipt);
  if (coll) {
    fputs(",\n \"collectives\": {", f);
    int first = 1;
    for (int i = 0; i < GR_COLL_STATS_NOPS; i++) {
      if (!coll->calls[i]) continue;
      const char *name = gr__coll_stats_op_name(i);
      fprintf(f, "%s\n  \"%s\": {\"calls\": %llu, \"bytes\": %llu, \"time_s\": %.6f}",
              first ? "" : ",", name ? name : "?", (unsigned long long)coll->calls[i],
              (unsigned long long)coll->bytes[i], coll->seconds[i]);
      first = 0;
    }
    fprintf(f, "},\n \"coll_timeouts\": %llu, \"coll_failures\": %llu",
            (unsigned long long)coll->timeouts, (unsigned long long)coll->failures);
  }
  if (pool)
    fprintf(f,
            ",\n \"pool\": {\"threads\": %d, \"spawned\": %llu, \"run\": %llu, \"steals\": %llu, "
            "\"sleeps\": %llu, \"idle_s\": %.6f}",
            pool_threads, (unsigned long long)pool->spawned, (unsigned long long)pool->run,
            (unsigned long long)pool->steals, (unsigned long long)pool->sleeps,
            (double)pool->idle_ns * 1e-9);
  fputs("}\n", f);
}

int gr__counters_write(const char *dir, const gr_rank_info_t *info, const char *job, double wall_s,
                       const gr_coll_stats *coll, const gr__pool_stats *pool, int pool_threads) {
  char node[256];
  snprintf(node, sizeof node, "%s", info->node);
  for (char *p = node; *p; p++)
    if (*p == '/' || *p == ' ') *p = '_';
  char jobdir[PATH_MAX - 512], path[PATH_MAX], tmp[PATH_MAX + 32];
  if ((size_t)snprintf(jobdir, sizeof jobdir, "%s/%s", dir, job) >= sizeof jobdir) {
    errno = ENAMETOOLONG;
    return -1;
  }
  if (gr__mkdir_p(jobdir) != 0) return -1;
  snprintf(path, sizeof path, "%s/%s.%d.counters.json", jobdir, node,
           info->local_rank < 0 ? 0 : info->local_rank);
  snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
  FILE *f = fopen(tmp, "w");
  if (!f) return -1;
  gr__counters_json(f, info, job, wall_s, coll, pool, pool_threads);
  if (fclose(f) != 0 || rename(tmp, path) != 0) {
    int e = errno;
    unlink(tmp);
    errno = e;
    return -1;
  }
  return 0;
}
