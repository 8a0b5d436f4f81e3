/* Internal: one growable array for the places that collect an unknown number of elements. The
 * element size is fixed at initialisation; growth doubles and refuses a size that does not fit in
 * size_t. Elements move when the array grows: hold indices across a push, not pointers. */
#ifndef GR_ARRAY_H
#define GR_ARRAY_H

#include <gpurun/status.h>
#include <stddef.h>

typedef struct gr_array {
  void *data;   /* count elements of elem bytes each; NULL until the first growth */
  size_t count; /* elements in use */
  size_t cap;   /* elements allocated */
  size_t elem;  /* bytes per element */
} gr_array;

/* An empty array of TYPE: gr_array a = GR_ARRAY_INIT(int); */
#define GR_ARRAY_INIT(type)                                                                        \
  { NULL, 0, 0, sizeof(type) }

/* Element I of an array of TYPE, as an lvalue; the caller keeps I below count. */
#define GR_ARRAY_AT(arr, type, i) (((type *)(arr)->data)[i])

static inline void gr__array_init(gr_array *a, size_t elem) {
  a->data = NULL;
  a->count = a->cap = 0;
  a->elem = elem;
}

/* Room for N elements in all (not N more): GR_ERR_NOMEM when N * elem overflows or the
 * allocation fails, the array unchanged. Records no sentence: the caller names what it was
 * collecting. */
gr_status gr__array_reserve(gr_array *a, size_t n);

/* Appends one element copied from ELEM (zeroed when ELEM is NULL); GR_ERR_NOMEM as above. */
gr_status gr__array_push(gr_array *a, const void *elem);

/* Releases the storage; the array is empty again and keeps its element size. */
void gr__array_free(gr_array *a);

#endif
