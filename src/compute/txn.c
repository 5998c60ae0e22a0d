/*
 * txn.c - transactions on the compute side: staging, execution steps, reply
 * collection, commit and abort (the state diagram is in twosided.h).
 *
 * A transaction's priority is fixed at lotus_txn_begin() and kept by
 * lotus_txn_restart(), so a transaction that keeps losing conflicts becomes
 * the oldest in the system and, under WAIT_DIE and WOUND_WAIT, wins.  Each
 * attempt gets a fresh id, so replies and lock-table entries of an earlier
 * attempt can never be mistaken for the current one's.
 *
 * A step waits for every reply it asked for, even after a first error: under
 * lazy notification a parked request is answered only when granted, and the
 * abort that follows must not overtake it.  The one exception is the
 * deadline: a round of requests that is not answered within timeout_ms ends
 * with LOTUS_ETIMEOUT (ts_on_expire, from the poll); the servers
 * that missed it get the abort without being waited for, and their late
 * replies are dropped.
 *
 * Staging keeps program order for what the transaction sees (txn_view.c):
 * reads of its own writes are answered from them, and a write that a read or
 * scan saw is never rewritten in place.  Any failed staging call dooms the
 * transaction (t->sticky).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "common/clock.h"
#include "common/common.h"
#include "common/crash.h"
#include "common/log.h"
#include "compute/twosided.h"

/* ---- counting --------------------------------------------------------------- */

/* by_type of the counters: the wire ops of transactions */
static const uint8_t type_ops[] = { OP_READ, OP_READ_X, OP_LOCK_X, OP_INSERT, OP_DELETE,
				    OP_SCAN, OP_PREPARE, OP_COMMIT, OP_ABORT };
static const char *const type_names[] = { "read", "read_for_update", "write_lock", "insert",
					  "delete", "scan", "prepare", "commit", "abort" };
_Static_assert(ARRAY_SIZE(type_ops) == ARRAY_SIZE(type_names), "one name per type");
_Static_assert(ARRAY_SIZE(type_ops) <= LOTUS_OP_TYPES, "types fit the counters");

static unsigned op_type(uint8_t op)
{
	for (unsigned i = 0; i < ARRAY_SIZE(type_ops); i++)
		if (type_ops[i] == op)
			return i;
	return LOTUS_OP_TYPES;   /* counted in the totals only */
}

/* ---- lifecycle ----------------------------------------------------------- */

static const struct sess_slot_ops ts_slot_ops;

static int ts_begin(lotus_session_t *s, lotus_txn_t **out)
{
	ts_txn_t *t = txn_spare_get(s);
	if (!t)
		return -ENOMEM;
	t->pub.eng = &engine_twosided;
	t->pub.s = s;
	t->s = s;
	t->sl.ops = &ts_slot_ops;
	if (session_slot_add(s, &t->sl)) {
		txn_spare_release(t);
		return -ENOMEM;
	}
	t->pub.id = session_new_txn_id(s);
	t->pub.prio = session_new_priority(s);
	t->state = TXN_IDLE;
	*out = &t->pub;
	return 0;
}

static void txn_clear_ops(ts_txn_t *t)
{
	for (unsigned i = 0; i < t->nops; i++) {
		free(t->ops[i].row_ptrs);
		t->ops[i].row_ptrs = NULL;
	}
	t->nops = 0;
	t->has_writes = 0;
	t->next_unsent = 0;
	t->participants = 0;
	t->deps = t->ro_first = t->ro_done = 0;
	t->outstanding = 0;
	memset(t->due, 0, sizeof(t->due));
	t->err = t->sticky = 0;
	t->lost_seq0 = atomic_load(&t->s->g->lost_seq);
	t->commit_after_exec = 0;
	t->sl.deadline_ns = 0;
	t->unresponsive = 0;
}

static int ts_restart(lotus_txn_t *pt, bool new_priority)
{
	ts_txn_t *t = ts_of(pt);
	if (t->state != TXN_DONE && t->state != TXN_IDLE)
		return LOTUS_ESTATE;
	if (t->state == TXN_IDLE && t->participants)
		return LOTUS_ESTATE; /* still holds locks: abort first */
	/* under the lock: in a shared group another member's dispatch may be
	 * looking at the slot (a late reply, the deadline) right now */
	session_lock(t->s);
	txn_clear_ops(t);
	t->pub.id = session_new_txn_id(t->s);
	if (new_priority)
		t->pub.prio = session_new_priority(t->s);
	t->state = TXN_IDLE;
	session_unlock(t->s);
	return 0;
}

static void ts_free(lotus_txn_t *pt)
{
	ts_txn_t *t = ts_of(pt);
	lotus_session_t *s = t->s;
	session_slot_remove(s, &t->sl);   /* no reply finds it from now on */
	txn_local_release(t);
	txn_clear_ops(t);
	txn_spare_put(s, t);
}


/* ---- staging ------------------------------------------------------------- */

static struct txn_op *op_add(ts_txn_t *t, uint8_t op, lotus_table_t tb, const void *key,
			     size_t klen, int *err)
{
	lotus_cluster_t *c = t->s->cl;
	*err = 0;
	if (t->sticky || t->state != TXN_IDLE) {
		*err = t->sticky ? t->sticky : LOTUS_ESTATE;
		return NULL;
	}
	if (tb >= c->ntables) {
		*err = LOTUS_ENOTABLE;
		return NULL;
	}
	if (klen == 0 || !key) {  /* keys are 1..128 bytes */
		*err = -EINVAL;
		return NULL;
	}
	if (klen > 128 || t->nops >= 0xfffe) {
		*err = LOTUS_ETOOBIG;
		return NULL;
	}
	if (t->nops == t->cap) {
		unsigned cap = t->cap ? t->cap * 2 : 16;
		struct txn_op *ops = realloc(t->ops, cap * sizeof(*ops));
		if (!ops) {
			*err = -ENOMEM;
			return NULL;
		}
		memset(ops + t->cap, 0, (cap - t->cap) * sizeof(*ops));
		t->ops = ops;
		t->cap = cap;
	}
	struct txn_op *o = &t->ops[t->nops++];
	o->op = op;
	o->write = 0;
	o->sent = 0;
	o->table = (uint16_t)tb;
	o->klen = (uint16_t)klen;
	o->server = (uint16_t)cluster_route(c, tb, key, klen);
	o->status = 0;
	o->loc = 0;
	o->rlen = 0;
	o->rows = 0;
	o->count = 0;
	o->wlen = 0;
	o->ryw = o->observed = o->finished = 0;
	o->local = o->fill = o->remote = 0;
	o->has_ver = 0;
	o->replied = 0;
	memcpy(o->key, key, klen);
	return o;
}

