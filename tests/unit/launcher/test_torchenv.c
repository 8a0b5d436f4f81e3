/* The torch.distributed contract (torchenv.c) from each launcher's variables, and the Slurm
 * hostlist parser, on fake environments. Expected values are written out by hand; the ports were
 * computed separately (Python: 10000 + FNV-1a-32(job id) % 20000). */
#include "gr_launcher.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static const char *fake_get(void *ctx, const char *name) {
  for (const char *const *e = ctx; e && *e; e++) {
    size_t l = strlen(name);
    if (strncmp(*e, name, l) == 0 && (*e)[l] == '=') return *e + l + 1;
  }
  return NULL;
}

static gr_status derive(const char *const *env, const char *addr, gr__torch_env_t *t) {
  gr__options o;
  gr__options_init(&o);
  if (addr) snprintf(o.master_addr, sizeof o.master_addr, "%s", addr);
  gr_clear_error();
  return gr__torch_env_derive(&o, fake_get, (void *)env, t);
}

static const char *val(const gr__envlist *e, const char *name) {
  for (int i = 0; i < e->n; i++)
    if (strcmp(e->name[i], name) == 0) return e->value[i];
  return NULL;
}

static void test_hostlist(void **state) {
  (void)state;
  char h[64];
  const char *l = "gpu[01-03,07],login1";
  assert_int_equal(gr__hostlist_count(l), 5);
  const char *want[] = {"gpu01", "gpu02", "gpu03", "gpu07", "login1"};
  for (int i = 0; i < 5; i++) {
    assert_int_equal(gr__hostlist_nth(l, i, h, sizeof h), 0);
    assert_string_equal(h, want[i]);
  }
  assert_int_equal(gr__hostlist_nth(l, 5, h, sizeof h), -1);
  assert_string_equal(h, "");
  /* several groups: the last varies fastest; zero padding follows the low bound */
  l = "r[1-2]-n[008-010].ib,x";
  assert_int_equal(gr__hostlist_count(l), 7);
  const char *want2[] = {"r1-n008.ib", "r1-n009.ib", "r1-n010.ib", "r2-n008.ib",
                         "r2-n009.ib", "r2-n010.ib", "x"};
  for (int i = 0; i < 7; i++) {
    assert_int_equal(gr__hostlist_nth(l, i, h, sizeof h), 0);
    assert_string_equal(h, want2[i]);
  }
  assert_int_equal(gr__hostlist_count("localhost"), 1);
  assert_int_equal(gr__hostlist_nth("localhost", 0, h, sizeof h), 0);
  assert_string_equal(h, "localhost");
  assert_int_equal(gr__hostlist_nth("n[5]", 0, h, sizeof h), 0);
  assert_string_equal(h, "n5");
  /* hostile or malformed: rejected, never a guess */
  const char *bad[] = {"",
                       "[",
                       "]",
                       "a[",
                       "a]",
                       "a[]",
                       "a[1-]",
                       "a[-1]",
                       "a[3-1]",
                       "a[1,]",
                       "a[,1]",
                       "a,,b",
                       ",a",
                       "a,",
                       "a[1[2]]",
                       "a b",
                       "a[x]",
                       "a;rm -rf /",
                       "a[1-2]]",
                       "a[[1]]",
                       "a[0-9999999999]",
                       "a[1-999999999]b[1-999999999]",
                       "a$(id)",
                       "a\nb",
                       "a[1]b[2]c[3]d[4]e[5]f[6]g[7]h[8]i[9]"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_int_equal(gr__hostlist_count(bad[i]), -1);
    assert_int_equal(gr__hostlist_nth(bad[i], 0, h, sizeof h), -1);
  }
  assert_int_equal(gr__hostlist_count(NULL), -1);
  /* a host longer than the buffer fails instead of being cut */
  assert_int_equal(gr__hostlist_nth("abcdefgh[1000-1001]", 0, h, 10), -1);
  assert_int_equal(gr__hostlist_nth("abcdefgh[1000-1001]", 0, h, 13), 0);
  assert_string_equal(h, "abcdefgh1000");
}

