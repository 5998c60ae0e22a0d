/*
 * tpcc_corrupt.c - breaks consistency conditions of a `lotus tpcc` database
 * through the public API, the way a faulty client would, so that
 * tests/integration/tpcc_check.sh can see `lotus tpcc --check` catch each:
 *   tpcc-corrupt CONFIG ytd W D DELTA   adds DELTA cents to D_YTD of district
 *                                       (W, D) (conditions 1 and 9)
 *   tpcc-corrupt CONFIG no W D          deletes the district's second
 *                                       NEW-ORDER row (3 and 5)
 *   tpcc-corrupt CONFIG olcnt W D       O_OL_CNT + 1 of order 1, - 1 of order
 *                                       2: the sum stays (6 alone)
 *   tpcc-corrupt CONFIG oldel W D       nulls OL_DELIVERY_D of order 1's first
 *                                       line (7 alone on a fresh load, whose
 *                                       delivered lines have OL_AMOUNT 0)
 *   tpcc-corrupt CONFIG hamount W D C   H_AMOUNT + 1 of customer C's first
 *                                       HISTORY row (8, 9 and 10)
 *   tpcc-corrupt CONFIG cytd W D C      C_YTD_PAYMENT + 1 of customer C (12)
 * With -w first (tpcc-corrupt -w CONFIG ...) it reaches a database loaded
 * with --placement warehouse: the tables placed by their W(2) prefix.
 * It knows only what docs/tpcc.md documents: the key encoding (big-endian
 * W(2) D(1) [O(4) [OL(1)]], CUSTOMER W D C(2), HISTORY W D C ...), the
 * placement rule, and the offsets of the fields it changes in rows of the
 * client's byte order: D_YTD int64 at 0 of a district row, O_OL_CNT byte at
 * 11 of an order row, OL_DELIVERY_D int64 at 0 of a line, H_AMOUNT int64 at
 * 16 of a history row, C_YTD_PAYMENT int64 at 16 of a customer row.
 * Exit 0 done, 1 error, 2 usage.
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

static const struct {
	const char *name, *table;
	int args;                 /* after CONFIG and the mode */
} modes[] = {
	{ "ytd", "tpcc_district", 3 }, { "no", "tpcc_new_order", 2 },
	{ "olcnt", "tpcc_order", 2 },
	{ "oldel", "tpcc_order_line", 2 }, { "hamount", "tpcc_history", 3 },
	{ "cytd", "tpcc_customer", 3 },
};

/* Read key (klen) for update, add delta to the int64 or byte at off, write. */
static int bump(lotus_txn_t *t, lotus_table_t tb, const unsigned char *k, size_t klen, size_t off,
		int64_t delta, bool byte)
{
	const void *v;
	size_t vlen;
	unsigned char row[1024];
	int op = lotus_txn_read_for_update(t, tb, k, klen);
	int rc = op < 0 ? op : lotus_txn_execute(t);
	if (rc || (rc = lotus_txn_result(t, op, &v, &vlen)))
		return rc;
	if (vlen > sizeof(row) || vlen < off + (byte ? 1 : 8))
		return LOTUS_EPROTO;
	memcpy(row, v, vlen);
	if (byte) {
		row[off] = (unsigned char)(row[off] + delta);
	} else {
		int64_t x;
		memcpy(&x, row + off, 8);
		x = delta == INT64_MIN ? 0 : x + delta;
		memcpy(row + off, &x, 8);
	}
	op = lotus_txn_write(t, tb, k, klen, row, vlen);
	return op < 0 ? op : 0;
}

