/*
 * test_net_fault.c - LOTUS_NET_FAULT: "drop:N" loses messages (and nothing
 * else breaks), "corrupt:N" damages some (the pattern check sees it).
 * Client and echo server share one process, so both directions count.
 */
#include "test_net_common.h"

struct client {
	unsigned got, intact, rejected;
};

static void cl_on_msg(void *arg, net_conn_t *c, const void *data, size_t len)
{
	struct client *cl = arg;
	const struct wire_hdr *h = data;
	(void)c;
	cl->got++;
	if (test_msg_ok(data, len, h->seq))
		cl->intact++;
	else
		cl->rejected++;
}

static void run(const char *transport, const char *fault, struct client *cl)
{
	net_ctx_t *ctx;
	setenv("LOTUS_NET_FAULT", fault, 1);
	CHECK(test_ctx(transport, 3000, &ctx) == 0);
	unsetenv("LOTUS_NET_FAULT");
	struct echo_server srv;
	CHECK(echo_start(&srv, ctx, 1) == 0);
	static const struct net_handlers h = { cl_on_msg, NULL, NULL, NULL };
	net_worker_t *w;
	net_conn_t *c = NULL;
	CHECK(net_worker_create(ctx, &h, cl, &w) == 0);
	/* The connect PING itself may be dropped: retry a few times. */
	for (int i = 0; i < 5 && !c; i++)
		net_connect(w, "127.0.0.1", srv.port, 1000, &c);
	CHECK(c != NULL);
	memset(cl, 0, sizeof(*cl));
	for (unsigned i = 0; i < 200; i++)
		CHECK(net_send(c, test_msg(256, i), 256) == 0);   /* REQ with count 0 */
	uint64_t end = clock_now_ns() + 1000000000ULL;
	while (clock_now_ns() < end)
		net_wait(w, 50);
	net_worker_destroy(w);
	echo_stop(&srv);
	net_ctx_destroy(ctx);
	printf("  %s %s: %u back, %u intact, %u damaged\n", transport, fault, cl->got,
	       cl->intact, cl->rejected);
}

int main(void)
{
	const char *tr[4];
	int n = test_transports(tr);
	for (int i = 0; i < n; i++) {
		struct client cl;
		run(tr[i], "drop:5", &cl);
		CHECK(cl.got > 80 && cl.got < 190);   /* ~64% of 200 survive both ways */
		CHECK(cl.intact == cl.got);
		run(tr[i], "corrupt:3", &cl);
		CHECK(cl.got == 200);
		CHECK(cl.intact < 190 && cl.intact > 60);
	}
	return 0;
}
