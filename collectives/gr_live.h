/* Internal: each rank's live state, published for gpurun-top and the supervisor's Prometheus
 * output (file format: base/gr_live_file.h). On when GPURUN_MONITOR_DIR is set (gpurun
 * --monitor sets it) unless GPURUN_LIVE=0; written at most every GPURUN_LIVE_INTERVAL seconds
 * (default 0.25) by a publisher thread. The state itself is the flight recorder's (each
 * communicator's latest call), so a collective call costs nothing more than before. */
#ifndef GR_LIVE_H
#define GR_LIVE_H

/* Once, from gr__flight_setup with the agreed job id: decide on/off, make the job directory,
 * publish the first state, start the publisher thread, and at exit stop it and publish the last
 * state ("exited"). */
void gr__live_setup(const char *job);
/* Publish now regardless of the interval (state "running" or "exited"). 0 when written. */
int gr__live_publish(const char *state);

#endif
