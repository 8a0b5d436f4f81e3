/* The C tests' assertions outside cmocka (the MPI tests above all). Every failure prints
 * "FILE:LINE: rank R: " and what failed: the expression, the values compared, gpurun's last error
 * sentence for a status.
 *
 * Two kinds:
 * - GR_CHECK*, GR_FAIL: the failure is counted and the test carries on, so that every rank
 *   reports; the test ends with `return GR_CHECK_FAILURES != 0;` (or its own count). The first
 *   GR_CHECK_PRINT_MAX failures of a process are printed.
 * - GR_REQUIRE*: the failure ends the test at once: MPI_Abort(MPI_COMM_WORLD, 1) between
 *   MPI_Init and MPI_Finalize (a rank that stopped alone would leave the others waiting in a
 *   collective), exit(1) otherwise.
 *
 * The including file may define, before including this header:
 *   GR_CHECK_RANK      an int expression for the rank printed (default: -1, no rank known);
 *   GR_CHECK_FAILURES  the int lvalue that counts failures (default: a counter of this header). */
#ifndef GR_CHECK_H
#define GR_CHECK_H

#include <gpurun/status.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef GR_CHECK_RANK
#define GR_CHECK_RANK (-1)
#endif
#ifndef GR_CHECK_FAILURES
static int gr_check_failures __attribute__((unused));
#define GR_CHECK_FAILURES gr_check_failures
#endif
#ifndef GR_CHECK_PRINT_MAX
#define GR_CHECK_PRINT_MAX 20
#endif

/* Ends the test: the whole MPI job while MPI is up, this process otherwise. */
static inline void gr_check_abort(void) {
  int up = 0, down = 0;
  MPI_Initialized(&up);
  MPI_Finalized(&down);
  fflush(stderr);
  if (up && !down) MPI_Abort(MPI_COMM_WORLD, 1);
  exit(1);
}

/* One failure line, "FILE:LINE: rank R: FAIL: message", written in one piece so that the ranks'
 * lines do not interleave. */
static inline void gr_check_report(const char *file, int line, int rank, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static inline void gr_check_report(const char *file, int line, int rank, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "%s:%d: rank %d: FAIL: %s\n", file, line, rank, msg);
}

/* A counted failure with a printf-style message. */
#define GR_FAIL(...)                                                                               \
  do {                                                                                             \
    if (GR_CHECK_FAILURES++ < GR_CHECK_PRINT_MAX)                                                  \
      gr_check_report(__FILE__, __LINE__, (int)(GR_CHECK_RANK), __VA_ARGS__);                      \
  } while (0)

/* A failure that ends the test, with a printf-style message. */
#define GR_FATAL(...)                                                                              \
  do {                                                                                             \
    gr_check_report(__FILE__, __LINE__, (int)(GR_CHECK_RANK), __VA_ARGS__);                        \
    gr_check_abort();                                                                              \
  } while (0)

/* cond holds; the last error sentence is printed with it (it often says why). */
#define GR_CHECK(cond)                                                                             \
  do {                                                                                             \
    if (!(cond)) GR_FAIL("check failed: %s (last error: %s)", #cond, gr_last_error());             \
  } while (0)
#define GR_REQUIRE(cond)                                                                           \
  do {                                                                                             \
    if (!(cond)) GR_FATAL("check failed: %s (last error: %s)", #cond, gr_last_error());            \
  } while (0)

/* Two integers are equal; both values are printed. */
#define GR_CHECK_EQ(a, b)                                                                          \
  do {                                                                                             \
    long long a_ = (long long)(a), b_ = (long long)(b);                                            \
    if (a_ != b_) GR_FAIL("%s == %s failed: %lld != %lld", #a, #b, a_, b_);                        \
  } while (0)
#define GR_REQUIRE_EQ(a, b)                                                                        \
  do {                                                                                             \
    long long a_ = (long long)(a), b_ = (long long)(b);                                            \
    if (a_ != b_) GR_FATAL("%s == %s failed: %lld != %lld", #a, #b, a_, b_);                       \
  } while (0)

/* call returns the status want; the last error is cleared first, so the sentence printed on a
 * failure is the call's own. */
#define GR_CHECK_ST(call, want)                                                                    \
  do {                                                                                             \
    gr_clear_error();                                                                              \
    gr_status st_ = (call);                                                                        \
    gr_status want_ = (want);                                                                      \
    if (st_ != want_)                                                                              \
      GR_FAIL("%s returned %s, expected %s (%s)", #call, gr_status_name(st_),                      \
              gr_status_name(want_), gr_last_error());                                             \
  } while (0)
#define GR_REQUIRE_ST(call, want)                                                                  \
  do {                                                                                             \
    gr_clear_error();                                                                              \
    gr_status st_ = (call);                                                                        \
    gr_status want_ = (want);                                                                      \
    if (st_ != want_)                                                                              \
      GR_FATAL("%s returned %s, expected %s (%s)", #call, gr_status_name(st_),                     \
               gr_status_name(want_), gr_last_error());                                            \
  } while (0)
#define GR_CHECK_OK(call) GR_CHECK_ST(call, GR_OK)
/* The same, naming the case (what: a string built by the test) in the failure line. */
#define GR_CHECK_OK_IN(what, call)                                                                 \
  do {                                                                                             \
    gr_clear_error();                                                                              \
    gr_status st_ = (call);                                                                        \
    if (st_ != GR_OK)                                                                              \
      GR_FAIL("%s: %s returned %s (%s)", (what), #call, gr_status_name(st_), gr_last_error());     \
  } while (0)
#define GR_REQUIRE_OK(call) GR_REQUIRE_ST(call, GR_OK)

/* The last error sentence contains sub. */
#define GR_CHECK_MSG(sub)                                                                          \
  do {                                                                                             \
    const char *sub_ = (sub);                                                                      \
    if (!strstr(gr_last_error(), sub_))                                                            \
      GR_FAIL("last error \"%s\" does not contain \"%s\"", gr_last_error(), sub_);                 \
  } while (0)

#endif
