/* Internal: recording failures. Every public entry point that fails calls gr__fail() once, at the
 * boundary, so gr_last_error() names the public call rather than a helper deep inside. */
#ifndef GR_ERROR_H
#define GR_ERROR_H

#include <gpurun/status.h>
#include <stddef.h>

/* Records "rank R: CALL: <formatted message>" as this thread's last error and returns st.
 * The rank part is left out when the rank is not known yet. */
gr_status gr__fail(gr_status st, const char *call, const char *fmt, ...) GR_PRINTF(3, 4);

/* Records the formatted sentence as it is, without the rank and call prefix, and returns st: the
 * programs' convention (gpurun, gpurun-report), whose main() prints "<program>: <sentence>" once.
 * Control characters in the result become '?', so a sentence quoting user input stays one
 * printable line. Same thread-local buffer as gr__fail: read it with gr_last_error(). */
gr_status gr__fail_msg(gr_status st, const char *fmt, ...) GR_PRINTF(2, 3);

/* The MPI world rank of this process: set by the runtime once MPI is up, otherwise read from the
 * launcher's environment (Open MPI, PMIx, PMI, Slurm); -1 when unknown. */
int gr__process_rank(void);
void gr__set_process_rank(int rank);

/* Propagate a failure that already recorded its sentence. */
#define GR_CHECK(call)                 \
  do {                                 \
    gr_status gr_rc_ = (call);         \
    if (gr_rc_ != GR_OK) return gr_rc_; \
  } while (0)

/* Propagate to a cleanup label: GR_CHECK_GOTO(step(), rc, fail); */
#define GR_CHECK_GOTO(call, rc, label) \
  do {                                 \
    (rc) = (call);                     \
    if ((rc) != GR_OK) goto label;     \
  } while (0)

#endif
