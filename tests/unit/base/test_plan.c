/* gr__plan_parse: the launcher's plan variables into a gr_plan, good and bad. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "gr_plan.h"

static gr_plan fresh(void) {
  gr_plan r;
  memset(&r, 0x5a, sizeof r);
  return r;
}

static void test_full_plan(void **state) {
  (void)state;
  char *env[] = {"PATH=/bin",
                 "GPURUN_PLAN_VERSION=1",
                 "GPURUN_LOCAL_RANK=2",
                 "GPURUN_LOCAL_SIZE=4",
                 "GPURUN_GPUS=0000:17:00.0,0000:65:00.0",
                 "GPURUN_CPUS=14-27,70-83",
                 "GPURUN_NUMA=1,3",
                 "GPURUN_NIC=mlx5_2",
                 "GPURUN_BOUND=cpu,mem",
                 "GPURUN_LOCAL_RANKX=9",
                 NULL};
  gr_plan r = fresh();
  assert_int_equal(gr__plan_parse(env, &r), GR_OK);
  assert_int_equal(r.from_plan, 1);
  assert_int_equal(r.local_rank, 2);
  assert_int_equal(r.local_size, 4);
  assert_int_equal(r.ngpus, 2);
  assert_string_equal(r.gpus[0], "0000:17:00.0");
  assert_string_equal(r.gpus[1], "0000:65:00.0");
  assert_string_equal(r.cpus, "14-27,70-83");
  assert_int_equal(r.numa, 1);
  assert_string_equal(r.nic, "mlx5_2");
  assert_string_equal(r.numa_nodes, "1,3");
  assert_int_equal(r.bound, GR_PLAN_BOUND_CPU | GR_PLAN_BOUND_MEM);
}

static void test_cpu_only_plan(void **state) {
  (void)state;
  char *env[] = {
      "GPURUN_PLAN_VERSION=1.2", "GPURUN_LOCAL_RANK=0", "GPURUN_LOCAL_SIZE=1", "GPURUN_GPUS=",
      "GPURUN_CPUS=0",           "GPURUN_NUMA=",        "GPURUN_NIC=",         NULL};
  gr_plan r = fresh();
  assert_int_equal(gr__plan_parse(env, &r), GR_OK);
  assert_int_equal(r.from_plan, 1);
  assert_int_equal(r.ngpus, 0);
  assert_string_equal(r.cpus, "0");
  assert_int_equal(r.numa, -1);
  assert_string_equal(r.nic, "");
  assert_string_equal(r.numa_nodes, "");
  assert_int_equal(r.bound, -1); /* GPURUN_BOUND unset: the gpurun did not say */
  char *cpu_only[] = {"GPURUN_PLAN_VERSION=1", "GPURUN_LOCAL_RANK=0", "GPURUN_LOCAL_SIZE=1",
                      "GPURUN_BOUND=cpu,other", NULL};
  assert_int_equal(gr__plan_parse(cpu_only, &r), GR_OK);
  assert_int_equal(r.bound, GR_PLAN_BOUND_CPU);
  char *nothing[] = {"GPURUN_PLAN_VERSION=1", "GPURUN_LOCAL_RANK=0", "GPURUN_LOCAL_SIZE=1",
                     "GPURUN_BOUND=", NULL};
  assert_int_equal(gr__plan_parse(nothing, &r), GR_OK);
  assert_int_equal(r.bound, 0);
}

static void test_no_plan(void **state) {
  (void)state;
  char *env[] = {"GPURUN_LOCAL_RANK=3", "HOME=/root", NULL};
  gr_plan r = fresh();
  assert_int_equal(gr__plan_parse(env, &r), GR_OK);
  assert_int_equal(r.from_plan, 0);
  assert_int_equal(r.local_rank, -1);
  assert_int_equal(r.ngpus, 0);
  assert_int_equal(r.numa, -1);
  assert_string_equal(r.numa_nodes, "");
  assert_int_equal(r.bound, -1);
  char *empty[] = {NULL};
  assert_int_equal(gr__plan_parse(empty, &r), GR_OK);
  assert_int_equal(gr__plan_parse(NULL, &r), GR_OK);
}

static void expect_bad(char **env, const char *needle) {
  gr_plan r = fresh();
  gr_clear_error();
  assert_int_equal(gr__plan_parse(env, &r), GR_ERR_INVALID);
  assert_int_equal(r.from_plan, 0);
  assert_int_equal(r.ngpus, 0);
  assert_int_equal(r.local_rank, -1);
  const char *msg = gr_last_error();
  if (!strstr(msg, needle)) fail_msg("'%s' does not mention '%s'", msg, needle);
  assert_non_null(strstr(msg, "gr_init"));
}

