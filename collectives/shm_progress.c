/* The progress engine of the shared-memory path: one thread per process that advances the
 * outstanding calls of every segment a request was posted on, so that a request moves while its
 * caller computes and never tests (gr_shm.h).
 *
 * The thread starts with the first request and stops when the last registered segment is freed
 * (communicator destroyed, gr_finalize). A pass takes a segment's lock with trylock (a caller
 * inside its test has it: that caller is progressing the same queue) and does at most
 * ENGINE_BUDGET pieces of work (shm_coll.c, gr__shm_engine_pump). At registration the engine hands
 * the segment its bell and its farewell (gr__shm_engine_registered), so that shm_coll.c never
 * calls into this file. When no segment moved, the thread sleeps in one
 * futex_waitv on its bell (rung by every request post and by a caller releasing a lock the
 * engine wanted) and on the counter word each blocked segment waits for (rung by the peer's raise,
 * which wakes counted sleepers). The thread makes no MPI call, so it needs no MPI thread level:
 * requests on other paths progress in their caller's tests.
 *
 * It runs at nice ENGINE_NICE: against a computing thread on the same core it gets a small share
 * (about a tenth), so it takes little from the program's compute, and it cannot be starved the
 * way a SCHED_IDLE thread is on a loaded node (a starved thread holding a segment's lock, or one
 * that must exit for gr_comm_destroy, would stall its callers). Its policy is SCHED_BATCH, whose
 * woken threads wait for the tick instead of preempting the running one: a raise or an unlock
 * inside a caller's gr_test that wakes it no longer costs that caller the rest of a time slice
 * (gr_test's maximum, 64 MiB overlap bench: 2380-3873 us in 2 of 3 runs before, 28-49 us in 6 of 6
 * after). A caller that finds the lock taken
 * asks the engine's pass to stop at its next piece and leaves the segment to the caller until
 * the caller has had it. */
#include "gr_shm.h"

#include "gr_array.h"
#include "gr_log.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef SYS_futex_waitv
#define SYS_futex_waitv 449
#endif
#ifndef FUTEX2_SIZE_U32
#define FUTEX2_SIZE_U32 0x02
#endif
#ifndef FUTEX2_PRIVATE
#define FUTEX2_PRIVATE 128
#endif

/* The most segments one sleep watches (futex_waitv takes 128 words, one is the bell); beyond,
 * the sleep is bounded by SLEEP_CAP_NS and the rest are looked at after it. */
#define MAX_WATCH 127
/* The thread's nice value (raising one's own nice needs no privilege). */
#define ENGINE_NICE 10
/* A sleep's bound: a missed wake-up costs at most this. */
#define SLEEP_CAP_NS 50000000L

struct waitv { /* struct futex_waitv, declared here for headers that lack it */
  uint64_t val;
  uint64_t uaddr;
  uint32_t flags;
  uint32_t reserved;
};

static struct {
  pthread_mutex_t mu;
  pthread_cond_t cv; /* remove waits here for the thread to leave a segment */
  pthread_t thread;
  int running, stop, stopping;
  gr_array segs;                 /* gr__shm *: the registered segments */
  gr__shm *inside;               /* the segment a pass is on (remove waits until it is not s) */
  gr__shm_wait watch[MAX_WATCH]; /* the segments a sleep counts itself on (remove waits too) */
  int nwatch;
  _Atomic uint32_t bell;
  _Atomic int sleeping;
  int no_waitv; /* the kernel lacks futex_waitv: sleep on the bell alone, bounded */
} eng = {.mu = PTHREAD_MUTEX_INITIALIZER,
         .cv = PTHREAD_COND_INITIALIZER,
         .segs = GR_ARRAY_INIT(gr__shm *)};

/* The bell moves before the sleeping flag is read, and the thread sets the flag before it
 * compares the bell in its sleep (both sequentially consistent): either it sees the move or this
 * sees it asleep. */
