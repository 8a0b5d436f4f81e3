/* gpurun: place this rank (node_plan.c), bind it (bind.c), export the plan (env.c), then execvp the
 * program -- with --monitor / --time-limit after starting the supervisor beside it (the program
 * keeps gpurun's pid either way: gr_supervise.h). Usage and configuration errors exit 2 with one
 * line; a missing / non-executable program 127 / 126, like a shell. */
#include "gr_launcher.h"

#include <gpurun/version.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gr_config.h"
#include "gr_cuda_probe.h"

#include "gr_log.h"
#include "gr_supervise.h"

/* The one place a launcher error is printed: the sentence the failing call recorded. */
static int usage_error(void) {
  fprintf(stderr, "gpurun: %s\n", gr_last_error());
  return 2;
}

int main(int argc, char **argv) {
  gr__options o;
  gr__options_init(&o);
  if (gr__options_parse(&o, argc, argv, gr__real_getenv, NULL) != GR_OK) return usage_error();
  if (o.help) {
    gr__options_usage(stdout);
    return 0;
  }
  if (o.help_env) {
    gr__param_help(stdout);
    return 0;
  }
  if (o.version) {
    printf("gpurun %s (plan version %s)\n", gr_version(), GR_PLAN_VERSION);
    return 0;
  }
  gr__whoami_t me;
  if (gr__whoami(&o, gr__real_getenv, NULL, &me) != GR_OK) return usage_error();

  char host[256] = "";
  if (gethostname(host, sizeof host - 1) != 0) snprintf(host, sizeof host, "?");
  gr__node node;
  if (gr__node_load(&node, o.topology) != GR_OK) return usage_error();
  if (o.verbose && me.local_rank == 0) {
    for (int i = 0; i < node.nskipped; i++)
      fprintf(stderr, "gpurun: %s\n", node.skipped[i]);
    if (node.nskipped_more)
      fprintf(stderr, "gpurun: ignoring %d more server-management display%s\n", node.nskipped_more,
              node.nskipped_more == 1 ? "" : "s");
  }
  /* the GPUs a scheduler already gave this task (a recorded topology is another machine's) */
  gr__visible vis;
  memset(&vis, 0, sizeof vis);
  if (!node.foreign && gr__visible_apply(&node, me.local_rank, me.local_size, gr__real_getenv, NULL,
                                         &vis) != GR_OK) {
    gr__node_free(&node);
    return usage_error();
  }
  /* An inherited CPU mask (taskset, a cpuset hwloc did not already apply) bounds the plan,
   * unless it is the MPI launcher's own per-rank binding, which the plan replaces. */
  char mask_note[300] = "";
  if (!node.foreign) {
    hwloc_bitmap_t cur = hwloc_bitmap_alloc();
    const char *bound_by = gr__launcher_bound(gr__real_getenv, NULL);
    if (cur && hwloc_get_cpubind(node.topo, cur, HWLOC_CPUBIND_PROCESS) == 0 &&
        !hwloc_bitmap_iszero(cur) && !hwloc_bitmap_isincluded(node.allowed, cur)) {
      char *l = gr__bitmap_list(cur);
      if (bound_by)
        snprintf(mask_note, sizeof mask_note,
                 "inherited CPU mask %s is %s's binding of this rank: replaced by the plan",
                 l ? l : "?", bound_by);
      else if (gr__node_bound(&node, cur))
        snprintf(mask_note, sizeof mask_note,
                 "planning within the inherited CPU mask %s (taskset or cpuset)", l ? l : "?");
      free(l);
    }
    hwloc_bitmap_free(cur);
  }
  gr__node_plan_opts po = {.policy = o.policy,
                           .gpus_per_rank = o.gpus_per_rank,
                           .ranks_per_gpu = o.ranks_per_gpu,
                           .smt = o.smt,
                           .vis = &vis};
  gr__node_plan health_notes = {.nwarn = 0};
  if (gr__health_gate(&node, o.gpu_health, me.local_rank, me.local_size, &health_notes) != GR_OK) {
    gr__node_free(&node);
    return usage_error();
  }
  if (o.policy == GR__POLICY_LEAST_LOADED)
    gr__least_loaded(&node, me.local_rank, me.local_size, &po, &health_notes);
  gr__node_plan plan;
  gr_status pst = gr__node_plan_compute(&node, me.local_size, &po, &plan);
  gr__visible_free(&vis);
  if (pst != GR_OK) {
    gr__node_free(&node);
    return usage_error();
  }
  /* the health verdicts travel with the plan's warnings (text and JSON), after its own */
  int health_lines = 0;
  for (int i = 0; i < health_notes.nwarn && plan.nwarn < GR__MAX_WARN; i++, health_lines++)
    memcpy(plan.warn[plan.nwarn++], health_notes.warn[i], sizeof plan.warn[0]);
  int rc = 0;
  if (o.dry_run || o.topo_view) {
    int first = o.all ? 0 : me.local_rank, last = o.all ? me.local_size - 1 : me.local_rank;
    if (o.topo_view)
      gr__print_topo(stdout, &node, &plan);
    else if (o.json) {
      /* one write, so that a launcher forwarding many ranks' output keeps each document whole */
      char *buf = NULL;
      size_t len = 0;
      FILE *mf = open_memstream(&buf, &len);
      if (mf) {
        gr__print_json(mf, &node, &plan, first, last, &o, host);
        fclose(mf);
        fwrite(buf, 1, len, stdout);
        free(buf);
      }
    } else {
      for (int r = first; r <= last; r++) {
        gr__print_rank_line(stdout, &node, &plan, r, host, &o);
        gr__envlist e;
        if (gr__plan_env(&node, &plan, r, &o, &e) == GR_OK) {
          for (int i = 0; i < e.n; i++)
            printf("  %s=%s\n", e.name[i], e.value[i]);
          gr__envlist_free(&e);
        }
      }
      for (int i = 0; i < plan.nwarn; i++)
        printf("warning: %s\n", plan.warn[i]);
    }
    fflush(stdout);
    goto done;
  }
  /* a node-wide warning is the node's: say it once (the health gate has said its own) */
  if (me.local_rank == 0)
    for (int i = 0; i < plan.nwarn - health_lines; i++)
      fprintf(stderr, "gpurun: warning: %s\n", plan.warn[i]);
  if (o.verbose) {
    if (strcmp(me.source, "none") == 0 && me.local_rank == 0)
      fprintf(stderr, "gpurun: no launcher variables found: running as local rank 0 of 1\n");
    if (vis.note[0]) fprintf(stderr, "gpurun: rank %d: %s\n", me.local_rank, vis.note);
    if (mask_note[0]) fprintf(stderr, "gpurun: rank %d: %s\n", me.local_rank, mask_note);
    if (me.inherited)
      fprintf(stderr,
              "gpurun: rank %d: " GR_PLAN_VAR_LOCAL_RANK "/SIZE were set by another gpurun "
              "(" GR_PLAN_VAR_PLAN_PID "): %s\n",
              me.local_rank,
              strcmp(me.source, "GPURUN") == 0 ? "no launcher of this level says more, used them"
                                               : "ignored, the launcher's own variables win");
#if GPURUN_HAVE_CUDA
    /* -v only: asking CUDA starts the driver, which costs the startup of every rank otherwise */
    if (!node.foreign && me.local_rank == 0) {
      int nv = 0;
      for (int g = 0; g < node.ngpus; g++)
        nv += node.gpus[g].vendor == 0x10de;
      int cuda = 0;
      gr_status cst = gr__launcher_cuda_device_count(&cuda);
      if (cuda != nv)
        fprintf(stderr, "gpurun: note: hwloc sees %d NVIDIA GPU%s, the CUDA runtime %d%s%s\n", nv,
                nv == 1 ? "" : "s", cuda, cst != GR_OK ? ": " : "",
                cst != GR_OK ? gr_last_error() : "");
    }
#endif
    gr__print_rank_line(stderr, &node, &plan, me.local_rank, host, &o);
  }
  int bound = 0;
  if (o.policy != GR__POLICY_NONE) {
    /* a foreign topology is the same story on every rank: rank 0 tells it; real failures each */
    if (gr__bind(&node, &plan, me.local_rank, &bound) != GR_OK &&
        (!node.foreign || me.local_rank == 0))
      fprintf(stderr, "gpurun: notice: %s%s%s\n", gr_last_error(), node.foreign ? ": " : "",
              node.foreign ? o.topology : "");
  }
  gr__envlist e;
  gr_status est = gr__plan_env(&node, &plan, me.local_rank, &o, &e);
  if (est != GR_OK) {
    /* a configuration error (the torch contract's reason, naming the option to give): exit 2 */
    int config = est == GR_ERR_INVALID || est == GR_ERR_NOT_FOUND;
    if (config)
      fprintf(stderr, "%s\n", gr_last_error());
    else
      fprintf(stderr, "gpurun: out of memory building the environment\n");
    rc = config ? 2 : 1;
    goto done;
  }
  char kept[300];
  gr__envlist_keep_user_omp(&e, &o, gr__real_getenv, NULL, kept, sizeof kept);
  if (o.verbose && kept[0])
    fprintf(stderr, "gpurun: rank %d: kept the user's %s (--omp=set overrides)\n", me.local_rank,
            kept);
  for (int i = 0; i < e.n; i++)
    setenv(e.name[i], e.value[i], 1);
  /* marks the plan's local rank and size as set by this process (see whoami.c) */
  char pid[24];
  snprintf(pid, sizeof pid, "%d", (int)getpid());
  setenv(GR_PLAN_VAR_PLAN_PID, pid, 1);
  /* what was really applied, for gr_init's placement receipt */
  const char *bound_words = bound == (GR_PLAN_BOUND_CPU | GR_PLAN_BOUND_MEM)
                                ? GR_PLAN_BOUND_CPU_WORD "," GR_PLAN_BOUND_MEM_WORD
                            : bound == GR_PLAN_BOUND_CPU ? GR_PLAN_BOUND_CPU_WORD
                                                         : "";
  setenv(GR_PLAN_VAR_BOUND, bound_words, 1);

  /* the rank's priority: CPU niceness here, inherited by the program; the level for the
   * runtime's gr_stream (GPURUN_PRIORITY, read at gr_init). A refusal is a warning: the job runs. */
  setenv(gr__param_name(GR_PARAM_PRIORITY), gr__priority_name(o.priority), 1);
  if (gr__priority_apply(o.priority) != GR_OK)
    fprintf(stderr, "gpurun: warning: rank %d: %s\n", me.local_rank, gr_last_error());

  char **prog = &argv[o.prog];
  if (o.prometheus[0] && !o.monitor) o.monitor = 1; /* metrics need the sampling supervisor */
  /* the MPI layer in front of the program (trace.c): before the supervisor, whose program it is */
  if (gr__trace_setup(&o, prog[0]) != GR_OK) {
    fprintf(stderr, "gpurun: %s\n", gr_last_error());
    gr__envlist_free(&e);
    rc = 2;
    goto done;
  }
  if (o.monitor || o.time_limit > 0) {
    gr_supervise_opts so;
    gr__supervise_opts_init(&so);
    so.monitor_interval_s = o.monitor ? o.monitor_interval : 0;
    so.time_limit_s = o.time_limit;
    so.local_rank = me.local_rank;
    so.node_name = host;
    so.gpus_pci = gr__envlist_get(&e, GR_PLAN_VAR_GPUS); /* the plan exported above */
    so.cpus = gr__envlist_get(&e, GR_PLAN_VAR_CPUS);
    so.prometheus_dir = o.prometheus[0] ? o.prometheus : NULL;
    so.rank = gr__process_rank(); /* from the launcher's variables; -1 when none is set */
    int code = 1;
    /* returns only when the exec failed (code 127/126) or the supervisor could not start */
    gr_status st = gr__supervise(prog, &so, &code);
    gr__envlist_free(&e);
    gr__node_plan_free(&plan);
    gr__node_free(&node);
    if (st != GR_OK) {
      fprintf(stderr, "gpurun: supervising %s failed: %s\n", prog[0], gr_last_error());
      return code ? code : 1;
    }
    return code;
  }
  gr__envlist_free(&e);
  gr__node_plan_free(&plan);
  gr__node_free(&node);
  execvp(prog[0], prog);
  int errsv = errno;
  /* The same words, prefix and status as the supervisor's (gr__supervise) for the same failure. */
  gr__log(GR_LOG_ERROR, "cannot execute %s: %s", prog[0], strerror(errsv));
  return gr__exec_exit_code(errsv);
done:
  gr__node_plan_free(&plan);
  gr__node_free(&node);
  return rc;
}
