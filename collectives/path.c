/* The MPI backend's list of execution paths, in the order it prefers them, and a communicator's
 * list of those present (gr_path.h). */
#include "gr_path.h"

#include "gr_agree.h"
#include "gr_algo_count.h"
#include "gr_mpi_be.h"

#include <stdio.h>
#include <string.h>

/* One row per own allreduce of the MPI backend, on what they share (backend_mpi.c). */
#define OWN_ALLREDUCE(row, label, id, own)                                                         \
  static const gr__path row = {.name = label,                                                      \
                               .algo = id,                                                         \
                               .refusal = GR__REFUSAL_AGREED,                                      \
                               .kinds = GR__KIND_BIT(GR__ALLREDUCE),                               \
                               .staged = 1,                                                        \
                               .present = gr__mpi_own_present,                                     \
                               .takes = gr__mpi_own_takes,                                         \
                               .post = gr__mpi_own_post,                                           \
                               .test = gr__mpi_own_test,                                           \
                               .forget = gr__mpi_own_forget,                                       \
                               .impl = &own}

OWN_ALLREDUCE(path_rd, "rd", GR__ALGO_RD, gr__mpi_allreduce_rd);
OWN_ALLREDUCE(path_rab, "rabenseifner", GR__ALGO_RABENSEIFNER, gr__mpi_allreduce_rab);
OWN_ALLREDUCE(path_ring, "ring", GR__ALGO_RING, gr__mpi_allreduce_ring);

extern const gr__path gr__path_hier_ml; /* mpi_path_hier_ml.c */
extern const gr__path gr__path_self;    /* mpi_path_self.c */

/* A call runs on the first row that takes it. */
const gr__path *const gr__mpi_paths[] = {
    &gr__path_self,       /* one rank: every collective is a copy */
    &gr__path_shm_window, /* one node, this rank's buffers in gr_mem_alloc memory: direct */
    &gr__path_shm,        /* one node: every collective passes its descriptor through the segment */
    &gr__path_shm_gate, /* ... larger reduce, alltoall: agreed there, then the MPI library's call */
    &gr__path_hier_ml,  /* hier-ml: allreduce across nodes of equal size (mpi_path_hier_ml.c) */
    &gr__path_hier,     /* across nodes with a pair on some node (gr_hier.h) */
    &path_rd,           /* allreduce with a timeout, up to GR__MPI_RD_MAX_BYTES */
    &path_rab,          /* ... above, at 4, 8, ... ranks */
    &path_ring,         /* ... above, any number of ranks */
    &gr__path_mpi_lib,  /* every call */
    NULL};

gr_status gr__paths_create(gr_comm *c) {
  c->npaths = 0;
  for (const gr__path *const *p = c->ops->paths; p && *p && c->npaths < GR__PATHS_MAX; p++) {
    void *state = NULL;
    if ((*p)->create) {
      gr_status st = (*p)->create(c, *p, &state);
      if (st != GR_OK) {
        char why[GR__ERRLEN];
        snprintf(why, sizeof why, "%s", c->err);
        gr__paths_destroy(c);
        return gr__comm_err(c, st, "path %s: %s", (*p)->name, why);
      }
      if (!state) continue;
    }
    if ((*p)->present && !(*p)->present(c)) {
      if (state && (*p)->destroy) (*p)->destroy(c, state);
      continue;
    }
    c->path_state[c->npaths] = state;
    c->paths[c->npaths++] = *p;
  }
  return GR_OK;
}

void gr__paths_destroy(gr_comm *c) {
  while (c->npaths > 0) {
    int i = --c->npaths;
    if (c->paths[i]->destroy && c->path_state[i]) c->paths[i]->destroy(c, c->path_state[i]);
    c->paths[i] = NULL;
    c->path_state[i] = NULL;
  }
}

int gr__path_takes_all(const gr__path *p, const gr__call *k) {
  (void)p, (void)k;
  return 1;
}

int gr__path_agree(gr_comm *c, int ok) { return gr__agree_all(c, "a path's state", ok); }

int gr__paths_gone(const gr_comm *c, char *buf, size_t len) {
  if (len) buf[0] = '\0';
  for (int i = 0; i < c->npaths; i++)
    if (c->paths[i]->gone) return c->paths[i]->gone(c, buf, len);
  return 0;
}