static void test_openmpi(void **state) {
  (void)state;
  gr__torch_env_t t;
  const char *one[] = {"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2",
                       "OMPI_COMM_WORLD_LOCAL_RANK=1", "OMPI_COMM_WORLD_LOCAL_SIZE=2",
                       "OMPI_MCA_ess_base_jobid=1178075137", "OMPI_MCA_orte_num_nodes=1",
                       /* a batch step's variables do not override mpirun's */
                       "SLURM_PROCID=0", "SLURM_NTASKS=1", NULL};
  assert_int_equal(derive(one, NULL, &t), GR_OK);
  assert_string_equal(t.source, "Open MPI");
  assert_int_equal(t.rank, 1);
  assert_int_equal(t.size, 2);
  assert_int_equal(t.local_rank, 1);
  assert_int_equal(t.local_size, 2);
  assert_int_equal(t.group_rank, 0);
  assert_string_equal(t.master_addr, "127.0.0.1");
  assert_int_equal(t.master_port, 10669);

  /* three nodes of two ranks: rank 3 is on node 1; rank 0's host is mpirun's */
  const char *hnp = "OMPI_MCA_orte_hnp_uri=1178075136.0;tcp://198.18.0.1,10.0.0.1:35811;"
                    "tcp6://[fd00::2]:57657";
  const char *multi[] = {"OMPI_COMM_WORLD_RANK=3",
                         "OMPI_COMM_WORLD_SIZE=6",
                         "OMPI_COMM_WORLD_LOCAL_RANK=1",
                         "OMPI_COMM_WORLD_LOCAL_SIZE=2",
                         "OMPI_MCA_orte_num_nodes=3",
                         hnp,
                         "OMPI_MCA_orte_local_daemon_uri=1178075136.1;tcp://198.18.0.2:4000",
                         NULL};
  assert_int_equal(derive(multi, NULL, &t), GR_OK);
  assert_int_equal(t.group_rank, 1);
  assert_string_equal(t.master_addr, "198.18.0.1");
  assert_int_equal(t.master_port, 29500); /* no job id */
  /* rank 0 not on mpirun's node: one line naming the option */
  const char *r0_away[] = {"OMPI_COMM_WORLD_RANK=0",
                           "OMPI_COMM_WORLD_SIZE=6",
                           "OMPI_COMM_WORLD_LOCAL_RANK=0",
                           "OMPI_COMM_WORLD_LOCAL_SIZE=2",
                           "OMPI_MCA_orte_num_nodes=3",
                           hnp,
                           "OMPI_MCA_orte_local_daemon_uri=1178075136.1;tcp://198.18.0.2:4000",
                           NULL};
  assert_int_equal(derive(r0_away, NULL, &t), GR_ERR_NOT_FOUND);
  assert_non_null(strstr(gr_last_error(), "--master-addr"));
  assert_null(strchr(gr_last_error(), '\n'));
  assert_int_equal(derive(r0_away, "n0", &t), GR_OK);
  assert_string_equal(t.master_addr, "n0");
  const char *r0_home[] = {"OMPI_COMM_WORLD_RANK=0",
                           "OMPI_COMM_WORLD_SIZE=6",
                           "OMPI_COMM_WORLD_LOCAL_RANK=0",
                           "OMPI_COMM_WORLD_LOCAL_SIZE=2",
                           "OMPI_MCA_orte_num_nodes=3",
                           hnp,
                           "OMPI_MCA_orte_local_daemon_uri=1178075136.0;tcp://198.18.0.1,"
                           "10.0.0.1:35811;tcp6://[fd00::2]:57657",
                           NULL};
  assert_int_equal(derive(r0_home, NULL, &t), GR_OK);
  assert_string_equal(t.master_addr, "198.18.0.1");
  assert_int_equal(t.group_rank, 0);
  /* no hnp URI at all (PMIx-direct launch) */
  const char *nohnp[] = {"OMPI_COMM_WORLD_RANK=3", "OMPI_COMM_WORLD_SIZE=6",
                         "OMPI_COMM_WORLD_LOCAL_RANK=1", "OMPI_COMM_WORLD_LOCAL_SIZE=2", NULL};
  assert_int_equal(derive(nohnp, NULL, &t), GR_ERR_NOT_FOUND);
  assert_non_null(strstr(gr_last_error(), "--master-addr"));
  /* a hostile hnp URI is not taken */
  const char *evil[] = {"OMPI_COMM_WORLD_RANK=3",
                        "OMPI_COMM_WORLD_SIZE=6",
                        "OMPI_COMM_WORLD_LOCAL_RANK=1",
                        "OMPI_COMM_WORLD_LOCAL_SIZE=2",
                        "OMPI_MCA_orte_hnp_uri=1;tcp://$(reboot):1",
                        NULL};
  assert_int_equal(derive(evil, NULL, &t), GR_ERR_NOT_FOUND);
  /* the user's MASTER_ADDR: nothing to derive, no error */
  const char *user[] = {
      "OMPI_COMM_WORLD_RANK=3",       "OMPI_COMM_WORLD_SIZE=6", "OMPI_COMM_WORLD_LOCAL_RANK=1",
      "OMPI_COMM_WORLD_LOCAL_SIZE=2", "MASTER_ADDR=head",       NULL};
  assert_int_equal(derive(user, NULL, &t), GR_OK);
  assert_string_equal(t.master_addr, "");
  /* unparsable or inconsistent */
  const char *bad[] = {"OMPI_COMM_WORLD_RANK=abc", "OMPI_COMM_WORLD_SIZE=2", NULL};
  assert_int_equal(derive(bad, NULL, &t), GR_ERR_INVALID);
  assert_non_null(strstr(gr_last_error(), "OMPI_COMM_WORLD_RANK"));
  const char *big[] = {"OMPI_COMM_WORLD_RANK=2", "OMPI_COMM_WORLD_SIZE=2", NULL};
  assert_int_equal(derive(big, NULL, &t), GR_ERR_INVALID);
  const char *nosize[] = {"OMPI_COMM_WORLD_RANK=0", NULL};
  assert_int_equal(derive(nosize, NULL, &t), GR_ERR_INVALID);
  assert_non_null(strstr(gr_last_error(), "OMPI_COMM_WORLD_SIZE"));
}