static int op_set_value(ts_txn_t *t, struct txn_op *o, const void *v, size_t vlen)
{
	if (vlen > t->s->cl->tables[o->table].max_value)
		return LOTUS_ETOOBIG;
	if (vlen == 0) {
		o->wlen = 0;
		return 0;
	}
	if (vlen > o->wcap) {
		unsigned char *p = realloc(o->wval, vlen);
		if (!p)
			return -ENOMEM;
		o->wval = p;
		o->wcap = (uint32_t)vlen;
	}
	if (vlen)   /* an empty value may come with a NULL pointer */
		memcpy(o->wval, v, vlen);
	o->wlen = (uint32_t)vlen;
	return 0;
}

/* A staging call failed: the transaction is doomed (sticky errors), so a
 * commit can never apply the calls that did succeed. */
static int stage_failed(ts_txn_t *t, int err)
{
	if (!t->sticky && t->state != TXN_DONE)
		t->sticky = err;
	return err;
}

static int stage_read(ts_txn_t *t, uint8_t op, lotus_table_t tb, const void *key, size_t klen)
{
	int err;
	struct txn_op *o = op_add(t, op, tb, key, klen, &err);
	if (!o)
		return stage_failed(t, err);
	txn_view_stage_read(t, o);   /* maybe answered by the write set */
	return (int)(o - t->ops);
}


/* An X lock this txn already asked for on (tb, key), to hang a write on. */
static struct txn_op *op_find_x(ts_txn_t *t, lotus_table_t tb, const void *key, size_t klen)
{
	for (unsigned i = t->nops; i-- > 0;) {
		struct txn_op *o = &t->ops[i];
		if (o->table == tb && o->klen == klen && !memcmp(o->key, key, klen) && !o->ryw &&
		    (o->op == OP_READ_X || o->op == OP_LOCK_X || o->op == OP_INSERT ||
		     o->op == OP_DELETE))
			return o;
	}
	return NULL;
}

static int stage_write(ts_txn_t *t, uint8_t lock_op, uint8_t wkind, lotus_table_t tb,
		       const void *key, size_t klen, const void *v, size_t vlen)
{
	int err;
	struct txn_op *o = NULL;
	if ((!v && vlen) || !key || !klen)
		return stage_failed(t, -EINVAL);
	if (lock_op == OP_INSERT && t->state == TXN_IDLE && !t->sticky &&
	    tb < t->s->cl->ntables && klen <= 128) {
		/* the transaction's own writes may already decide the insert */
		int how = txn_view_stage_insert(t, (uint16_t)tb, key, (uint16_t)klen);
		if (how == INSERT_UPSERT) {
			lock_op = wkind = OP_LOCK_X;
		} else if (how == INSERT_EXISTS) {
			if (vlen > t->s->cl->tables[tb].max_value)
				return stage_failed(t, LOTUS_ETOOBIG);
			o = op_add(t, OP_INSERT, tb, key, klen, &err);
			if (!o)
				return stage_failed(t, err);
			o->ryw = RYW_SERVED;
			o->status = LOTUS_EEXISTS;
			return (int)(o - t->ops);
		}
	}
	if (lock_op != OP_INSERT && t->state == TXN_IDLE && !t->sticky && tb < t->s->cl->ntables)
		o = op_find_x(t, tb, key, klen);
	if (o && (o->observed || o->op == OP_INSERT || o->op == OP_DELETE)) {
		/* A read or scan saw that op's write: keep it.  Or a write or delete
		 * follows an insert or delete of the key, whose own result
		 * (LOTUS_EEXISTS, LOTUS_ENOTFOUND) must not become the new call's:
		 * it gets its own op.  Either way it is staged on the X lock already
		 * held (a blind X request, granted at once) and applies after it. */
		o = NULL;
		lock_op = OP_LOCK_X;
	}
	if (o && o->sent && o->local && !o->remote) {
		/* CO: that op was served by the cache, without the memory
		 * server's X lock; a write must be applied there, so it is an op
		 * of its own that also locks the key there. */
		o = NULL;
		if (lock_op != OP_DELETE)
			lock_op = OP_LOCK_X;
	}
	if (!o)
		o = op_add(t, lock_op, tb, key, klen, &err);
	if (!o)
		return stage_failed(t, err);
	err = op_set_value(t, o, v, vlen);
	if (err)
		return stage_failed(t, err);
	o->write = wkind;
	t->has_writes = 1;
	return (int)(o - t->ops);
}

static int stage_scan(ts_txn_t *t, lotus_table_t tb, const void *start, size_t slen,
		      unsigned count)
{
	int err;
	struct txn_op *o = op_add(t, OP_SCAN, tb, start, slen, &err);
	if (!o)
		return stage_failed(t, err);
	o->count = count;
	err = txn_view_stage_scan(t, o);
	if (err)
		return stage_failed(t, err);
	return (int)(o - t->ops);
}

static int ts_stage(lotus_txn_t *pt, const struct engine_op *op)
{
	ts_txn_t *t = ts_of(pt);
	switch (op->kind) {
	case ENGINE_READ:
		return stage_read(t, OP_READ, op->table, op->key, op->klen);
	case ENGINE_READ_X:
		return stage_read(t, OP_READ_X, op->table, op->key, op->klen);
	case ENGINE_WRITE:
		return stage_write(t, OP_LOCK_X, OP_LOCK_X, op->table, op->key, op->klen,
				   op->value, op->vlen);
	case ENGINE_INSERT:
		return stage_write(t, OP_INSERT, OP_INSERT, op->table, op->key, op->klen,
				   op->value, op->vlen);
	case ENGINE_DELETE:
		return stage_write(t, OP_DELETE, OP_DELETE, op->table, op->key, op->klen, NULL, 0);
	case ENGINE_SCAN:
		return stage_scan(t, op->table, op->key, op->klen, op->count);
	}
	return stage_failed(t, -EINVAL);
}

/* ---- results ------------------------------------------------------------- */

static int ts_result(const lotus_txn_t *pt, int op, const void **value, size_t *vlen)
{
	const ts_txn_t *t = ts_of_const(pt);
	if (op < 0 || (unsigned)op >= t->nops)
		return -EINVAL;
	const struct txn_op *o = &t->ops[op];
	if (value)
		*value = o->rval;
	if (vlen)
		*vlen = o->rlen;
	return o->status;
}

static int ts_result_version(const lotus_txn_t *pt, int op, uint64_t *version)
{
	const ts_txn_t *t = ts_of_const(pt);
	if (op < 0 || (unsigned)op >= t->nops || !version)
		return -EINVAL;
	const struct txn_op *o = &t->ops[op];
	if (o->op != OP_READ && o->op != OP_READ_X)
		return -EINVAL;
	if (o->status)
		return o->status;
	if (o->has_ver) {
		*version = o->ver;
		return 0;
	}
	/* answered by a server without versions, or here (read-your-writes, a
	 * compute-owned key), or not yet */
	return o->replied || o->ryw != RYW_NONE || o->local ? LOTUS_EUNSUPPORTED : LOTUS_ESTATE;
}

