/* Internal: node-local shared-memory collectives (allreduce, reduce-scatter, allgather, broadcast,
 * barrier) on host buffers, for a communicator whose ranks all share one node.
 *
 * One segment per communicator, mapped by every rank (shm_seg.c makes it: a memfd the others open
 * through /proc/<pid>/fd, so that nothing is ever named in /dev/shm and the memory goes away with
 * the last process, however it ends). The segment holds one progress counter per rank (its own
 * cache lines) and, per rank, two data buffers of GR__SHM_SLOT bytes used in alternation. A round
 * that writes at most 8 bytes per rank (a scalar allreduce) uses two small places in the counter's
 * own cache line instead, under the same rule as the buffers, so that its data arrives with the
 * counter in one cache-line transfer.
 *
 * The protocol (shm_coll.c; shm_int.h names the files of the path and what each does) runs in
 * rounds; a call is one or more rounds of at most GR__SHM_SLOT bytes per rank. In every round each
 * rank raises its counter one or two times, the same number on every rank, so all ranks agree on
 * the counter value that means "round g, step s done". A rank writes its buffer of round g only
 * once every counter shows that round g-1 started, i.e. that every rank finished round g-2, which
 * used the same buffer: one round of slack, which pipelines the chunks of a large call. Reductions
 * are done in place by all ranks in parallel on disjoint slices. Every wait is a poll that returns
 * to the caller, so the caller's deadline bounds it.
 *
 * Agreement. Nothing but the ranks' own arguments says what a call is, and ranks that disagree
 * (count, dtype, op, root or kind) would otherwise read past a smaller peer's data or reduce
 * mismatched bytes and return GR_OK. So in the first round of every call each rank writes a
 * descriptor of the call (kind, count, dtype, op where it reduces, root where it broadcasts, and
 * the round number) into its control line, next to its counter, before its first raise; the
 * descriptor has two places used in alternation like the buffers, under the same rule (so a rank
 * that writes one, the barrier and a broadcast's non-root included, first waits until every rank
 * started the previous round). Every rank, at its first wait in that round and before it touches a
 * peer's data, compares each peer's descriptor with its own (every kind waits for every peer in the
 * first round, a broadcast's root and non-roots too, so every rank sees every descriptor). If all agree, all pass; if any differs, every rank sees at least one that
 * differs from its own, so every rank fails the call with GR_ERR_MISMATCH, and a sentence naming
 * itself and a differing rank with both descriptors. At that point every rank has raised exactly
 * once in the round and read nothing of a disagreeing peer, so the counters still agree: the call
 * is dropped, the following calls run normally and the segment stays usable. The cost is two
 * stores and, per peer, two loads from the cache line the wait reads anyway, in the first round.
 * The collectives that do not run here (larger reduce and alltoall: Open MPI's algorithms) still
 * take one agreement round here first, a barrier with their descriptor, and start their own
 * algorithm only once it passed, in the order they were posted (gr__shm_defer): otherwise a rank in
 * alltoall and one in allreduce would wait for each other until the deadline, each in its own
 * protocol, instead of both failing with GR_ERR_MISMATCH. The price: such a reduce's non-roots
 * wait for the root's arrival, which MPI's eager send did not. Point-to-point calls are not
 * collective and take no round.
 *
 * A rank that refused its own arguments (gr__shm_op.refused) takes part in the first round like a
 * barrier, with the refusal in its descriptor and no data: every rank sees it there and fails the
 * call with GR_ERR_INVALID naming that rank and argument, at the same point as a disagreement.
 *
 * This part knows nothing of MPI, so tests drive it with forked processes and with threads. */
#ifndef GR_SHM_H
#define GR_SHM_H

#include <gpurun/coll.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "gr_coll.h"

/* Bytes per rank and buffer: a round moves at most this much per rank. */
#define GR__SHM_SLOT (128 * 1024)
#define GR__SHM_MAX_RANKS 256

typedef struct gr__shm gr__shm;

/* One call on the shared-memory path. kind is GR__ALLREDUCE, GR__REDUCE_SCATTER, GR__ALLGATHER,
 * GR__BROADCAST or GR__BARRIER; buffers and count follow coll.h (in place as NCCL spells it).
 * AVG reduces as SUM: the caller divides. Filled by the caller, the rest is the protocol's. */
