/* gr_mem_alloc and gr_mem_free: memory the calls on a communicator reach directly (the MPI
 * backend's windows on a node's shared memory, gr_shm.h). Both are collective over the
 * communicator: every rank first says what it asks (agree below, on c->mpi), so that a rank
 * that refuses its own arguments, asks another size, frees something else or has no memory makes
 * every rank fail with one sentence naming it, and no rank waits in the backend's mapping for one
 * that gave up. */
#include "gr_coll.h"

#include "gr_agree.h"
#include "gr_error.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Registration on a backend that moves whole pages (GR__CAP_REGISTER_PAGES) works on the process's
 * memory, not on one communicator: the pages of a buffer get one shared mapping, which a second
 * communicator's registration would replace under the first one's peers. So the pages such memory
 * spans (allocated or registered) are held process-wide, each by one communicator at a time; a
 * registration over pages another communicator holds is refused with that communicator's name.
 * The list is the process's because the address space is. */
static pthread_mutex_t held_lock = PTHREAD_MUTEX_INITIALIZER;
static gr_list held; /* gr__mem, by their held node; under held_lock */

#define PAGE_BYTES 4096u /* what the backend's mappings (shm_comm.c) count in */

static int holds_pages(const gr_comm *c) { return (c->ops->caps & GR__CAP_REGISTER_PAGES) != 0; }

static void hold(gr_comm *c, gr__mem *m) {
  m->owner = c;
  pthread_mutex_lock(&held_lock);
  gr__list_push_back(&held, &m->held);
  pthread_mutex_unlock(&held_lock);
}

static void unhold(gr__mem *m) {
  if (!m->owner) return;
  pthread_mutex_lock(&held_lock);
  gr__list_remove(&held, &m->held);
  pthread_mutex_unlock(&held_lock);
  m->owner = NULL;
}

/* Claim [lo, lo + len) for m on c when no other communicator holds a page of it (1), else copy
 * the holder's id into other (0). The claim is made before the ranks agree, so that two threads
 * registering one buffer on two communicators cannot both pass. */
static int claim(gr_comm *c, gr__mem *m, uintptr_t lo, size_t len, char *other, size_t cap) {
  int free_pages = 1;
  pthread_mutex_lock(&held_lock);
  GR_LIST_FOREACH(it, tmp, &held) {
    const gr__mem *h = GR_LIST_ENTRY(it, gr__mem, held);
    if (free_pages && h->owner != c && lo < h->lo + h->len && h->lo < lo + len) {
      snprintf(other, cap, "%s", h->owner->id);
      free_pages = 0;
    }
  }
  if (free_pages) {
    m->owner = c;
    m->lo = lo;
    m->len = len;
    gr__list_push_back(&held, &m->held);
  }
  pthread_mutex_unlock(&held_lock);
  return free_pages;
}

/* What a rank brings to the agreement: a verdict on its own arguments and the size it asks or the
 * allocation it frees. */
enum {
  ASK_OK,
  ASK_NULL_OUT,       /* alloc: ptr is NULL */
  ASK_ZERO,           /* alloc: bytes is 0 */
  ASK_NOMEM,          /* alloc: no memory for the record */
  ASK_UNKNOWN,        /* free: not memory gr_mem_alloc gave on this communicator */
  ASK_PENDING,        /* free: requests or grouped calls outstanding, which may use it */
  ASK_NULL_FREE,      /* free: ptr is NULL (every rank: nothing to do) */
  ASK_NULL_HANDLE,    /* register: handle is NULL */
  ASK_OVERLAP,        /* register: the pages overlap memory already registered or allocated */
  ASK_OVERLAP_BYTES,  /* register: the bytes overlap (a backend that registers no pages) */
  ASK_UNKNOWN_HANDLE, /* deregister: not a handle of this communicator */
  ASK_PARTIAL_PAGE,   /* register: a first or last page holds memory the buffer does not cover */
  ASK_OTHER_COMM,     /* register: another communicator holds some of the pages */
};

typedef struct {
  int64_t verdict;
  uint64_t value;  /* alloc: bytes; free: the allocation's id */
  char detail[96]; /* the refusing rank's particulars ("" when none) */
} ask;

