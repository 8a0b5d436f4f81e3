/* Internal: how the MPI layer's C functions record (wrap.c, wrap_bigcount.c, and the calls with
 * counts written once for both in wrap_counted.h). */
#ifndef GR_MT_WRAP_H
#define GR_MT_WRAP_H

#include "gr_mpitrace.h"

/* A call recorded around its next definition. */
#define RECORD(kind, comm, count, dtype, root, peer, tag, call)                                    \
  do {                                                                                             \
    gr__mt_rec r_;                                                                                 \
    if (!gr__mt_begin(&r_, kind, comm, count, dtype, root, peer, tag)) return call;                \
    int rc_ = call;                                                                                \
    gr__mt_end(&r_, rc_);                                                                          \
    return rc_;                                                                                    \
  } while (0)

/* A non-blocking call: its record runs until its request completes. */
#define START(kind, comm, count, dtype, root, peer, tag, call, req)                                \
  do {                                                                                             \
    gr__mt_rec r_;                                                                                 \
    if (!gr__mt_begin(&r_, kind, comm, count, dtype, root, peer, tag)) return call;                \
    int rc_ = call;                                                                                \
    gr__mt_req_track(&r_, rc_, *(req));                                                            \
    return rc_;                                                                                    \
  } while (0)

#define K(name) GR__MPI_##name

#endif
