/* The wait-for analysis gpurun-top (live files) and gpurun-report (flight dumps) share: who waits
 * for whom, and where the waits lead. MPI-free and file-free: each tool describes what its files
 * say in the neutral form below and keeps its own wording.
 *
 * The rules:
 *   - A rank in a send or receive waits for its peers.
 *   - A rank in a collective at position P of its communicator's collective sequence waits for
 *     the members behind it: those whose highest entered position is below P; on a communicator
 *     over the whole world also every rank below its size that has no line for it (no data, or
 *     data without the communicator) and did not exit; on another communicator whose known
 *     members are fewer than its size, one member no data names (-1). In that order, each part
 *     by rank. Waiters in the same call share one list.
 *   - A chain follows the first rank waited for at each step to its end: a rank without data, a
 *     rank in no call, a rank waiting for a member no data names, a rank in a collective nobody is
 *     behind in, or a cycle (deadlock).
 *   - The blockers of a set of waiting ranks follow every rank waited for: the ranks reached that
 *     wait for nobody (in no call, without data, or waiting for no one: except the starting
 *     ranks themselves, for whom that means nobody is behind), and the ranks on a cycle (a
 *     deadlock: every wait needs all of its targets, a collective every member, a group of sends
 *     and receives every peer, so a cycle never resolves). A rank that only waits for ranks
 *     further along is held up by them and not named. Ranks waited for that have no row (or -1)
 *     are not followed: there is nothing to flag.
 * Time and memory are linear in the ranks, the memberships and the rank lists (a world
 * communicator's size included). */
#ifndef GR_WAITFOR_H
#define GR_WAITFOR_H

#include <gpurun/status.h>

/* One rank as a tool's files show it. Rows are given sorted by rank, each rank once. */
typedef struct {
  int rank;         /* world rank, >= 0 */
  int have;         /* 1: the tool has data for it (a dump, a live file); 0: none */
  int exited;       /* 1: it left the job normally (never counted behind for a missing line) */
  int comm;         /* index into the communicators of the call it waits in; -1: in no call */
  int p2p;          /* 1: that call is a send or receive (it waits for peers), 0: a collective */
  double pos;       /* a collective: its position in the communicator's collective sequence */
  const int *peers; /* a send or receive: the peers' world ranks, -1 for one no data names */
  int npeers;
} gr__wf_rank;

typedef struct {
  int size;  /* members, as the data says (0 unknown) */
  int world; /* 1: every rank of the job below size is a member */
} gr__wf_comm;

/* A rank's line for a communicator: it is a member, and how far it got. */
typedef struct {
  int row;        /* index into the ranks */
  int comm;       /* index into the communicators */
  double entered; /* the highest collective position it entered there; below 0: none */
} gr__wf_member;

typedef struct {
  const gr__wf_rank *ranks;
  int nranks;
  const gr__wf_comm *comms;
  int ncomms;
  const gr__wf_member *members; /* any order; a (row, comm) pair at most once */
  int nmembers;
} gr__wf_input;

/* How a chain ends (gr__wf_end.kind). */
enum {
  GR__WF_END_NO_DATA,     /* the rank has no data (rank: the one waited for) */
  GR__WF_END_NOT_WAITING, /* the rank is in no call */
  GR__WF_END_UNNAMED,     /* the rank waits for a member no data names */
  GR__WF_END_ALL_IN,      /* the rank waits in a collective that no member is behind in */
  GR__WF_END_CYCLE        /* the rank is on a cycle (the rank where the walk closed it) */
};

typedef struct {
  int rank, kind;
} gr__wf_end;

/* What gr__wf_blockers sets for a row. */
enum { GR__WF_BLOCKS = 1, GR__WF_DEADLOCK = 2 };

typedef struct gr__wf gr__wf;

/* Analyses in (which need not outlive the result) into *out (NULL on failure): GR_OK;
 * GR_ERR_INVALID (a sentence recorded) when rows are not sorted by rank or an index is out of
 * range; GR_ERR_NOMEM. */
gr_status gr__wf_analyse(const gr__wf_input *in, gr__wf **out);
void gr__wf_free(gr__wf *w);

/* The row of a world rank, -1 when no row has it. */
int gr__wf_row_of(const gr__wf *w, int rank);
/* Whether the row waits in a call. */
int gr__wf_waiting(const gr__wf *w, int row);
/* The world ranks the row waits for (-1: a member no data names), *n of them; NULL when none. */
const int *gr__wf_targets(const gr__wf *w, int row, int *n);
/* The end of the row's chain (index into gr__wf_ends), -1 when the row does not wait. */
int gr__wf_end_of(const gr__wf *w, int row);
/* The distinct chain ends, in the order the rows' chains first reached them. */
const gr__wf_end *gr__wf_ends(const gr__wf *w, int *n);
/* The blockers of the rows flagged in start (nranks bytes): block[row] (nranks bytes, cleared
 * first) gets GR__WF_BLOCKS or GR__WF_DEADLOCK. Returns how many rows are flagged, -1 out of
 * memory (nothing flagged). */
int gr__wf_blockers(const gr__wf *w, const unsigned char *start, unsigned char *block);

#endif
