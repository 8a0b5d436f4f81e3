/* UTS tree generation: the splittable SHA-1 RNG (OpenSSL's libcrypto) and the child-count
 * distributions of the specification. */
#include "uts_tree.h"

#include <math.h>
/* The one-shot SHA1() of OpenSSL 3 fetches the digest from the provider store on every call
 * (a read-write lock and a reference count: a sixth of the whole run, measured with perf); the
 * low-level SHA1_Init/Update/Final on a stack context do not. They are deprecated, not removed. */
#define OPENSSL_SUPPRESS_DEPRECATED 1
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define UTS_MAX_CHILDREN 100 /* only a binomial root may have more */

void uts_params_default(uts_params *p) {
  p->type = UTS_GEO;
  p->shape = UTS_LINEAR;
  p->gen_mx = 6;
  p->b0 = 4.0;
  p->seed = 0;
  p->q = 15.0 / 64.0;
  p->m = 4;
  p->shift = 0.5;
  p->gran = 1;
}

const uts_named uts_named_trees[] = {
    {"T1", "-t 1 -a 3 -d 10 -b 4 -r 19", 4130071, 3305118, 10},
    {"T5", "-t 1 -a 0 -d 20 -b 4 -r 34", 4147582, 2181318, 20},
    {"T2", "-t 1 -a 2 -d 16 -b 6 -r 502", 4117769, 2342762, 81},
    {"T3", "-t 0 -b 2000 -q 0.124875 -m 8 -r 42", 4112897, 3599034, 1572},
    {"T4", "-t 2 -a 0 -d 16 -b 6 -r 1 -q 0.234375 -m 4", 4132453, 3108986, 134},
    {"T1L", "-t 1 -a 3 -d 13 -b 4 -r 29", 102181082, 81746377, 13},
    {"T2L", "-t 1 -a 2 -d 23 -b 7 -r 220", 96793510, 53791152, 67},
    {"T3L", "-t 0 -b 2000 -q 0.200014 -m 5 -r 7", 111345631, 89076904, 17844},
    {"T1XL", "-t 1 -a 3 -d 15 -b 4 -r 29", 1635119272, 1308100063, 15},
    {NULL, NULL, 0, 0, 0}};

const uts_named *uts_find_named(const char *name) {
  for (const uts_named *t = uts_named_trees; t->name; t++)
    if (strcmp(t->name, name) == 0) return t;
  return NULL;
}

static int parse_int(const char *v, int lo, int hi, int *out) {
  char *end;
  long x = strtol(v, &end, 10);
  if (*v == '\0' || *end != '\0' || x < lo || x > hi) return -1;
  *out = (int)x;
  return 0;
}

static int parse_dbl(const char *v, double lo, double hi, double *out) {
  char *end;
  double x = strtod(v, &end);
  if (*v == '\0' || *end != '\0' || !(x >= lo && x <= hi)) return -1;
  *out = x;
  return 0;
}

int uts_parse_flag(uts_params *p, char flag, const char *val, char *err, int errlen) {
  int rc = -1;
  switch (flag) {
  case 't':
    rc = parse_int(val, 0, 3, &p->type);
    break;
  case 'a':
    rc = parse_int(val, 0, 3, &p->shape);
    break;
  case 'd':
    rc = parse_int(val, 1, 1 << 30, &p->gen_mx);
    break;
  case 'b':
    rc = parse_dbl(val, 0.0, 1e9, &p->b0);
    break;
  case 'r':
    rc = parse_int(val, -2147483647, 2147483647, &p->seed);
    break;
  case 'q':
    rc = parse_dbl(val, 0.0, 1.0, &p->q);
    break;
  case 'm':
    rc = parse_int(val, 0, UTS_MAX_CHILDREN, &p->m);
    break;
  case 'f':
    rc = parse_dbl(val, 0.0, 1.0, &p->shift);
    break;
  case 'g':
    rc = parse_int(val, 1, 1000000, &p->gran);
    break;
  default:
    snprintf(err, (size_t)errlen, "unknown tree flag -%c", flag);
    return -1;
  }
  if (rc != 0) snprintf(err, (size_t)errlen, "bad value '%s' for -%c", val, flag);
  return rc;
}