static int ts_scan_rows(const lotus_txn_t *pt, int op)
{
	const ts_txn_t *t = ts_of_const(pt);
	if (op < 0 || (unsigned)op >= t->nops || t->ops[op].op != OP_SCAN)
		return -EINVAL;
	return t->ops[op].status ? t->ops[op].status : (int)t->ops[op].rows;
}

static int ts_scan_row(const lotus_txn_t *pt, int op, unsigned i, const void **key,
		       size_t *klen, const void **value, size_t *vlen)
{
	const ts_txn_t *t = ts_of_const(pt);
	if (op < 0 || (unsigned)op >= t->nops || i >= t->ops[op].rows || !t->ops[op].row_ptrs)
		return -EINVAL;
	const struct wire_row *row = (const struct wire_row *)t->ops[op].row_ptrs[i];
	const unsigned char *k = (const unsigned char *)(row + 1);
	*key = k;
	*klen = row->key_len;
	*value = k + row->key_len;
	*vlen = row->value_len;
	return 0;
}

/* ---- steps --------------------------------------------------------------- */

static void txn_step_done(ts_txn_t *t);
static int txn_commit_start(ts_txn_t *t);
static void txn_commit_notify(ts_txn_t *t, uint64_t servers);
static int txn_abort_start(ts_txn_t *t);

int txn_send(ts_txn_t *t, unsigned sv, struct wire_req *r, const void *key, const void *val)
{
	r->txn_id = t->pub.id;
	r->priority = t->pub.prio;
	r->cc = (uint8_t)t->s->cl->opts.cc;
	/* replicas > 1: after a loss, a server this txn already used may be a
	 * successor that never saw its locks (they went with the lost
	 * primary): nothing more of it goes there but its ABORT */
	if ((t->participants >> sv & 1) && r->op != OP_ABORT && r->op != OP_TXN_STATUS &&
	    t->s->cl->repl.replicas > 1 && atomic_load(&t->s->g->lost_seq) != t->lost_seq0)
		return LOTUS_EFAILOVER;
	size_t bytes = 0;
	int rc = session_queue(t->s, sv, r, key, val, &bytes);
	if (rc == -E2BIG)   /* one request over WIRE_MAX_MSG: a commit's writes */
		rc = LOTUS_ETOOBIG;
	if (rc)
		return rc;
	engine_count_op(&t->att, op_type(r->op), bytes);
	if (!t->sl.deadline_ns) {  /* the first request of a round starts its clock */
		t->sl.deadline_ns = clock_now_ns() + t->s->cl->timeout_ns;
		engine_count_round_trip(&t->att);
	}
	t->participants |= 1ULL << sv;
	t->att.servers |= 1ULL << sv;
	t->due[sv]++;
	t->outstanding++;
	return 0;
}

/* Send op idx to its memory server(s); a scan goes to every server (but a
 * LOTUS_PLACE_SCAN_LOCAL one to its start key's). */
int txn_op_send_remote(ts_txn_t *t, unsigned idx)
{
	lotus_cluster_t *c = t->s->cl;
	struct txn_op *o = &t->ops[idx];
	struct wire_req r = { .op = o->op, .key_len = o->klen, .tag = t->sl.idx << 16 | idx,
			      .arg = o->scan ? o->scan->target : o->count };
	o->sent = 1;
	if (o->op != OP_SCAN) {
		struct cache_key k = { .table = o->table, .klen = o->klen, .key = o->key };
		r.table = c->tables[o->table].ids[o->server];
		r.hint = o->hint = c->cache ? c->cache->ops->hint(c->cache, &k, o->op) : 0;
		o->replies_due = 1;
		return txn_send(t, o->server, &r, o->key, NULL);
	}
	if (cluster_scan_local(c, o->table, o->klen)) {   /* the field's server alone */
		r.table = c->tables[o->table].ids[o->server];
		o->replies_due = 1;
		return txn_send(t, o->server, &r, o->key, NULL);
	}
	o->replies_due = (uint16_t)c->nservers;
	for (unsigned sv = 0; sv < c->nservers; sv++) {
		r.table = c->tables[o->table].ids[sv];
		int rc = txn_send(t, sv, &r, o->key, NULL);
		if (rc)
			return rc;
	}
	return 0;
}

int txn_op_send(ts_txn_t *t, unsigned idx)
{
	struct txn_op *o = &t->ops[idx];
	if (o->ryw) {  /* answered by the client (txn_view.c) */
		o->sent = 1;
		return 0;
	}
	struct txn_cache *tc = t->s->cl->cache;
	struct cache_key k = { .table = o->table, .klen = o->klen, .key = o->key };
	if (tc && o->op != OP_SCAN && tc->ops->owns(tc, &k))
		return txn_op_local(t, idx);
	return txn_op_send_remote(t, idx);
}

/* A step's last outstanding reply or local grant arrived: complete it from
 * lotus_session_poll, outside the message handler. */
void txn_step_ready(ts_txn_t *t)
{
	struct ts_sess *ss = ts_sess(t->s);
	t->sl.deadline_ns = 0;  /* nothing is outstanding */
	if (t->ready)
		return;
	t->ready = 1;
	t->ready_next = NULL;
	if (ss->ready_tail)
		ss->ready_tail->ready_next = t;
	else
		ss->ready_head = t;
	ss->ready_tail = t;
}

static void txn_drain_ready(lotus_session_t *s)
{
	/* Complete only what was ready when the drain began: a step that a
	 * completion starts and that finishes at once (a retry refused by a local
	 * lock) waits for the next poll, after the network has been progressed. */
	struct ts_sess *ss = ts_sess(s);
	ts_txn_t *t = ss->ready_head, *next;
	ss->ready_head = ss->ready_tail = NULL;
	for (; t; t = next) {
		next = t->ready_next;
		t->ready = 0;
		if (t->outstanding == 0)
			txn_step_done(t);
	}
	/* No flush here: a step a completion starts flushes its own requests
	 * (session_step_end).  What may be left are COMMIT notices
	 * (txn_commit_notify): they ride on the next step's message, which a
	 * callback of this poll usually sends, or leave with the poll's last
	 * flush (ts_poll). */
}

/* Finish a step that could not even be sent. */
static int txn_fail_now(ts_txn_t *t, int rc)
{
	if (!t->err)
		t->err = rc;
	if (t->outstanding == 0)
		txn_step_ready(t);
	return 0;
}

static int txn_execute_locked(ts_txn_t *t, lotus_txn_cb cb, void *arg)
{
	if (t->sticky)
		return t->sticky;
	if (t->state != TXN_IDLE)
		return LOTUS_ESTATE;
	t->cb = cb;
	t->cb_arg = arg;
	t->step_done = 0;
	t->err = 0;
	t->state = TXN_EXEC;
	for (; t->next_unsent < t->nops; t->next_unsent++) {
		int rc = txn_op_send(t, t->next_unsent);
		if (rc) {
			t->next_unsent = t->nops;
			return txn_fail_now(t, rc);
		}
	}
	session_step_end(t->s);
	if (t->outstanding == 0)
		txn_step_ready(t);
	return 0;
}

