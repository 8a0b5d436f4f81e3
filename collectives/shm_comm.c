/* Attaching a communicator to a node-local shared-memory segment, at communicator creation
 * (collective over c->mpi). Rank 0 makes a memfd, the others open it through /proc; where that is
 * not allowed (another PID namespace, a hardened /proc) a POSIX shm object is used instead, unlinked
 * as soon as every rank has mapped it, so /dev/shm keeps no name longer than the creation takes.
 * Every rank learns whether all others succeeded: either all use the segment, or none does. Every
 * round among the ranks is the agreement helper's (gr_agree.h), bounded by the communicator's
 * timeout: a round that fails (a rank that never joins it, MPI) fails the creation, the mapping,
 * the registration with its sentence in c->err, where a plain MPI call would hang. */
#include "shm_int.h"

#include "gr_agree.h"
#include "gr_log.h"
#include "gr_mpi_error.h"
#include "gr_param.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Cleanup steps whose failure leaves nothing to undo (a bad argument would be a bug here): said in
 * the debug log, errno kept for the caller's own sentence. */
static void unmap(void *p, size_t bytes) {
  int e = errno;
  if (munmap(p, bytes) != 0)
    GR_DEBUG("collectives: shared-memory segment: munmap failed: %s", strerror(errno));
  errno = e;
}
static void close_fd(int fd) {
  int e = errno;
  if (close(fd) != 0)
    GR_DEBUG("collectives: shared-memory segment: close(%d) failed: %s", fd, strerror(errno));
  errno = e;
}
static void unlink_named(const char *name) {
  int e = errno;
  if (shm_unlink(name) != 0)
    GR_DEBUG("collectives: shared-memory segment: shm_unlink %s failed: %s", name, strerror(errno));
  errno = e;
}

static uint64_t new_nonce(void) {
  uint64_t n = 0;
  if (getrandom(&n, sizeof n, GRND_NONBLOCK) != (ssize_t)sizeof n) {
    struct timespec ts = {0, 0};
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) /* the pid alone, then: still never 0 */
      GR_DEBUG("collectives: shared-memory segment: no clock for the nonce: %s", strerror(errno));
    n = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ ((uint64_t)getpid() << 40);
  }
  return n | 1; /* never 0, which a zeroed page would match */
}

typedef struct {
  int64_t pid, fd;
  uint64_t nonce;
  char name[48];
} seg_info;

/* What a mapping holds: rank 0 writes its header before anyone else maps it, the others check it
 * (the communicator's segment, gr__shm_format/gr__shm_valid; a window, window_format/valid). */
typedef struct {
  void (*format)(void *base, int size, uint64_t nonce, size_t bytes);
  int (*valid)(const void *base, size_t bytes, int size, uint64_t nonce);
  const char *what;  /* the rounds' name in a sentence (gr_agree.h) */
  const char *where; /* the round that hands out rank 0's memfd or name */
} seg_kind;

static void segment_format(void *base, int size, uint64_t nonce, size_t bytes) {
  (void)bytes;
  gr__shm_format(base, size, nonce);
}
static const seg_kind segment = {segment_format, gr__shm_valid, "the shared-memory segment",
                                 "the shared-memory segment's memfd or name"};

/* The memfd way: *out is the mapping, or NULL on every rank (skip: rank 0 does not even try).
 * GR_OK, or a round's failure with its sentence in c->err (nothing is then left mapped). */
static gr_status via_memfd(gr_comm *c, size_t bytes, uint64_t nonce, int skip, const seg_kind *kind,
                           void **out) {
  seg_info info = {-1, -1, nonce, ""};
  void *base = NULL;
  int fd = -1;
  if (c->rank == 0 && !skip) {
    fd = gr__shm_memfd(bytes);
    if (fd >= 0) base = gr__shm_map(fd, bytes);
    if (base) {
      kind->format(base, c->size, nonce, bytes);
      info.pid = getpid();
      info.fd = fd;
    } else {
      GR_DEBUG("collectives: shared-memory segment: memfd failed: %s", strerror(errno));
    }
  }
  gr_status st = gr__agree_bcast(c, kind->where, &info, sizeof info, 0);
  if (st == GR_OK && c->rank != 0 && info.pid > 0 && info.fd >= 0 && info.fd <= INT32_MAX) {
    int pfd = gr__shm_open_peer((pid_t)info.pid, (int)info.fd);
    if (pfd >= 0) {
      base = gr__shm_map(pfd, bytes);
      close_fd(pfd);
    }
    if (base && !kind->valid(base, bytes, c->size, nonce)) {
      unmap(base, bytes);
      base = NULL;
    }
    if (!base)
      GR_DEBUG("collectives: shared-memory segment: rank %d cannot open /proc/%" PRId64
               "/fd/%" PRId64 ": %s",
               c->rank, info.pid, info.fd, strerror(errno));
  }
  int ok = 0;
  if (st == GR_OK) st = gr__agree_ok(c, kind->what, base != NULL, &ok);
  if (fd >= 0) close_fd(fd); /* the mappings keep the memory */
  if (!ok && base) {
    unmap(base, bytes);
    base = NULL;
  }
  *out = base;
  return st;
}

