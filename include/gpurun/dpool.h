/* gpurun distributed task pool: work stealing across MPI ranks.
 *
 * Tasks are self-contained: a function id (from gr_dpool_register, same order on every rank) plus
 * a payload of bytes, so that any rank can run any task. Each rank keeps its tasks in one local
 * queue: it runs the newest first (depth first, bounded memory) and gives thieves the oldest.
 * A rank that runs out of work sends steal requests to random victims; after cfg.random_steals
 * failures in a row it also registers with its lifeline neighbours (a hypercube over the ranks),
 * which hand it work as soon as they have some to spare, and it backs off its random requests
 * exponentially, so that idle ranks stop flooding the network. Victims answer with up to half of
 * their queue, oldest first, in one message.
 *
 * Progress: no progress thread. The thread inside gr_dpool_run polls MPI between tasks, every
 * N tasks, with N adapted so that polls are about cfg.poll_interval_us apart; all MPI calls of the
 * dpool are made by that thread (so MPI_THREAD_FUNNELED suffices when it is the main thread,
 * MPI_THREAD_SERIALIZED otherwise). With local == NULL tasks run on that thread too; with a
 * gr_pool they run on the pool's workers, which never call MPI, and that thread only polls.
 * Open MPI turns every empty poll into a sched_yield() when ranks outnumber cores
 * (mpi_yield_when_idle): with the dpool that gives busy ranks' cores away thousands of times a
 * second; run such jobs with OMPI_MCA_mpi_yield_when_idle=0 (idle dpool ranks sleep anyway).
 *
 * Termination: Dijkstra-Safra token ring with per-rank counters of work-carrying messages, so a
 * run never ends while a task is queued, running or in flight anywhere; gr_dpool_run then drains
 * every control message and returns on all ranks together.
 *
 * Typical use:
 *   gr_dpool_config cfg; gr_dpool_config_init(&cfg);
 *   gr_dpool *dp; gr_dpool_create(MPI_COMM_WORLD, NULL, &cfg, &dp);
 *   int id; gr_dpool_register(dp, visit, &id);
 *   if (rank == 0) gr_dpool_push(dp, id, &root, sizeof root);
 *   gr_dpool_run(dp);                      collective
 *   gr_dpool_destroy(dp);                  collective
 */
#ifndef GPURUN_DPOOL_H
#define GPURUN_DPOOL_H

#include <gpurun/pool.h>
#include <gpurun/status.h>
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gr_dpool gr_dpool;

/* A task body. payload is valid for the duration of the call only. It may call gr_dpool_push and
 * gr_dpool_push_to on dp (from any thread of the rank).
 * With a local gr_pool a task may use that pool: gr_spawn into a taskgroup it initialised and
 * gr_taskgroup_wait on it (or gr_parallel_for); it must wait for such subtasks before returning
 * if they push, since termination only sees dpool tasks. The waiting thread helps with other
 * pool tasks meanwhile, possibly other dpool tasks. (The dpool runs its workers as long-running
 * tasks of the pool; one picked up by a waiting dpool task returns at once. An application task
 * outside the dpool that waits on a group during a run may instead pick one up and then return
 * only when the run ends.) */
typedef void (*gr_dtask_fn)(gr_dpool *dp, const void *payload, size_t len, void *ctx);

#define GR_DPOOL_CONFIG_MAGIC 0x64706f6fu /* "dpoo" */
#define GR_DPOOL_MAX_PAYLOAD (1u << 20)   /* bytes per task */

typedef struct {
  uint32_t size;        /* sizeof(gr_dpool_config); set by gr_dpool_config_init */
  uint32_t magic;       /* GR_DPOOL_CONFIG_MAGIC; set by gr_dpool_config_init */
  int steal;            /* 1 (default) = steal; 0 = never steal (a static split, for comparison) */
  int random_steals;    /* failed random steals in a row before lifelines; default 2, >= 1 */
  int lifelines;        /* 1 (default) = use the hypercube lifeline graph; 0 = random only */
  int poll_interval_us; /* target time between MPI polls while busy; default 50, 1..100000 */
  int backoff_max_us;   /* longest sleep of an idle rank between polls; default 1000, 0..1000000 */
  int max_chunk;        /* most tasks in one steal reply; default 1024, >= 1 */
  unsigned seed;        /* victim selection seed; 0 = derived from the rank */
  void *ctx;            /* passed to every task */
  double timeout_s;     /* deadline for a silent rank, seconds; default GPURUN_TIMEOUT (unset,
                           * empty or invalid: 0), 0 = none; 0..1e9. See gr_dpool_run. */
} gr_dpool_config;

/* Counters of this rank since gr_dpool_create (gr_dpool_stats_reset zeroes them). A struct tag,
 * not a typedef: the name gr_dpool_stats is also the function that fills it (C keeps tags and
 * ordinary identifiers apart), so write `struct gr_dpool_stats s; gr_dpool_stats(dp, &s);`. */
