/*
 * test_iobench_smoke.c - `lotus iobench` runs a tiny experiment and prints
 * well-formed JSON rows ({"experiment","config","metrics"} with iops and
 * cpu_us_per_io), one per line inside one JSON array; a bad option exits 2
 * with one line on stderr.
 * Needs the lotus binary (LOTUS_BIN, set by tests/run): exit 77 without it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "check.h"


/* Run cmd; collect the rows of the --json array, one per line ("[" opens the
 * first, "," ends all but the last, "]" ends the last), without those marks.
 * Returns the exit code. */
static int run(const char *cmd, char lines[][1024], int max, int *n)
{
	FILE *p = popen(cmd, "r");
	*n = 0;
	if (!p)
		return -1;
	char buf[1024];
	while (fgets(buf, sizeof(buf), p)) {
		char *l = buf + (buf[0] == '[');
		size_t len = strlen(l);
		while (len && strchr(",]\n", l[len - 1]))
			l[--len] = '\0';
		if (l[0] == '{' && *n < max)
			snprintf(lines[(*n)++], sizeof(lines[0]), "%s\n", l);
	}
	int st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void check_row(const char *l, const char *exp, const char *metric)
{
	char want[64];
	snprintf(want, sizeof(want), "{\"experiment\":\"%s\",\"config\":{", exp);
	CHECK(!strncmp(l, want, strlen(want)), "row does not start with %s: %s", want, l);
	CHECK(strstr(l, ",\"metrics\":{") != NULL, "no metrics object: %s", l);
	CHECK(strstr(l, metric) != NULL, "no %s: %s", metric, l);
	CHECK(l[strlen(l) - 2] == '}', "row not closed: %s", l);
}

int main(void)
{
	const char *bin = getenv("LOTUS_BIN");
	if (!bin || access(bin, X_OK)) {
		printf("skip: LOTUS_BIN not set or not executable\n");
		return 77;
	}
	static char lines[16][1024];
	char cmd[1024];
	int n;
	snprintf(cmd, sizeof(cmd), "%s iobench randread --seconds 0.2 --file-size 4M --depth 8 "
		 "--batch 4-8 --json --quiet 2>/dev/null", bin);
	int rc = run(cmd, lines, 16, &n);
	CHECK(rc == 0, "randread exited %d", rc);
	CHECK(n == 1, "randread printed %d rows", n);
	if (n >= 1) {
		check_row(lines[0], "randread", "\"iops\":");
		check_row(lines[0], "randread", "\"cpu_us_per_io\":");
		check_row(lines[0], "randread", "\"lat_p99_us\":");
	}
	snprintf(cmd, sizeof(cmd), "%s iobench table6 --rings 2 --reg-size 8M --file-size 4M "
		 "--json --quiet 2>/dev/null", bin);
	rc = run(cmd, lines, 16, &n);
	CHECK(rc == 0, "table6 exited %d", rc);
	CHECK(n == 4, "table6 printed %d rows, want 4", n);
	for (int i = 0; i < n; i++)
		check_row(lines[i], "table6", "\"time_ms\":");
	snprintf(cmd, sizeof(cmd), "%s iobench fig2 --threads 0 >/dev/null 2>&1", bin);
	rc = run(cmd, lines, 16, &n);
	CHECK(rc == 2, "bad --threads exited %d, want 2", rc);
	snprintf(cmd, sizeof(cmd), "%s iobench nosuch >/dev/null 2>&1", bin);
	CHECK(run(cmd, lines, 16, &n) == 2, "unknown experiment did not exit 2");
	printf("ok\n");
	return 0;
}
