/*
 * test_placement.c - lotus_options.placement, as a program on lotus.h meets
 * it, against two memory server processes:
 *   - bad rules (no table, 0 or 9 key bytes, a field past 128 bytes) fail
 *     lotus_connect with LOTUS_ECONFIG;
 *   - a rule on key byte 0 puts every key on server (byte 0) % 2: the
 *     servers' own record counts show it, and a transaction that keeps to
 *     one field value reaches one server (the servers counter);
 *   - with LOTUS_PLACE_SCAN_LOCAL a scan asks only its start key's server
 *     (its rows of other field values follow, the other server's do not);
 *     without it a scan merges both servers.
 */
#include <errno.h>
#include "test_procs.h"
#include "check.h"

static int connect_rules(const char *config, const struct lotus_placement *p, unsigned n,
			 lotus_cluster_t **c)
{
	struct lotus_options o;
	lotus_options_init(&o);
	o.config_path = config;
	o.placement = p;
	o.nplacement = n;
	return lotus_connect(&o, c);
}

/* the "records" figure of server sv's stats */
static long records(lotus_session_t *s, unsigned sv)
{
	const char *j = lotus_server_stats(s, sv);
	CHECK(j);
	const char *p = strstr(j, "\"records\":");
	CHECK(p);
	return atol(p + 10);
}

static uint64_t servers_used(lotus_session_t *s)
{
	struct lotus_txn_counters tc;
	lotus_session_txn_counters(s, &tc);
	return tc.committed.servers + tc.aborted.servers;
}

static void put(lotus_txn_t *t, lotus_table_t tb, unsigned field, unsigned i)
{
	unsigned char k[8] = { (unsigned char)field, 'k', (unsigned char)('0' + i / 10),
			       (unsigned char)('0' + i % 10) };
	CHECK(lotus_txn_insert(t, tb, k, 4, "v", 1) >= 0);
}

/* rows of a scan from { field } (count 100), and their field values */
static int scan_from(lotus_session_t *s, lotus_table_t tb, unsigned field, unsigned *seen)
{
	lotus_txn_t *t;
	unsigned char k[1] = { (unsigned char)field };
	CHECK_RC(lotus_txn_begin(s, &t));
	int op = lotus_txn_scan(t, tb, k, 1, 100);
	CHECK(op >= 0);
	CHECK_RC(lotus_txn_commit(t));
	int n = lotus_txn_scan_rows(t, op);
	*seen = 0;
	for (int i = 0; i < n; i++) {
		const void *key, *v;
		size_t kl, vl;
		CHECK_RC(lotus_txn_scan_row(t, op, (unsigned)i, &key, &kl, &v, &vl));
		*seen |= 1u << ((const unsigned char *)key)[0];
	}
	lotus_txn_free(t);
	return n;
}

int main(void)
{
	const char *config = procs_start(2, NULL);
	lotus_cluster_t *c;
	static const struct lotus_placement bad[][1] = {
		{ { NULL, 0, 1, 0 } }, { { "", 0, 1, 0 } }, { { "t", 0, 0, 0 } },
		{ { "t", 0, 9, 0 } }, { { "t", 127, 2, 0 } },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		EXPECT(connect_rules(config, bad[i], 1, &c), LOTUS_ECONFIG);

	static const struct lotus_placement rules[] = {
		{ "pl_local", 0, 1, LOTUS_PLACE_SCAN_LOCAL },
		{ "pl_*", 0, 1, 0 },       /* pl_merge: placed, scans merge */
	};
	CHECK_RC(connect_rules(config, rules, 2, &c));
	lotus_session_t *s;
	lotus_table_t tl, tm;
	lotus_txn_t *t;
	CHECK_RC(lotus_session_open(c, &s));
	CHECK_RC(lotus_table_create(s, "pl_local", 64, &tl));
	CHECK_RC(lotus_table_create(s, "pl_merge", 64, &tm));
	long r0 = records(s, 0), r1 = records(s, 1);
	/* field 1: 10 keys, field 3: 2 keys (both on server 1); field 2: 6 (server 0) */
	CHECK_RC(lotus_txn_begin(s, &t));
	for (unsigned i = 0; i < 10; i++) {
		put(t, tl, 1, i);
		put(t, tm, 1, i);
	}
	for (unsigned i = 0; i < 2; i++) {
		put(t, tl, 3, i);
		put(t, tm, 3, i);
	}
	for (unsigned i = 0; i < 6; i++) {
		put(t, tl, 2, i);
		put(t, tm, 2, i);
	}
	CHECK_RC(lotus_txn_commit(t));
	lotus_txn_free(t);
	CHECK_EQ(records(s, 1) - r1, 24);
	CHECK_EQ(records(s, 0) - r0, 12);

	/* a transaction on field 1 alone: one server per attempt */
	uint64_t before = servers_used(s);
	CHECK_RC(lotus_txn_begin(s, &t));
	unsigned char k[4] = { 1, 'k', '0', '0' };
	for (unsigned i = 0; i < 5; i++) {
		k[3] = (unsigned char)('0' + i);
		CHECK(lotus_txn_read_for_update(t, tl, k, 4) >= 0);
	}
	CHECK_RC(lotus_txn_commit(t));
	lotus_txn_free(t);
	CHECK_EQ(servers_used(s) - before, 1);

	/* scans */
	unsigned seen;
	before = servers_used(s);
	CHECK_EQ(scan_from(s, tl, 1, &seen), 12);     /* fields 1 and 3: server 1 only */
	CHECK_EQ(seen, (1u << 1) | (1u << 3));
	CHECK_EQ(servers_used(s) - before, 1);
	CHECK_EQ(scan_from(s, tl, 2, &seen), 6);      /* field 2: server 0 holds no more */
	CHECK_EQ(seen, 1u << 2);
	before = servers_used(s);
	CHECK_EQ(scan_from(s, tm, 1, &seen), 18);     /* merged: every row >= {1} */
	CHECK_EQ(seen, (1u << 1) | (1u << 2) | (1u << 3));
	CHECK_EQ(servers_used(s) - before, 2);

	lotus_session_close(s);
	lotus_disconnect(c);
	printf("ok\n");
	return 0;
}
