/* gpurun-report: what the monitor saw on the rank the others waited for (gr_report.h). The MPI
 * layer says whom the others waited for; the supervisor's samples say why that rank was slow:
 * its program ran on a CPU for less of the wall time than the others' (stopped, or its cores
 * shared with other processes: the cores' busy share is high while its own is low; or the
 * hypervisor gave their time to other guests: steal), or its GPU throttled or was shared with
 * another tenant. */
#include "gr_report.h"

#include "gr_median.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The program's CPU seconds per wall second between its first and last rows with CPU time. */
static double on_cpu(const gr__rpt_series *s) {
  double wall = s->cpu_t1 - s->cpu_t0;
  if (isnan(s->cpu_time_s) || !(wall >= 1.0)) return NAN;
  return (s->cpu_time_s - s->cpu_s0) / wall;
}

/* Other ranks the samples found stopped: evidence the MPI statistics may have missed (a rank's
 * neighbours in a halo exchange wait on it and then keep their own neighbours waiting, which can
 * make a neighbour look as much waited for as the rank itself). */
static void also_stopped(const gr__rpt_job *job, int rank, const char *lead, FILE *out) {
  int said = 0;
  for (int i = 0; i < gr__rpt_nseries(job); i++) {
    const gr__rpt_series *s = &GR__RPT_SERIES(job, i);
    if ((i && gr__rpt_same_rank(s, &GR__RPT_SERIES(job, i - 1))) || s->rank == rank || !s->nstopped)
      continue;
    if (said == 4) {
      fputs(", ...", out);
      break;
    }
    fprintf(out, "%s rank %d stopped in %d of %d samples", said++ ? "," : lead, s->rank,
            s->nstopped, s->nstates);
  }
  if (said) fputc('\n', out);
}

/* Steal worth naming: a mean of at least GR_STEAL_NOTABLE percent of the rank's cores' time, and
 * more than GR_STEAL_RATIO times the others' median. A guest with a quiet host loses about nothing
 * (this project's 2-vCPU development VM: 0.055% since boot, 0.07% over 30 s with both vCPUs
 * busy); one sample's figure is coarse (a jiffy, 10 ms, is 5% of a 0.2 s interval on one core),
 * hence the mean over the run; 5% of the time lost is about what it takes to make one rank of a
 * bulk-synchronous job measurably late. The ratio keeps the line for a rank that lost more than
 * its peers: steal that every rank of a node suffers alike slows them all and explains no one
 * rank's lateness. */
#define GR_STEAL_NOTABLE 5.0
#define GR_STEAL_RATIO 2.0

/* Mean steal share of the first series of each rank but skip_rank's with the column. */
static int others_steal(const gr__rpt_job *job, int skip_rank, double *v) {
  int k = 0;
  for (int i = 0; i < gr__rpt_nseries(job); i++) {
    const gr__rpt_series *s = &GR__RPT_SERIES(job, i);
    if ((i && gr__rpt_same_rank(s, &GR__RPT_SERIES(job, i - 1))) || s->rank == skip_rank ||
        isnan(s->steal_mean))
      continue;
    v[k++] = s->steal_mean;
  }
  return k;
}

void gr__rpt_print_why(const gr__rpt_job *job, int rank, FILE *out) {
  if (rank < 0) { /* no rank named: what the samples saw stopped still tells */
    also_stopped(job, -1, "  the monitor saw:", out);
    return;
  }
  const gr__rpt_series *me = NULL;
  int n = gr__rpt_nseries(job), nothers = 0;
  double *others = n ? malloc((size_t)n * sizeof *others) : NULL;
  for (int i = 0; i < n; i++) {
    const gr__rpt_series *s = &GR__RPT_SERIES(job, i);
    if (i && gr__rpt_same_rank(s, &GR__RPT_SERIES(job, i - 1))) continue; /* its other GPUs */
    if (s->rank == rank && !me)
      me = s;
    else if (others && !isnan(on_cpu(s)))
      others[nothers++] = on_cpu(s);
  }
  if (!me || !me->n) {
    free(others);
    return;
  }
  fprintf(out, "  on rank %d:", rank);
  int said = 0;
  double mine = on_cpu(me);
  if (!isnan(mine)) {
    fprintf(out, " its program ran on a CPU %.0f%% of the wall time", 100.0 * mine);
    if (nothers) {
      double med = gr__median(others, nothers);
      fprintf(out, " (the others: a median of %.0f%%)", 100.0 * med);
    }
    said = 1;
  }
  if (me->nstopped)
    fprintf(out, "%s stopped in %d of %d samples", said++ ? ";" : "", me->nstopped, me->nstates);
  /* its cores busy while it was not: other processes ran there. /proc/stat counts stolen time as
   * busy, so the steal share is taken out first where the samples have it. */
  double steal = isnan(me->steal_mean) ? 0 : me->steal_mean;
  double busy = isnan(me->cpu_mean) ? NAN : me->cpu_mean - steal;
  if (!isnan(mine) && !isnan(busy) && busy >= 80.0 && mine < 0.7 && !me->nstopped)
    fprintf(out, "%s its cores were busy %.0f%% of the time%s: shared with other processes",
            said++ ? ";" : "", busy, steal >= 0.5 ? " besides steal" : "");
  /* its cores' time went to other guests */
  if (!isnan(me->steal_mean) && me->steal_mean >= GR_STEAL_NOTABLE) {
    int k = others ? others_steal(job, rank, others) : 0;
    double med = k ? gr__median(others, k) : NAN;
    if (!k || me->steal_mean > GR_STEAL_RATIO * med) {
      fprintf(out, "%s its cores lost %.0f%% of their time to the hypervisor (steal",
              said++ ? ";" : "", me->steal_mean);
      if (k) fprintf(out, "; the others: a median of %.0f%%", med);
      fputc(')', out);
    }
  }
  if (me->throttle_any)
    fprintf(out, "%s its GPU slowed its clocks (reasons 0x%llx)", said++ ? ";" : "",
            me->throttle_any);
  if (!isnan(me->others_sm_mean) && me->others_sm_mean > 0)
    fprintf(out, "%s other processes used %.1f%% of its GPU's SMs", said++ ? ";" : "",
            me->others_sm_mean);
  if (!said) fprintf(out, " nothing in the monitor's samples (no CPU time, state or GPU rows)");
  fputc('\n', out);
  free(others);
  also_stopped(job, rank, "  the monitor also saw:", out);
}

