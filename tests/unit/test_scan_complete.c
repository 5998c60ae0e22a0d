/*
 * test_scan_complete.c - a scan returns exactly min(count, rows that exist)
 * rows, in key order, merged across 1-3 memory servers, however far past the
 * servers' per-reply caps (rows and bytes) it reaches.  Keys r00000..r04999
 * (the reproduction: 5000 keys over 2 servers, then a scan from "r"
 * of 3000 rows gave 2000 and skipped keys); then rows of 60 KiB, so that the
 * servers' byte budget caps the replies long before the row cap; and a key
 * deleted while the scan waits for its lock.
 */
#include "testutil.h"

#define NKEYS 5000

static void mkkey(char *k, unsigned i)
{
	snprintf(k, 8, "r%05u", i % 100000);   /* always 6 bytes */
}

static void load(lotus_session_t *s, lotus_table_t tb, unsigned n, size_t vlen)
{
	static unsigned char v[60 * 1024];
	lotus_txn_t *t;
	char k[8];
	CHECK_RC(lotus_txn_begin(s, &t));
	for (unsigned i = 0; i < n; i++) {
		mkkey(k, i);
		memset(v, 'a' + i % 26, vlen);
		memcpy(v, k, 6);
		CHECK_RC(lotus_txn_insert(t, tb, k, 6, v, vlen));
		if (i % 250 == 249 || i == n - 1) {
			CHECK_RC(lotus_txn_commit(t));
			CHECK_RC(lotus_txn_recycle(t));
		}
	}
	lotus_txn_free(t);
}

/* Scan count rows from start; the first key >= start is first. */
static void scan(lotus_session_t *s, lotus_table_t tb, const char *start, unsigned first,
		 unsigned n, unsigned count, size_t vlen, unsigned nservers)
{
	lotus_txn_t *t;
	CHECK_RC(lotus_txn_begin(s, &t));
	int op = lotus_txn_scan(t, tb, start, strlen(start), count);
	CHECK_RC(op);
	CHECK_RC(lotus_txn_execute(t));
	int rows = lotus_txn_scan_rows(t, op);
	unsigned want = first >= n ? 0 : n - first < count ? n - first : count;
	if (rows != (int)want) {
		fprintf(stderr, "%u servers: scan from \"%s\" count %u gave %d rows, want %u\n",
			nservers, start, count, rows, want);
		exit(1);
	}
	for (unsigned i = 0; i < want; i++) {
		const void *key, *val;
		size_t klen, vl;
		char k[8];
		CHECK_RC(lotus_txn_scan_row(t, op, i, &key, &klen, &val, &vl));
		mkkey(k, first + i);
		if (klen != 6 || memcmp(key, k, 6)) {
			fprintf(stderr, "%u servers: scan from \"%s\" count %u: row %u is %.*s, "
				"want %s\n", nservers, start, count, i, (int)klen,
				(const char *)key, k);
			exit(1);
		}
		CHECK(vl == vlen && !memcmp(val, k, 6) &&
		      ((const unsigned char *)val)[vl - 1] == 'a' + (first + i) % 26);
	}
	CHECK_RC(lotus_txn_commit(t));
	lotus_txn_free(t);
}

static void run(unsigned nservers, enum lotus_cc cc, enum lotus_batch batch)
{
	static const unsigned counts[] = { 0, 1, 999, 1000, 1001, 2999, 3000, 5000, 6000 };
	static const struct { const char *start; unsigned first; } starts[] = {
		{ "r", 0 }, { "r00000", 0 }, { "r02500", 2500 }, { "r024995", 2500 },
		{ "r04990", 4990 }, { "s", NKEYS },
	};
	lotus_cluster_t *cl = test_cluster((int)nservers, "tcp", cc, batch);
	lotus_session_t *s;
	lotus_table_t tb, big;
	CHECK_RC(lotus_session_open(cl, &s));
	CHECK_RC(lotus_table_create(s, "scan", 16, &tb));
	load(s, tb, NKEYS, 16);
	for (size_t i = 0; i < sizeof(starts) / sizeof(starts[0]); i++)
		for (size_t j = 0; j < sizeof(counts) / sizeof(counts[0]); j++)
			scan(s, tb, starts[i].start, starts[i].first, NKEYS, counts[j], 16, nservers);
	/* 200 rows of 60 KiB: about 70 fit one reply */
	CHECK_RC(lotus_table_create(s, "big", 60 * 1024, &big));
	load(s, big, 200, 60 * 1024);
	scan(s, big, "r", 0, 200, 200, 60 * 1024, nservers);
	scan(s, big, "r00050", 50, 200, 120, 60 * 1024, nservers);
	lotus_session_close(s);
	lotus_disconnect(cl);
}

/* A key of the scanned range is deleted while the scan waits for its lock
 * (WAIT_DIE: the older scan waits for the younger deleter): the server
 * finds one row fewer than it collected, and the scan must still return
 * count rows, the next key included. */
static int scan_done, scan_result;
static void on_done(lotus_txn_t *t, int result, void *arg)
{
	scan_done++;
	scan_result = result;
}

static void delete_while_scanning(void)
{
	lotus_cluster_t *cl = test_cluster(1, "tcp", LOTUS_WAIT_DIE, LOTUS_BATCH_INTRA);
	lotus_session_t *s;
	lotus_table_t tb;
	lotus_txn_t *scanner, *deleter;
	char k[8];
	CHECK_RC(lotus_session_open(cl, &s));
	CHECK_RC(lotus_table_create(s, "race", 16, &tb));
	load(s, tb, 20, 16);
	CHECK_RC(lotus_txn_begin(s, &scanner));   /* older: it waits */
	CHECK_RC(lotus_txn_begin(s, &deleter));
	mkkey(k, 5);
	CHECK_RC(lotus_txn_delete(deleter, tb, k, 6));
	CHECK_RC(lotus_txn_execute(deleter));
	int op = lotus_txn_scan(scanner, tb, "r", 1, 10);
	CHECK_RC(lotus_txn_execute_async(scanner, on_done, NULL));
	for (int i = 0; i < 20; i++)
		lotus_session_poll(s, 5);            /* the scan is parked on r00005 */
	CHECK_RC(lotus_txn_commit(deleter));
	for (int i = 0; i < 1000 && !scan_done; i++)
		lotus_session_poll(s, 10);
	CHECK(scan_done == 1 && scan_result == 0);
	int rc = lotus_txn_scan_rows(scanner, op);
	if (rc != 10) {
		fprintf(stderr, "scan that waited for a deleted key gave %d rows, want 10\n", rc);
		exit(1);
	}
	const void *key, *v;
	size_t kl, vl;
	CHECK_RC(lotus_txn_scan_row(scanner, op, 9, &key, &kl, &v, &vl));
	CHECK(kl == 6 && !memcmp(key, "r00010", 6));
	CHECK_RC(lotus_txn_commit(scanner));
	lotus_txn_free(scanner);
	lotus_txn_free(deleter);
	lotus_session_close(s);
	lotus_disconnect(cl);
}

int main(void)
{
	delete_while_scanning();
	for (unsigned n = 1; n <= 3; n++)
		run(n, LOTUS_NO_WAIT, LOTUS_BATCH_INTRA);
	/* continuations through the other batching paths */
	run(2, LOTUS_WAIT_DIE, LOTUS_BATCH_NONE);
	run(2, LOTUS_WOUND_WAIT, LOTUS_BATCH_INTER);
	printf("ok\n");
	return 0;
}
