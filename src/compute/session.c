/*
 * session.c - sessions and sending groups (the design is in session.h): the
 * UCX worker with one connection per memory server, the per-server outgoing
 * message buffers, reply delivery to tag slots, and the synchronous
 * administrative calls (table creation and opening, server stats,
 * write-backs).
 *
 * A member that polls takes the group lock and then flushes every member's
 * buffered requests as one message per server, progresses the worker and
 * hands each reply to its slot's callbacks, whatever member owns the slot.
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "common/clock.h"
#include "common/hash.h"
#include "common/common.h"
#include "common/log.h"
#include "compute/session.h"

/* Which address a connection went to, as one word (replicas > 1: is the
 * partition's primary still there?). */
static uint64_t addr_tag(const char *host, uint16_t port)
{
	return lotus_key_hash(host, (unsigned)strlen(host)) ^ port;
}

static void sess_on_msg(void *arg, net_conn_t *nc, const void *data, size_t len);
static void sess_on_close(void *arg, net_conn_t *nc, int reason);

static void sess_on_post(void *arg, void *item)
{
	struct sess_post *p = item;
	p->fn(p);
}

static const struct net_handlers sess_handlers = {
	.on_msg = sess_on_msg, .on_close = sess_on_close, .on_post = sess_on_post,
};

void session_lock(lotus_session_t *s)
{
	pthread_mutex_lock(&s->g->mu);
	s->g->holder = s;
}

void session_unlock(lotus_session_t *s)
{
	s->g->holder = NULL;
	pthread_mutex_unlock(&s->g->mu);
}

uint64_t session_new_txn_id(lotus_session_t *s)
{
	return (uint64_t)(s->cl->opts.compute_id & 0xffff) << 48 |
	       (uint64_t)(s->idx & 0xffff) << 32 | ++s->txn_seq;
}

uint64_t session_new_priority(lotus_session_t *s)
{
	uint64_t p = (clock_wall_ns() & ~0xfffULL) | (s->cl->opts.compute_id & 0xfff);
	if (p <= s->last_prio)
		p = s->last_prio + 0x1000;
	s->last_prio = p;
	return p;
}

/* ---- the lease keeper (keeper.h) ----------------------------------------------
 *
 * One keeper per cluster progresses, every lease/8, each group whose lock it
 * can take at once (a group in use is progressed by its user anyway), so a
 * thread busy in its own code for a lease keeps its transactions and
 * connections.  What it receives lands where the owner's own poll would put
 * it (ready lists, under the group lock). */

static void group_keep(struct keeper_item *it, uint64_t period_ns)
{
	struct sgroup *g = container_of(it, struct sgroup, kept);
	(void)period_ns;
	if (pthread_mutex_trylock(&g->mu) != 0)
		return;
	net_progress(g->net);
	pthread_mutex_unlock(&g->mu);
}

int keeper_init(lotus_cluster_t *c)
{
	lease_keeper_init(&c->keeper, c->lease_ms, group_keep, "");
	return 0;
}

void keeper_stop(lotus_cluster_t *c)
{
	/* the keeper's lock stays: sessions closed later (the cache policy's)
	 * still unlink their groups; the cluster's free ends it */
	lease_keeper_stop(&c->keeper);
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
	lease_keeper_remove(&c->keeper, &g->kept);
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
	int rc;
	if (!g)
		return -ENOMEM;
	pthread_mutex_init(&g->mu, NULL);
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
		g->conn_at[sv] = addr_tag(c->servers[sv].host, c->servers[sv].port);
		rc = group_send_hello(c, g, sv);
	}
	if (rc) {
		group_destroy(c, g);
		return rc;
	}
	lease_keeper_add(&c->keeper, &g->kept);
	*out = g;
	return 0;
}

/* The group of session idx: its own under intra/none batching, else shared
 * by group_size consecutive sessions. */
