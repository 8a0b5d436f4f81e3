/* The reader of the watchdog's answers (gr_hang.h). The text may be another user's file or a
 * leftover: bounded, every field checked, strings kept to the live files' alphabet. */
#include "gr_hang.h"

#include "gr_live_file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int gr__hang_parse(const char *text, size_t len, const char *comm, gr__hang_answer *a) {
  memset(a, 0, sizeof *a);
  if (len > GR__HANG_MAX) return -1;
  char buf[GR__HANG_MAX + 1];
  memcpy(buf, text, len);
  buf[len] = '\0';
  char *save = NULL;
  int lines = 0;
  for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    char f[5][64];
    int k = sscanf(line, "%63s %63s %63s %63s %63s", f[0], f[1], f[2], f[3], f[4]);
    if (lines++ == 0) {
      if (strcmp(line, GR__HANG_MAGIC)) return -1;
    } else if (k == 5 && !strcmp(f[0], "inside")) {
      gr__live_clean(a->in_op, sizeof a->in_op, f[1], strlen(f[1]));
      gr__live_clean(a->in_comm, sizeof a->in_comm, f[2], strlen(f[2]));
      a->in_seq = strtoull(f[3], NULL, 10);
      a->in_for = strtod(f[4], NULL);
      if (!(a->in_for >= 0 && a->in_for < 1e9)) a->in_for = 0;
    } else if (k >= 4 && !strcmp(f[0], "comm") && !strcmp(f[1], comm) && k == 5) {
      /* comm ID NAME SEQ OP STATE: six fields; the fifth read is OP */
      char s6[16] = "";
      sscanf(line, "%*s %*s %*s %*s %*s %15s", s6);
      a->seq = strtoull(f[3], NULL, 10);
      gr__live_clean(a->op, sizeof a->op, f[4], strlen(f[4]));
      gr__live_clean(a->state, sizeof a->state, s6, strlen(s6));
      a->on_comm = 1;
    }
  }
  if (!lines) return -1; /* empty, or newlines only: no magic, not an answer */
  a->have = 1;
  return 0;
}