static int ts_execute(lotus_txn_t *pt, lotus_txn_cb cb, void *arg)
{
	ts_txn_t *t = ts_of(pt);
	session_lock(t->s);
	engine_attempt_start(&t->att);
	int rc = txn_execute_locked(t, cb, arg);
	session_unlock(t->s);
	return rc;
}

/* replicas > 1: a step that failed because a server's connection was lost
 * (nothing applied: these errors say so) is one the partition's backup
 * takes over from; the application retries it (LOTUS_EFAILOVER), and the
 * session reaches the new primary when it next sends there. */
static int txn_failover_err(const ts_txn_t *t, int result)
{
	if (t->s->cl->repl.replicas < 2 || atomic_load(&t->s->g->lost_seq) == t->lost_seq0)
		return result;   /* not replicated, or no loss during this transaction */
	return result == LOTUS_EUNAVAIL || result == LOTUS_ETIMEOUT || result == LOTUS_ELEASE
	       ? LOTUS_EFAILOVER : result;
}

/* The step ended: its callback runs from the poll once the group lock is
 * released (ts_poll). */
static void txn_finish(ts_txn_t *t, int result)
{
	struct ts_sess *ss = ts_sess(t->s);
	int mapped = txn_failover_err(t, result);
	if (mapped != result && t->sticky == result)
		t->sticky = mapped;
	result = mapped;
	t->step_done = 1;
	t->err = result;
	t->fin_cb = t->cb;
	t->fin_arg = t->cb_arg;
	t->fin_result = result;
	t->cb = NULL;
	if (!t->fin_cb)
		return;
	t->fin_next = NULL;
	if (ss->fin_tail)
		ss->fin_tail->fin_next = t;
	else
		ss->fin_head = t;
	ss->fin_tail = t;
}

/* The attempt ended (committed or not): its counts go to the session. */
static void txn_attempt_end(ts_txn_t *t, int committed)
{
	engine_attempt_end(&t->att, committed, &ts_sess(t->s)->ctr);
}

static void txn_exec_done(ts_txn_t *t, int err)
{
	if (!err && txn_view_followups(t) > 0) {  /* another round trip of this step */
		session_step_end(t->s);
		if (t->outstanding == 0)
			txn_step_ready(t);
		return;
	}
	if (!err)
		txn_view_finish(t);
	err = t->err;
	if (err) {
		t->state = TXN_FAILED;
		t->sticky = err;
		t->commit_after_exec = 0;
	} else {
		t->state = TXN_IDLE;
	}
	if (!err && t->commit_after_exec) {
		t->commit_after_exec = 0;
		txn_commit_start(t);
		return;
	}
	txn_finish(t, err);
}

/* ---- the outcome of a commit -------------------------------------------------
 *
 * A commit that fails says "nothing was applied" (its error: LOTUS_EUNAVAIL,
 * LOTUS_ETIMEOUT, a refusal...) only when no write can have landed nor ever
 * land, and LOTUS_EINDOUBT otherwise.  What decides is what each server did
 * with the step's request (t->noanswer, refused, unsent, round_writes):
 *
 *   PREPARE (two or more writers; readers get their COMMIT in it):
 *     every writer voted yes, every reader committed --> committed: 0, and
 *         each writer's COMMIT notice rides on the next message to it
 *         (txn_commit_notify; the votes alone decide, whatever it meets)
 *     a writer voted no, or never got its PREPARE   --> abort: not applied (that
 *         writer never prepares it, so no resolver can commit it)
 *     a writer's vote was lost with its connection,
 *         no writer said no                          --> RESOLVE
 *     a writer missed the deadline but is connected,
 *     or only a reader failed                        --> abort everywhere, which
 *         holds if a writer acknowledged it (its ABORTED outcome then keeps
 *         every resolver from committing), else in doubt
 *   COMMIT, one phase: in doubt if a server that got writes did not answer, or
 *     some writes landed while another server failed; else nothing was applied
 *   RESOLVE: ask every writer still connected for the transaction's status
 *     (OP_TXN_STATUS; a server that never prepared it answers UNKNOWN and
 *     refuses it from then on, so UNKNOWN is final) and decide as the servers'
 *     resolvers do (termination.c):
 *       any COMMITTED                 --> committed: 0
 *       any ABORTED or UNKNOWN        --> abort: not applied
 *       every writer PREPARED         --> committed: 0 (and the notices)
 *       else (a writer unreachable)   --> ask again after RESOLVE_PAUSE_NS, until
 *                                         timeout_ms after the vote was lost:
 *                                         then in doubt (the servers settle it)
 * The survivors' answers change once their resolvers have reached the lost
 * server again, which is how a writer restarted within timeout_ms turns a
 * doubt into an answer.
 */

#define RESOLVE_ROUND_NS (1000000000ULL)  /* a round of questions waits this long */
#define RESOLVE_PAUSE_NS (200000000ULL)   /* between rounds (the resolvers' pace) */

/* A new step: no request out, nothing known about any server yet. */
static void step_reset(ts_txn_t *t)
{
	t->err = 0;
	t->outstanding = 0;
	memset(t->due, 0, sizeof(t->due));
	t->noanswer = t->lostconn = t->refused = t->unsent = t->acked = 0;
}

/* The transaction ends without an abort round: committed (err 0) or in
 * doubt.  What is left of it at the servers is theirs to settle. */
static void txn_end_here(ts_txn_t *t, int err)
{
	if (err)
		t->sticky = err;
	txn_cache_settle(t, err);
	txn_local_release(t);
	t->state = TXN_DONE;
	t->participants = 0;
	txn_attempt_end(t, err == 0);
	txn_finish(t, err);
}

/* Abort everywhere; the commit reports err (nothing was applied). */
static void txn_abort_with(ts_txn_t *t, int err, int after_yes)
{
	t->sticky = t->abort_result = err;
	t->abort_after_yes = after_yes;
	txn_abort_start(t);
}

static void txn_resolve_round(ts_txn_t *t)
{
	uint64_t now = clock_now_ns();
	step_reset(t);
	t->resolve_pause = 0;
	t->said_commit = t->said_abort = t->said_prepared = 0;
	t->sl.deadline_ns = 0;
	for (unsigned sv = 0; sv < LOTUS_MAX_SERVERS; sv++) {
		/* replicas > 1: a lost writer's successor answers for it */
		if ((t->writers >> sv & 1) && !session_connected(t->s, sv) &&
		    t->s->cl->repl.replicas > 1)
			session_failover(t->s, sv);
		if (!(t->writers >> sv & 1) || !session_connected(t->s, sv))
			continue;
		struct wire_req r = { .op = OP_TXN_STATUS, .tag = t->sl.idx << 16 | TAG_TXN_OP };
		if (txn_send(t, sv, &r, NULL, NULL) != 0)
			t->noanswer |= 1ULL << sv;
	}
	session_step_end(t->s);
	if (t->outstanding == 0) {   /* nobody left to ask */
		txn_step_ready(t);
		return;
	}
	t->sl.deadline_ns = MIN(now + RESOLVE_ROUND_NS, MAX(t->resolve_until_ns, now + 1));
}