static int group_attach(lotus_cluster_t *c, unsigned idx, int own, struct sgroup **out)
{
	unsigned gs = c->opts.group_size ? c->opts.group_size : 8;
	if (own)
		return group_create(c, 1, out);
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

int session_open(lotus_cluster_t *c, int own_group, lotus_session_t **out)
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
	int rc = group_attach(c, s->idx, own_group, &s->g);
	if (rc) {
		free(s);
		return rc;
	}
	*out = s;
	return 0;
}

void session_close(lotus_session_t *s)
{
	if (!s)
		return;
	group_detach(s->cl, s->g);
	free(s);
}

/* ---- slots ------------------------------------------------------------------ */

int session_slot_add(lotus_session_t *s, struct sess_slot *sl)
{
	struct sgroup *g = s->g;
	int rc = 0;
	sl->owner = s;
	session_lock(s);
	if (g->nfree) {
		sl->idx = g->free_slots[--g->nfree];
		g->slots[sl->idx] = sl;
		goto out;
	}
	if (g->nslots == g->cap_slots) {
		unsigned cap = g->cap_slots ? g->cap_slots * 2 : 16;
		rc = -ENOMEM;
		if (cap >= TAG_ADMIN_SLOT)
			goto out;
		struct sess_slot **sls = realloc(g->slots, cap * sizeof(*sls));
		unsigned *fr = sls ? realloc(g->free_slots, cap * sizeof(*fr)) : NULL;
		if (sls)
			g->slots = sls;
		if (!fr)
			goto out;
		g->free_slots = fr;
		g->cap_slots = cap;
		rc = 0;
	}
	sl->idx = g->nslots++;
	g->slots[sl->idx] = sl;
out:
	session_unlock(s);
	return rc;
}

void session_slot_remove(lotus_session_t *s, struct sess_slot *sl)
{
	session_lock(s);
	s->g->slots[sl->idx] = NULL;
	s->g->free_slots[s->g->nfree++] = sl->idx;
	session_unlock(s);
}

void session_slots_drop(lotus_session_t *s)
{
	struct sgroup *g = s->g;
	session_lock(s);
	for (unsigned i = 0; i < g->nslots; i++) {
		struct sess_slot *sl = g->slots[i];
		if (!sl || sl->owner != s)
			continue;
		g->slots[i] = NULL;
		session_unlock(s);
		if (sl->ops->on_drop)
			sl->ops->on_drop(sl);
		session_lock(s);
	}
	session_unlock(s);
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
	g->out_size[sv] = (uint32_t)MAX(b->len, g->out_size[sv] - g->out_size[sv] / 16);
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
	group_flush_server(s, sv);
}

void session_flush(lotus_session_t *s)
{
	struct sgroup *g = s->g;
	while (g->dirty)
		group_flush_server(s, (unsigned)__builtin_ctzll(g->dirty));
}

void session_step_end(lotus_session_t *s)
{
	if (s->cl->opts.batch == LOTUS_BATCH_INTRA)
		session_flush(s);
}

