/* Internal: boolean environment variables (GPURUN_CHECK, GPURUN_FLIGHT, ...). One spelling rule for
 * all of them, so that GPURUN_CHECK=no means off everywhere. */
#ifndef GR_ENV_BOOL_H
#define GR_ENV_BOOL_H

/* 1 for 1/yes/true/on, 0 for 0/no/false/off (any case, surrounding blanks ignored); def when
 * unset or empty. Anything else: def, and a warning naming the variable and its value (once per
 * variable per process). */
int gr__env_bool(const char *name, int def);
/* The parse alone: 1, 0, or -1 for a value that is none of the spellings above. */
int gr__parse_bool(const char *s);

#endif