void gr__shm_engine_kick(void) {
  atomic_fetch_add_explicit(&eng.bell, 1, memory_order_seq_cst);
  if (atomic_load_explicit(&eng.sleeping, memory_order_seq_cst))
    /* a failed wake leaves the thread to its capped sleep (SLEEP_CAP_NS) */
    (void)syscall(SYS_futex, (uint32_t *)&eng.bell, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

static void low_priority(void) {
  /* SCHED_BATCH: a woken batch thread never preempts the running one (the tick decides), so
   * the raise or unlock that wakes this thread inside a caller's gr_test does not hand it the
   * caller's core for the rest of a time slice; its share stays the nice value's. No privilege
   * needed; where refused, the thread stays SCHED_OTHER. */
  struct sched_param sp = {.sched_priority = 0};
  int rc = pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp);
  if (rc != 0) GR_DEBUG("collectives: progress thread: SCHED_BATCH refused: %s", strerror(rc));
  /* a thread's own nice value (Linux: setpriority on a thread id affects that thread only) */
  if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), ENGINE_NICE) != 0)
    GR_DEBUG("collectives: progress thread: nice %d refused: %s", ENGINE_NICE, strerror(errno));
}

static int watched(const gr__shm *s) {
  for (int i = 0; i < eng.nwatch; i++)
    if (eng.watch[i].seg == s) return 1;
  return 0;
}

/* Sleep until the bell moves from bell or a watched word from its value (or the cap). */
static void sleep_on(uint32_t bell, gr__shm_wait *w, int nw) {
  struct timespec ts;
  /* futex_waitv's timeout is absolute: without the clock, the bell alone, bounded */
  int clock_ok = clock_gettime(CLOCK_MONOTONIC, &ts) == 0;
  if (eng.no_waitv || nw == 0 || !clock_ok) {
    ts.tv_sec = 0;
    ts.tv_nsec = nw ? 1000000L : SLEEP_CAP_NS; /* no waitv: look at the peers every 1 ms */
    /* EAGAIN (the bell moved), ETIMEDOUT, EINTR: each ends the sleep, and the pass looks again */
    (void)syscall(SYS_futex, (uint32_t *)&eng.bell, FUTEX_WAIT_PRIVATE, bell, &ts, NULL, 0);
    return;
  }
  struct waitv v[MAX_WATCH + 1];
  v[0] = (struct waitv){bell, (uint64_t)(uintptr_t)&eng.bell, FUTEX2_SIZE_U32 | FUTEX2_PRIVATE, 0};
  for (int i = 0; i < nw; i++)
    v[i + 1] = (struct waitv){w[i].val, (uint64_t)(uintptr_t)w[i].word, FUTEX2_SIZE_U32, 0};
  ts.tv_nsec += SLEEP_CAP_NS;
  if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
  long rc = syscall(SYS_futex_waitv, v, (unsigned)(nw + 1), 0u, &ts, CLOCK_MONOTONIC);
  if (rc < 0 && errno == ENOSYS) eng.no_waitv = 1;
}

static void *engine_main(void *arg) {
  (void)arg;
  low_priority();
  gr__shm_wait *w = eng.watch;
  pthread_mutex_lock(&eng.mu);
  while (!eng.stop) {
    uint32_t bell = atomic_load_explicit(&eng.bell, memory_order_seq_cst);
    int moved = 0, nw = 0;
    for (size_t i = 0; i < eng.segs.count; i++) {
      gr__shm *s = GR_ARRAY_AT(&eng.segs, gr__shm *, i);
      gr__shm_wait one;
      eng.inside = s;
      pthread_mutex_unlock(&eng.mu);
      int rc = gr__shm_engine_pump(s, &one);
      pthread_mutex_lock(&eng.mu);
      eng.inside = NULL;
      if (rc == GR__SHM_MOVED) moved = 1;
      /* a busy segment's holder rings the bell when it lets go; one blocked beyond MAX_WATCH is
       * looked at again after the capped sleep */
      if (rc == GR__SHM_BLOCKED && nw < MAX_WATCH) w[nw++] = one;
    }
    pthread_cond_broadcast(&eng.cv);
    if (moved || eng.stop) continue;
    /* counted as a sleeper on every watched segment, so that a raise there wakes this thread;
     * remove waits while its segment is watched, so every one outlives the sleep */
    eng.nwatch = nw;
    for (int i = 0; i < nw; i++)
      gr__shm_engine_waiting(w[i].seg, 1);
    atomic_store_explicit(&eng.sleeping, 1, memory_order_seq_cst);
    pthread_mutex_unlock(&eng.mu);
    sleep_on(bell, w, nw);
    pthread_mutex_lock(&eng.mu);
    atomic_store_explicit(&eng.sleeping, 0, memory_order_relaxed);
    for (int i = 0; i < nw; i++)
      gr__shm_engine_waiting(w[i].seg, -1);
    eng.nwatch = 0;
    pthread_cond_broadcast(&eng.cv);
  }
  pthread_mutex_unlock(&eng.mu);
  return NULL;
}

