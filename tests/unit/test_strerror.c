/*
 * test_strerror.c - every LOTUS_E* code of lotus.h has a name of its own:
 * lotus_strerror() never says "unknown" for one of them (LOTUS_ELEASE, the
 * last, once did: the range check left LOTUS_ELAST out), and says "unknown"
 * just past the range.  Only the public header.
 */
#include <stdio.h>
#include <string.h>
#include <lotus.h>
#include "check.h"

int main(void)
{
	int bad = 0;
	for (int e = LOTUS_EBASE - 1; e >= LOTUS_ELAST; e--) {
		const char *s = lotus_strerror(e);
		if (!s || !*s || strstr(s, "unknown")) {
			fprintf(stderr, "lotus_strerror(%d) = \"%s\"\n", e, s ? s : "(null)");
			bad = 1;
		}
	}
	if (!strstr(lotus_strerror(LOTUS_ELAST - 1), "unknown")) {
		fprintf(stderr, "lotus_strerror(LOTUS_ELAST - 1) = \"%s\"\n",
			lotus_strerror(LOTUS_ELAST - 1));
		bad = 1;
	}
	if (!strstr(lotus_strerror(LOTUS_ELEASE), "lease")) {
		fprintf(stderr, "LOTUS_ELEASE: \"%s\"\n", lotus_strerror(LOTUS_ELEASE));
		bad = 1;
	}
	return bad;
}
