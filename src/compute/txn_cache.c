/*
 * txn_cache.c - the record cache and co-partitioning policy (txn_cache.h):
 * hints for non-partitioned clusters, local locks and cached data for
 * co-partitioned ones, over the record cache (cache.c) and a local lock
 * table (lock/lock.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "common/common.h"
#include "common/log.h"
#include "compute/cache.h"
#include "compute/txn_cache.h"

struct policy {
	struct txn_cache pub;
	lotus_cluster_t *cl;
	rcache_t *cache;                /* NULL without --cache */
	lock_table_t *local_locks;      /* CO partitioning: locks of owned keys */
	_Atomic uint64_t stale_hints;
	pthread_mutex_t wb_mu;          /* the write-back session */
	lotus_session_t *wb;            /* opened at the first write-back */
};

static struct policy *pol(struct txn_cache *tc)
{
	return container_of(tc, struct policy, pub);
}

static int co_mode(const struct policy *p)
{
	return p->local_locks != NULL;
}

/* ---- hints (non-partitioned) ---------------------------------------------- */

static int op_uses_hint(unsigned op)
{
	return op == OP_READ || op == OP_READ_X || op == OP_LOCK_X || op == OP_DELETE;
}

static uint64_t tc_hint(struct txn_cache *tc, const struct cache_key *k, uint8_t op)
{
	struct policy *p = pol(tc);
	uint64_t loc = 0;
	if (!p->cache || co_mode(p) || !op_uses_hint(op))
		return 0;
	return rcache_hint_get(p->cache, k->table, k->key, k->klen, &loc) ? loc : 0;
}

static int tc_on_reply(struct txn_cache *tc, const struct cache_key *k, uint8_t op,
		       uint64_t hint, const struct wire_rep *r)
{
	struct policy *p = pol(tc);
	int stale = 0;
	if (!p->cache || co_mode(p) || !op_uses_hint(op))
		return 0;
	if (r->flags & WIRE_REP_F_HINT_STALE) {
		stale = 1;
		atomic_fetch_add(&p->stale_hints, 1);
	}
	if (r->status == LOTUS_ENOTFOUND)
		rcache_drop(p->cache, k->table, k->key, k->klen);
	else if (r->loc && r->loc != hint)  /* a valid hint needs no update */
		rcache_hint_put(p->cache, k->table, k->key, k->klen, r->loc);
	return stale;
}

/* ---- local locks (co-partitioned) ------------------------------------------- */

static int tc_owns(struct txn_cache *tc, const struct cache_key *k)
{
	struct policy *p = pol(tc);
	return co_mode(p) && cluster_owns(p->cl, k->key, k->klen);
}

static int tc_lock(struct txn_cache *tc, lock_txn_t **lt, uint64_t id, uint64_t prio,
		   const struct cache_key *k, int exclusive, struct cache_waiter *w)
{
	struct policy *p = pol(tc);
	if (!*lt && !(*lt = lock_txn_get(p->local_locks, id, prio, w->s)))
		return -ENOMEM;
	int rc = lock_acquire(p->local_locks, *lt, k->table, k->key, k->klen,
			      exclusive ? LOCK_X : LOCK_S, (enum cc_proto)p->cl->opts.cc, &w->lw);
	return rc;
}

static int tc_begin_commit(struct txn_cache *tc, lock_txn_t *lt)
{
	return lock_txn_begin_commit(pol(tc)->local_locks, lt);
}

static void tc_release(struct txn_cache *tc, lock_txn_t **lt)
{
	if (!*lt)
		return;
	lock_txn_release(pol(tc)->local_locks, *lt);
	*lt = NULL;
}

/* Lock manager callback, any thread: hand the answer to the waiter's
 * session. */
static void local_notify(void *arg, struct lock_waiter *lw, int result)
{
	struct cache_waiter *w = container_of(lw, struct cache_waiter, lw);
	w->result = result;
	session_post(w->s, &w->post);
}

/* ---- data (co-partitioned) ---------------------------------------------------- */

static int tc_read(struct txn_cache *tc, const struct cache_key *k, void *buf, uint32_t cap,
		   uint32_t *vlen)
{
	struct policy *p = pol(tc);
	return p->cache && rcache_data_read(p->cache, k->table, k->key, k->klen, buf, cap, vlen);
}

