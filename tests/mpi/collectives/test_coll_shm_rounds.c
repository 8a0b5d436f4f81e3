/* The shared-memory path's rounds among the ranks are bounded by the communicator's timeout
 * (collectives/shm_comm.c: every round is gr_agree.h's). A communicator with a 1 s timeout and its
 * own segment (gr__shm_comm_attach, every rank); then the ranks but 0 map a window
 * (gr__shm_comm_window, mode "window") or register a buffer (gr__shm_comm_register, mode
 * "register") while rank 0 computes for 4 s without joining. The first round of both is rank 0's
 * token, broadcast: a plain MPI_Bcast waits for the root for ever. Each late-waiting rank must
 * fail with GR_ERR_TIMEOUT within the timeout plus slack, with the round's sentence naming the
 * token, the communicator and the timeout, nothing mapped and its buffer's contents kept. Rank 0
 * then joins that one round (gr__agree_bcast of the token), so that every rank's abandoned request
 * completes, and all destroy the communicator and finalize cleanly.
 *   test_coll_shm_rounds window|register */
#include <gpurun/coll.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gr_agree.h"
#include "gr_shm.h"
#include "gr_test_clock.h"

static int rank, size, failures;

#include "expect.h"

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int reg = argc > 1 && strcmp(argv[1], "register") == 0;
  if (argc != 2 || (!reg && strcmp(argv[1], "window") != 0) || size < 2) {
    if (!rank) fprintf(stderr, "usage: test_coll_shm_rounds window|register, at 2 ranks or more\n");
    MPI_Finalize();
    return 2;
  }
  const double timeout = 1.0, late_by = 4.0, slack = 2.5; /* slack: a loaded machine */
  gr_comm_config cfg;
  gr_comm_config_init(&cfg);
  cfg.backend = GR_BACKEND_MPI;
  cfg.timeout_s = timeout;
  gr_comm *c = NULL;
  REQUIRE_OK(gr_comm_create(MPI_COMM_WORLD, &cfg, &c));
  gr__shm *s = NULL;
  EXPECT_OK(gr__shm_comm_attach(c, &s));
  REQUIRE(s != NULL); /* one node: the segment */
  size_t bytes = 3 * 4096 + 100;
  unsigned char *buf = NULL;
  if (reg) {
    REQUIRE(posix_memalign((void **)&buf, 4096, 4 * 4096) == 0);
    for (size_t i = 0; i < 4 * 4096; i++)
      buf[i] = (unsigned char)(i * 7 + 3);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank != 0) {
    gr__shm_mapping m;
    double t0 = gr_test_now();
    gr_status st =
        reg ? gr__shm_comm_register(c, s, buf, bytes, &m) : gr__shm_comm_window(c, s, bytes, &m);
    double took = gr_test_now() - t0;
    EXPECT_ST(st, GR_ERR_TIMEOUT);
    if (took < timeout || took > timeout + slack)
      FAIL("gave up after %.2f s, not within %g to %g s", took, timeout, timeout + slack);
    char want[128];
    snprintf(want, sizeof want, "the window's token over communicator %s (from rank 0)", c->id);
    if (!strstr(c->err, want) || !strstr(c->err, "within 1 s (the communicator's timeout)"))
      FAIL("the sentence \"%s\" does not name the token's round, its communicator and timeout",
           c->err);
    if (m.map || m.token || m.peer) FAIL("a failed %s left a mapping", argv[1]);
    for (size_t i = 0; reg && i < 4 * 4096; i++)
      if (buf[i] != (unsigned char)(i * 7 + 3)) {
        FAIL("byte %zu of the buffer changed", i);
        break;
      }
  } else {
    gr_test_spin(late_by); /* computes: no MPI, no gpurun call */
    /* the round the others gave up on, so that their requests complete */
    uint64_t token = 0x5eed;
    EXPECT_OK(gr__agree_bcast(c, "the window's token", &token, sizeof token, 0));
  }
  MPI_Barrier(MPI_COMM_WORLD);
  gr__shm_free(s);
  EXPECT_OK(gr_comm_destroy(c));
  free(buf);
  int all = 0;
  MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0)
    printf("test_coll_shm_rounds %s: %s (%d failures)\n", argv[1], all ? "FAIL" : "ok", all);
  MPI_Finalize();
  return all != 0;
}
