/* Internal: the one escaper per output language, used wherever a string gpurun did not write
 * itself (a host name, a GPU name from a CSV, a flight-dump field, a path) leaves the program.
 * - JSON: a quoted string literal; '"' and '\' escaped, control characters (C0, DEL, C1) as
 *   \u00XX, bytes that are not valid UTF-8 as \ufffd. The result always parses.
 * - XML (SVG text and attribute values): & < > " ' as entities; control characters and invalid
 *   UTF-8 (which XML 1.0 cannot carry at all) as U+FFFD. Markup never passes through.
 * - Terminal: control characters (C0, DEL, C1) and invalid UTF-8 bytes shown as \xNN, so a string
 *   cannot move the cursor, recolour or retitle the operator's terminal.
 * MPI-free; gpurun-report uses it too. */
#ifndef GR_ESCAPE_H
#define GR_ESCAPE_H

#include <stdio.h>

void gr__esc_json(FILE *f, const char *s);
void gr__esc_xml(FILE *f, const char *s);
void gr__esc_term(FILE *f, const char *s);
/* gr__esc_term into out (cap > 0 bytes, always terminated, cut at a whole escape when it does not
 * fit): for a sentence recorded with gr__fail_msg that quotes a path or a name. Returns out. */
const char *gr__esc_term_str(char *out, size_t cap, const char *s);

#endif