static void test_bad_plans(void **state) {
  (void)state;
  char *v2[] = {"GPURUN_PLAN_VERSION=2", "GPURUN_LOCAL_RANK=0", "GPURUN_LOCAL_SIZE=1", NULL};
  expect_bad(v2, "GPURUN_PLAN_VERSION=2");
  char *beyond[] = {"GPURUN_PLAN_VERSION=1", "GPURUN_LOCAL_RANK=4", "GPURUN_LOCAL_SIZE=4", NULL};
  expect_bad(beyond, "GPURUN_LOCAL_RANK=4 is outside [0, 4)");
  char *neg[] = {"GPURUN_PLAN_VERSION=1", "GPURUN_LOCAL_RANK=-1", "GPURUN_LOCAL_SIZE=4", NULL};
  expect_bad(neg, "GPURUN_LOCAL_RANK=-1");
  char *word[] = {"GPURUN_PLAN_VERSION=1", "GPURUN_LOCAL_RANK=one", "GPURUN_LOCAL_SIZE=4", NULL};
  expect_bad(word, "GPURUN_LOCAL_RANK='one'");
  char *unset[] = {"GPURUN_PLAN_VERSION=1", "GPURUN_LOCAL_SIZE=4", NULL};
  expect_bad(unset, "(unset)");
  char *zero[] = {"GPURUN_PLAN_VERSION=1", "GPURUN_LOCAL_RANK=0", "GPURUN_LOCAL_SIZE=0", NULL};
  expect_bad(zero, "GPURUN_LOCAL_SIZE='0'");
  char *cpus[] = {"GPURUN_PLAN_VERSION=1", "GPURUN_LOCAL_RANK=0", "GPURUN_LOCAL_SIZE=1",
                  "GPURUN_CPUS=zero-three", NULL};
  expect_bad(cpus, "GPURUN_CPUS='zero-three'");
  char *inf[] = {"GPURUN_PLAN_VERSION=1", "GPURUN_LOCAL_RANK=0", "GPURUN_LOCAL_SIZE=1",
                 "GPURUN_CPUS=4-", NULL};
  expect_bad(inf, "GPURUN_CPUS='4-'");
  char *longid[] = {"GPURUN_PLAN_VERSION=1", "GPURUN_LOCAL_RANK=0", "GPURUN_LOCAL_SIZE=1",
                    "GPURUN_GPUS=0000:17:00.0,00000000000000000:65:00.0", NULL};
  expect_bad(longid, "GPURUN_GPUS");
  char *emptyid[] = {"GPURUN_PLAN_VERSION=1", "GPURUN_LOCAL_RANK=0", "GPURUN_LOCAL_SIZE=1",
                     "GPURUN_GPUS=0000:17:00.0,,0000:65:00.0", NULL};
  expect_bad(emptyid, "empty or over-long");
  /* one more than the limit the launcher shares (GR_MAX_RANK_GPUS) */
  char many[32 + 13 * (GR_MAX_RANK_GPUS + 1)] = "GPURUN_GPUS=";
  for (int i = 0; i <= GR_MAX_RANK_GPUS; i++)
    snprintf(many + strlen(many), sizeof many - strlen(many), "%s%04x:%02x:00.0", i ? "," : "",
             i / 256, i % 256);
  char *toomany[] = {"GPURUN_PLAN_VERSION=1", "GPURUN_LOCAL_RANK=0", "GPURUN_LOCAL_SIZE=1", many,
                     NULL};
  char want[64];
  snprintf(want, sizeof want, "more GPUs than a rank may use (%d)", GR_MAX_RANK_GPUS);
  expect_bad(toomany, want);
  char *numa[] = {"GPURUN_PLAN_VERSION=1", "GPURUN_LOCAL_RANK=0", "GPURUN_LOCAL_SIZE=1",
                  "GPURUN_NUMA=x", NULL};
  expect_bad(numa, "GPURUN_NUMA='x'");
  char longnuma[1100] = "GPURUN_NUMA=0";
  while (strlen(longnuma) < 1090)
    strcat(longnuma, ",1");
  char *toolong[] = {"GPURUN_PLAN_VERSION=1", "GPURUN_LOCAL_RANK=0", "GPURUN_LOCAL_SIZE=1",
                     longnuma, NULL};
  expect_bad(toolong, "longer than 1023");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_full_plan),
      cmocka_unit_test(test_cpu_only_plan),
      cmocka_unit_test(test_no_plan),
      cmocka_unit_test(test_bad_plans),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