/* The named way: shm_open, map, and unlink once everyone has it (or failed); as via_memfd. */
static gr_status via_named(gr_comm *c, size_t bytes, uint64_t nonce, const seg_kind *kind,
                           void **out) {
  seg_info info = {-1, -1, nonce, ""};
  void *base = NULL;
  if (c->rank == 0) {
    snprintf(info.name, sizeof info.name, "/gpurun-coll-%d-%016" PRIx64, (int)getpid(), nonce);
    int fd = shm_open(info.name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0) {
      if (ftruncate(fd, (off_t)bytes) == 0) base = gr__shm_map(fd, bytes);
      close_fd(fd);
      if (base)
        kind->format(base, c->size, nonce, bytes);
      else
        unlink_named(info.name);
    }
    if (base) info.pid = getpid();
  }
  gr_status st = gr__agree_bcast(c, kind->where, &info, sizeof info, 0);
  info.name[sizeof info.name - 1] = '\0';
  if (st == GR_OK && c->rank != 0 && info.pid > 0 && strncmp(info.name, "/gpurun-coll-", 13) == 0) {
    int fd = shm_open(info.name, O_RDWR | O_CLOEXEC, 0);
    if (fd >= 0) {
      base = gr__shm_map(fd, bytes);
      close_fd(fd);
    }
    if (base && !kind->valid(base, bytes, c->size, nonce)) {
      unmap(base, bytes);
      base = NULL;
    }
  }
  int ok = 0;
  if (st == GR_OK) st = gr__agree_ok(c, kind->what, base != NULL, &ok);
  if (c->rank == 0 && info.pid > 0) unlink_named(info.name);
  if (!ok && base) {
    unmap(base, bytes);
    base = NULL;
  }
  *out = base;
  return st;
}

