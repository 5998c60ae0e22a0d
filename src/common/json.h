/* json.h - the little JSON output lotus needs: a string with escapes.  Any thread. */
#ifndef LOTUS_JSON_H
#define LOTUS_JSON_H
#include <stdio.h>
/* Write s as a JSON string literal (quotes, backslashes and control bytes escaped). */
void json_write_str(FILE *f, const char *s);
/* The same into buf (snprintf's rules: the length it needs is returned, the
 * text is cut to len - 1 and terminated). */
int json_str_buf(char *buf, size_t len, const char *s);
#endif
