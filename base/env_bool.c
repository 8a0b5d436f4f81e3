/* Boolean environment variables: 0/1/yes/no/true/false/on/off (see gr_env_bool.h). */
#include "gr_env_bool.h"

#include "gr_log.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int gr__parse_bool(const char *s) {
  static const char *const on[] = {"1", "yes", "true", "on"}, *const off[] = {"0", "no", "false",
                                                                              "off"};
  if (!s) return -1;
  while (isspace((unsigned char)*s))
    s++;
  size_t n = strlen(s);
  while (n > 0 && isspace((unsigned char)s[n - 1]))
    n--;
  for (int i = 0; i < 4; i++) {
    if (strlen(on[i]) == n && strncasecmp(s, on[i], n) == 0) return 1;
    if (strlen(off[i]) == n && strncasecmp(s, off[i], n) == 0) return 0;
  }
  return -1;
}

int gr__env_bool(const char *name, int def) {
  const char *v = getenv(name);
  if (!v || !*v) return def;
  int b = gr__parse_bool(v);
  if (b >= 0) return b;
  /* The value may be anything: show at most 32 bytes of it, printable ones only. */
  char shown[33];
  size_t i = 0;
  for (; v[i] && i < sizeof shown - 1; i++)
    shown[i] = isprint((unsigned char)v[i]) ? v[i] : '?';
  shown[i] = '\0';
  /* Warn once per variable: the variables are read at every gr_comm_create. */
  static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  static char warned[16][48];
  int seen = 0;
  pthread_mutex_lock(&lock);
  for (int k = 0; k < 16 && !seen; k++) {
    if (!warned[k][0]) {
      snprintf(warned[k], sizeof warned[k], "%s", name);
      break;
    }
    seen = strncmp(warned[k], name, sizeof warned[k] - 1) == 0;
  }
  pthread_mutex_unlock(&lock);
  if (seen) return def;
  GR_WARN("%s=%s%s is not a boolean (0/1/yes/no/true/false/on/off); using the default, %s", name,
          shown, v[i] ? "..." : "", def ? "on" : "off");
  return def;
}
