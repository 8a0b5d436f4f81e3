/* Internal: the one agreement round of the collectives (agree.c). "Do all ranks agree?" is asked
 * at many places (a communicator's creation, its paths and segment, gr_mem_alloc and the
 * backends' memory): each rank brings a few values, and one small allreduce over c->mpi gives
 * every rank the same MIN, MAX, or both. The round is bounded by the communicator's timeout (none:
 * it waits as long as the peers take), moves the engine while it waits (gr__mpi_wait: the
 * backend's progress, the flight recorder's signal, other communicators' requests), checks every
 * MPI call, and reports a failure as a status plus one sentence in c->err (gr__comm_err). Its
 * buffers are on the heap: after a timeout MPI still owns the request and writes its result when
 * the late ranks arrive, so the request and the buffers go to the lost list (gr__mpi_abandon,
 * freed once the request completed) and the caller's memory is never written after the return. */
#ifndef GR_AGREE_H
#define GR_AGREE_H

#include "gr_coll.h"

#include <stdint.h>

typedef enum {
  GR__AGREE_MIN,   /* out[i]: every rank's lowest in[i] */
  GR__AGREE_MAX,   /* out[i]: every rank's highest in[i] */
  GR__AGREE_MINMAX /* out[i]: the lowest, out[n + i]: the highest (one MIN over in and -in) */
} gr__agree_op;

/* Values one round carries at most (n): the rounds ask a handful. */
#define GR__AGREE_MAX_N 32

/* One round over c->mpi, collective: every rank calls it with the same op and n, in the same order
 * as its other collectives on c->mpi. in[0..n) is this rank's; out gets n values (2n for MINMAX,
 * whose in must not hold INT64_MIN). GR_OK, or the status with its sentence in c->err naming what
 * ("the configuration", "the memory verdict") and the communicator: GR_ERR_TIMEOUT past c's
 * timeout (out untouched; the communicator's c->mpi then holds a round some rank never joined:
 * the caller gives the communicator up), GR_ERR_MPI, GR_ERR_NOMEM, GR_ERR_INTERNAL (bad n, op or
 * value: this rank does not join). */
gr_status gr__agree(gr_comm *c, const char *what, gr__agree_op op, const int64_t *in, int64_t *out,
                    int n);

/* The same round in two steps, for rounds over several communicators that every rank posts before
 * it waits for any (a group's verdicts, group.c: one per communicator, so that the order in which
 * ranks list them cannot deadlock): gr__agree_post posts r (the arguments as gr__agree's; out is
 * written only by a wait that completed the round, so it must live until then), GR_OK, or the
 * failure with its sentence in c->err (nothing posted: r->st says so, and the wait skips r).
 * gr__agree_wait waits for r[0..nr) in turn, all within the earliest deadline among them (each
 * round's from its post and its communicator's timeout; a round that completed meanwhile still
 * passes), and sets each r[j].st: GR_OK with its out written, or gr__agree's failure with the
 * sentence in r[j].c->err (GR_ERR_TIMEOUT: the request and its buffers went to the lost list,
 * out untouched). It returns the first failure. Every r posted must be waited for. */
typedef struct {
  gr_comm *c;
  const char *what;
  gr__agree_op op;
  int n;
  int64_t *out;    /* the caller's: n values (2n for MINMAX) */
  int64_t *buf;    /* heap: this rank's values, then the result; MPI's while req runs */
  MPI_Request req; /* MPI_REQUEST_NULL: not posted, or waited for */
  double deadline; /* from the post (gr__deadline of the communicator's timeout; 0: none) */
  gr_status st;    /* GR_OK once posted; after the wait, the round's outcome */
} gr__agree_round;
gr_status gr__agree_post(gr__agree_round *r, gr_comm *c, const char *what, gr__agree_op op,
                         const int64_t *in, int64_t *out, int n);
gr_status gr__agree_wait(gr__agree_round *r, size_t nr);

/* For rounds that pass or fail: *all = 1 where every rank passed ok != 0, else 0; GR_OK, or the
 * round's own failure as gr__agree's (*all = 0). gr__agree_all: *all alone, for a caller that
 * treats a failed round as a rank that did not pass (its sentence is then in c->err). */
gr_status gr__agree_ok(gr_comm *c, const char *what, int ok, int *all);
int gr__agree_all(gr_comm *c, const char *what, int ok);

/* The step after a round that found a rank refusing: rank root's bytes (its particulars, its
 * sentence) into buf on every rank, on a heap copy and bounded like a round. GR_OK, or the status
 * with its sentence in c->err (GR_ERR_TIMEOUT, GR_ERR_MPI, GR_ERR_NOMEM: buf then holds this
 * rank's own bytes). bytes: at most GR__AGREE_MAX_BYTES. */
#define GR__AGREE_MAX_BYTES 4096
gr_status gr__agree_bcast(gr_comm *c, const char *what, void *buf, size_t bytes, int root);

/* Every rank's bytes (the same number on each, at most GR__AGREE_MAX_BYTES) into all, rank r's at
 * all + r * bytes (c->size * bytes in all), on a heap copy and bounded like a round. GR_OK, or the
 * status with its sentence in c->err (GR_ERR_TIMEOUT, GR_ERR_MPI, GR_ERR_NOMEM, GR_ERR_INTERNAL:
 * all untouched). */
gr_status gr__agree_gather(gr_comm *c, const char *what, const void *mine, size_t bytes, void *all);

/* gr__mpi_wait (gr_coll.h) for a request that writes buf (heap, or NULL). GR_OK: the request
 * completed and buf is the caller's. Any failure (the deadline passed, MPI_Test failed) takes buf
 * from the caller: freed where the request is gone, else handed to the lost list with the request
 * (gr__mpi_abandon) and freed once it completed. (comm_wait.c) */
gr_status gr__mpi_wait_owning(gr_comm *c, MPI_Request *req, double deadline, void *buf);

#endif
