/* Internal: one intrusive doubly linked list for the FIFOs and in-flight lists. The element embeds
 * a gr_list_node and the list links those nodes; GR_LIST_ENTRY gets the element back. A zeroed
 * gr_list is empty, so a list inside a calloc'd or static struct needs no initialisation. No
 * locking: the owner of the list serialises its use. */
#ifndef GR_LIST_H
#define GR_LIST_H

#include <stddef.h>

typedef struct gr_list_node {
  struct gr_list_node *prev, *next;
} gr_list_node;

typedef struct gr_list {
  gr_list_node *head, *tail; /* oldest and newest; both NULL when empty */
} gr_list;

/* The element of TYPE whose MEMBER is the node PTR. */
#define GR_LIST_ENTRY(ptr, type, member) ((type *)(void *)((char *)(ptr)-offsetof(type, member)))

static inline int gr__list_empty(const gr_list *l) { return l->head == NULL; }

static inline void gr__list_push_back(gr_list *l, gr_list_node *n) {
  n->next = NULL;
  n->prev = l->tail;
  if (l->tail)
    l->tail->next = n;
  else
    l->head = n;
  l->tail = n;
}

/* Unlinks N, which is on L. */
static inline void gr__list_remove(gr_list *l, gr_list_node *n) {
  if (n->prev)
    n->prev->next = n->next;
  else
    l->head = n->next;
  if (n->next)
    n->next->prev = n->prev;
  else
    l->tail = n->prev;
  n->prev = n->next = NULL;
}

/* Whether N, which is on L or on no list, is on L: a node on no list has both links NULL (zeroed,
 * or unlinked by gr__list_remove / gr__list_pop_front). */
static inline int gr__list_linked(const gr_list *l, const gr_list_node *n) {
  return n->prev || n->next || l->head == n;
}

/* Unlinks and returns the oldest node; NULL when the list is empty. */
static inline gr_list_node *gr__list_pop_front(gr_list *l) {
  gr_list_node *n = l->head;
  if (n) gr__list_remove(l, n);
  return n;
}

/* Walks the nodes oldest first; the body may remove IT (TMP holds its successor). */
#define GR_LIST_FOREACH(it, tmp, l)                                                                \
  for (gr_list_node *it = (l)->head, *tmp = it ? it->next : NULL; it;                              \
       it = tmp, tmp = it ? it->next : NULL)

#endif
