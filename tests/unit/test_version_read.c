/*
 * test_version_read.c - lotus_txn_result_version from the outside: two
 * sessions on memory servers of their own (lotus memserver processes,
 * --durability sync), the public API only.
 *   1. a read's version is stable while nobody writes; every committed
 *      update from another session changes it, also one that writes the same
 *      value back (A -> B -> A, the ABA case, and A -> A); an aborted write
 *      does not; delete and insert again never repeats a version;
 *   2. the errors: a missing key (LOTUS_ENOTFOUND), before execute
 *      (LOTUS_ESTATE), a read answered from the transaction's own write
 *      (LOTUS_EUNSUPPORTED), a write op or a bad op (-EINVAL);
 *   3. restarts: after a clean stop (recovery from the checkpoint image) and
 *      after kill -9 (replay of the log), every version differs from every
 *      version read before; a key updated many times, then deleted and
 *      inserted again after the restart, never comes back to a version read
 *      since the restart.
 */
#include "test_durable_util.h"

#define NKEYS 16
#define MAXSEEN 4096

static uint64_t seen[MAXSEEN];
static unsigned seen_key[MAXSEEN];
static unsigned nseen;

/* v must be new for key: no version of it read so far (versions of
 * different keys may be equal: only one record's versions are compared). */
static void seen_new(uint64_t v, const char *what, unsigned key)
{
	for (unsigned i = 0; i < nseen; i++)
		CHECK(seen_key[i] != key || seen[i] != v,
		      " %s: key %u: version %llx repeats one read before", what, key,
		      (unsigned long long)v);
	CHECK(nseen < MAXSEEN);
	seen_key[nseen] = key;
	seen[nseen++] = v;
}

static void key_of(unsigned i, char *k)
{
	snprintf(k, 16, "vk%03u", i);
}

/* One read-only transaction: 1 and *v if the key is there, 0 if not. */
static int read_ver(lotus_session_t *s, lotus_table_t tb, unsigned key, uint64_t *v,
		    char *val, size_t *vlen)
{
	char k[16];
	lotus_txn_t *t;
	key_of(key, k);
	CHECK_RC(lotus_txn_begin(s, &t));
	int op = lotus_txn_read(t, tb, k, strlen(k));
	CHECK_RC(op);
	CHECK_RC(lotus_txn_execute(t));
	const void *p;
	size_t n;
	int rc = lotus_txn_result(t, op, &p, &n);
	int vr = lotus_txn_result_version(t, op, v);
	CHECK_EQ(vr, rc);
	if (rc == 0 && val) {
		memcpy(val, p, n);
		*vlen = n;
	}
	CHECK(rc == 0 || rc == LOTUS_ENOTFOUND, " read: %s", lotus_strerror(rc));
	CHECK_RC(lotus_txn_commit(t));
	lotus_txn_free(t);
	return rc == 0;
}

static void put(lotus_session_t *s, lotus_table_t tb, unsigned key, const char *val, int insert)
{
	char k[16];
	lotus_txn_t *t;
	key_of(key, k);
	CHECK_RC(lotus_txn_begin(s, &t));
	CHECK_RC(insert ? lotus_txn_insert(t, tb, k, strlen(k), val, strlen(val))
			: lotus_txn_write(t, tb, k, strlen(k), val, strlen(val)));
	CHECK_RC(lotus_txn_commit(t));
	lotus_txn_free(t);
}

static void del(lotus_session_t *s, lotus_table_t tb, unsigned key)
{
	char k[16];
	lotus_txn_t *t;
	key_of(key, k);
	CHECK_RC(lotus_txn_begin(s, &t));
	CHECK_RC(lotus_txn_delete(t, tb, k, strlen(k)));
	CHECK_RC(lotus_txn_commit(t));
	lotus_txn_free(t);
}

/* The version of key now (it must exist); checked stable over two reads. */
static uint64_t ver_of(lotus_session_t *s, lotus_table_t tb, unsigned key)
{
	uint64_t a, b;
	CHECK(read_ver(s, tb, key, &a, NULL, NULL), " key %u is missing", key);
	CHECK(read_ver(s, tb, key, &b, NULL, NULL), " key %u is missing", key);
	CHECK(a == b, " key %u: two reads with no write between: %llx then %llx", key,
	      (unsigned long long)a, (unsigned long long)b);
	return a;
}