/* A writer's vote was lost with err: find out what became of the
 * transaction from the writers still connected. */
static void txn_resolve_start(ts_txn_t *t, int err)
{
	t->doubt = err;
	t->resolve_until_ns = clock_now_ns() + t->s->cl->timeout_ns;
	t->state = TXN_RESOLVE;
	txn_resolve_round(t);
}

/* Slot callback: a writer's answer to OP_TXN_STATUS. */
static void txn_resolve_note(ts_txn_t *t, unsigned sv, const struct wire_rep *r)
{
	uint64_t bit = 1ULL << sv;
	switch (r->status ? 0 : r->arg) {
	case WIRE_TXN_COMMITTED:
		t->said_commit |= bit;
		break;
	case WIRE_TXN_ABORTED:
	case WIRE_TXN_UNKNOWN:     /* never prepared there, and now refused for good */
		t->said_abort |= bit;
		break;
	case WIRE_TXN_PREPARED:
		t->said_prepared |= bit;
		break;
	default:                   /* no answer it can stand by */
		t->noanswer |= bit;
		break;
	}
}

/* Those of servers whose connection is up. */
static uint64_t connected_of(const ts_txn_t *t, uint64_t servers)
{
	uint64_t up = 0;
	for (unsigned sv = 0; sv < LOTUS_MAX_SERVERS; sv++)
		if ((servers >> sv & 1) && session_connected(t->s, sv))
			up |= 1ULL << sv;
	return up;
}

static void txn_resolve_done(ts_txn_t *t)
{
	uint64_t now = clock_now_ns();
	if (t->resolve_pause) {   /* the pause is over: ask again */
		txn_resolve_round(t);
		return;
	}
	if (t->said_commit) {
		log_info("transaction %llx: committed (its writers said so after a lost vote)",
			 (unsigned long long)t->pub.id);
		txn_end_here(t, 0);
		return;
	}
	if (t->said_abort) {
		txn_abort_with(t, t->doubt, 0);
		return;
	}
	if (t->said_prepared == t->writers) {   /* every vote was yes after all */
		t->prepared = 1;
		t->state = TXN_IDLE;
		ts_sess(t->s)->notices = 1;
		txn_commit_notify(t, t->writers);
		return;
	}
	/* replicas > 1: a lost writer's successor may answer soon */
	if (now < t->resolve_until_ns &&
	    (connected_of(t, t->writers) || t->s->cl->repl.replicas > 1)) {
		t->resolve_pause = 1;
		t->sl.deadline_ns = MIN(now + RESOLVE_PAUSE_NS, t->resolve_until_ns);
		return;
	}
	log_warn("transaction %llx: commit outcome in doubt (%s; the writers it still "
		 "reaches could not tell within %llu ms); the memory servers settle it",
		 (unsigned long long)t->pub.id, lotus_strerror(t->doubt),
		 (unsigned long long)(t->s->cl->timeout_ns / 1000000));
	txn_end_here(t, LOTUS_EINDOUBT);
}

/* Every writer voted yes, and a yes vote is durable before it is sent: the
 * transaction is committed (the servers' resolvers commit it from the votes
 * alone, termination.c), so the application hears so now, one round trip
 * after the last write.  Each writer's COMMIT notice is queued, not awaited:
 * it rides on the next message this session sends that server (the next
 * step a callback of this poll starts: txn_drain_ready does not flush), at
 * the latest the one the poll that acknowledged it sends at its end (ts_poll),
 * and releases the X locks there; a reader meanwhile meets them as it meets
 * those of any committing transaction.  Its reply finds no due count and is
 * dropped (ts_on_reply).  A notice that cannot be queued (the connection is
 * gone) is the resolver's to settle, as a lost COMMIT always was.
 * A read-only transaction ends the same way (txn_commit_start), with notices
 * that only release its S locks. */
static void txn_commit_notify(ts_txn_t *t, uint64_t servers)
{
	for (unsigned sv = 0; sv < LOTUS_MAX_SERVERS; sv++) {
		if (!(servers >> sv & 1))
			continue;
		struct wire_req r = { .op = OP_COMMIT, .tag = t->sl.idx << 16 | TAG_TXN_OP,
				      .txn_id = t->pub.id, .priority = t->pub.prio,
				      .cc = (uint8_t)t->s->cl->opts.cc };
		size_t bytes = 0;
		if (session_queue(t->s, sv, &r, NULL, NULL, &bytes) == 0)
			engine_count_op(&t->att, op_type(r.op), bytes);
	}
	t->state = TXN_COMMIT;
	txn_end_here(t, 0);
}

static void txn_prepare_done(ts_txn_t *t, int err)
{
	if (!err) {
		t->prepared = 1; /* every participant is COMMITTING */
		t->state = TXN_IDLE;
		if (t->writers) {
			crash_point("client_prepared");  /* tests: every writer voted, no COMMIT sent */
			ts_sess(t->s)->notices = 1;      /* crash point client_acked */
			txn_commit_notify(t, t->writers);
		}
		else   /* the WOUND_WAIT round: now the COMMIT with the writes */
			txn_commit_start(t);
		return;
	}
	if (!t->writers) {   /* the WOUND_WAIT round: no write was sent */
		txn_abort_with(t, err, 0);
		return;
	}
	if ((t->refused | t->unsent) & t->writers)
		txn_abort_with(t, err, 0);   /* a writer never prepares it */
	else if (t->noanswer & t->writers & t->lostconn)
		txn_resolve_start(t, err);   /* a vote lost with its connection */
	else
		txn_abort_with(t, err, 1);   /* a reader failed, or a writer is late */
}

static void txn_commit_done(ts_txn_t *t, int err)
{
	if (err) {
		uint64_t w = t->round_writes;
		uint64_t landed = w & ~(t->noanswer | t->refused | t->unsent);
		/* replicas > 1, one writer whose answer was lost with its
		 * primary: the successor knows whether the COMMIT reached the
		 * log it copied (what it answers UNKNOWN for, it refuses).
		 * Lost, not "not connected now": by the time this step ends
		 * another transaction's retry may have reached the successor */
		if (t->s->cl->repl.replicas > 1 && (t->noanswer & w) && !landed &&
		    !(t->noanswer & w & ~t->lostconn)) {
			t->writers = t->noanswer & w;
			txn_resolve_start(t, err);
			return;
		}
		if ((t->noanswer & w) || landed)
			err = LOTUS_EINDOUBT;
	}
	txn_end_here(t, err);
}

