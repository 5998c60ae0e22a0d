/*
 * session.c - a compute thread's session and its sending group: the UCX
 * worker with one connection per memory server, the per-server outgoing
 * message buffers (the batching point), and the dispatch of replies to
 * transactions.
 *
 * Groups (--batch inter, --group-size G): sessions idx/G share one struct
 * sgroup.  A member that enters lotus_session_poll() takes the group lock and
 * then flushes every member's buffered requests as one message per server,
 * progresses the worker and hands each reply to its transaction, whatever
 * member owns it; completions land on the owner's ready list, which only the
 * owner drains.  Outside inter batching every session is a group of one and
 * the lock is never contended.
 *
 * Reply matching: a request's tag is (txn slot << 16 | op index); the slot
 * indexes g->slots, and the reply's txn_id must match the slot's current
 * transaction (so a reply that outlives its transaction is dropped).
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "common/clock.h"
#include "common/common.h"
#include "common/log.h"
#include "compute/compute_int.h"

__thread lotus_session_t *session_current;

static void sess_on_msg(void *arg, net_conn_t *nc, const void *data, size_t len);
static void sess_on_close(void *arg, net_conn_t *nc, int reason);

static void sess_on_post(void *arg, void *item)
{
	struct lock_waiter *w = item;
	lotus_txn_t *t = w->owner;
	txn_on_local_grant(t->s, w);
}

static const struct net_handlers sess_handlers = {
	.on_msg = sess_on_msg, .on_close = sess_on_close, .on_post = sess_on_post,
};

void group_lock(struct sgroup *g)
{
	pthread_mutex_lock(&g->mu);
}

void group_unlock(struct sgroup *g)
{
	pthread_mutex_unlock(&g->mu);
}

/* ---- the lease keeper --------------------------------------------------------
 *
 * A memory server gives a connection up when it hears nothing on it for a
 * lease (net_liveness.c), and only a progressed worker answers its PINGs.
 * A session's worker is progressed by its own thread inside lotus calls, so
 * a thread busy in its own code for a lease would lose its transactions and
 * connections although the process is alive.  One thread per cluster
 * therefore progresses, every lease/8, each group whose lock it can take at
 * once (a group in use is progressed by its user anyway).  What it receives
 * lands where the owner's own poll would put it (ready lists, under the
 * group lock).  A paused process pauses this thread too, so its leases do
 * expire, which is the point. */

static void *keeper_main(void *arg)
{
	lotus_cluster_t *c = arg;
	unsigned period_ms = MAX(c->lease_ms / 8, 10u);
	pthread_mutex_lock(&c->live_mu);
	while (!c->keeper_stop) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		uint64_t ns = (uint64_t)ts.tv_nsec + (uint64_t)period_ms * 1000000ULL;
		ts.tv_sec += (time_t)(ns / 1000000000ULL);
		ts.tv_nsec = (long)(ns % 1000000000ULL);
		pthread_cond_timedwait(&c->keeper_cv, &c->live_mu, &ts);
		for (struct sgroup *g = c->live; g && !c->keeper_stop; g = g->live_next) {
			if (pthread_mutex_trylock(&g->mu) != 0)
				continue;
			net_progress(g->net);
			pthread_mutex_unlock(&g->mu);
		}
	}
	pthread_mutex_unlock(&c->live_mu);
	return NULL;
}

int keeper_init(lotus_cluster_t *c)
{
	pthread_condattr_t ca;
	pthread_mutex_init(&c->live_mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->keeper_cv, &ca);
	pthread_condattr_destroy(&ca);
	return 0;
}

void keeper_stop(lotus_cluster_t *c)
{
	pthread_mutex_lock(&c->live_mu);
	c->keeper_stop = 1;
	pthread_cond_broadcast(&c->keeper_cv);
	int on = c->keeper_on;
	c->keeper_on = 0;
	pthread_mutex_unlock(&c->live_mu);
	if (on)
		pthread_join(c->keeper, NULL);
	pthread_cond_destroy(&c->keeper_cv);
	pthread_mutex_destroy(&c->live_mu);
}

static void keeper_add(lotus_cluster_t *c, struct sgroup *g)
{
	pthread_mutex_lock(&c->live_mu);
	g->live_prev = NULL;
	g->live_next = c->live;
	if (c->live)
		c->live->live_prev = g;
	c->live = g;
	if (!c->keeper_on && !c->keeper_stop) {
		if (pthread_create(&c->keeper, NULL, keeper_main, c) == 0)
			c->keeper_on = 1;
		else
			log_warn("no lease keeper thread: a session must be polled within "
				 "every lease (%u ms)", c->lease_ms);
	}
	pthread_mutex_unlock(&c->live_mu);
}