static void test_slurm(void **state) {
  (void)state;
  gr__torch_env_t t;
  const char *env[] = {"SLURM_PROCID=5",
                       "SLURM_NTASKS=8",
                       "SLURM_LOCALID=1",
                       "SLURM_STEP_TASKS_PER_NODE=4(x2)",
                       "SLURM_NODEID=1",
                       "SLURM_NNODES=2",
                       "SLURM_JOB_NODELIST=gpu[01-03,07],login1",
                       "SLURM_JOB_ID=1234",
                       "SLURM_STEP_ID=0",
                       NULL};
  assert_int_equal(derive(env, NULL, &t), GR_OK);
  assert_string_equal(t.source, "Slurm");
  assert_int_equal(t.rank, 5);
  assert_int_equal(t.size, 8);
  assert_int_equal(t.local_rank, 1);
  assert_int_equal(t.local_size, 4);
  assert_int_equal(t.group_rank, 1);
  assert_string_equal(t.master_addr, "gpu01");
  assert_int_equal(t.master_port, 14347);
  /* the step's list wins over the job's; SLURM_NPROCS when SLURM_NTASKS is missing */
  const char *step[] = {"SLURM_PROCID=0",
                        "SLURM_NPROCS=2",
                        "SLURM_LOCALID=0",
                        "SLURM_TASKS_PER_NODE=1(x2)",
                        "SLURM_NODEID=0",
                        "SLURM_JOB_NODELIST=gpu[01-04]",
                        "SLURM_STEP_NODELIST=gpu[03-04]",
                        "SLURM_STEP_ID=3",
                        NULL};
  assert_int_equal(derive(step, NULL, &t), GR_OK);
  assert_int_equal(t.size, 2);
  assert_string_equal(t.master_addr, "gpu03");
  assert_int_equal(t.master_port, 29500);
  /* the batch script itself (no SLURM_STEP_ID): one process, not the job's 2 tasks */
  const char *batch[] = {"SLURM_PROCID=0",    "SLURM_NTASKS=2",
                         "SLURM_LOCALID=0",   "SLURM_TASKS_PER_NODE=2",
                         "SLURM_NODEID=0",    "SLURM_JOB_NODELIST=localhost",
                         "SLURM_JOB_ID=1234", NULL};
  assert_int_equal(derive(batch, NULL, &t), GR_OK);
  assert_string_equal(t.source, "Slurm batch step");
  assert_int_equal(t.rank, 0);
  assert_int_equal(t.size, 1);
  assert_int_equal(t.local_size, 1);
  assert_int_equal(t.group_rank, 0);
  assert_string_equal(t.master_addr, "localhost");
  assert_int_equal(t.master_port, 26975); /* FNV-1a of "1234.batch" */
  const char *bad[] = {"SLURM_PROCID=0",
                       "SLURM_NTASKS=2",
                       "SLURM_LOCALID=0",
                       "SLURM_TASKS_PER_NODE=1(x2)",
                       "SLURM_JOB_NODELIST=gpu[01-",
                       NULL};
  assert_int_equal(derive(bad, NULL, &t), GR_ERR_INVALID);
  assert_non_null(strstr(gr_last_error(), "SLURM_JOB_NODELIST"));
  assert_non_null(strstr(gr_last_error(), "--master-addr"));
}