static void txn_step_done(ts_txn_t *t)
{
	int err = t->err;
	switch (t->state) {
	case TXN_EXEC:
		txn_exec_done(t, err);
		return;
	case TXN_PREPARE:
		txn_prepare_done(t, err);
		return;
	case TXN_COMMIT:
		if (t->ro_first) {   /* the dependent readers answered: now the writer */
			t->ro_done |= t->ro_first;
			t->ro_first = 0;
			if (err) {       /* the writer has not committed: abort it */
				txn_abort_with(t, err, 0);
				return;
			}
			t->state = TXN_IDLE;
			txn_commit_start(t);
			return;
		}
		txn_commit_done(t, err);
		return;
	case TXN_RESOLVE:
		txn_resolve_done(t);
		return;
	case TXN_ABORT: {
		int res = t->abort_result;
		if (t->abort_after_yes && !(t->acked & t->writers))
			res = t->sticky = LOTUS_EINDOUBT;   /* no writer took the abort */
		txn_local_release(t);
		t->state = TXN_DONE;
		t->participants = 0;
		txn_attempt_end(t, 0);
		txn_finish(t, res);
		return;
	}
	default:
		return;
	}
}

static void op_store_value(struct txn_op *o, const unsigned char *v, uint32_t len, int append)
{
	uint32_t at = append ? o->rlen : 0;
	if (at + len > o->rcap) {
		uint32_t cap = MAX(at + len, o->rcap * 2);
		unsigned char *p = realloc(o->rval, cap);
		if (!p) {
			o->status = -ENOMEM;
			return;
		}
		o->rval = p;
		o->rcap = cap;
	}
	if (len)
		memcpy(o->rval + at, v, len);
	o->rlen = at + len;
}

/* Per-op failures that do not doom the transaction. */
static int status_is_benign(int st)
{
	return st == 0 || st == LOTUS_ENOTFOUND || st == LOTUS_EEXISTS;
}

/* Record one op's outcome (remote reply or local completion). */
void txn_op_result(ts_txn_t *t, struct txn_op *o, int status)
{
	if (status && (o->status == 0 || o->op != OP_SCAN))
		o->status = status;
	if (!status_is_benign(status) && !t->err)
		t->err = status;
}

/* Does a reply to op belong to a request of a step in state st?  A server
 * that missed a round's deadline may still answer it during the next round
 * (RESOLVE asks it again, phase two sends it the COMMIT): that late answer is
 * dropped, not taken for the new round's. */
static int step_takes_reply(enum txn_state st, uint8_t op)
{
	switch (st) {
	case TXN_PREPARE:
		return op == OP_PREPARE || op == OP_COMMIT;
	case TXN_COMMIT:
		return op == OP_COMMIT;
	case TXN_RESOLVE:
		return op == OP_TXN_STATUS;
	case TXN_ABORT:
		return op == OP_ABORT;
	default:
		return 1;
	}
}

/* Slot callback (group lock held): a reply for this transaction's slot. */
static void ts_on_reply(struct sess_slot *sl, unsigned sv, const struct wire_rep *r,
			const unsigned char *k, const unsigned char *v, size_t bytes)
{
	ts_txn_t *t = container_of(sl, ts_txn_t, sl);
	unsigned idx = r->tag & 0xffff;
	if (t->pub.id != r->txn_id) {
		log_debug("dropping reply for an unknown transaction %llx",
			  (unsigned long long)r->txn_id);
		return;
	}
	if (t->due[sv] == 0 || t->outstanding == 0)
		return;
	if (idx == TAG_TXN_OP && !step_takes_reply(t->state, r->op))
		return;
	engine_count_recv(&t->att, op_type(r->op), bytes);
	t->due[sv]--;
	t->outstanding--;
	if (r->flags & WIRE_REP_F_DEP)
		t->deps |= 1ULL << sv;
	if (idx != TAG_TXN_OP && idx < t->nops) {
		struct txn_op *o = &t->ops[idx];
		txn_op_result(t, o, r->status);
		if (o->op == OP_SCAN) {
			op_store_value(o, v, r->value_len, 1);
			o->rows += (unsigned)r->arg;
			txn_view_scan_reply(t, sv, o, r, k);
		} else {
			o->loc = r->loc;
			if (r->value_len || o->op == OP_READ || o->op == OP_READ_X)
				op_store_value(o, v, r->value_len, 0);
			if (o->op == OP_READ || o->op == OP_READ_X) {
				o->ver = r->arg;
				o->has_ver = r->status == 0 && (r->flags & WIRE_REP_F_VERSION);
				o->replied = 1;
			}
			struct txn_cache *tc = t->s->cl->cache;
			struct cache_key ck = { .table = o->table, .klen = o->klen, .key = o->key };
			if (tc && tc->ops->on_reply(tc, &ck, o->op, o->hint, r))
				t->s->ctr.hint_stale++;
		}
	} else if (t->state == TXN_RESOLVE) {
		txn_resolve_note(t, sv, r);
	} else if (!status_is_benign(r->status)) {
		t->refused |= 1ULL << sv;
		if (!t->err)
			t->err = r->status;
	} else if (r->status == 0) {
		t->acked |= 1ULL << sv;
	}
	if (t->outstanding == 0)
		txn_step_ready(t);
}

/* Slot callback: the connection to sv is gone (reason: LOTUS_EUNAVAIL,
 * LOTUS_ETIMEOUT for a silent server, LOTUS_ELEASE for this process's expired
 * lease): the step's requests there fail with reason. */
static void ts_on_lost(struct sess_slot *sl, unsigned sv, int reason)
{
	ts_txn_t *t = container_of(sl, ts_txn_t, sl);
	if (!t->due[sv])
		return;
	t->outstanding -= t->due[sv];
	t->due[sv] = 0;
	t->noanswer |= 1ULL << sv;
	t->lostconn |= 1ULL << sv;
	if (!t->err)
		t->err = reason;
	if (t->outstanding == 0)
		txn_step_ready(t);
}

/* The deadline passed with replies outstanding: the servers that owe them
 * are unresponsive for the rest of this attempt (their late replies find no
 * due count and are dropped), and the step ends with LOTUS_ETIMEOUT.  Local
 * lock waits (co-partitioning) still complete as usual. */
static void ts_on_expire(struct sess_slot *sl)
{
	ts_txn_t *t = container_of(sl, ts_txn_t, sl);
	int late = 0;
	t->sl.deadline_ns = 0;
	if (t->state == TXN_RESOLVE && t->resolve_pause) {   /* time to ask again */
		txn_step_ready(t);
		return;
	}
	for (unsigned sv = 0; sv < LOTUS_MAX_SERVERS; sv++) {
		if (!t->due[sv])
			continue;
		late = 1;
		if (t->state != TXN_RESOLVE)   /* a round of questions: it says so at its end */
			log_warn("memory server %u did not answer transaction %llx within %llu ms",
				 sv, (unsigned long long)t->pub.id,
				 (unsigned long long)(t->s->cl->timeout_ns / 1000000));
		t->unresponsive |= 1ULL << sv;
		t->noanswer |= 1ULL << sv;
		t->outstanding -= t->due[sv];
		t->due[sv] = 0;
	}
	if (!late)  /* only local lock waits are left: they end with their holders */
		return;
	if (!t->err)
		t->err = LOTUS_ETIMEOUT;
	if (t->outstanding == 0)
		txn_step_ready(t);
}

