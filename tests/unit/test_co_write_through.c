/*
 * test_co_write_through.c - co-partitioning (LOTUS_PART_CO) keeps the
 * memory servers' records in step with the owner's cache: a delete reaches
 * the memory server even when the key's X lock was served by the cache (a
 * read-for-update hit), and a write of a key that is not on the memory
 * server yet (a blind write, or a write after the transaction's own delete)
 * creates it there, so a later delete finds it.  Every committed write is
 * on the memory server when the commit returns (write-through), so a scan,
 * which the memory servers serve, sees an update of a cached key.  One
 * compute process owns
 * every key (compute_count 1), one session, one transaction at a time.
 */
#include "testutil.h"

static lotus_session_t *s;
static lotus_table_t tb;

static void put(const char *k, const char *v)
{
	lotus_txn_t *t;
	CHECK_RC(lotus_txn_begin(s, &t));
	CHECK_RC(lotus_txn_write(t, tb, k, strlen(k), v, strlen(v)));
	CHECK_RC(lotus_txn_commit(t));
	lotus_txn_free(t);
}

/* The status of reading k; *v gets the value (NUL-terminated). */
static int get(const char *k, char *v, size_t cap)
{
	lotus_txn_t *t;
	const void *p;
	size_t n;
	CHECK_RC(lotus_txn_begin(s, &t));
	int op = lotus_txn_read(t, tb, k, strlen(k));
	CHECK_RC(op);
	CHECK_RC(lotus_txn_execute(t));
	int rc = lotus_txn_result(t, op, &p, &n);
	if (rc == 0) {
		CHECK(n < cap);
		memcpy(v, p, n);
		v[n] = 0;
	}
	CHECK_RC(lotus_txn_commit(t));
	lotus_txn_free(t);
	return rc;
}

/* Delete k in a transaction of its own; the delete's status. */
static int del(const char *k)
{
	lotus_txn_t *t;
	CHECK_RC(lotus_txn_begin(s, &t));
	int op = lotus_txn_delete(t, tb, k, strlen(k));
	CHECK_RC(op);
	CHECK_RC(lotus_txn_execute(t));
	int rc = lotus_txn_result(t, op, NULL, NULL);
	CHECK_RC(lotus_txn_commit(t));
	lotus_txn_free(t);
	return rc;
}

static void expect(const char *k, int want_rc, const char *want, int line)
{
	char v[128];
	int rc = get(k, v, sizeof(v));
	if (rc != want_rc || (rc == 0 && strcmp(v, want))) {
		fprintf(stderr, "line %d: %s: read gave %s \"%s\", want %s \"%s\"\n", line, k,
			lotus_strerror(rc), rc ? "" : v, lotus_strerror(want_rc), want);
		exit(1);
	}
}
#define EXPECT_READ(k, rc, v) expect(k, rc, v, __LINE__)

/* A blind write of an absent key creates the record on its memory server:
 * a delete in a later transaction finds it. */
static void blind_write_then_delete(void)
{
	put("bw", "one");
	EXPECT_READ("bw", 0, "one");
	put("bw", "two");
	EXPECT_READ("bw", 0, "two");
	CHECK(del("bw") == 0);
	EXPECT_READ("bw", LOTUS_ENOTFOUND, "");
	CHECK(del("bw") == LOTUS_ENOTFOUND);
}

/* read-for-update (a cache hit), then delete: the delete lands, and no
 * older value of the key comes back. */
static void read_for_update_hit_then_delete(int execute_between)
{
	lotus_txn_t *t;
	const void *p;
	size_t n;
	put("rd", "v0");
	put("rd", "v1");                      /* dirty in the cache */
	EXPECT_READ("rd", 0, "v1");
	CHECK_RC(lotus_txn_begin(s, &t));
	int op = lotus_txn_read_for_update(t, tb, "rd", 2);
	CHECK_RC(op);
	if (execute_between) {
		CHECK_RC(lotus_txn_execute(t));
		CHECK(lotus_txn_result(t, op, &p, &n) == 0 && n == 2 && !memcmp(p, "v1", 2));
	}
	int d = lotus_txn_delete(t, tb, "rd", 2);
	CHECK_RC(d);
	CHECK_RC(lotus_txn_execute(t));
	CHECK(lotus_txn_result(t, d, NULL, NULL) == 0);
	CHECK_RC(lotus_txn_commit(t));
	lotus_txn_free(t);
	EXPECT_READ("rd", LOTUS_ENOTFOUND, "");
	CHECK(del("rd") == LOTUS_ENOTFOUND);
}

/* Delete, then write the key again in the same transaction: the record is
 * back on the memory server with the new value. */
static void delete_then_write(void)
{
	lotus_txn_t *t;
	put("dw", "old");
	put("dw", "older?");
	CHECK_RC(lotus_txn_begin(s, &t));
	CHECK_RC(lotus_txn_delete(t, tb, "dw", 2));
	CHECK_RC(lotus_txn_write(t, tb, "dw", 2, "new", 3));
	CHECK_RC(lotus_txn_commit(t));
	lotus_txn_free(t);
	EXPECT_READ("dw", 0, "new");
	CHECK(del("dw") == 0);
	EXPECT_READ("dw", LOTUS_ENOTFOUND, "");
}

/* An update of a key the cache holds is on the memory server at once: a
 * scan (served by the memory servers) returns it. */
static void scan_sees_cached_update(void)
{
	lotus_txn_t *t;
	const void *k, *v;
	size_t kl, vl;
	put("sc", "first");
	EXPECT_READ("sc", 0, "first");                /* now cached */
	put("sc", "second");
	CHECK_RC(lotus_txn_begin(s, &t));
	int op = lotus_txn_scan(t, tb, "sc", 2, 1);
	CHECK_RC(op);
	CHECK_RC(lotus_txn_execute(t));
	CHECK(lotus_txn_scan_rows(t, op) == 1);
	CHECK_RC(lotus_txn_scan_row(t, op, 0, &k, &kl, &v, &vl));
	if (kl != 2 || memcmp(k, "sc", 2) || vl != 6 || memcmp(v, "second", 6)) {
		fprintf(stderr, "scan gave %.*s = %.*s, want sc = second\n", (int)kl,
			(const char *)k, (int)vl, (const char *)v);
		exit(1);
	}
	CHECK_RC(lotus_txn_commit(t));
	lotus_txn_free(t);
}

int main(void)
{
	static const enum lotus_cc ccs[] = { LOTUS_NO_WAIT, LOTUS_WAIT_DIE, LOTUS_WOUND_WAIT };
	if (!getenv("LOTUS_BIN")) {
		printf("skip: LOTUS_BIN is not set (run through tests/run)\n");
		return 77;
	}
	for (size_t i = 0; i < 3; i++) {
		struct lotus_options o;
		lotus_cluster_t *cl;
		lotus_options_init(&o);
		o.local_servers = 2;
		o.cc = ccs[i];
		o.batch = (enum lotus_batch)i;
		o.server_threads = 1;
		o.server_memory = 32ULL << 20;
		o.partitioning = LOTUS_PART_CO;
		o.cache_bytes = 1 << 20;
		CHECK_RC(lotus_connect(&o, &cl));
		CHECK_RC(lotus_session_open(cl, &s));
		CHECK_RC(lotus_table_create(s, "cowt", 64, &tb));
		blind_write_then_delete();
		read_for_update_hit_then_delete(1);
		read_for_update_hit_then_delete(0);
		delete_then_write();
		scan_sees_cached_update();
		lotus_session_close(s);
		lotus_disconnect(cl);
	}
	printf("ok\n");
	return 0;
}