int session_failover(lotus_session_t *s, unsigned sv)
{
	struct sgroup *g = s->g;
	lotus_cluster_t *c = s->cl;
	int reason = g->lost_reason[sv] ? g->lost_reason[sv] : LOTUS_EUNAVAIL;
	if (g->conns[sv])
		return 0;
	if (c->repl.replicas < 2)
		return reason;
	uint64_t now = clock_now_ns();
	/* past the timeout the partition counts as down (why it was lost), but
	 * it is looked for again once a second */
	int late = now - g->lost_ns[sv] > c->timeout_ns;
	if (late && !g->failover_said[sv]++)
		log_error("partition %u: no primary could be reached within %llu ms of the loss",
			  sv, (unsigned long long)(c->timeout_ns / 1000000));
	if (now < g->failover_next_ns[sv]) {
		if (!late) {   /* the application retries at once: do not let it spin */
			struct timespec ts = { 0, 1000000L };
			nanosleep(&ts, NULL);
		}
		return late ? reason : LOTUS_EFAILOVER;
	}
	/* One look at the coordinator and one short connect, not a wait: the
	 * group's other connections keep their leases meanwhile. */
	g->failover_next_ns[sv] = now + (late ? 1000 : 50) * 1000000ULL;
	char host[256];
	uint16_t port;
	net_conn_t *nc;
	unsigned ct = MIN(500u, (c->lease_ms ? c->lease_ms : LOTUS_DEFAULT_LEASE_MS) / 4);
	if (cluster_primary_of(c, sv, host, sizeof(host), &port, 0) != 0 ||
	    net_connect(g->net, host, port, (int)MAX(ct, 50u), &nc) != 0)
		return late ? reason : LOTUS_EFAILOVER;
	net_conn_set_user(nc, (void *)(uintptr_t)sv);
	g->conns[sv] = nc;
	g->conn_at[sv] = addr_tag(host, port);
	g->recheck[sv] = 0;
	g->lost_reason[sv] = 0;
	g->failover_said[sv] = 0;
	g->dirty &= ~(1ULL << sv);   /* what was queued for the lost one is gone */
	int lost = 0;
	for (unsigned i = 0; i < c->nservers; i++)
		lost |= g->conns[i] == NULL;
	__atomic_store_n(&g->lost, lost, __ATOMIC_RELEASE);
	if (group_send_hello(c, g, sv) != 0) {
		g->conns[sv] = NULL;
		net_conn_close(nc);
		return late ? reason : LOTUS_EFAILOVER;
	}
	log_info("partition %u: reconnected to its primary at %s:%u", sv, host, port);
	return 0;
}

/* replicas > 1: sv answered LOTUS_EFAILOVER, i.e. it is a primary that has
 * not heard from ZooKeeper for half a session and serves nobody meanwhile.
 * It may never hear again (cut from ZooKeeper alone, while its clients still
 * reach it): so look at the coordinator (at most every 50 ms, as
 * session_failover does), and once it names another primary, leave this one
 * as if its connection were lost, so that the next request goes there. */
static void session_recheck(lotus_session_t *s, unsigned sv)
{
	struct sgroup *g = s->g;
	lotus_cluster_t *c = s->cl;
	uint64_t now = clock_now_ns();
	char host[256];
	uint16_t port;
	if (c->repl.replicas < 2 || now < g->failover_next_ns[sv])
		return;
	g->recheck[sv] = 0;
	g->failover_next_ns[sv] = now + 50 * 1000000ULL;
	if (cluster_primary_of(c, sv, host, sizeof(host), &port, 0) != 0 ||
	    addr_tag(host, port) == g->conn_at[sv])
		return;   /* no answer, or still that one: it pauses */
	net_conn_t *nc = g->conns[sv];
	log_info("partition %u: its primary moved to %s:%u; leaving the paused one", sv, host,
		 port);
	sess_on_close(g, nc, LOTUS_EFAILOVER);
	net_conn_close(nc);
	g->failover_next_ns[sv] = 0;   /* reach the new one at once */
}

