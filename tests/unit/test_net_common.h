/*
 * test_net_common.h - helpers shared by the test_net_* programs: an echo server
 * running on its own threads (one listener worker handing connections to
 * nthreads workers), message builders, and bounded waits.
 *
 * Everything is loopback (127.0.0.1).  Each test runs its body once per
 * transport in $LOTUS_NET_TEST_TRANSPORTS (default "tcp sm").
 */
#ifndef TEST_NET_COMMON_H
#define TEST_NET_COMMON_H
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/clock.h"
#include "common/common.h"
#include "net/net.h"
#include "check.h"


#define ECHO_MAX_THREADS 8

struct echo_thread {
	struct echo_server *srv;
	net_worker_t *w;
	pthread_t tid;
	atomic_uint accepted, msgs, posts, closed;
	atomic_int last_close_reason;
};

struct echo_server {
	net_ctx_t *ctx;
	net_listener_t *l;
	unsigned nthreads;
	struct echo_thread t[ECHO_MAX_THREADS];
	atomic_int stop, ready;
	uint16_t port;
};

/* Echo every message back unchanged. */
static __attribute__((unused)) void echo_on_msg(void *arg, net_conn_t *c, const void *data, size_t len)
{
	struct echo_thread *t = arg;
	void *b = net_buf_alloc(len);
	memcpy(b, data, len);
	net_send(c, b, len);
	t->msgs++;
}

static __attribute__((unused)) void echo_on_accept(void *arg, net_conn_t *c)
{
	struct echo_thread *t = arg;
	(void)c;
	t->accepted++;
}

static __attribute__((unused)) void echo_on_close(void *arg, net_conn_t *c, int reason)
{
	struct echo_thread *t = arg;
	(void)c;
	t->last_close_reason = reason;
	t->closed++;
}

static __attribute__((unused)) void echo_on_post(void *arg, void *item)
{
	struct echo_thread *t = arg;
	(void)item;
	t->posts++;
}

static __attribute__((unused)) void *echo_thread_main(void *arg)
{
	struct echo_thread *t = arg;
	while (!t->srv->stop)
		net_wait(t->w, 50);
	return NULL;
}

/* Start an echo server with nthreads workers; thread 0 owns the listener. */
static __attribute__((unused)) int echo_start(struct echo_server *s, net_ctx_t *ctx, unsigned nthreads)
{
	static const struct net_handlers h = { echo_on_msg, echo_on_accept, echo_on_close,
					       echo_on_post };
	net_worker_t *ws[ECHO_MAX_THREADS];
	memset(s, 0, sizeof(*s));
	s->ctx = ctx;
	s->nthreads = nthreads;
	for (unsigned i = 0; i < nthreads; i++) {
		s->t[i].srv = s;
		int rc = net_worker_create(ctx, &h, &s->t[i], &s->t[i].w);
		if (rc)
			return rc;
		ws[i] = s->t[i].w;
	}
	int rc = net_listen(ws[0], "127.0.0.1", 0, ws, nthreads, &s->l);
	if (rc)
		return rc;
	s->port = net_listener_port(s->l);
	for (unsigned i = 0; i < nthreads; i++)
		pthread_create(&s->t[i].tid, NULL, echo_thread_main, &s->t[i]);
	return 0;
}

static __attribute__((unused)) void echo_stop(struct echo_server *s)
{
	s->stop = 1;
	for (unsigned i = 0; i < s->nthreads; i++)
		net_post(s->t[i].w, NULL);
	for (unsigned i = 0; i < s->nthreads; i++)
		pthread_join(s->t[i].tid, NULL);
	net_listener_destroy(s->l);
	for (unsigned i = 0; i < s->nthreads; i++)
		net_worker_destroy(s->t[i].w);
}

/* A wire message of total length len (>= 32) with the given seq; the payload
 * is a pattern derived from seq so the receiver can verify it. */
static __attribute__((unused)) void *test_msg(size_t len, uint64_t seq)
{
	unsigned char *b = net_buf_alloc(len);
	struct wire_hdr *h = (struct wire_hdr *)b;
	memset(h, 0, sizeof(*h));
	h->magic = WIRE_MAGIC;
	h->version = WIRE_VERSION;
	h->type = WIRE_REQ;
	h->length = (uint32_t)len;
	h->seq = seq;
	for (size_t i = sizeof(*h); i < len; i++)
		b[i] = (unsigned char)(seq * 31 + i);
	return b;
}

static __attribute__((unused)) int test_msg_ok(const void *data, size_t len, uint64_t seq)
{
	const struct wire_hdr *h = data;
	const unsigned char *b = data;
	if (len < sizeof(*h) || h->seq != seq || h->length != len)
		return 0;
	for (size_t i = sizeof(*h); i < len; i++)
		if (b[i] != (unsigned char)(seq * 31 + i))
			return 0;
	return 1;
}

/* The transports to run: $LOTUS_NET_TEST_TRANSPORTS or "tcp sm". */
static __attribute__((unused)) int test_transports(const char *out[4])
{
	static char buf[64];
	const char *env = getenv("LOTUS_NET_TEST_TRANSPORTS");
	snprintf(buf, sizeof(buf), "%s", env && *env ? env : "tcp sm");
	int n = 0;
	for (char *save = NULL, *t = strtok_r(buf, " ,", &save); t && n < 4;
	     t = strtok_r(NULL, " ,", &save))
		out[n++] = t;
	return n;
}

/* Make UCX_TLS follow the transport under test (the runner exports tcp). */
static __attribute__((unused)) int test_ctx(const char *transport, unsigned lease_ms, net_ctx_t **ctx)
{
	unsetenv("UCX_TLS");
	struct net_opts o = { .transport = transport, .spin_us = 50, .lease_ms = lease_ms };
	return net_ctx_create(&o, ctx);
}

#endif
