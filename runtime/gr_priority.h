/* Internal: the rank's priority level (gpurun --priority, exported as GPURUN_PRIORITY), read once
 * by gr_init; gr_stream_create (stream.c) and the counters file use it. */
#ifndef GR_PRIORITY_H
#define GR_PRIORITY_H

/* Reads GPURUN_PRIORITY: "low", "normal" or "high"; unset, empty or anything else is "normal"
 * (with a warning for anything else). */
void gr__priority_read_env(void);
/* "low", "normal" or "high". */
const char *gr__priority_level_name(void);

#endif
