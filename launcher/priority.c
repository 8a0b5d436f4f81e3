/* gpurun --priority: the CPU side of a rank's priority. low runs the program at nice 10 or
 * nicer, high at nice -5 or less nice: a bound, not an offset, so that a gpurun started under
 * another (which exports GPURUN_PRIORITY) lands on the same niceness instead of adding it twice,
 * and low never raises the priority of a job its scheduler already niced further. The GPU side
 * (gr_stream's CUDA stream priority) is the runtime's, from GPURUN_PRIORITY. */
#include "gr_launcher.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

gr_status gr__priority_apply(int level) {
  if (level != GR__PRIO_LOW && level != GR__PRIO_HIGH) return GR_OK; /* normal: leave it as it is */
  errno = 0;
  int now = getpriority(PRIO_PROCESS, 0); /* -1 is a valid niceness: errno tells */
  if (now == -1 && errno) {
    return gr__fail_msg(GR_ERR_SYSTEM, "--priority %s: getpriority: %s", gr__priority_name(level),
                        strerror(errno));
  }
  int want = level == GR__PRIO_LOW ? (now > GR__PRIO_LOW_NICE ? now : GR__PRIO_LOW_NICE)
                                   : (now < GR__PRIO_HIGH_NICE ? now : GR__PRIO_HIGH_NICE);
  if (want == now) return GR_OK;
  if (setpriority(PRIO_PROCESS, 0, want) != 0) {
    int e = errno;
    return gr__fail_msg(GR_ERR_SYSTEM,
                        "--priority %s: setpriority(nice %d) refused: %s (raising priority needs "
                        "CAP_SYS_NICE or a high enough RLIMIT_NICE); running at nice %d",
                        gr__priority_name(level), want, strerror(e), now);
  }
  return GR_OK;
}
