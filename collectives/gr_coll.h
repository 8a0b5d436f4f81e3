/* Internal: the communicator, one call's descriptor, and the table of functions each backend
 * fills (backend_mpi.c, backend_nccl.c). The front end (coll.c and the files of gr_front.h) owns
 * argument checks, the check mode, the timeout, groups, the flight recorder and the counters; a
 * backend only starts and progresses work. docs/architecture.md ("Collectives") describes the
 * contract. */
#ifndef GR_COLL_H
#define GR_COLL_H

#include "gr_fork.h"
#include <gpurun/coll.h>
#include <mpi.h>
#include <stdint.h>

#include "gr_clock.h" /* gr__wall_now (flight times), gr__mono_now (deadlines) */
#include "gr_coll_stats.h"
#include "gr_list.h"
#include "gr_op_names.h"

/* gr__kind (the calls) and gr__kind_name: observe/gr_op_names.h, which the flight recorder
 * shares with the MPI layer. */

/* Which of its own arguments a rank refused (gr__validate in validate.c): carried to the other
 * ranks so that they can name it (coll.h, Errors). Fits in 4 bits (the shared-memory
 * descriptor). */
typedef enum {
  GR__ARG_NONE,
  GR__ARG_DTYPE,
  GR__ARG_OP,
  GR__ARG_ROOT,
  GR__ARG_COUNT,
  GR__ARG_SEND,
  GR__ARG_RECV,
  GR__ARG_OVERLAP,
  GR__ARG_BUFFERS,
  GR__ARG_REQ,     /* a non-blocking call with req NULL: no request to hand out */
  GR__ARG_GROUPED, /* a non-blocking call inside a group */
  GR__NARGS
} gr__arg;
const char *gr__arg_name(int a);

typedef struct gr__flight gr__flight;
typedef struct gr__coll_ops gr__coll_ops;
typedef struct gr__path gr__path; /* an execution path (gr_path.h) */

/* GPURUN_COLL_ALGO, read once at creation (coll.c) and agreed: the lowest setting among the
 * ranks wins (mpi < flat < auto < hier < hier-ml). mpi: neither the shared-memory nor the
 * hierarchical path; flat: no hierarchical path; auto (also "shm", the default): both where they
 * measured faster (gr_hier.h); hier: the hierarchical path for every call it can take; hier-ml:
 * as hier, and allreduces take the multi-leader row where every node has the same number of
 * ranks (mpi_path_hier_ml.c). */
typedef enum {
  GR__COLL_ALGO_MPI,
  GR__COLL_ALGO_FLAT,
  GR__COLL_ALGO_AUTO,
  GR__COLL_ALGO_HIER,
  GR__COLL_ALGO_HIER_ML
} gr__coll_algo;
const char *gr__coll_algo_name(int a);

/* At most this many rows in a backend's list of paths (gr_path.h). */
#define GR__PATHS_MAX 12

/* Flags the front end (gr_front.h) keeps on a call; a backend never reads or writes them. */
typedef enum {
  GR__FE_INBAND = 1u << 1, /* the in-band form of a call (refuse.c): one more element carries
                                  * the refusal flag; fe_shown is the call the user made */
} gr__fe_flag;

/* Bytes of per-call state a backend may keep inside the call record itself (see be_area). */
#define GR__BE_CALL_BYTES 64

/* One call, from validation to completion. The front end owns every field but be_area; a backend
 * reads the description (kind .. stream, comm, seq, blocking_ok) and keeps its own per-call state
 * in be_area, which it casts to a struct of its own (checked against GR__BE_CALL_BYTES with a
 * static assertion) and which may point to more state the backend allocates and frees itself.
 * The front end creates every record zeroed (CALL_INIT), copies be_area with it, never reads it; a
 * call never moves once posted (a request lives in its gr_request, a group in its queue). */