typedef struct gr__shm_op {
  int kind;
  const void *send;
  void *recv;
  size_t count;
  gr_dtype dtype;
  gr_op op;
  int root;
  int refused; /* 0, or the argument (gr__arg) this rank refused: it joins the first round with no
                * data, so that every rank fails the call (GR_ERR_INVALID, naming it) */
  int request; /* posted as a request (gr_i...): past a kind's crossover the call still runs single
                * copy when any rank posted it so (shm_policy.c, gr__shm_single_if_requested) */
  /* protocol state */
  int state; /* 0 queued, 1 running, 2 done */
  int step;  /* within the round */
  int mode;  /* allreduce: small (one round of whole copies) or large (sliced rounds) */
  int sub;   /* allgather: peers copied so far in this round */
  int peer; /* single-copy allreduce: 0 = chunk 'reduced' not reduced yet, else the next peer written */
  size_t reduced; /* single-copy allreduce: chunks reduced and written out */
  int held;       /* single-copy allreduce: a claimed range [u0, u1) of owner's pieces in hand */
  int scan;       /* single-copy allreduce: ranks whose pieces are all claimed (from this one) */
  int owner;
  size_t u0, u1;
  size_t pos; /* first element of the current round (per block) */
  size_t len; /* elements in the current round (per block) */
  /* Windows (gr_mem_alloc memory, gr__shm_window_add): win says the communicator held windows
   * when the call was posted (the same on every rank: allocations are collective), so that a call
   * that may run direct starts with the single copy's first step on every rank; wtok/woff say in
   * which window and at which offset of its mapping this rank's send ([0]) and recv ([1]) lie
   * (token 0: not in one). The first round decides from every rank's (gr__shm_window_add). */
  int win;
  uint64_t wtok[2];
  size_t woff[2];
  int direct; /* single copy: 1 the peers' buffers are reached in the windows, 0 through
               * process_vm_readv/writev, -1 not decided yet */
  int plain;  /* started again in its plain mode after the first round (no window, no request) */
  int failed; /* the ranks disagreed on the call (1) or one refused it (2): what the first round
               * saw is below, and the sentence is made from it when the call settles */
  int seen;   /* what differed: this rank refused, rank seen_rank refused, or its descriptor */
  int seen_rank;
  uint64_t seen_desc[2], own_desc[2]; /* seen_rank's descriptor of the call, and this rank's */
  gr_list_node node; /* on the segment's queue while posted, else on its spare ops */
} gr__shm_op;

/* Size of a segment for size ranks. */
size_t gr__shm_bytes(int size);
/* Write the header of a new segment (the creator, before anyone else maps it). */
void gr__shm_format(void *base, int size, uint64_t nonce);
/* Whether base holds a segment for size ranks with this nonce (an attacher's check). */
int gr__shm_valid(const void *base, size_t bytes, int size, uint64_t nonce);
/* One rank's view of a mapped segment; NULL when out of memory. Does not own the mapping unless
 * gr__shm_own_mapping is called. */
gr__shm *gr__shm_new(void *base, size_t bytes, int rank, int size);
void gr__shm_own_mapping(gr__shm *s);
/* Sentences (mismatch, timeout) name rank q as names[q] (a node's ranks in the communicator that
 * spans nodes, gr_hier.h); names must outlive s. Default: q. */
void gr__shm_name_ranks(gr__shm *s, const int *names);
void gr__shm_free(gr__shm *s);

/* Single copy: whether this rank can read rank (rank+1)'s memory with process_vm_readv (call once
 * every rank has made its gr__shm_new), and switching it on (only where every rank could; 0 when
 * out of memory). The kernel grants process_vm_writev on the same check (ptrace attach), which
 * the allreduce and allgather use to write their results into the peers' buffers.
 * GR_ERR_SYSTEM from gr__shm_test: a read or write failed with gr__shm_cma_errno. */
int gr__shm_cma_probe(gr__shm *s);
int gr__shm_set_cma(gr__shm *s, int on);
int gr__shm_cma_errno(const gr__shm *s);

