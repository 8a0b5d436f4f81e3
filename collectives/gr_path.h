/* Internal: the execution paths a call can take, as data: the one table of algorithm choice (NCCL's
 * struct ncclTransport and its tuning table are the models). A path is one row: its name, the
 * kinds it serves and, as numbers, the sizes and rank counts it serves (gr__serves), how a refusal
 * travels with it, how it posts, tests and forgets a call and names a vanished peer, and, where it
 * needs any, the state it keeps on a communicator (its create and destroy). A backend lists its
 * rows in the order it prefers them (gr__coll_ops.paths: the MPI backend's in path.c, the NCCL
 * backend's in backend_nccl.c); a list longer than GR__PATHS_MAX fails the creation with a
 * sentence (the MPI backend's list is checked when it compiles as well).
 *
 * At creation, after the backend's create (gr__paths_create, coll.c), each row in that order runs
 * its create, if it has one, and is kept in the communicator's configuration (c->paths) if it
 * exists there, with its state beside it (c->path_state, gr__path_state). Whether it exists is
 * decided from what every rank agreed (timeout, GPURUN_COLL_ALGO as c->algo, whether the
 * shared-memory segment exists) and from what its create agreed, so the list is the same on every
 * rank. A row's create is collective over c->mpi and decides the same on every rank: a row whose
 * create fails on any rank (a node without its segment, a communicator that could not be made,
 * memory) is absent on all of them (it agrees on that itself, gr__path_agree, and leaves no state);
 * a status other than GR_OK fails the creation with c->err's sentence and is only for what fails
 * on every rank (an agreement that timed out). A row's create sees the rows before it (a row may
 * build on another's state). At destruction (gr__paths_destroy, before the backend's destroy) the
 * rows' destroys run in the reverse order; an abort leaves them to the destroy.
 *
 * Selection by name: GPURUN_COLL_ALGO may name a row that is marked select (the MPI backend's own
 * allreduces: rd, ring, rabenseifner, pair); where every rank of the communicator names the same
 * row and it is present, it moves to the front of c->paths and takes every call it serves (its
 * numbers still hold: an algorithm is never run outside the sizes it was written for). Ranks that
 * name different rows select none (said once). The row's place in the list is one more value of
 * the creation's round that agrees on GPURUN_COLL_ALGO's mode (coll.c, c->algo_row), so naming a
 * row costs no round of its own; a communicator a row makes for itself over some of the parent's
 * ranks (gr__comm_new: hier.c's leaders', hier-ml's node and slice) takes the parent's agreement
 * (gr__path_row_take) and spends no round either; one that takes none agrees on it in one round
 * of gr__paths_create. The modes (mpi, flat, auto, hier, hier-ml) are not rows
 * and stay c->algo's (gr_coll.h).
 *
 * A call's path is the first row of that list that serves it (its kind, then its numbers, then its
 * takes where it has one), chosen once when the backend posts the call and kept in the call
 * (gr__call.path); test and forget go through it, and reach its state through the call's
 * communicator (gr__path_state(k->comm, k->path)).
 *
 * A new algorithm is one file that defines its row (or its gr__mpi_algo, for an allreduce of the
 * MPI backend's own), with its create and destroy where it keeps state, and one line in its
 * backend's list; the recipe is docs/architecture.md's "Adding an algorithm". */
#ifndef GR_PATH_H
#define GR_PATH_H

#include "gr_coll.h"
#include "gr_dtype.h"

/* How a refusal (a rank that rejected its own arguments, coll.h, Errors) travels on a path. */
typedef enum {
  GR__REFUSAL_NONE,    /* it does not: only check mode's fingerprints carry one */
  GR__REFUSAL_CARRIED, /* in the call: the refusing rank posts it without data on this path (the
                        * shared-memory descriptor; NCCL's verdict in front of the enqueue) */
  GR__REFUSAL_AGREED,  /* agreed before: the front end's verdict round, or the in-band form */
} gr__refusal;

