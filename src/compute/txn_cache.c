/*
 * txn_cache.c - the record cache and co-partitioning on the transaction path
 * (the Lotus paper's record-level caching and co-partitioning, its §2.3;
 * docs/design.md).
 *
 * Non-partitioned (--partitioning none): the cache holds location hints.  A
 * request carries the cached location; the memory server checks it against
 * the record header and skips its index when it holds, or falls back to the
 * index and says the hint was stale.  Every reply's location refreshes the
 * hint; a key that is gone drops it.  A hint is never trusted for data.
 *
 * Co-partitioned (--partitioning co): this compute server owns the keys with
 * cluster_owns() true.  For them it runs concurrency control itself, in a
 * local lock table with the same protocols, and caches the record data:
 *   read       local S lock; a cache hit needs no message; a miss reads
 *              from the memory server and fills the cache at commit
 *   read-for-update  local X lock, then read at the memory server (its X
 *              lock there is what a following write needs)
 *   write      (update, insert, delete) local X lock, then also the X lock
 *              at the memory server, which applies the write in the COMMIT
 *              (write-through); after the commit the cache gets the value
 *              (a delete drops it), after a failed or unknown commit it
 *              forgets the key.  The cache is thus a clean copy of the
 *              memory servers' committed data: a committed write survives
 *              this process, and scans (memory-server S locks) see it.
 *   insert     of a key the cache holds: LOTUS_EEXISTS without a message.
 * A write staged on an op the cache served gets an op of its own.
 * Keys it does not own behave as in non-partitioned mode (without hints).
 *
 * A local lock that must wait parks an op; the lock manager's notify (any
 * thread) posts it to the session's worker, and txn_on_local_grant() resumes
 * the op on the owning thread.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "common/common.h"
#include "common/log.h"
#include "compute/compute_int.h"

static int co_mode(const lotus_cluster_t *c)
{
	return c->local_locks != NULL;
}

int cluster_owns(const lotus_cluster_t *c, const void *key, size_t klen)
{
	unsigned n = c->opts.compute_count ? c->opts.compute_count : 1;
	return (unsigned)((fnv1a64(key, klen) >> 32) % n) == c->opts.compute_id;
}

/* ---- hints (non-partitioned) ---------------------------------------------- */

static int op_uses_hint(unsigned op)
{
	return op == OP_READ || op == OP_READ_X || op == OP_LOCK_X || op == OP_DELETE;
}

uint64_t txn_cache_hint(ts_txn_t *t, const struct txn_op *o)
{
	lotus_cluster_t *c = t->s->cl;
	uint64_t loc = 0;
	if (!c->cache || co_mode(c) || !op_uses_hint(o->op))
		return 0;
	return rcache_hint_get(c->cache, o->table, o->key, o->klen, &loc) ? loc : 0;
}

void txn_cache_on_reply(ts_txn_t *t, struct txn_op *o, const struct wire_rep *r)
{
	lotus_cluster_t *c = t->s->cl;
	if (!c->cache || co_mode(c) || !op_uses_hint(o->op))
		return;
	if (r->flags & WIRE_REP_F_HINT_STALE) {
		t->s->ctr.hint_stale++;
		atomic_fetch_add(&c->stale_hints, 1);
	}
	if (r->status == LOTUS_ENOTFOUND)
		rcache_drop(c->cache, o->table, o->key, o->klen);
	else if (r->loc && r->loc != o->hint)  /* a valid hint needs no update */
		rcache_hint_put(c->cache, o->table, o->key, o->klen, r->loc);
}

/* ---- data (co-partitioned) ------------------------------------------------ */

/* Whether the transaction deletes o's key in an earlier op: the cache's
 * copy is then not what o sees (an insert is decided by the server). */
static int local_deleted_before(ts_txn_t *t, const struct txn_op *o)
{
	for (const struct txn_op *p = t->ops; p < o; p++)
		if (p->write == OP_DELETE && p->table == o->table && p->klen == o->klen &&
		    !memcmp(p->key, o->key, o->klen))
			return 1;
	return 0;
}

void txn_cache_after_commit(ts_txn_t *t, int err)
{
	lotus_cluster_t *c = t->s->cl;
	if (!c->cache)
		return;
	for (unsigned i = 0; i < t->nops; i++) {
		struct txn_op *o = &t->ops[i];
		if (o->fill && !err && o->status == 0 && co_mode(c))
			/* a value read from the memory server: still the committed
			 * one, as this txn held the key's lock until now.  Not at
			 * the end of the read's step: a wounded reader would put
			 * back a value its wounder has replaced since. */
			rcache_data_fill(c->cache, o->table, o->key, o->klen, o->rval, o->rlen);
		o->fill = 0;
		if (!o->write || (!err && !txn_write_applies(o)))
			continue;
		if (!co_mode(c)) {
			if (!err && o->write == OP_DELETE)
				rcache_drop(c->cache, o->table, o->key, o->klen);
			continue;
		}
		if (!o->local)
			continue;
		/* the memory server holds the committed value; after a failed or
		 * unknown commit nobody knows which, so the cache forgets it */
		rcache_data_drop(c->cache, o->table, o->key, o->klen);
		if (!err && o->write != OP_DELETE)
			rcache_data_fill(c->cache, o->table, o->key, o->klen, o->wval, o->wlen);
	}
}

/* The local lock is settled (rc 0: held): serve the op from the cache, or
 * send it to its memory server. */
