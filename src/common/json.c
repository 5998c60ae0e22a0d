/* json.c - see json.h. */
#include "common/json.h"

void json_write_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(f, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			fprintf(f, "\\u%04x", *s);
		else
			fputc(*s, f);
	}
	fputc('"', f);
}

int json_str_buf(char *buf, size_t len, const char *s)
{
	size_t n = 0;
#define PUT(c) do { if (n + 1 < len) buf[n] = (c); n++; } while (0)
	PUT('"');
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch == '"' || ch == '\\') {
			PUT('\\');
			PUT((char)ch);
		} else if (ch < 0x20) {
			char esc[8];
			snprintf(esc, sizeof(esc), "\\u%04x", ch);
			for (const char *e = esc; *e; e++)
				PUT(*e);
		} else {
			PUT((char)ch);
		}
	}
	PUT('"');
#undef PUT
	if (len)
		buf[n < len ? n : len - 1] = 0;
	return (int)n;
}
