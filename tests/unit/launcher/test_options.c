/* Option, config and environment parsing, and who-am-I detection for every launcher, on fake
 * environments. Expected values are written out by hand. */
#include "gr_launcher.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

/* a fake environment: NULL-terminated "NAME=value" strings */
static const char *fake_get(void *ctx, const char *name) {
  for (const char *const *e = ctx; e && *e; e++) {
    size_t l = strlen(name);
    if (strncmp(*e, name, l) == 0 && (*e)[l] == '=') return *e + l + 1;
  }
  return NULL;
}

static gr_status parse(gr__options *o, const char *const *env, ...) {
  char *argv[32] = {"gpurun"};
  int argc = 1;
  va_list ap;
  va_start(ap, env);
  for (char *a; (a = va_arg(ap, char *));)
    argv[argc++] = a;
  va_end(ap);
  gr__options_init(o);
  return gr__options_parse(o, argc, argv, fake_get, (void *)env);
}

static void test_argv(void **state) {
  (void)state;
  gr__options o;
  assert_int_equal(parse(&o, NULL, "-v", "--policy", "spread", "--gpus-per-rank=2", "--smt", "--",
                         "./prog", "-v", NULL),
                   GR_OK);
  assert_int_equal(o.verbose, 1);
  assert_int_equal(o.policy, GR__POLICY_SPREAD);
  assert_int_equal(o.gpus_per_rank, 2);
  assert_int_equal(o.smt, 1);
  assert_int_equal(o.prog, 7); /* the program's own -v is not ours */
  assert_int_equal(parse(&o, NULL, "./prog", "--policy", "x", NULL), GR_OK);
  assert_int_equal(o.prog, 1);
  assert_int_equal(o.policy, GR__POLICY_CLOSEST);
  assert_int_equal(parse(&o, NULL, "--dry-run", "--format", "json", "--all", NULL), GR_OK);
  assert_int_equal(o.json, 1);
  assert_int_equal(parse(&o, NULL, "--monitor", "--time-limit", "30", "prog", NULL), GR_OK);
  assert_int_equal(o.monitor, 1);
  assert_true(o.monitor_interval == 1.0);
  assert_true(o.time_limit == 30.0);
  assert_int_equal(parse(&o, NULL, "--monitor=0.5", "--gpu-mem-limit", "4G", "prog", NULL), GR_OK);
  assert_true(o.monitor_interval == 0.5);
  assert_int_equal(o.gpu_mem_limit, 4ull << 30);
}

