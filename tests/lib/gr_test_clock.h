/* The C tests' clock: seconds on CLOCK_MONOTONIC (bounds on how long a call took, deadlines of a
 * test's own loops) and a process that computes for a while (a late rank: no MPI and no gpurun
 * call meanwhile, so nothing of either progresses on its behalf). */
#ifndef GR_TEST_CLOCK_H
#define GR_TEST_CLOCK_H

#include <time.h>

/* Seconds since an arbitrary start, never going back. */
static inline double gr_test_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* s seconds of a process that computes: a busy loop on the clock, no call into MPI or gpurun. */
static inline void gr_test_spin(double s) {
  double end = gr_test_now() + s;
  while (gr_test_now() < end) {
  }
}

#endif
