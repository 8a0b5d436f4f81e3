/* gr_safefile.h and its users (the counters, the flight recorder): symlinks planted at a file or
 * job directory name, foreign and group/world-writable directories, unsafe job ids, whole files
 * under a file-size limit, whole rows on a failed append, special files refused by readers. The
 * foreign-owner cases chown to nobody (65534) and run only as root. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gr_counters.h"
#include "gr_error.h"
#include "gr_escape.h"
#include "gr_flight.h"
#include "gr_safefile.h"

static char root[64];

static int setup(void **state) {
  (void)state;
  snprintf(root, sizeof root, "/tmp/gr_safefile_XXXXXX");
  if (!mkdtemp(root)) return -1;
  umask(022);
  unsetenv("GPURUN_MONITOR_GROUP");
  return 0;
}

static int teardown(void **state) {
  (void)state;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  return system(cmd) == 0 ? 0 : -1;
}

static void put(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static char *slurp(const char *path) {
  static char buf[65536];
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = '\0';
  fclose(f);
  return buf;
}

static void test_safe_names(void **state) {
  (void)state;
  const char *bad[] = {"", ".", "..", ".x", "a/b", "a b", "a\nb", "x\x1b", "\xc3\xa9"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    assert_int_equal(gr__safe_name(bad[i]), 0);
  const char *good[] = {"12345", "12345_7", "prterun-n0-1234@1", "123.server.org", "a+b"};
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
    assert_int_equal(gr__safe_name(good[i]), 1);
  char big[GR_SAFE_NAME_MAX + 2];
  memset(big, 'a', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  assert_int_equal(gr__safe_name(big), 0);
  big[GR_SAFE_NAME_MAX] = '\0';
  assert_int_equal(gr__safe_name(big), 1);
  char fix[] = "../a b/\x01";
  gr__safe_name_fix(fix);
  assert_string_equal(fix, "_._a_b__");
  int fd;
  assert_int_equal(gr__jobdir_open(root, "..", &fd), GR_ERR_INVALID);
  assert_int_equal(fd, -1);
  assert_non_null(strstr(gr_last_error(), "not a safe directory name"));
}

static void test_jobdir_modes_and_refusals(void **state) {
  (void)state;
  struct stat st;
  char path[256];
  int fd;
  assert_int_equal(gr__jobdir_open(root, "j1", &fd), GR_OK);
  assert_true(fd >= 0);
  close(fd);
  snprintf(path, sizeof path, "%s/j1", root);
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(st.st_mode & 07777, 0700);
  setenv("GPURUN_MONITOR_GROUP", "1", 1);
  assert_int_equal(gr__jobdir_open(root, "j2", &fd), GR_OK);
  unsetenv("GPURUN_MONITOR_GROUP");
  assert_true(fd >= 0);
  close(fd);
  snprintf(path, sizeof path, "%s/j2", root);
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(st.st_mode & 07777, 0750);
  /* Missing parts of the root are created too. */
  snprintf(path, sizeof path, "%s/deep/er", root);
  assert_int_equal(gr__jobdir_open(path, "j", &fd), GR_OK);
  assert_true(fd >= 0);
  close(fd);

  /* The job directory is a symlink to a directory of someone else's choosing. */
  char other[256];
  snprintf(other, sizeof other, "%s/elsewhere", root);
  assert_int_equal(mkdir(other, 0700), 0);
  snprintf(path, sizeof path, "%s/j3", root);
  assert_int_equal(symlink(other, path), 0);
  assert_int_equal(gr__jobdir_open(root, "j3", &fd), GR_ERR_STATE);
  assert_int_equal(fd, -1);
  assert_non_null(strstr(gr_last_error(), "symlink"));

  /* Group- or world-writable. */
  snprintf(path, sizeof path, "%s/j4", root);
  assert_int_equal(mkdir(path, 0700), 0);
  assert_int_equal(chmod(path, 0770), 0);
  assert_int_equal(gr__jobdir_open(root, "j4", &fd), GR_ERR_STATE);
  assert_int_equal(fd, -1);
  assert_non_null(strstr(gr_last_error(), "writable by its group"));
  assert_int_equal(chmod(path, 0757), 0);
  assert_int_equal(gr__jobdir_open(root, "j4", &fd), GR_ERR_STATE);
  assert_int_equal(fd, -1);
  assert_non_null(strstr(gr_last_error(), "writable by everyone"));

  /* Owned by another user. */
  if (geteuid() == 0) {
    snprintf(path, sizeof path, "%s/j5", root);
    assert_int_equal(mkdir(path, 0700), 0);
    assert_int_equal(chown(path, 65534, 65534), 0);
    assert_int_equal(gr__jobdir_open(root, "j5", &fd), GR_ERR_STATE);
    assert_int_equal(fd, -1);
    assert_non_null(strstr(gr_last_error(), "owned by uid 65534"));
  }
}