/* Private buffers (not in windows) under single copy: from 16 KiB per rank a call of allreduce,
 * reduce-scatter, allgather or broadcast goes by single copy below its kind's crossover (bytes per
 * rank: an allreduce's or a broadcast's count, a reduce-scatter's or an allgather's block) and
 * through the slots from it on; GPURUN_SHM_PRIVATE may force either side for every size (mode
 * GR_SHM_PRIVATE_AUTO, _SINGLE, _SLOTS, gr_param.h). Kinds index cross[] in the order above
 * (gr__shm_private_kind; -1 for the others). defaults: the fixed crossovers a segment starts with.
 * set: the mode and crossovers agreed on every rank (shm_choice.c), before the first call.
 * gr__shm_private: the mode, and the crossovers into cross (when not NULL). */
#define GR__SHM_PRIVATE_KINDS 4
int gr__shm_private_kind(int kind);
void gr__shm_private_defaults(int size, size_t cross[GR__SHM_PRIVATE_KINDS]);
void gr__shm_set_private(gr__shm *s, int mode, const size_t cross[GR__SHM_PRIVATE_KINDS]);
int gr__shm_private(const gr__shm *s, size_t cross[GR__SHM_PRIVATE_KINDS]);
/* Two ranks: an allreduce of up to pair_max bytes takes one exchange of whole copies through the
 * slots (one synchronisation, no syscall); above, single copy or the slots as above. The default
 * is a whole slot; auto measures it at creation (shm_choice.c), the same on every rank. */
void gr__shm_set_pair_max(gr__shm *s, size_t bytes);
size_t gr__shm_pair_max_default(void);
/* At a communicator's creation with single copy on (collective over c->mpi): rank 0's
 * GPURUN_SHM_PRIVATE, and under auto the crossovers measured on this segment (once per process and
 * communicator size) and rank 0's broadcast, set on s (shm_choice.c). GR_OK with *usable 1, or
 * with *usable 0 on every rank where a measuring call failed somewhere (the segment is then
 * unusable); or an agreement round's failure (gr_agree.h: past c's timeout, MPI) with its
 * sentence in c->err. */
gr_status gr__shm_choose(gr_comm *c, gr__shm *s, int *usable);
/* The crossovers this process agreed under auto for communicators of size ranks (the last
 * measured or taken from rank 0): 1 with cross and *pair_max (when not NULL) filled, 0 none yet
 * (tests ask it). */
int gr__shm_private_known(int size, size_t cross[GR__SHM_PRIVATE_KINDS], size_t *pair_max);

/* Windows: memory every rank of the segment maps, one region per rank (gr_mem_alloc's window,
 * shm_comm.c; a registered buffer). Registering one (after every rank mapped every region, on every
 * rank in the same order, base[q] and bytes[q] rank q's region in this rank's mapping) lets a call
 * whose buffers lie in windows on every rank run direct: in its first round each rank publishes the
 * window (its token) and the offset of its buffers in its own region, and if every rank's are in
 * windows this rank holds too, each reduces and copies straight between the ranks' buffers (loads
 * and stores: no segment slot, no process_vm_readv, no page pinning); otherwise the call goes on
 * through process_vm_readv or, without it, in fresh rounds through the slots.
 * add: 0 when out of memory. remove: the window is gone from the table (its calls have ended:
 * freeing is collective, after them). Tokens are nonzero and the same on every rank. */
int gr__shm_window_add(gr__shm *s, uint64_t token, void *const *base, const size_t *bytes);
void gr__shm_window_remove(gr__shm *s, uint64_t token);
int gr__shm_windows(const gr__shm *s);
/* Whether [p, p + bytes) lies inside this rank's region of a window: its token and the offset in
 * the region, else 0. */
uint64_t gr__shm_window_of(const gr__shm *s, const void *p, size_t bytes, size_t *off);
/* Calls this process ran direct in windows (tests and measurements ask it; it only grows). */
uint64_t gr__shm_direct_calls(void);
/* Calls this process ran by single copy from private buffers (process_vm_readv; tests ask it). */
uint64_t gr__shm_single_copy_calls(void);