struct gr_dpool_stats {
  uint64_t tasks_run;       /* tasks executed on this rank */
  uint64_t tasks_pushed;    /* gr_dpool_push + gr_dpool_push_to calls made on this rank */
  uint64_t tasks_sent;      /* tasks that left this rank (steal replies, lifeline gifts, push_to) */
  uint64_t tasks_received;  /* tasks that arrived at this rank */
  uint64_t steals_tried;    /* random steal requests sent */
  uint64_t steals_won;      /* requests answered with at least one task */
  uint64_t lifeline_steals; /* work received through a lifeline */
  uint64_t msgs_sent;       /* all messages, control included */
  uint64_t bytes_sent;      /* bytes of all messages sent */
  uint64_t polls;           /* MPI progress polls */
  uint64_t token_rounds;    /* termination probes started (rank 0 only) */
  double idle_s; /* seconds inside gr_dpool_run with nothing to run on the polling thread */
  double run_s;  /* seconds inside gr_dpool_run */
};

GR_API void gr_dpool_config_init(gr_dpool_config *cfg);

/* Collective over comm (which is duplicated). local may be NULL: tasks then run on the thread that
 * calls gr_dpool_run. cfg may be NULL for the defaults. Needs MPI initialised with at least
 * MPI_THREAD_FUNNELED. With cfg->timeout_s > 0, GR_ERR_TIMEOUT when not every rank of comm calls
 * it within the timeout, naming those that did not (see gr_dpool_run, Deadline). */
GR_API gr_status gr_dpool_create(MPI_Comm comm, gr_pool *local, const gr_dpool_config *cfg,
                                 gr_dpool **out);
/* Register a task function; every rank must register the same functions in the same order, before
 * the first gr_dpool_run (afterwards: GR_ERR_STATE). The first run checks it: each function is
 * identified by its module's file name and its offset in that module (the same program on every
 * rank gives the same identities whatever its load address); a difference in number or order is
 * GR_ERR_MISMATCH on every rank, naming the first rank that differs from rank 0. */
GR_API gr_status gr_dpool_register(gr_dpool *dp, gr_dtask_fn fn, int *id);
/* Queue a task on this rank (copied). Thread-safe; callable inside tasks (on any worker) and
 * between runs (the task waits for the next gr_dpool_run). During a run, push from tasks only:
 * termination cannot see a thread outside the dpool, whose task may then wait for the next run.
 * len may be 0 (payload may then be NULL). */
GR_API gr_status gr_dpool_push(gr_dpool *dp, int id, const void *payload, size_t len);
/* Queue a task on another rank (or this one). Same rules as gr_dpool_push. */
GR_API gr_status gr_dpool_push_to(gr_dpool *dp, int rank, int id, const void *payload, size_t len);
/* Collective: run until no task is left anywhere (queued, running or in flight), then return on
 * every rank. May be called again after more pushes. Not reentrant (GR_ERR_STATE from a task).
 *
 * Deadline (cfg.timeout_s > 0, default GPURUN_TIMEOUT): every rank in the run sends its ring
 * successor (rank + 1 mod size) a small heartbeat every timeout/4 s, and every message the dpool
 * sends must be received within the timeout. A rank that does not receive one in time (stopped,
 * crashed, stuck in one task longer than the timeout with local == NULL, or never called
 * gr_dpool_run) is named: the rank that noticed tells every other rank, and all of them return
 * GR_ERR_TIMEOUT with "rank R did not answer within T s", within about 1.25 x the timeout plus a
 * poll. The first run's registration check and each run's final barrier are bounded by the
 * timeout too, and name the ranks that never reached them ("rank 2 did not enter the first run",
 * "rank 2 did not reach the run's final barrier"): each rank sends every other an empty message
 * on arrival, 2 (P - 1) per rank and step. gr_dpool_create's timeout names the ranks that did not
 * enter it ("rank(s) 2 of comm did not enter gr_dpool_create within T s"; world ranks too when comm
 * is not the world): the only channel there is the caller's communicator, so nothing is sent on
 * it while the create can still succeed (the program's own MPI_ANY_TAG receives could take it);
 * a rank whose timeout has run out sends every other an empty notice (tag: comm's MPI_TAG_UB), a
 * rank waiting in gr_dpool_create that receives one gives up too and answers, and after a grace of
 * half the timeout (0.25 to 5 s) those not heard from are named (a notice sent to a rank that
 * never came stays on comm, where that rank's own receives may meet it: the job has failed by
 * then). The timed-out create leaves its MPI_Comm_idup of comm pending, so comm (and, with Open
 * MPI, the creation of further communicators) is best left alone after it. After any failure the
 * dpool is broken: further runs return GR_ERR_STATE; gr_dpool_destroy still frees it (locally: it
 * does not wait for the silent rank).
 * Without a timeout a rank that stops or never enters the run makes the others wait for ever
 * (as MPI collectives do). */
GR_API gr_status gr_dpool_run(gr_dpool *dp);
GR_API gr_status gr_dpool_stats(const gr_dpool *dp, struct gr_dpool_stats *out);
GR_API gr_status gr_dpool_stats_reset(gr_dpool *dp);
/* This rank's index in the dpool's communicator, and the number of ranks. */
GR_API int gr_dpool_rank(const gr_dpool *dp);
GR_API int gr_dpool_size(const gr_dpool *dp);
/* Collective (frees the duplicated communicator). Tasks still queued are dropped. After a failed
 * run it only frees this rank's resources (messages to a silent rank are abandoned). */
GR_API gr_status gr_dpool_destroy(gr_dpool *dp);

#ifdef __cplusplus
}
#endif
#endif
