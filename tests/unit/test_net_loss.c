/*
 * test_net_loss.c - a peer killed with SIGKILL is detected within a bounded
 * time: over tcp by UCX peer error handling, over sm by the lease (1 s here).
 * A stopped (SIGSTOP) peer keeps its sockets, so on every transport only the
 * lease can notice it (LOTUS_ETIMEOUT); that case runs too.  The peer is a
 * forked child running an echo server; the client's on_close must see the
 * loss and later sends must fail cleanly.
 */
#include <signal.h>
#include <unistd.h>
#include <sys/wait.h>
#include "test_net_common.h"

static pid_t child = -1;

static void kill_child(void)
{
	if (child > 0) {
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
		child = -1;
	}
}

/* The child: an echo server until killed (or 30 s, so nothing outlives a test). */
static void serve(const char *transport, int fd)
{
	net_ctx_t *ctx;
	struct echo_server srv;
	if (test_ctx(transport, 1000, &ctx) || echo_start(&srv, ctx, 2))
		_exit(1);
	if (write(fd, &srv.port, sizeof(srv.port)) != sizeof(srv.port))
		_exit(1);
	sleep(30);
	_exit(0);
}

struct client {
	unsigned got;
	int closed, reason;
};

static void cl_on_msg(void *arg, net_conn_t *c, const void *data, size_t len)
{
	struct client *cl = arg;
	(void)c;
	(void)data;
	(void)len;
	cl->got++;
}

static void cl_on_close(void *arg, net_conn_t *c, int reason)
{
	struct client *cl = arg;
	(void)c;
	cl->closed++;
	cl->reason = reason;
}

static void run(const char *transport, int sig)
{
	int pfd[2];
	uint16_t port;
	CHECK(pipe(pfd) == 0);
	fflush(NULL);
	child = fork();
	CHECK(child >= 0);
	if (child == 0)
		serve(transport, pfd[1]);
	close(pfd[1]);
	if (read(pfd[0], &port, sizeof(port)) != sizeof(port)) {
		kill_child();
		printf("  %s: server did not start, skipped\n", transport);
		close(pfd[0]);
		return;
	}
	close(pfd[0]);

	net_ctx_t *ctx;
	CHECK(test_ctx(transport, 1000, &ctx) == 0);
	static const struct net_handlers h = { cl_on_msg, NULL, cl_on_close, NULL };
	struct client cl = { 0 };
	net_worker_t *w;
	net_conn_t *c;
	CHECK(net_worker_create(ctx, &h, &cl, &w) == 0);
	CHECK(net_connect(w, "127.0.0.1", port, 5000, &c) == 0);

	/* Exchange traffic, then go quiet for a while: the lease must hold while
	 * the peer lives (pings keep it alive). */
	CHECK(net_send(c, test_msg(64, 1), 64) == 0);
	uint64_t deadline = clock_now_ns() + 5000000000ULL;
	while (cl.got < 1 && clock_now_ns() < deadline)
		net_wait(w, 10);
	CHECK(cl.got == 1);
	deadline = clock_now_ns() + 2500000000ULL;
	while (clock_now_ns() < deadline)
		net_wait(w, 100);
	CHECK(cl.closed == 0);

	uint64_t t0 = clock_now_ns();
	if (sig == SIGKILL)
		kill_child();
	else
		kill(child, sig);   /* sockets stay open: only the lease can tell */
	deadline = t0 + 10000000000ULL;
	while (!cl.closed && clock_now_ns() < deadline)
		net_wait(w, 50);
	double secs = (double)(clock_now_ns() - t0) / 1e9;
	CHECK(cl.closed == 1);
	/* killed: the socket's error (tcp) or the lease (sm); stopped: the lease */
	CHECK(cl.reason == LOTUS_ETIMEOUT || (sig == SIGKILL && cl.reason == LOTUS_EUNAVAIL));
	CHECK(secs < (strcmp(transport, "sm") == 0 ? 3.0 : 5.0));
	struct net_stats st;
	net_worker_stats(w, &st);
	CHECK(st.conns_lost == 1);
	kill_child();

	/* A fresh connect to the dead port fails within its timeout. */
	int rc = net_connect(w, "127.0.0.1", port, 1000, &c);
	CHECK(rc == LOTUS_EUNAVAIL || rc == LOTUS_ETIMEOUT);

	net_worker_destroy(w);
	net_ctx_destroy(ctx);
	printf("  %s: %s peer: loss detected in %.2f s (connect to dead port: %s)\n", transport,
	       sig == SIGKILL ? "killed" : "stopped", secs, lotus_strerror(rc));
}

int main(void)
{
	const char *tr[4];
	int n = test_transports(tr);
	atexit(kill_child);
	for (int i = 0; i < n; i++) {
		run(tr[i], SIGKILL);
		run(tr[i], SIGSTOP);   /* on tcp too: the lease, not the socket, tells */
	}
	return 0;
}