static const char *ask_text(int64_t v) {
  switch (v) {
  case ASK_NULL_OUT:
    return "ptr is NULL";
  case ASK_ZERO:
    return "bytes is 0";
  case ASK_NOMEM:
    return "out of memory";
  case ASK_UNKNOWN:
    return "the pointer is not memory gr_mem_alloc gave on this communicator (freed already, or "
           "from another communicator)";
  case ASK_NULL_HANDLE:
    return "handle is NULL";
  case ASK_OVERLAP:
    return "the buffer's pages overlap memory already registered or allocated on this communicator";
  case ASK_OVERLAP_BYTES:
    return "the buffer overlaps memory already registered or allocated on this communicator";
  case ASK_UNKNOWN_HANDLE:
    return "the handle is not one gr_mem_register gave on this communicator (deregistered already, "
           "or from another communicator)";
  case ASK_PENDING:
    return "requests or grouped calls are outstanding on the communicator (complete them first)";
  case ASK_PARTIAL_PAGE:
    return "the buffer shares a page with memory it does not cover; registration moves whole "
           "pages into shared memory, and writes of other threads to the rest of such a page "
           "would be lost: pass page-aligned memory whose size is a whole number of pages "
           "(posix_memalign or aligned_alloc with 4096, mmap) or use gr_mem_alloc";
  case ASK_OTHER_COMM:
    return "some of the buffer's pages are registered or allocated on another communicator (a "
           "page is registered on one communicator at a time: deregister it there first)";
  default:
    return "ptr is NULL";
  }
}

/* A step of the agreement (or the backend's part) that failed with its sentence in c->err: the
 * caller's sentence. Past the timeout c->mpi holds a collective some rank never joined, so the
 * communicator is aborted (as a timed-out call's is). */
static gr_status step_failed(const char *fn, gr_comm *c, gr_status st) {
  if (st != GR_ERR_TIMEOUT) return gr__fail(st, fn, "communicator %s: %s", c->id, c->err);
  gr__comm_abort_internal(c);
  return gr__fail(st, fn, "communicator %s: %s; the communicator is now aborted", c->id, c->err);
}

/* Every rank's ask, before anything is allocated: rank 0's to everyone, then the first rank that
 * refused and the first that differs from rank 0 (one gr__agree round), each step bounded by the
 * communicator's timeout. GR_OK when none refused and all ask alike (*nothing: all passed NULL to
 * gr_mem_free), else the same status and sentence on every rank. freeing: gr_mem_free's (the value
 * is an allocation's number), else gr_mem_alloc's (bytes). */
static gr_status agree(const char *fn, gr_comm *c, ask mine, int freeing, int *nothing) {
  ask zero = mine;
  gr_status st = gr__agree_bcast(c, "rank 0's ask", &zero, sizeof zero, 0);
  if (st != GR_OK) return step_failed(fn, c, st);
  int refused = mine.verdict != ASK_OK && mine.verdict != ASK_NULL_FREE;
  int64_t lowest[2] = {refused ? c->rank : c->size,
                       mine.verdict != zero.verdict || mine.value != zero.value ? c->rank
                                                                                : c->size};
  int64_t first[2];
  st = gr__agree(c, "the ranks' asks", GR__AGREE_MIN, lowest, first, 2);
  if (st != GR_OK) return step_failed(fn, c, st);
  *nothing = 0;
  const char *undone = strcmp(fn, "gr_mem_register") == 0     ? "registered"
                       : strcmp(fn, "gr_mem_deregister") == 0 ? "deregistered"
                       : freeing                              ? "freed"
                                                              : "allocated";
  const char *what = freeing ? "frees allocation #" : "asks for ", *unit = freeing ? "" : " bytes";
  if (first[0] < c->size) {
    ask why = mine;
    st = gr__agree_bcast(c, "the refusing rank's ask", &why, sizeof why, (int)first[0]);
    if (st != GR_OK) return step_failed(fn, c, st);
    int64_t v = why.verdict;
    why.detail[sizeof why.detail - 1] = '\0';
    return gr__fail(v == ASK_PENDING ? GR_ERR_STATE
                    : v == ASK_NOMEM ? GR_ERR_NOMEM
                                     : GR_ERR_INVALID,
                    fn, "communicator %s: rank %d: %s%s%s; nothing was %s", c->id, (int)first[0],
                    ask_text(v), why.detail[0] ? ": " : "", why.detail, undone);
  }
  if (first[1] < c->size) {
    ask other = mine;
    st = gr__agree_bcast(c, "the differing rank's ask", &other, sizeof other, (int)first[1]);
    if (st != GR_OK) return step_failed(fn, c, st);
    if (other.verdict != zero.verdict) /* one passes NULL, the other memory */
      return gr__fail(
          GR_ERR_MISMATCH, fn,
          "communicator %s: rank %d passes %s while rank 0 passes %s; nothing was freed", c->id,
          (int)first[1], other.verdict == ASK_NULL_FREE ? "NULL" : "memory",
          zero.verdict == ASK_NULL_FREE ? "NULL" : "memory");
    return gr__fail(GR_ERR_MISMATCH, fn,
                    "communicator %s: rank 0 %s%" PRIu64 "%s, rank %d %s%" PRIu64 "%s; nothing "
                    "was %s",
                    c->id, what, zero.value, unit, (int)first[1], what, other.value, unit, undone);
  }
  *nothing = zero.verdict == ASK_NULL_FREE;
  return GR_OK;
}

