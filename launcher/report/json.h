/* A small JSON reader for gpurun-report: the runtime's counters and the flight-recorder dumps.
 * Whole document into a tree; numbers as double; no \u escapes beyond ASCII. */
#ifndef GR_REPORT_JSON_H
#define GR_REPORT_JSON_H

#include <stddef.h>

typedef enum { GRJ_NULL, GRJ_BOOL, GRJ_NUM, GRJ_STR, GRJ_ARR, GRJ_OBJ } grj_type;

typedef struct grj {
  grj_type type;
  double num;        /* GRJ_NUM, GRJ_BOOL (0/1) */
  char *str;         /* GRJ_STR */
  char *key;         /* member name when inside an object */
  struct grj *child; /* first element / member */
  struct grj *next;  /* next sibling */
} grj;

/* Inputs are bounded: at most GRJ_MAX_DEPTH nested values, numbers finite (RFC 8259 grammar), no
 * NUL bytes (\u0000 reads as '?'), files of at most GRJ_MAX_FILE bytes (a parameter of
 * grj_parse_file_at); files are regular files only (gr_safefile.h: no symlink, FIFO or device). */
#define GRJ_MAX_DEPTH 64
#define GRJ_MAX_FILE (16u << 20)

/* Parses text; NULL on a syntax error, with the byte offset in *err_at when err_at is not NULL. */
grj *grj_parse(const char *text, size_t *err_at);
grj *grj_parse_file(const char *path, size_t *err_at);
/* dirfd/name (dirfd may be AT_FDCWD), at most max bytes; NULL with a one-line reason in why. */
grj *grj_parse_file_at(int dirfd, const char *name, size_t max, size_t *err_at, char *why,
                       size_t why_len);
void grj_free(grj *v);
/* Member of an object by name, NULL when absent or v is not an object. */
const grj *grj_get(const grj *v, const char *key);
/* Number member, or dflt when absent / not a number. */
double grj_num(const grj *v, const char *key, double dflt);
/* String member, or NULL. */
const char *grj_str(const grj *v, const char *key);

#endif
