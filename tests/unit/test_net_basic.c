/*
 * test_net_basic.c - connect, ordered send/recv, a 1 MiB message, listener
 * handoff over several worker threads, and per-type counters, over loopback
 * on each transport (tcp, sm).
 */
#include "test_net_common.h"

struct client {
	uint64_t next_seq;      /* next echo expected */
	unsigned got, bad;
	int closed;
};

static void cl_on_msg(void *arg, net_conn_t *c, const void *data, size_t len)
{
	struct client *cl = arg;
	(void)c;
	if (!test_msg_ok(data, len, cl->next_seq))
		cl->bad++;
	cl->next_seq++;
	cl->got++;
}

static void cl_on_close(void *arg, net_conn_t *c, int reason)
{
	struct client *cl = arg;
	(void)c;
	(void)reason;
	cl->closed++;
}

/* Wait until cl->got reaches want, at most ms milliseconds. */
static int wait_got(net_worker_t *w, struct client *cl, unsigned want, int ms)
{
	uint64_t deadline = clock_now_ns() + (uint64_t)ms * 1000000ULL;
	while (cl->got < want && clock_now_ns() < deadline)
		net_wait(w, 10);
	return cl->got >= want;
}

static void run(const char *transport)
{
	net_ctx_t *ctx;
	int rc = test_ctx(transport, 3000, &ctx);
	if (rc == LOTUS_EUNSUPPORTED) {
		printf("  %s: unsupported here, skipped\n", transport);
		return;
	}
	CHECK(rc == 0);
	CHECK(strcmp(net_ctx_transport(ctx), transport) == 0);
	CHECK(net_ctx_max_msg(ctx) >= (64u << 10) + 4096);

	struct echo_server srv;
	CHECK(echo_start(&srv, ctx, 3) == 0);
	CHECK(srv.port != 0);

	static const struct net_handlers h = { cl_on_msg, NULL, cl_on_close, NULL };
	struct client cl = { 0 };
	net_worker_t *w;
	CHECK(net_worker_create(ctx, &h, &cl, &w) == 0);

	/* Six connections land round-robin on the three server threads. */
	net_conn_t *conns[6];
	for (int i = 0; i < 6; i++) {
		rc = net_connect(w, "127.0.0.1", srv.port, 5000, &conns[i]);
		if (rc)
			fprintf(stderr, "connect: %s\n", lotus_strerror(rc));
		CHECK(rc == 0);
	}
	for (unsigned i = 0; i < 3; i++)
		CHECK(srv.t[i].accepted == 2);

	/* 1000 messages of varied size on one connection come back in order. */
	net_conn_t *c = conns[0];
	unsigned n = 1000;
	for (unsigned i = 0; i < n; i++) {
		size_t len = 32 + (i * 37) % 3000;
		CHECK(net_send(c, test_msg(len, i), len) == 0);
		if (i % 64 == 63)
			net_progress(w);
	}
	CHECK(wait_got(w, &cl, n, 10000));
	CHECK(cl.bad == 0);

	/* Large messages: 64 KiB + headers and 1 MiB (eager), 2 MiB (rendezvous), interleaved with small. */
	size_t sizes[] = { (64u << 10) + 32 + 48 + 128, 32, 1u << 20, 100, 2u << 20 };
	for (unsigned i = 0; i < ARRAY_SIZE(sizes); i++)
		CHECK(net_send(conns[1], test_msg(sizes[i], n + i), sizes[i]) == 0);
	CHECK(wait_got(w, &cl, n + ARRAY_SIZE(sizes), 10000));
	CHECK(cl.bad == 0);

	/* Counters: everything we sent was a REQ (net's PINGs are type PING). */
	struct net_stats st;
	net_worker_stats(w, &st);
	CHECK(st.sent[WIRE_REQ].msgs == n + ARRAY_SIZE(sizes));
	CHECK(st.recv[WIRE_REQ].msgs == n + ARRAY_SIZE(sizes));
	CHECK(st.sent[WIRE_PING].msgs >= 6);
	CHECK(st.recv[WIRE_PONG].msgs >= 6);
	CHECK(st.recv[WIRE_REQ].bytes > (2u << 20));

	/* Closing from the client reaches the server's on_close with reason 0. */
	for (int i = 0; i < 6; i++)
		net_conn_close(conns[i]);
	uint64_t deadline = clock_now_ns() + 5000000000ULL;
	unsigned closed;
	do {
		net_wait(w, 10);
		closed = srv.t[0].closed + srv.t[1].closed + srv.t[2].closed;
	} while (closed < 6 && clock_now_ns() < deadline);
	CHECK(closed == 6);
	CHECK(cl.closed == 0);   /* local closes do not call on_close */

	net_worker_destroy(w);
	echo_stop(&srv);
	net_ctx_destroy(ctx);
	printf("  %s: ok\n", transport);
}

int main(void)
{
	const char *tr[4];
	int n = test_transports(tr);
	for (int i = 0; i < n; i++)
		run(tr[i]);
	return 0;
}
