/* The growable array (gr_array.h): doubling growth with every size checked against SIZE_MAX. */
#include "gr_array.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

gr_status gr__array_reserve(gr_array *a, size_t n) {
  if (n <= a->cap) return GR_OK;
  if (a->elem == 0 || n > SIZE_MAX / a->elem) return GR_ERR_NOMEM;
  size_t cap = a->cap ? a->cap : 8;
  while (cap < n)
    cap = cap > SIZE_MAX / 2 ? n : cap * 2;
  if (cap > SIZE_MAX / a->elem) cap = n; /* doubling past the limit: exactly what was asked */
  void *d = realloc(a->data, cap * a->elem);
  if (!d) return GR_ERR_NOMEM;
  a->data = d;
  a->cap = cap;
  return GR_OK;
}

gr_status gr__array_push(gr_array *a, const void *elem) {
  if (a->count == SIZE_MAX) return GR_ERR_NOMEM;
  gr_status st = gr__array_reserve(a, a->count + 1);
  if (st != GR_OK) return st;
  char *slot = (char *)a->data + a->count * a->elem;
  if (elem)
    memcpy(slot, elem, a->elem);
  else
    memset(slot, 0, a->elem);
  a->count++;
  return GR_OK;
}

void gr__array_free(gr_array *a) {
  free(a->data);
  a->data = NULL;
  a->count = a->cap = 0;
}
