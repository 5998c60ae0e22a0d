/*
 * test_malformed.c - a client that sends malformed messages gets error
 * replies (or is cut off) and does not take the memory server down: after
 * the abuse, a normal client still commits and reads back its data.
 */
#include <unistd.h>
#include "common/clock.h"
#include "common/common.h"
#include "common/ycsb_gen.h"
#include "compute/cluster.h"
#include "net/net.h"
#include "testutil.h"

static int errors_seen, closed;

static void on_msg(void *arg, net_conn_t *c, const void *data, size_t len)
{
	const struct wire_hdr *h = data;
	if (len >= sizeof(*h) && h->type == WIRE_ERROR)
		errors_seen++;
}

static void on_close(void *arg, net_conn_t *c, int reason)
{
	closed = 1;
}

static void send_copy(net_conn_t *c, const void *p, size_t len)
{
	void *b = net_buf_alloc(len ? len : 1);
	memcpy(b, p, len);
	net_send(c, b, len);
}

static size_t valid_req(unsigned char *buf)
{
	struct wire_buf b;
	size_t len;
	struct wire_req r = { .op = OP_READ, .key_len = 8, .txn_id = 99, .priority = 1 };
	unsigned char key[8] = { 0 };
	wire_buf_init(&b);
	wire_buf_begin(&b, WIRE_REQ, 7, 1);
	wire_buf_add_req(&b, &r, key, NULL);
	wire_buf_end(&b);
	unsigned char *p = wire_buf_detach(&b, &len);
	memcpy(buf, p, len);
	free(p);
	return len;
}

static void abuse(lotus_cluster_t *cl)
{
	struct net_handlers h = { .on_msg = on_msg, .on_close = on_close };
	net_worker_t *w;
	net_conn_t *c;
	unsigned char msg[256], bad[256];
	struct rng r;
	int sent = 0;
	rng_seed(&r, 3);
	CHECK_RC(net_worker_create(cl->net, &h, NULL, &w));
	CHECK_RC(net_connect(w, cl->servers[0].host, cl->servers[0].port, 5000, &c));
	size_t len = valid_req(msg);
	/* truncations, bad magic, bad version, bad type, bad lengths, random bytes */
	for (size_t cut = 1; cut < len; cut += 7, sent++)
		send_copy(c, msg, cut);
	memcpy(bad, msg, len); bad[0] ^= 0xff; send_copy(c, bad, len); sent++;
	memcpy(bad, msg, len); bad[2] = 99; send_copy(c, bad, len); sent++;
	memcpy(bad, msg, len); bad[3] = 77; send_copy(c, bad, len); sent++;
	memcpy(bad, msg, len); bad[6] = 5; send_copy(c, bad, len); sent++;   /* count */
	memcpy(bad, msg, len); bad[32 + 4] = 0xff; send_copy(c, bad, len); sent++; /* key_len */
	memcpy(bad, msg, len); bad[32 + 8] = 0xff; bad[32 + 9] = 0xff; send_copy(c, bad, len); sent++;
	memcpy(bad, msg, len); bad[32] = 200; send_copy(c, bad, len); sent++; /* op */
	for (int i = 0; i < 50; i++, sent++) {
		size_t n = 1 + rng_below(&r, sizeof(bad));
		for (size_t j = 0; j < n; j++)
			bad[j] = (unsigned char)rng_next(&r);
		if (i % 2)
			memcpy(bad, msg, 8); /* a plausible header over garbage */
		send_copy(c, bad, n);
	}
	uint64_t deadline = clock_now_ns() + 5000000000ULL;
	while (errors_seen < sent && !closed && clock_now_ns() < deadline)
		net_wait(w, 50);
	fprintf(stderr, "sent %d malformed messages, got %d error replies, closed=%d\n", sent,
		errors_seen, closed);
	CHECK(errors_seen == sent || closed);
	if (!closed)
		net_conn_close(c);
	net_worker_destroy(w);
}

static void run(const char *transport)
{
	lotus_cluster_t *cl = test_cluster(1, transport, LOTUS_NO_WAIT, LOTUS_BATCH_INTRA);
	lotus_session_t *s;
	lotus_txn_t *t;
	lotus_table_t tb;
	unsigned char k[8];
	uint64_t v = 12345;
	errors_seen = closed = 0;
	abuse(cl);
	key_from_u64(5, k);
	CHECK_RC(lotus_session_open(cl, &s));
	CHECK_RC(lotus_table_create(s, "t", 8, &tb));
	CHECK_RC(lotus_txn_begin(s, &t));
	CHECK_RC(lotus_txn_insert(t, tb, k, 8, &v, 8));
	CHECK_RC(lotus_txn_commit(t));
	CHECK_RC(lotus_txn_recycle(t));
	int op = lotus_txn_read(t, tb, k, 8);
	CHECK_RC(lotus_txn_execute(t));
	const void *val;
	size_t vlen;
	CHECK_RC(lotus_txn_result(t, op, &val, &vlen));
	CHECK(vlen == 8 && !memcmp(val, &v, 8));
	CHECK_RC(lotus_txn_commit(t));
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