typedef struct gr__call {
  gr__kind kind;
  const void *send;
  void *recv;
  size_t count; /* elements, as the public call counts them */
  gr_dtype dtype;
  gr_op op;
  int root; /* root (broadcast, reduce) or peer (send, recv); -1 otherwise */
  gr_stream stream;
  gr_comm *comm;
  uint64_t seq;      /* the communicator's call number (every call) */
  double t_start;    /* seconds since the epoch */
  int flight_slot;   /* index in the flight ring, -1 none */
  int blocking_ok;   /* the backend may complete inside post() (no timeout to honour) */
  int fe_refused;    /* gr__arg this rank refused: the call joins the exchange without data (the
                     * backend posts no buffer; only where its path carries refusals, gr_path.h) */
  gr_status fe_bad;  /* a grouped call this rank refused, queued in check mode so peers learn it */
  int fe_request;    /* a gr_i... request: the user may wait for it before older ones */
  int fe_waiting;    /* a request inside gr_wait: its test may work at full speed and sleep; a
                      * request's test otherwise does a bounded slice of work and returns */
  unsigned fe_flags; /* gr__fe_flag */
  /* The call as the user made it where the front end runs another in its place (the in-band
   * forms: count + 1, a broadcast as an allreduce of bytes): records, counters and sentences
   * show that one. NULL: this call is the user's. */
  const struct gr__call *fe_shown;
  /* The path that runs the call (gr_path.h), chosen by the backend's post; NULL before. */
  const gr__path *path;
  /* The backend's, opaque to the front end (backend_mpi.c: gr__mpi_call in gr_mpi_be.h;
   * backend_nccl.c: nccl_call). */
  _Alignas(16) unsigned char be_area[GR__BE_CALL_BYTES];
} gr__call;

/* What a backend can do, in gr__coll_ops.caps: the front end asks these instead of the kind. */
typedef enum {
  /* gr_allreduce_multi may pack the buffers into one host buffer and run one allreduce when the
   * communicator has no device buffers (cheaper than a group of calls on this backend; NCCL fuses
   * a group itself and takes device buffers, which a host memcpy cannot pack). */
  GR__CAP_PACK_MULTI = 1u << 0,
  /* A call one rank refuses still joins the exchange (coll.h, Errors): the front end agrees on a
   * verdict first, or the refusal is carried with the call where its path says so (gr_path.h,
   * GR__REFUSAL_CARRIED: in the shared-memory descriptor, or as the verdict the sequencer posts in
   * front of the call, GR__CAP_VERDICT_IN_FRONT). Without it, only check mode does. */
  GR__CAP_JOIN_REFUSALS = 1u << 1,
  /* gr_mem_register makes whole pages reachable (the MPI backend maps the buffer's pages into the
   * node's windows), so two registrations must not share a page; without it a registration is
   * the buffer's bytes alone (NCCL registers a device range, and small cudaMalloc buffers share
   * pages). */
  GR__CAP_REGISTER_PAGES = 1u << 2,
  /* The backend's rows cannot carry a refusal in the call itself (NCCL's stream has no room for
   * it): a refusal carried with the call (ROUTE_CALL) travels as a 4-byte verdict the sequencer
   * posts in front of it over c->side_mpi, and the call is posted only once the verdict is in and
   * says nobody refused (gr__seq_carried_verdict). */
  GR__CAP_VERDICT_IN_FRONT = 1u << 3,
  /* The backend runs every call of a communicator in one order, point-to-point included (NCCL's
   * stream): a send or receive keeps its place in the communicator's queue behind older calls
   * instead of posting at once (gr__seq_in_line). Without it point-to-point calls match by peer and
   * tag (MPI) and overtake the queue. */
  GR__CAP_P2P_IN_LINE = 1u << 4,
} gr__coll_cap;

/* Memory from gr_mem_alloc or a buffer gr_mem_register made reachable (mem.c keeps the
 * communicator's list; the backend maps and unmaps). id is the communicator's number for it, the
 * same on every rank (both calls are collective); [lo, lo + len) what it spans here: its pages
 * (GR__CAP_REGISTER_PAGES), else its bytes. */
