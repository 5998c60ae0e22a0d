/*
 * test_commit_max.c - the largest commit a message carries (WIRE_MAX_MSG,
 * 16 MiB): a transaction that writes 200 values of 64 KiB (12.8 MiB) on one
 * server commits and reads back; one that writes 300 (19.2 MiB) fails with
 * LOTUS_ETOOBIG, applies nothing, and the server serves on.
 */
#include "common/common.h"
#include "common/ycsb_gen.h"
#include "testutil.h"

#define VMAX (64u * 1024)

static int write_n(lotus_session_t *s, lotus_table_t tb, uint64_t base, unsigned n)
{
	static unsigned char v[VMAX];
	lotus_txn_t *t;
	CHECK_RC(lotus_txn_begin(s, &t));
	for (unsigned i = 0; i < n; i++) {
		unsigned char k[8];
		key_from_u64(base + i, k);
		memset(v, (int)(i & 0xff), 16);
		CHECK_RC(lotus_txn_write(t, tb, k, 8, v, VMAX));
	}
	int rc = lotus_txn_commit(t);
	if (rc)
		lotus_txn_abort(t);
	lotus_txn_free(t);
	return rc;
}

static int read_one(lotus_session_t *s, lotus_table_t tb, uint64_t key)
{
	lotus_txn_t *t;
	unsigned char k[8];
	key_from_u64(key, k);
	CHECK_RC(lotus_txn_begin(s, &t));
	int op = lotus_txn_read(t, tb, k, 8);
	CHECK_RC(lotus_txn_execute(t));
	int rc = lotus_txn_result(t, op, NULL, NULL);
	CHECK_RC(lotus_txn_commit(t));
	lotus_txn_free(t);
	return rc;
}

int main(void)
{
	lotus_cluster_t *cl = test_cluster(1, "tcp", LOTUS_NO_WAIT, LOTUS_BATCH_INTRA);
	lotus_session_t *s;
	lotus_table_t tb;
	CHECK_RC(lotus_session_open(cl, &s));
	CHECK_RC(lotus_table_create(s, "big", VMAX, &tb));
	int rc = write_n(s, tb, 0, 200);
	fprintf(stderr, "commit of 200 x 64 KiB: %s\n", lotus_strerror(rc));
	CHECK_RC(rc);
	CHECK(read_one(s, tb, 199) == 0);
	rc = write_n(s, tb, 1000, 300);
	fprintf(stderr, "commit of 300 x 64 KiB: %s\n", lotus_strerror(rc));
	CHECK(rc == LOTUS_ETOOBIG);
	CHECK(read_one(s, tb, 1000) == LOTUS_ENOTFOUND);
	CHECK(read_one(s, tb, 1299) == LOTUS_ENOTFOUND);
	CHECK(write_n(s, tb, 2000, 10) == 0);
	CHECK(read_one(s, tb, 2009) == 0);
	lotus_session_close(s);
	lotus_disconnect(cl);
	printf("ok\n");
	return 0;
}
