/*
 * os_engine.c - the one-sided baseline's compute side (os_engine.h): the
 * engine, its sessions and their lease keeper, and table attach.
 *
 * Every access to a memory server is an RMA operation on its region
 * (os_layout.h) through the session's endpoint to it, waited for before the
 * next one (os_index.c; each counts into the current tally: the transaction
 * attempt's, or the session's "other").  The lotus messages on
 * the same endpoint carry only the attach request and its reply, and the
 * servers' liveness pings on shared memory, which os_session_poll() answers.
 *
 * The rest lives beside it, one concept a file (os_int.h holds what they
 * share): os_index.c the RMA primitives, the page cache and the index walk;
 * os_txn.c transactions, record locks and steps as coroutines; os_insert.c
 * inserts and Sherman-style splits.
 *
 * The lease keeper: a memory server gives a connection up when it hears
 * nothing on it for a lease, and only a progressed worker answers its PINGs.
 * A session's worker (its own, not the two-sided session's) is progressed by
 * its user's calls, so a session left idle for a lease (a thread done with
 * its work while others go on, a phase that uses other sessions) would lose
 * its connections.  The engine's lease keeper (compute/keeper.h, the one
 * the two-sided engine uses too) therefore progresses, every lease/8, each
 * session not polled for that long that it can claim at once.
 * The claim (s->claim) keeps it out of a session its user is in: every
 * public call that may touch the worker holds it (a depth count; the user
 * waits while the keeper's short progress runs), and the code of a step's
 * coroutine never takes it, so a step suspended between calls leaves its
 * session claimable (the keeper may complete its RMA requests; the step sees
 * them done when it resumes).  The worker is UCS_THREAD_MODE_SERIALIZED.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <ucp/api/ucp.h>
#include "common/clock.h"
#include "common/common.h"
#include "common/log.h"
#include "lotus.h"
#include "net/net.h"
#include "onesided/os_int.h"

const char *os_op_type_name(enum os_op_type t)
{
	static const char *names[] = { "read", "write", "cas", "faa" };
	return t < OS_NTYPES ? names[t] : "unknown";
}

void os_tally_add(struct os_tally *d, const struct os_tally *s)
{
	for (int i = 0; i < OS_NTYPES; i++) {
		d->ops[i] += s->ops[i];
		d->out[i] += s->out[i];
		d->in[i] += s->in[i];
	}
	d->round_trips += s->round_trips;
}

void os_counters_add(struct os_counters *d, const struct os_counters *s)
{
	os_tally_add(&d->committed, &s->committed);
	os_tally_add(&d->aborted, &s->aborted);
	os_tally_add(&d->other, &s->other);
	d->commits += s->commits;
	d->aborts += s->aborts;
	d->torn_reads += s->torn_reads;
	d->wait_rereads += s->wait_rereads;
	d->cache_hits += s->cache_hits;
	d->cache_misses += s->cache_misses;
	d->splits += s->splits;
	d->chunks_asked += s->chunks_asked;
}

/* ---- sessions ----------------------------------------------------------------- */

static void os_on_msg(void *arg, net_conn_t *c, const void *data, size_t len)
{
	os_session_t *s = arg;
	const struct wire_hdr *h = data;
	struct wire_iter it;
	const struct wire_rep *r;
	const unsigned char *k, *v;
	(void)c;
	if (wire_msg_check(data, len) != 0 || h->type != WIRE_REP)
		return;
	wire_iter_init(&it, data, len);
	while (wire_next_rep(&it, &r, &k, &v) == 1) {
		if (r->op != OP_OS_ATTACH && r->op != OP_DEX_LOOKUP)   /* dex_engine.c's too */
			continue;
		s->rep_status = r->status;
		free(s->rep_val);
		s->rep_val = r->value_len ? malloc(r->value_len) : NULL;
		s->rep_len = s->rep_val ? r->value_len : 0;
		if (s->rep_val)
			memcpy(s->rep_val, v, r->value_len);
		s->rep_got = 1;
	}
}

static void os_on_close(void *arg, net_conn_t *c, int reason)
{
	os_session_t *s = arg;
	for (unsigned i = 0; i < s->nsrv; i++)
		if (s->conn[i] == c) {
			s->conn[i] = NULL;
			s->broken = 1;
		}
}

static const struct net_handlers os_handlers = {
	.on_msg = os_on_msg,
	.on_close = os_on_close,
};

/* The lease keeper's visit (keeper.h): progress a session its user is not
 * in and has not polled for a period. */
static void session_keep(struct keeper_item *it, uint64_t period_ns)
{
	os_session_t *s = container_of(it, os_session_t, kept);
	int free_claim = 0;
	if (!atomic_compare_exchange_strong_explicit(&s->claim, &free_claim, -1,
						     memory_order_acquire, memory_order_relaxed))
		return;    /* its user is in it, and progresses it */
	uint64_t now = clock_now_ns();
	if (now - s->last_poll_ns >= period_ns) {
		s->last_poll_ns = now;
		net_progress(s->w);
	}
	atomic_store_explicit(&s->claim, 0, memory_order_release);
}

