/*
 * test_onesided_delscan.c - deletes and scans on the one-sided engine, from
 * the public API (lotus.h only) against real local memory servers, on shared
 * memory and tcp:
 *   - a fresh table filled by one-sided inserts past its first region chunk
 *     (on sm: the servers add chunks, the inserting session learns them as
 *     it asks) reads back whole from another session that attached before
 *     the chunks were added (it learns them when it meets their addresses);
 *   - a deleted key reads as not found, a key deleted twice or never there
 *     is not found in the delete's result, and a deleted key inserted again
 *     reads its new value;
 *   - a scan returns exactly the live keys at or after its start, in order,
 *     with their values, up to its count (merged from both servers), and
 *     past the last key fewer;
 *   - a scan S-locks the rows it returns: under NO_WAIT another session's
 *     write of such a row, and its delete, abort until the scan commits.
 */
#include "testutil.h"

/* keys [0, N): on sm 20,000 64-byte records, 10,000 a server, past the
 * first region chunk (room for 4,096 and pages); on tcp (emulated RMA, some
 * 100 times slower) fewer */
static uint64_t N;
#define VLEN 32
#define DEL  600        /* keys below DEL that are multiples of 3 are deleted */

static lotus_cluster_t *connect_onesided(const char *transport)
{
	struct lotus_options o;
	lotus_cluster_t *c = NULL;
	if (!getenv("LOTUS_BIN")) {
		printf("skip: LOTUS_BIN is not set (run through tests/run)\n");
		exit(77);
	}
	lotus_options_init(&o);
	o.local_servers = 2;
	o.transport = transport;
	o.cc = LOTUS_NO_WAIT;
	o.server_threads = 1;
	o.server_memory = 64ULL << 20;
	o.engine = LOTUS_ENGINE_ONESIDED;
	int rc = lotus_connect(&o, &c);
	if (rc) {
		fprintf(stderr, "lotus_connect(%s): %s\n", transport, lotus_strerror(rc));
		exit(1);
	}
	return c;
}

/* YCSB's keys: 8 bytes, big-endian (the one-sided engine takes those only). */
static void key_of(uint64_t v, unsigned char out[8])
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		out[i] = (unsigned char)v;
}

static void value_of(uint64_t k, uint64_t gen, unsigned char v[VLEN])
{
	for (unsigned b = 0; b < VLEN; b += 16) {
		memcpy(v + b, &k, 8);
		memcpy(v + b + 8, &gen, 8);
	}
}

static int deleted(uint64_t k)
{
	return k < DEL && k % 3 == 0;
}

/* Run one staged transaction to its commit, retrying conflicts. */
typedef void (*stage_fn)(lotus_txn_t *t, lotus_table_t tb, uint64_t arg);

static void run(lotus_txn_t *t, lotus_table_t tb, stage_fn f, uint64_t arg)
{
	for (int tries = 0; tries < 100; tries++) {
		CHECK_RC(lotus_txn_recycle(t));
		f(t, tb, arg);
		int rc = lotus_txn_commit(t);
		if (rc == 0)
			return;
		CHECK(lotus_err_retryable(rc));
	}
	CHECK(!"a transaction kept aborting");
}

static void stage_insert(lotus_txn_t *t, lotus_table_t tb, uint64_t from)
{
	unsigned char k[8], v[VLEN];
	for (uint64_t i = from; i < from + 100 && i < N; i++) {
		key_of(i, k);
		value_of(i, 0, v);
		CHECK(lotus_txn_insert(t, tb, k, 8, v, VLEN) >= 0);
	}
}

static void stage_delete(lotus_txn_t *t, lotus_table_t tb, uint64_t from)
{
	unsigned char k[8];
	for (uint64_t i = from; i < from + 30; i += 3) {
		key_of(i, k);
		CHECK(lotus_txn_delete(t, tb, k, 8) >= 0);
	}
}

static void check_reads(lotus_session_t *s, lotus_table_t tb, uint64_t from, uint64_t to)
{
	lotus_txn_t *t;
	unsigned char k[8], want[VLEN];
	CHECK_RC(lotus_txn_begin(s, &t));
	for (uint64_t i = from; i < to; i += 200) {
		uint64_t n = to - i < 200 ? to - i : 200;
		CHECK_RC(lotus_txn_recycle(t));
		for (uint64_t j = 0; j < n; j++) {
			key_of(i + j, k);
			CHECK(lotus_txn_read(t, tb, k, 8) == (int)j);
		}
		CHECK_RC(lotus_txn_execute(t));
		for (uint64_t j = 0; j < n; j++) {
			const void *v;
			size_t vlen;
			int rc = lotus_txn_result(t, (int)j, &v, &vlen);
			if (deleted(i + j)) {
				CHECK_EQ(rc, LOTUS_ENOTFOUND);
				continue;
			}
			CHECK_RC(rc);
			CHECK_EQ(vlen, VLEN);
			value_of(i + j, 0, want);
			CHECK(memcmp(v, want, VLEN) == 0);
		}
		CHECK_RC(lotus_txn_commit(t));
	}
	lotus_txn_free(t);
}

