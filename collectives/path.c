/* The MPI backend's table of execution paths, in the order it prefers them, and a communicator's
 * list of those present (gr_path.h). Each line is one row: what it serves (kinds and, as numbers,
 * sizes and rank counts) stands in the row, here for the own allreduces, in the row's file for the
 * others; a call runs on the first row that serves it. */
#include "gr_path.h"

#include "gr_agree.h"
#include "gr_algo_count.h"
#include "gr_log.h"
#include "gr_mpi_be.h"
#include "gr_param.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* One row per own allreduce of the MPI backend (a gr__mpi_algo in a file of its own, on what they
 * share: mpi_own.c): its id in GR__ALGO_LIST, its algorithm and the sizes and rank counts it
 * serves (from one byte at least: an empty call has nothing to exchange). They run only with a
 * timeout (without one MPI's blocking call is the fastest, mpi_own.c) and may be selected by name
 * (GPURUN_COLL_ALGO). */
#define OWN_ALLREDUCE(row, id, own, ...)                                                           \
  extern const gr__mpi_algo own;                                                                   \
  static const gr__path row = {.name = GR__ALGO_NAME(id),                                          \
                               .algo = GR__ALGO_##id,                                              \
                               .refusal = GR__REFUSAL_AGREED,                                      \
                               .kinds = GR__KIND_BIT(GR__ALLREDUCE),                               \
                               .serves = {__VA_ARGS__},                                            \
                               .select = 1,                                                        \
                               .staged = 1,                                                        \
                               .present = gr__mpi_own_present,                                     \
                               .takes = gr__mpi_own_takes,                                         \
                               .post = gr__mpi_own_post,                                           \
                               .test = gr__mpi_own_test,                                           \
                               .forget = gr__mpi_own_forget,                                       \
                               .impl = &own}

/* Two ranks, up to 256 bytes (Open MPI's inline send): one exchange (mpi_allreduce_pair.c), ahead
 * of rd, which it ties: 8 B float32 sum at 2 ranks, gpurun-bench-coll --vs rd with rounds
 * alternating, 10 runs with the sides flipped, best round 0.99x rd's (0.98-1.04x; medians moved
 * 0.7-8 us with load average 11 on the 2-core VM); 980 instructions per post against rd's 1176,
 * 76 per unfinished test against 87 (callgrind, both ranks, 402 calls). */
OWN_ALLREDUCE(path_pair, PAIR, gr__mpi_allreduce_pair, .min_bytes = 1, .max_bytes = 256,
              .min_ranks = 2, .max_ranks = 2);
/* Up to 32 KiB: 16 chunks each way of 2 KiB, under the eager limit (mpi_allreduce_rd.c). */
OWN_ALLREDUCE(path_rd, RD, gr__mpi_allreduce_rd, .min_bytes = 1, .max_bytes = GR__MPI_RD_MAX_BYTES);
/* Above, at 4, 8, ... ranks with an element per rank (mpi_allreduce_rab.c). */
OWN_ALLREDUCE(path_rab, RABENSEIFNER, gr__mpi_allreduce_rab, .min_bytes = GR__MPI_RD_MAX_BYTES + 1,
              .min_ranks = 4, .pof2 = 1, .per_rank = 1);
/* Above, any number of ranks with an element per rank (mpi_allreduce_ring.c). */
OWN_ALLREDUCE(path_ring, RING, gr__mpi_allreduce_ring, .min_bytes = GR__MPI_RD_MAX_BYTES + 1,
              .per_rank = 1);

extern const gr__path gr__path_hier_ml; /* mpi_path_hier_ml.c */
extern const gr__path gr__path_self;    /* mpi_path_self.c */

/* A call runs on the first row that serves it. */
const gr__path *const gr__mpi_paths[] = {
    &gr__path_self,       /* one rank: every collective is a copy */
    &gr__path_shm_window, /* one node, this rank's buffers in gr_mem_alloc memory: direct */
    &gr__path_shm,        /* one node: every collective passes its descriptor through the segment */
    &gr__path_shm_gate, /* ... larger reduce, alltoall: agreed there, then the MPI library's call */
    &gr__path_hier_ml,  /* hier-ml: allreduce across nodes of equal size (mpi_path_hier_ml.c) */
    &gr__path_hier,     /* across nodes with a pair on some node (gr_hier.h) */
    &path_pair,         /* allreduce with a timeout: two ranks, tiny */
    &path_rd,           /* ... up to GR__MPI_RD_MAX_BYTES */
    &path_rab,          /* ... above, at 4, 8, ... ranks */
    &path_ring,         /* ... above, any number of ranks */
    &gr__path_mpi_lib,  /* every call */
    NULL};

/* A communicator keeps each present row in c->paths: a longer table does not compile. */
_Static_assert(sizeof gr__mpi_paths / sizeof gr__mpi_paths[0] - 1 <= GR__PATHS_MAX,
               "the MPI backend's table has more rows than GR__PATHS_MAX (gr_coll.h): raise it");

int gr__paths_count(const gr__path *const *list) {
  int n = 0;
  while (list && list[n])
    n++;
  return n;
}

const gr__path *gr__path_named(const gr__path *const *list, const char *name) {
  if (!name) return NULL;
  while (isspace((unsigned char)*name))
    name++;
  size_t n = strlen(name);
  while (n > 0 && isspace((unsigned char)name[n - 1]))
    n--;
  for (int i = 0; list && list[i]; i++)
    if (list[i]->select && strlen(list[i]->name) == n && strncasecmp(list[i]->name, name, n) == 0)
      return list[i];
  return NULL;
}

/* The place plus one of the row of list named name (gr__path_named), 0 for none. */
static int row_named(const gr__path *const *list, const char *name) {
  const gr__path *named = gr__path_named(list, name);
  for (int i = 0; named && list[i]; i++)
    if (list[i] == named) return i + 1;
  return 0;
}

int gr__path_named_row(const gr__path *const *list) {
  return row_named(list, gr__param_raw(GR_PARAM_COLL_ALGO));
}

void gr__path_row_take(gr_comm *c, const gr_comm *parent) {
  if (!parent->algo_row_agreed || !parent->ops || !c->ops) return;
  int row = parent->algo_row;
  if (row > gr__paths_count(parent->ops->paths)) return; /* c's own round then */
  /* by name: c's table may be another backend's than parent's (today both are parent's) */
  c->algo_row = row > 0 ? row_named(c->ops->paths, parent->ops->paths[row - 1]->name) : 0;
  c->algo_row_agreed = 1;
}

/* GPURUN_COLL_ALGO naming a row (gr_path.h, Selection by name): the row's place in the backend's
 * list, agreed by the creation's round (c->algo_row, coll.c) or, on a communicator a row makes for
 * itself, by one round here (the lowest and the highest any rank names); where every rank names
 * the same row and it is present, it moves to the front of c->paths, and the rows whose refusals
 * travel another way are left out (each kind keeps one route, gr__path_refusal). */
static gr_status select_named(gr_comm *c) {
  if (c->size < 2) return GR_OK; /* one rank: the self row takes every collective */
  int row = c->algo_row;
  if (!c->algo_row_agreed) {
    int64_t mine = gr__path_named_row(c->ops->paths), got[2];
    gr_status st = gr__agree(c, "the row GPURUN_COLL_ALGO names", GR__AGREE_MINMAX, &mine, got, 1);
    if (st != GR_OK) return st;
    row = got[0] == got[1] ? (int)got[0] : -1;
  }
  if (row < 0) {
    int mine = gr__path_named_row(c->ops->paths);
    GR_LOG_ONCE(GR_LOG_WARN,
                "collectives: GPURUN_COLL_ALGO names different rows on the ranks of communicator "
                "%s (%s here); none is selected, the table's order stands",
                c->id, mine ? c->ops->paths[mine - 1]->name : "none");
    return GR_OK;
  }
  if (row == 0) return GR_OK;
  if (row > gr__paths_count(c->ops->paths))
    return gr__comm_err(c, GR_ERR_INTERNAL,
                        "the row GPURUN_COLL_ALGO names was agreed as place %d of the %s "
                        "backend's table, which has %d rows",
                        row, c->ops->name, gr__paths_count(c->ops->paths));
  const gr__path *named = c->ops->paths[row - 1];
  int at = -1;
  for (int i = 0; i < c->npaths && at < 0; i++)
    if (c->paths[i] == named) at = i;
  if (at < 0) {
    GR_LOG(GR_LOG_INFO,
           "collectives: GPURUN_COLL_ALGO=%s: the row is not present on communicator %s (%d "
           "ranks); the table's order stands",
           named->name, c->id, c->size);
    return GR_OK;
  }
  const gr__path *rows[GR__PATHS_MAX];
  void *state[GR__PATHS_MAX];
  int n = 0;
  rows[n] = named;
  state[n++] = c->path_state[at];
  for (int i = 0; i < c->npaths; i++) {
    const gr__path *p = c->paths[i];
    if (p == named) continue;
    if (p->refusal != named->refusal) { /* left out: its state goes now */
      if (p->destroy && c->path_state[i]) p->destroy(c, c->path_state[i]);
      continue;
    }
    rows[n] = p;
    state[n++] = c->path_state[i];
  }
  memcpy(c->paths, rows, (size_t)n * sizeof rows[0]);
  memcpy(c->path_state, state, (size_t)n * sizeof state[0]);
  for (int i = n; i < c->npaths; i++)
    c->paths[i] = NULL, c->path_state[i] = NULL;
  c->npaths = n;
  return GR_OK;
}

gr_status gr__paths_create(gr_comm *c) {
  c->npaths = 0;
  int rows = gr__paths_count(c->ops->paths);
  if (rows > GR__PATHS_MAX)
    return gr__comm_err(c, GR_ERR_INTERNAL,
                        "the %s backend's table has %d rows and a communicator keeps at most %d "
                        "(GR__PATHS_MAX, gr_coll.h): raise it",
                        c->ops->name, rows, GR__PATHS_MAX);
  for (const gr__path *const *p = c->ops->paths; p && *p; p++) {
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
  gr_status st = select_named(c);
  if (st != GR_OK) {
    char why[GR__ERRLEN];
    snprintf(why, sizeof why, "%s", c->err);
    gr__paths_destroy(c);
    return gr__comm_err(c, st, "%s", why);
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
