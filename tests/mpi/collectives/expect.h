/* Checks shared by the MPI collectives tests: each failure is counted and printed with the rank
 * and line, and the test carries on (every rank reports). The including file defines
 * `static int rank, failures;`. */
#ifndef GR_TEST_EXPECT_H
#define GR_TEST_EXPECT_H

#include <gpurun/status.h>
#include <stdio.h>
#include <string.h>

#define FAIL(...)                                                                                  \
  do {                                                                                             \
    failures++;                                                                                    \
    fprintf(stderr, "[rank %d] FAIL line %d: ", rank, __LINE__);                                   \
    fprintf(stderr, __VA_ARGS__);                                                                  \
    fputc('\n', stderr);                                                                           \
  } while (0)
#define EXPECT_ST(call, want)                                                                      \
  do {                                                                                             \
    gr_clear_error();                                                                              \
    gr_status st_ = (call);                                                                        \
    if (st_ != (want))                                                                             \
      FAIL("%s returned %s, expected %s (%s)", #call, gr_status_name(st_), gr_status_name(want),   \
           gr_last_error());                                                                       \
  } while (0)
#define EXPECT_MSG(sub)                                                                            \
  do {                                                                                             \
    if (!strstr(gr_last_error(), (sub)))                                                           \
      FAIL("last error \"%s\" does not contain \"%s\"", gr_last_error(), (sub));                   \
  } while (0)

#endif