static void keeper_remove(lotus_cluster_t *c, struct sgroup *g)
{
	pthread_mutex_lock(&c->live_mu);   /* waits for a keeper pass over g */
	if (g->live_prev)
		g->live_prev->live_next = g->live_next;
	else if (c->live == g)
		c->live = g->live_next;
	if (g->live_next)
		g->live_next->live_prev = g->live_prev;
	g->live_next = g->live_prev = NULL;
	pthread_mutex_unlock(&c->live_mu);
}

static int group_send_hello(lotus_cluster_t *c, struct sgroup *g, unsigned sv)
{
	struct wire_buf b;
	size_t len;
	wire_buf_init(&b);
	int rc = wire_buf_begin(&b, WIRE_HELLO, c->opts.compute_id, 0);
	if (rc)
		return rc;
	wire_buf_end(&b);
	unsigned char *p = wire_buf_detach(&b, &len);
	return net_send(g->conns[sv], p, len);
}

static void group_destroy(lotus_cluster_t *c, struct sgroup *g)
{
	keeper_remove(c, g);
	/* net_worker_destroy closes the connections: a peer that does not answer
	 * (a stopped server) gets a forced close, not a flush that never ends */
	for (unsigned sv = 0; sv < c->nservers; sv++)
		wire_buf_free(&g->out[sv]);
	if (g->net)
		net_worker_destroy(g->net);
	pthread_mutex_destroy(&g->mu);
	free(g->slots);
	free(g->free_slots);
	free(g->admin_value);
	free(g);
}

static int group_create(lotus_cluster_t *c, int shared, struct sgroup **out)
{
	struct sgroup *g = calloc(1, sizeof(*g));
	pthread_mutexattr_t ma;
	int rc;
	if (!g)
		return -ENOMEM;
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
	pthread_mutex_init(&g->mu, &ma);
	pthread_mutexattr_destroy(&ma);
	/* serialized, not single-threaded: the lease keeper progresses it too */
	(void)shared;
	rc = net_worker_create_shared(c->net, &sess_handlers, g, &g->net);
	for (unsigned sv = 0; rc == 0 && sv < c->nservers; sv++) {
		wire_buf_init(&g->out[sv]);
		rc = net_connect(g->net, c->servers[sv].host, c->servers[sv].port,
				 (int)(c->timeout_ns / 1000000), &g->conns[sv]);
		if (rc) {
			log_error("cannot reach memory server %u at %s:%u: %s", sv,
				  c->servers[sv].host, c->servers[sv].port, lotus_strerror(rc));
			break;
		}
		net_conn_set_user(g->conns[sv], (void *)(uintptr_t)sv);
		rc = group_send_hello(c, g, sv);
	}
	if (rc) {
		group_destroy(c, g);
		return rc;
	}
	keeper_add(c, g);
	*out = g;
	return 0;
}

/* The group of session idx: its own under intra/none batching, else shared
 * by group_size consecutive sessions. */
static int group_attach(lotus_cluster_t *c, unsigned idx, struct sgroup **out)
{
	unsigned gs = c->opts.group_size ? c->opts.group_size : 8;
	if (c->opts.batch != LOTUS_BATCH_INTER || gs == 1 || idx / gs >= ARRAY_SIZE(c->groups))
		return group_create(c, 0, out);
	int rc = 0;
	pthread_mutex_lock(&c->groups_mu);
	struct sgroup **slot = &c->groups[idx / gs];
	if (!*slot)
		rc = group_create(c, 1, slot);
	if (rc == 0) {
		(*slot)->members++;
		*out = *slot;
	}
	pthread_mutex_unlock(&c->groups_mu);
	return rc;
}

static void group_detach(lotus_cluster_t *c, struct sgroup *g)
{
	int last = 1;
	pthread_mutex_lock(&c->groups_mu);
	for (size_t i = 0; i < ARRAY_SIZE(c->groups); i++)
		if (c->groups[i] == g) {
			last = --g->members == 0;
			if (last)
				c->groups[i] = NULL;
		}
	pthread_mutex_unlock(&c->groups_mu);
	if (last)
		group_destroy(c, g);
}

int lotus_session_open(lotus_cluster_t *c, lotus_session_t **out)
{
	lotus_session_t *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->cl = c;
	s->idx = atomic_fetch_add(&c->next_session, 1);
	/* Transaction ids must not repeat across runs of a process either:
	 * durable servers remember the outcomes of prepared transactions by id. */
	uint64_t w = clock_wall_ns() * 0x9e3779b97f4a7c15ULL;
	s->txn_seq = (uint32_t)(w >> 32);
	int rc = group_attach(c, s->idx, &s->g);
	if (rc) {
		free(s);
		return rc;
	}
	*out = s;
	return 0;
}

