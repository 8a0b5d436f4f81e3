/* Contract: the monitor CSV, one file per rank,
 *   <GPURUN_MONITOR_DIR>/<job>/<node>.<local_rank>.csv
 * written by the supervising gpurun (monitor/supervise.c, rows from monitor/telemetry.c) and read
 * by gpurun-report (tools/report/job_load.c). Both include this header; docs/formats.md, "Monitor
 * CSV", describes each column. Version 1: the header line below is the version (a reader finds
 * columns by name and ignores columns it does not know, so a writer may add columns at the end
 * without a new version; renaming or removing one is a new version). Base layer: no MPI, no CUDA.
 *
 * Two headers of version 1: GR_MONITOR_CSV_HEADER, the 20 sample columns monitor/telemetry.c
 * formats (files of gpurun before the program's columns, fixtures, the telemetry's own tests), and
 * GR_MONITOR_CSV_FILE_HEADER, those, the program's own 2 columns (cpu_time_s, state) and the
 * cores' steal share (cpu_steal) that the supervisor appends to each row: the first line of every
 * file it writes now. Files written before cpu_steal existed end at state (22 columns); a reader
 * takes the missing column as unknown.
 */
#ifndef GR_MONITOR_CSV_H
#define GR_MONITOR_CSV_H

#define GR_MONITOR_CSV_VERSION 1
#define GR_MONITOR_CSV_SUFFIX ".csv" /* after "<node>.<local_rank>" */

#define GR_CSV_TIME "time"
#define GR_CSV_ELAPSED_S "elapsed_s"
#define GR_CSV_RANK "rank"
#define GR_CSV_LOCAL_RANK "local_rank"
#define GR_CSV_GPU "gpu"
#define GR_CSV_GPU_UTIL "gpu_util"
#define GR_CSV_MEM_UTIL "mem_util"
#define GR_CSV_MEM_USED_MIB "mem_used_mib"
#define GR_CSV_MEM_TOTAL_MIB "mem_total_mib"
#define GR_CSV_TEMP_C "temp_c"
#define GR_CSV_POWER_W "power_w"
#define GR_CSV_SM_CLOCK_MHZ "sm_clock_mhz"
#define GR_CSV_THROTTLE "throttle"
#define GR_CSV_ECC_UNCORRECTED "ecc_uncorrected"
#define GR_CSV_CPU_UTIL "cpu_util"
#define GR_CSV_RSS_MIB "rss_mib"
#define GR_CSV_RANK_SM_UTIL "rank_sm_util"
#define GR_CSV_OTHERS_SM_UTIL "others_sm_util"
#define GR_CSV_RANK_MEM_MIB "rank_mem_mib"
#define GR_CSV_OTHERS_MEM_MIB "others_mem_mib"
/* The program's own, from /proc/<pid>/stat (the supervisor, not the telemetry): */
#define GR_CSV_CPU_TIME_S "cpu_time_s" /* user + system CPU seconds of the program, cumulative */
#define GR_CSV_STATE "state"           /* its state letter (R, S, D, T, Z, ...) */
/* The share (%) of the rank's cores' time since the previous sample that the hypervisor gave to
 * other guests (/proc/stat's steal; the node's when /proc/stat has no line for those cores). After
 * the program's columns: the last one added. */
#define GR_CSV_CPU_STEAL "cpu_steal"

/* The sample columns, in order (20 columns): telemetry's rows. */
#define GR_MONITOR_CSV_HEADER                                                                      \
  GR_CSV_TIME "," GR_CSV_ELAPSED_S "," GR_CSV_RANK "," GR_CSV_LOCAL_RANK "," GR_CSV_GPU            \
              "," GR_CSV_GPU_UTIL "," GR_CSV_MEM_UTIL "," GR_CSV_MEM_USED_MIB                      \
              "," GR_CSV_MEM_TOTAL_MIB "," GR_CSV_TEMP_C "," GR_CSV_POWER_W                        \
              "," GR_CSV_SM_CLOCK_MHZ "," GR_CSV_THROTTLE "," GR_CSV_ECC_UNCORRECTED               \
              "," GR_CSV_CPU_UTIL "," GR_CSV_RSS_MIB "," GR_CSV_RANK_SM_UTIL                       \
              "," GR_CSV_OTHERS_SM_UTIL "," GR_CSV_RANK_MEM_MIB "," GR_CSV_OTHERS_MEM_MIB "\n"

/* The first line of every file the supervisor writes (23 columns): the sample columns, the
 * program's own, then cpu_steal. */
#define GR_MONITOR_CSV_PROGRAM_COLUMNS GR_CSV_CPU_TIME_S "," GR_CSV_STATE
#define GR_MONITOR_CSV_FILE_HEADER                                                                 \
  GR_CSV_TIME "," GR_CSV_ELAPSED_S "," GR_CSV_RANK "," GR_CSV_LOCAL_RANK "," GR_CSV_GPU            \
              "," GR_CSV_GPU_UTIL "," GR_CSV_MEM_UTIL "," GR_CSV_MEM_USED_MIB                      \
              "," GR_CSV_MEM_TOTAL_MIB "," GR_CSV_TEMP_C "," GR_CSV_POWER_W                        \
              "," GR_CSV_SM_CLOCK_MHZ "," GR_CSV_THROTTLE "," GR_CSV_ECC_UNCORRECTED               \
              "," GR_CSV_CPU_UTIL "," GR_CSV_RSS_MIB "," GR_CSV_RANK_SM_UTIL                       \
              "," GR_CSV_OTHERS_SM_UTIL "," GR_CSV_RANK_MEM_MIB "," GR_CSV_OTHERS_MEM_MIB          \
              "," GR_MONITOR_CSV_PROGRAM_COLUMNS "," GR_CSV_CPU_STEAL "\n"

#endif