static void local_continue(ts_txn_t *t, struct txn_op *o, int rc)
{
	lotus_cluster_t *c = t->s->cl;
	unsigned idx = (unsigned)(o - t->ops);
	uint32_t vlen;
	t->outstanding--;
	if (rc) {
		txn_op_result(t, o, rc);
		goto out;
	}
	int hit = 0;
	if (c->cache && o->op == OP_READ) {
		uint32_t need = c->tables[o->table].max_value;
		if (o->rcap < need) {
			unsigned char *p = realloc(o->rval, need);
			if (p) {
				o->rval = p;
				o->rcap = need;
			}
		}
		hit = o->rcap >= need &&
		      rcache_data_read(c->cache, o->table, o->key, o->klen, o->rval, o->rcap, &vlen);
	}
	if (o->op == OP_INSERT && c->cache && !local_deleted_before(t, o)) {
		/* an insert is decided by the memory server unless the cache
		 * holds the key (then it exists) */
		hit = rcache_data_read(c->cache, o->table, o->key, o->klen, NULL, 0, &vlen);
		if (hit) {
			txn_op_result(t, o, LOTUS_EEXISTS);
			t->s->ctr.local_hits++;
			goto out;
		}
	}
	if (hit) {
		o->rlen = vlen;
		txn_op_result(t, o, 0);
		t->s->ctr.local_hits++;
		goto out;
	}
	o->fill = o->op == OP_READ || o->op == OP_READ_X;
	o->remote = 1;
	rc = txn_op_send_remote(t, idx);
	if (rc)
		txn_op_result(t, o, rc);
out:
	if (t->outstanding == 0)
		txn_step_ready(t);
}

int txn_op_local(ts_txn_t *t, unsigned idx)
{
	lotus_cluster_t *c = t->s->cl;
	struct txn_op *o = &t->ops[idx];
	o->local = 1;
	o->sent = 1;
	t->outstanding++;
	if (!t->local && !(t->local = lock_txn_get(c->local_locks, t->pub.id, t->pub.prio, t->s))) {
		local_continue(t, o, -ENOMEM);
		return 0;
	}
	o->lw.owner = t;
	int rc = lock_acquire(c->local_locks, t->local, (uint16_t)o->table, o->key, o->klen,
			      o->op == OP_READ ? LOCK_S : LOCK_X, (enum cc_proto)c->opts.cc, &o->lw);
	if (rc != 1)
		local_continue(t, o, rc);
	return 0;
}

/* Owner thread, inside the network dispatch: a parked local lock was granted
 * or refused.  Only note it; txn_drain_grants() resumes the op from the poll
 * loop, so no cache latch is taken inside a (possibly nested) dispatch. */
void txn_on_local_grant(lotus_session_t *s, struct lock_waiter *w)
{
	struct txn_op *o = container_of(w, struct txn_op, lw);
	o->grant_next = s->grants;
	s->grants = o;
}

void txn_drain_grants(lotus_session_t *s)
{
	struct txn_op *o = s->grants, *next;
	s->grants = NULL;
	for (; o; o = next) {
		next = o->grant_next;
		local_continue(o->lw.owner, o, o->local_rc);
	}
}

/* Lock manager callback, any thread: hand the grant to the op's session. */
static void local_notify(void *arg, struct lock_waiter *w, int result)
{
	struct txn_op *o = container_of(w, struct txn_op, lw);
	ts_txn_t *t = w->owner;
	o->local_rc = result;
	net_post(t->s->g->net, w);
}

void txn_local_release(ts_txn_t *t)
{
	if (!t->local)
		return;
	lock_txn_release(t->s->cl->local_locks, t->local);
	t->local = NULL;
}

/* ---- the cluster's cache ---------------------------------------------------- */

/* Evicting a dirty record: write it back through the evicting thread's
 * session (every eviction happens inside a lotus call on a session). */
static int cache_writeback(void *arg, uint32_t table, const void *key, uint16_t klen,
			   const void *value, uint32_t vlen)
{
	lotus_cluster_t *c = arg;
	lotus_session_t *s = session_current;
	if (!s || table >= c->ntables)
		return -ESRCH;
	unsigned sv = cluster_route(c, key, klen);
	return session_writeback(s, sv, c->tables[table].ids[sv], key, klen, value, vlen);
}

int cluster_cache_create(lotus_cluster_t *c)
{
	int rc = 0;
	double admit = c->opts.cache_admit > 0 ? c->opts.cache_admit : 1.0;
	if (c->opts.cache_bytes)
		rc = rcache_create(c->opts.cache_bytes, admit, 0x10705 + c->opts.compute_id,
				   cache_writeback, c, &c->cache);
	if (rc == 0 && c->opts.partitioning == LOTUS_PART_CO)
		rc = lock_table_create(12, local_notify, c, &c->local_locks);
	return rc;
}

/* Write back what is dirty (clean shutdown), then free the cache. */
void cluster_cache_destroy(lotus_cluster_t *c)
{
	lotus_session_t *s = NULL;
	if (c->cache && c->local_locks && lotus_session_open(c, &s) == 0) {
		session_current = s;
		int n = rcache_flush(c->cache);
		if (n < 0)
			log_error("writing back the cache at shutdown failed: %s", lotus_strerror(n));
		session_current = NULL;
		lotus_session_close(s);
	}
	if (c->cache)
		rcache_destroy(c->cache);
	if (c->local_locks)
		lock_table_destroy(c->local_locks);
	c->cache = NULL;
	c->local_locks = NULL;
}

void lotus_cluster_cache_counters(lotus_cluster_t *c, struct lotus_cache_counters *out)
{
	struct rcache_stats st;
	memset(out, 0, sizeof(*out));
	if (!c->cache)
		return;
	rcache_stats(c->cache, &st);
	out->hits = st.hits;
	out->misses = st.misses;
	out->evictions = st.evictions;
	out->writebacks = st.writebacks;
	out->entries = st.entries;
	out->bytes = st.bytes;
	out->stale_hints = atomic_load(&c->stale_hints);
}
