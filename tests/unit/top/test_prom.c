/* The Prometheus text of one sample (monitor/prom.c): label values escaped as the exposition
 * format wants (backslash, double quote, newline), control bytes dropped, a missing reading gives
 * no series rather than a made-up value, and the file is replaced whole (never through a link). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gr_live_file.h"
#include "gr_prom.h"

static void test_format(void **state) {
  (void)state;
  gr__sample s;
  memset(&s, 0, sizeof s);
  s.unix_s = 1000.5;
  s.rank = 3;
  s.local_rank = 1;
  s.cpu_util = 50;
  s.rss_kib = 2048;
  s.ngpus = 1;
  snprintf(s.gpu[0].pci, sizeof s.gpu[0].pci, "0000:17:00.0");
  s.gpu[0].index = 2;
  s.gpu[0].has_util = 1;
  s.gpu[0].util = 77;
  s.gpu[0].has_temp = 0; /* NVML could not say */
  char buf[16384];
  size_t n = gr__prom_format(&s, "a\"b\\c\nd\033e", "h\"1", NULL, buf, sizeof buf);
  assert_true(n > 0);
  buf[n] = '\0';
  const char *want = "gpurun_gpu_utilization_ratio{job=\"a\\\"b\\\\c\\nde\",host=\"h\\\"1\","
                     "rank=\"3\",local_rank=\"1\",gpu=\"2\",pci=\"0000:17:00.0\"} 0.77\n";
  assert_non_null(strstr(buf, want));
  assert_null(strstr(buf, "temperature_celsius{"));      /* no reading, no series */
  assert_null(strstr(buf, "collective_seconds_total{")); /* no live file */
  assert_non_null(strstr(buf, "gpurun_rank_cpu_utilization_ratio{job=\"a\\\"b\\\\c\\nde\",host="
                              "\"h\\\"1\",rank=\"3\",local_rank=\"1\"} 0.5\n"));
  assert_non_null(strstr(buf, "gpurun_rank_resident_memory_bytes{job=\"a\\\"b\\\\c\\nde\",host="
                              "\"h\\\"1\",rank=\"3\",local_rank=\"1\"} 2097152\n"));
  assert_null(strchr(buf, '\033'));
  assert_int_equal(gr__prom_format(&s, "j", "h", NULL, buf, 100), 0); /* too small: nothing */
}

/* The wait gauge: the longest of the running collective and the communicator creation. */
static void test_wait(void **state) {
  (void)state;
  gr__sample s;
  memset(&s, 0, sizeof s);
  s.unix_s = 1000.5;
  s.cpu_util = s.rss_kib = -1;
  const char *text = "gpurun-live 1\nrank 0\n"
                     "comm world 0 2 mpi 4 allreduce 1 running 998.5 0 4 0.1\n"
                     "creating gr_comm_split split world 0 2 990.5\n";
  gr__live lv;
  assert_int_equal(gr__live_parse(text, strlen(text), &lv), 0);
  char buf[16384];
  size_t n = gr__prom_format(&s, "j", "h", &lv, buf, sizeof buf);
  assert_true(n > 0);
  buf[n] = '\0';
  assert_non_null(strstr(buf, "gpurun_rank_collective_wait_seconds{job=\"j\",host=\"h\",rank=\"0\","
                              "local_rank=\"0\"} 10\n"));
  lv.ncreating = 0; /* without the creation: the collective's 2 s */
  n = gr__prom_format(&s, "j", "h", &lv, buf, sizeof buf);
  buf[n] = '\0';
  assert_non_null(strstr(buf, "local_rank=\"0\"} 2\n"));
}

static void test_write(void **state) {
  (void)state;
  char dir[] = "/tmp/gr_test_prom.XXXXXX";
  assert_non_null(mkdtemp(dir));
  char link[256], target[256];
  snprintf(link, sizeof link, "%s/x.prom", dir);
  snprintf(target, sizeof target, "%s/victim", dir);
  FILE *f = fopen(target, "w");
  assert_non_null(f);
  fputs("precious\n", f);
  fclose(f);
  assert_int_equal(symlink(target, link), 0);
  assert_int_equal(gr__prom_write(dir, "x.prom", "m 1\n", 4), 0);
  struct stat st;
  assert_int_equal(lstat(link, &st), 0);
  assert_true(S_ISREG(st.st_mode)); /* the link was replaced, not followed */
  char got[64] = "";
  f = fopen(target, "r");
  assert_non_null(fgets(got, sizeof got, f));
  fclose(f);
  assert_string_equal(got, "precious\n");
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_format), cmocka_unit_test(test_wait),
                                     cmocka_unit_test(test_write)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
