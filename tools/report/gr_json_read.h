/* A small JSON reader for gpurun-report: the runtime's counters and the flight-recorder dumps.
 * Whole document into a tree; numbers as double; no \u escapes beyond ASCII. */
#ifndef GR_JSON_READ_H
#define GR_JSON_READ_H

#include <gpurun/status.h>
#include <stddef.h>

typedef enum {
  GR__RPT_JSON_NULL,
  GR__RPT_JSON_BOOL,
  GR__RPT_JSON_NUM,
  GR__RPT_JSON_STR,
  GR__RPT_JSON_ARR,
  GR__RPT_JSON_OBJ
} gr__rpt_json_type;

typedef struct gr__rpt_json {
  gr__rpt_json_type type;
  double num;                 /* GR__RPT_JSON_NUM, GR__RPT_JSON_BOOL (0/1) */
  char *str;                  /* GR__RPT_JSON_STR */
  char *key;                  /* member name when inside an object */
  struct gr__rpt_json *child; /* first element / member */
  struct gr__rpt_json *next;  /* next sibling */
} gr__rpt_json;

/* Inputs are bounded: at most GR__RPT_JSON_MAX_DEPTH nested values, numbers finite (RFC 8259 grammar), no
 * NUL bytes (\u0000 reads as '?'), files of at most GR__RPT_JSON_MAX_FILE bytes (a parameter of
 * gr__rpt_json_parse_file_at); files are regular files only (gr_safefile.h: no symlink, FIFO or device). */
#define GR__RPT_JSON_MAX_DEPTH 64
#define GR__RPT_JSON_MAX_FILE (16u << 20)

/* Parses text; NULL on a syntax error, with the byte offset in *err_at when err_at is not NULL. */
gr__rpt_json *gr__rpt_json_parse(const char *text, size_t *err_at);
gr__rpt_json *gr__rpt_json_parse_file(const char *path, size_t *err_at);
/* dirfd/name (dirfd may be AT_FDCWD), at most max bytes, into *out: GR_OK, or *out NULL and one
 * sentence recorded (gr_last_error()): the file's (gr__file_read), or GR_ERR_INVALID "a NUL byte
 * at byte N", "not valid JSON at byte N". */
gr_status gr__rpt_json_parse_file_at(int dirfd, const char *name, size_t max, size_t *err_at,
                                     gr__rpt_json **out);
void gr__rpt_json_free(gr__rpt_json *v);
/* Member of an object by name, NULL when absent or v is not an object. */
const gr__rpt_json *gr__rpt_json_get(const gr__rpt_json *v, const char *key);
/* Number member, or dflt when absent / not a number. */
double gr__rpt_json_num(const gr__rpt_json *v, const char *key, double dflt);
/* String member, or NULL. */
const char *gr__rpt_json_str(const gr__rpt_json *v, const char *key);

#endif