/* The bit of kind k in gr__path.kinds. */
#define GR__KIND_BIT(k) (1u << (unsigned)(k))
#define GR__KINDS_COLLECTIVE                                                                       \
  (GR__KIND_BIT(GR__ALLREDUCE) | GR__KIND_BIT(GR__BROADCAST) | GR__KIND_BIT(GR__REDUCE) |          \
   GR__KIND_BIT(GR__ALLGATHER) | GR__KIND_BIT(GR__REDUCE_SCATTER) | GR__KIND_BIT(GR__ALLTOALL) |   \
   GR__KIND_BIT(GR__BARRIER))
#define GR__KINDS_ALL (GR__KINDS_COLLECTIVE | GR__KIND_BIT(GR__SEND) | GR__KIND_BIT(GR__RECV))

/* What a row serves besides its kinds, as numbers (the row's line of the tuning table): a call
 * whose bytes (count times the element size, this rank's part as the call describes it) lie in
 * [min_bytes, max_bytes], on a communicator of min_ranks to max_ranks ranks, a power of two of them
 * where pof2, with at least one element per rank where per_rank. A bound of 0 is open. What the
 * numbers cannot say (the segment, where the buffers lie, a timeout) the row's takes says. */
typedef struct {
  size_t min_bytes, max_bytes;
  int min_ranks, max_ranks;
  unsigned char pof2, per_rank;
} gr__serves;

struct gr__path {
  const char *name; /* as gr__algo_name (GR__ALGO_LIST) and GPURUN_COLL_ALGO spell it */
  int algo;         /* the gr__algo counted for each allreduce it starts (gr_algo_count.h), or -1 */
  gr__refusal refusal;
  /* The kinds it may take at some size (the first row of a communicator serving a kind says how a
   * refusal of that kind travels, gr__path_refusal; it posts the refusing rank's call). */
  unsigned kinds;
  gr__serves serves; /* the sizes and rank counts it serves (all 0: every one) */
  int select;        /* GPURUN_COLL_ALGO may name it (see above; base/param.c lists the word) */
  int staged; /* the MPI backend passes host copies of device buffers to post (and copies back) */
  /* Optional: build the row's state on c (collective over c->mpi, after the backend's create and
   * the creates of the rows before it): *state non-NULL where the row exists, NULL on every rank
   * where it does not (see above). */
  gr_status (*create)(gr_comm *c, const gr__path *p, void **state);
  /* Optional: release the state create left (local; only memory after MPI_Finalize). */
  void (*destroy)(gr_comm *c, void *state);
  /* Whether the row exists on c: decided from what c agreed at creation, the same on every rank.
   * NULL: it exists where its create left a state. */
  int (*present)(const gr_comm *c);
  /* Optional: whether it takes call k (a kind and numbers it serves): from the call's description
   * and c's agreed configuration only, so the same answer on every rank that agrees on the call.
   * NULL: every call its kinds and numbers allow. */
  int (*takes)(const gr__path *p, const gr__call *k);
  /* Start k (k->be_area as the backend left it). send and recv are the buffers to use (a backend
   * that stages passes its host copies; NULL for a refusing rank's call, k->fe_refused). May
   * complete the call (*done = 1). */
  gr_status (*post)(const gr__path *p, gr__call *k, const void *send, void *recv, int *done);
  /* Progress a posted call; *done = 1 once its result is in place. */
  gr_status (*test)(gr__call *k, int *done);
  /* Release what can be released of a call that will never complete (timeout, abort); 1 when
   * nothing writes into its buffers any more (its staging may then be freed), 0 otherwise. */
  int (*forget)(gr__call *k);
  /* Optional: the ranks of c this rank can see have vanished (gr__coll_ops.gone). */
  int (*gone)(const gr_comm *c, char *buf, size_t len);
  const void *impl; /* the row's own data (an own allreduce's gr__mpi_algo), or NULL */
};

/* Keep the rows of c->ops->paths present on c, in order, in c->paths, each with the state its
 * create left in c->path_state (after the backend's create, collective, on every rank alike). On
 * failure (c->err says why) no row is left and nothing of theirs is kept. */
gr_status gr__paths_create(gr_comm *c);
/* The rows' destroys on c, the last row first; c->paths is empty afterwards (before the backend's
 * destroy; local). */