int os_engine_create(const struct os_engine_opts *o, os_engine_t **out)
{
	if (!o->nservers || o->nservers > OS_MAX_SERVERS)
		return LOTUS_ECONFIG;
	if (o->cc != LOTUS_NO_WAIT && o->cc != LOTUS_WAIT_DIE) {
		log_error("onesided: the one-sided engine runs no_wait or wait_die only");
		return LOTUS_EUNSUPPORTED;
	}
	os_engine_t *e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->o = *o;
	if (!e->o.cache_bytes)
		e->o.cache_bytes = 16u << 20;
	if (!e->o.timeout_ms)
		e->o.timeout_ms = 10000;
	if (!e->o.wait_ms)
		e->o.wait_ms = 1000;
	if (!e->o.lease_ms)
		e->o.lease_ms = 3000;   /* net's default lease */
	for (unsigned i = 0; i < o->nservers; i++) {
		snprintf(e->hosts[i], sizeof(e->hosts[i]), "%s", o->hosts[i]);
		e->ports[i] = o->ports[i];
	}
	const char *hosts[OS_MAX_SERVERS];
	for (unsigned i = 0; i < o->nservers; i++)
		hosts[i] = e->hosts[i];
	e->o.hosts = NULL;
	e->o.ports = NULL;
	e->o.secret_file = NULL;
	struct net_opts no = { .transport = o->transport, .lease_ms = e->o.lease_ms,
			       .secret_file = o->secret_file, .hosts = hosts,
			       .nhosts = o->nservers };
	int rc = net_ctx_create(&no, &e->net);
	if (rc) {
		free(e);
		return rc;
	}
	lease_keeper_init(&e->keeper, e->o.lease_ms, session_keep, "onesided: ");
	*out = e;
	return 0;
}

void os_engine_destroy(os_engine_t *e)
{
	if (!e)
		return;
	lease_keeper_destroy(&e->keeper);
	net_ctx_destroy(e->net);
	free(e);
}

const char *os_engine_transport(const os_engine_t *e)
{
	return net_ctx_transport(e->net);
}

static void session_poll(os_session_t *s)
{
	s->last_poll_ns = clock_now_ns();
	net_progress(s->w);
}

void os_session_poll(os_session_t *s)
{
	claim(s);
	session_poll(s);
	unclaim(s);
}

void os_maybe_poll(os_session_t *s)
{
	if (clock_now_ns() - s->last_poll_ns > OS_POLL_NS)
		session_poll(s);
}

int os_session_open(os_engine_t *e, os_session_t **out)
{
	os_session_t *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->e = e;
	s->nsrv = e->o.nservers;
	s->sid = atomic_fetch_add(&e->nsessions, 1);
	s->cur = &s->cnt.other;
	s->ncache = e->o.cache_bytes / sizeof(struct os_cpage);
	s->cache = s->ncache ? calloc(s->ncache, sizeof(*s->cache)) : NULL;
	int rc = s->ncache && !s->cache ? -ENOMEM : 0;
	if (rc == 0)
		rc = net_worker_create_shared(e->net, &os_handlers, s, &s->w);
	for (unsigned i = 0; rc == 0 && i < s->nsrv; i++) {
		rc = net_connect(s->w, e->hosts[i], e->ports[i], (int)e->o.timeout_ms, &s->conn[i]);
		if (rc == 0)
			s->ep[i] = net_conn_ep(s->conn[i]);
	}
	if (rc) {
		os_session_close(s);
		return rc;
	}
	s->uw = net_worker_ucp(s->w);
	s->last_poll_ns = clock_now_ns();
	lease_keeper_add(&e->keeper, &s->kept);
	*out = s;
	return 0;
}

static void table_rkeys_destroy(os_session_t *s, struct os_table *tb)
{
	for (unsigned i = 0; i < s->nsrv; i++)
		for (unsigned c = 0; c < tb->sv[i].nch; c++)
			if (tb->sv[i].ch[c].rkey)
				ucp_rkey_destroy(tb->sv[i].ch[c].rkey);
}

void os_session_close(os_session_t *s)
{
	if (!s)
		return;
	if (s->uw)   /* added to the keeper's list (the last step of open) */
		lease_keeper_remove(&s->e->keeper, &s->kept);
	for (unsigned t = 0; t < s->ntabs; t++)
		table_rkeys_destroy(s, &s->tabs[t]);
	if (s->w)
		net_worker_destroy(s->w);
	free(s->rep_val);
	free(s->cache);
	free(s);
}

/* Learn the chunks of an OP_OS_ATTACH reply (ai, len bytes) that tb does not
 * know yet at server sv: length-checked before anything is used. */
