/*
 * tpcc_corrupt.c - breaks one consistency condition of a `lotus tpcc`
 * database through the public API, the way a faulty client would, so that
 * tests/integration/tpcc_check.sh can see `lotus tpcc --check` catch it:
 *   tpcc-corrupt CONFIG ytd W D DELTA   adds DELTA cents to D_YTD of district
 *                                       (W, D) (condition 1: W_YTD = sum D_YTD)
 *   tpcc-corrupt CONFIG no W D          deletes the NEW-ORDER row after the
 *                                       district's first (condition 3)
 * With -w first (tpcc-corrupt -w CONFIG ...) it reaches a database loaded
 * with --placement warehouse: the tables placed by their W(2) prefix.
 * It knows only what docs/tpcc.md documents: the key encoding (big-endian
 * W(2) D(1) [O(4)]), the placement rule, and that D_YTD, an int64 in the
 * client's byte order, is the first field of a district row.  Exit 0 done,
 * 1 error, 2 usage.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lotus.h"

static int fail(const char *what, int rc)
{
	fprintf(stderr, "tpcc-corrupt: %s: %s\n", what, lotus_strerror(rc));
	return 1;
}

int main(int argc, char **argv)
{
	static const struct lotus_placement by_w[] = {
		{ "tpcc_district", 0, 2, LOTUS_PLACE_SCAN_LOCAL },
		{ "tpcc_new_order", 0, 2, LOTUS_PLACE_SCAN_LOCAL },
	};
	bool place_w = argc > 1 && strcmp(argv[1], "-w") == 0;
	if (place_w) {
		argc--;
		argv++;
	}
	if (argc < 5 || (strcmp(argv[2], "ytd") == 0 ? argc != 6 : strcmp(argv[2], "no") || argc != 5)) {
		fprintf(stderr, "usage: tpcc-corrupt [-w] CONFIG ytd W D DELTA | [-w] CONFIG no W D\n");
		return 2;
	}
	bool ytd = strcmp(argv[2], "ytd") == 0;
	unsigned w = (unsigned)atoi(argv[3]), d = (unsigned)atoi(argv[4]);
	struct lotus_options o;
	lotus_options_init(&o);
	o.config_path = argv[1];
	if (place_w) {
		o.placement = by_w;
		o.nplacement = 2;
	}
	lotus_cluster_t *cl;
	lotus_session_t *s;
	lotus_table_t tb;
	lotus_txn_t *t;
	int rc = lotus_connect(&o, &cl);
	if (rc)
		return fail("connect", rc);
	if ((rc = lotus_session_open(cl, &s)))
		return fail("session", rc);
	if ((rc = lotus_table_open(s, ytd ? "tpcc_district" : "tpcc_new_order", &tb)))
		return fail("table", rc);
	if ((rc = lotus_txn_begin(s, &t)))
		return fail("begin", rc);
	unsigned char k[7] = { (unsigned char)(w >> 8), (unsigned char)w, (unsigned char)d };
	const void *v, *key;
	size_t vlen, klen;
	if (ytd) {
		int op = lotus_txn_read_for_update(t, tb, k, 3);
		if ((rc = lotus_txn_execute(t)) || (rc = lotus_txn_result(t, op, &v, &vlen)))
			return fail("read the district", rc);
		unsigned char row[1024];
		int64_t y;
		if (vlen > sizeof(row) || vlen < 8)
			return fail("district row size", LOTUS_EPROTO);
		memcpy(row, v, vlen);
		memcpy(&y, row, 8);
		y += atoll(argv[5]);
		memcpy(row, &y, 8);
		lotus_txn_write(t, tb, k, 3, row, vlen);
	} else {
		int op = lotus_txn_scan(t, tb, k, 3, 2);
		if ((rc = lotus_txn_execute(t)))
			return fail("scan NEW-ORDER", rc);
		if (lotus_txn_scan_rows(t, op) != 2 ||
		    (rc = lotus_txn_scan_row(t, op, 1, &key, &klen, &v, &vlen)) || klen != 7 ||
		    memcmp(key, k, 3))
			return fail("the district's second NEW-ORDER row", rc ? rc : LOTUS_ENOTFOUND);
		memcpy(k, key, 7);
		lotus_txn_delete(t, tb, k, 7);
	}
	if ((rc = lotus_txn_commit(t)))
		return fail("commit", rc);
	lotus_txn_free(t);
	lotus_session_close(s);
	lotus_disconnect(cl);
	return 0;
}