static void part_updates(lotus_session_t *s1, lotus_session_t *s2, lotus_table_t tb)
{
	for (unsigned i = 0; i < NKEYS; i++)
		put(s1, tb, i, "A", 1);
	for (unsigned i = 0; i < NKEYS; i++) {
		seen_new(ver_of(s1, tb, i), "insert", i);
		put(s2, tb, i, "B", 0);              /* A -> B */
		seen_new(ver_of(s1, tb, i), "A->B", i);
		put(s2, tb, i, "A", 0);              /* B -> A: the value read first */
		seen_new(ver_of(s1, tb, i), "B->A (ABA)", i);
		put(s2, tb, i, "A", 0);              /* A -> A */
		seen_new(ver_of(s1, tb, i), "A->A", i);
		/* an aborted write changes nothing */
		uint64_t before = ver_of(s1, tb, i), after;
		char k[16], val[64];
		size_t n = 0;
		lotus_txn_t *t;
		key_of(i, k);
		CHECK_RC(lotus_txn_begin(s2, &t));
		CHECK_RC(lotus_txn_write(t, tb, k, strlen(k), "Z", 1));
		CHECK_RC(lotus_txn_execute(t));
		EXPECT(lotus_txn_abort(t), 0);
		lotus_txn_free(t);
		CHECK(read_ver(s1, tb, i, &after, val, &n));
		CHECK(after == before && n == 1 && val[0] == 'A', " key %u: an aborted write changed it", i);
		/* delete and insert again: a version never read before */
		del(s2, tb, i);
		CHECK(!read_ver(s1, tb, i, &after, NULL, NULL));
		put(s2, tb, i, "A", 1);
		seen_new(ver_of(s1, tb, i), "delete+insert", i);
	}
	fprintf(stderr, "updates: %u versions, all different\n", nseen);
}

static void part_errors(lotus_session_t *s, lotus_table_t tb)
{
	lotus_txn_t *t;
	uint64_t v = 0;
	char k[16];
	key_of(0, k);
	CHECK_RC(lotus_txn_begin(s, &t));
	int rd = lotus_txn_read(t, tb, k, strlen(k));
	int miss = lotus_txn_read(t, tb, "no-such-key", 11);
	CHECK_RC(rd);
	CHECK_RC(miss);
	EXPECT(lotus_txn_result_version(t, rd, &v), LOTUS_ESTATE);
	CHECK_RC(lotus_txn_execute(t));
	EXPECT(lotus_txn_result_version(t, rd, &v), 0);
	EXPECT(lotus_txn_result_version(t, miss, &v), LOTUS_ENOTFOUND);
	EXPECT(lotus_txn_result_version(t, rd, NULL), -EINVAL);
	EXPECT(lotus_txn_result_version(t, 99, &v), -EINVAL);
	EXPECT(lotus_txn_result_version(t, -1, &v), -EINVAL);
	EXPECT(lotus_txn_result_version(NULL, rd, &v), -EINVAL);
	int w = lotus_txn_write(t, tb, "vw-other", 8, "x", 1);
	CHECK_RC(w);
	EXPECT(lotus_txn_result_version(t, w, &v), -EINVAL);
	int w0 = lotus_txn_write(t, tb, k, strlen(k), "W", 1);
	CHECK_RC(w0);
	int ryw = lotus_txn_read(t, tb, k, strlen(k));   /* answered from the write */
	CHECK_RC(ryw);
	CHECK_RC(lotus_txn_execute(t));
	const void *p;
	size_t n;
	EXPECT(lotus_txn_result(t, ryw, &p, &n), 0);
	CHECK(n == 1 && *(const char *)p == 'W');
	EXPECT(lotus_txn_result_version(t, ryw, &v), LOTUS_EUNSUPPORTED);
	EXPECT(lotus_txn_abort(t), 0);
	lotus_txn_free(t);
	/* read_for_update gives the version too, and keeps it after a write of
	 * the key staged on the same lock */
	uint64_t want = ver_of(s, tb, 0);
	CHECK_RC(lotus_txn_begin(s, &t));
	int rx = lotus_txn_read_for_update(t, tb, k, strlen(k));
	CHECK_RC(rx);
	CHECK_RC(lotus_txn_execute(t));
	EXPECT(lotus_txn_result_version(t, rx, &v), 0);
	CHECK(v == want);
	CHECK_RC(lotus_txn_write(t, tb, k, strlen(k), "A", 1));
	EXPECT(lotus_txn_result_version(t, rx, &v), 0);
	CHECK(v == want);
	CHECK_RC(lotus_txn_commit(t));
	lotus_txn_free(t);
	seen_new(ver_of(s, tb, 0), "read_for_update + write", 0);
	fprintf(stderr, "errors: as documented\n");
}

