/* GR_API marks the symbols libgpurun exports; everything else is hidden. GR_PRINTF marks printf-like
 * functions. See gpurun(3). */
#ifndef GPURUN_EXPORT_H
#define GPURUN_EXPORT_H

#if defined(GPURUN_BUILDING_LIBRARY) && defined(__GNUC__)
#define GR_API __attribute__((visibility("default")))
#else
#define GR_API
#endif

#if defined(__GNUC__)
#define GR_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define GR_PRINTF(fmt, args)
#endif

#endif
