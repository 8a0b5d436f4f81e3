/* The checks every refusal test makes (test_coll_refuse*.c, test_coll_reqrefuse.c), after
 * expect.h in a file that defines `static int rank, size, failures;`. */
#ifndef GR_TEST_EXPECT_REFUSED_H
#define GR_TEST_EXPECT_REFUSED_H

#include <gpurun/status.h>
#include <stdint.h>
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

/* What each test's still_works() sends after a refusal, fresh every round: rank r's v[i] is
 * (r + 1) * (i + round), whose SUM over the ranks is size * (size + 1) / 2 * (i + round); the last
 * rank broadcasts b = (7, 8, 9) * round over the others' -1s. */
static void fresh_inputs(int32_t *v, int n, int32_t b[3], int round) {
  for (int i = 0; i < n; i++)
    v[i] = (rank + 1) * (i + round);
  for (int i = 0; i < 3; i++)
    b[i] = rank == size - 1 ? (7 + i) * round : -1;
}

/* call (the allreduce that still_works made, status st) left that SUM in v[0..n). */
static void expect_fresh_sum(const char *call, const char *after, gr_status st, const int32_t *v,
                             int n, int round) {
  int32_t s = size * (size + 1) / 2;
  for (int i = 0; i < n; i++)
    if (st != GR_OK || v[i] != s * (i + round)) {
      FAIL("%s after %s: %s, element %d = %d, expected %d (%s)", call, after, gr_status_name(st), i,
           v[i], s * (i + round), gr_last_error());
      break;
    }
}

/* The broadcast still_works made (status st) left the last rank's data in b on every rank. */
static void expect_fresh_broadcast(const char *after, gr_status st, const int32_t b[3], int round) {
  if (st != GR_OK || b[0] != 7 * round || b[1] != 8 * round || b[2] != 9 * round)
    FAIL("broadcast after %s: %s, %d %d %d (%s)", after, gr_status_name(st), b[0], b[1], b[2],
         gr_last_error());
}

#endif