int uts_parse_args(uts_params *p, const char *args, char *err, int errlen) {
  char buf[256];
  snprintf(buf, sizeof buf, "%s", args);
  char *save = NULL;
  for (char *tok = strtok_r(buf, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
    char *val = strtok_r(NULL, " ", &save);
    if (tok[0] != '-' || !tok[1] || tok[2] || !val) {
      snprintf(err, (size_t)errlen, "bad tree argument '%s'", tok);
      return -1;
    }
    if (uts_parse_flag(p, tok[1], val, err, errlen) != 0) return -1;
  }
  return 0;
}

static void sha1(const uint8_t *in, size_t len, uint8_t out[20]) {
  SHA_CTX c;
  SHA1_Init(&c);
  SHA1_Update(&c, in, len);
  SHA1_Final(out, &c);
}

static void be32(uint8_t *b, int32_t v) {
  uint32_t u = (uint32_t)v;
  b[0] = (uint8_t)(u >> 24);
  b[1] = (uint8_t)(u >> 16);
  b[2] = (uint8_t)(u >> 8);
  b[3] = (uint8_t)u;
}

void uts_root(const uts_params *p, uts_node *root) {
  uint8_t seed[20] = {0};
  be32(seed + 16, p->seed);
  sha1(seed, sizeof seed, root->state);
  root->height = 0;
}

static int rng_rand(const uint8_t *s) {
  uint32_t b = ((uint32_t)s[16] << 24) | ((uint32_t)s[17] << 16) | ((uint32_t)s[18] << 8) | s[19];
  return (int)(b & 0x7fffffffu);
}

static double to_prob(int n) { return n < 0 ? 0.0 : (double)n / 2147483648.0; }

static int children_bin(const uts_params *p, const uts_node *n) {
  return to_prob(rng_rand(n->state)) < p->q ? p->m : 0;
}

static int children_geo(const uts_params *p, const uts_node *n) {
  double b_i = p->b0;
  int depth = n->height;
  if (depth > 0) {
    switch (p->shape) {
    case UTS_EXPDEC:
      b_i = p->b0 * pow((double)depth, -log(p->b0) / log((double)p->gen_mx));
      break;
    case UTS_CYCLIC:
      if (depth > 5 * p->gen_mx) {
        b_i = 0.0;
        break;
      }
      b_i = pow(p->b0, sin(2.0 * 3.141592653589793 * (double)depth / (double)p->gen_mx));
      break;
    case UTS_FIXED:
      b_i = depth < p->gen_mx ? p->b0 : 0;
      break;
    case UTS_LINEAR:
    default:
      b_i = p->b0 * (1.0 - (double)depth / (double)p->gen_mx);
      break;
    }
  }
  double prob = 1.0 / (1.0 + b_i);
  double u = to_prob(rng_rand(n->state));
  return (int)floor(log(1 - u) / log(1 - prob));
}

int uts_num_children(const uts_params *p, const uts_node *n) {
  int k = 0;
  switch (p->type) {
  case UTS_BIN:
    k = n->height == 0 ? (int)floor(p->b0) : children_bin(p, n);
    break;
  case UTS_GEO:
    k = children_geo(p, n);
    break;
  case UTS_HYBRID:
    k = n->height < p->shift * p->gen_mx ? children_geo(p, n) : children_bin(p, n);
    break;
  case UTS_BALANCED:
    k = n->height < p->gen_mx ? (int)p->b0 : 0;
    break;
  }
  if (n->height == 0 && p->type == UTS_BIN) {
    int root_bf = (int)ceil(p->b0);
    if (k > root_bf) k = root_bf;
  } else if (p->type != UTS_BALANCED && k > UTS_MAX_CHILDREN) {
    k = UTS_MAX_CHILDREN;
  }
  return k;
}

void uts_child(const uts_params *p, const uts_node *parent, int i, uts_node *child) {
  uint8_t in[24];
  be32(in + 20, i);
  memcpy(in, parent->state, 20);
  sha1(in, sizeof in, child->state);
  for (int g = 1; g < p->gran; g++) { /* extra work per node, result as the reference code */
    memcpy(in, parent->state, 20);
    sha1(in, sizeof in, child->state);
  }
  child->height = parent->height + 1;
}

void uts_count_serial(const uts_params *p, uint64_t *nodes, uint64_t *leaves, int *depth) {
  size_t cap = 1024, n = 0;
  uts_node *stack = malloc(cap * sizeof *stack);
  uint64_t nn = 0, nl = 0;
  int md = 0;
  if (!stack) abort();
  uts_root(p, &stack[n++]);
  while (n) {
    uts_node cur = stack[--n];
    nn++;
    if (cur.height > md) md = cur.height;
    int k = uts_num_children(p, &cur);
    if (k == 0) nl++;
    if (n + (size_t)k > cap) {
      while (n + (size_t)k > cap)
        cap *= 2;
      uts_node *ns = realloc(stack, cap * sizeof *stack);
      if (!ns) abort();
      stack = ns;
    }
    for (int i = 0; i < k; i++)
      uts_child(p, &cur, i, &stack[n++]);
  }
  free(stack);
  *nodes = nn;
  *leaves = nl;
  *depth = md;
}

void uts_describe(const uts_params *p, char *buf, int len) {
  static const char *shapes[] = {"linear dec.", "exp. dec.", "cyclic", "fixed"};
  switch (p->type) {
  case UTS_BIN:
    snprintf(buf, (size_t)len, "Binomial b0=%g q=%g m=%d r=%d", p->b0, p->q, p->m, p->seed);
    break;
  case UTS_GEO:
    snprintf(buf, (size_t)len, "Geometric [%s] b0=%g d=%d r=%d", shapes[p->shape], p->b0, p->gen_mx,
             p->seed);
    break;
  case UTS_HYBRID:
    snprintf(buf, (size_t)len, "Hybrid [%s] b0=%g d=%d q=%g m=%d f=%g r=%d", shapes[p->shape],
             p->b0, p->gen_mx, p->q, p->m, p->shift, p->seed);
    break;
  default:
    snprintf(buf, (size_t)len, "Balanced b0=%g d=%d", p->b0, p->gen_mx);
  }
}