/* After a restart: no version of before; then key 0 is updated many times,
 * deleted and inserted again, and updated as often: never a repeat. */
static void part_after_restart(lotus_session_t *s, lotus_table_t tb, const char *when)
{
	for (unsigned round = 0; round < 2; round++) {
		for (unsigned u = 0; u < 40; u++) {
			put(s, tb, 0, u & 1 ? "B" : "A", 0);
			uint64_t v;
			CHECK(read_ver(s, tb, 0, &v, NULL, NULL));
			seen_new(v, when, 0);
		}
		del(s, tb, 0);
		put(s, tb, 0, "A", 1);
		seen_new(ver_of(s, tb, 0), when, 0);
	}
	fprintf(stderr, "%s: every version new (%u so far)\n", when, nseen);
}

int main(void)
{
	const char *base = dt_setup();
	static struct dsrv sv[2];
	const char *args[] = { "--durability", "sync", NULL };
	lotus_cluster_t *c;
	lotus_session_t *s1, *s2;
	lotus_table_t tb;

	for (unsigned i = 0; i < 2; i++) {
		sv[i].id = i;
		snprintf(sv[i].dir, sizeof(sv[i].dir), "%s/ms%u", base, i);
		CHECK(dsrv_start(&sv[i], args, NULL) == 0);
	}
	c = dt_connect(sv, 2);
	CHECK_RC(lotus_session_open(c, &s1));
	CHECK_RC(lotus_session_open(c, &s2));
	CHECK_RC(lotus_table_create(s1, "ver", 64, &tb));
	part_updates(s1, s2, tb);
	part_errors(s1, tb);
	/* a key updated many times before a clean stop: its counter is high in
	 * the checkpoint image the restart rebuilds from */
	for (unsigned u = 0; u < 60; u++)
		put(s2, tb, 1, u & 1 ? "B" : "A", 0);
	seen_new(ver_of(s1, tb, 1), "before the stop", 1);
	lotus_session_close(s2);
	lotus_session_close(s1);
	lotus_disconnect(c);

	const char *when[2] = { "after SIGTERM (checkpoint)", "after kill -9 (replay)" };
	int sig[2] = { SIGTERM, SIGKILL };
	for (unsigned r = 0; r < 2; r++) {
		for (unsigned i = 0; i < 2; i++) {
			dsrv_stop(&sv[i], sig[r]);
			CHECK(dsrv_start(&sv[i], args, NULL) == 0);
		}
		c = dt_connect(sv, 2);
		CHECK_RC(lotus_session_open(c, &s1));
		CHECK_RC(lotus_table_create(s1, "ver", 64, &tb));
		for (unsigned i = 0; i < NKEYS; i++)
			seen_new(ver_of(s1, tb, i), when[r], i);
		/* key 1 first: deleted and inserted, then updated past the count
		 * it had in the image (an insert's counter starts above every
		 * counter the restart found, not at the bottom) */
		del(s1, tb, 1);
		put(s1, tb, 1, "A", 1);
		for (unsigned u = 0; u < 120; u++) {
			uint64_t v;
			CHECK(read_ver(s1, tb, 1, &v, NULL, NULL));
			seen_new(v, when[r], 1);
			put(s1, tb, 1, u & 1 ? "A" : "B", 0);
		}
		part_after_restart(s1, tb, when[r]);
		lotus_session_close(s1);
		lotus_disconnect(c);
	}
	for (unsigned i = 0; i < 2; i++)
		dsrv_stop(&sv[i], SIGTERM);
	fprintf(stderr, "%u versions read, none repeated\n", nseen);
	printf("ok\n");
	return 0;
}