typedef struct gr__mem {
  void *ptr;
  size_t bytes;
  uint64_t id;
  int registered; /* gr_mem_register's (the handle), else gr_mem_alloc's (the pointer) */
  uintptr_t lo;
  size_t len;
  void *be;          /* the backend's */
  gr_list_node node; /* on its communicator's mem list */
  /* On a backend that moves pages: the communicator that holds [lo, lo + len) process-wide
   * (mem.c), linked by held; NULL when not held. */
  const gr_comm *owner;
  gr_list_node held;
} gr__mem;

struct gr__coll_ops {
  const char *name; /* "mpi", "nccl" */
  gr_backend kind;  /* what gr_comm_backend reports; behaviour is asked through caps */
  unsigned caps;    /* gr__coll_cap */
  /* Set up c->be after the front end filled c->mpi, rank, size; bounded by deadline (0 = none). */
  gr_status (*create)(gr_comm *c, double deadline);
  /* child has its mpi/rank/size filled; color < 0 never reaches the backend for NCCL-less paths */
  gr_status (*split)(gr_comm *parent, gr_comm *child, int color, int key, double deadline);
  gr_status (*destroy)(gr_comm *c, double deadline);
  void (*abort)(gr_comm *c);
  /* Optional: bracket the posting of a group's calls (NCCL's group). */
  gr_status (*group_begin)(void);
  gr_status (*group_finish)(gr_comm *any, double deadline);
  /* Start the call (k->be_area is all zero). May complete it (then *done = 1). */
  gr_status (*post)(gr__call *k, int *done);
  /* Progress a started call; *done = 1 once finished (results in place, staging freed). */
  gr_status (*test)(gr__call *k, int *done);
  /* Release what can be released of a call that will never complete (timeout, abort); 1 when
   * nothing writes into the call's buffers (k->send, k->recv) or the backend's staging any more,
   * so that whoever owns them may free them; 0 when something may still (an MPI collective request
   * on them, work on a stream): they must stay allocated (parked, or handed to the lost list). */
  int (*forget)(gr__call *k);
  gr_status (*synchronize)(gr_comm *c, gr_stream s, double deadline);
  /* The backend's execution paths in the order it prefers them, NULL-terminated (gr_path.h): the
   * front end asks them how a refusal travels (gr__path_refusal), the backend's post which one
   * runs a call. */
  const gr__path *const *paths;
  /* Optional: move the calls in flight on c that progress only when tested (the MPI backend's own
   * allreduces), for a rank that waits for something else on c (a request's verdict or the
   * naming of its refusal) while another rank may wait inside one of them. Never blocks. */
  void (*progress)(gr_comm *c);
  /* Optional: the ranks of c this rank can see have vanished (node-mates, through a shared
   * segment), as one phrase "rank R (process P no longer exists), ..." in buf; the number named.
   * A timeout whose backend gave no detail (an agreement, an MPI step) names them: a rank killed
   * between two calls leaves its node-mates waiting somewhere it cannot be seen otherwise. */
  int (*gone)(const gr_comm *c, char *buf, size_t len);
  /* Optional (NULL: gr_mem_alloc and gr_mem_register are GR_ERR_UNSUPPORTED): map bytes of memory
   * for this rank that the calls on c reach directly (alloc; the front end agreed on bytes first),
   * or make the program's [ptr, ptr + bytes) such memory in place (register; m->ptr, bytes, lo and
   * len are set); collective over c; on failure on any rank, an error on every rank. free undoes
   * either (collective: same order). */
  gr_status (*mem_alloc)(gr_comm *c, size_t bytes, gr__mem *m);
  gr_status (*mem_register)(gr_comm *c, gr__mem *m);
  void (*mem_free)(gr_comm *c, gr__mem *m);
};

#define GR__COMM_MAGIC 0x6772636fu /* "grco" */
#define GR__ERRLEN 512