gr_status gr__shm_comm_attach(gr_comm *c, gr__shm **out) {
  *out = NULL;
  if (c->size < 2 || c->size > GR__SHM_MAX_RANKS) return GR_OK;
  /* GPURUN_COLL_ALGO=mpi (agreed, c->algo) keeps the MPI algorithms (for measurement); every
   * other setting uses the segment where the ranks share a node. */
  int ok = c->algo != GR__COLL_ALGO_MPI;
  MPI_Comm node = MPI_COMM_NULL;
  int nsize = 0, all = 0;
  if (MPI_Comm_split_type(c->mpi, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS &&
      node != MPI_COMM_NULL) {
    if (MPI_Comm_size(node, &nsize) != MPI_SUCCESS) nsize = 0; /* then: no segment, agreed */
    if (MPI_Comm_free(&node) != MPI_SUCCESS)                   /* only the handle leaks */
      GR_DEBUG("collectives: communicator %s: MPI_Comm_free of the node communicator failed",
               c->id);
  }
  gr_status st = gr__agree_ok(c, segment.what, ok && nsize == c->size, &all);
  if (st != GR_OK) return st;
  if (!all) {
    GR_DEBUG("collectives: communicator %s: no shared-memory path (%s)", c->id,
             ok ? "its ranks span several nodes" : "GPURUN_COLL_ALGO=mpi");
    return GR_OK;
  }
  size_t bytes = gr__shm_bytes(c->size);
  uint64_t nonce = new_nonce();
  st = gr__agree_bcast(c, "the shared-memory segment's nonce", &nonce, sizeof nonce, 0);
  if (st != GR_OK) return st;
  /* GPURUN_SHM_SEGMENT=posix (rank 0's) skips the memfd: for testing the fallback */
  int posix = gr__param_word(GR_PARAM_SHM_SEGMENT) == GR_SHM_SEGMENT_POSIX;
  void *base = NULL;
  st = via_memfd(c, bytes, nonce, posix, &segment, &base);
  const char *how = "memfd";
  if (st == GR_OK && !base) {
    st = via_named(c, bytes, nonce, &segment, &base);
    how = "POSIX shm, unlinked";
  }
  if (st != GR_OK) return st;
  if (!base) {
    GR_DEBUG("collectives: communicator %s: no shared-memory segment could be made", c->id);
    return GR_OK;
  }
  gr__shm *s = gr__shm_new(base, bytes, c->rank, c->size);
  st = gr__agree_ok(c, segment.what, s != NULL, &all);
  if (st != GR_OK || !all) { /* out of memory somewhere: all keep the MPI algorithms */
    if (s) gr__shm_free(s);
    unmap(base, bytes);
    return st;
  }
  gr__shm_own_mapping(s);
  /* single copy where every rank may read the others' memory (GPURUN_SHM_CMA=0: never) */
  int cma = gr__param_bool(GR_PARAM_SHM_CMA) && gr__shm_cma_probe(s);
  st = gr__agree_ok(c, "the single copy", cma, &cma);
  if (st == GR_OK) st = gr__agree_ok(c, "the single copy", gr__shm_set_cma(s, cma), &cma);
  if (st == GR_OK && !cma) gr__shm_set_cma(s, 0);
  int usable = 1;
  if (st == GR_OK && cma) st = gr__shm_choose(c, s, &usable);
  if (st != GR_OK || !usable) {
    if (st == GR_OK)
      GR_DEBUG("collectives: communicator %s: no shared-memory path (measuring the single copy "
               "failed)",
               c->id);
    gr__shm_free(s); /* it owns the mapping */
    return st;
  }
  GR_DEBUG("collectives: communicator %s: shared-memory path (%zu bytes, %s, %s)", c->id, bytes,
           how,
           cma ? "single copy by process_vm_readv from 16 KiB to a crossover per kind"
               : "copy in, copy out");
  *out = s;
  return GR_OK;
}

/* ---- windows (gr_mem_alloc) ------------------------------------------------------------------
 * One mapping per window: a header page, then one region of `stride` bytes per rank, rank q's at
 * WINDOW_HEAD + q * stride (first touched by rank q: its pages sit on that rank's NUMA node). */
#define WINDOW_MAGIC 0x6772736d77696e31ull /* "grsmwin1" */
#define WINDOW_HEAD 4096

typedef struct {
  uint64_t magic, nonce, size, bytes;
} window_header;

static void window_format(void *base, int size, uint64_t nonce, size_t bytes) {
  window_header h = {WINDOW_MAGIC, nonce, (uint64_t)size, bytes};
  memcpy(base, &h, sizeof h);
}
static int window_valid(const void *base, size_t bytes, int size, uint64_t nonce) {
  window_header h;
  memcpy(&h, base, sizeof h);
  return h.magic == WINDOW_MAGIC && h.nonce == nonce && h.size == (uint64_t)size &&
         h.bytes == bytes;
}
static const seg_kind window = {window_format, window_valid, "the window's mapping",
                                "the window's memfd or name"};

/* Register the regions base[q] (bytes[q]) on every rank, or on none. */
static gr_status add_window(gr_comm *c, gr__shm *s, uint64_t token, void *const *base,
                            const size_t *bytes) {
  int all = 0;
  gr_status st =
      gr__agree_ok(c, "the window's regions", gr__shm_window_add(s, token, base, bytes), &all);
  if (st == GR_OK && !all) st = gr__comm_err(c, GR_ERR_NOMEM, "out of memory");
  if (st != GR_OK) gr__shm_window_remove(s, token);
  return st;
}

/* Rank 0's fresh nonce on every rank (never 0): the window's token. */
static gr_status agreed_token(gr_comm *c, uint64_t *token) {
  *token = new_nonce();
  return gr__agree_bcast(c, "the window's token", token, sizeof *token, 0);
}

gr_status gr__shm_comm_window(gr_comm *c, gr__shm *s, size_t bytes, gr__shm_mapping *out) {
  memset(out, 0, sizeof *out);
  size_t stride = (bytes + 4095) & ~(size_t)4095;
  if (stride < bytes || stride > (SIZE_MAX - WINDOW_HEAD) / (size_t)c->size)
    return gr__comm_err(c, GR_ERR_NOMEM, "%zu bytes per rank cannot be mapped", bytes);
  size_t total = WINDOW_HEAD + stride * (size_t)c->size;
  uint64_t nonce = 0;
  gr_status st = agreed_token(c, &nonce);
  if (st != GR_OK) return st;
  int posix = gr__param_word(GR_PARAM_SHM_SEGMENT) == GR_SHM_SEGMENT_POSIX;
  void *mapped = NULL;
  st = via_memfd(c, total, nonce, posix, &window, &mapped);
  if (st == GR_OK && !mapped) st = via_named(c, total, nonce, &window, &mapped);
  if (st != GR_OK) return st;
  unsigned char *base = mapped;
  if (!base)
    return gr__comm_err(c, GR_ERR_NOMEM,
                        "no rank-shared mapping of %zu bytes could be made (memfd and POSIX shm "
                        "failed on some rank; GPURUN_LOG=debug says which)",
                        total);
  void **regions = malloc((size_t)c->size * (sizeof(void *) + sizeof(size_t)));
  size_t *sizes = regions ? (size_t *)(void *)(regions + c->size) : NULL;
  for (int q = 0; regions && q < c->size; q++) {
    regions[q] = base + WINDOW_HEAD + stride * (size_t)q;
    sizes[q] = stride;
  }
  int all = 0;
  st = gr__agree_ok(c, "the window's memory", regions != NULL, &all);
  if (st == GR_OK)
    st = all ? add_window(c, s, nonce, regions, sizes)
             : gr__comm_err(c, GR_ERR_NOMEM, "out of memory");
  free(regions);
  if (st != GR_OK) {
    unmap(base, total);
    return st;
  }
  out->map = base;
  out->map_bytes = total;
  out->token = nonce;
  out->ptr = base + WINDOW_HEAD + stride * (size_t)c->rank;
  GR_DEBUG("collectives: communicator %s: window of %zu bytes per rank (%zu mapped)", c->id, bytes,
           total);
  return GR_OK;
}

/* ---- registration: a buffer the program has, made reachable in place -----------------------
 * The pages under [ptr, ptr + bytes) (whole pages) are replaced by a memfd with the same contents
 * at the same address (MAP_FIXED over them), so the program's pointer and data stay as they were;
 * the peers open the memfd through /proc and map it. Deregistering puts private pages with the
 * same contents back (mremap of a private copy over the range). The cost is paid once: every call
 * on the buffer afterwards reaches it directly, with no pinning. */

typedef struct {
  int64_t pid, fd;
  uint64_t lo, len;
} reg_info;

/* Write len bytes at p into fd from offset 0 (out = 1), or read them back into p; 1 when all
 * moved. The raw system calls: whole pages hold bytes of the program's besides the buffer, which a
 * sanitizer's pwrite/pread would report as read out of bounds; they are copied, never looked at. */
static int pages_io(int fd, void *p, size_t len, int out) {
  for (size_t done = 0; done < len;) {
    ssize_t k = (ssize_t)syscall(out ? SYS_pwrite64 : SYS_pread64, fd, (char *)p + done, len - done,
                                 (off_t)done);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return 0;
    done += (size_t)k;
  }
  return 1;
}

gr_status gr__shm_comm_register(gr_comm *c, gr__shm *s, void *ptr, size_t bytes,
                                gr__shm_mapping *out) {
  memset(out, 0, sizeof *out);
  uintptr_t lo = (uintptr_t)ptr & ~(uintptr_t)4095;
  size_t len = (((uintptr_t)ptr + bytes + 4095) & ~(uintptr_t)4095) - lo;
  uint64_t nonce = 0;
  gr_status st = agreed_token(c, &nonce);
  if (st != GR_OK) return st;
  /* this rank's pages into a memfd (by the kernel: the bytes around the buffer on its first and
   * last page are the program's too, not ours to read), then the memfd at the same address */
  int fd = gr__shm_memfd(len), ok = fd >= 0 && pages_io(fd, (void *)lo, len, 1);
  if (ok)
    ok = mmap((void *)lo, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) == (void *)lo;
  int e = errno;
  reg_info mine = {ok ? getpid() : -1, ok ? fd : -1, lo, len};
  /* every rank's, then this rank's own (the gather's send buffer): written and read by MPI until
   * the gather completes, so one heap block that a gather given up on takes to the lost list */
  reg_info *all = malloc(((size_t)c->size + 1) * sizeof *all);
  void **peer = calloc((size_t)c->size, sizeof *peer);
  size_t *peer_len = calloc((size_t)c->size, sizeof *peer_len);
  int have = all && peer && peer_len, moved = 0;
  st = gr__agree_ok(c, "the moved pages", ok && have, &moved);
  if (st != GR_OK || !moved) {
    if (fd >= 0) close_fd(fd);
    free(all), free(peer), free(peer_len);
    /* a rank whose pages moved keeps them: the memfd's are the same bytes at the same address */
    return st != GR_OK ? st
                       : gr__comm_err(c, ok && !have ? GR_ERR_NOMEM : GR_ERR_SYSTEM,
                                      "the buffer's pages could not be moved into shared memory "
                                      "on some rank (this rank: %s)",
                                      ok ? "done" : strerror(e));
  }
  all[c->size] = mine;
  MPI_Request req = MPI_REQUEST_NULL;
  int rc = MPI_Iallgather(&all[c->size], (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine,
                          MPI_BYTE, c->mpi, &req);
  if (rc != MPI_SUCCESS) {
    char said[MPI_MAX_ERROR_STRING];
    st = gr__comm_err(c, GR_ERR_MPI,
                      "the registration's exchange of pages over communicator %s: "
                      "MPI_Iallgather failed: %s",
                      c->id, gr__mpi_strerror(rc, said));
  } else if ((st = gr__mpi_wait_owning(c, &req, gr__deadline(c->timeout_s), all)) != GR_OK) {
    all = NULL; /* the lost list's now (or freed) */
    if (st == GR_ERR_TIMEOUT)
      st = gr__comm_err(c, GR_ERR_TIMEOUT,
                        "the registration's exchange of pages over communicator %s (rank %d of %d) "
                        "did not complete within %g s (the communicator's timeout): some rank did "
                        "not join it",
                        c->id, c->rank, c->size, c->timeout_s);
    else { /* c->err holds MPI's words */
      char said[GR__ERRLEN];
      snprintf(said, sizeof said, "%s", c->err);
      st = gr__comm_err(c, st, "the registration's exchange of pages over communicator %s: %s",
                        c->id, said);
    }
  }
  if (st != GR_OK) { /* this rank's pages stay in its memfd: the same bytes at the same address */
    close_fd(fd);
    free(all), free(peer), free(peer_len);
    return st;
  }
  int mapped = 1;
  for (int q = 0; mapped && q < c->size; q++) {
    if (q == c->rank) {
      peer[q] = (void *)lo;
      peer_len[q] = len;
      continue;
    }
    int pfd = gr__shm_open_peer((pid_t)all[q].pid, (int)all[q].fd);
    peer[q] = pfd >= 0 ? gr__shm_map(pfd, (size_t)all[q].len) : NULL;
    if (pfd >= 0) close_fd(pfd);
    peer_len[q] = (size_t)all[q].len;
    mapped = peer[q] != NULL;
  }
  /* every rank opened every peer's; this rank keeps its memfd: its pages come back through it */
  st = gr__agree_ok(c, "the peers' pages", mapped, &mapped);
  if (st == GR_OK && !mapped)
    st = gr__comm_err(c, GR_ERR_SYSTEM,
                      "a peer's registered pages could not be mapped (/proc/PID/fd of another "
                      "rank)");
  if (st == GR_OK) {
    /* the offsets calls publish count from ptr's page, which is where window_of looks */
    st = add_window(c, s, nonce, peer, peer_len);
  }
  if (st != GR_OK) {
    for (int q = 0; q < c->size; q++)
      if (q != c->rank && peer[q]) unmap(peer[q], peer_len[q]);
    free(all), free(peer), free(peer_len);
    close_fd(fd);
    return st;
  }
  free(all);
  out->fd = fd;
  out->ptr = ptr;
  out->map = (void *)lo;
  out->map_bytes = len;
  out->token = nonce;
  out->peer = peer;
  out->peer_bytes = peer_len;
  out->rank = c->rank;
  out->size = c->size;
  return GR_OK;
}

void gr__shm_comm_window_free(gr__shm *s, const gr__shm_mapping *m) {
  if (s && m->token) gr__shm_window_remove(s, m->token);
  if (!m->peer) { /* an allocation */
    if (m->map) unmap(m->map, m->map_bytes);
    return;
  }
  for (int q = 0; q < m->size; q++)
    if (q != m->rank && m->peer[q]) unmap(m->peer[q], m->peer_bytes[q]);
  /* private pages with the same contents back under the program's pointer (read through the
   * memfd, which holds what the program's mapping shows) */
  void *copy = mmap(NULL, m->map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (copy != MAP_FAILED) {
    if (!pages_io(m->fd, copy, m->map_bytes, 0) ||
        mremap(copy, m->map_bytes, m->map_bytes, MREMAP_MAYMOVE | MREMAP_FIXED, m->map) ==
            MAP_FAILED)
      unmap(copy, m->map_bytes); /* the memfd's pages stay: the same bytes, shared with nobody */
  }
  close_fd(m->fd);
  free(m->peer);
  free(m->peer_bytes);
}

/* ---- the MPI backend's calls on the segment ------------------------------------------------ */

gr_status gr__shm_call_post(gr__shm *s, gr__call *k, const void *send, void *recv,
                            const uint64_t *wtok, const size_t *woff, gr__shm_op **op) {
  gr__shm_op call = {.kind = (int)k->kind,
                     .send = send,
                     .recv = recv,
                     .count = k->count,
                     .dtype = k->dtype,
                     .op = k->op,
                     .root = k->root,
                     .refused = k->fe_refused,
                     .request = k->fe_request};
  if (k->kind == GR__BARRIER) call.count = 0;
  for (int w = 0; wtok && w < 2; w++) { /* before the post: the engine may run the op at once */
    call.wtok[w] = wtok[w];
    call.woff[w] = woff[w];
  }
  *op = NULL;
  gr_status st = gr__shm_post(s, op, &call);
  if (st != GR_OK)
    return gr__comm_err(k->comm, st,
                        st == GR_ERR_NOMEM ? "out of memory"
                                           : "shared-memory path "
                                             "unusable after an earlier timeout");
  if (k->fe_request) {
    /* a request starts at once (its buffers published, its first raise done, so that a peer
     * that waits can do its share) and goes on in the progress engine */
    gr__shm_nudge(s);
    if (gr__shm_engine_add(s) != GR_OK)
      GR_DEBUG("collectives: progress thread: out of memory; requests progress in their tests");
  }
  return GR_OK;
}

gr_status gr__shm_call_test(gr__shm *s, gr__call *k, gr__shm_op **op, int *done) {
  gr_status st = k->fe_request && !k->fe_waiting ? gr__shm_test_some(s, *op, done)
                                                 : gr__shm_test(s, *op, done);
  if (st == GR_ERR_MISMATCH || st == GR_ERR_INVALID) { /* op released; segment usable (gr_shm.h) */
    *op = NULL;
    return gr__comm_err(k->comm, st, "%s", gr__shm_why(s));
  }
  if (st == GR_ERR_SYSTEM)
    return gr__comm_err(
        k->comm, st,
        "a single-copy read or write (process_vm_readv/writev) with a peer rank failed: %s",
        strerror(gr__shm_cma_errno(s)));
  if (st != GR_OK)
    return gr__comm_err(k->comm, st, "shared-memory path unusable after an earlier timeout");
  if (*done) *op = NULL;
  return GR_OK;
}

void gr__shm_call_forget(gr__shm *s, gr__call *k, gr__shm_op **op) {
  gr__shm_forget(s, *op, k->comm->err, sizeof k->comm->err);
  *op = NULL;
}

/* ---- the gated calls' FIFO (gr__shm_defer): the MPI backend's calls that run elsewhere after
 * their agreement round here, in the order they were posted ---------------------------------- */

#define DEFERRED(s, i) GR_ARRAY_AT(&(s)->deferred, void *, i)

int gr__shm_defer(gr__shm *s, void *item) {
  gr_array *d = &s->deferred;
  if (s->dfirst == d->count) s->dfirst = d->count = 0;
  if (d->count == d->cap && s->dfirst) { /* slide down before growing */
    memmove(d->data, &DEFERRED(s, s->dfirst), (d->count - s->dfirst) * sizeof(void *));
    d->count -= s->dfirst;
    s->dfirst = 0;
  }
  return gr__array_push(d, &item) == GR_OK;
}

void *gr__shm_deferred(const gr__shm *s) {
  return s->dfirst < s->deferred.count ? DEFERRED(s, s->dfirst) : NULL;
}

void gr__shm_undefer(gr__shm *s, void *item) {
  gr_array *d = &s->deferred;
  for (size_t i = s->dfirst; i < d->count; i++) {
    if (DEFERRED(s, i) != item) continue;
    memmove(&DEFERRED(s, i), &DEFERRED(s, i + 1), (d->count - i - 1) * sizeof(void *));
    d->count--;
    return;
  }
}