static void test_hydra_pals_flux(void **state) {
  (void)state;
  gr__torch_env_t t;
  const char *hydra1[] = {"PMI_RANK=1", "PMI_SIZE=2", "MPI_LOCALRANKID=1", "MPI_LOCALNRANKS=2",
                          NULL};
  assert_int_equal(derive(hydra1, NULL, &t), GR_OK);
  assert_string_equal(t.source, "MPICH/Hydra");
  assert_int_equal(t.rank, 1);
  assert_string_equal(t.master_addr, "127.0.0.1");
  assert_int_equal(t.group_rank, 0);
  assert_int_equal(t.master_port, 29500);
  const char *hydra2[] = {"PMI_RANK=3", "PMI_SIZE=4", "MPI_LOCALRANKID=1", "MPI_LOCALNRANKS=2",
                          NULL};
  assert_int_equal(derive(hydra2, NULL, &t), GR_ERR_NOT_FOUND);
  assert_non_null(strstr(gr_last_error(), "--master-addr"));
  assert_non_null(strstr(gr_last_error(), "MPICH/Hydra"));
  assert_int_equal(derive(hydra2, "10.1.2.3", &t), GR_OK);
  assert_int_equal(t.group_rank, -1); /* Hydra tells no node count: layout unknown */
  /* Hydra inside an allocation: the rank inherits its proxy's srun step (one task per node) */
  const char *hydra_in_slurm[] = {"SLURM_JOB_ID=5",
                                  "SLURM_STEP_ID=0",
                                  "SLURM_PROCID=0",
                                  "SLURM_NTASKS=1",
                                  "SLURM_LOCALID=0",
                                  "SLURM_STEP_TASKS_PER_NODE=1",
                                  "PMI_RANK=1",
                                  "PMI_SIZE=2",
                                  "MPI_LOCALRANKID=1",
                                  "MPI_LOCALNRANKS=2",
                                  NULL};
  assert_int_equal(derive(hydra_in_slurm, NULL, &t), GR_OK);
  assert_string_equal(t.source, "MPICH/Hydra");
  assert_int_equal(t.rank, 1);
  assert_int_equal(t.size, 2);
  assert_int_equal(t.local_rank, 1);

  const char *pals[] = {
      "PALS_RANKID=3", "PMI_SIZE=4", "PALS_LOCAL_RANKID=1", "PALS_LOCAL_SIZE=2", "PALS_NODEID=1",
      "PALS_APID=abc", NULL};
  assert_int_equal(derive(pals, NULL, &t), GR_ERR_NOT_FOUND);
  assert_int_equal(derive(pals, "nid001", &t), GR_OK);
  assert_string_equal(t.source, "PALS");
  assert_int_equal(t.rank, 3);
  assert_int_equal(t.size, 4);
  assert_int_equal(t.group_rank, 1);
  assert_int_equal(t.master_port, 10331);
  assert_string_equal(t.master_addr, "nid001");

  const char *flux[] = {"FLUX_TASK_RANK=1",  "FLUX_JOB_SIZE=2", "FLUX_TASK_LOCAL_ID=1",
                        "FLUX_JOB_NNODES=1", "FLUX_JOB_ID=x",   NULL};
  assert_int_equal(derive(flux, NULL, &t), GR_OK);
  assert_string_equal(t.source, "Flux");
  assert_int_equal(t.rank, 1);
  assert_int_equal(t.size, 2);
  assert_string_equal(t.master_addr, "127.0.0.1");
  assert_int_equal(t.master_port, 12695);

  const char *none[] = {NULL};
  assert_int_equal(derive(none, NULL, &t), GR_OK);
  assert_string_equal(t.source, "none");
  assert_int_equal(t.rank, 0);
  assert_int_equal(t.size, 1);
  assert_string_equal(t.master_addr, "127.0.0.1");
  assert_int_equal(t.master_port, 29500);
}

