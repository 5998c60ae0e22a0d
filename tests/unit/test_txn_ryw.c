/*
 * test_txn_ryw.c - a transaction sees its own writes (lotus.h "Guarantees"):
 * a read after write / insert / delete of the same key returns what the
 * transaction wrote, served from its write set without a message; a scan
 * shows the transaction's writes in its range; a write that follows a
 * read-for-update of an absent key (an upsert) lands at commit.
 */
#include "testutil.h"

static lotus_session_t *s;
static lotus_table_t tb;

static uint64_t reqs_sent(void)
{
	struct lotus_net_counters c;
	lotus_session_counters(s, &c);
	return c.reqs_sent;
}

/* Result of op: the value as a string, or NULL with *rc set. */
static const char *result(lotus_txn_t *t, int op, int *rc)
{
	static char buf[8][128];
	static int n;
	const void *v;
	size_t vlen;
	*rc = lotus_txn_result(t, op, &v, &vlen);
	if (*rc)
		return NULL;
	char *b = buf[n++ % 8];
	CHECK(vlen < sizeof(buf[0]));
	memcpy(b, v, vlen);
	b[vlen] = 0;
	return b;
}

static void expect_value(lotus_txn_t *t, int op, const char *want, int line)
{
	int rc;
	const char *got = result(t, op, &rc);
	if (!got || strcmp(got, want)) {
		fprintf(stderr, "line %d: read gave %s (%s), want \"%s\"\n", line,
			got ? got : "no value", lotus_strerror(rc), want);
		exit(1);
	}
}
#define EXPECT_VALUE(t, op, want) expect_value(t, op, want, __LINE__)

static void put(const char *k, const char *v)
{
	lotus_txn_t *t;
	CHECK_RC(lotus_txn_begin(s, &t));
	CHECK_RC(lotus_txn_write(t, tb, k, strlen(k), v, strlen(v)));
	CHECK_RC(lotus_txn_commit(t));
	lotus_txn_free(t);
}

/* The committed value of k, or NULL if absent. */
static const char *get(const char *k)
{
	lotus_txn_t *t;
	int rc;
	CHECK_RC(lotus_txn_begin(s, &t));
	int op = lotus_txn_read(t, tb, k, strlen(k));
	CHECK_RC(op);
	CHECK_RC(lotus_txn_execute(t));
	const char *v = result(t, op, &rc);
	CHECK(rc == 0 || rc == LOTUS_ENOTFOUND);
	CHECK_RC(lotus_txn_commit(t));
	lotus_txn_free(t);
	return v;
}

static void upsert_after_read_for_update(void)
{
	lotus_txn_t *t;
	CHECK_RC(lotus_txn_begin(s, &t));
	int op = lotus_txn_read_for_update(t, tb, "up", 2);
	CHECK_RC(op);
	CHECK_RC(lotus_txn_execute(t));
	int rc;
	CHECK(!result(t, op, &rc) && rc == LOTUS_ENOTFOUND);
	CHECK_RC(lotus_txn_write(t, tb, "up", 2, "new", 3));
	CHECK_RC(lotus_txn_commit(t));
	lotus_txn_free(t);
	const char *v = get("up");
	if (!v || strcmp(v, "new")) {
		fprintf(stderr, "write after read_for_update of an absent key was lost\n");
		exit(1);
	}
}