/* Start the thread unless one runs or one is being stopped (its stopper starts the next one when
 * segments were added meanwhile). Under eng.mu. */
static void start_locked(void) {
  if (eng.running || eng.segs.count == 0) return;
  /* every signal stays with the program's threads */
  sigset_t all, old;
  sigfillset(&all);
  int rc = pthread_sigmask(SIG_SETMASK, &all, &old);
  if (rc != 0) { /* a thread that could take the program's signals: none */
    GR_DEBUG("collectives: no progress thread (pthread_sigmask: %s): requests progress in their "
             "tests",
             strerror(rc));
    return;
  }
  eng.stop = 0;
  rc = pthread_create(&eng.thread, NULL, engine_main, NULL);
  int back = pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (back != 0) /* only an invalid argument fails it, and these are valid */
    GR_DEBUG("collectives: progress thread: restoring the signal mask failed: %s", strerror(back));
  if (rc == 0)
    eng.running = 1;
  else
    GR_DEBUG("collectives: no progress thread (%s): requests progress in their tests",
             strerror(rc));
}

gr_status gr__shm_engine_add(gr__shm *s) {
  if (gr__shm_engine_registered(s, gr__shm_engine_kick, gr__shm_engine_remove)) {
    gr__shm_engine_kick();
    return GR_OK;
  }
  pthread_mutex_lock(&eng.mu);
  if (gr__array_push(&eng.segs, &s) != GR_OK) {
    pthread_mutex_unlock(&eng.mu);
    return GR_ERR_NOMEM;
  }
  if (!eng.stopping) start_locked();
  pthread_mutex_unlock(&eng.mu);
  gr__shm_engine_kick();
  return GR_OK;
}

void gr__shm_engine_remove(gr__shm *s) {
  pthread_mutex_lock(&eng.mu);
  for (size_t i = 0; i < eng.segs.count; i++)
    if (GR_ARRAY_AT(&eng.segs, gr__shm *, i) == s) {
      GR_ARRAY_AT(&eng.segs, gr__shm *, i) = GR_ARRAY_AT(&eng.segs, gr__shm *, --eng.segs.count);
      break;
    }
  while (eng.inside == s || watched(s)) {
    pthread_mutex_unlock(&eng.mu);
    gr__shm_engine_kick();
    pthread_mutex_lock(&eng.mu);
    if (eng.inside == s || watched(s)) pthread_cond_wait(&eng.cv, &eng.mu);
  }
  /* the last segment: this remover stops the thread (one stopper at a time) */
  int join = eng.running && !eng.stopping && eng.segs.count == 0;
  if (join) eng.stop = eng.stopping = 1;
  pthread_mutex_unlock(&eng.mu);
  if (!join) return;
  gr__shm_engine_kick();
  int rc = pthread_join(eng.thread, NULL);
  if (rc != 0) /* the thread is joinable and joined once, here: only a bug makes it fail */
    GR_DEBUG("collectives: progress thread: pthread_join failed: %s", strerror(rc));
  pthread_mutex_lock(&eng.mu);
  eng.running = 0;
  eng.stopping = 0;
  start_locked(); /* segments registered while it stopped */
  pthread_mutex_unlock(&eng.mu);
}