/* The session closes with this transaction in flight (lotus_session_close;
 * its slot is off the group already): what it holds at the servers is
 * theirs to settle, as for a client gone; its memory goes with the session. */
static void ts_on_drop(struct sess_slot *sl)
{
	ts_txn_t *t = container_of(sl, ts_txn_t, sl);
	txn_local_release(t);
	txn_clear_ops(t);
	txn_spare_release(t);
}

static const struct sess_slot_ops ts_slot_ops = {
	.on_reply = ts_on_reply, .on_lost = ts_on_lost, .on_expire = ts_on_expire,
	.on_drop = ts_on_drop,
};

/* ---- commit and abort ------------------------------------------------------ */

/* Send sv its COMMIT or PREPARE (OP_PREPARE, hint = the writer bitmask) with
 * the writes the transaction made there. */
static int commit_send_one(ts_txn_t *t, unsigned sv, struct wire_buf *wb, uint8_t op,
			   uint64_t writers)
{
	lotus_cluster_t *c = t->s->cl;
	unsigned n = 0;
	wb->len = 0;
	wb->count = 0;
	for (unsigned i = 0; i < t->nops; i++) {
		struct txn_op *o = &t->ops[i];
		if (o->server != sv || !txn_write_applies(o))
			continue;
		struct wire_write w = {
			.op = o->write, .table = c->tables[o->table].ids[sv], .key_len = o->klen,
			.value_len = o->write == OP_DELETE ? 0 : o->wlen, .hint = o->loc,
		};
		int rc = wire_buf_append_write(wb, &w, o->key, o->wval);
		if (rc)   /* -E2BIG: the writes to sv do not fit one message */
			return rc == -E2BIG ? LOTUS_ETOOBIG : rc;
		n++;
	}
	struct wire_req r = { .op = op, .tag = t->sl.idx << 16 | TAG_TXN_OP,
			      .value_len = (uint32_t)wb->len, .arg = n, .hint = writers };
	return txn_send(t, sv, &r, NULL, wb->data);
}

/* Servers that get at least one write at commit. */
static uint64_t txn_writers(ts_txn_t *t)
{
	uint64_t w = 0;
	for (unsigned i = 0; i < t->nops; i++) {
		struct txn_op *o = &t->ops[i];
		if (txn_write_applies(o))
			w |= 1ULL << o->server;
	}
	return w & t->participants;
}

/* Do the writes to every server fit one COMMIT / PREPARE request
 * (WIRE_MAX_MSG)?  Checked before anything is sent, so that a transaction too
 * big to commit is aborted everywhere instead of leaving its locks behind. */
static int commit_fits(const ts_txn_t *t)
{
	uint64_t bytes[LOTUS_MAX_SERVERS] = { 0 };
	for (unsigned i = 0; i < t->nops; i++) {
		const struct txn_op *o = &t->ops[i];
		if (!txn_write_applies(o) || o->server >= LOTUS_MAX_SERVERS)
			continue;
		bytes[o->server] += wire_pad8(sizeof(struct wire_write) + o->klen +
					      (o->write == OP_DELETE ? 0 : o->wlen));
		if (bytes[o->server] + sizeof(struct wire_hdr) + sizeof(struct wire_req) >
		    WIRE_MAX_MSG)
			return 0;
	}
	return 1;
}

/* One commit round to participant sv (see twosided.h). */
static int commit_round_one(ts_txn_t *t, unsigned sv, struct wire_buf *wb, int durable2pc,
			    int prepare)
{
	if (durable2pc)  /* writers prepare with their writes; readers just commit */
		return (t->writers >> sv & 1)
		       ? commit_send_one(t, sv, wb, OP_PREPARE, t->writers)
		       : commit_send_one(t, sv, wb, OP_COMMIT, 0);
	if (prepare) {  /* the WOUND_WAIT round: phase one without writes */
		struct wire_req r = { .op = OP_COMMIT,
				      .flags = prepare ? WIRE_REQ_F_COMMITTING : 0,
				      .tag = t->sl.idx << 16 | TAG_TXN_OP };
		return txn_send(t, sv, &r, NULL, NULL);
	}
	return commit_send_one(t, sv, wb, OP_COMMIT, 0);
}

static int txn_commit_start(ts_txn_t *t)
{
	uint64_t parts = t->participants & ~t->ro_done;
	int durable2pc = 0, prepare = 0;
	struct wire_buf wb;
	int rc = 0;
	if (!t->prepared && !t->local && !(t->deps & parts) && !txn_writers(t) &&
	    t->s->cl->opts.cc != LOTUS_WOUND_WAIT) {
		/* Read-only, and nothing it read waits for the log: it was
		 * serializable once its last read was granted (strict 2PL: no
		 * lock of it was taken away, every one held then), so it is
		 * committed now; the notices only release its locks.  No flush,
		 * no wait.  Not under WOUND_WAIT: a wound takes a lock away
		 * before the end (an older writer may then commit on one server
		 * before this reads the other), and only the COMMITTING round
		 * finds out.  A read of a change not yet durable (WIRE_REP_F_DEP)
		 * keeps the COMMIT round: its reply waits for that change's
		 * record. */
		txn_commit_notify(t, parts);
		return 0;
	}
	if (!t->prepared && t->s->cl->two_phase && __builtin_popcountll(parts) > 1) {
		t->writers = txn_writers(t);
		durable2pc = __builtin_popcountll(t->writers) > 1;
		if (!durable2pc)
			t->writers = 0;
	}
	prepare = durable2pc || (t->s->cl->opts.cc == LOTUS_WOUND_WAIT && !t->prepared &&
				 __builtin_popcountll(parts) > 1);
	if (t->prepared)
		crash_point("client_committing");  /* tests: the WOUND_WAIT round done, no COMMIT */
	if (!prepare && !t->writers && (t->deps & parts)) {   /* only sync servers set it */
		/* one writer (or none): readers that depend on a change not yet
		 * durable commit first, the writer once they answered */
		uint64_t w = txn_writers(t);
		if (w && (t->deps & parts & ~w)) {
			t->ro_first = t->deps & parts & ~w;
			parts = t->ro_first;
		}
	}
	step_reset(t);
	t->round_writes = durable2pc ? t->writers : prepare ? 0 : txn_writers(t) & parts;
	if (t->local && !t->prepared && !t->ro_done) {
		rc = t->s->cl->cache->ops->begin_commit(t->s->cl->cache, t->local);
		if (rc) {  /* wounded locally: abort everywhere */
			t->sticky = t->abort_result = rc;
			return txn_abort_start(t);
		}
	}
	if (!t->prepared && !commit_fits(t)) {
		t->sticky = t->abort_result = LOTUS_ETOOBIG;
		return txn_abort_start(t);
	}
	t->state = prepare ? TXN_PREPARE : TXN_COMMIT;
	wire_buf_init(&wb);
	for (unsigned sv = 0; sv < LOTUS_MAX_SERVERS && rc == 0; sv++) {
		if (!(parts >> sv & 1))
			continue;
		rc = commit_round_one(t, sv, &wb, durable2pc, prepare);
		if (rc == 0)
			parts &= ~(1ULL << sv);
	}
	t->unsent = parts;   /* on a failed send: the participants it never reached */
	wire_buf_free(&wb);
	session_step_end(t->s);
	if (rc)
		return txn_fail_now(t, rc);
	if (t->outstanding == 0)
		txn_step_ready(t);
	return 0;
}