struct gr_comm {
  uint32_t magic;
  MPI_Comm mpi; /* private duplicate: the MPI backend's traffic, the NCCL bootstrap */
  /* The side duplicate, for what every rank posts in the order of its calls while the calls'
   * own traffic on mpi is posted at moments that differ between ranks (a request's data call once
   * its verdict is in, nccl_share.c's MPI stages): in check mode the fingerprint exchanges
   * (validate.c); otherwise the verdicts posted at requests' starts, the in-band naming, and every
   * carried verdict on GR__CAP_VERDICT_IN_FRONT (sequencer.c). One field, because check mode has
   * no verdicts (every route is ROUTE_NONE there). MPI_COMM_NULL when check mode is off and no
   * kind needs a verdict: one rank, a backend without GR__CAP_JOIN_REFUSALS, only carried
   * refusals in the call (coll.c, req_dup). */
  MPI_Comm side_mpi;
  int rank, size, world_rank;
  unsigned fork_gen; /* the process generation it was made in (gr_fork.h) */
  int pid;           /* the process that made it (for the sentence a forked child gets) */
  const gr__coll_ops *ops;
  void *be; /* backend state */
  /* Configuration, agreed at creation (coll.c): what decides an algorithm, a tag or a path. */
  double timeout_s;
  int check;
  int algo;                             /* gr__coll_algo */
  const gr__path *paths[GR__PATHS_MAX]; /* the backend's rows present on c, in order */
  void *path_state[GR__PATHS_MAX];      /* beside each, the state its create left (gr_path.h) */
  int npaths;
  /* The row GPURUN_COLL_ALGO names (gr_path.h, Selection by name) where algo_row_agreed: agreed
   * in the round of a creation that agrees on algo (coll.c): its place in ops->paths plus one, 0
   * for none, -1 where the ranks name different rows. A communicator a row makes for itself takes
   * its parent's (gr__path_row_take, gr_path.h); one that takes none (not agreed, 0) has
   * gr__paths_create agree on it in a round of its own. */
  int algo_row, algo_row_agreed;
  int aborted;
  int gpu_buffers;   /* CUDA devices present: buffers may be device pointers (MPI staging) */
  uint64_t seq;      /* every call */
  uint64_t coll_seq; /* collective calls only: the "call #N" that all ranks agree on */
  int nsplits;
  long pending; /* requests and grouped calls not yet completed (atomic): destroy refuses */
  /* Requests whose data call waits for their verdict, oldest first (request.c): only the head may
   * post, so that every rank posts the communicator's collectives in one order. */
  gr_list defer;       /* gr_request, linked by their defer node */
  uint64_t req_inband; /* in-band requests started (request.c): the same number on every rank */
  /* The blocking in-band form's buffer, kept between calls (refuse.c; freed with c). */
  unsigned char *inband_buf;
  size_t inband_cap;
  /* Identity, agreed at creation (coll.c): uid is job-unique ("L.N": the lowest member's world
   * rank, then that rank's count of creations it took part in), name the human one ("world",
   * "comm", "split-N:C" for colour C of the parent's N-th split, "PARENT.N:C" below), and id
   * what messages say: "NAME[UID]". */
  char uid[24], name[40];
  char id[72];
  char err[GR__ERRLEN]; /* a backend's detail for the front end's sentence */
  gr__flight *flight;
  gr_coll_stats stats;
  gr_list mem;      /* gr__mem: memory allocated or registered and not yet released, oldest
                     * first (mem.c) */
  uint64_t mem_seq; /* allocations so far: the same on every rank */
};

/* The MPI tag of gr_send/gr_recv on the MPI backend (the flight recorder records it). */
#define GR__P2P_TAG 0

/* Deadline from a timeout in seconds (0 = none). */
double gr__deadline(double timeout_s);
int gr__past(double deadline);

/* MPI_Test that returns a failed request's error instead of raising it (see comm_wait.c). */
int gr__mpi_test(MPI_Request *req, int *flag);
/* Wait for an MPI request with the deadline; GR_ERR_TIMEOUT past it (the request is left). */
gr_status gr__mpi_wait(gr_comm *c, MPI_Request *req, double deadline);
/* Keep p for the rest of the process, never freed: a buffer a call given up on may still write
 * (comm_wait.c). */
