/*
 * test_txn_sticky.c - errors on a transaction are sticky (lotus.h): after a
 * staging call fails (a value larger than the table's maximum, a key too
 * long, an unknown table), execute and commit fail too and nothing of the
 * transaction lands; lotus_txn_abort() then lotus_txn_restart() make the
 * object usable again.
 */
#include "testutil.h"

static int read_key(lotus_session_t *s, lotus_table_t tb, const char *key, char *out, size_t cap)
{
	lotus_txn_t *t;
	const void *v;
	size_t vlen;
	CHECK_RC(lotus_txn_begin(s, &t));
	int op = lotus_txn_read(t, tb, key, strlen(key));
	CHECK_RC(op);
	CHECK_RC(lotus_txn_execute(t));
	int rc = lotus_txn_result(t, op, &v, &vlen);
	if (rc == 0) {
		CHECK(vlen < cap);
		memcpy(out, v, vlen);
		out[vlen] = 0;
	}
	CHECK_RC(lotus_txn_commit(t));
	lotus_txn_free(t);
	return rc;
}

/* bad: 0 value too large, 1 key too long, 2 no such table; bad_first: stage
 * the bad call before the good write; exec: probe execute and read after the
 * failed call (and execute the good write before it, if it came first). */
static void one(lotus_session_t *s, lotus_table_t tb, int bad, int bad_first, int exec)
{
	static char big[300], longkey[200];
	char key[48], got[64];
	lotus_txn_t *t;
	memset(big, 'b', sizeof(big));
	memset(longkey, 'k', sizeof(longkey));
	snprintf(key, sizeof(key), "good-%d-%d-%d", bad, bad_first, exec);
	CHECK_RC(lotus_txn_begin(s, &t));
	for (int pass = 0; pass < 2; pass++) {
		if (pass == (bad_first ? 1 : 0)) {
			/* after the failed call, this one may already be refused */
			int rc = lotus_txn_write(t, tb, key, strlen(key), "good", 4);
			if (!bad_first)
				CHECK_RC(rc);
			if (exec && !bad_first)
				CHECK_RC(lotus_txn_execute(t));
			continue;
		}
		int rc = bad == 0   ? lotus_txn_write(t, tb, "x", 1, big, sizeof(big))
			 : bad == 1 ? lotus_txn_insert(t, tb, longkey, sizeof(longkey), "v", 1)
				    : lotus_txn_write(t, tb + 7, "x", 1, "v", 1);
		CHECK(rc < 0);
	}
	/* the transaction is doomed: every further step is refused */
	if (exec) {
		CHECK(lotus_txn_read(t, tb, key, strlen(key)) < 0);
		CHECK(lotus_txn_execute(t) < 0);
	}
	int rc = lotus_txn_commit(t);
	if (rc == 0) {
		fprintf(stderr, "commit after a failed staging call (bad %d bad_first %d exec %d) "
				"succeeded\n", bad, bad_first, exec);
		exit(1);
	}
	CHECK_RC(lotus_txn_abort(t));
	CHECK(read_key(s, tb, key, got, sizeof(got)) == LOTUS_ENOTFOUND);
	/* abort + restart gives a working transaction again */
	CHECK_RC(lotus_txn_restart(t));
	CHECK_RC(lotus_txn_write(t, tb, key, strlen(key), "again", 5));
	CHECK_RC(lotus_txn_commit(t));
	CHECK(read_key(s, tb, key, got, sizeof(got)) == 0 && !strcmp(got, "again"));
	lotus_txn_free(t);
}

int main(void)
{
	lotus_cluster_t *cl = test_cluster(2, "tcp", LOTUS_NO_WAIT, LOTUS_BATCH_INTRA);
	lotus_session_t *s;
	lotus_table_t tb;
	CHECK_RC(lotus_session_open(cl, &s));
	CHECK_RC(lotus_table_create(s, "sticky", 100, &tb));
	for (int bad = 0; bad < 3; bad++)
		for (int bad_first = 0; bad_first < 2; bad_first++)
			for (int exec = 0; exec < 2; exec++)
				one(s, tb, bad, bad_first, exec);
	lotus_session_close(s);
	lotus_disconnect(cl);
	printf("ok\n");
	return 0;
}