static int txn_commit_locked(ts_txn_t *t, lotus_txn_cb cb, void *arg)
{
	if (t->sticky)
		return t->sticky;
	if (t->state != TXN_IDLE)
		return LOTUS_ESTATE;
	t->cb = cb;
	t->cb_arg = arg;
	t->step_done = 0;
	t->prepared = 0;
	t->writers = 0;
	t->ro_first = t->ro_done = 0;
	t->abort_after_yes = 0;
	if (t->next_unsent < t->nops) {
		t->commit_after_exec = 1;  /* execute the rest, then commit */
		return txn_execute_locked(t, cb, arg);
	}
	return txn_commit_start(t);
}

static int ts_commit(lotus_txn_t *pt, lotus_txn_cb cb, void *arg)
{
	ts_txn_t *t = ts_of(pt);
	session_lock(t->s);
	engine_attempt_start(&t->att);
	int rc = txn_commit_locked(t, cb, arg);
	session_unlock(t->s);
	return rc;
}

static int txn_abort_start(ts_txn_t *t)
{
	uint64_t parts = t->participants;
	step_reset(t);
	t->state = TXN_ABORT;
	txn_local_release(t);
	for (unsigned sv = 0; parts; sv++, parts >>= 1) {
		if (!(parts & 1) || !session_connected(t->s, sv))
			continue;
		struct wire_req r = { .op = OP_ABORT, .tag = t->sl.idx << 16 | TAG_TXN_OP };
		if (t->unresponsive >> sv & 1) {
			/* it missed a deadline: tell it, but do not wait for it again */
			size_t bytes = 0;
			r.txn_id = t->pub.id;
			r.priority = t->pub.prio;
			r.cc = (uint8_t)t->s->cl->opts.cc;
			if (session_queue(t->s, sv, &r, NULL, NULL, &bytes) == 0)
				engine_count_op(&t->att, op_type(r.op), bytes);
			continue;
		}
		if (txn_send(t, sv, &r, NULL, NULL) != 0 && !t->abort_result)
			t->abort_result = LOTUS_EUNAVAIL;
	}
	session_step_end(t->s);
	if (t->outstanding == 0)
		txn_step_ready(t);
	return 0;
}

static int txn_abort_locked(ts_txn_t *t, lotus_txn_cb cb, void *arg)
{
	if (t->state == TXN_EXEC || t->state == TXN_PREPARE || t->state == TXN_COMMIT ||
	    t->state == TXN_RESOLVE || t->state == TXN_ABORT)
		return LOTUS_ESTATE; /* a step is in flight: wait for it */
	t->cb = cb;
	t->cb_arg = arg;
	t->step_done = 0;
	t->abort_result = 0;
	t->abort_after_yes = 0;
	if (t->state == TXN_DONE) {
		t->state = TXN_ABORT;  /* nothing to release: complete from the poll */
		txn_step_ready(t);
		return 0;
	}
	return txn_abort_start(t);
}

static int ts_abort(lotus_txn_t *pt, lotus_txn_cb cb, void *arg)
{
	ts_txn_t *t = ts_of(pt);
	session_lock(t->s);
	int rc = txn_abort_locked(t, cb, arg);
	session_unlock(t->s);
	return rc;
}

/* ---- the engine ---------------------------------------------------------------- */

static int ts_finished(const lotus_txn_t *pt)
{
	return ts_of_const(pt)->state == TXN_DONE;
}

static void ts_counters(const lotus_session_t *s, struct lotus_txn_counters *out)
{
	*out = ts_sess(s)->ctr;
	out->engine = "twosided";
	out->ntypes = ARRAY_SIZE(type_names);
	for (unsigned i = 0; i < ARRAY_SIZE(type_names); i++)
		out->type_names[i] = type_names[i];
}

static int ts_session_open(lotus_session_t *s)
{
	s->eng = calloc(1, sizeof(struct ts_sess));
	return s->eng ? 0 : -ENOMEM;
}

static void ts_session_close(lotus_session_t *s)
{
	txn_spare_drain(s);
	free(s->eng);
	s->eng = NULL;
}

static int ts_cluster_open(lotus_cluster_t *c)
{
	return txn_cache_create(c, &c->cache);
}

static void ts_cluster_close(lotus_cluster_t *c)
{
	txn_cache_destroy(c->cache);
	c->cache = NULL;
}

/* lotus_session_poll: send, receive, expire, complete the ready steps (lock
 * held), run the callbacks of the steps that ended (lock released), then
 * send what both queued, together (under --batch inter, the next steps of
 * the engine and of the callbacks share messages). */
static int ts_poll(lotus_session_t *s, int timeout_ms)
{
	struct ts_sess *ss = ts_sess(s);
	session_lock(s);
	int n = session_progress(s, timeout_ms, ss->ready_head || ss->grants);
	txn_drain_grants(s);
	txn_drain_ready(s);
	session_unlock(s);
	/* Only this thread touches the list; a callback may poll (a
	 * synchronous call) and so run later entries itself. */
	ts_txn_t *t;
	while ((t = ss->fin_head) != NULL) {
		ss->fin_head = t->fin_next;
		if (!ss->fin_head)
			ss->fin_tail = NULL;
		lotus_txn_cb cb = t->fin_cb;
		void *arg = t->fin_arg;
		t->fin_cb = NULL;
		cb(&t->pub, t->fin_result, arg);
	}
	if (ss->notices) {   /* tests: acknowledged, its COMMIT notices not sent yet */
		ss->notices = 0;
		crash_point("client_acked");
	}
	session_lock(s);
	session_flush(s);
	session_unlock(s);
	session_yield(s);
	return n;
}

const struct engine engine_twosided = {
	.name = "twosided",
	.cluster_open = ts_cluster_open,
	.cluster_close = ts_cluster_close,
	.session_open = ts_session_open,
	.session_close = ts_session_close,
	.poll = ts_poll,
	.begin = ts_begin,
	.restart = ts_restart,
	.free = ts_free,
	.stage = ts_stage,
	.execute = ts_execute,
	.commit = ts_commit,
	.abort = ts_abort,
	.finished = ts_finished,
	.result = ts_result,
	.result_version = ts_result_version,
	.scan_rows = ts_scan_rows,
	.scan_row = ts_scan_row,
	.counters = ts_counters,
};