void gr__paths_destroy(gr_comm *c);
/* For a row that takes every call of the kinds it serves (its takes; NULL says the same). */
int gr__path_takes_all(const gr__path *p, const gr__call *k);
/* The row of list (ended by NULL) named name (blanks around it and case ignored) that may be
 * selected by name, or NULL. */
const gr__path *gr__path_named(const gr__path *const *list, const char *name);
/* The row of list this rank's GPURUN_COLL_ALGO names (gr__path_named), as its place plus one; 0
 * where it names none (unset, a mode, a word no row of list answers to). What each rank brings to
 * the agreement on the row (above, Selection by name). */
int gr__path_named_row(const gr__path *const *list);
/* For a communicator c that a row makes for itself over some of parent's ranks, after gr__comm_new
 * and before gr__paths_create: c takes parent's agreement on the row GPURUN_COLL_ALGO names
 * (c->algo_row), translated by the row's name into c's table (none where c's table has no such
 * row; none, quietly, where parent's ranks named different rows: parent says so), so that
 * gr__paths_create spends no round on it. Every rank of c computes the same from what parent's
 * ranks agreed. Nothing where parent has no agreement (c then agrees in a round of its own). */
void gr__path_row_take(gr_comm *c, const gr_comm *parent);
/* Rows in list, up to its NULL. */
int gr__paths_count(const gr__path *const *list);
/* For a row's create: the MIN of ok over c->mpi (1 where every rank passed 1), bounded by c's
 * timeout; 0 as well where the agreement itself failed. */
int gr__path_agree(gr_comm *c, int ok);

/* Row p's state on c (what its create left), or NULL where p is not one of c's rows. */
static inline void *gr__path_state(const gr_comm *c, const gr__path *p) {
  for (int i = 0; i < c->npaths; i++)
    if (c->paths[i] == p) return c->path_state[i];
  return NULL;
}

/* The first row serving kind on c (a refusing rank's call takes it), or NULL. */
static inline const gr__path *gr__path_serving(const gr_comm *c, gr__kind kind) {
  for (int i = 0; i < c->npaths; i++)
    if (c->paths[i]->kinds & GR__KIND_BIT(kind)) return c->paths[i];
  return NULL;
}

/* How a refusal of a call of this kind travels on c: the refusal of the first row serving it
 * (GR__REFUSAL_NONE when none does). */
static inline gr__refusal gr__path_refusal(const gr_comm *c, gr__kind kind) {
  const gr__path *p = gr__path_serving(c, kind);
  return p ? p->refusal : GR__REFUSAL_NONE;
}

/* gr__coll_ops.gone from the rows: the gone of the first present row that has one. */
int gr__paths_gone(const gr_comm *c, char *buf, size_t len);

/* Whether k's size and c's number of ranks lie in p's numbers (gr__serves). */
static inline int gr__path_serves(const gr__path *p, const gr__call *k) {
  const gr__serves *s = &p->serves;
  int P = k->comm->size;
  if (s->min_bytes | s->max_bytes) {
    size_t bytes = k->count * gr__dtype_size(k->dtype);
    if (bytes < s->min_bytes || (s->max_bytes && bytes > s->max_bytes)) return 0;
  }
  return P >= s->min_ranks && (!s->max_ranks || P <= s->max_ranks) &&
         (!s->pof2 || (P & (P - 1)) == 0) && (!s->per_rank || k->count >= (size_t)P);
}

/* The path that runs k: the row serving k's kind for a refusing rank's call, else the first row
 * that serves it (kind, numbers, takes); NULL when none does (a backend's list ends with a row
 * that takes every call). */
static inline const gr__path *gr__path_choose(const gr__call *k) {
  const gr_comm *c = k->comm;
  if (k->fe_refused) return gr__path_serving(c, k->kind);
  for (int i = 0; i < c->npaths; i++) {
    const gr__path *p = c->paths[i];
    if ((p->kinds & GR__KIND_BIT(k->kind)) && gr__path_serves(p, k) &&
        (!p->takes || p->takes(p, k)))
      return p;
  }
  return NULL;
}

#endif
