/*
 * test_scan_order.c - scans over a 2-server cluster return keys in order,
 * starting at the first key >= start, exactly the keys that exist, with
 * their values; deleted keys disappear from later scans.
 */
#include "common/common.h"
#include "common/ycsb_gen.h"
#include "testutil.h"

#define KEYS 600

static void check_scan(lotus_txn_t *t, lotus_table_t tb, uint64_t start, unsigned count,
		       const unsigned char *present)
{
	unsigned char k[8];
	key_from_u64(start, k);
	CHECK_RC(lotus_txn_recycle(t));
	int op = lotus_txn_scan(t, tb, k, 8, count);
	CHECK_RC(lotus_txn_execute(t));
	int rows = lotus_txn_scan_rows(t, op);
	CHECK_RC(rows);
	uint64_t want = start;
	unsigned got = 0;
	for (int i = 0; i < rows; i++) {
		const void *key, *val;
		size_t klen, vlen;
		CHECK_RC(lotus_txn_scan_row(t, op, (unsigned)i, &key, &klen, &val, &vlen));
		CHECK(klen == 8 && vlen == 8);
		uint64_t id = key_to_u64(key);
		while (want < KEYS * 3 && !present[want])
			want++;
		CHECK(id == want);             /* in order, nothing skipped */
		uint64_t v;
		memcpy(&v, val, 8);
		CHECK(v == id * 7);
		want++;
		got++;
	}
	unsigned expect = 0;
	for (uint64_t i = start; i < KEYS * 3 && expect < count; i++)
		expect += present[i];
	CHECK(got == expect);
	CHECK_RC(lotus_txn_commit(t));
}

static void run(const char *transport)
{
	static unsigned char present[KEYS * 3];
	lotus_cluster_t *cl = test_cluster(2, transport, LOTUS_NO_WAIT, LOTUS_BATCH_INTRA);
	lotus_session_t *s;
	lotus_txn_t *t;
	lotus_table_t tb;
	struct rng r;
	rng_seed(&r, 7);
	memset(present, 0, sizeof(present));
	CHECK_RC(lotus_session_open(cl, &s));
	CHECK_RC(lotus_table_create(s, "scan", 8, &tb));
	CHECK_RC(lotus_txn_begin(s, &t));
	for (uint64_t i = 0; i < KEYS; i++) {
		uint64_t id = i * 3, v = id * 7;
		unsigned char k[8];
		key_from_u64(id, k);
		CHECK_RC(lotus_txn_insert(t, tb, k, 8, &v, 8));
		present[id] = 1;
		if (i % 100 == 99) {
			CHECK_RC(lotus_txn_commit(t));
			CHECK_RC(lotus_txn_recycle(t));
		}
	}
	for (int i = 0; i < 40; i++)
		check_scan(t, tb, rng_below(&r, KEYS * 3), 1 + (unsigned)rng_below(&r, 100), present);
	/* delete a stretch and scan across it */
	CHECK_RC(lotus_txn_recycle(t));
	for (uint64_t id = 300; id < 360; id += 3) {
		unsigned char k[8];
		key_from_u64(id, k);
		CHECK_RC(lotus_txn_delete(t, tb, k, 8));
		present[id] = 0;
	}
	CHECK_RC(lotus_txn_commit(t));
	check_scan(t, tb, 290, 30, present);
	check_scan(t, tb, 0, 100, present);
	lotus_txn_free(t);
	lotus_session_close(s);
	lotus_disconnect(cl);
}

int main(void)
{
	for (int i = 0; test_transport(i); i++)
		run(test_transport(i));
	printf("ok\n");
	return 0;
}