static void read_your_writes(void)
{
	lotus_txn_t *t;
	int rc;
	put("a", "0");
	put("c", "old");
	CHECK_RC(lotus_txn_begin(s, &t));
	/* staged together with the write, in one execute */
	CHECK_RC(lotus_txn_write(t, tb, "a", 1, "1", 1));
	int r1 = lotus_txn_read(t, tb, "a", 1);
	CHECK_RC(r1);
	CHECK_RC(lotus_txn_execute(t));
	EXPECT_VALUE(t, r1, "1");
	/* in a later execute: served from the write set without a request */
	uint64_t before = reqs_sent();
	int r2 = lotus_txn_read(t, tb, "a", 1);
	CHECK_RC(lotus_txn_execute(t));
	CHECK(reqs_sent() == before);
	EXPECT_VALUE(t, r2, "1");
	/* a rewrite shows in later reads only */
	CHECK_RC(lotus_txn_write(t, tb, "a", 1, "2", 1));
	int r3 = lotus_txn_read_for_update(t, tb, "a", 1);
	CHECK_RC(lotus_txn_execute(t));
	EXPECT_VALUE(t, r1, "1");
	EXPECT_VALUE(t, r3, "2");
	/* insert of an absent key, then read */
	CHECK_RC(lotus_txn_insert(t, tb, "b", 1, "ins", 3));
	int r4 = lotus_txn_read(t, tb, "b", 1);
	CHECK_RC(lotus_txn_execute(t));
	EXPECT_VALUE(t, r4, "ins");
	/* insert of a present key fails; the read sees the stored value */
	int i5 = lotus_txn_insert(t, tb, "c", 1, "dup", 3);
	int r5 = lotus_txn_read(t, tb, "c", 1);
	CHECK_RC(lotus_txn_execute(t));
	CHECK(lotus_txn_result(t, i5, NULL, NULL) == LOTUS_EEXISTS);
	EXPECT_VALUE(t, r5, "old");
	/* delete, then read: gone; write again: back */
	CHECK_RC(lotus_txn_delete(t, tb, "a", 1));
	int r6 = lotus_txn_read(t, tb, "a", 1);
	CHECK_RC(lotus_txn_execute(t));
	CHECK(!result(t, r6, &rc) && rc == LOTUS_ENOTFOUND);
	CHECK_RC(lotus_txn_write(t, tb, "a", 1, "3", 1));
	int r7 = lotus_txn_read(t, tb, "a", 1);
	CHECK_RC(lotus_txn_execute(t));
	EXPECT_VALUE(t, r7, "3");
	/* all of it lands at commit */
	CHECK_RC(lotus_txn_commit(t));
	CHECK(!strcmp(get("a"), "3") && !strcmp(get("b"), "ins") && !strcmp(get("c"), "old"));
	lotus_txn_free(t);
}

/* A scan shows the transaction's inserts, updates and deletes in its range. */
static void scan_your_writes(void)
{
	static const char *keys[] = { "s1", "s3", "s5", "s7" };
	lotus_txn_t *t;
	for (int i = 0; i < 4; i++)
		put(keys[i], "v");
	CHECK_RC(lotus_txn_begin(s, &t));
	CHECK_RC(lotus_txn_insert(t, tb, "s2", 2, "new", 3));   /* added */
	CHECK_RC(lotus_txn_write(t, tb, "s3", 2, "upd", 3));    /* changed */
	CHECK_RC(lotus_txn_delete(t, tb, "s5", 2));             /* gone */
	CHECK_RC(lotus_txn_write(t, tb, "s0", 2, "out", 3));    /* below the start */
	int op = lotus_txn_scan(t, tb, "s1", 2, 4);
	CHECK_RC(op);
	CHECK_RC(lotus_txn_execute(t));
	static const char *want_k[] = { "s1", "s2", "s3", "s7" };
	static const char *want_v[] = { "v", "new", "upd", "v" };
	int n = lotus_txn_scan_rows(t, op);
	if (n != 4) {
		fprintf(stderr, "scan over own writes gave %d rows, want 4\n", n);
		exit(1);
	}
	for (int i = 0; i < n; i++) {
		const void *k, *v;
		size_t kl, vl;
		CHECK_RC(lotus_txn_scan_row(t, op, (unsigned)i, &k, &kl, &v, &vl));
		if (kl != strlen(want_k[i]) || memcmp(k, want_k[i], kl) ||
		    vl != strlen(want_v[i]) || memcmp(v, want_v[i], vl)) {
			fprintf(stderr, "scan row %d: %.*s=%.*s, want %s=%s\n", i, (int)kl,
				(const char *)k, (int)vl, (const char *)v, want_k[i], want_v[i]);
			exit(1);
		}
	}
	CHECK_RC(lotus_txn_abort(t));
	lotus_txn_free(t);
}

