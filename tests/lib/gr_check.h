/* The C tests' assertions outside cmocka (the MPI tests above all). Every failure prints
 * "FILE:LINE: rank R: " and what failed: the expression, the values compared, gpurun's last error
 * sentence for a status.
 *
 * Two kinds:
 * - EXPECT*, FAIL: the failure is counted and the test carries on, so that every rank
 *   reports; the test ends with `return GR_TEST_FAILURES != 0;` (or its own count). The first
 *   GR_TEST_PRINT_MAX failures of a process are printed.
 * - REQUIRE*: the failure ends the test at once: MPI_Abort(MPI_COMM_WORLD, 1) between
 *   MPI_Init and MPI_Finalize (a rank that stopped alone would leave the others waiting in a
 *   collective), exit(1) otherwise.
 *
 * The including file may define, before including this header:
 *   GR_TEST_RANK      an int expression for the rank printed (default: -1, no rank known);
 *   GR_TEST_FAILURES  the int lvalue that counts failures (default: a counter of this header). */
#ifndef GR_TEST_CHECK_H
#define GR_TEST_CHECK_H

#include <gpurun/status.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef GR_TEST_RANK
#define GR_TEST_RANK (-1)
#endif
#ifndef GR_TEST_FAILURES
static int gr_test_failures __attribute__((unused));
#define GR_TEST_FAILURES gr_test_failures
#endif
#ifndef GR_TEST_PRINT_MAX
#define GR_TEST_PRINT_MAX 20
#endif

/* Ends the test: the whole MPI job while MPI is up, this process otherwise. */
static inline void gr_test_abort(void) {
  int up = 0, down = 0;
  MPI_Initialized(&up);
  MPI_Finalized(&down);
  fflush(stderr);
  if (up && !down) MPI_Abort(MPI_COMM_WORLD, 1);
  exit(1);
}

/* One failure line, "FILE:LINE: rank R: FAIL: message", written in one piece so that the ranks'
 * lines do not interleave. */
static inline void gr_test_report(const char *file, int line, int who, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static inline void gr_test_report(const char *file, int line, int who, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "%s:%d: rank %d: FAIL: %s\n", file, line, who, msg);
}

/* A counted failure with a printf-style message. */
#define FAIL(...)                                                                                  \
  do {                                                                                             \
    if (GR_TEST_FAILURES++ < GR_TEST_PRINT_MAX)                                                    \
      gr_test_report(__FILE__, __LINE__, (int)(GR_TEST_RANK), __VA_ARGS__);                        \
  } while (0)

/* A failure that ends the test, with a printf-style message. */
#define FATAL(...)                                                                                 \
  do {                                                                                             \
    gr_test_report(__FILE__, __LINE__, (int)(GR_TEST_RANK), __VA_ARGS__);                          \
    gr_test_abort();                                                                               \
  } while (0)

/* cond holds; the last error sentence is printed with it (it often says why). */
#define EXPECT(cond)                                                                               \
  do {                                                                                             \
    if (!(cond)) FAIL("check failed: %s (last error: %s)", #cond, gr_last_error());                \
  } while (0)
#define REQUIRE(cond)                                                                              \
  do {                                                                                             \
    if (!(cond)) FATAL("check failed: %s (last error: %s)", #cond, gr_last_error());               \
  } while (0)

/* Two integers are equal; both values are printed. */
#define EXPECT_EQ(a, b)                                                                            \
  do {                                                                                             \
    long long a_ = (long long)(a), b_ = (long long)(b);                                            \
    if (a_ != b_) FAIL("%s == %s failed: %lld != %lld", #a, #b, a_, b_);                           \
  } while (0)
#define REQUIRE_EQ(a, b)                                                                           \
  do {                                                                                             \
    long long a_ = (long long)(a), b_ = (long long)(b);                                            \
    if (a_ != b_) FATAL("%s == %s failed: %lld != %lld", #a, #b, a_, b_);                          \
  } while (0)

/* call returns the status want; the last error is cleared first, so the sentence printed on a
 * failure is the call's own. */
#define EXPECT_ST(call, want)                                                                      \
  do {                                                                                             \
    gr_clear_error();                                                                              \
    gr_status st_ = (call);                                                                        \
    gr_status want_ = (want);                                                                      \
    if (st_ != want_)                                                                              \
      FAIL("%s returned %s, expected %s (%s)", #call, gr_status_name(st_), gr_status_name(want_),  \
           gr_last_error());                                                                       \
  } while (0)
#define REQUIRE_ST(call, want)                                                                     \
  do {                                                                                             \
    gr_clear_error();                                                                              \
    gr_status st_ = (call);                                                                        \
    gr_status want_ = (want);                                                                      \
    if (st_ != want_)                                                                              \
      FATAL("%s returned %s, expected %s (%s)", #call, gr_status_name(st_), gr_status_name(want_), \
            gr_last_error());                                                                      \
  } while (0)
#define EXPECT_OK(call) EXPECT_ST(call, GR_OK)
/* The same, naming the case (what: a string built by the test) in the failure line. */
#define EXPECT_OK_IN(call, what)                                                                   \
  do {                                                                                             \
    gr_clear_error();                                                                              \
    gr_status st_ = (call);                                                                        \
    if (st_ != GR_OK)                                                                              \
      FAIL("%s: %s returned %s (%s)", (what), #call, gr_status_name(st_), gr_last_error());        \
  } while (0)
#define REQUIRE_OK(call) REQUIRE_ST(call, GR_OK)

/* The last error sentence contains sub. */
#define EXPECT_MSG(sub)                                                                            \
  do {                                                                                             \
    const char *sub_ = (sub);                                                                      \
    if (!strstr(gr_last_error(), sub_))                                                            \
      FAIL("last error \"%s\" does not contain \"%s\"", gr_last_error(), sub_);                    \
  } while (0)
/* call returns the status want, with a sentence that contains sub. */
#define EXPECT_ST_MSG(call, want, sub)                                                             \
  do {                                                                                             \
    EXPECT_ST(call, want);                                                                         \
    EXPECT_MSG(sub);                                                                               \
  } while (0)

#endif
