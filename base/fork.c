/* The fork generation (gr_fork.h). */
#include "gr_fork.h"

#include <pthread.h>

unsigned gr__fork_gen_now;

static void in_child(void) { __atomic_add_fetch(&gr__fork_gen_now, 1, __ATOMIC_RELAXED); }

static void arm(void) { pthread_atfork(NULL, NULL, in_child); }

void gr__fork_watch(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, arm);
}
