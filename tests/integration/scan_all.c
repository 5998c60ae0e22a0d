/*
 * scan_all.c - a full-table scan through the public API, for the cold-scan
 * benchmark (scripts/bench-tier-scan.sh) and tests: `scan-all CONFIG TABLE`
 * scans TABLE in key order, STEP rows per transaction (each continues at the
 * last key it saw), and prints {"rows":N,"seconds":S} on stdout.  Exit 1 on
 * an error (printed on stderr).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "lotus.h"

#define STEP 1000u

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: scan-all CONFIG TABLE\n");
		return 2;
	}
	struct lotus_options o;
	lotus_options_init(&o);
	o.config_path = argv[1];
	lotus_cluster_t *cl;
	lotus_session_t *s;
	lotus_table_t tb;
	lotus_txn_t *t = NULL;
	int rc = lotus_connect(&o, &cl);
	if (rc) {
		fprintf(stderr, "scan-all: %s\n", lotus_strerror(rc));
		return 2;
	}
	if ((rc = lotus_session_open(cl, &s)) == 0 && (rc = lotus_table_open(s, argv[2], &tb)) == 0)
		rc = lotus_txn_begin(s, &t);
	unsigned char start[128] = { 0 };
	size_t slen = 1;
	unsigned long long rows = 0;
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (int tries = 0; rc == 0 && tries < 1000000;) {
		unsigned char next[128];
		size_t nlen = 0;
		lotus_txn_recycle(t);
		rc = lotus_txn_scan(t, tb, start, slen, STEP + (rows > 0));
		if (rc == 0)
			rc = lotus_txn_execute(t);
		int n = rc == 0 ? lotus_txn_scan_rows(t, 0) : rc;
		if (n < 0)
			rc = n;
		unsigned got = 0;
		for (int i = 0; rc == 0 && i < n; i++) {
			const void *k, *v;
			size_t kl, vl;
			if ((rc = lotus_txn_scan_row(t, 0, (unsigned)i, &k, &kl, &v, &vl)) != 0)
				break;
			if (rows > 0 && i == 0 && kl == slen && !memcmp(k, start, kl))
				continue;    /* the last row of the previous step */
			memcpy(next, k, kl);
			nlen = kl;
			got++;
		}
		if (rc == 0)
			rc = lotus_txn_commit(t);
		else
			lotus_txn_abort(t);
		if (lotus_err_retryable(rc)) {
			rc = 0;
			tries++;
			continue;
		}
		if (rc || !got)
			break;
		rows += got;
		memcpy(start, next, nlen);
		slen = nlen;
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	if (t)
		lotus_txn_free(t);
	lotus_session_close(s);
	lotus_disconnect(cl);
	if (rc) {
		fprintf(stderr, "scan-all: %s\n", lotus_strerror(rc));
		return 1;
	}
	printf("{\"rows\":%llu,\"seconds\":%.3f}\n", rows,
	       (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9);
	return 0;
}