int gr__rpt_monitor_suspect(const gr__rpt_job *job, char *buf, size_t cap) {
  int n = gr__rpt_nseries(job);
  const gr__rpt_series *stop1 = NULL, *stop2 = NULL, *low = NULL;
  double *share = n ? malloc((size_t)n * sizeof *share) : NULL;
  int nshare = 0;
  for (int i = 0; i < n; i++) {
    const gr__rpt_series *s = &GR__RPT_SERIES(job, i);
    if (i && gr__rpt_same_rank(s, &GR__RPT_SERIES(job, i - 1))) continue; /* its other GPUs */
    double f = s->nstates ? (double)s->nstopped / s->nstates : 0;
    if (f > 0 && (!stop1 || f > (double)stop1->nstopped / stop1->nstates)) {
      stop2 = stop1;
      stop1 = s;
    } else if (f > 0 && (!stop2 || f > (double)stop2->nstopped / stop2->nstates)) {
      stop2 = s;
    }
    double c = on_cpu(s);
    if (share && !isnan(c)) {
      share[nshare++] = c;
      if (!low || c < on_cpu(low)) low = s;
    }
  }
  int r = -1;
  double f1 = stop1 ? (double)stop1->nstopped / stop1->nstates : 0,
         f2 = stop2 ? (double)stop2->nstopped / stop2->nstates : 0;
  if (stop1 && f1 >= 0.1 && f1 >= 2 * f2) {
    r = stop1->rank;
    snprintf(buf, cap, "stopped in %d of %d samples", stop1->nstopped, stop1->nstates);
  } else if (low && nshare >= 2) {
    /* the median of the others' shares */
    double mine = on_cpu(low);
    int k = 0;
    for (int i = 0; i < n; i++) {
      const gr__rpt_series *s = &GR__RPT_SERIES(job, i);
      if ((i && gr__rpt_same_rank(s, &GR__RPT_SERIES(job, i - 1))) || s == low || isnan(on_cpu(s)))
        continue;
      share[k++] = on_cpu(s);
    }
    double med = gr__median(share, k);
    if (med > 0.2 && mine <= med * 2.0 / 3.0) {
      r = low->rank;
      snprintf(buf, cap, "on a CPU %.0f%% of the wall time against a median of %.0f%%",
               100.0 * mine, 100.0 * med);
    }
  }
  free(share);
  return r;
}

int gr__rpt_monitor_least_cpu(const gr__rpt_job *job, double *mine, double *median) {
  int n = gr__rpt_nseries(job), k = 0;
  const gr__rpt_series *low = NULL;
  double *v = n ? malloc((size_t)n * sizeof *v) : NULL;
  if (!v) return -1;
  for (int i = 0; i < n; i++) {
    const gr__rpt_series *s = &GR__RPT_SERIES(job, i);
    if ((i && gr__rpt_same_rank(s, &GR__RPT_SERIES(job, i - 1))) || isnan(on_cpu(s))) continue;
    if (!low || on_cpu(s) < on_cpu(low)) low = s;
  }
  for (int i = 0; low && i < n; i++) {
    const gr__rpt_series *s = &GR__RPT_SERIES(job, i);
    if ((i && gr__rpt_same_rank(s, &GR__RPT_SERIES(job, i - 1))) || s == low || isnan(on_cpu(s)))
      continue;
    v[k++] = on_cpu(s);
  }
  int r = -1;
  if (k) {
    *median = gr__median(v, k);
    *mine = on_cpu(low);
    r = low->rank;
  }
  free(v);
  return r;
}
