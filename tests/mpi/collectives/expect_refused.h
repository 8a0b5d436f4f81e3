/* The check every refusal test makes (test_coll_refuse*.c, test_coll_reqrefuse.c), after
 * expect.h in a file that defines `static int rank, failures;`. */
#ifndef GR_TEST_EXPECT_REFUSED_H
#define GR_TEST_EXPECT_REFUSED_H

#include <gpurun/status.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Every rank: GR_ERR_INVALID. The refusing rank keeps its own sentence (own); the others name the
 * refusing rank and the argument (word). */
static void refused(const char *what, gr_status st, int refuser, const char *own,
                    const char *word) {
  const char *e = gr_last_error();
  if (getenv("REFUSE_VERBOSE")) fprintf(stderr, "[%d] %s: %s\n", rank, what, e);
  if (st != GR_ERR_INVALID) {
    FAIL("%s: %s, expected GR_ERR_INVALID (%s)", what, gr_status_name(st), e);
    return;
  }
  if (rank == refuser) {
    if (!strstr(e, own)) FAIL("%s: the refusing rank's sentence \"%s\" lacks \"%s\"", what, e, own);
    return;
  }
  char who[32];
  snprintf(who, sizeof who, "rank %d ", refuser);
  if (!strstr(e, who) || !strstr(e, "rejected its own") || !strstr(e, word))
    FAIL("%s: \"%s\" does not name %s(rejected its own ...) and \"%s\"", what, e, who, word);
}

#endif