int session_queue(lotus_session_t *s, unsigned sv, const struct wire_req *r, const void *key,
		  const void *value, size_t *bytes)
{
	struct sgroup *g = s->g;
	struct wire_buf *b = &g->out[sv];
	int rc;
	for (;;) {
		size_t before = 0;
		if (!g->conns[sv] && (rc = session_failover(s, sv)) != 0)
			return rc;
		if (g->dirty & (1ULL << sv) && b->count == 0xffff)
			group_flush_server(s, sv);
		if (!(g->dirty & (1ULL << sv))) {
			/* the last message went out with its buffer: a recycled one */
			size_t want = g->out_size[sv];
			rc = net_wire_buf(g->net, b, want + want / 8);
			if (rc == 0)
				rc = wire_buf_begin(b, WIRE_REQ, s->cl->opts.compute_id, ++g->msg_seq);
			if (rc)
				return rc;
			g->dirty |= 1ULL << sv;
		} else {
			before = b->len;   /* the header is another request's */
		}
		rc = wire_buf_add_req(b, r, key, value);
		if (rc == -E2BIG && b->count > 0) { /* message full: send it, start another */
			group_flush_server(s, sv);
			continue;
		}
		if (rc == 0 && bytes)
			*bytes = b->len - before;
		if (rc == 0 && s->cl->opts.batch == LOTUS_BATCH_NONE)
			group_flush_server(s, sv);
		return rc;
	}
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
			  const unsigned char *key, const unsigned char *value, size_t bytes)
{
	unsigned slot = r->tag >> 16;
	if (slot == TAG_ADMIN_SLOT) {
		sess_on_admin_reply(g, sv, r, value);
		return;
	}
	if (slot >= g->nslots || !g->slots[slot]) {
		log_debug("dropping reply for an unknown transaction %llx",
			  (unsigned long long)r->txn_id);
		return;
	}
	g->slots[slot]->ops->on_reply(g->slots[slot], sv, r, key, value, bytes);
}

static void sess_on_msg(void *arg, net_conn_t *nc, const void *data, size_t len)
{
	struct sgroup *g = arg;
	unsigned sv = (unsigned)(uintptr_t)net_conn_user(nc);
	const struct wire_hdr *h = data;
	struct wire_iter it;
	const struct wire_rep *r;
	const unsigned char *k, *v;
	size_t hdr = sizeof(struct wire_hdr);
	if (g->holder) {   /* the member progressing the group receives */
		g->holder->ctr.msgs_recv++;
		g->holder->ctr.bytes_recv += len;
	}
	int rc = wire_msg_check(data, len);
	if (rc || h->type != WIRE_REP) {
		log_error("memory server %u: %s", sv,
			  rc ? lotus_strerror(rc)
			  : h->type == WIRE_ERROR ? lotus_strerror(h->aux) : "unexpected message");
		return;
	}
	wire_iter_init(&it, data, len);
	while (wire_next_rep(&it, &r, &k, &v) == 1) {
		size_t item = wire_pad8(sizeof(*r) + r->key_len + r->value_len);
		if (r->status == LOTUS_EFAILOVER) {   /* a paused primary (session_recheck) */
			g->recheck[sv] = 1;
			g->rechecks = 1;
		}
		sess_on_reply(g, sv, r, k, v, item + hdr);
		hdr = 0;
	}
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
	g->lost_ns[sv] = clock_now_ns();
	atomic_fetch_add(&g->lost_seq, 1);
	__atomic_store_n(&g->lost, 1, __ATOMIC_RELEASE);   /* lotus_session_lost reads it unlocked */
	if (g->admin_due) {
		g->admin_due = 0;
		g->admin_status = reason;
	}
	for (unsigned i = 0; i < g->nslots; i++)
		if (g->slots[i])
			g->slots[i]->ops->on_lost(g->slots[i], sv, reason);
}

/* Slots whose deadline passed are told (looked for once a millisecond at
 * most; group lock held). */
static void group_expire(struct sgroup *g)
{
	uint64_t now = clock_now_ns();
	if (now < g->next_expiry_ns)
		return;
	g->next_expiry_ns = now + 1000000;
	for (unsigned i = 0; i < g->nslots; i++) {
		struct sess_slot *sl = g->slots[i];
		if (sl && sl->deadline_ns && now >= sl->deadline_ns)
			sl->ops->on_expire(sl);
	}
}

