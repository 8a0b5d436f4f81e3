/* Internal: the rank's priority level (gpurun --priority, exported as GPURUN_PRIORITY), read once
 * by gr_init and handed to stream.c; gr_stream_create and the counters file use it. */
#ifndef GR_PRIORITY_H
#define GR_PRIORITY_H

/* Sets the level: GR_PRIORITY_NORMAL, _LOW or _HIGH (gr_param.h; anything else is normal). gr_init
 * calls it under its lock, before any stream call, with gr__param_word(GR_PARAM_PRIORITY). */
void gr__priority_set(int level);
/* "low", "normal" or "high". */
const char *gr__priority_level_name(void);

#endif
