/*
 * test_json_str.c - json_str_buf (common/json.h), which writes a memory
 * server's data directory into its STATS text: quotes, backslashes and
 * control bytes come out escaped, the result is what json_write_str prints,
 * and a short buffer is cut and terminated with the needed length returned,
 * as snprintf does.
 */
#include <stdio.h>
#include <string.h>
#include "check.h"
#include "common/json.h"

static void same_as_file(const char *s)
{
	char a[256], b[256] = { 0 };
	FILE *f = fmemopen(b, sizeof(b) - 1, "w");
	CHECK(f);
	json_write_str(f, s);
	fclose(f);
	int n = json_str_buf(a, sizeof(a), s);
	CHECK_EQ(n, (long long)strlen(a));
	CHECK(!strcmp(a, b), "json_str_buf %s, json_write_str %s", a, b);
}

int main(void)
{
	char buf[64];
	CHECK_EQ(json_str_buf(buf, sizeof(buf), "/var/lib/lotus/ms0"), 20);
	CHECK(!strcmp(buf, "\"/var/lib/lotus/ms0\""));
	json_str_buf(buf, sizeof(buf), "a\"b\\c\nd");
	CHECK(!strcmp(buf, "\"a\\\"b\\\\c\\u000ad\""), "%s", buf);
	same_as_file("plain");
	same_as_file("quote\" back\\slash tab\t nl\n bell\a");
	same_as_file("");
	/* cut: the length it would need, a terminated prefix */
	char small[8];
	memset(small, 'X', sizeof(small));
	CHECK_EQ(json_str_buf(small, sizeof(small), "0123456789"), 12);
	CHECK(!strcmp(small, "\"012345"), "%s", small);
	CHECK_EQ(json_str_buf(NULL, 0, "ab"), 4);
	return CHECK_PASS;
}
