/* The communicator most collectives tests run on: MPI_COMM_WORLD with a given timeout and check
 * mode, on the MPI backend or on a backend table of the tests' own (the NCCL test double's,
 * gr__coll_ops_nccl_double). */
#ifndef WORLD_COMM_H
#define WORLD_COMM_H

#include "gr_coll.h"

#include <gpurun/coll.h>
#include <mpi.h>
#include <stdio.h>

/* ops NULL: the MPI backend. NULL, after a line naming the world rank and the error, when the
 * creation fails; the caller decides how the test ends then. */
static inline gr_comm *world_comm(const gr__coll_ops *ops, double timeout_s, int check) {
  gr_comm_config cfg;
  gr_comm_config_init(&cfg);
  cfg.timeout_s = timeout_s;
  cfg.check = check;
  gr_comm *c = NULL;
  gr_status st;
  if (ops) {
    st = gr__comm_create_ops(MPI_COMM_WORLD, &cfg, ops, &c);
  } else {
    cfg.backend = GR_BACKEND_MPI;
    st = gr_comm_create(MPI_COMM_WORLD, &cfg, &c);
  }
  if (st == GR_OK) return c;
  int r = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  fprintf(stderr, "[rank %d] gr_comm_create: %s\n", r, gr_last_error());
  return NULL;
}

#endif