static void test_replace_whole_or_none(void **state) {
  (void)state;
  int dfd;
  assert_int_equal(gr__jobdir_open(root, "r", &dfd), GR_OK);
  assert_true(dfd >= 0);
  char path[256], victim[256];
  snprintf(victim, sizeof victim, "%s/victim", root);
  put(victim, "precious\n");
  snprintf(path, sizeof path, "%s/r/planted", root);
  assert_int_equal(symlink(victim, path), 0);
  assert_int_equal(gr__file_replace(dfd, "planted", "evil\n", 5), GR_ERR_STATE);
  assert_string_equal(slurp(victim), "precious\n");
  assert_int_equal(gr__file_replace(dfd, "../escape", "x", 1), GR_ERR_INVALID);

  assert_int_equal(gr__file_replace(dfd, "good", "old\n", 4), GR_OK);
  /* Under a file-size limit the new content does not fit: the old file stays whole. */
  pid_t p = fork();
  if (p == 0) {
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl = {4096, 4096};
    setrlimit(RLIMIT_FSIZE, &rl);
    static char big[100000];
    memset(big, 'x', sizeof big);
    _exit(gr__file_replace(dfd, "good", big, sizeof big) == GR_ERR_SYSTEM &&
                  strstr(gr_last_error(), strerror(EFBIG))
              ? 0
              : 1);
  }
  int st;
  assert_int_equal(waitpid(p, &st, 0), p);
  assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  snprintf(path, sizeof path, "%s/r/good", root);
  assert_string_equal(slurp(path), "old\n");
  /* And no temporary file is left. */
  char cmd[300];
  snprintf(cmd, sizeof cmd, "test -z \"$(ls -A '%s/r' | grep tmp)\"", root);
  assert_int_equal(system(cmd), 0);
  close(dfd);
}

static void test_append_whole_rows(void **state) {
  (void)state;
  int dfd;
  assert_int_equal(gr__jobdir_open(root, "a", &dfd), GR_OK);
  assert_true(dfd >= 0);
  char path[256], victim[256];
  snprintf(victim, sizeof victim, "%s/victim2", root);
  put(victim, "precious\n");
  snprintf(path, sizeof path, "%s/a/n.0.csv", root);
  assert_int_equal(symlink(victim, path), 0);
  int afd;
  assert_int_equal(gr__file_append_open(dfd, "n.0.csv", "h\n", &afd), GR_ERR_STATE);
  assert_int_equal(afd, -1);
  assert_non_null(strstr(gr_last_error(), "symlink"));
  assert_string_equal(slurp(victim), "precious\n");

  pid_t p = fork();
  if (p == 0) {
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl = {1000, 1000};
    setrlimit(RLIMIT_FSIZE, &rl);
    int fd;
    if (gr__file_append_open(dfd, "n.1.csv", "a,b,c\n", &fd) != GR_OK) _exit(2);
    const char row[] = "1.000000,2.000000,3.000000\n"; /* 27 bytes: 1000 is not a multiple */
    for (int i = 0; i < 100; i++)
      if (gr__file_append_row(fd, "n.1.csv", row, sizeof row - 1) != GR_OK)
        _exit(strstr(gr_last_error(), strerror(EFBIG)) ? 0 : 3);
    _exit(4);
  }
  int st;
  assert_int_equal(waitpid(p, &st, 0), p);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 0);
  snprintf(path, sizeof path, "%s/a/n.1.csv", root);
  struct stat sb;
  assert_int_equal(stat(path, &sb), 0);
  assert_int_equal((sb.st_size - 6) % 27, 0); /* header + whole rows, no half row */
  assert_true(sb.st_size > 900);
  close(dfd);
}

static void test_readers_refuse_special(void **state) {
  (void)state;
  char path[256];
  size_t len;
  char *b;
  snprintf(path, sizeof path, "%s/fifo", root);
  assert_int_equal(mkfifo(path, 0600), 0);
  assert_int_not_equal(gr__file_read(AT_FDCWD, path, 100, &b, &len), GR_OK);
  assert_null(b);
  assert_int_not_equal(gr__file_read(AT_FDCWD, "/dev/zero", 100, &b, &len), GR_OK);
  assert_null(b);
  snprintf(path, sizeof path, "%s/link", root);
  assert_int_equal(symlink("/etc/hostname", path), 0);
  assert_int_not_equal(gr__file_read(AT_FDCWD, path, 100, &b, &len), GR_OK);
  assert_null(b);
  snprintf(path, sizeof path, "%s/big", root);
  put(path, "0123456789");
  assert_int_not_equal(gr__file_read(AT_FDCWD, path, 9, &b, &len), GR_OK);
  assert_null(b);
  assert_non_null(strstr(gr_last_error(), "is larger than 9 bytes"));
  assert_int_equal(gr__file_read(AT_FDCWD, path, 10, &b, &len), GR_OK);
  assert_non_null(b);
  assert_int_equal(len, 10);
  free(b);
}