GR_API gr_status gr_mem_alloc(gr_comm *comm, size_t bytes, void **ptr) {
  static const char fn[] = "gr_mem_alloc";
  if (ptr) *ptr = NULL;
  GR_CHECK(gr__check_alive(fn, comm));
  GR_CHECK(gr__requests_drain(fn, comm)); /* the agreement is a collective on c->mpi */
  gr__mem *m = ptr && bytes ? calloc(1, sizeof *m) : NULL;
  ask mine = {!ptr ? ASK_NULL_OUT : !bytes ? ASK_ZERO : !m ? ASK_NOMEM : ASK_OK, bytes, ""};
  int nothing;
  gr_status st;
  GR_CHECK_GOTO(agree(fn, comm, mine, 0, &nothing), st, free_m);
  if (!comm->ops->mem_alloc) {
    st = gr__fail(GR_ERR_UNSUPPORTED, fn,
                  "communicator %s: the %s backend has no memory of its own to hand out", comm->id,
                  comm->ops->name);
    goto free_m;
  }
  comm->err[0] = '\0';
  st = comm->ops->mem_alloc(comm, bytes, m);
  if (st != GR_OK) {
    st = step_failed(fn, comm, st);
    goto free_m;
  }
  m->bytes = bytes;
  m->id = comm->mem_seq++;
  gr__list_push_back(&comm->mem, &m->node);
  if (holds_pages(comm)) hold(comm, m);
  *ptr = m->ptr;
  return GR_OK;
free_m:
  free(m);
  return st;
}

