/*
 * test_commit_reject.c - a COMMIT that the memory server must refuse changes
 * nothing, whatever write of it is bad.  The commits are sent on the wire
 * (the library never builds such a commit), after the transaction took its
 * X locks there; each holds good writes before and after the bad one:
 *   - a value larger than the table's maximum           -> LOTUS_ETOOBIG
 *   - a write on a key it holds no X lock on            -> LOTUS_ESTATE
 *   - a write on a table that does not exist            -> LOTUS_ENOTABLE
 * After each, the good keys are read back through include/lotus.h: absent.
 * Then the same transaction shape without the bad write commits, and its
 * keys are there.  Every request gets its reply within 5 s.  (A guard: these
 * checks already ran before any write was applied; out of space is the case
 * that did not, see test_commit_atomic.)
 */
#include "common/clock.h"
#include "common/common.h"
#include "common/ycsb_gen.h"
#include "compute/cluster.h"
#include "net/net.h"
#include "testutil.h"

static int got, last_status;

static void on_msg(void *arg, net_conn_t *c, const void *data, size_t len)
{
	struct wire_iter it;
	const struct wire_rep *r;
	const unsigned char *k, *v;
	if (wire_msg_check(data, len) || ((const struct wire_hdr *)data)->type != WIRE_REP)
		return;
	wire_iter_init(&it, data, len);
	while (wire_next_rep(&it, &r, &k, &v) == 1) {
		got++;
		last_status = r->status;
	}
}

static net_worker_t *w;
static net_conn_t *conn;
static uint64_t seq;

/* Send a message of n requests and wait for n replies; the last status. */
static int roundtrip(struct wire_buf *b, int n)
{
	size_t len;
	wire_buf_end(b);
	unsigned char *p = wire_buf_detach(b, &len);
	got = 0;
	CHECK_RC(net_send(conn, p, len));
	uint64_t deadline = clock_now_ns() + 5000000000ULL;
	while (got < n && clock_now_ns() < deadline)
		net_wait(w, 50);
	CHECK(got == n);
	return last_status;
}

static void lock_keys(uint64_t txn, uint16_t table, uint64_t first, unsigned n)
{
	struct wire_buf b;
	wire_buf_init(&b);
	CHECK_RC(wire_buf_begin(&b, WIRE_REQ, 7, ++seq));
	for (unsigned i = 0; i < n; i++) {
		unsigned char k[8];
		struct wire_req r = { .op = OP_LOCK_X, .table = table, .key_len = 8, .tag = i,
				      .txn_id = txn, .priority = txn };
		key_from_u64(first + i, k);
		CHECK_RC(wire_buf_add_req(&b, &r, k, NULL));
	}
	CHECK(roundtrip(&b, (int)n) == 0);
	wire_buf_free(&b);
}

/* Commit writes of keys [first, first+n) with 8-byte values; write bad
 * (index in the list) gets table bad_table and value length bad_len. */
static int commit(uint64_t txn, uint16_t table, uint64_t first, unsigned n, unsigned bad,
		  uint16_t bad_table, uint32_t bad_len)
{
	struct wire_buf b, wl;
	unsigned char val[64] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	wire_buf_init(&b);
	wire_buf_init(&wl);
	for (unsigned i = 0; i < n; i++) {
		unsigned char k[8];
		struct wire_write ww = { .op = OP_LOCK_X, .table = i == bad ? bad_table : table,
					 .key_len = 8, .value_len = i == bad ? bad_len : 8 };
		key_from_u64(first + i, k);
		CHECK_RC(wire_buf_append_write(&wl, &ww, k, val));
	}
	CHECK_RC(wire_buf_begin(&b, WIRE_REQ, 7, ++seq));
	struct wire_req r = { .op = OP_COMMIT, .key_len = 0, .value_len = (uint32_t)wl.len,
			      .tag = 99, .txn_id = txn, .priority = txn, .arg = n };
	CHECK_RC(wire_buf_add_req(&b, &r, NULL, wl.data));
	int rc = roundtrip(&b, 1);
	wire_buf_free(&b);
	wire_buf_free(&wl);
	return rc;
}

static unsigned visible(lotus_session_t *s, lotus_table_t tb, uint64_t first, unsigned n)
{
	lotus_txn_t *t;
	int ops[16];
	unsigned seen = 0;
	CHECK(n <= 16);
	CHECK_RC(lotus_txn_begin(s, &t));
	for (unsigned i = 0; i < n; i++) {
		unsigned char k[8];
		key_from_u64(first + i, k);
		ops[i] = lotus_txn_read(t, tb, k, 8);
	}
	CHECK_RC(lotus_txn_execute(t));
	for (unsigned i = 0; i < n; i++)
		seen += lotus_txn_result(t, ops[i], NULL, NULL) == 0;
	CHECK_RC(lotus_txn_commit(t));
	lotus_txn_free(t);
	return seen;
}

int main(void)
{
	lotus_cluster_t *cl = test_cluster(1, "tcp", LOTUS_NO_WAIT, LOTUS_BATCH_INTRA);
	struct net_handlers h = { .on_msg = on_msg };
	lotus_session_t *s;
	lotus_table_t tb;
	CHECK_RC(lotus_session_open(cl, &s));
	CHECK_RC(lotus_table_create(s, "t", 8, &tb));
	uint16_t tid = cl->tables[tb].ids[0];
	CHECK_RC(net_worker_create(cl->net, &h, NULL, &w));
	CHECK_RC(net_connect(w, cl->servers[0].host, cl->servers[0].port, 5000, &conn));
	{   /* name our compute id (0, the owner of the txn ids below), as clients do */
		struct wire_buf hb;
		size_t hlen;
		wire_buf_init(&hb);
		CHECK_RC(wire_buf_begin(&hb, WIRE_HELLO, 0, 0));
		wire_buf_end(&hb);
		unsigned char *hp = wire_buf_detach(&hb, &hlen);
		CHECK_RC(net_send(conn, hp, hlen));
	}

	struct { const char *what; unsigned locked; uint16_t table; uint32_t len; int want; } c[] = {
		{ "value larger than the table's maximum", 6, 0, 16, LOTUS_ETOOBIG },
		{ "write without its X lock", 3, 0, 8, LOTUS_ESTATE },
		{ "write on a table that does not exist", 6, 200, 8, LOTUS_ENOTABLE },
	};
	for (unsigned i = 0; i < 3; i++) {
		uint64_t txn = 1000 + i, first = 100 * (i + 1);
		lock_keys(txn, tid, first, c[i].locked);
		int rc = commit(txn, tid, first, 6, 3, c[i].table ? c[i].table : tid, c[i].len);
		unsigned seen = visible(s, tb, first, 6);
		fprintf(stderr, "commit of 6 writes, the 4th a %s: %s, %u of the other 5 visible\n",
			c[i].what, lotus_strerror(rc), seen);
		CHECK(rc == c[i].want);
		CHECK(seen == 0);
	}
	/* the good shape commits */
	lock_keys(2000, tid, 900, 6);
	CHECK(commit(2000, tid, 900, 6, 99, tid, 8) == 0);
	CHECK(visible(s, tb, 900, 6) == 6);
	net_conn_close(conn);
	net_worker_destroy(w);
	lotus_session_close(s);
	lotus_disconnect(cl);
	printf("ok\n");
	return 0;
}
