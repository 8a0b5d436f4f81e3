/* The intrusive list (base/gr_list.h): FIFO order, removal at either end and in the middle, the
 * empty list (zeroed), and the walk that removes as it goes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "gr_list.h"

typedef struct {
  int before; /* the node is not the first member: GR_LIST_ENTRY must subtract its offset */
  gr_list_node node;
  int v;
} item;

static int pop(gr_list *l) {
  gr_list_node *n = gr__list_pop_front(l);
  return n ? GR_LIST_ENTRY(n, item, node)->v : -1;
}

static void order(void **state) {
  (void)state;
  gr_list l = {0};
  assert_true(gr__list_empty(&l));
  assert_null(gr__list_pop_front(&l));
  item it[5];
  for (int i = 0; i < 5; i++) {
    it[i].v = i;
    gr__list_push_back(&l, &it[i].node);
  }
  assert_false(gr__list_empty(&l));
  for (int i = 0; i < 5; i++)
    assert_int_equal(pop(&l), i);
  assert_true(gr__list_empty(&l));
  assert_null(l.tail);
  assert_int_equal(pop(&l), -1);
  /* reuse after draining, interleaved pushes and pops */
  gr__list_push_back(&l, &it[3].node);
  gr__list_push_back(&l, &it[1].node);
  assert_int_equal(pop(&l), 3);
  gr__list_push_back(&l, &it[4].node);
  assert_int_equal(pop(&l), 1);
  assert_int_equal(pop(&l), 4);
  assert_true(gr__list_empty(&l));
}

static void remove_any(void **state) {
  (void)state;
  gr_list l = {0};
  item it[6];
  for (int i = 0; i < 6; i++) {
    it[i].v = i;
    gr__list_push_back(&l, &it[i].node);
  }
  assert_true(gr__list_linked(&l, &it[2].node));
  gr__list_remove(&l, &it[2].node); /* middle */
  assert_false(gr__list_linked(&l, &it[2].node));
  gr__list_remove(&l, &it[0].node); /* head */
  gr__list_remove(&l, &it[5].node); /* tail */
  assert_ptr_equal(l.head, &it[1].node);
  assert_ptr_equal(l.tail, &it[4].node);
  int want[] = {1, 3, 4}, n = 0;
  GR_LIST_FOREACH(p, nx, &l) {
    assert_true(n < 3);
    assert_int_equal(GR_LIST_ENTRY(p, item, node)->v, want[n++]);
  }
  assert_int_equal(n, 3);
  /* backwards through prev, too */
  assert_int_equal(GR_LIST_ENTRY(l.tail->prev, item, node)->v, 3);
  gr__list_push_back(&l, &it[2].node); /* a removed node goes back in at the end */
  assert_ptr_equal(l.tail, &it[2].node);
  gr__list_remove(&l, &it[1].node);
  gr__list_remove(&l, &it[3].node);
  gr__list_remove(&l, &it[4].node);
  gr__list_remove(&l, &it[2].node); /* the last one */
  assert_true(gr__list_empty(&l));
  assert_null(l.tail);
  assert_false(gr__list_linked(&l, &it[2].node));
  gr__list_push_back(&l, &it[0].node); /* the only node: no links, yet linked */
  assert_true(gr__list_linked(&l, &it[0].node));
  assert_false(gr__list_linked(&l, &it[1].node));
  assert_ptr_equal(gr__list_pop_front(&l), &it[0].node);
  assert_false(gr__list_linked(&l, &it[0].node));
}

static void foreach_removing(void **state) {
  (void)state;
  gr_list l = {0};
  int n = 0;
  GR_LIST_FOREACH(p, nx, &l) n++; /* empty: no iteration */
  assert_int_equal(n, 0);
  item it[7];
  for (int i = 0; i < 7; i++) {
    it[i].v = i;
    gr__list_push_back(&l, &it[i].node);
  }
  GR_LIST_FOREACH(p, nx, &l) { /* drop the odd ones while walking */
    if (GR_LIST_ENTRY(p, item, node)->v % 2) gr__list_remove(&l, p);
  }
  for (int i = 0; i < 7; i += 2)
    assert_int_equal(pop(&l), i);
  assert_true(gr__list_empty(&l));
  for (int i = 0; i < 3; i++)
    gr__list_push_back(&l, &it[i].node);
  GR_LIST_FOREACH(p, nx, &l) gr__list_remove(&l, p); /* remove everything */
  assert_true(gr__list_empty(&l));
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(order), cmocka_unit_test(remove_any),
                                     cmocka_unit_test(foreach_removing)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