static int chunks_learn(os_session_t *s, unsigned sv, struct os_table *tb, const void *val,
			size_t len)
{
	struct os_attach_info ai;
	struct os_srv_table *st = &tb->sv[sv];
	if (len < sizeof(ai))
		return LOTUS_EPROTO;
	memcpy(&ai, val, sizeof(ai));
	if (ai.nchunks < 1 || ai.nchunks > OS_MAX_CHUNKS || ai.nchunks < st->nch ||
	    (st->nch && ai.value_max != tb->value_max))
		return LOTUS_EPROTO;
	const unsigned char *p = (const unsigned char *)val + sizeof(ai), *end =
		(const unsigned char *)val + len;
	for (unsigned i = 0; i < ai.nchunks; i++) {
		struct os_chunk_info ci;
		if ((size_t)(end - p) < sizeof(ci))
			return LOTUS_EPROTO;
		memcpy(&ci, p, sizeof(ci));
		p += sizeof(ci);
		if ((size_t)(end - p) < ci.rkey_len || ci.size < OS_PAGE_SIZE ||
		    ci.base + ci.size < ci.base)
			return LOTUS_EPROTO;
		if (i < st->nch) {         /* known: chunks never change */
			if (st->ch[i].base != ci.base || st->ch[i].size != ci.size)
				return LOTUS_EPROTO;
		} else {
			ucs_status_t us = ucp_ep_rkey_unpack(s->ep[sv], p, &st->ch[i].rkey);
			if (us != UCS_OK) {
				log_error("onesided: cannot unpack the rkey of server %u: %s", sv,
					  ucs_status_string(us));
				return LOTUS_EUNSUPPORTED;
			}
			st->ch[i].base = ci.base;
			st->ch[i].size = ci.size;
			st->nch = i + 1;
		}
		p += ci.rkey_len;
	}
	st->base = st->ch[0].base;
	tb->value_max = ai.value_max;
	return 0;
}

/* One OP_OS_ATTACH round trip to server sv (a lotus message, counted by net
 * and, inside a transaction, as one round trip of its attempt); grow_from:
 * the chunks known, for the server to add one (0: none). */
static int attach_one(os_session_t *s, unsigned sv, const char *name, struct os_table *tb,
		      uint32_t grow_from)
{
	struct wire_buf b;
	struct wire_req r = { .op = OP_OS_ATTACH, .key_len = (uint16_t)strlen(name),
			      .value_len = grow_from ? sizeof(grow_from) : 0 };
	wire_buf_init(&b);
	int rc = wire_buf_begin(&b, WIRE_REQ, 0, 1);
	if (rc == 0)
		rc = wire_buf_add_req(&b, &r, name, grow_from ? &grow_from : NULL);
	if (rc) {
		wire_buf_free(&b);
		return rc;
	}
	size_t len;
	wire_buf_end(&b);
	unsigned char *msg = wire_buf_detach(&b, &len);
	s->rep_got = 0;
	s->cur->round_trips++;
	rc = net_send(s->conn[sv], msg, len);
	uint64_t deadline = clock_now_ns() + (uint64_t)s->e->o.timeout_ms * 1000000;
	while (rc == 0 && !s->rep_got && !s->broken) {
		if (clock_now_ns() > deadline)
			return LOTUS_ETIMEOUT;
		net_wait(s->w, 100);
	}
	if (rc)
		return rc;
	if (!s->rep_got)
		return LOTUS_EUNAVAIL;
	if (s->rep_status)
		return s->rep_status;
	return chunks_learn(s, sv, tb, s->rep_val, s->rep_len);
}

int os_chunks_refresh(os_session_t *s, unsigned tid, unsigned sv, int grow)
{
	struct os_table *tb = &s->tabs[tid];
	unsigned known = tb->sv[sv].nch;
	int rc = attach_one(s, sv, tb->name, tb, grow ? known : 0);
	if (rc == 0 && grow)
		s->cnt.chunks_asked++;
	return rc;
}

static int session_attach(os_session_t *s, const char *name, unsigned *tid);

int os_session_attach(os_session_t *s, const char *name, unsigned *tid)
{
	claim(s);
	int rc = session_attach(s, name, tid);
	unclaim(s);
	return rc;
}

static int session_attach(os_session_t *s, const char *name, unsigned *tid)
{
	for (unsigned i = 0; i < s->ntabs; i++)
		if (strcmp(s->tabs[i].name, name) == 0) {
			*tid = i;
			return 0;
		}
	if (s->ntabs == OS_MAX_TABLES || strlen(name) > 64)
		return LOTUS_EUNSUPPORTED;
	struct os_table *tb = &s->tabs[s->ntabs];
	memset(tb, 0, sizeof(*tb));
	snprintf(tb->name, sizeof(tb->name), "%s", name);
	for (unsigned sv = 0; sv < s->nsrv; sv++) {
		int rc = attach_one(s, sv, name, tb, 0);
		if (rc) {
			table_rkeys_destroy(s, tb);
			memset(tb, 0, sizeof(*tb));
			return rc;
		}
	}
	*tid = s->ntabs++;
	return 0;
}

uint32_t os_session_value_max(const os_session_t *s, unsigned tid)
{
	return tid < s->ntabs ? s->tabs[tid].value_max : 0;
}

void os_session_counters(const os_session_t *s, struct os_counters *out)
{
	*out = s->cnt;
}