/* Whether the protocol takes this call (kind and size alone: the same answer on every rank that
 * agrees on the call; ranks that do not all take a round here, and the round finds it out). All of
 * allreduce, reduce-scatter, allgather, broadcast, barrier; reduce up to 8 KiB (128 KiB at two
 * ranks) and alltoall up to 4 KiB per rank. */
int gr__shm_takes(const gr__shm *s, int kind, size_t count, gr_dtype t);
/* Whether the call runs elsewhere after an agreement round here (larger reduce, alltoall). Every
 * collective passes its descriptor through the segment, taken or gated, so a refusal travels in
 * the descriptor (the MPI backend's rows shm and shm-gate, gr_path.h). */
int gr__shm_gates(const gr__shm *s, int kind, size_t count, gr_dtype t);
/* A FIFO of the caller's items (the gated calls in posting order): append (0 when out of memory),
 * the first, and removing an item wherever it is. */
int gr__shm_defer(gr__shm *s, void *item);
void *gr__shm_deferred(const gr__shm *s);
void gr__shm_undefer(gr__shm *s, void *item);

/* Queue a call (calls run in the order they were posted; all ranks post the same sequence). */
gr_status gr__shm_post(gr__shm *s, gr__shm_op **out, const gr__shm_op *call);
/* Progress the queue up to and including op; *done = 1 when op finished (op is then released and
 * must not be used again). Never blocks for long: returns *done = 0 when waiting for a peer.
 * GR_ERR_ABORTED once gr__shm_forget was called. GR_ERR_MISMATCH (*done = 1, op released) when the
 * ranks disagreed on what op is, GR_ERR_INVALID (likewise) when a rank refused it; the sentence is
 * then this thread's last error (gr__fail_msg, gr_error.h), which gr__shm_why returns. */
gr_status gr__shm_test(gr__shm *s, gr__shm_op *op, int *done);
/* The same for a request's gr_test: one bounded slice of work (a piece of a chunk, a round) and no
 * wait; returns at once (*done = 0) while the progress engine holds the segment. */
gr_status gr__shm_test_some(gr__shm *s, gr__shm_op *op, int *done);
/* One bounded pass over the queue, no wait, nothing released: a request's first step at its post. */
void gr__shm_nudge(gr__shm *s);
/* Whether op has settled (its test would release it); *failed as op->failed. */
int gr__shm_settled(gr__shm *s, const gr__shm_op *op, int *failed);
/* The sentence of the last call on this thread that failed its first round (gr__shm_test's
 * GR_ERR_MISMATCH or GR_ERR_INVALID): this thread's last error, read before anything else fails. */
const char *gr__shm_why(const gr__shm *s);
/* The ranks of this segment (other than this one) whose process no longer exists, as
 * "rank R (process P no longer exists)" joined with ", "; the number named. For a timeout outside
 * the segment's own waits (an MPI step), where a vanished node-mate is the likeliest cause. */
int gr__shm_gone(const gr__shm *s, char *buf, size_t len);
/* Give up (timeout): the segment is unusable afterwards. Writes one sentence naming the ranks this
 * rank was waiting for (and whether their process still exists) into why. */
void gr__shm_forget(gr__shm *s, gr__shm_op *op, char *why, size_t len);

/* out = in[0] (op) in[1] (op) ... (op) in[n-1], element by element, in that order, for count
 * elements; the same result is also written to out2 when it is not NULL. out may coincide with
 * any in[i]. fp16/bf16 are computed in float and rounded after every step; MIN and MAX propagate
 * NaN (a NaN operand wins); integer SUM and PROD wrap around (two's complement). AVG adds. */
void gr__shm_reduce(gr_dtype t, gr_op op, const void *const *in, int n, void *out, void *out2,
                    size_t count);

/* The progress engine (shm_progress.c): one thread per process, started with the first request on
 * a segment, that advances every registered segment's queue in bounded passes and sleeps on a
 * futex when none can move. The caller's tests, posts and forgets and the engine's passes take
 * turns through the segment's lock. */
typedef struct {
  uint32_t *word; /* a pass that is waiting for a peer: the counter word it waits on */
  uint32_t val;
  gr__shm *seg;
} gr__shm_wait;
enum { GR__SHM_IDLE, GR__SHM_MOVED, GR__SHM_BLOCKED, GR__SHM_BUSY };
/* One bounded pass over s's queue: GR__SHM_IDLE nothing queued (or the segment broke), MOVED some
 * work done, BLOCKED waiting for a peer (*w says on what), BUSY another thread holds s. */