int main(int argc, char **argv)
{
	static const struct lotus_placement by_w[] = {
		{ "tpcc_*", 0, 2, LOTUS_PLACE_SCAN_LOCAL },
	};
	bool place_w = argc > 1 && strcmp(argv[1], "-w") == 0;
	if (place_w) {
		argc--;
		argv++;
	}
	int m = -1;
	for (int i = 0; argc > 2 && i < (int)(sizeof(modes) / sizeof(modes[0])); i++)
		if (!strcmp(argv[2], modes[i].name) && argc == 3 + modes[i].args)
			m = i;
	if (m < 0) {
		fprintf(stderr, "usage: tpcc-corrupt [-w] CONFIG ytd W D DELTA | no W D"
			" | olcnt W D | oldel W D | hamount W D C | cytd W D C\n");
		return 2;
	}
	const char *mode = modes[m].name;
	unsigned w = (unsigned)atoi(argv[3]), d = (unsigned)atoi(argv[4]);
	unsigned c = modes[m].args == 3 ? (unsigned)atoi(argv[5]) : 0;
	struct lotus_options o;
	lotus_options_init(&o);
	o.config_path = argv[1];
	if (place_w) {   /* ITEM and META are not touched: one rule for the rest */
		o.placement = by_w;
		o.nplacement = 1;
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
	if ((rc = lotus_table_open(s, modes[m].table, &tb)))
		return fail("table", rc);
	if ((rc = lotus_txn_begin(s, &t)))
		return fail("begin", rc);
	unsigned char k[16] = { (unsigned char)(w >> 8), (unsigned char)w, (unsigned char)d };
	const void *v, *key;
	size_t vlen, klen;
	if (!strcmp(mode, "ytd")) {
		rc = bump(t, tb, k, 3, 0, atoll(argv[5]), false);
	} else if (!strcmp(mode, "no")) {
		int op = lotus_txn_scan(t, tb, k, 3, 2);
		if ((rc = lotus_txn_execute(t)))
			return fail("scan NEW-ORDER", rc);
		if (lotus_txn_scan_rows(t, op) != 2 ||
		    (rc = lotus_txn_scan_row(t, op, 1, &key, &klen, &v, &vlen)) || klen != 7 ||
		    memcmp(key, k, 3))
			return fail("the district's NEW-ORDER rows", rc ? rc : LOTUS_ENOTFOUND);
		memcpy(k, key, 7);
		lotus_txn_delete(t, tb, k, 7);
	} else if (!strcmp(mode, "olcnt")) {
		k[6] = 1;                        /* O_ID 1, then 2 */
		rc = bump(t, tb, k, 7, 11, 1, true);
		k[6] = 2;
		rc = rc ? rc : bump(t, tb, k, 7, 11, -1, true);
	} else if (!strcmp(mode, "oldel")) {
		k[6] = 1;                        /* O_ID 1, OL_NUMBER 1 */
		k[7] = 1;
		rc = bump(t, tb, k, 8, 0, INT64_MIN, false);
	} else if (!strcmp(mode, "hamount")) {
		k[3] = (unsigned char)(c >> 8);
		k[4] = (unsigned char)c;
		int op = lotus_txn_scan(t, tb, k, 5, 1);
		if ((rc = lotus_txn_execute(t)))
			return fail("scan HISTORY", rc);
		if (lotus_txn_scan_rows(t, op) != 1 ||
		    (rc = lotus_txn_scan_row(t, op, 0, &key, &klen, &v, &vlen)) || klen != 15 ||
		    memcmp(key, k, 5))
			return fail("the customer's HISTORY row", rc ? rc : LOTUS_ENOTFOUND);
		memcpy(k, key, 15);
		rc = bump(t, tb, k, 15, 16, 1, false);
	} else {                                 /* cytd */
		k[3] = (unsigned char)(c >> 8);
		k[4] = (unsigned char)c;
		rc = bump(t, tb, k, 5, 16, 1, false);
	}
	if (rc)
		return fail(mode, rc);
	if ((rc = lotus_txn_commit(t)))
		return fail("commit", rc);
	lotus_txn_free(t);
	lotus_session_close(s);
	lotus_disconnect(cl);
	return 0;
}
