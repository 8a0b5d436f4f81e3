/* Internal: the watchdog's answers, hang.<world_rank> (docs/formats.md, "The timeout's mark and
 * answers"). watchdog.c writes them and reads the other ranks'; the reader is a file of its own
 * so that its fuzz target (tests/fuzz/observe) runs the same function. */
#ifndef GR_HANG_H
#define GR_HANG_H

#include <stddef.h>

#define GR__HANG_MARK "hang"
#define GR__HANG_MAGIC "gpurun-hang 1"
#define GR__HANG_MAX 4096 /* bytes of an answer that are read */

/* One rank's answer. Strings hold only [A-Za-z0-9._:-] and '?' (gr__live_clean). */
typedef struct {
  int have;
  char in_op[32], in_comm[32]; /* the call it is inside; "-" when outside MPI */
  unsigned long long in_seq;
  double in_for;          /* seconds inside it, in [0, 1e9) */
  unsigned long long seq; /* the latest call's number on the communicator asked about */
  char op[32], state[12];
  int on_comm; /* a line for that communicator was found */
} gr__hang_answer;

/* Parses len bytes of text (another process's file: anything) as an answer, taking the comm line
 * of the communicator whose id is comm. 0 when the first line is GR__HANG_MAGIC (a->have set),
 * -1 otherwise or when len exceeds GR__HANG_MAX (a zeroed). Lines it cannot read are skipped. */
int gr__hang_parse(const char *text, size_t len, const char *comm, gr__hang_answer *a);

#endif