void lotus_session_close(lotus_session_t *s)
{
	if (!s)
		return;
	group_detach(s->cl, s->g);
	free(s);
}

void lotus_session_counters(const lotus_session_t *s, struct lotus_net_counters *out)
{
	*out = s->ctr;
}

/* ---- sending (group lock held) -------------------------------------------- */

static void group_flush_server(lotus_session_t *s, unsigned sv)
{
	struct sgroup *g = s->g;
	struct wire_buf *b = &g->out[sv];
	size_t len;
	if (!(g->dirty & (1ULL << sv)))
		return;
	g->dirty &= ~(1ULL << sv);
	s->ctr.reqs_sent += b->count;
	wire_buf_end(b);
	unsigned char *p = wire_buf_detach(b, &len);
	s->ctr.msgs_sent++;
	s->ctr.bytes_sent += len;
	if (!g->conns[sv]) {
		free(p);
		return;
	}
	int rc = net_send(g->conns[sv], p, len);
	if (rc)
		log_debug("send to server %u failed: %s", sv, lotus_strerror(rc));
}

void session_flush_server(lotus_session_t *s, unsigned sv)
{
	group_lock(s->g);
	group_flush_server(s, sv);
	group_unlock(s->g);
}

void session_flush(lotus_session_t *s)
{
	struct sgroup *g = s->g;
	group_lock(g);
	while (g->dirty)
		group_flush_server(s, (unsigned)__builtin_ctzll(g->dirty));
	group_unlock(g);
}

int session_queue(lotus_session_t *s, unsigned sv, const struct wire_req *r, const void *key,
		  const void *value)
{
	struct sgroup *g = s->g;
	struct wire_buf *b = &g->out[sv];
	int rc = 0;
	group_lock(g);
	if (!g->conns[sv]) {
		rc = g->lost_reason[sv] ? g->lost_reason[sv] : LOTUS_EUNAVAIL;
		goto out;
	}
	if (g->dirty & (1ULL << sv) && b->count == 0xffff)
		group_flush_server(s, sv);
	if (!(g->dirty & (1ULL << sv))) {
		rc = wire_buf_begin(b, WIRE_REQ, s->cl->opts.compute_id, ++g->msg_seq);
		if (rc)
			goto out;
		g->dirty |= 1ULL << sv;
	}
	rc = wire_buf_add_req(b, r, key, value);
	if (rc == -E2BIG && b->count > 0) { /* message full: send it, start another */
		group_flush_server(s, sv);
		group_unlock(g);
		return session_queue(s, sv, r, key, value);
	}
	if (rc == 0 && s->cl->opts.batch == LOTUS_BATCH_NONE)
		group_flush_server(s, sv);
out:
	group_unlock(g);
	return rc;
}

/* ---- receiving (inside the worker's dispatch, group lock held) ------------- */

static void sess_on_admin_reply(struct sgroup *g, unsigned sv, const struct wire_rep *r,
				const unsigned char *value)
{
	if (r->status && !g->admin_status)
		g->admin_status = r->status;
	g->admin_arg[sv] = r->arg;
	if (r->value_len) {
		char *v = realloc(g->admin_value, r->value_len + 1);
		if (v) {
			memcpy(v, value, r->value_len);
			v[r->value_len] = 0;
			g->admin_value = v;
			g->admin_vlen = r->value_len;
		}
	}
	g->admin_due--;
}

static void sess_on_reply(struct sgroup *g, unsigned sv, const struct wire_rep *r,
			  const unsigned char *key, const unsigned char *value)
{
	unsigned slot = r->tag >> 16;
	if (slot == TAG_ADMIN_SLOT) {
		sess_on_admin_reply(g, sv, r, value);
		return;
	}
	if (slot >= g->nslots || !g->slots[slot] || g->slots[slot]->id != r->txn_id) {
		log_debug("dropping reply for an unknown transaction %llx",
			  (unsigned long long)r->txn_id);
		return;
	}
	txn_on_reply(g->slots[slot], sv, r, key, value);
}

static void sess_on_msg(void *arg, net_conn_t *nc, const void *data, size_t len)
{
	struct sgroup *g = arg;
	unsigned sv = (unsigned)(uintptr_t)net_conn_user(nc);
	const struct wire_hdr *h = data;
	struct wire_iter it;
	const struct wire_rep *r;
	const unsigned char *k, *v;
	lotus_session_t *s = session_current;
	if (s) {
		s->ctr.msgs_recv++;
		s->ctr.bytes_recv += len;
	}
	int rc = wire_msg_check(data, len);
	if (rc || h->type != WIRE_REP) {
		log_error("memory server %u: %s", sv,
			  rc ? lotus_strerror(rc)
			  : h->type == WIRE_ERROR ? lotus_strerror(h->aux) : "unexpected message");
		return;
	}
	wire_iter_init(&it, data, len);
	while (wire_next_rep(&it, &r, &k, &v) == 1)
		sess_on_reply(g, sv, r, k, v);
}

