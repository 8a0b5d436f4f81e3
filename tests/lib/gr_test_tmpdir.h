/* A scratch directory for one test program: made under /tmp from a prefix (mkdtemp) and removed
 * afterwards with everything in it (nftw, depth first, links not followed; no shell, so a path
 * with a quote in it removes nothing else). Header-only; cmocka's setup and teardown call these:
 *   static char dir[256];
 *   static int setup(void **s) { (void)s; return gr_test_tmpdir_make(dir, sizeof dir, "gr_x"); }
 *   static int teardown(void **s) { (void)s; return gr_test_tmpdir_remove(dir); } */
#ifndef GR_TEST_TMPDIR_H
#define GR_TEST_TMPDIR_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>

/* dir (cap bytes) becomes /tmp/<prefix>.XXXXXX, made. 0, or -1 where it could not be made. */
static inline int gr_test_tmpdir_make(char *dir, size_t cap, const char *prefix) {
  if ((size_t)snprintf(dir, cap, "/tmp/%s.XXXXXX", prefix) >= cap) return -1;
  return mkdtemp(dir) ? 0 : -1;
}

static inline int gr_test_tmpdir_unlink_(const char *path, const struct stat *st, int flag,
                                         struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  return remove(path) == 0 ? 0 : -1;
}

/* Removes dir and what is in it. 0, or -1 where something was left. */
static inline int gr_test_tmpdir_remove(const char *dir) {
  return nftw(dir, gr_test_tmpdir_unlink_, 16, FTW_DEPTH | FTW_PHYS) == 0 ? 0 : -1;
}

#endif
