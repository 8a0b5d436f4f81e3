/* Contract: the end record, one file per rank,
 *   <GPURUN_MONITOR_DIR>/<job>/<node>.<local_rank>.end.json
 * written whole (gr__file_replace) by the supervisor (monitor/supervise.c) when the program it
 * watches has ended, read by gpurun-report (tools/report/job_load.c). Both include this header;
 * docs/formats.md, "End record", describes each key. Version 1, in the file ("version"): a reader
 * takes the keys it knows and ignores the others, so keys may be added without a new version.
 * Base layer: no MPI, no CUDA.
 *
 * One JSON object on one line:
 *   {"version": 1, "node": "n0", "local_rank": 1, "rank": 3, "pid": 4242,
 *    "how": "exit" | "signal" | "unseen", "exit_code": 3 | null, "signal": 9 | null,
 *    "signal_name": "KILL" | null, "core_dumped": false, "time_limit": "none" | "term" | "kill",
 *    "start": 1722000000.123, "end": 1722000012.456, "cpu_time_s": 11.9 | null}
 * "how" is "unseen" when the program's launcher reaped it before the supervisor could read its
 * status (a race the supervisor cannot win every time: it is not the program's parent). */
#ifndef GR_END_RECORD_H
#define GR_END_RECORD_H

#define GR_END_VERSION 1
#define GR_END_SUFFIX ".end.json" /* after "<node>.<local_rank>" */
#define GR_END_MAX_FILE 4096      /* a reader's bound on the file's size */

#define GR_END_KEY_VERSION "version"
#define GR_END_KEY_NODE "node"
#define GR_END_KEY_LOCAL_RANK "local_rank"
#define GR_END_KEY_RANK "rank"               /* world rank, -1 unknown */
#define GR_END_KEY_PID "pid"                 /* the program's pid (gpurun's own: it execs) */
#define GR_END_KEY_HOW "how"                 /* one of GR_END_HOW_* */
#define GR_END_KEY_EXIT_CODE "exit_code"     /* with "exit": the status it exited with */
#define GR_END_KEY_SIGNAL "signal"           /* with "signal": the signal number */
#define GR_END_KEY_SIGNAL_NAME "signal_name" /* its abbreviation without "SIG" (the writer's) */
#define GR_END_KEY_CORE "core_dumped"        /* with "signal": whether a core was dumped */
#define GR_END_KEY_TIME_LIMIT "time_limit"   /* what the time limit had sent: GR_END_TL_* */
#define GR_END_KEY_START "start"             /* Unix s: when the program started (its exec) */
#define GR_END_KEY_END "end"                 /* Unix s: when the supervisor saw it end */
#define GR_END_KEY_CPU_TIME_S "cpu_time_s"   /* the program's user + system CPU s, last seen */

#define GR_END_HOW_EXIT "exit"
#define GR_END_HOW_SIGNAL "signal"
#define GR_END_HOW_UNSEEN "unseen" /* ended, status not seen */

#define GR_END_TL_NONE "none" /* no time limit, or not reached */
#define GR_END_TL_TERM "term" /* the limit's SIGTERM had been sent */
#define GR_END_TL_KILL "kill" /* the SIGKILL after the grace had been sent too */

#endif