int session_progress(lotus_session_t *s, int timeout_ms, int busy)
{
	struct sgroup *g = s->g;
	int n;
	session_flush(s);
	n = net_progress(g->net);
	if (g->rechecks) {   /* from the poll, as a loss comes: not mid-step */
		g->rechecks = 0;
		for (unsigned sv = 0; sv < s->cl->nservers; sv++)
			if (g->recheck[sv] && g->conns[sv]) {
				session_recheck(s, sv);
				g->rechecks |= g->recheck[sv];   /* not yet: the 50 ms pace */
			}
	}
	/* a member of a shared group waits at most 1 ms holding the lock, so
	 * the others get their turn at sending and draining */
	if (n == 0 && timeout_ms != 0 && !busy)
		n = net_wait(g->net, g->members > 1 && (timeout_ms < 0 || timeout_ms > 1)
				       ? 1 : timeout_ms);
	group_expire(g);
	return n;
}

void session_yield(lotus_session_t *s)
{
	if (s->g->members > 1)
		sched_yield();
}

int session_connected(const lotus_session_t *s, unsigned sv)
{
	return s->g->conns[sv] != NULL;
}

int session_post(lotus_session_t *s, struct sess_post *p)
{
	return net_post(s->g->net, p);
}

int session_admin_many(lotus_session_t *s, unsigned sv, struct wire_req *r, unsigned n,
		       int timeout_ms)
{
	struct sgroup *g = s->g;
	int rc = 0;
	session_lock(s);
	g->admin_status = 0;
	g->admin_due = 0;
	for (unsigned i = 0; i < n && rc == 0; i++) {
		r[i].tag = TAG_ADMIN_SLOT << 16;
		rc = session_queue(s, sv, &r[i], NULL, NULL, NULL);
		g->admin_due += rc == 0;
	}
	group_flush_server(s, sv);
	uint64_t deadline = clock_now_ns() + (timeout_ms > 0 ? (uint64_t)timeout_ms * 1000000ULL
							     : s->cl->timeout_ns);
	while (g->admin_due > 0 && clock_now_ns() < deadline)
		if (net_progress(g->net) == 0)
			net_wait(g->net, 50);
	if (g->admin_due > 0 && !rc)
		rc = LOTUS_ETIMEOUT;
	g->admin_due = 0;
	if (!rc)
		rc = g->admin_status;
	session_unlock(s);
	return rc;
}

/* A synchronous request outside any transaction (table creation, stats,
 * write-backs).  It progresses the network only: completed transactions wait
 * on their ready lists, so no callback runs inside this call. */
int session_admin(lotus_session_t *s, unsigned sv, struct wire_req *r, const void *key,
		  const void *value, int timeout_ms)
{
	struct sgroup *g = s->g;
	int rc;
	session_lock(s);
	r->tag = TAG_ADMIN_SLOT << 16;
	g->admin_status = 0;
	g->admin_due = 1;
	rc = session_queue(s, sv, r, key, value, NULL);
	if (rc) {
		g->admin_due = 0;
		goto out;
	}
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
	session_unlock(s);
	return rc;
}

uint64_t session_admin_arg(const lotus_session_t *s, unsigned sv)
{
	return s->g->admin_arg[sv];
}

const char *session_admin_value(const lotus_session_t *s)
{
	return s->g->admin_value;
}

int session_writeback(lotus_session_t *s, unsigned sv, uint16_t table, const void *key,
		      uint16_t klen, const void *value, uint32_t vlen)
{
	struct wire_req r = { .op = OP_WRITEBACK, .table = table, .key_len = klen,
			      .value_len = vlen };
	return session_admin(s, sv, &r, key, value, 0);
}

void lotus_session_counters(const lotus_session_t *s, struct lotus_net_counters *out)
{
	if (out)
		*out = s ? s->ctr : (struct lotus_net_counters){ 0 };
}

/* The first server the session's group lost, and why (see lotus.h).  The
 * flag is read without the lock: a session that lost nothing pays one load. */