static void sess_on_close(void *arg, net_conn_t *nc, int reason)
{
	struct sgroup *g = arg;
	unsigned sv = (unsigned)(uintptr_t)net_conn_user(nc);
	if (!reason)
		reason = LOTUS_EUNAVAIL;   /* it closed the connection: as good as lost */
	log_error("lost memory server %u: %s", sv, lotus_strerror(reason));
	g->conns[sv] = NULL;
	g->lost_reason[sv] = reason;
	g->lost = 1;
	if (g->admin_due) {
		g->admin_due = 0;
		g->admin_status = reason;
	}
	for (unsigned i = 0; i < g->nslots; i++)
		if (g->slots[i])
			txn_on_server_lost(g->slots[i], sv, reason);
}

/* Steps whose deadline passed end with LOTUS_ETIMEOUT (looked for once a
 * millisecond at most; group lock held). */
static void group_expire(struct sgroup *g)
{
	uint64_t now = clock_now_ns();
	if (now < g->next_expiry_ns)
		return;
	g->next_expiry_ns = now + 1000000;
	for (unsigned i = 0; i < g->nslots; i++) {
		lotus_txn_t *t = g->slots[i];
		if (t && t->deadline_ns && now >= t->deadline_ns)
			txn_on_timeout(t);
	}
}

int lotus_session_poll(lotus_session_t *s, int timeout_ms)
{
	struct sgroup *g = s->g;
	lotus_session_t *outer = session_current;
	int n;
	session_current = s;
	group_lock(g);
	while (g->dirty)
		group_flush_server(s, (unsigned)__builtin_ctzll(g->dirty));
	n = net_progress(g->net);
	/* a member of a shared group waits at most 1 ms holding the lock, so
	 * the others get their turn at sending and draining */
	if (n == 0 && timeout_ms != 0 && !s->ready_head && !s->grants)
		n = net_wait(g->net, g->members > 1 && (timeout_ms < 0 || timeout_ms > 1)
				       ? 1 : timeout_ms);
	group_expire(g);
	txn_drain_grants(s);
	txn_drain_ready(s);
	while (g->dirty)
		group_flush_server(s, (unsigned)__builtin_ctzll(g->dirty));
	group_unlock(g);
	if (g->members > 1)
		sched_yield();
	session_current = outer;
	return n;
}

/* A synchronous request outside any transaction (table creation, stats,
 * write-backs).  It progresses the network only: completed transactions wait
 * on their ready lists, so no callback runs inside this (possibly nested)
 * call. */
int session_admin(lotus_session_t *s, unsigned sv, struct wire_req *r, const void *key,
		  const void *value, int timeout_ms)
{
	struct sgroup *g = s->g;
	int rc;
	group_lock(g);
	r->tag = TAG_ADMIN_SLOT << 16;
	g->admin_status = 0;
	g->admin_due = 1;
	rc = session_queue(s, sv, r, key, value);
	if (rc)
		goto out;
	group_flush_server(s, sv);
	uint64_t deadline = clock_now_ns() + (timeout_ms > 0 ? (uint64_t)timeout_ms * 1000000ULL
							     : s->cl->timeout_ns);
	while (g->admin_due > 0 && clock_now_ns() < deadline)
		if (net_progress(g->net) == 0)
			net_wait(g->net, 50);
	if (g->admin_due > 0) {
		g->admin_due = 0;
		rc = LOTUS_ETIMEOUT;
		goto out;
	}
	rc = g->admin_status;
out:
	group_unlock(g);
	return rc;
}

int session_writeback(lotus_session_t *s, unsigned sv, uint16_t table, const void *key,
		      uint16_t klen, const void *value, uint32_t vlen)
{
	struct wire_req r = { .op = OP_WRITEBACK, .table = table, .key_len = klen,
			      .value_len = vlen };
	return session_admin(s, sv, &r, key, value, 0);
}

/* Counters of one memory server as JSON text (OP_STATS); the string is owned by
 * the session's group and valid until the next call. */
const char *lotus_server_stats(lotus_session_t *s, unsigned sv)
{
	struct wire_req r = { .op = OP_STATS };
	if (sv >= s->cl->nservers || session_admin(s, sv, &r, NULL, NULL, 0) != 0)
		return NULL;
	return s->g->admin_value;
}
