/* gpurun --priority: the CPU side of a rank's priority. Niceness is changed relative to what
 * gpurun was started with (like nice(1)), so a job already niced by its scheduler keeps its
 * offset; the GPU side (gr_stream's CUDA stream priority) is the runtime's, from GPURUN_PRIORITY. */
#include "gr_launcher.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

int gr__priority_apply(int level, char *why, size_t whylen) {
  if (level != GR__PRIO_LOW && level != GR__PRIO_HIGH) return 0; /* normal: leave it as it is */
  errno = 0;
  int now = getpriority(PRIO_PROCESS, 0); /* -1 is a valid niceness: errno tells */
  if (now == -1 && errno) {
    snprintf(why, whylen, "--priority %s: getpriority: %s", gr__priority_name(level),
             strerror(errno));
    return -1;
  }
  int want = now + (level == GR__PRIO_LOW ? GR__PRIO_LOW_NICE : GR__PRIO_HIGH_NICE);
  if (want > 19) want = 19;
  if (want < -20) want = -20;
  if (want == now) return 0;
  if (setpriority(PRIO_PROCESS, 0, want) != 0) {
    int e = errno;
    snprintf(why, whylen,
             "--priority %s: setpriority(nice %d) refused: %s (raising priority needs "
             "CAP_SYS_NICE or a high enough RLIMIT_NICE); running at nice %d",
             gr__priority_name(level), want, strerror(e), now);
    return -1;
  }
  return 0;
}
