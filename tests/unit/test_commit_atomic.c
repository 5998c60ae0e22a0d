/*
 * test_commit_atomic.c - a commit that runs out of space on its memory server
 * is all or nothing, and the server keeps working:
 *
 *   1. one server (--threads 1 --memory 4M); transactions of 50 inserts of
 *      4000 B, each also updating one record of the first transaction, until
 *      a commit fails.  It must fail with LOTUS_ENOSPACE, and afterwards none
 *      of its 50 keys and not its update may be visible; every acknowledged
 *      key must be there.
 *   2. reads still work, a write that needs no new slot (an update) still
 *      commits, and once two transactions' keys are deleted a new 50-insert
 *      transaction commits again.
 *   3. the same with concurrency: a server with 2 worker threads, 4 client
 *      threads committing 20-insert transactions until each has seen
 *      ENOSPACE; no failed transaction may have left a key behind (the
 *      space check must be atomic against the other workers' commits).
 */
#include <pthread.h>
#include <stdatomic.h>
#include "common/common.h"
#include "common/ycsb_gen.h"
#include "testutil.h"

#define VLEN 4000
#define PER_TXN 50
#define MAX_TXNS 200

static lotus_cluster_t *connect_one(unsigned threads, uint64_t memory)
{
	struct lotus_options o;
	lotus_cluster_t *c = NULL;
	if (!getenv("LOTUS_BIN")) {
		printf("skip: LOTUS_BIN is not set (run through tests/run)\n");
		exit(77);
	}
	lotus_options_init(&o);
	o.local_servers = 1;
	o.transport = "tcp";
	o.server_threads = threads;
	o.server_memory = memory;
	CHECK_RC(lotus_connect(&o, &c));
	return c;
}

static void fill(unsigned char *v, uint64_t tag)
{
	memset(v, 0, VLEN);
	memcpy(v, &tag, sizeof(tag));
}

static uint64_t tag_of(const void *v, size_t len)
{
	uint64_t tag;
	CHECK(len == VLEN);
	memcpy(&tag, v, sizeof(tag));
	return tag;
}

/* How many of keys [first, first + n) are visible (each checked for its tag). */
static unsigned count_visible(lotus_session_t *s, lotus_table_t tb, uint64_t first, unsigned n)
{
	lotus_txn_t *t;
	int ops[PER_TXN];
	unsigned seen = 0;
	CHECK(n <= PER_TXN);
	CHECK_RC(lotus_txn_begin(s, &t));
	for (unsigned i = 0; i < n; i++) {
		unsigned char k[8];
		key_from_u64(first + i, k);
		ops[i] = lotus_txn_read(t, tb, k, 8);
	}
	CHECK_RC(lotus_txn_execute(t));
	for (unsigned i = 0; i < n; i++) {
		const void *v;
		size_t len;
		int rc = lotus_txn_result(t, ops[i], &v, &len);
		CHECK(rc == 0 || rc == LOTUS_ENOTFOUND);
		if (rc == 0) {
			CHECK(tag_of(v, len) == first + i);
			seen++;
		}
	}
	CHECK_RC(lotus_txn_commit(t));
	lotus_txn_free(t);
	return seen;
}

/* The tag held by key 0 (the record every transaction updates). */
static uint64_t key0_tag(lotus_session_t *s, lotus_table_t tb)
{
	lotus_txn_t *t;
	unsigned char k[8];
	const void *v;
	size_t len;
	key_from_u64(0, k);
	CHECK_RC(lotus_txn_begin(s, &t));
	int op = lotus_txn_read(t, tb, k, 8);
	CHECK_RC(lotus_txn_execute(t));
	CHECK_RC(lotus_txn_result(t, op, &v, &len));
	uint64_t tag = tag_of(v, len);
	CHECK_RC(lotus_txn_commit(t));
	lotus_txn_free(t);
	return tag;
}

/* Insert keys [first, first + n); txn > 0 also sets key 0's tag to tag0. */
static int insert_txn(lotus_session_t *s, lotus_table_t tb, uint64_t first, unsigned n,
		      uint64_t tag0)
{
	unsigned char v[VLEN];   /* per call: threads share this function */
	lotus_txn_t *t;
	unsigned char k[8];
	CHECK_RC(lotus_txn_begin(s, &t));
	for (unsigned i = 0; i < n; i++) {
		key_from_u64(first + i, k);
		fill(v, first + i);
		CHECK_RC(lotus_txn_insert(t, tb, k, 8, v, VLEN));
	}
	if (tag0) {
		key_from_u64(0, k);
		fill(v, tag0);
		CHECK_RC(lotus_txn_write(t, tb, k, 8, v, VLEN));
	}
	int rc = lotus_txn_commit(t);
	if (rc)
		lotus_txn_abort(t);
	lotus_txn_free(t);
	return rc;
}

static int delete_txn(lotus_session_t *s, lotus_table_t tb, uint64_t first, unsigned n)
{
	lotus_txn_t *t;
	CHECK_RC(lotus_txn_begin(s, &t));
	for (unsigned i = 0; i < n; i++) {
		unsigned char k[8];
		key_from_u64(first + i, k);
		CHECK_RC(lotus_txn_delete(t, tb, k, 8));
	}
	int rc = lotus_txn_commit(t);
	lotus_txn_free(t);
	return rc;
}

