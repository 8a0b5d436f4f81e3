/* Status codes, names, descriptions and the thread-local last-error sentence. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <gpurun/status.h>
#include <gpurun/version.h>
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gr_error.h"

static void codes_have_names_and_text(void **state) {
  (void)state;
  assert_int_equal(GR_OK, 0);
  assert_string_equal(gr_status_name(GR_OK), "GR_OK");
  assert_string_equal(gr_status_name(GR_ERR_TIMEOUT), "GR_ERR_TIMEOUT");
  assert_string_equal(gr_strerror(GR_ERR_INVALID), "invalid argument");
  /* Every code in the enum has a distinct name and a non-empty text. */
  for (int i = 0; i < GR_STATUS_COUNT_; i++) {
    assert_string_not_equal(gr_status_name((gr_status)i), "GR_UNKNOWN");
    assert_true(strlen(gr_strerror((gr_status)i)) > 0);
    for (int j = 0; j < i; j++)
      assert_string_not_equal(gr_status_name((gr_status)i), gr_status_name((gr_status)j));
  }
  assert_string_equal(gr_status_name((gr_status)999), "GR_UNKNOWN");
  assert_string_equal(gr_strerror((gr_status)-1), "unknown status");
}

static void last_error_names_call_and_rank(void **state) {
  (void)state;
  gr_clear_error();
  assert_string_equal(gr_last_error(), "");
  gr__set_process_rank(3);
  gr_status st = gr__fail(GR_ERR_INVALID, "gr_allreduce", "count %zu of %s overflows size_t",
                          (size_t)10, "GR_FLOAT64");
  assert_int_equal(st, GR_ERR_INVALID);
  assert_string_equal(gr_last_error(),
                      "rank 3: gr_allreduce: count 10 of GR_FLOAT64 overflows size_t");
  gr__set_process_rank(-1);
  gr__fail(GR_ERR_STATE, "gr_finalize", "called before gr_init");
  assert_string_equal(gr_last_error(), "gr_finalize: called before gr_init");
  gr_clear_error();
  assert_string_equal(gr_last_error(), "");
}

static void long_messages_are_truncated_not_overflowed(void **state) {
  (void)state;
  char big[5000];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  gr__fail(GR_ERR_INVALID, "gr_test", "%s", big);
  size_t n = strlen(gr_last_error());
  assert_true(n > 100 && n < 1024);
}

static void *other_thread(void *arg) {
  (void)arg;
  /* A new thread starts with no error, and its failure does not leak into the main thread. */
  if (gr_last_error()[0] != '\0') return (void *)1;
  gr__fail(GR_ERR_SYSTEM, "gr_thread", "from the other thread");
  return NULL;
}

static void last_error_is_thread_local(void **state) {
  (void)state;
  gr__set_process_rank(-1);
  gr__fail(GR_ERR_INVALID, "gr_main", "from main");
  pthread_t t;
  void *ret = (void *)2;
  assert_int_equal(pthread_create(&t, NULL, other_thread, NULL), 0);
  pthread_join(t, &ret);
  assert_null(ret);
  assert_string_equal(gr_last_error(), "gr_main: from main");
}

static void rank_comes_from_launcher_env(void **state) {
  (void)state;
  setenv("OMPI_COMM_WORLD_RANK", "7", 1);
  gr__set_process_rank(-2); /* forget: look it up again */
  assert_int_equal(gr__process_rank(), 7);
  setenv("OMPI_COMM_WORLD_RANK", "junk", 1);
  unsetenv("PMIX_RANK");
  unsetenv("PMI_RANK");
  unsetenv("SLURM_PROCID");
  unsetenv("FLUX_TASK_RANK");
  gr__set_process_rank(-2);
  assert_int_equal(gr__process_rank(), -1);
  unsetenv("OMPI_COMM_WORLD_RANK");
  gr__set_process_rank(-1);
}

/* The programs' form (gpurun, gpurun-report): the sentence as given, no rank or call prefix even
 * when the rank is known, control characters as '?' so that it stays one printable line. */
static void fail_msg_records_the_sentence_as_given(void **state) {
  (void)state;
  gr__set_process_rank(3);
  gr_clear_error();
  assert_int_equal(gr__fail_msg(GR_ERR_INVALID, "--policy: unknown policy '%s'", "x\x1b[2Jy\n"),
                   GR_ERR_INVALID);
  assert_string_equal(gr_last_error(), "--policy: unknown policy 'x?[2Jy?'");
  assert_int_equal(gr__fail(GR_ERR_MPI, "gr_init", "boom"), GR_ERR_MPI);
  assert_string_equal(gr_last_error(),
                      "rank 3: gr_init: boom"); /* the library's form is unchanged */
  gr__set_process_rank(-1);
}

static void version_is_consistent(void **state) {
  (void)state;
  char expect[32];
  snprintf(expect, sizeof expect, "%d.%d.%d", GR_VERSION_MAJOR, GR_VERSION_MINOR, GR_VERSION_PATCH);
  assert_string_equal(gr_version(), expect);
  assert_int_equal(gr_api_version(),
                   (GR_VERSION_MAJOR << 16) | (GR_VERSION_MINOR << 8) | GR_VERSION_PATCH);
  assert_non_null(strstr(gr_build_info(), expect));
  assert_non_null(strstr(gr_build_info(), "cuda="));
  /* version.c names the MPI standard from the configure step, without mpi.h (it is in the MPI-free
   * base): it must be the one this mpi.h declares */
  snprintf(expect, sizeof expect, " mpi=%d.%d)", MPI_VERSION, MPI_SUBVERSION);
  assert_non_null(strstr(gr_build_info(), expect));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(codes_have_names_and_text),
      cmocka_unit_test(last_error_names_call_and_rank),
      cmocka_unit_test(long_messages_are_truncated_not_overflowed),
      cmocka_unit_test(last_error_is_thread_local),
      cmocka_unit_test(rank_comes_from_launcher_env),
      cmocka_unit_test(fail_msg_records_the_sentence_as_given),
      cmocka_unit_test(version_is_consistent),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