static void test_errors(void **state) {
  (void)state;
  gr__options o;
  struct {
    const char *a, *b, *c;
    const char *want;
  } bad[] = {
      {"--bogus", "prog", NULL, "unknown option '--bogus'"},
      {"--policy", "nearest", "prog", "unknown policy 'nearest'"},
      {"--gpus-per-rank", "0", "prog", "--gpus-per-rank: expected an integer >= 1"},
      {"--gpus-per-rank", "2x", "prog", "expected an integer"},
      {"--local-rank", "2", "prog", "go together"},
      {"--all", "prog", NULL, "--all needs --dry-run"},
      {"--policy", NULL, NULL, "--policy needs a value"},
      {"--smt=maybe", "prog", NULL, "--smt: expected yes or no"},
      {"--time-limit", "-3", "prog", "expected seconds"},
      {"--gpu-mem-limit", "lots", "prog", "expected a size"},
      {"-v", NULL, NULL, "no program to run"},
      {"--format", "xml", "prog", "unknown format 'xml'"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_int_equal(parse(&o, NULL, bad[i].a, bad[i].b, bad[i].c, NULL), GR_ERR_INVALID);
    if (!strstr(gr_last_error(), bad[i].want))
      fail_msg("case %zu: '%s' lacks '%s'", i, gr_last_error(), bad[i].want);
    assert_null(strchr(gr_last_error(), '\n'));
  }
  assert_int_equal(parse(&o, NULL, "--local-rank", "4", "--local-size", "4", "p", NULL),
                   GR_ERR_INVALID);
  assert_int_equal(parse(&o, NULL, "--gpus-per-rank", "2", "--ranks-per-gpu", "2", "p", NULL),
                   GR_ERR_INVALID);
  assert_non_null(strstr(gr_last_error(), "conflict"));
}

static void test_env_and_config(void **state) {
  (void)state;
  char path[] = "/tmp/gpurun-conf-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  const char *text =
      "# site defaults\npolicy = compact\n  gpus-per-rank=2  # two each\nsmt = yes\n\n"
      "time-limit = 60\n";
  assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  close(fd);
  char cfg[64];
  snprintf(cfg, sizeof cfg, "GPURUN_CONFIG=%s", path);
  /* config < environment < argv */
  const char *env[] = {cfg, "GPURUN_GPUS_PER_RANK=3", "GPURUN_MONITOR=2", NULL};
  gr__options o;
  assert_int_equal(parse(&o, env, "--smt=no", "prog", NULL), GR_OK);
  assert_int_equal(o.policy, GR__POLICY_COMPACT);
  assert_int_equal(o.gpus_per_rank, 3);
  assert_int_equal(o.smt, 0);
  assert_true(o.time_limit == 60.0);
  assert_int_equal(o.monitor, 1);
  assert_true(o.monitor_interval == 2.0);
  /* GPURUN_MONITOR=no turns it off */
  const char *env2[] = {"GPURUN_MONITOR=no", "GPURUN_POLICY=none", NULL};
  assert_int_equal(parse(&o, env2, "prog", NULL), GR_OK);
  assert_int_equal(o.monitor, 0);
  assert_int_equal(o.policy, GR__POLICY_NONE);
  /* bad values name their source */
  const char *env3[] = {"GPURUN_POLICY=fast", NULL};
  assert_int_equal(parse(&o, env3, "prog", NULL), GR_ERR_INVALID);
  assert_non_null(strstr(gr_last_error(), "GPURUN_POLICY"));
  gr__options_init(&o);
  assert_int_equal(gr__options_config_text(&o, "policy = spread\nfrobnicate = 1\n", 31, "x.conf"),
                   GR_ERR_INVALID);
  assert_non_null(strstr(gr_last_error(), "x.conf:2: unknown key 'frobnicate'"));
  assert_int_equal(gr__options_config_text(&o, "just words\n", 11, "x.conf"), GR_ERR_INVALID);
  assert_non_null(strstr(gr_last_error(), "x.conf:1"));
  assert_int_equal(parse(&o, NULL, "--config", "/nonexistent.conf", "prog", NULL), GR_ERR_INVALID);
  assert_non_null(strstr(gr_last_error(), "/nonexistent.conf"));
  unlink(path);
  unsigned long long v;
  assert_int_equal(gr__parse_size("512M", &v), 0);
  assert_int_equal(v, 512ull << 20);
  assert_int_equal(gr__parse_size("1.5GB", &v), 0);
  assert_int_equal(v, 3ull << 29);
  assert_int_equal(gr__parse_size("12", &v), 0);
  assert_int_equal(v, 12);
  assert_int_not_equal(gr__parse_size("-1G", &v), 0);
  assert_int_not_equal(gr__parse_size("4Q", &v), 0);
}

/* --priority: argv, GPURUN_PRIORITY, the config key, precedence, and bad values naming their
 * source. The levels are written out by hand. */
static void test_priority(void **state) {
  (void)state;
  gr__options o;
  assert_int_equal(parse(&o, NULL, "prog", NULL), GR_OK);
  assert_int_equal(o.priority, GR__PRIO_NORMAL);
  assert_int_equal(parse(&o, NULL, "--priority", "low", "prog", NULL), GR_OK);
  assert_int_equal(o.priority, GR__PRIO_LOW);
  assert_string_equal(gr__priority_name(o.priority), "low");
  assert_int_equal(parse(&o, NULL, "--priority=high", "prog", NULL), GR_OK);
  assert_int_equal(o.priority, GR__PRIO_HIGH);
  assert_string_equal(gr__priority_name(o.priority), "high");
  const char *env[] = {"GPURUN_PRIORITY=high", NULL};
  assert_int_equal(parse(&o, env, "prog", NULL), GR_OK);
  assert_int_equal(o.priority, GR__PRIO_HIGH);
  /* argv over the environment */
  assert_int_equal(parse(&o, env, "--priority", "normal", "prog", NULL), GR_OK);
  assert_int_equal(o.priority, GR__PRIO_NORMAL);
  assert_string_equal(gr__priority_name(o.priority), "normal");
  gr__options_init(&o);
  assert_int_equal(gr__options_config_text(&o, "priority = low\n", 15, "x.conf"), GR_OK);
  assert_int_equal(o.priority, GR__PRIO_LOW);
  /* bad values: rejected with their source, case matters, no value */
  assert_int_equal(parse(&o, NULL, "--priority", "urgent", "prog", NULL), GR_ERR_INVALID);
  assert_non_null(
      strstr(gr_last_error(), "--priority: expected low, normal or high, got 'urgent'"));
  const char *env2[] = {"GPURUN_PRIORITY=HIGH", NULL};
  assert_int_equal(parse(&o, env2, "prog", NULL), GR_ERR_INVALID);
  assert_non_null(strstr(gr_last_error(), "GPURUN_PRIORITY"));
  const char *env3[] = {"GPURUN_PRIORITY=", NULL};
  assert_int_equal(parse(&o, env3, "prog", NULL), GR_ERR_INVALID);
  assert_int_equal(parse(&o, NULL, "--priority", NULL), GR_ERR_INVALID);
  assert_non_null(strstr(gr_last_error(), "--priority needs a value"));
  gr__options_init(&o);
  assert_int_equal(gr__options_config_text(&o, "priority = -5\n", 14, "x.conf"), GR_ERR_INVALID);
  assert_non_null(strstr(gr_last_error(), "x.conf:1: priority"));
}

static void test_slurm_counts(void **state) {
  (void)state;
  /* 2(x3),1 = 2,2,2,1 */
  assert_int_equal(gr__slurm_tasks_on_node("2(x3),1", 0), 2);
  assert_int_equal(gr__slurm_tasks_on_node("2(x3),1", 2), 2);
  assert_int_equal(gr__slurm_tasks_on_node("2(x3),1", 3), 1);
  assert_int_equal(gr__slurm_tasks_on_node("2(x3),1", 4), -1);
  assert_int_equal(gr__slurm_tasks_on_node("4", 0), 4);
  assert_int_equal(gr__slurm_tasks_on_node("1,3(x2),8", 3), 8);
  assert_int_equal(gr__slurm_tasks_on_node("16(x100)", 99), 16);
  const char *bad[] = {"", "x", "2(3)", "2(x0)", "2(x3", "2,,1", "2,", "2(x3)1", "-1", "2(x)"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    if (gr__slurm_tasks_on_node(bad[i], 0) != -1) fail_msg("'%s' accepted", bad[i]);
}

static void who(const char *const *env, gr_status want_st, int rank, int size, const char *src) {
  gr__options o;
  gr__options_init(&o);
  gr__whoami_t w;
  gr_clear_error();
  gr_status st = gr__whoami(&o, fake_get, (void *)env, &w);
  if (st != want_st) fail_msg("status %d, want %d (%s)", st, want_st, gr_last_error());
  if (st != GR_OK) {
    assert_true(strlen(gr_last_error()) > 0);
    return;
  }
  assert_int_equal(w.local_rank, rank);
  assert_int_equal(w.local_size, size);
  assert_string_equal(w.source, src);
}

static void test_whoami(void **state) {
  (void)state;
  who((const char *[]){NULL}, GR_OK, 0, 1, "none");
  who((const char *[]){"OMPI_COMM_WORLD_LOCAL_RANK=3", "OMPI_COMM_WORLD_LOCAL_SIZE=8", NULL}, GR_OK,
      3, 8, "Open MPI");
  who((const char *[]){"OMPI_COMM_WORLD_LOCAL_RANK=abc", "OMPI_COMM_WORLD_LOCAL_SIZE=8", NULL},
      GR_ERR_INVALID, 0, 0, NULL);
  who((const char *[]){"OMPI_COMM_WORLD_LOCAL_RANK=8", "OMPI_COMM_WORLD_LOCAL_SIZE=8", NULL},
      GR_ERR_INVALID, 0, 0, NULL);
  who((const char *[]){"OMPI_COMM_WORLD_LOCAL_RANK=1", NULL}, GR_ERR_INVALID, 0, 0, NULL);
  /* GPURUN_* first, then Open MPI, Slurm, Hydra, MVAPICH, PALS, Flux */
  who((const char *[]){"GPURUN_LOCAL_RANK=1", "GPURUN_LOCAL_SIZE=2", "OMPI_COMM_WORLD_LOCAL_RANK=3",
                       "OMPI_COMM_WORLD_LOCAL_SIZE=8", NULL},
      GR_OK, 1, 2, "GPURUN");
  who((const char *[]){"SLURM_LOCALID=1", "SLURM_NODEID=3", "SLURM_STEP_TASKS_PER_NODE=2(x3),1",
                       "SLURM_TASKS_PER_NODE=9", NULL},
      GR_ERR_INVALID, 0, 0, NULL); /* 1 task on node 3 */
  who((const char *[]){"SLURM_LOCALID=0", "SLURM_NODEID=3", "SLURM_STEP_TASKS_PER_NODE=2(x3),1",
                       NULL},
      GR_OK, 0, 1, "Slurm");
  who((const char *[]){"SLURM_LOCALID=1", "SLURM_NODEID=1", "SLURM_TASKS_PER_NODE=2(x3),1", NULL},
      GR_OK, 1, 2, "Slurm");
  who((const char *[]){"SLURM_LOCALID=1", "SLURM_STEP_TASKS_PER_NODE=4", NULL}, GR_OK, 1, 4,
      "Slurm");
  who((const char *[]){"SLURM_LOCALID=1", "SLURM_STEP_TASKS_PER_NODE=4(x", NULL}, GR_ERR_INVALID, 0,
      0, NULL);
  who((const char *[]){"SLURM_LOCALID=1", NULL}, GR_ERR_INVALID, 0, 0, NULL);
  who((const char *[]){"MPI_LOCALRANKID=2", "MPI_LOCALNRANKS=4", NULL}, GR_OK, 2, 4, "MPICH/Hydra");
  /* Hydra's mpiexec inside an allocation: its proxy is an srun step of one task per node, whose
   * SLURM_* variables the ranks inherit; Hydra's own count them */
  who((const char *[]){"SLURM_LOCALID=0", "SLURM_NODEID=0", "SLURM_STEP_TASKS_PER_NODE=1",
                       "MPI_LOCALRANKID=1", "MPI_LOCALNRANKS=2", NULL},
      GR_OK, 1, 2, "MPICH/Hydra");
  who((const char *[]){"MV2_COMM_WORLD_LOCAL_RANK=0", "MV2_COMM_WORLD_LOCAL_SIZE=2", NULL}, GR_OK,
      0, 2, "MVAPICH");
  who((const char *[]){"PALS_LOCAL_RANKID=5", "PALS_LOCAL_SIZE=6", NULL}, GR_OK, 5, 6, "PALS");
  who((const char *[]){"FLUX_TASK_LOCAL_ID=3", "FLUX_JOB_SIZE=16", "FLUX_JOB_NNODES=2", NULL},
      GR_OK, 3, 8, "Flux");
  who((const char *[]){"FLUX_TASK_LOCAL_ID=3", NULL}, GR_ERR_INVALID, 0, 0, NULL);
  who((const char *[]){"PALS_LOCAL_RANKID=", "PALS_LOCAL_SIZE=6", NULL}, GR_ERR_INVALID, 0, 0,
      NULL);
  /* options beat everything */
  gr__options o;
  gr__options_init(&o);
  o.local_rank = 2;
  o.local_size = 3;
  gr__whoami_t w;
  const char *env[] = {"OMPI_COMM_WORLD_LOCAL_RANK=0", "OMPI_COMM_WORLD_LOCAL_SIZE=1", NULL};
  assert_int_equal(gr__whoami(&o, fake_get, (void *)env, &w), GR_OK);
  assert_int_equal(w.local_rank, 2);
  assert_string_equal(w.source, "options");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_argv),           cmocka_unit_test(test_errors),
      cmocka_unit_test(test_env_and_config), cmocka_unit_test(test_slurm_counts),
      cmocka_unit_test(test_whoami),         cmocka_unit_test(test_priority),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