/* Scan count rows from start and check them against the model. */
static void check_scan(lotus_txn_t *t, lotus_table_t tb, uint64_t start, unsigned count)
{
	unsigned char k[8], want[VLEN];
	key_of(start, k);
	CHECK_RC(lotus_txn_recycle(t));
	int op = lotus_txn_scan(t, tb, k, 8, count);
	CHECK(op >= 0);
	CHECK_RC(lotus_txn_execute(t));
	uint64_t next = start;
	unsigned i = 0;
	for (; i < count && next < N; next++) {
		if (deleted(next))
			continue;
		const void *key, *v;
		size_t klen, vlen;
		CHECK_RC(lotus_txn_scan_row(t, op, i, &key, &klen, &v, &vlen));
		key_of(next, k);
		CHECK_EQ(klen, 8);
		if (memcmp(key, k, 8) != 0)
			fprintf(stderr, "scan from %llu: row %u is not key %llu\n",
				(unsigned long long)start, i, (unsigned long long)next);
		CHECK(memcmp(key, k, 8) == 0);
		value_of(next, 0, want);
		CHECK(vlen == VLEN && memcmp(v, want, VLEN) == 0);
		i++;
	}
	CHECK_EQ(lotus_txn_scan_rows(t, op), i);
	CHECK_RC(lotus_txn_commit(t));
}

static void scenario(const char *transport)
{
	N = strcmp(transport, "sm") == 0 ? 20000 : 1000;
	lotus_cluster_t *cl = connect_onesided(transport);
	lotus_session_t *s, *s2;
	lotus_table_t tb;
	lotus_txn_t *t, *t2;
	unsigned char k[8], v[VLEN];
	const void *rv;
	size_t rlen;
	int op;
	CHECK_RC(lotus_session_open(cl, &s));
	CHECK_RC(lotus_session_open(cl, &s2));
	CHECK_RC(lotus_table_create(s, "ds", VLEN, &tb));
	CHECK_RC(lotus_txn_begin(s, &t));
	CHECK_RC(lotus_txn_begin(s2, &t2));

	/* s2 attaches the fresh table (a read of a key not there yet) */
	CHECK_RC(lotus_txn_recycle(t2));
	key_of(0, k);
	op = lotus_txn_read(t2, tb, k, 8);
	CHECK_RC(lotus_txn_execute(t2));
	CHECK_EQ(lotus_txn_result(t2, op, &rv, &rlen), LOTUS_ENOTFOUND);
	CHECK_RC(lotus_txn_commit(t2));
	/* then s fills it by one-sided inserts past the first chunk */
	for (uint64_t i = 0; i < N; i += 100)
		run(t, tb, stage_insert, i);
	for (uint64_t i = 0; i < DEL; i += 30)
		run(t, tb, stage_delete, i);
	check_reads(s2, tb, 0, N);

	/* deleting a deleted key, or one never there: not found, commits */
	CHECK_RC(lotus_txn_recycle(t));
	key_of(3, k);
	op = lotus_txn_delete(t, tb, k, 8);
	key_of(N + 5, k);
	int op2 = lotus_txn_delete(t, tb, k, 8);
	CHECK_RC(lotus_txn_execute(t));
	CHECK_EQ(lotus_txn_result(t, op, &rv, &rlen), LOTUS_ENOTFOUND);
	CHECK_EQ(lotus_txn_result(t, op2, &rv, &rlen), LOTUS_ENOTFOUND);
	CHECK_RC(lotus_txn_commit(t));

	/* scans: across deleted keys, both servers merged, and off the end */
	check_scan(t, tb, 0, 50);
	check_scan(t, tb, 100, 100);
	check_scan(t, tb, 590, 40);
	check_scan(t, tb, N / 2, 1);
	check_scan(t, tb, N - 10, 50);

	/* a scan's rows are S-locked: a write and a delete of one abort (NO_WAIT) */
	key_of(N / 2, k);
	CHECK_RC(lotus_txn_recycle(t));
	CHECK(lotus_txn_scan(t, tb, k, 8, 20) >= 0);
	CHECK_RC(lotus_txn_execute(t));
	key_of(N / 2 + 11, k);
	CHECK_RC(lotus_txn_recycle(t2));
	value_of(N / 2 + 11, 7, v);
	CHECK(lotus_txn_write(t2, tb, k, 8, v, VLEN) >= 0);
	CHECK_EQ(lotus_txn_execute(t2), LOTUS_EABORTED);
	lotus_txn_abort(t2);
	CHECK_RC(lotus_txn_recycle(t2));
	CHECK(lotus_txn_delete(t2, tb, k, 8) >= 0);
	CHECK_EQ(lotus_txn_execute(t2), LOTUS_EABORTED);
	lotus_txn_abort(t2);
	CHECK_RC(lotus_txn_commit(t));
	CHECK_RC(lotus_txn_recycle(t2));   /* the scan is done: the write goes in */
	CHECK(lotus_txn_write(t2, tb, k, 8, v, VLEN) >= 0);
	CHECK_RC(lotus_txn_commit(t2));

	/* a deleted key inserted again reads its new value */
	CHECK_RC(lotus_txn_recycle(t));
	key_of(6, k);
	value_of(6, 9, v);
	CHECK(lotus_txn_insert(t, tb, k, 8, v, VLEN) >= 0);
	CHECK_RC(lotus_txn_commit(t));
	CHECK_RC(lotus_txn_recycle(t2));
	op = lotus_txn_read(t2, tb, k, 8);
	CHECK_RC(lotus_txn_execute(t2));
	CHECK_RC(lotus_txn_result(t2, op, &rv, &rlen));
	CHECK(rlen == VLEN && memcmp(rv, v, VLEN) == 0);
	CHECK_RC(lotus_txn_commit(t2));

	lotus_txn_free(t);
	lotus_txn_free(t2);
	lotus_session_close(s2);
	lotus_session_close(s);
	lotus_disconnect(cl);
}

int main(void)
{
	const char *env = getenv("LOTUS_TEST_TRANSPORTS");
	if (env && *env) {
		char buf[64];
		snprintf(buf, sizeof(buf), "%s", env);
		for (char *tr = strtok(buf, ","); tr; tr = strtok(NULL, ","))
			scenario(tr);
	} else {
		scenario("sm");
		scenario("tcp");
	}
	printf("ok\n");
	return 0;
}
