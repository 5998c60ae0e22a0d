/*
 * async_churn.c - reproduce UCX 1.13's async abort (async.c,
 * `handler->async == async`) on demand.
 *
 *   async_churn [ROUNDS [CLIENTS [THREADS]]]      (default 10 6 4)
 *
 * Each round forks a server process: an echo server whose listener worker
 * hands connections to 4 worker threads, as a memory server does.  Then it
 * forks CLIENTS client processes, each with THREADS threads that loop 200
 * times: create a worker, connect, exchange one message, then close the
 * connection or destroy the worker with it open.  Every other client is killed
 * with SIGKILL while it churns, so the server also loses peers.  A round ends
 * by stopping the server with SIGTERM; any process that died of SIGABRT
 * counts as an abort.
 *
 *   CHURN_KEEP_WORKER=1   client threads keep one worker; only connections churn
 *   CHURN_ONE_TARGET=1    the server keeps every connection on the listener's worker
 *
 * Prints "rounds R server-aborts S client-aborts C other O" and exits 1 if any
 * process aborted.  Not part of the suite (it runs for minutes); `make stress`
 * builds it.
 */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include "../unit/test_net_common.h"

static atomic_int got;

static void cli_on_msg(void *arg, net_conn_t *c, const void *data, size_t len)
{
	(void)arg; (void)c; (void)data; (void)len;
	got++;
}

static uint16_t port;
static unsigned cycles = 200;
static int keep_worker;   /* $CHURN_KEEP_WORKER: workers live on, connections churn */

static void *client_thread(void *arg)
{
	net_ctx_t *ctx = arg;
	static const struct net_handlers h = { cli_on_msg, NULL, NULL, NULL };
	net_worker_t *w = NULL;
	for (unsigned i = 0; i < cycles; i++) {
		if (!w && net_worker_create(ctx, &h, NULL, &w))
			continue;
		net_conn_t *c;
		if (net_connect(w, "127.0.0.1", port, 1000, &c) == 0) {
			net_send(c, test_msg(64, i), 64);
			for (int k = 0; k < 20; k++)
				net_wait(w, 5);
			if (keep_worker || i % 2)
				net_conn_close(c);
		}
		if (!keep_worker) {
			net_worker_destroy(w);
			w = NULL;
		}
	}
	net_worker_destroy(w);
	return NULL;
}

static void client(unsigned nthreads)
{
	net_ctx_t *ctx;
	if (test_ctx("tcp", 500, &ctx))
		_exit(2);
	pthread_t t[16];
	for (unsigned i = 0; i < nthreads; i++)
		pthread_create(&t[i], NULL, client_thread, ctx);
	for (unsigned i = 0; i < nthreads; i++)
		pthread_join(t[i], NULL);
	_exit(0);
}

static volatile sig_atomic_t stop_srv;
static void on_term(int s) { (void)s; stop_srv = 1; }

static void server(int ready_fd)
{
	net_ctx_t *ctx;
	struct echo_server s;
	if (test_ctx("tcp", 500, &ctx) || echo_start(&s, ctx, 4))
		_exit(2);
	if (getenv("CHURN_ONE_TARGET")) {
		/* Hypothesis check: accept every connection on the listener's worker. */
		net_listener_destroy(s.l);
		net_worker_t *w0 = s.t[0].w;
		if (net_listen(w0, "127.0.0.1", 0, &w0, 1, &s.l))
			_exit(2);
		s.port = net_listener_port(s.l);
	}
	signal(SIGTERM, on_term);
	if (write(ready_fd, &s.port, sizeof(s.port)) != sizeof(s.port))
		_exit(2);
	while (!stop_srv)
		usleep(10000);
	_exit(0);
}

int main(int argc, char **argv)
{
	unsigned rounds = argc > 1 ? (unsigned)atoi(argv[1]) : 10;
	unsigned nclients = argc > 2 ? (unsigned)atoi(argv[2]) : 6;
	unsigned nthreads = argc > 3 ? (unsigned)atoi(argv[3]) : 4;
	unsigned aborts = 0, caborts = 0, other = 0;
	keep_worker = getenv("CHURN_KEEP_WORKER") && atoi(getenv("CHURN_KEEP_WORKER"));
	if (nthreads > 16)
		nthreads = 16;
	for (unsigned r = 0; r < rounds; r++) {
		int p[2];
		if (pipe(p))
			return 2;
		pid_t srv = fork();
		if (srv == 0) {
			close(p[0]);
			server(p[1]);
		}
		close(p[1]);
		if (read(p[0], &port, sizeof(port)) != sizeof(port)) {
			fprintf(stderr, "round %u: server did not start\n", r);
			return 2;
		}
		close(p[0]);
		pid_t cl[64];
		for (unsigned i = 0; i < nclients && i < 64; i++) {
			cl[i] = fork();
			if (cl[i] == 0)
				client(nthreads);
		}
		/* Kill every other client while it churns: the server loses peers. */
		usleep(300000);
		for (unsigned i = 0; i < nclients; i += 2)
			kill(cl[i], SIGKILL);
		for (unsigned i = 0; i < nclients; i++) {
			int cs;
			waitpid(cl[i], &cs, 0);
			if (WIFSIGNALED(cs) && WTERMSIG(cs) == SIGABRT) {
				caborts++;
				fprintf(stderr, "round %u: client aborted\n", r);
			}
		}
		int st;
		pid_t done = waitpid(srv, &st, WNOHANG);
		if (done == 0) {
			kill(srv, SIGTERM);
			waitpid(srv, &st, 0);
		}
		if (WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT) {
			aborts++;
			fprintf(stderr, "round %u: server aborted\n", r);
		} else if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
			other++;
			fprintf(stderr, "round %u: server ended with status 0x%x\n", r, st);
		}
	}
	printf("rounds %u server-aborts %u client-aborts %u other %u\n", rounds, aborts,
	       caborts, other);
	return aborts || caborts || other ? 1 : 0;
}
