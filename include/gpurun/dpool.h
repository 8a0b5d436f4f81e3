/* gpurun distributed task pool: work stealing across MPI ranks, tasks being a registered function
 * id plus a payload of bytes. See gr_dpool_create(3), gr_dpool_register(3), gr_dpool_run(3)
 * (progress, termination, deadlines) and gr_dpool_stats(3). */
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

/* A task body; payload is valid for the duration of the call. See gr_dpool_register(3). */
typedef void (*gr_dtask_fn)(gr_dpool *dp, const void *payload, size_t len, void *ctx);

/* See gr_dpool_create(3). */
#define GR_DPOOL_CONFIG_MAGIC 0x64706f6fu /* "dpoo" */
#define GR_DPOOL_MAX_PAYLOAD (1u << 20)   /* bytes per task */

/* Set up with gr_dpool_config_init; fields and ranges in gr_dpool_create(3). */
typedef struct {
  uint32_t size;        /* sizeof(gr_dpool_config); set by gr_dpool_config_init */
  uint32_t magic;       /* GR_DPOOL_CONFIG_MAGIC; set by gr_dpool_config_init */
  int steal;            /* 1 (default) = steal; 0 = never steal */
  int random_steals;    /* failed random steals in a row before lifelines; default 2 */
  int lifelines;        /* 1 (default) = hypercube lifelines; 0 = random only */
  int poll_interval_us; /* target time between MPI polls while busy; default 50 */
  int backoff_max_us;   /* longest sleep of an idle rank between polls; default 1000 */
  int max_chunk;        /* most tasks in one steal reply; default 1024 */
  unsigned seed;        /* victim selection seed; 0 = derived from the rank */
  void *ctx;            /* passed to every task */
  double timeout_s;     /* deadline for a silent rank; default GPURUN_TIMEOUT, 0 = none */
} gr_dpool_config;

/* Counters of this rank; a struct tag, not a typedef (gr_dpool_stats is also the function that
 * fills it). See gr_dpool_stats(3). */
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

/* Defaults, and size and magic. See gr_dpool_config_init(3). */
GR_API void gr_dpool_config_init(gr_dpool_config *cfg);

/* Collective over comm (duplicated); local NULL runs tasks on gr_dpool_run's thread. See
 * gr_dpool_create(3). */
GR_API gr_status gr_dpool_create(MPI_Comm comm, gr_pool *local, const gr_dpool_config *cfg,
                                 gr_dpool **out);
/* Register a task function: the same ones in the same order on every rank, before the first run.
 * See gr_dpool_register(3). */
GR_API gr_status gr_dpool_register(gr_dpool *dp, gr_dtask_fn fn, int *id);
/* Queue a task (payload copied) on this rank. See gr_dpool_push(3). */
GR_API gr_status gr_dpool_push(gr_dpool *dp, int id, const void *payload, size_t len);
/* Queue a task on another rank (or this one). See gr_dpool_push_to(3). */
GR_API gr_status gr_dpool_push_to(gr_dpool *dp, int rank, int id, const void *payload, size_t len);
/* Collective: run until no task is left anywhere, then return on every rank. See
 * gr_dpool_run(3). */
GR_API gr_status gr_dpool_run(gr_dpool *dp);
/* Copy or zero this rank's counters. See gr_dpool_stats(3). */
GR_API gr_status gr_dpool_stats(const gr_dpool *dp, struct gr_dpool_stats *out);
GR_API gr_status gr_dpool_stats_reset(gr_dpool *dp);
/* This rank's index in the dpool's communicator, and the number of ranks. See gr_dpool_rank(3). */
GR_API int gr_dpool_rank(const gr_dpool *dp);
GR_API int gr_dpool_size(const gr_dpool *dp);
/* Collective; queued tasks are dropped. See gr_dpool_destroy(3). */
GR_API gr_status gr_dpool_destroy(gr_dpool *dp);

#ifdef __cplusplus
}
#endif
#endif
