/* Internal: the median of n numbers (header-only, like gr_list.h), for the tools' verdicts that
 * compare one rank with the others. */
#ifndef GR_MEDIAN_H
#define GR_MEDIAN_H

#include <stdlib.h>

static inline int gr__median_cmp_(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Sorts v[0..n) in place and returns its median (the mean of the middle two for an even n); 0
 * when n is 0. */
static inline double gr__median(double *v, int n) {
  if (n <= 0) return 0;
  qsort(v, (size_t)n, sizeof *v, gr__median_cmp_);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#endif
