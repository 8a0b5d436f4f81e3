/* Internal: the arrivals of stragglers.c read from texts instead of a job directory, for its fuzz
 * target (tests/fuzz/tools/report): the same reader and analysis as gr__rpt_arrivals_load. */
#ifndef GR_STRAGGLERS_H
#define GR_STRAGGLERS_H

#include "gr_report.h"

/* Reads each of the n NUL-terminated texts as one rank's mpistats.<rank>.json (a text that is not
 * valid JSON, or has no rank or communicators, is skipped with a warning on warn naming it
 * "text I"), joins and analyses them into *out (gr__rpt_arrivals_free). GR_OK, or GR_ERR_NOMEM. */
gr_status gr__rpt_arrivals_parse(const char *const *texts, int n, FILE *warn,
                                 gr__rpt_arrivals **out);

#endif