int gr__shm_engine_pump(gr__shm *s, gr__shm_wait *w);
/* Count the engine among the segment's sleepers (+1) or no longer (-1), so that a raise wakes it. */
void gr__shm_engine_waiting(gr__shm *s, int delta);
/* 1 if s was already registered; else marks it (the caller's thread) and keeps the engine's bell
 * and farewell, which the protocol rings when the engine wants a lock it held and calls when s is
 * freed: the protocol calls the engine only through them. */
int gr__shm_engine_registered(gr__shm *s, void (*kick)(void), void (*remove)(gr__shm *s));
/* Register s (a request was posted on it: start the thread if none runs) and wake the engine. */
gr_status gr__shm_engine_add(gr__shm *s);
/* Wake the engine (a post, a lock it wanted is free). */
void gr__shm_engine_kick(void);
/* s is about to be freed: the engine no longer touches it afterwards; the thread stops with the
 * last segment. */
void gr__shm_engine_remove(gr__shm *s);

/* Segment files (shm_seg.c). A memfd of the given size; -1 with errno on failure. */
int gr__shm_memfd(size_t bytes);
/* Map fd (MAP_SHARED, read/write) after checking its size; NULL with errno on failure. */
void *gr__shm_map(int fd, size_t bytes);
/* Open another process's descriptor (/proc/<pid>/fd/<fd>); -1 with errno on failure. */
int gr__shm_open_peer(pid_t pid, int fd);
/* Whether process pid has ended (a zombie included: its memory is gone); 0 where it cannot tell. */
int gr__shm_peer_gone(pid_t pid);

/* The communicator glue (shm_comm.c): collective over c->mpi at communicator creation. *out is
 * NULL when the ranks do not all share a node, c->algo (GPURUN_COLL_ALGO) is mpi, or no
 * segment could be made (then the MPI algorithms run, as before). */
gr_status gr__shm_comm_attach(gr_comm *c, gr__shm **out);

/* A window of bytes per rank (gr_mem_alloc), collective over c->mpi, registered with s on every
 * rank (or on none: an error on every rank, with c->err). Registration makes a buffer the program
 * has (ptr, bytes on this rank, any size per rank) a window the same way (gr_mem_register). Freeing
 * removes it from s (NULL: s is gone already) and unmaps what it mapped (a registered buffer gets
 * private pages with its contents back); the memory goes away with the last process that maps it. */
typedef struct {
  void *ptr; /* this rank's region (the program's pointer) */
  void *map; /* alloc: the whole mapping; register: this rank's pages */
  size_t map_bytes;
  uint64_t token;
  void **peer; /* register: every rank's pages in this rank's mapping; NULL for alloc */
  size_t *peer_bytes;
  int rank, size;
  int fd; /* register: this rank's memfd */
} gr__shm_mapping;
gr_status gr__shm_comm_window(gr_comm *c, gr__shm *s, size_t bytes, gr__shm_mapping *out);
gr_status gr__shm_comm_register(gr_comm *c, gr__shm *s, void *ptr, size_t bytes,
                                gr__shm_mapping *out);
void gr__shm_comm_window_free(gr__shm *s, const gr__shm_mapping *m);

/* The MPI backend's rows (gr_path.h): a call k that gr__shm_takes runs here on the (staged) host buffers
 * send and recv (wtok, woff: where they lie in the windows, gr__shm_op; NULL: not). post stores the op in *op, which the backend keeps in its per-call state; test
 * and forget set *op to NULL once the op is released (done, a mismatch, forgotten). On a timeout,
 * forget writes the sentence naming the ranks waited for into k->comm->err. */
gr_status gr__shm_call_post(gr__shm *s, gr__call *k, const void *send, void *recv,
                            const uint64_t *wtok, const size_t *woff, gr__shm_op **op);
gr_status gr__shm_call_test(gr__shm *s, gr__call *k, gr__shm_op **op, int *done);
void gr__shm_call_forget(gr__shm *s, gr__call *k, gr__shm_op **op);

#endif
