/*
 * session.c - a compute thread's session: its UCX worker and one connection
 * per memory server, per-server outgoing message buffers (the batching
 * point), and the dispatch of replies to transactions.
 *
 * Reply matching: a request's tag is (txn slot << 16 | op index); the slot
 * indexes s->slots, and the reply's txn_id must match the slot's current
 * transaction (so a reply that outlives its transaction is dropped).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "common/clock.h"
#include "common/common.h"
#include "common/log.h"
#include "compute/compute_int.h"

__thread lotus_session_t *session_current;

static void sess_on_msg(void *arg, net_conn_t *nc, const void *data, size_t len);
static void sess_on_close(void *arg, net_conn_t *nc, int reason);

static void sess_on_post(void *arg, void *item)
{
	txn_on_local_grant(arg, item);
}

static const struct net_handlers sess_handlers = {
	.on_msg = sess_on_msg, .on_close = sess_on_close, .on_post = sess_on_post,
};

static unsigned sess_server_of(lotus_session_t *s, net_conn_t *nc)
{
	return (unsigned)(uintptr_t)net_conn_user(nc);
}

static int sess_send_hello(lotus_session_t *s, unsigned sv)
{
	struct wire_buf b;
	size_t len;
	wire_buf_init(&b);
	int rc = wire_buf_begin(&b, WIRE_HELLO, s->cl->opts.compute_id, 0);
	if (rc)
		return rc;
	wire_buf_end(&b);
	unsigned char *p = wire_buf_detach(&b, &len);
	return net_send(s->conns[sv], p, len);
}

int lotus_session_open(lotus_cluster_t *c, lotus_session_t **out)
{
	lotus_session_t *s = calloc(1, sizeof(*s));
	int rc;
	if (!s)
		return -ENOMEM;
	s->cl = c;
	s->idx = atomic_fetch_add(&c->next_session, 1);
	rc = net_worker_create(c->net, &sess_handlers, s, &s->net);
	for (unsigned sv = 0; rc == 0 && sv < c->nservers; sv++) {
		wire_buf_init(&s->out[sv]);
		rc = net_connect(s->net, c->servers[sv].host, c->servers[sv].port, 10000,
				 &s->conns[sv]);
		if (rc) {
			log_error("cannot reach memory server %u at %s:%u: %s", sv,
				  c->servers[sv].host, c->servers[sv].port, lotus_strerror(rc));
			break;
		}
		net_conn_set_user(s->conns[sv], (void *)(uintptr_t)sv);
		rc = sess_send_hello(s, sv);
	}
	if (rc) {
		lotus_session_close(s);
		return rc;
	}
	*out = s;
	return 0;
}

void lotus_session_close(lotus_session_t *s)
{
	if (!s)
		return;
	for (unsigned sv = 0; sv < s->cl->nservers; sv++) {
		if (s->conns[sv])
			net_conn_close(s->conns[sv]);
		wire_buf_free(&s->out[sv]);
	}
	if (s->net)
		net_worker_destroy(s->net);
	free(s->slots);
	free(s->free_slots);
	free(s->admin_value);
	free(s);
}

void lotus_session_counters(const lotus_session_t *s, struct lotus_net_counters *out)
{
	*out = s->ctr;
}

/* ---- sending ------------------------------------------------------------- */

void session_flush_server(lotus_session_t *s, unsigned sv)
{
	struct wire_buf *b = &s->out[sv];
	size_t len;
	if (!(s->dirty & (1ULL << sv)))
		return;
	s->dirty &= ~(1ULL << sv);
	s->ctr.reqs_sent += b->count;
	wire_buf_end(b);
	unsigned char *p = wire_buf_detach(b, &len);
	s->ctr.msgs_sent++;
	s->ctr.bytes_sent += len;
	if (!s->conns[sv]) {
		free(p);
		return;
	}
	int rc = net_send(s->conns[sv], p, len);
	if (rc)
		log_debug("send to server %u failed: %s", sv, lotus_strerror(rc));
}

void session_flush(lotus_session_t *s)
{
	while (s->dirty) {
		unsigned sv = (unsigned)__builtin_ctzll(s->dirty);
		session_flush_server(s, sv);
	}
}

int session_queue(lotus_session_t *s, unsigned sv, const struct wire_req *r, const void *key,
		  const void *value)
{
	struct wire_buf *b = &s->out[sv];
	int rc;
	if (!s->conns[sv])
		return LOTUS_EUNAVAIL;
	if (!(s->dirty & (1ULL << sv))) {
		rc = wire_buf_begin(b, WIRE_REQ, s->cl->opts.compute_id, ++s->msg_seq);
		if (rc)
			return rc;
		s->dirty |= 1ULL << sv;
	}
	if (b->count == 0xffff)
		session_flush_server(s, sv);
	rc = wire_buf_add_req(b, r, key, value);
	if (rc == -E2BIG) { /* message full: send it and start another */
		session_flush_server(s, sv);
		return session_queue(s, sv, r, key, value);
	}
	if (rc == 0 && s->cl->opts.batch == LOTUS_BATCH_NONE)
		session_flush_server(s, sv);
	return rc;
}

