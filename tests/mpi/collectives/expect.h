/* The MPI collectives tests' checks are tests/lib/gr_check.h's (FAIL, EXPECT_ST, EXPECT_MSG, ...):
 * each failure is counted and printed with the rank, file and line, and the test carries on (every
 * rank reports). The including file defines `static int rank, failures;`. */
#ifndef GR_TEST_EXPECT_H
#define GR_TEST_EXPECT_H

#define GR_TEST_RANK rank
#define GR_TEST_FAILURES failures
#include "gr_check.h"

#endif
