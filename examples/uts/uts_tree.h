/* UTS (Unbalanced Tree Search) trees, after the benchmark's public specification (Olivier et al.,
 * "UTS: An Unbalanced Tree Search Benchmark", LCPC 2006, and its reference code): every node carries
 * a 20-byte SHA-1 state; a child's state is SHA-1(parent state || child index as 4 big-endian
 * bytes); the number of children is drawn from the state's last 4 bytes. The tree is therefore the
 * same whoever generates which part of it, which is what makes counts checkable. */
#ifndef UTS_TREE_H
#define UTS_TREE_H

#include <stdint.h>

enum { UTS_BIN = 0, UTS_GEO = 1, UTS_HYBRID = 2, UTS_BALANCED = 3 };
enum { UTS_LINEAR = 0, UTS_EXPDEC = 1, UTS_CYCLIC = 2, UTS_FIXED = 3 };

typedef struct {
  int type;     /* -t */
  int shape;    /* -a (geometric trees) */
  int gen_mx;   /* -d: depth parameter */
  double b0;    /* -b: root branching factor */
  int seed;     /* -r: root seed */
  double q;     /* -q: binomial non-leaf probability */
  int m;        /* -m: binomial non-leaf branching factor */
  double shift; /* -f: hybrid switch depth (fraction of gen_mx) */
  int gran;     /* -g: SHA-1 evaluations per child (compute granularity) */
} uts_params;

typedef struct {
  uint8_t state[20];
  int32_t height;
} uts_node;

typedef struct {
  const char *name;
  const char *args;       /* in the benchmark's own flags */
  uint64_t nodes, leaves; /* published by the UTS authors (sample_trees.sh) */
  int depth;
} uts_named;

void uts_params_default(uts_params *p);
/* The published sample trees; NULL-terminated. */
extern const uts_named uts_named_trees[];
const uts_named *uts_find_named(const char *name);
/* Apply "-t 1 -a 3 ..." style flags; returns 0, or -1 with a message in err. */
int uts_parse_flag(uts_params *p, char flag, const char *val, char *err, int errlen);
int uts_parse_args(uts_params *p, const char *args, char *err, int errlen);

void uts_root(const uts_params *p, uts_node *root);
int uts_num_children(const uts_params *p, const uts_node *n);
void uts_child(const uts_params *p, const uts_node *parent, int i, uts_node *child);
/* Serial depth-first count (the independent reference the tests compare against). */
void uts_count_serial(const uts_params *p, uint64_t *nodes, uint64_t *leaves, int *depth);
/* "Geometric [fixed] b0=4 d=10 r=19" */
void uts_describe(const uts_params *p, char *buf, int len);

#endif