GR_API gr_status gr_mem_register(gr_comm *comm, void *ptr, size_t bytes, gr_mem_handle **handle) {
  static const char fn[] = "gr_mem_register";
  if (handle) *handle = NULL;
  GR_CHECK(gr__check_alive(fn, comm));
  GR_CHECK(gr__requests_drain(fn, comm));
  int pages = holds_pages(comm);
  uintptr_t at = (uintptr_t)ptr, lo = pages ? at & ~(uintptr_t)(PAGE_BYTES - 1) : at;
  size_t len = !ptr || !bytes || bytes > UINTPTR_MAX - at - PAGE_BYTES ? 0
               : pages ? ((at + bytes + PAGE_BYTES - 1) & ~(uintptr_t)(PAGE_BYTES - 1)) - lo
                       : bytes;
  ask mine = {ASK_OK, 0, ""};
  /* whole pages only: the bytes around the buffer on its first and last page are the program's,
   * and other threads may write them while the pages move */
  size_t head = pages ? at - lo : 0, tail = pages && len ? lo + len - (at + bytes) : 0;
  if (head)
    snprintf(mine.detail, sizeof mine.detail, "it starts %zu bytes into a page", head);
  else if (tail)
    snprintf(mine.detail, sizeof mine.detail, "it ends %zu bytes before the end of a page", tail);
  int overlap = 0;
  GR_LIST_FOREACH(it, tmp, &comm->mem) {
    const gr__mem *m = GR_LIST_ENTRY(it, gr__mem, node);
    overlap |= len && lo < m->lo + m->len && m->lo < lo + len;
  }
  gr__mem *m =
      ptr && bytes && handle && len && !overlap && !head && !tail ? calloc(1, sizeof *m) : NULL;
  long pending = __atomic_load_n(&comm->pending, __ATOMIC_ACQUIRE);
  char other[sizeof comm->id] = "";
  int claimed = m && pending <= 0 && (!pages || claim(comm, m, lo, len, other, sizeof other));
  mine.verdict = !ptr           ? ASK_NULL_OUT
                 : !bytes       ? ASK_ZERO
                 : !handle      ? ASK_NULL_HANDLE
                 : !len         ? ASK_ZERO /* unreachable sizes: nothing to register */
                 : head || tail ? ASK_PARTIAL_PAGE
                 : overlap      ? (pages ? ASK_OVERLAP : ASK_OVERLAP_BYTES)
                 : !m           ? ASK_NOMEM
                 : pending > 0  ? ASK_PENDING /* the pages move under requests that may use them */
                 : !claimed     ? ASK_OTHER_COMM
                                : ASK_OK;
  if (mine.verdict == ASK_OTHER_COMM)
    snprintf(mine.detail, sizeof mine.detail, "communicator %.70s holds them", other);
  else if (mine.verdict != ASK_PARTIAL_PAGE)
    mine.detail[0] = '\0';
  int nothing;
  gr_status st;
  GR_CHECK_GOTO(agree(fn, comm, mine, 0, &nothing), st, undo);
  if (!comm->ops->mem_register) {
    st = gr__fail(GR_ERR_UNSUPPORTED, fn, "communicator %s: the %s backend cannot register memory",
                  comm->id, comm->ops->name);
    goto undo;
  }
  m->ptr = ptr;
  m->bytes = bytes;
  m->registered = 1;
  m->lo = lo;
  m->len = len;
  comm->err[0] = '\0';
  st = comm->ops->mem_register(comm, m);
  if (st != GR_OK) {
    st = step_failed(fn, comm, st);
    goto undo;
  }
  m->id = comm->mem_seq++;
  gr__list_push_back(&comm->mem, &m->node);
  *handle = (gr_mem_handle *)m;
  return GR_OK;
undo: /* a claimed m gives its pages back */
  if (m && claimed) unhold(m);
  free(m);
  return st;
}

/* Unlink and release M, which is on comm's list (the agreement passed). */
static void release_one(gr_comm *comm, gr__mem *m) {
  gr__list_remove(&comm->mem, &m->node);
  comm->ops->mem_free(comm, m);
  unhold(m); /* after the pages are back: another communicator may register them from here on */
  free(m);
}

/* gr_mem_deregister (registered: key is the handle) and gr_mem_free (key is the pointer). */
static gr_status release(const char *fn, gr_comm *comm, const void *key, int registered) {
  GR_CHECK(gr__check_alive(fn, comm));
  GR_CHECK(gr__requests_drain(fn, comm));
  gr__mem *found = NULL;
  GR_LIST_FOREACH(it, tmp, &comm->mem) {
    gr__mem *m = GR_LIST_ENTRY(it, gr__mem, node);
    if (key && !found && (registered ? (const void *)m : m->ptr) == key &&
        m->registered == registered)
      found = m;
  }
  long pending = __atomic_load_n(&comm->pending, __ATOMIC_ACQUIRE);
  ask mine = {!key          ? ASK_NULL_FREE
              : !found      ? (registered ? ASK_UNKNOWN_HANDLE : ASK_UNKNOWN)
              : pending > 0 ? ASK_PENDING
                            : ASK_OK,
              found ? found->id : 0, ""};
  int nothing;
  GR_CHECK(agree(fn, comm, mine, 1, &nothing));
  if (!nothing) release_one(comm, found);
  return GR_OK;
}

GR_API gr_status gr_mem_deregister(gr_comm *comm, gr_mem_handle *handle) {
  return release("gr_mem_deregister", comm, handle, 1);
}

GR_API gr_status gr_mem_free(gr_comm *comm, void *ptr) {
  return release("gr_mem_free", comm, ptr, 0);
}

void gr__mem_release_all(gr_comm *c) {
  while (c->mem.tail) /* newest first: the reverse of the collective allocations */
    release_one(c, GR_LIST_ENTRY(c->mem.tail, gr__mem, node));
}
