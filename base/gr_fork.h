/* Internal: which process an object belongs to, after fork(). A child of fork() inherits copies of
 * the parent's communicators and requests, whose shared memory, MPI state and peers are the
 * parent's: a call in the child must refuse them, not act on them (NCCL and CUDA refuse after fork
 * too). Each object records the generation it was made in; a child's generation is its parent's +
 * 1 (a pthread_atfork child handler), so the check is one load and one compare. */
#ifndef GR_FORK_H
#define GR_FORK_H

/* The calling process's generation (0 in the process that loaded the library). */
extern unsigned gr__fork_gen_now;
static inline unsigned gr__fork_gen(void) {
  return __atomic_load_n(&gr__fork_gen_now, __ATOMIC_RELAXED);
}

/* Arm the child handler (once; every creator of an object that records its generation calls it
 * first). */
void gr__fork_watch(void);

/* Whether an object made in generation gen belongs to the calling process. */
static inline int gr__fork_mine(unsigned gen) { return gen == gr__fork_gen(); }

#endif