void gr__abandon(void *p);

/* Bytes of the send and the receive side of a call on this rank (what a backend stages). */
void gr__call_sides(const gr__call *k, size_t *send_bytes, size_t *recv_bytes);

/* Record a backend detail for the front end: c->err = formatted text. Returns st. */
gr_status gr__comm_err(gr_comm *c, gr_status st, const char *fmt, ...) GR_PRINTF(3, 4);
/* The same for a failed MPI call: "WHAT failed: MPI's text"; GR_ERR_MPI. */
gr_status gr__comm_mpi_err(gr_comm *c, int rc, const char *what);

extern const gr__coll_ops gr__coll_ops_mpi;
/* Test hook: when > 0, the MPI backend's own allreduce uses at most this many tag slots per
 * communicator created afterwards (so that tests reach the reuse of a slot with few calls). */
extern uint64_t gr__mpi_tag_slots_cap;
extern const gr__coll_ops gr__coll_ops_nccl; /* only when built with NCCL */

/* Whether MPI_Finalize has been called: then only memory may be released, no MPI object. */
int gr__mpi_gone(void);

/* Post the data calls of the requests on c that wait for their verdict (request.c), waiting for the
 * verdicts: every call that posts a collective on c->mpi does this first, so that all ranks post
 * them in one order. GR_OK at once when none waits; GR_ERR_TIMEOUT (c aborted) past the oldest's
 * deadline. fn names the caller in that sentence. */
gr_status gr__requests_drain(const char *fn, gr_comm *c);

/* Unmap the memory gr_mem_alloc gave on c that was not freed (gr_comm_destroy, before the
 * backend's destroy). */
void gr__mem_release_all(gr_comm *c);

/* Mark aborted and abort the backend (idempotent). */
void gr__comm_abort_internal(gr_comm *c);
/* Validity checks shared by the front-end files; they record the sentence. */
/* A live communicator that is not aborted: GR_OK; else the sentence (gr__check_alive_fail). Inline:
 * every call asks it first. */
gr_status gr__check_alive_fail(const char *fn, const gr_comm *c);
static inline gr_status gr__check_alive(const char *fn, const gr_comm *c) {
  if (c && c->magic == GR__COMM_MAGIC && !c->aborted && gr__fork_mine(c->fork_gen)) return GR_OK;
  return gr__check_alive_fail(fn, c);
}
gr_status gr__check_comm(const char *fn, const gr_comm *c);

/* The one builder of a gr_comm record: zeroed, the magic, mpi (owned from here on: errors return,
 * rank and size read; MPI_COMM_NULL: none yet), the other duplicates MPI_COMM_NULL, the
 * configuration given (its paths still empty: gr__paths_create after the backend's create).
 * NULL when out of memory (mpi is then not owned). gr__comm_free releases the record and its
 * duplicates, not the backend's state. */
typedef struct {
  double timeout_s;
  int check;
  int algo; /* gr__coll_algo */
  int gpu_buffers;
  const gr__coll_ops *ops;
} gr__comm_cfg;
gr_comm *gr__comm_new(MPI_Comm mpi, const gr__comm_cfg *cfg);
void gr__comm_free(gr_comm *c);
/* What every communicator MPI makes for the library gets first (gr__comm_new's own, a node's or
 * a slice's that a row keeps as a bare MPI_Comm): errors return, its rank and size into rank and
 * size. A refusal (only an invalid communicator gets one) records "CALL on WHAT failed: MPI's
 * text" in c->err and returns GR_ERR_MPI. */
gr_status gr__comm_basics(gr_comm *c, MPI_Comm m, const char *what, int *rank, int *size);

/* Create a communicator on a given backend table (the NCCL test double's entry point; the public
 * gr_comm_create picks the table itself). */
gr_status gr__comm_create_ops(MPI_Comm mpi, const gr_comm_config *cfg, const gr__coll_ops *ops,
                              gr_comm **out);

#endif
