/* Internal: gpurun-doctor, what is wrong with this node for gpurun (see gpurun-doctor.1).
 *
 *   doctor.c   the checks: topology, GPUs (CUDA, NCCL, NVML health, persistence, MIG, MPS),
 *              peer access, NICs, MPI, the shell's binding and cgroup, the plan  -> a report
 *   report.c   the report: lines, verdicts, text (80 columns) and JSON output
 *   main.c     options, exit code
 *
 * The doctor is on the launcher side: it links the launcher's core (topology, planner), the
 * monitor (the NVML loader and the health gate's reader) and the base, never MPI, CUDA or NCCL,
 * which it loads with dlopen or asks through their tools (ompi_info) with a time bound. */
#ifndef GR_DOCTOR_H
#define GR_DOCTOR_H

#include "gr_array.h"

#include <gpurun/status.h>
#include <stdio.h>

typedef enum { GR__DR_OK = 0, GR__DR_SKIP, GR__DR_WARN, GR__DR_FAIL } gr__dr_verdict;
const char *gr__dr_verdict_name(gr__dr_verdict v);

#define GR__DR_CHECK 16  /* a check's name, at most 9 characters shown */
#define GR__DR_FOUND 480 /* what it found */
#define GR__DR_ADVICE 320

typedef struct {
  char check[GR__DR_CHECK];
  gr__dr_verdict verdict;
  char found[GR__DR_FOUND];
  char advice[GR__DR_ADVICE]; /* "" none */
} gr__dr_line;

typedef struct {
  gr_array line; /* gr__dr_line, in the order the checks added them */
  char host[256];
  char source[1024]; /* "live", or the topology file */
  int ranks;         /* the plan's rank count */
  int nomem;         /* a line could not be stored: the report says so and counts as a fail */
} gr__dr_report;

/* An empty report: no lines, host and source "", no ranks. Every report starts here. */
void gr__dr_report_init(gr__dr_report *r);
/* Line I of the report; the caller keeps I below r->line.count. */
#define GR__DR_LINE(r, i) GR_ARRAY_AT(&(r)->line, gr__dr_line, i)
/* Appends one line; advice may be NULL. Strings are stored as given (hostile text included) and
 * escaped when printed. */
void gr__dr_add(gr__dr_report *r, const char *check, gr__dr_verdict v, const char *advice,
                const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* The worst verdict in the report (skip counts as ok). */
gr__dr_verdict gr__dr_worst(const gr__dr_report *r);
void gr__dr_free(gr__dr_report *r);

#define GR__DR_WIDTH 80
/* One line per check, wrapped at width columns: "VERDICT CHECK FOUND", then "-> ADVICE". */
void gr__dr_print_text(FILE *f, const gr__dr_report *r, int width);
/* One JSON object: host, source, ranks, verdict and the checks in order. */
void gr__dr_print_json(FILE *f, const gr__dr_report *r);

typedef struct {
  const char *topology; /* NULL or "": the live node; else a recorded hwloc XML file */
  int ranks;            /* ranks to plan for; 0: the GPU count, at least 1 */
  double mpi_timeout;   /* seconds ompi_info may take */
} gr__dr_opts;

/* Runs every check into r. GR_OK, or GR_ERR_TOPOLOGY with the sentence recorded when
 * o->topology does not load (nothing else is checked then), GR_ERR_NOMEM. */
gr_status gr__dr_run(const gr__dr_opts *o, gr__dr_report *r);

/* Parsers, exposed for the tests. */
/* "4: ACTIVE\n" (an InfiniBand port's state file) -> "ACTIVE" in out; 0, or -1 malformed. */
int gr__dr_ib_state(const char *text, char *out, size_t cap);
/* A CUDA version number (12040) as "12.4". */
void gr__dr_cuda_version(int v, char *out, size_t cap);

#endif
