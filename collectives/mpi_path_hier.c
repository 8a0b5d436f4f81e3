/* The MPI backend's row for the hierarchical path across nodes (gr_hier.h): its state, the
 * hierarchy (the node segment, the leaders' communicator), is made by the row's create when the
 * communicator is created and released by its destroy. */
#include "gr_mpi_be.h"

#include "gr_algo_count.h"
#include "gr_live.h"

static gr_status hier_create(gr_comm *c, const gr__path *p, void **state) {
  (void)p;
  gr__live_create_step(GR_LIVE_STEP_HIER); /* gpurun-top: where a creation waits */
  gr__hier *h = NULL;
  gr_status st = gr__hier_attach(c, &h); /* agreed inside: NULL on every rank or none */
  *state = h;
  return st;
}

static void hier_destroy(gr_comm *c, void *state) {
  (void)c;
  gr__hier_free(state);
}

static gr__hier *hier_of(const gr_comm *c) { return gr__path_state(c, &gr__path_hier); }

static int hier_takes(const gr__path *p, const gr__call *k) {
  (void)p;
  return gr__hier_takes(hier_of(k->comm), k);
}

static gr_status hier_post(const gr__path *p, gr__call *k, const void *s, void *r, int *done) {
  (void)p, (void)done;
  return gr__hier_call_post(hier_of(k->comm), k, s, r, &gr__mpi_call_of(k)->hier_op);
}

static gr_status hier_test(gr__call *k, int *done) {
  gr_status st = gr__hier_call_test(hier_of(k->comm), k, &gr__mpi_call_of(k)->hier_op, done);
  if (st != GR_OK) gr__mpi_call_release(k); /* the call's state is released */
  return st;
}

/* The leaders' requests are cancelled or forgotten inside; whether one may still write, its
 * backend says. */
static int hier_forget(gr__call *k) {
  return gr__hier_call_forget(hier_of(k->comm), k, &gr__mpi_call_of(k)->hier_op);
}

static int hier_gone(const gr_comm *c, char *buf, size_t len) {
  return gr__hier_gone(hier_of(c), buf, len);
}

const gr__path gr__path_hier = {.name = GR__ALGO_NAME(HIER),
                                .algo = GR__ALGO_HIER,
                                .refusal = GR__REFUSAL_AGREED,
                                .kinds = GR__KINDS_COLLECTIVE & ~GR__KIND_BIT(GR__ALLTOALL),
                                .staged = 1,
                                .create = hier_create,
                                .destroy = hier_destroy,
                                .takes = hier_takes,
                                .post = hier_post,
                                .test = hier_test,
                                .forget = hier_forget,
                                .gone = hier_gone};
