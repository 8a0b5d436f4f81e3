/* Internal: the one decimal integer parser for text gpurun did not write itself (environment
 * variables, options, config files, file names, CSV fields). Base layer: no MPI. */
#ifndef GR_PARSE_H
#define GR_PARSE_H

#include <gpurun/status.h>

/* Parses all of s as a base-10 integer in [lo, hi] into *out: an optional '+' or '-', then one or
 * more digits, nothing else. Refused with GR_ERR_INVALID (and *out untouched): NULL, "", leading
 * or trailing whitespace, trailing junk ("3x", "3.0"), a sign without digits, two signs, a value
 * outside [lo, hi] or outside long long. Records no sentence: the caller names the variable. */
gr_status gr__parse_ll(const char *s, long long lo, long long hi, long long *out);
/* The same into an int. */
gr_status gr__parse_int(const char *s, int lo, int hi, int *out);

#endif
