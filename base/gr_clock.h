/* Internal: the clocks, one helper each (base layer: no MPI). Monotonic time for intervals,
 * deadlines and rates; wall time only for timestamps that leave the process (CSV rows, dumps). */
#ifndef GR_CLOCK_H
#define GR_CLOCK_H

#include <stdint.h>

/* CLOCK_MONOTONIC in seconds / nanoseconds: never jumps with the wall clock. */
double gr__mono_now(void);
uint64_t gr__mono_ns(void);
/* CLOCK_REALTIME in seconds since the Unix epoch. */
double gr__wall_now(void);

#endif