/* The runtime's counters: refused through a planted symlink and into a foreign directory; their
 * strings escaped. */
static void test_counters_writer(void **state) {
  (void)state;
  gr_rank_info_t info;
  memset(&info, 0, sizeof info);
  info.rank = 1;
  info.size = 2;
  info.local_rank = 0;
  snprintf(info.node, sizeof info.node, "n\"0\x1b");
  char path[256], victim[256];
  snprintf(victim, sizeof victim, "%s/victim3", root);
  put(victim, "precious\n");
  int dfd;
  assert_int_equal(gr__jobdir_open(root, "c", &dfd), GR_OK);
  assert_true(dfd >= 0);
  close(dfd);
  snprintf(path, sizeof path, "%s/c/n_0_.0.counters.json", root);
  assert_int_equal(symlink(victim, path), 0);
  assert_int_equal(gr__counters_write(root, &info, "c", NULL, 1.0, NULL, NULL, 0), GR_ERR_STATE);
  assert_string_equal(slurp(victim), "precious\n");
  unlink(path);
  assert_int_equal(gr__counters_write(root, &info, "c", NULL, 1.0, NULL, NULL, 0), GR_OK);
  const char *text = slurp(path);
  assert_non_null(strstr(text, "\"node\": \"n\\\"0\\u001b\""));
  assert_int_equal(gr__counters_write(root, &info, "..", NULL, 1.0, NULL, NULL, 0), GR_ERR_INVALID);
}

/* The flight recorder: no dump through a planted symlink. */
static void test_flight_writer(void **state) {
  (void)state;
  char mon[128], path[256], victim[256];
  snprintf(mon, sizeof mon, "%s/fl", root);
  setenv("GPURUN_MONITOR_DIR", mon, 1);
  snprintf(victim, sizeof victim, "%s/victim4", root);
  put(victim, "precious\n");
  int dfd;
  assert_int_equal(gr__jobdir_open(mon, "nojob", &dfd), GR_OK);
  assert_true(dfd >= 0);
  close(dfd);
  int rank = gr__process_rank();
  snprintf(path, sizeof path, "%s/nojob/flight.%d.json", mon, rank);
  assert_int_equal(symlink(victim, path), 0);
  char out[512];
  assert_int_not_equal(gr__flight_dump("test", out, sizeof out), GR_OK);
  assert_non_null(strstr(gr_last_error(), "flight recorder: not written: "));
  assert_string_equal(slurp(victim), "precious\n");
  unlink(path);
  assert_int_equal(gr__flight_dump("test", out, sizeof out), GR_OK);
  assert_string_equal(out, path);
  assert_non_null(strstr(slurp(path), "\"reason\": \"test\""));
  unsetenv("GPURUN_MONITOR_DIR");
}

static void test_escapers(void **state) {
  (void)state;
  char *buf = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&buf, &len);
  gr__esc_json(m, "a\"\\\n\x01\x7f\xc2\x85\xff<ok> \xc3\xa9");
  fputc('|', m);
  gr__esc_xml(m, "<script>&'\"\x1b\xff \xc3\xa9");
  fputc('|', m);
  gr__esc_term(m, "\x1b[31mred\x07\xc2\x9b\xfe \xc3\xa9");
  fclose(m);
  assert_string_equal(buf, "\"a\\\"\\\\\\u000a\\u0001\\u007f\\u0085\\ufffd<ok> \xc3\xa9\"|"
                           "&lt;script&gt;&amp;&apos;&quot;\xef\xbf\xbd\xef\xbf\xbd \xc3\xa9|"
                           "\\x1b[31mred\\x07\\x9b\\xfe \xc3\xa9");
  free(buf);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_safe_names),
      cmocka_unit_test(test_jobdir_modes_and_refusals),
      cmocka_unit_test(test_replace_whole_or_none),
      cmocka_unit_test(test_append_whole_rows),
      cmocka_unit_test(test_readers_refuse_special),
      cmocka_unit_test(test_counters_writer),
      cmocka_unit_test(test_flight_writer),
      cmocka_unit_test(test_escapers),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