/* Tags for key 0: TAG0_BASE + txn number (never a key of the test). */
#define TAG0_BASE (1ull << 40)

static void single(void)
{
	lotus_cluster_t *cl = connect_one(1, 4ull << 20);
	lotus_session_t *s;
	lotus_table_t tb;
	unsigned ok = 0;
	int rc = 0;
	CHECK_RC(lotus_session_open(cl, &s));
	CHECK_RC(lotus_table_create(s, "atomic", VLEN, &tb));
	/* key 0 gets its own tag 0 first; the 50-key transactions start at 1 */
	CHECK(insert_txn(s, tb, 0, 1, 0) == 0);
	for (ok = 0; ok < MAX_TXNS; ok++) {
		rc = insert_txn(s, tb, 1 + (uint64_t)ok * PER_TXN, PER_TXN, TAG0_BASE + ok);
		if (rc)
			break;
	}
	CHECK(ok < MAX_TXNS);
	uint64_t failed_first = 1 + (uint64_t)ok * PER_TXN;
	unsigned torn = count_visible(s, tb, failed_first, PER_TXN);
	uint64_t tag0 = key0_tag(s, tb);
	fprintf(stderr, "single: %u transactions of %u x %u B committed, then %s; "
		"%u of the failed transaction's %u keys visible, key 0 tag %s\n", ok, PER_TXN,
		VLEN, lotus_strerror(rc), torn, PER_TXN,
		tag0 == (ok ? TAG0_BASE + ok - 1 : 0) ? "as acknowledged" : "CHANGED");
	CHECK(rc == LOTUS_ENOSPACE);
	CHECK(torn == 0);
	CHECK(tag0 == (ok ? TAG0_BASE + ok - 1 : 0));
	for (unsigned i = 0; i < ok; i++)
		CHECK(count_visible(s, tb, 1 + (uint64_t)i * PER_TXN, PER_TXN) == PER_TXN);
	/* still full: the same transaction fails again, and leaves nothing */
	CHECK(insert_txn(s, tb, failed_first, PER_TXN, 7) == LOTUS_ENOSPACE);
	CHECK(count_visible(s, tb, failed_first, PER_TXN) == 0);
	/* an update needs no new slot */
	CHECK(insert_txn(s, tb, 0, 0, TAG0_BASE + 999) == 0);
	CHECK(key0_tag(s, tb) == TAG0_BASE + 999);
	/* deletes free space; then the failed transaction commits */
	CHECK(ok >= 2);
	CHECK_RC(delete_txn(s, tb, 1, PER_TXN));
	CHECK_RC(delete_txn(s, tb, 1 + PER_TXN, PER_TXN));
	rc = insert_txn(s, tb, failed_first, PER_TXN, TAG0_BASE + 1000);
	fprintf(stderr, "single: after deleting %u keys the failed transaction commits: %s\n",
		2 * PER_TXN, rc ? lotus_strerror(rc) : "yes");
	CHECK(rc == 0);
	CHECK(count_visible(s, tb, failed_first, PER_TXN) == PER_TXN);
	CHECK(key0_tag(s, tb) == TAG0_BASE + 1000);
	lotus_session_close(s);
	lotus_disconnect(cl);
}

/* ---- concurrent commits against one small pool ---- */

#define CTHREADS 4
#define CPER 20

static lotus_cluster_t *ccl;
static lotus_table_t ctb;
static _Atomic unsigned c_ok, c_failed, c_torn_keys;

static void *cworker(void *arg)
{
	unsigned id = (unsigned)(uintptr_t)arg;
	lotus_session_t *s;
	unsigned fails = 0;
	CHECK_RC(lotus_session_open(ccl, &s));
	for (unsigned n = 0; n < 400 && fails < 3; n++) {
		uint64_t first = ((uint64_t)id << 32) | ((uint64_t)n * CPER);
		int rc = insert_txn(s, ctb, first, CPER, 0);
		if (rc == 0) {
			atomic_fetch_add(&c_ok, 1);
			continue;
		}
		if (lotus_err_retryable(rc))
			continue;
		CHECK(rc == LOTUS_ENOSPACE);
		fails++;
		atomic_fetch_add(&c_failed, 1);
		atomic_fetch_add(&c_torn_keys, count_visible(s, ctb, first, CPER));
	}
	lotus_session_close(s);
	return NULL;
}

static void concurrent(void)
{
	pthread_t th[CTHREADS];
	lotus_session_t *s;
	ccl = connect_one(2, 4ull << 20);
	CHECK_RC(lotus_session_open(ccl, &s));
	CHECK_RC(lotus_table_create(s, "atomic", VLEN, &ctb));
	for (unsigned i = 0; i < CTHREADS; i++)
		pthread_create(&th[i], NULL, cworker, (void *)(uintptr_t)i);
	for (unsigned i = 0; i < CTHREADS; i++)
		pthread_join(th[i], NULL);
	fprintf(stderr, "concurrent: %u transactions committed, %u failed with ENOSPACE, "
		"%u keys of failed transactions visible\n", atomic_load(&c_ok),
		atomic_load(&c_failed), atomic_load(&c_torn_keys));
	CHECK(atomic_load(&c_failed) > 0);
	CHECK(atomic_load(&c_torn_keys) == 0);
	lotus_session_close(s);
	lotus_disconnect(ccl);
}

int main(void)
{
	single();
	concurrent();
	printf("ok\n");
	return 0;
}