int lotus_session_lost(lotus_session_t *s, unsigned *sv)
{
	int reason = 0;
	if (!s)
		return -EINVAL;
	if (!__atomic_load_n(&s->g->lost, __ATOMIC_ACQUIRE))
		return 0;
	session_lock(s);
	uint64_t now = clock_now_ns();
	for (unsigned i = 0; i < s->cl->nservers && !reason; i++) {
		if (s->g->conns[i])
			continue;
		/* replicated: a failover is under way, not a loss (yet) */
		if (s->cl->repl.replicas > 1 && now - s->g->lost_ns[i] <= s->cl->timeout_ns)
			continue;
		reason = s->g->lost_reason[i] ? s->g->lost_reason[i] : LOTUS_EUNAVAIL;
		if (sv)
			*sv = i;
	}
	session_unlock(s);
	return reason;
}

/* Counters of one memory server as JSON text (OP_STATS); the string is owned by
 * the session's group and valid until the next call. */
const char *lotus_server_stats(lotus_session_t *s, unsigned sv)
{
	struct wire_req r = { .op = OP_STATS };
	if (!s || sv >= s->cl->nservers || session_admin(s, sv, &r, NULL, NULL, 0) != 0)
		return NULL;
	return s->g->admin_value;
}

/* Create (flags 0) or open (WIRE_REQ_F_TABLE_OPEN) the table on every
 * server; each server returns its own id for it, and its size. */
static int table_register(lotus_session_t *s, const char *name, uint32_t max_value,
			  uint16_t flags, lotus_table_t *out)
{
	if (!s || !name || !*name || !out)
		return -EINVAL;
	lotus_cluster_t *c = s->cl;
	int rc = 0;
	size_t nlen = strnlen(name, 65);
	if (nlen > 64)
		return LOTUS_ETOOBIG;
	pthread_mutex_lock(&c->tables_mu);
	unsigned i;
	for (i = 0; i < c->ntables; i++)
		if (!strcmp(c->tables[i].name, name))
			break;
	if (i == LOTUS_MAX_TABLES) {
		rc = -ENOSPC;
		goto out;
	}
	struct table_ent te = { .max_value = max_value };
	memcpy(te.name, name, nlen + 1);
	for (unsigned sv = 0; sv < c->nservers && rc == 0; sv++) {
		struct wire_req r = { .op = OP_CREATE_TABLE, .flags = flags,
				      .key_len = (uint16_t)nlen, .arg = max_value };
		rc = session_admin(s, sv, &r, name, NULL, 0);
		uint64_t arg = session_admin_arg(s, sv);
		te.ids[sv] = (uint16_t)arg;
		if (rc == 0 && flags) {  /* open: every server must know it, at one size */
			if (sv == 0)
				te.max_value = (uint32_t)(arg >> 32);
			else if (te.max_value != (uint32_t)(arg >> 32))
				rc = LOTUS_ECONFIG;
		}
	}
	if (rc == LOTUS_ECONFIG)
		log_error("table %s has different sizes on different memory servers", name);
	if (rc == 0) {
		cluster_place_table(c, &te);
		c->tables[i] = te;
		if (i == c->ntables)
			c->ntables++;
		*out = i;
	}
out:
	pthread_mutex_unlock(&c->tables_mu);
	return rc;
}

int lotus_table_create(lotus_session_t *s, const char *name, uint32_t max_value,
		       lotus_table_t *out)
{
	if (max_value == 0)
		max_value = 1024;
	if (max_value > 64 * 1024)
		return LOTUS_ETOOBIG;
	return table_register(s, name, max_value, 0, out);
}

int lotus_table_open(lotus_session_t *s, const char *name, lotus_table_t *out)
{
	return table_register(s, name, 0, WIRE_REQ_F_TABLE_OPEN, out);
}

uint32_t lotus_table_max_value(lotus_session_t *s, lotus_table_t tb)
{
	if (!s)
		return 0;
	lotus_cluster_t *c = s->cl;
	pthread_mutex_lock(&c->tables_mu);
	uint32_t v = tb < c->ntables ? c->tables[tb].max_value : 0;
	pthread_mutex_unlock(&c->tables_mu);
	return v;
}