/* Own deletes of more rows than one server reply holds: the scan still
 * returns count rows, fetching past them. */
static void scan_past_own_deletes(void)
{
	lotus_txn_t *t;
	char k[16];
	CHECK_RC(lotus_txn_begin(s, &t));
	for (unsigned i = 0; i < 2500; i++) {
		snprintf(k, sizeof(k), "m%05u", i);
		CHECK_RC(lotus_txn_insert(t, tb, k, 6, k, 6));
	}
	CHECK_RC(lotus_txn_commit(t));
	CHECK_RC(lotus_txn_recycle(t));
	for (unsigned i = 0; i < 1200; i++) {
		snprintf(k, sizeof(k), "m%05u", i);
		CHECK_RC(lotus_txn_delete(t, tb, k, 6));
	}
	int op = lotus_txn_scan(t, tb, "m", 1, 1000);
	CHECK_RC(lotus_txn_execute(t));
	int n = lotus_txn_scan_rows(t, op);
	if (n != 1000) {
		fprintf(stderr, "scan past 1200 own deletes gave %d rows, want 1000\n", n);
		exit(1);
	}
	for (int i = 0; i < n; i++) {
		const void *key, *v;
		size_t kl, vl;
		CHECK_RC(lotus_txn_scan_row(t, op, (unsigned)i, &key, &kl, &v, &vl));
		snprintf(k, sizeof(k), "m%05u", 1200 + i);
		CHECK(kl == 6 && !memcmp(key, k, 6));
	}
	CHECK_RC(lotus_txn_abort(t));
	lotus_txn_free(t);
}

/* Every protocol and batching mode, and co-partitioning with a data cache
 * (its owned keys are locked and cached in this process). */
static const struct { enum lotus_cc cc; enum lotus_batch batch; int co; } configs[] = {
	{ LOTUS_NO_WAIT, LOTUS_BATCH_INTRA, 0 },   { LOTUS_WAIT_DIE, LOTUS_BATCH_INTRA, 0 },
	{ LOTUS_WOUND_WAIT, LOTUS_BATCH_INTRA, 0 }, { LOTUS_NO_WAIT, LOTUS_BATCH_NONE, 0 },
	{ LOTUS_WAIT_DIE, LOTUS_BATCH_INTER, 0 },  { LOTUS_NO_WAIT, LOTUS_BATCH_INTRA, 1 },
};

int main(void)
{
	if (!getenv("LOTUS_BIN")) {
		printf("skip: LOTUS_BIN is not set (run through tests/run)\n");
		return 77;
	}
	for (size_t i = 0; i < sizeof(configs) / sizeof(configs[0]); i++) {
		struct lotus_options o;
		lotus_cluster_t *cl;
		lotus_options_init(&o);
		o.local_servers = 2;
		o.cc = configs[i].cc;
		o.batch = configs[i].batch;
		o.server_threads = 2;
		o.server_memory = 64ULL << 20;
		if (configs[i].co) {
			o.partitioning = LOTUS_PART_CO;
			o.cache_bytes = 1 << 20;
		}
		CHECK_RC(lotus_connect(&o, &cl));
		CHECK_RC(lotus_session_open(cl, &s));
		CHECK_RC(lotus_table_create(s, "ryw", 64, &tb));
		upsert_after_read_for_update();
		read_your_writes();
		scan_your_writes();
		scan_past_own_deletes();
		lotus_session_close(s);
		lotus_disconnect(cl);
	}
	printf("ok\n");
	return 0;
}