static void test_export(void **state) {
  (void)state;
  gr__options o;
  gr__options_init(&o);
  gr__envlist e = {0};
  /* RANK and MASTER_PORT already set: kept (not in the list); the rest exported */
  const char *env[] = {"OMPI_COMM_WORLD_RANK=1",
                       "OMPI_COMM_WORLD_SIZE=2",
                       "OMPI_COMM_WORLD_LOCAL_RANK=1",
                       "OMPI_COMM_WORLD_LOCAL_SIZE=2",
                       "RANK=7",
                       "MASTER_PORT=1234",
                       NULL};
  assert_int_equal(gr__torch_env(&o, fake_get, (void *)env, 1, &e), GR_OK);
  assert_null(val(&e, "RANK"));
  assert_null(val(&e, "MASTER_PORT"));
  assert_string_equal(val(&e, "WORLD_SIZE"), "2");
  assert_string_equal(val(&e, "LOCAL_RANK"), "1");
  assert_string_equal(val(&e, "LOCAL_WORLD_SIZE"), "2");
  assert_string_equal(val(&e, "GROUP_RANK"), "0");
  assert_string_equal(val(&e, "MASTER_ADDR"), "127.0.0.1");
  assert_int_equal(e.n, 5);
  gr__envlist_free(&e);
  /* another rank's row: nothing; --all (the node-wide plan, identical on every rank): nothing */
  assert_int_equal(gr__torch_env(&o, fake_get, (void *)env, 0, &e), GR_OK);
  assert_int_equal(e.n, 0);
  o.all = 1;
  assert_int_equal(gr__torch_env(&o, fake_get, (void *)env, 1, &e), GR_OK);
  assert_int_equal(e.n, 0);
  o.all = 0;
  /* options: a port out of range, an address with shell characters */
  o.master_port = 70000;
  assert_int_equal(gr__torch_env(&o, fake_get, (void *)env, 1, &e), GR_ERR_INVALID);
  assert_non_null(strstr(gr_last_error(), "--master-port"));
  o.master_port = 0;
  snprintf(o.master_addr, sizeof o.master_addr, "h;reboot");
  assert_int_equal(gr__torch_env(&o, fake_get, (void *)env, 1, &e), GR_ERR_INVALID);
  assert_non_null(strstr(gr_last_error(), "--master-addr"));
  assert_int_equal(e.n, 0);
  /* the options reach gr__options */
  char *argv[] = {"gpurun", "--master-addr", "n0", "--master-port=1234", "prog", NULL};
  gr__options_init(&o);
  assert_int_equal(gr__options_parse(&o, 5, argv, fake_get, (void *)env), GR_OK);
  assert_string_equal(o.master_addr, "n0");
  assert_int_equal(o.master_port, 1234);
  assert_int_equal(o.prog_python, 0);
}

/* Rank 0's host unknown (Hydra on two nodes): a Python program gets the one-line error, any other
 * program the contract without MASTER_ADDR/MASTER_PORT - `mpirun gpurun ./sim` across nodes must
 * not fail over a variable only torch.distributed reads. */
static void test_missing_master(void **state) {
  (void)state;
  const char *env[] = {"PMI_RANK=3", "PMI_SIZE=4", "MPI_LOCALRANKID=1", "MPI_LOCALNRANKS=2", NULL};
  struct {
    const char *prog;
    int python;
  } cases[] = {{"./sim", 0},         {"/usr/bin/python3", 1}, {"python3.11", 1},
               {"/opt/torchrun", 1}, {"pythonic-tool", 1},    {"/bin/sh", 0}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    gr__options o;
    gr__options_init(&o);
    char *argv[] = {"gpurun", (char *)cases[i].prog, NULL};
    assert_int_equal(gr__options_parse(&o, 2, argv, fake_get, (void *)env), GR_OK);
    assert_int_equal(o.prog_python, cases[i].python);
    gr__envlist e = {0};
    gr_status st = gr__torch_env(&o, fake_get, (void *)env, 1, &e);
    if (cases[i].python) {
      assert_int_equal(st, GR_ERR_NOT_FOUND);
      assert_non_null(strstr(gr_last_error(), "--master-addr"));
      assert_int_equal(e.n, 0);
    } else {
      assert_int_equal(st, GR_OK);
      assert_string_equal(val(&e, "RANK"), "3");
      assert_string_equal(val(&e, "WORLD_SIZE"), "4");
      assert_null(val(&e, "MASTER_ADDR"));
      assert_null(val(&e, "MASTER_PORT"));
    }
    gr__envlist_free(&e);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_hostlist), cmocka_unit_test(test_openmpi),
      cmocka_unit_test(test_slurm),    cmocka_unit_test(test_hydra_pals_flux),
      cmocka_unit_test(test_export),   cmocka_unit_test(test_missing_master),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
