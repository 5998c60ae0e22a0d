/*
 * txn_local.c - the two-sided engine's side of the record cache and
 * co-partitioning (the policy itself is txn_cache.c, reached through its
 * hook table only).
 *
 * Co-partitioned (--partitioning co), for a key this compute server owns:
 *   read       local S lock; a cache hit needs no message; a miss reads
 *              from the memory server and fills the cache at commit
 *   read-for-update  local X lock, then read at the memory server (its X
 *              lock there is what a following write needs)
 *   write      (update, insert, delete) local X lock, then also the X lock
 *              at the memory server, which applies the write in the COMMIT
 *              (write-through); the cache learns the outcome at the end
 *              (txn_cache_settle)
 *   insert     of a key the cache holds: LOTUS_EEXISTS without a message.
 * A write staged on an op the cache served gets an op of its own (txn.c).
 * Keys it does not own behave as in non-partitioned mode (without hints).
 *
 * A local lock that must wait parks the op; the policy posts the lock
 * manager's answer to the session's group (any thread), where ts_on_grant
 * notes it, and txn_drain_grants() resumes the op from the owner's poll.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "common/common.h"
#include "compute/twosided.h"

static struct cache_key op_key(const struct txn_op *o)
{
	return (struct cache_key){ .table = o->table, .klen = o->klen, .key = o->key };
}

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

void txn_cache_settle(ts_txn_t *t, int err)
{
	struct txn_cache *tc = t->s->cl->cache;
	if (!tc)
		return;
	for (unsigned i = 0; i < t->nops; i++) {
		struct txn_op *o = &t->ops[i];
		struct cache_settle cs = {
			.k = op_key(o), .write = o->write, .applies = (uint8_t)txn_write_applies(o),
			.local = o->local, .fill = o->fill && o->status == 0,
			.rval = o->rval, .rlen = o->rlen, .wval = o->wval, .wlen = o->wlen,
		};
		o->fill = 0;
		if (cs.fill || cs.write)
			tc->ops->settle(tc, &cs, err);
	}
}

/* The local lock is settled (rc 0: held): serve the op from the cache, or
 * send it to its memory server. */
static void local_continue(ts_txn_t *t, struct txn_op *o, int rc)
{
	lotus_cluster_t *c = t->s->cl;
	struct txn_cache *tc = c->cache;
	struct cache_key k = op_key(o);
	unsigned idx = (unsigned)(o - t->ops);
	uint32_t vlen;
	t->outstanding--;
	if (rc) {
		txn_op_result(t, o, rc);
		goto out;
	}
	int hit = 0;
	if (o->op == OP_READ) {
		uint32_t need = c->tables[o->table].max_value;
		if (o->rcap < need) {
			unsigned char *p = realloc(o->rval, need);
			if (p) {
				o->rval = p;
				o->rcap = need;
			}
		}
		hit = o->rcap >= need && tc->ops->read(tc, &k, o->rval, o->rcap, &vlen);
	}
	if (o->op == OP_INSERT && !local_deleted_before(t, o)) {
		/* an insert is decided by the memory server unless the cache
		 * holds the key (then it exists) */
		hit = tc->ops->read(tc, &k, NULL, 0, &vlen);
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

/* Inside the network dispatch of the op's group: a parked local lock was
 * granted or refused.  Only note it; txn_drain_grants() resumes the op from
 * the owner's poll, so no cache latch is taken inside a dispatch. */
static void ts_on_grant(struct sess_post *p)
{
	struct txn_op *o = container_of(p, struct txn_op, lw.post);
	struct ts_sess *ss = ts_sess(o->owner->s);
	o->grant_next = ss->grants;
	ss->grants = o;
}

int txn_op_local(ts_txn_t *t, unsigned idx)
{
	struct txn_cache *tc = t->s->cl->cache;
	struct txn_op *o = &t->ops[idx];
	struct cache_key k = op_key(o);
	o->local = 1;
	o->sent = 1;
	o->owner = t;
	o->lw.s = t->s;
	o->lw.post.fn = ts_on_grant;
	t->outstanding++;
	int rc = tc->ops->lock(tc, &t->local, t->pub.id, t->pub.prio, &k, o->op != OP_READ, &o->lw);
	if (rc != 1)
		local_continue(t, o, rc);
	return 0;
}

void txn_drain_grants(lotus_session_t *s)
{
	struct ts_sess *ss = ts_sess(s);
	struct txn_op *o = ss->grants, *next;
	ss->grants = NULL;
	for (; o; o = next) {
		next = o->grant_next;
		local_continue(o->owner, o, o->lw.result);
	}
}

void txn_local_release(ts_txn_t *t)
{
	struct txn_cache *tc = t->s->cl->cache;
	if (t->local)
		tc->ops->release(tc, &t->local);
}