/* ---- receiving ----------------------------------------------------------- */

static void sess_on_admin_reply(lotus_session_t *s, unsigned sv, const struct wire_rep *r,
				const unsigned char *value)
{
	if (r->status && !s->admin_status)
		s->admin_status = r->status;
	s->admin_arg[sv] = r->arg;
	if (r->value_len) {
		char *v = realloc(s->admin_value, r->value_len + 1);
		if (v) {
			memcpy(v, value, r->value_len);
			v[r->value_len] = 0;
			s->admin_value = v;
			s->admin_vlen = r->value_len;
		}
	}
	s->admin_due--;
}

static void sess_on_reply(lotus_session_t *s, unsigned sv, const struct wire_rep *r,
			  const unsigned char *value)
{
	unsigned slot = r->tag >> 16;
	if (slot == TAG_ADMIN_SLOT) {
		sess_on_admin_reply(s, sv, r, value);
		return;
	}
	if (slot >= s->nslots || !s->slots[slot] || s->slots[slot]->id != r->txn_id) {
		log_debug("dropping reply for an unknown transaction %llx",
			  (unsigned long long)r->txn_id);
		return;
	}
	txn_on_reply(s->slots[slot], sv, r, value);
}

static void sess_on_msg(void *arg, net_conn_t *nc, const void *data, size_t len)
{
	lotus_session_t *s = arg;
	unsigned sv = sess_server_of(s, nc);
	const struct wire_hdr *h = data;
	struct wire_iter it;
	const struct wire_rep *r;
	const unsigned char *k, *v;
	s->ctr.msgs_recv++;
	s->ctr.bytes_recv += len;
	int rc = wire_msg_check(data, len);
	if (rc || h->type != WIRE_REP) {
		log_error("memory server %u: %s", sv,
			  rc ? lotus_strerror(rc)
			  : h->type == WIRE_ERROR ? lotus_strerror(h->aux) : "unexpected message");
		return;
	}
	wire_iter_init(&it, data, len);
	while (wire_next_rep(&it, &r, &k, &v) == 1)
		sess_on_reply(s, sv, r, v);
}

static void sess_on_close(void *arg, net_conn_t *nc, int reason)
{
	lotus_session_t *s = arg;
	unsigned sv = sess_server_of(s, nc);
	log_error("lost memory server %u: %s", sv, lotus_strerror(reason));
	s->conns[sv] = NULL;
	s->lost = 1;
	if (s->admin_due) {
		s->admin_due = 0;
		s->admin_status = LOTUS_EUNAVAIL;
	}
	for (unsigned i = 0; i < s->nslots; i++)
		if (s->slots[i])
			txn_on_server_lost(s->slots[i], sv);
}

int lotus_session_poll(lotus_session_t *s, int timeout_ms)
{
	lotus_session_t *outer = session_current;
	session_current = s;
	session_flush(s);
	int n = net_progress(s->net);
	if (n == 0 && timeout_ms != 0 && !s->ready_head && !s->grants)
		n = net_wait(s->net, timeout_ms);
	txn_drain_grants(s);
	txn_drain_ready(s);
	session_flush(s);
	session_current = outer;
	return n;
}

/* A synchronous request outside any transaction (table creation, stats). */
int session_admin(lotus_session_t *s, unsigned sv, struct wire_req *r, const void *key,
		  const void *value, int timeout_ms)
{
	r->tag = TAG_ADMIN_SLOT << 16;
	s->admin_status = 0;
	s->admin_due = 1;
	int rc = session_queue(s, sv, r, key, value);
	if (rc)
		return rc;
	session_flush_server(s, sv);
	/* progress the network only: completed transactions wait on the ready
	 * list, so no callback runs inside this (possibly nested) call */
	uint64_t deadline = clock_now_ns() + (uint64_t)timeout_ms * 1000000ULL;
	while (s->admin_due > 0 && clock_now_ns() < deadline)
		if (net_progress(s->net) == 0)
			net_wait(s->net, 50);
	if (s->admin_due > 0) {
		s->admin_due = 0;
		return LOTUS_ETIMEOUT;
	}
	return s->admin_status;
}

int session_writeback(lotus_session_t *s, unsigned sv, uint16_t table, const void *key,
		      uint16_t klen, const void *value, uint32_t vlen)
{
	struct wire_req r = { .op = OP_WRITEBACK, .table = table, .key_len = klen,
			      .value_len = vlen };
	return session_admin(s, sv, &r, key, value, 10000);
}

/* Counters of one memory server as JSON text (OP_STATS); the string is owned by
 * the session and valid until the next call. */
const char *lotus_server_stats(lotus_session_t *s, unsigned sv)
{
	struct wire_req r = { .op = OP_STATS };
	if (sv >= s->cl->nservers || session_admin(s, sv, &r, NULL, NULL, 5000) != 0)
		return NULL;
	return s->admin_value;
}