static void tc_settle(struct txn_cache *tc, const struct cache_settle *o, int err)
{
	struct policy *p = pol(tc);
	const struct cache_key *k = &o->k;
	if (!p->cache)
		return;
	if (o->fill && !err && co_mode(p))
		/* a value read from the memory server: still the committed one,
		 * as the transaction held the key's lock until now.  Not at the
		 * end of the read's step: a wounded reader would put back a
		 * value its wounder has replaced since. */
		rcache_data_fill(p->cache, k->table, k->key, k->klen, o->rval, o->rlen);
	if (!o->write || (!err && !o->applies))
		return;
	if (!co_mode(p)) {
		if (!err && o->write == OP_DELETE)
			rcache_drop(p->cache, k->table, k->key, k->klen);
		return;
	}
	if (!o->local)
		return;
	/* the memory server holds the committed value; after a failed or
	 * unknown commit nobody knows which, so the cache forgets it */
	rcache_data_drop(p->cache, k->table, k->key, k->klen);
	if (!err && o->write != OP_DELETE)
		rcache_data_fill(p->cache, k->table, k->key, k->klen, o->wval, o->wlen);
}

static const struct txn_cache_ops policy_ops = {
	.hint = tc_hint, .on_reply = tc_on_reply, .owns = tc_owns, .lock = tc_lock,
	.begin_commit = tc_begin_commit, .release = tc_release, .read = tc_read,
	.settle = tc_settle,
};

/* ---- the cluster's policy ------------------------------------------------------- */

/* Evicting a dirty record: write it back through the policy's own session
 * (any thread; the entry's latch is held, no other cache latch). */
static int cache_writeback(void *arg, uint32_t table, const void *key, uint16_t klen,
			   const void *value, uint32_t vlen)
{
	struct policy *p = arg;
	lotus_cluster_t *c = p->cl;
	int rc = 0;
	if (table >= c->ntables)
		return -ESRCH;
	pthread_mutex_lock(&p->wb_mu);
	if (!p->wb)
		rc = session_open(c, 1, &p->wb);
	if (rc == 0) {
		unsigned sv = cluster_route(c, table, key, klen);
		rc = session_writeback(p->wb, sv, c->tables[table].ids[sv], key, klen, value, vlen);
	}
	pthread_mutex_unlock(&p->wb_mu);
	return rc;
}

int txn_cache_create(lotus_cluster_t *c, struct txn_cache **out)
{
	int rc = 0;
	double admit = c->opts.cache_admit > 0 ? c->opts.cache_admit : 1.0;
	*out = NULL;
	if (!c->opts.cache_bytes && c->opts.partitioning != LOTUS_PART_CO)
		return 0;
	struct policy *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->pub.ops = &policy_ops;
	p->cl = c;
	pthread_mutex_init(&p->wb_mu, NULL);
	if (c->opts.cache_bytes)
		rc = rcache_create(c->opts.cache_bytes, admit, 0x10705 + c->opts.compute_id,
				   cache_writeback, p, &p->cache);
	if (rc == 0 && c->opts.partitioning == LOTUS_PART_CO)
		rc = lock_table_create(12, local_notify, p, &p->local_locks);
	*out = &p->pub;
	if (rc) {
		txn_cache_destroy(&p->pub);
		*out = NULL;
	}
	return rc;
}

void txn_cache_destroy(struct txn_cache *tc)
{
	if (!tc)
		return;
	struct policy *p = pol(tc);
	if (p->cache && p->local_locks) {
		int n = rcache_flush(p->cache);
		if (n < 0)
			log_error("writing back the cache at shutdown failed: %s", lotus_strerror(n));
	}
	session_close(p->wb);
	if (p->cache)
		rcache_destroy(p->cache);
	if (p->local_locks)
		lock_table_destroy(p->local_locks);
	pthread_mutex_destroy(&p->wb_mu);
	free(p);
}

void txn_cache_counters(lotus_cluster_t *c, struct lotus_cache_counters *out)
{
	struct rcache_stats st;
	if (!out)
		return;
	memset(out, 0, sizeof(*out));
	if (!c || !c->cache || !pol(c->cache)->cache)
		return;
	struct policy *p = pol(c->cache);
	rcache_stats(p->cache, &st);
	out->hits = st.hits;
	out->misses = st.misses;
	out->evictions = st.evictions;
	out->writebacks = st.writebacks;
	out->entries = st.entries;
	out->bytes = st.bytes;
	out->stale_hints = atomic_load(&p->stale_hints);
}
