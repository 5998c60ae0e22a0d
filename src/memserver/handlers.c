/*
 * handlers.c - the memory server's request handlers, one per wire op,
 * dispatched through a table.
 *
 * Every request carries its transaction id, priority and protocol.  Lock
 * requests (READ, READ_X, LOCK_X, INSERT, DELETE, SCAN) first take the lock
 * through the lock manager, then touch the record: a record is only read under
 * an S or X lock and only written under an X lock, so the store needs no
 * record latches.  A request that must wait parks (struct ms_pending) and is
 * answered later, from ms_resume(), when the lock manager grants it or wounds
 * its transaction (lazy notification: nothing is sent while it waits).
 *
 * COMMIT first moves the transaction to COMMITTING (after which it can no
 * longer be wounded), checks that every write is covered by an X lock it
 * holds, applies the writes, and releases the locks; ABORT just releases.
 *
 * All or nothing.  Only a record that does not exist yet needs space (slots
 * are fixed-size), so an INSERT or blind write (LOCK_X) of an absent key
 * reserves its slot when it takes the X lock (store_reserve; the reservation
 * hangs on the txn's lock entry and goes back with it).  A txn that would not
 * fit thus fails with LOTUS_ENOSPACE before it commits anywhere.  COMMIT
 * then tops the reservation up to every absent key its writes name
 * (ms_writes_reserve) before it applies or logs anything; a check that fails
 * leaves the store untouched, and applying cannot fail after it.
 *
 * Replies.  Every request gets exactly one reply (rep_put): a message that is
 * full is sent and the reply starts the next one, with the same sequence.  A
 * reply that cannot be queued, or a send that fails, marks the connection
 * broken, and it is closed at the end of the message (ms_conn_settle), so a
 * client never waits for a reply that was dropped.
 *
 * With a data directory (srv->log set; durable.c) the writes of a COMMIT, a
 * WRITEBACK and a new table are logged before they are applied, and the reply
 * may wait for the log (ms_reply_durable).  After a log error every request
 * that would write (X locks, commits with writes, writebacks, new tables) is
 * refused with LOTUS_EREADONLY.  Without a data directory none of this runs.
 *
 * Two-phase commit, on every server: a PREPARE (OP_PREPARE, with the writes)
 * is checked and kept in the prepared table (logged first on a durable server)
 * but not applied; the COMMIT without writes that follows applies them, an
 * ABORT drops them.  OP_TXN_STATUS answers another server's resolver
 * (termination.c).
 *
 * Early lock release.  No lock waits for the log.  What may go early, and why:
 *  - COMMIT with writes (one writing server): the record is appended, the
 *    writes applied, the locks released; the reply waits for the record
 *    (sync).  A reader of those writes takes the record's LSN as a commit
 *    dependency (durable.c) and is not acknowledged before it is durable, so
 *    a crash that loses the writer loses only transactions nobody was told
 *    about.
 *  - Read-only COMMIT: nothing to log; the reply waits for the txn's
 *    dependencies on this server (lock_txn_dep), not for the whole log.  A
 *    read that took one says so (WIRE_REP_F_DEP): a txn with one writing
 *    server elsewhere commits here first, and there only once this answered
 *    (compute/txn.c), so its write cannot outlive what it read.
 *  - PREPARE: its X locks stay until the decision.  The outcome is unknown
 *    (another writer may refuse) and its writes are not applied: a reader
 *    let in would see the old value of a key whose new one may still commit,
 *    and a writer could overwrite it - not serializable.  Its S locks go as
 *    soon as the PREPARE is appended: the client sends PREPARE only after
 *    every operation of the txn has been answered, so the txn is past its
 *    lock point and two-phase locking needs them no longer (a later writer
 *    of such a key is ordered after it, whether it commits or aborts).  The
 *    vote waits for the PREPARE to be durable, which covers what the txn read
 *    here (its LSN lies above those dependencies).  Recovery takes back only
 *    the X locks of an undecided PREPARE, which is the same rule.
 *  - COMMIT of a decided 2PC: applied, DECIDE logged lazily, released and
 *    answered at once: every PREPARE is durable, so the outcome survives a
 *    crash (cooperative termination) and its readers depend on nothing.
 *  - ABORT: nothing to make durable.
 * A value a read returns may thus come from a commit that is not durable yet;
 * it is durable once the reading txn's commit has returned 0.
 *
 * Layer 2 (ms_int.h): below the log and the resolver, so every ms_*_logged,
 * ms_reply_durable, ms_prepared_decide and ms_txn_status step above is called
 * through srv->hooks; conn.c calls ms_handle_req, ms_resume and
 * ms_conn_drop_pending through them.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "common/clock.h"
#include "common/common.h"
#include "common/config.h"
#include "common/hash.h"
#include "common/log.h"
#include "memserver/ms_int.h"
#include "memserver/conn.h"
#include "memserver/handlers.h"
#include "memserver/misses.h"
#include "onesided/os_region.h"
#include "onesided/dex.h"

/* One SCAN reply holds at most this many rows and (after its first row) this
 * many bytes; a capped reply says where it stopped and the client continues
 * after that key (compute/txn_view.c). */
#define SCAN_MAX_ROWS 1000
#define SCAN_MAX_BYTES (4u << 20)

typedef void (*ms_handler_fn)(struct ms_worker *wk, struct ms_conn *c, uint32_t sender,
			      uint64_t seq, const struct wire_req *r, const unsigned char *key,
			      const unsigned char *val);

/* Every request gets exactly one reply.  Replies go into b, the message
 * being built for wk->out_conn (sequence wk->out_seq).  A message that is
 * full (WIRE_MAX_MSG bytes or 65535 items) is sent as it is and the reply
 * starts the next one, so a batch whose replies exceed one message is
 * answered in several.  Returns the reply's value bytes (inplace: to be
 * filled by the caller; otherwise just non-NULL), or NULL if it fits in no
 * message or memory ran out. */
static void *rep_put(struct ms_worker *wk, struct wire_buf *b, const struct wire_rep *rep,
		     const void *key, const void *value, int inplace)
{
	for (int attempt = 0; attempt < 2; attempt++) {
		if (inplace) {
			void *p = wire_buf_add_rep_inplace(b, rep, key);
			if (p)
				return p;
		} else if (wire_buf_add_rep(b, rep, key, value) == 0) {
			return b;
		}
		if (attempt || b->count == 0 || !wk->out_conn)
			break;
		ms_send_reply_msg(wk, wk->out_conn, b);   /* full: send it, start anew */
		if (wire_buf_begin(b, WIRE_REP, wk->srv->id, wk->out_seq) != 0)
			break;
	}
	return NULL;
}

/* The reply could not be queued at all (out of memory): the connection is
 * closed once the current message is done, so the client learns that its
 * requests are lost instead of waiting for a reply that never comes. */
static void rep_lost(struct ms_worker *wk, const struct wire_rep *rep)
{
	if (wk->out_conn && !wk->out_conn->broken) {
		log_error("worker %u: no memory for the reply to %s of txn %llx: closing the "
			  "connection", wk->idx, wire_op_name(rep->op),
			  (unsigned long long)rep->txn_id);
		wk->out_conn->broken = 1;
	}
}

void ms_rep_add(struct ms_worker *wk, struct wire_buf *b, const struct wire_rep *rep,
		const void *value)
{
	if (!rep_put(wk, b, rep, NULL, value, 0))
		rep_lost(wk, rep);
}

static void rep_status(struct ms_worker *wk, struct wire_buf *b, const struct wire_req *r,
		       int status, uint64_t arg)
{
	struct wire_rep rep = {
		.op = r->op, .status = status, .tag = r->tag, .txn_id = r->txn_id, .arg = arg,
	};
	ms_rep_add(wk, b, &rep, NULL);
}

/* Who may end a transaction.  A txn id carries its compute server's id in
 * its top 16 bits (compute/session.c), and a client names its compute id in
 * the WIRE_HELLO that opens each connection; `lotus serve` reconnects under
 * the same id, so the id, not the connection, is the owner.  Only the owner
 * may PREPARE, COMMIT or ABORT a transaction here: any other client that
 * holds the secret could otherwise end a txn whose id it learnt or guessed,
 * behind its owner's back - a live one, or a prepared one whose other
 * participants then commit without this server's writes.  The resolver never
 * sends these ops: it decides the prepared txns of its own server in-process
 * (termination.c) and asks the others only OP_TXN_STATUS.  The compute id is
 * the client's word (the handshake proves the secret, not the id): this keeps
 * clients from ending each other's transactions, not a secret holder who lies
 * about who it is. */
static int txn_owner_ok(const struct ms_conn *c, uint64_t txn_id)
{
	return c->hello_seen && (txn_id >> 48) == (c->compute_id & 0xffff);
}

/* A PREPARE, COMMIT or ABORT of another client's txn: nothing is done, the
 * txn goes on; the sender gets -EPERM. */
static int txn_foreign(struct ms_worker *wk, const struct ms_conn *c, const struct wire_req *r)
{
	if (txn_owner_ok(c, r->txn_id))
		return 0;
	log_debug("worker %u: %s of txn %llx refused: compute %u does not own it", wk->idx,
		  wire_op_name(r->op), (unsigned long long)r->txn_id,
		  c->hello_seen ? c->compute_id : 0);
	rep_status(wk, &wk->rep, r, -EPERM, 0);
	return 1;
}

/* Find the record named by (table, key), trying the client's hint first.
 * 0 with *rec pinned (store_rec_put(st, *loc) when done with it),
 * LOTUS_ENOTFOUND, or the error of reading its page in (-EIO,
 * LOTUS_ENOSPACE: a tiered store), which fails the request. */
static int ms_find(struct ms_worker *wk, const struct wire_req *r, const unsigned char *key,
		   store_loc_t *loc, int *stale, struct store_rec **rec)
{
	store_t *st = wk->srv->store;
	int rc;
	*stale = 0;
	if (r->hint) {
		rc = store_rec_get(st, r->hint, r->table, key, r->key_len, rec);
		if (rc == 0) {
			wk->hint_hits++;
			*loc = r->hint;
			return 0;
		}
		if (rc != LOTUS_ENOTFOUND)
			return rc;
		*stale = 1;
		wk->hint_stale++;
	}
	/* the lookup phases' guess (ms_msg_begin), checked as a hint is */
	const struct ms_amac *a = wk->amac_cur;
	if (a && a->guess && a->r == r &&
	    store_rec_get(st, a->guess, r->table, key, r->key_len, rec) == 0) {
		*loc = a->guess;
		wk->guess_hits++;
		return 0;
	}
	wk->index_finds++;
	if (store_get(st, r->table, key, r->key_len, loc) != 0)
		return LOTUS_ENOTFOUND;
	return store_rec_get(st, *loc, r->table, NULL, 0, rec);
}

/* An INSERT or a blind write (LOCK_X) of an absent key will need a slot at
 * commit: reserve it now, under the X lock, for the transaction (its lock
 * entry's user pointer; released with the txn).  So a commit never runs out
 * of space halfway, and a transaction that would is told before it commits
 * anywhere.  0 or LOTUS_ENOSPACE / -ENOMEM. */
static int lockop_reserve(struct ms_server *srv, lock_txn_t *txn, uint16_t table)
{
	store_resv_t *rv = lock_txn_take_user(txn);
	int rc = store_reserve(srv->store, &rv, table, 1);
	lock_txn_set_user(txn, rv);
	return rc;
}

/* The lock is held: do the op's work and append its reply to b. */
static void lockop_complete(struct ms_worker *wk, struct wire_buf *b, lock_txn_t *txn,
			    const struct wire_req *r, const unsigned char *key)
{
	store_loc_t loc = 0;
	int stale;
	struct store_rec *rec = NULL;
	int frc = ms_find(wk, r, key, &loc, &stale, &rec);
	struct wire_rep rep = {
		.op = r->op, .tag = r->tag, .txn_id = r->txn_id, .loc = frc == 0 ? loc : 0,
		.flags = stale ? WIRE_REP_F_HINT_STALE : 0,
	};
	if (frc != 0 && frc != LOTUS_ENOTFOUND) {
		/* its page could not be read in (tiered store): this request
		 * fails, nothing changed; the lock stays with the txn */
		rep.status = frc;
		ms_rep_add(wk, b, &rep, NULL);
		return;
	}
	if (frc != 0)
		rec = NULL;
	if (!rec && (r->op == OP_INSERT || r->op == OP_LOCK_X))
		rep.status = lockop_reserve(wk->srv, txn, r->table);
	if (wk->srv->log) {
		/* what it sees may come from a commit not durable yet; under its
		 * lock the record is stable (a writeback takes no lock, but its keys
		 * are read only by their owner, under the owner's own locks) */
		uint64_t d = wk->srv->hooks.read_dep(wk->srv, r->table, key, r->key_len);
		if (d) {
			lock_txn_dep_note(txn, d);
			rep.flags |= WIRE_REP_F_DEP;
		}
	}
	switch (r->op) {
	case OP_READ:
	case OP_READ_X:
		if (!rec) {
			rep.status = LOTUS_ENOTFOUND;
			break;
		}
		rep.value_len = rec->value_len;
		rep.arg = store_rec_version(wk->srv->store, rec);   /* under the lock */
		rep.flags |= WIRE_REP_F_VERSION;
		void *dst = rep_put(wk, b, &rep, NULL, NULL, 1);
		if (dst) {
			memcpy(dst, store_rec_value(rec), rec->value_len);
			store_rec_put(wk->srv->store, loc);
			return;
		}
		rep.value_len = 0;       /* no memory for the value: say so */
		rep.status = -ENOMEM;
		break;
	case OP_INSERT:
		if (rec)
			rep.status = LOTUS_EEXISTS;
		break;
	case OP_DELETE:
		rep.status = rec ? 0 : LOTUS_ENOTFOUND;
		break;
	default: /* OP_LOCK_X: a blind write needs only the lock */
		break;
	}
	if (rec)
		store_rec_put(wk->srv->store, loc);
	ms_rep_add(wk, b, &rep, NULL);
}

/* A pending request with what the lock manager's notify needs (its waiter,
 * state, connection, txn); the request itself is filled in by pending_fill,
 * only once it parks (notify posts it to this thread, which handles the post
 * only after the handler returned). */
static struct ms_pending *pending_get(struct ms_worker *wk, struct ms_conn *c, lock_txn_t *txn)
{
	struct ms_pending *p = wk->pend_free;
	if (p) {           /* from this worker's cache: no allocation, no clearing */
		wk->pend_free = p->next;
		wk->npend_free--;
	} else if (!(p = malloc(sizeof(*p)))) {
		return NULL;
	}
	p->kind = MS_POST_PENDING;
	memset(&p->w, 0, sizeof(p->w));
	p->w.owner = p;
	p->w.txn = txn;
	atomic_store(&p->state, PEND_PARKED);
	p->conn = c;
	p->txn = txn;
	p->result = 0;
	p->prev = p->next = NULL;
	p->scan_next = p->scan_n = 0;
	p->scan_capped = 0;
	p->scan_keys = NULL;
	p->miss_next = NULL;
	return p;
}

static void pending_fill(struct ms_pending *p, uint32_t sender, uint64_t seq,
			 const struct wire_req *r, const unsigned char *key)
{
	p->sender = sender;
	p->seq = seq;
	p->req = *r;
	memcpy(p->key, key, r->key_len);
}

static struct ms_pending *pending_take(struct ms_worker *wk, struct ms_conn *c, lock_txn_t *txn,
				       uint32_t sender, uint64_t seq, const struct wire_req *r,
				       const unsigned char *key)
{
	struct ms_pending *p = pending_get(wk, c, txn);
	if (p)
		pending_fill(p, sender, seq, r, key);
	return p;
}

/* Link a parked request to its connection (it holds a reference). */
static void pending_park(struct ms_pending *p)
{
	struct ms_conn *c = p->conn;
	p->next = c->pending;
	p->prev = NULL;
	if (c->pending)
		c->pending->prev = p;
	c->pending = p;
	c->nparked++;
	c->refs++;
}

static void pending_unlink(struct ms_pending *p)
{
	struct ms_conn *c = p->conn;
	if (p->prev)
		p->prev->next = p->next;
	else
		c->pending = p->next;
	if (p->next)
		p->next->prev = p->prev;
	c->nparked--;
}

/* On the thread of p's connection (its worker, whose cache takes p back). */
static void ms_pending_free(struct ms_pending *p)
{
	struct ms_worker *wk = p->conn->wk;
	if (p->txn)
		lock_txn_put(wk->srv->locks, p->txn);
	free(p->scan_keys);
	if (wk->npend_free < MS_PEND_CACHE) {
		p->next = wk->pend_free;
		wk->pend_free = p;
		wk->npend_free++;
	} else {
		free(p);
	}
}

static void ms_conn_drop_pending(struct ms_conn *c)
{
	struct ms_pending *p, *next;
	for (p = c->pending; p; p = next) {
		int exp = PEND_PARKED;
		next = p->next;
		if (atomic_compare_exchange_strong(&p->state, &exp, PEND_DEAD)) {
			pending_unlink(p);
			ms_pending_free(p);
			c->refs--;
		}
	}
}

static enum lock_mode op_mode(unsigned op)
{
	return op == OP_READ || op == OP_SCAN ? LOCK_S : LOCK_X;
}

/* The protocol a lock request of c runs under.  A connection with max_parked
 * requests parked already may park no more: its request runs as NO_WAIT with
 * no waiter (so not even a COMMITTING owner parks it), and a conflict (which
 * would have parked it) is refused with LOTUS_ELIMIT, so only that
 * transaction aborts.  *limited says so for park_result(). */
static enum cc_proto park_cc(struct ms_worker *wk, struct ms_conn *c, unsigned cc, int *limited)
{
	*limited = wk->srv->max_parked && c->nparked >= wk->srv->max_parked;
	return *limited ? CC_NO_WAIT : (enum cc_proto)cc;
}

static int park_result(struct ms_worker *wk, int rc, int limited)
{
	if (limited && rc == LOTUS_EABORTED) {
		wk->parked_refused++;
		return LOTUS_ELIMIT;
	}
	return rc;
}

/* A tiered store: the page the request's record is on (the hint's, the
 * lookup phases' guess, else the index's), 0 if none (an absent key). */
static uint64_t lockop_page(struct ms_worker *wk, const struct wire_req *r,
			    const unsigned char *key)
{
	store_loc_t loc;
	const struct ms_amac *a = wk->amac_cur;
	if (r->hint)
		return store_loc_page(r->hint);
	if (a && a->guess && a->r == r)
		return store_loc_page(a->guess);
	if (store_get(wk->srv->store, r->table, key, r->key_len, &loc) == 0)
		return store_loc_page(loc);
	return 0;
}

/* The lock is held and p not parked: if the record's page must be read in,
 * park p on it (misses.c) and return 1; the read's completion answers it
 * (ms_miss_resume).  0: complete it now. */
static int lockop_miss_park(struct ms_worker *wk, struct ms_pending *p, uint32_t sender,
			    uint64_t seq, const struct wire_req *r, const unsigned char *key)
{
	if (!ms_miss_on(wk))
		return 0;
	uint64_t page = lockop_page(wk, r, key);
	if (!page || (!ms_miss_busy(wk) && store_page_resident(wk->srv->store, page)))
		return 0;
	pending_fill(p, sender, seq, r, key);
	if (!ms_miss_park(wk, page, p))
		return 0;
	pending_park(p);
	return 1;
}

/* Drop the worker's cached txn (lockop_txn). */
static void lockop_txn_drop(struct ms_worker *wk)
{
	if (wk->tc_txn) {
		lock_txn_put(wk->srv->locks, wk->tc_txn);
		wk->tc_txn = NULL;
	}
}

/* The txn of lock request r, borrowed: the worker's cache holds the
 * reference, and keeps it until the message ends or an op other than a lock
 * request comes (ms_handle_req drops it before those, since COMMIT, ABORT,
 * PREPARE... may end the txn).  A batched message carries a txn's requests
 * one after another, so the status table is looked at once per txn, not per
 * request, and a request that completes at once takes no reference of its
 * own (two atomic operations fewer per read); one that parks takes one
 * (lock_txn_hold) for its pending entry. */
static lock_txn_t *lockop_txn(struct ms_worker *wk, struct ms_conn *c, const struct wire_req *r)
{
	if (wk->tc_txn && wk->tc_id == r->txn_id && wk->tc_conn == c)
		return wk->tc_txn;
	lock_txn_t *t = lock_txn_get(wk->srv->locks, r->txn_id, r->priority, c);
	lockop_txn_drop(wk);
	if (t) {
		wk->tc_txn = t;
		wk->tc_id = r->txn_id;
		wk->tc_conn = c;
	}
	return t;
}

static void h_lockop(struct ms_worker *wk, struct ms_conn *c, uint32_t sender, uint64_t seq,
		     const struct wire_req *r, const unsigned char *key, const unsigned char *val)
{
	struct ms_server *srv = wk->srv;
	int rc;
	if (!store_table_max_value(srv->store, r->table)) {
		rep_status(wk, &wk->rep, r, LOTUS_ENOTABLE, 0);
		return;
	}
	if (srv->log && op_mode(r->op) == LOCK_X && (rc = srv->hooks.durable_refuses(srv)) != 0) {
		rep_status(wk, &wk->rep, r, rc, 0);
		return;
	}
	lock_txn_t *txn = lockop_txn(wk, c, r);
	if (!txn) {
		rep_status(wk, &wk->rep, r, -ENOMEM, 0);
		return;
	}
	int limited;
	enum cc_proto cc = park_cc(wk, c, r->cc, &limited);
	/* the key's hash: the lookup phases' (the store's index uses the lock
	 * table's hash function), else computed here */
	const struct ms_amac *a = wk->amac_cur;
	uint64_t kh = a && a->token ? a->token : lotus_key_hash(key, r->key_len);
	struct ms_pending *p;
	/* the request's own protocol: a limited one (park_cc) is NO_WAIT here
	 * only so that it does not park, and must not read fast */
	if (op_mode(r->op) == LOCK_S && r->cc == CC_NO_WAIT &&
	    lock_read_fast(srv->locks, txn, r->table, kh) == 0) {
		/* a fast read (lock.c) never parks on a lock: no pending entry,
		 * unless its page must be read in first */
		if (ms_miss_on(wk) && (p = pending_get(wk, c, txn)) != NULL) {
			lock_txn_hold(txn);      /* the pending entry's reference */
			if (lockop_miss_park(wk, p, sender, seq, r, key))
				return;
			lockop_complete(wk, &wk->rep, txn, r, key);
			ms_pending_free(p);      /* and with it that reference */
			return;
		}
		lockop_complete(wk, &wk->rep, txn, r, key);
		return;
	}
	p = pending_get(wk, c, txn);
	if (!p) {
		rep_status(wk, &wk->rep, r, -ENOMEM, 0);
		return;
	}
	lock_txn_hold(txn);   /* the pending entry's reference */
	rc = park_result(wk, lock_acquire_hashed(srv->locks, txn, r->table, key, r->key_len, kh,
						 op_mode(r->op), cc, limited ? NULL : &p->w),
			 limited);
	if (rc == 1) {
		pending_fill(p, sender, seq, r, key);
		pending_park(p);
		return;
	}
	if (rc == 0 && lockop_miss_park(wk, p, sender, seq, r, key))
		return;
	if (rc == 0)
		lockop_complete(wk, &wk->rep, txn, r, key);
	else
		rep_status(wk, &wk->rep, r, rc, 0);
	if (rc && log_enabled(LOG_DEBUG))
		log_debug("txn %llx prio %llx cc %u: %s on key %02x%02x..: %s",
			  (unsigned long long)r->txn_id, (unsigned long long)r->priority, r->cc,
			  wire_op_name(r->op), key[0], key[r->key_len - 1], lotus_strerror(rc));
	ms_pending_free(p);
}

/* ---- SCAN ------------------------------------------------------------------ */

struct scan_collect {
	struct scan_key *keys;
	unsigned n, max;
	const unsigned char *after;  /* WIRE_REQ_F_SCAN_AFTER: skip this key */
	uint16_t after_len;
};

static int scan_collect_cb(void *arg, const unsigned char *key, uint16_t klen, store_loc_t loc)
{
	struct scan_collect *sc = arg;
	(void)loc;
	if (sc->n >= sc->max)
		return 1;
	if (sc->after && klen == sc->after_len && !memcmp(key, sc->after, klen))
		return 0;
	sc->keys[sc->n].klen = klen;
	memcpy(sc->keys[sc->n].key, key, klen);
	sc->n++;
	return 0;
}

/* Lock the remaining candidate keys; returns 1 if parked, 0 when all are
 * locked, or a lock error. */
static int scan_lock_rest(struct ms_worker *wk, struct ms_pending *p)
{
	while (p->scan_next < p->scan_n) {
		struct scan_key *k = &p->scan_keys[p->scan_next];
		int limited;
		enum cc_proto cc = park_cc(wk, p->conn, p->req.cc, &limited);
		atomic_store(&p->state, PEND_PARKED);
		int rc = park_result(wk, lock_acquire(wk->srv->locks, p->txn, p->req.table, k->key,
						      k->klen, LOCK_S, cc, limited ? NULL : &p->w),
				     limited);
		if (rc != 0)
			return rc;
		p->scan_next++;
	}
	return 0;
}

/* A tiered store: read the non-resident pages of rows i.. (up to
 * SCAN_PREFETCH) in one batch before the rows are pinned one by one. */
#define SCAN_PREFETCH 64u
static void scan_prefetch(struct ms_worker *wk, struct ms_pending *p, unsigned i)
{
	uint64_t pages[SCAN_PREFETCH];
	unsigned n = 0;
	for (unsigned j = i; j < p->scan_n && j < i + SCAN_PREFETCH; j++) {
		store_loc_t loc;
		if (!store_get(wk->srv->store, p->req.table, p->scan_keys[j].key,
			       p->scan_keys[j].klen, &loc))
			pages[n++] = store_loc_page(loc);
	}
	store_prefetch(wk->srv->store, pages, n, NULL, NULL);
}

/* All rows are locked: send them (rows deleted meanwhile are skipped).  A
 * reply capped by rows or bytes is flagged and carries the last key it
 * covered, after which the client continues. */
static void scan_reply(struct ms_worker *wk, struct wire_buf *b, struct ms_pending *p)
{
	struct wire_buf rows;
	unsigned n = 0, i;
	const struct scan_key *last = NULL;
	int pf = store_prefetch_enabled(wk->srv->store);   /* tiered only */
	wire_buf_init(&rows);
	for (i = 0; i < p->scan_n; i++) {
		store_loc_t loc;
		struct scan_key *k = &p->scan_keys[i];
		if (pf && i % SCAN_PREFETCH == 0)
			scan_prefetch(wk, p, i);
		if (store_get(wk->srv->store, p->req.table, k->key, k->klen, &loc))
			continue;
		struct store_rec *rec;
		int rc = store_rec_get(wk->srv->store, loc, p->req.table, NULL, 0, &rec);
		if (rc == LOTUS_ENOTFOUND)
			continue;
		if (rc) {             /* a page could not be read in: the scan fails */
			wire_buf_free(&rows);
			rep_status(wk, b, &p->req, rc, 0);
			return;
		}
		if (n && rows.len + sizeof(struct wire_row) + k->klen + rec->value_len > SCAN_MAX_BYTES) {
			store_rec_put(wk->srv->store, loc);
			break;
		}
		struct wire_row row = { .key_len = k->klen, .value_len = rec->value_len, .loc = loc };
		rc = wire_buf_append_row(&rows, &row, k->key, store_rec_value(rec));
		store_rec_put(wk->srv->store, loc);
		if (rc != 0) {
			wire_buf_free(&rows);
			rep_status(wk, b, &p->req, -ENOMEM, 0);
			return;
		}
		n++;
		last = k;
	}
	struct wire_rep rep = { .op = OP_SCAN, .tag = p->req.tag, .txn_id = p->req.txn_id,
				.value_len = (uint32_t)rows.len, .arg = n };
	if (i < p->scan_n) {            /* stopped early: continue after the last row */
		rep.flags = WIRE_REP_F_SCAN_MORE;
	} else if (p->scan_capped && n < p->req.arg) {
		/* fewer rows than asked (the row cap, or keys deleted before their
		 * lock was granted) while more keys may follow: continue after the
		 * last key collected */
		rep.flags = WIRE_REP_F_SCAN_MORE;
		last = &p->scan_keys[p->scan_n - 1];
	}
	int more = rep.flags != 0;
	if (wk->srv->log) {   /* rows and gaps alike: the whole log tail */
		uint64_t dep = wk->srv->hooks.read_dep(wk->srv, p->req.table, NULL, 0);
		if (dep) {
			lock_txn_dep_note(p->txn, dep);
			rep.flags |= WIRE_REP_F_DEP;
		}
	}
	if (more && !last) {       /* nothing fit at all */
		rep_status(wk, b, &p->req, LOTUS_ETOOBIG, 0);
	} else {
		rep.key_len = more ? last->klen : 0;
		if (!rep_put(wk, b, &rep, more ? last->key : NULL, rows.data, 0))
			rep_status(wk, b, &p->req, LOTUS_ETOOBIG, 0);
	}
	wire_buf_free(&rows);
}

static void h_scan(struct ms_worker *wk, struct ms_conn *c, uint32_t sender, uint64_t seq,
		   const struct wire_req *r, const unsigned char *key, const unsigned char *val)
{
	struct ms_server *srv = wk->srv;
	unsigned max = (unsigned)MIN(r->arg, SCAN_MAX_ROWS);
	if (!store_table_max_value(srv->store, r->table)) {
		rep_status(wk, &wk->rep, r, LOTUS_ENOTABLE, 0);
		return;
	}
	lock_txn_t *txn = lock_txn_get(srv->locks, r->txn_id, r->priority, c);
	struct ms_pending *p = txn ? pending_take(wk, c, txn, sender, seq, r, key) : NULL;
	struct scan_collect sc = { .keys = calloc(max ? max : 1, sizeof(struct scan_key)), .max = max };
	if (!p || !sc.keys) {
		free(sc.keys);
		if (p)
			ms_pending_free(p);
		else if (txn)
			lock_txn_put(srv->locks, txn);
		rep_status(wk, &wk->rep, r, -ENOMEM, 0);
		return;
	}
	if (r->flags & WIRE_REQ_F_SCAN_AFTER) {
		sc.after = key;
		sc.after_len = r->key_len;
	}
	/* the index counts the skipped key as visited */
	store_scan(srv->store, r->table, key, r->key_len, max + (sc.after != NULL),
		   scan_collect_cb, &sc);
	p->scan_keys = sc.keys;
	p->scan_n = sc.n;
	p->scan_capped = sc.n > 0 && sc.n == max;  /* the index may hold more */
	int rc = scan_lock_rest(wk, p);
	if (rc == 1) {
		pending_park(p);
		return;
	}
	if (rc == 0)
		scan_reply(wk, &wk->rep, p);
	else
		rep_status(wk, &wk->rep, r, rc, 0);
	ms_pending_free(p);
}

/* ---- COMMIT / ABORT ---------------------------------------------------- */

/* Every write must be covered by an X lock of this txn and fit its table. */
static int commit_check(struct ms_server *srv, lock_txn_t *txn, const struct wire_req *r,
			const unsigned char *val)
{
	struct wire_iter it;
	const struct wire_write *w;
	const unsigned char *k, *v;
	int rc;
	wire_iter_bytes(&it, val, r->value_len, (unsigned)r->arg);
	while ((rc = wire_next_write(&it, &w, &k, &v)) == 1) {
		uint32_t maxv = store_table_max_value(srv->store, w->table);
		if (!maxv)
			return LOTUS_ENOTABLE;
		if (w->op != OP_DELETE && w->value_len > maxv)
			return LOTUS_ETOOBIG;
		if (!lock_held(srv->locks, txn, w->table, k, w->key_len, LOCK_X))
			return LOTUS_ESTATE;
	}
	return rc;
}

int ms_write_apply(store_t *st, store_resv_t **rp, const struct wire_write *w,
		   const unsigned char *k, const unsigned char *v)
{
	store_loc_t loc;
	if (w->op == OP_DELETE) {
		int rc = store_delete_resv(st, rp, w->table, k, w->key_len);
		return rc == LOTUS_ENOTFOUND ? 0 : rc;
	}
	if (w->hint) {
		struct store_rec *rec;
		int rc = store_rec_get(st, w->hint, w->table, k, w->key_len, &rec);
		if (rc == 0) {
			rc = store_update(st, w->hint, v, w->value_len);
			store_rec_put(st, w->hint);
			return rc;
		}
		/* stale, or its page unreadable: the index decides */
	}
	if (store_get(st, w->table, k, w->key_len, &loc) == 0)
		return store_update(st, loc, v, w->value_len);
	int rc = store_insert_resv(st, rp, w->table, k, w->key_len, v, w->value_len, &loc);
	if (rc == LOTUS_EEXISTS)   /* a writeback (no lock) inserted it meanwhile */
		rc = store_update(st, loc, v, w->value_len);
	return rc;
}

int ms_writes_reserve(store_t *st, const unsigned char *wl, size_t len, unsigned count,
		      store_resv_t **rp)
{
	struct wire_iter it;
	const struct wire_write *w;
	const unsigned char *k, *v;
	unsigned need[STORE_MAX_TABLES];
	int rc = 0, any = 0, tiered = store_tiered(st);
	wire_iter_bytes(&it, wl, len, count);
	while (it.p < it.end && (rc = wire_next_write(&it, &w, &k, &v)) == 1) {
		if (w->key_len == 0 || w->key_len > STORE_KEY_MAX || w->table >= STORE_MAX_TABLES)
			continue;   /* fails its own check */
		store_loc_t loc;
		int r;
		if (w->op == OP_DELETE) {
			/* needs no slot; tiered: keep its page in for the apply */
			if (tiered && store_get(st, w->table, k, w->key_len, &loc) == 0 &&
			    (r = store_resv_pin(st, rp, loc)) != 0 && r != LOTUS_ENOTFOUND)
				return r;
			continue;
		}
		if (w->hint && !tiered && store_rec_at(st, w->hint, w->table, k, w->key_len))
			continue;
		r = store_get(st, w->table, k, w->key_len, &loc);
		if (r == 0) {
			/* present: tiered, its page stays pinned (resident) until the
			 * reservation is released, after the apply */
			if (tiered && (r = store_resv_pin(st, rp, loc)) != 0 && r != LOTUS_ENOTFOUND)
				return r;   /* unreadable page: refused before logging */
			continue;
		}
		if (r != LOTUS_ENOTFOUND)
			continue;
		if (!any++)
			memset(need, 0, sizeof(need));
		need[w->table]++;
	}
	if (rc < 0)
		return rc;
	for (unsigned t = 0; any && t < STORE_MAX_TABLES; t++) {
		unsigned have = need[t] ? store_reserved(*rp, (uint16_t)t) : 0;
		if (need[t] > have && (rc = store_reserve(st, rp, (uint16_t)t, need[t] - have)) != 0)
			return rc;
	}
	return any && tiered ? store_resv_pin_slots(st, rp) : 0;
}

int ms_commit_apply(struct ms_server *srv, const struct wire_req *r, const unsigned char *val,
		    store_resv_t **rp)
{
	struct wire_iter it;
	const struct wire_write *w;
	const unsigned char *k, *v;
	int rc, first_err = 0;
	wire_iter_bytes(&it, val, r->value_len, (unsigned)r->arg);
	while ((rc = wire_next_write(&it, &w, &k, &v)) == 1) {
		rc = ms_write_apply(srv->store, rp, w, k, v);
		if (rc && !first_err)
			first_err = rc;
	}
	return first_err;
}

/* The txn's slot reservation (taken from its lock entry), topped up to
 * everything the COMMIT's writes need.  Nothing is applied or logged unless
 * this returned 0; on error *rp still holds what must be released. */
static int commit_reserve(struct ms_server *srv, lock_txn_t *txn, const struct wire_req *r,
			  const unsigned char *val, store_resv_t **rp)
{
	*rp = lock_txn_take_user(txn);
	if (r->arg == 0)
		return 0;
	int rc = ms_writes_reserve(srv->store, val, r->value_len, (unsigned)r->arg, rp);
	if (rc == LOTUS_ENOSPACE)
		log_debug("commit of txn %llx refused: its %llu writes do not fit",
			  (unsigned long long)r->txn_id, (unsigned long long)r->arg);
	return rc;
}

/* Phase two of a 2PC (a COMMIT without writes) whose txn is no longer
 * prepared here: the resolver took it first (its client was slow), and the
 * client must hear what it decided - LOTUS_EABORTED if that was abort, never
 * a 0 for a txn whose writes were dropped.  0 otherwise (committed, or a
 * read-only commit that was never prepared). */
static int commit_decided(struct ms_server *srv, const struct wire_req *r)
{
	if (srv->hooks.prepared_outcome(srv, r->txn_id) != MS_OUT_ABORT)
		return 0;
	log_info("the COMMIT of txn %llx came after the resolver aborted it",
		 (unsigned long long)r->txn_id);
	return LOTUS_EABORTED;
}

static void h_commit(struct ms_worker *wk, struct ms_conn *c, uint32_t sender, uint64_t seq,
		     const struct wire_req *r, const unsigned char *key, const unsigned char *val)
{
	struct ms_server *srv = wk->srv;
	store_resv_t *rv = NULL;
	if (txn_foreign(wk, c, r))
		return;
	lock_txn_t *txn = lock_txn_find(srv->locks, r->txn_id);
	if (!txn) {
		rep_status(wk, &wk->rep, r, r->arg ? LOTUS_ESTATE : commit_decided(srv, r), 0);
		return;
	}
	int rc = 0, was_committing = lock_txn_status(txn) == TXN_COMMITTING;
	if (!was_committing)
		rc = lock_txn_begin_commit(srv->locks, txn);
	if (r->flags & WIRE_REQ_F_COMMITTING) {
		/* the WOUND_WAIT round: the txn is now immune to wounds; keep its locks */
		if (rc == 0 && r->arg)
			rc = LOTUS_EPROTO;   /* writes come with OP_PREPARE or the COMMIT */
		if (rc)
			lock_txn_release(srv->locks, txn);
		else
			lock_txn_put(srv->locks, txn);
		rep_status(wk, &wk->rep, r, rc, 0);
		return;
	}
	if (rc == 0 && r->arg == 0 && srv->hooks.prepared_decide(srv, r->txn_id, 1, &rc)) {
		lock_txn_release(srv->locks, txn);   /* phase two of a 2PC */
		rep_status(wk, &wk->rep, r, rc, 0);
		return;
	}
	if (rc == 0 && r->arg == 0 && was_committing)
		rc = commit_decided(srv, r);   /* the resolver was first */
	if (rc == 0)
		rc = commit_check(srv, txn, r, val);
	if (rc == 0)   /* all or nothing: every slot the writes need, first */
		rc = commit_reserve(srv, txn, r, val, &rv);
	if (rc == 0 && srv->log) {
		uint64_t lsn;
		rc = srv->hooks.commit_logged(srv, r, val, &rv, lock_txn_dep(txn), &lsn);
		store_resv_release(srv->store, rv);
		lock_txn_release(srv->locks, txn);
		wk->srv->hooks.reply_durable(wk, seq, r, rc, 0, lsn);
		return;
	}
	if (rc == 0) {
		rc = ms_commit_apply(srv, r, val, &rv);
		if (rc)   /* cannot happen: checked and reserved above */
			log_error("commit of txn %llx applied partially: %s",
				  (unsigned long long)r->txn_id, lotus_strerror(rc));
	}
	store_resv_release(srv->store, rv);
	lock_txn_release(srv->locks, txn);
	rep_status(wk, &wk->rep, r, rc, 0);
}

/* Two-phase commit, phase one: the txn becomes COMMITTING (it can no longer
 * be wounded), its writes are checked against its X locks and held in the
 * prepared table (logged first on a durable server), not applied.  A refusal
 * releases its locks here; the client then aborts everywhere. */
static void h_prepare(struct ms_worker *wk, struct ms_conn *c, uint32_t sender, uint64_t seq,
		      const struct wire_req *r, const unsigned char *key, const unsigned char *val)
{
	struct ms_server *srv = wk->srv;
	if (txn_foreign(wk, c, r))
		return;
	lock_txn_t *txn = lock_txn_find(srv->locks, r->txn_id);
	uint64_t lsn = 0;
	if (!txn) {
		rep_status(wk, &wk->rep, r, LOTUS_ESTATE, 0);
		return;
	}
	int rc = lock_txn_status(txn) == TXN_COMMITTING ? 0 : lock_txn_begin_commit(srv->locks, txn);
	store_resv_t *rv = NULL;
	if (rc == 0)
		rc = commit_check(srv, txn, r, val);
	if (rc == 0)   /* the space its writes need, before it is held or logged */
		rc = commit_reserve(srv, txn, r, val, &rv);
	if (rc == 0)   /* on success the prepared entry owns the reservation */
		rc = srv->hooks.prepare_logged(srv, r, val, &rv, &lsn);
	if (rc) {
		store_resv_release(srv->store, rv);
		lock_txn_release(srv->locks, txn);
		rep_status(wk, &wk->rep, r, rc, 0);
		return;
	}
	/* Past its lock point: its S locks go now, before the vote is durable;
	 * its X locks wait for the decision (see the opening comment). */
	lock_txn_release_shared(srv->locks, txn);
	lock_txn_put(srv->locks, txn);
	wk->srv->hooks.reply_durable(wk, seq, r, 0, 0, lsn);
}

static void h_abort(struct ms_worker *wk, struct ms_conn *c, uint32_t sender, uint64_t seq,
		    const struct wire_req *r, const unsigned char *key, const unsigned char *val)
{
	if (txn_foreign(wk, c, r))
		return;
	lock_txn_t *txn = lock_txn_find(wk->srv->locks, r->txn_id);
	int rc = 0;
	/* a prepared txn: log the abort (durable servers), drop its writes -
	 * unless this server answered PREPARED for it already: then it stays
	 * prepared, with its locks, for the resolver (LOTUS_ESTATE) */
	int decided = wk->srv->hooks.prepared_decide(wk->srv, r->txn_id, 0, &rc);
	if (decided && rc == LOTUS_ESTATE) {
		if (txn)
			lock_txn_put(wk->srv->locks, txn);
		rep_status(wk, &wk->rep, r, rc, 0);
		return;
	}
	if (txn)
		lock_txn_release(wk->srv->locks, txn);
	/* replicated: the abort of a prepared txn is answered once its DECIDE
	 * is in the backups' logs, or a successor could still commit it from
	 * the PREPARE it copied (docs/replication.md) */
	if (decided && wk->srv->repl && wk->srv->durability == LOTUS_DUR_SYNC) {
		wk->srv->hooks.reply_durable(wk, seq, r, 0, 0, redo_next_lsn(wk->srv->log));
		return;
	}
	rep_status(wk, &wk->rep, r, 0, 0);
}

/* ---- administration ------------------------------------------------------ */

static void h_create_table(struct ms_worker *wk, struct ms_conn *c, uint32_t sender,
			   uint64_t seq, const struct wire_req *r, const unsigned char *key,
			   const unsigned char *val)
{
	char name[65];
	uint16_t id = 0;
	uint64_t lsn = 0;
	memcpy(name, key, r->key_len);
	name[r->key_len] = 0;
	if (r->flags & WIRE_REQ_F_TABLE_OPEN) {   /* a client that does not know its size */
		uint32_t maxv = 0;
		int rc = r->key_len > 64 ? LOTUS_ENOTABLE   /* no table has so long a name */
				 : store_table_find(wk->srv->store, name, &id, &maxv);
		rep_status(wk, &wk->rep, r, rc, rc ? 0 : id | (uint64_t)maxv << 32);
		return;
	}
	int rc = r->arg > STORE_VALUE_MAX ? LOTUS_ETOOBIG
		 : !wk->srv->log ? store_table_create(wk->srv->store, name, (uint32_t)r->arg, &id)
		 : wk->srv->hooks.table_create_logged(wk->srv, name, (uint32_t)r->arg, &id, &lsn);
	if (lsn)
		wk->srv->hooks.reply_durable(wk, seq, r, rc, id, lsn);
	else
		rep_status(wk, &wk->rep, r, rc, id);
}

static void h_stats(struct ms_worker *wk, struct ms_conn *c, uint32_t sender, uint64_t seq,
		    const struct wire_req *r, const unsigned char *key, const unsigned char *val)
{
	struct ms_server *srv = wk->srv;
	struct lock_stats ls;
	struct store_stats ss;
	uint64_t bad = 0, reqs = 0, hits = 0, stale = 0, cpu_ns = 0, pref = 0, bref = 0;
	uint64_t leases = 0, ghits = 0, ifinds = 0, mreps = 0, msleeps = 0;
	struct net_stats ns = { 0 };
	char buf[8192];   /* a tiered server adds its page writers' figures */
	lock_table_stats(srv->locks, &ls);
	store_stats(srv->store, &ss);
	for (unsigned i = 0; i < srv->nworkers; i++) { /* racy reads of counters: fine */
		bad += srv->workers[i].bad_msgs;
		reqs += srv->workers[i].reqs;
		hits += srv->workers[i].hint_hits;
		stale += srv->workers[i].hint_stale;
		ghits += srv->workers[i].guess_hits;
		ifinds += srv->workers[i].index_finds;
		mreps += srv->workers[i].miss_reply_msgs;
		msleeps += srv->workers[i].miss_sleeps;
		struct timespec ts;   /* the worker threads' CPU time, for per-request cost */
		if (atomic_load(&srv->workers[i].cpu_clock_ok) &&
		    clock_gettime(srv->workers[i].cpu_clock, &ts) == 0)
			cpu_ns += (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
		pref += srv->workers[i].parked_refused;
		bref += srv->workers[i].bytes_refused;
		leases += srv->workers[i].leases_lost;
		struct net_stats one;
		net_worker_stats(srv->workers[i].net, &one);
		net_stats_add(&ns, &one);
	}
	/* pool: pages handed out so far (tiered: logical pages, some of them on
	 * disk) against the pool's size */
	uint64_t used = ss.pages_used * store_page_size(srv->store);
	int n = snprintf(buf, sizeof(buf),
		"{\"id\":%u,\"pid\":%d,\"tables\":%u,\"pool_used_bytes\":%llu,"
		"\"pool_free_bytes\":%llu,\"lease_losses\":%llu,\"requests\":%llu,\"workers\":%u,\"cpu_ns\":%llu,"
		"\"bad_msgs\":%llu,\"hint_hits\":%llu,"
		"\"hint_stale\":%llu,\"guess_hits\":%llu,\"index_finds\":%llu,\"miss_reply_msgs\":%llu,\"miss_sleeps\":%llu,\"records\":%llu,\"pool_bytes\":%llu,\"index_bytes\":%llu,"
		"\"hash_tables\":%llu,\"hash_entries\":%llu,"
		"\"prepared\":%u,"
		"\"lock\":{\"acquires\":%llu,\"waits\":%llu,\"wait_ns\":%llu,"
		"\"grants_after_wait\":%llu,\"rejects\":%llu,\"preemptions\":%llu,"
		"\"preempted_aborts\":%llu,\"upgrades\":%llu,\"fast_reads\":%llu},"
		"\"limits\":{\"max_parked\":%u,\"parked_refused\":%llu,\"max_conn_bytes\":%llu,"
		"\"bytes_refused\":%llu,\"rndv_deferred\":%llu,\"dispatch_deferred\":%llu,"
		"\"bytes_closed\":%llu,\"max_msg\":%u,\"too_big_closed\":%llu}}",
		srv->id, (int)getpid(), store_table_count(srv->store), (unsigned long long)used,
		(unsigned long long)(used < ss.pool_bytes ? ss.pool_bytes - used : 0),
		(unsigned long long)leases, (unsigned long long)reqs, srv->nworkers, (unsigned long long)cpu_ns,
		(unsigned long long)bad,
		(unsigned long long)hits, (unsigned long long)stale,
		(unsigned long long)ghits, (unsigned long long)ifinds, (unsigned long long)mreps,
		(unsigned long long)msleeps,
		(unsigned long long)ss.records, (unsigned long long)ss.pool_bytes,
		(unsigned long long)ss.index_bytes, (unsigned long long)ss.hash_tables,
		(unsigned long long)ss.hash_entries, atomic_load(&srv->nprep),
		(unsigned long long)ls.acquires,
		(unsigned long long)ls.waits, (unsigned long long)ls.wait_ns,
		(unsigned long long)ls.grants_after_wait, (unsigned long long)ls.rejects,
		(unsigned long long)ls.preemptions, (unsigned long long)ls.preempted_aborts,
		(unsigned long long)ls.upgrades, (unsigned long long)ls.fast_reads,
		srv->max_parked, (unsigned long long)pref,
		(unsigned long long)srv->max_conn_bytes, (unsigned long long)bref,
		(unsigned long long)ns.rndv_deferred, (unsigned long long)ns.dispatch_deferred,
		(unsigned long long)ns.bytes_closed, WIRE_MAX_MSG,
		(unsigned long long)ns.too_big_closed);
	if (srv->log && n > 0 && (size_t)n < sizeof(buf)) {   /* before the closing brace */
		n--;
		n += srv->hooks.durable_stats_json(srv, buf + n, sizeof(buf) - (size_t)n);
		if ((size_t)n < sizeof(buf) - 1) {
			buf[n++] = '}';
			buf[n] = 0;
		}
		n = MIN(n, (int)sizeof(buf) - 1);
	}
	if (srv->repl && n > 0 && (size_t)n < sizeof(buf)) {   /* replication */
		int k = srv->hooks.repl_stats_json(srv, buf + n - 1, sizeof(buf) - (size_t)n);
		if (k > 0 && (size_t)k < sizeof(buf) - (size_t)n) {
			n += k;
			buf[n - 1] = '}';
			buf[n] = 0;
		}
	}
	if (srv->listener && n > 0 && (size_t)n < sizeof(buf)) {   /* the door's counters */
		struct door_stats ds;
		unsigned clients;
		net_listener_stats(srv->listener, &ds, &clients);
		int k = snprintf(buf + n - 1, sizeof(buf) - (size_t)n + 1,
			",\"door\":{\"clients\":%u,\"max_clients\":%u,\"accepted\":%llu,"
			"\"welcomed\":%llu,\"auth_failed\":%llu,\"bad_frames\":%llu,"
			"\"timed_out\":%llu,\"refused_full\":%llu,\"dropped\":%llu,"
			"\"bad_addr\":%llu,\"evicted\":%llu}}",
			clients, srv->max_clients, (unsigned long long)ds.accepted,
			(unsigned long long)ds.welcomed, (unsigned long long)ds.auth_failed,
			(unsigned long long)ds.bad_frames, (unsigned long long)ds.timed_out,
			(unsigned long long)ds.refused_full, (unsigned long long)ds.dropped,
			(unsigned long long)ds.bad_addr, (unsigned long long)ds.evicted);
		if (k > 0 && (size_t)k < sizeof(buf) - (size_t)n + 1) {
			n += k - 1;
		} else {   /* did not fit: leave the object as it was */
			buf[n - 1] = '}';
			buf[n] = 0;
		}
	}
	struct wire_rep rep = { .op = OP_STATS, .tag = r->tag, .txn_id = r->txn_id,
				.value_len = (uint32_t)(n > 0 ? n : 0) };
	ms_rep_add(wk, &wk->rep, &rep, buf);
}

static void h_writeback(struct ms_worker *wk, struct ms_conn *c, uint32_t sender,
			uint64_t seq, const struct wire_req *r, const unsigned char *key,
			const unsigned char *val)
{
	struct wire_write w = { .op = OP_LOCK_X, .table = r->table, .key_len = r->key_len,
				.value_len = r->value_len, .hint = r->hint };
	uint32_t maxv = store_table_max_value(wk->srv->store, r->table);
	uint64_t lsn = 0;
	int rc = !maxv ? LOTUS_ENOTABLE : r->value_len > maxv ? LOTUS_ETOOBIG
		 : !wk->srv->log ? ms_write_apply(wk->srv->store, NULL, &w, key, val)
		 : wk->srv->hooks.writeback_logged(wk, &w, r->txn_id, key, val, &lsn);
	if (lsn)
		wk->srv->hooks.reply_durable(wk, seq, r, rc, 0, lsn);
	else
		rep_status(wk, &wk->rep, r, rc, 0);
}

/* Another memory server asks what became of a prepared txn (termination.c). */
static void h_txn_status(struct ms_worker *wk, struct ms_conn *c, uint32_t sender,
			 uint64_t seq, const struct wire_req *r, const unsigned char *key,
			 const unsigned char *val)
{
	uint64_t lsn = 0;
	int answer = wk->srv->hooks.txn_status(wk->srv, r->txn_id, &lsn);
	int rc = answer ? 0 : LOTUS_EREADONLY;
	if (lsn)   /* a refusal counts once it is durable */
		wk->srv->hooks.reply_durable(wk, seq, r, rc, (uint64_t)answer, lsn);
	else
		rep_status(wk, &wk->rep, r, rc, (uint64_t)answer);
}

/* The one-sided baseline: where the table's region is (os_region.c). */
static void h_os_attach(struct ms_worker *wk, struct ms_conn *c, uint32_t sender,
			uint64_t seq, const struct wire_req *r, const unsigned char *key,
			const unsigned char *val)
{
	void *info = NULL;
	size_t len = 0;
	char name[65];
	uint16_t id = 0;
	uint32_t maxv, grow_from = 0;
	snprintf(name, sizeof(name), "%.*s", (int)r->key_len, (const char *)key);
	if (r->value_len == sizeof(grow_from))   /* the chunks the client knows (os_layout.h) */
		memcpy(&grow_from, val, sizeof(grow_from));
	int rc = r->key_len > 64 ? LOTUS_ENOTABLE   /* no table has so long a name */
				 : store_table_find(wk->srv->store, name, &id, &maxv);
	if (rc == 0)
		rc = os_regions_attach(wk->srv->onesided, id, grow_from, &info, &len);
	struct wire_rep rep = { .op = r->op, .status = rc, .tag = r->tag, .txn_id = r->txn_id,
				.value_len = (uint32_t)len };
	ms_rep_add(wk, &wk->rep, &rep, info);
	free(info);
}

/* DEX's offloading: a lookup pushed down to this server's CPU (dex_server.c). */
static void h_dex_lookup(struct ms_worker *wk, struct ms_conn *c, uint32_t sender,
			 uint64_t seq, const struct wire_req *r, const unsigned char *key,
			 const unsigned char *val)
{
	void *out = NULL;
	size_t len = 0;
	char name[65];
	uint16_t id = 0;
	uint32_t maxv;
	snprintf(name, sizeof(name), "%.*s", (int)r->key_len, (const char *)key);
	int rc = r->key_len > 64 ? LOTUS_ENOTABLE
				 : store_table_find(wk->srv->store, name, &id, &maxv);
	if (rc == 0)
		rc = dex_region_lookup(wk->srv->onesided, id, r->arg, &out, &len);
	struct wire_rep rep = { .op = r->op, .status = rc, .tag = r->tag, .txn_id = r->txn_id,
				.value_len = (uint32_t)len };
	ms_rep_add(wk, &wk->rep, &rep, out);
	free(out);
}

/* `lotus backup` (backup.c, through the hook). */
static void h_backup(struct ms_worker *wk, struct ms_conn *c, uint32_t sender, uint64_t seq,
		     const struct wire_req *r, const unsigned char *key, const unsigned char *val)
{
	wk->srv->hooks.backup_req(wk, seq, r, key);
}

/* Replicated: may this server answer a client now?  A primary within its
 * lease from ZooKeeper (srv->serve_until_ns). */
static int repl_may_serve(struct ms_server *srv)
{
	return atomic_load_explicit(&srv->role, memory_order_relaxed) == MS_ROLE_PRIMARY &&
	       clock_now_ns() <= atomic_load_explicit(&srv->serve_until_ns, memory_order_relaxed);
}

/* Replication (replica.c, through the hook). */
static void h_repl(struct ms_worker *wk, struct ms_conn *c, uint32_t sender, uint64_t seq,
		   const struct wire_req *r, const unsigned char *key, const unsigned char *val)
{
	wk->srv->hooks.repl_req(wk, seq, r, val);
}

static const ms_handler_fn handlers[OP_MAX] = {
	[OP_READ] = h_lockop,   [OP_READ_X] = h_lockop, [OP_LOCK_X] = h_lockop,
	[OP_INSERT] = h_lockop, [OP_DELETE] = h_lockop, [OP_SCAN] = h_scan,
	[OP_COMMIT] = h_commit, [OP_ABORT] = h_abort,   [OP_CREATE_TABLE] = h_create_table,
	[OP_STATS] = h_stats,   [OP_WRITEBACK] = h_writeback, [OP_TXN_STATUS] = h_txn_status,
	[OP_PREPARE] = h_prepare, [OP_OS_ATTACH] = h_os_attach,
	[OP_BACKUP_HOLD] = h_backup, [OP_BACKUP_MARK] = h_backup, [OP_BACKUP_BEGIN] = h_backup,
	[OP_BACKUP_READ] = h_backup, [OP_BACKUP_END] = h_backup,
	[OP_DEX_LOOKUP] = h_dex_lookup,
	[OP_REPL_HELLO] = h_repl, [OP_REPL_SHIP] = h_repl,
};

/* Ops that bring data back or may park.  While the connection has more than
 * max_conn_bytes in flight (the client does not take its replies as fast as
 * it asks for them: one small message can ask for thousands of 64 KiB
 * values), they are refused with LOTUS_ELIMIT.  The others (COMMIT, ABORT,
 * PREPARE, WRITEBACK, ...) always run: they end transactions and free. */
static int op_limited(unsigned op)
{
	return op == OP_READ || op == OP_READ_X || op == OP_LOCK_X || op == OP_INSERT ||
	       op == OP_DELETE || op == OP_SCAN || op == OP_STATS;
}

/* The lookup phases of a message's requests (AMAC: Kocberber et al.,
 * VLDB'15), before any is handled: first hash every point request's key and
 * prefetch its hash bucket, then read each bucket and prefetch the record it
 * names, so that the misses of all the requests overlap instead of coming
 * one after another.  Then ms_handle_req does each request as before (lock,
 * copy, reply), and ms_find tries the record found here first, checked by
 * key and generation as a client's hint is.  Requests with a hint (their
 * record is known) and the other ops skip the phases.  A message goes
 * through them MS_AMAC_MAX requests at a time (amac_window): a window is
 * about as many misses as a core keeps in flight, and what it prefetches is
 * still in the cache when its requests are handled. */
static void amac_window(struct ms_worker *wk)
{
	store_t *st = wk->srv->store;
	const struct wire_req *r;
	const unsigned char *k, *v;
	unsigned n = 0;
	wk->amac_n = wk->amac_i = 0;
	while (n < MS_AMAC_MAX && wire_next_req(&wk->amac_it, &r, &k, &v) == 1) {
		struct ms_amac *a = &wk->amac[n++];
		a->r = r;
		a->k = k;
		a->v = v;
		a->guess = 0;
		a->token = 0;
		a->pf.n = 0;
		a->stage = AMAC_NONE;
		if (r->hint || (r->op != OP_READ && r->op != OP_READ_X && r->op != OP_LOCK_X &&
				r->op != OP_INSERT && r->op != OP_DELETE))
			continue;
		a->token = store_lookup_prefetch(st, r->table, k, r->key_len);
		a->stage = AMAC_HASHED;
		if (a->token && r->op == OP_READ)
			lock_prefetch(wk->srv->locks, r->table, a->token);
	}
	for (unsigned i = 0; i < n; i++) {
		struct ms_amac *a = &wk->amac[i];
		if (a->stage != AMAC_HASHED)
			continue;
		a->guess = store_lookup_guess(st, a->r->table, a->token,
					      a->r->op == OP_READ ? &a->pf : NULL);
		a->stage = AMAC_GUESSED;
	}
	wk->amac_n = n;
	wk->amac_more = n == MS_AMAC_MAX;
}

/* The message's next request, from the phases' parse (ms_handle_req
 * takes it as amac_cur); the next window when this one is used up. */
static int ms_next_req(struct ms_worker *wk, const struct wire_req **r, const unsigned char **k,
		       const unsigned char **v)
{
	if (wk->amac_i == wk->amac_n) {
		if (!wk->amac_more)
			return 0;
		amac_window(wk);
		if (!wk->amac_n)
			return 0;
	}
	const struct ms_amac *a = &wk->amac[wk->amac_i];
	if (wk->amac_i + MS_VALUE_AHEAD < wk->amac_n)
		store_pf_issue(&a[MS_VALUE_AHEAD].pf);
	*r = a->r;
	*k = a->k;
	*v = a->v;
	return 1;
}

static void ms_msg_begin(struct ms_worker *wk, const void *data, size_t len)
{
	lockop_txn_drop(wk);
	wire_iter_init(&wk->amac_it, data, len);
	amac_window(wk);
	wk->msg_left = ((const struct wire_hdr *)data)->count;
}

static void ms_handle_req(struct ms_worker *wk, struct ms_conn *c, uint32_t sender, uint64_t seq,
		   const struct wire_req *r, const unsigned char *key, const unsigned char *val)
{
	/* ms_next_req handed out amac[amac_i] (and windowed a long message) */
	wk->amac_cur = NULL;
	if (wk->amac_i < wk->amac_n && wk->amac[wk->amac_i].r == r)
		wk->amac_cur = &wk->amac[wk->amac_i++];
	if (wk->msg_left)
		wk->msg_left--;
	wk->reqs++;
	if (wk->srv->max_conn_bytes && op_limited(r->op) &&
	    net_conn_inflight(c->nc) + wk->rep.len > wk->srv->max_conn_bytes) {
		wk->bytes_refused++;
		rep_status(wk, &wk->rep, r, LOTUS_ELIMIT, 0);
	} else if (r->op >= OP_MAX || !handlers[r->op] || r->cc > CC_WOUND_WAIT) {
		/* wire_msg_check has vetted op and lengths; belt and braces */
		rep_status(wk, &wk->rep, r, LOTUS_EPROTO, 0);
	} else if (atomic_load_explicit(&wk->srv->role, memory_order_relaxed) != MS_ROLE_SOLO &&
		   r->op != OP_STATS && handlers[r->op] != h_repl && !repl_may_serve(wk->srv)) {
		/* a backup (or a deposed primary) serves no client: the client
		 * asks the coordinator for the partition's primary; a primary
		 * that has not heard from ZooKeeper for half a session pauses */
		rep_status(wk, &wk->rep, r,
			   atomic_load(&wk->srv->role) == MS_ROLE_PRIMARY ? LOTUS_EFAILOVER
									  : LOTUS_EUNAVAIL, 0);
	} else {
		if (handlers[r->op] != h_lockop)
			lockop_txn_drop(wk);
		handlers[r->op](wk, c, sender, seq, r, key, val);
	}
	if (!wk->msg_left)   /* the message's last request */
		lockop_txn_drop(wk);
	wk->amac_cur = NULL;
}

/* Owner thread: a parked request was granted (result 0) or its txn wounded. */
static void pending_reply(struct ms_worker *wk, struct ms_pending *p, int rc);
static void pending_answer(struct ms_worker *wk, struct ms_pending *p, int rc,
			   struct wire_buf *b);

static void ms_resume(struct ms_worker *wk, struct ms_pending *p)
{
	struct ms_conn *c = p->conn;
	int rc = p->result;
	pending_unlink(p);
	if (c->closed)
		goto out;
	if (rc == 0 && p->req.op == OP_SCAN) {
		p->scan_next++;
		rc = scan_lock_rest(wk, p);
		if (rc == 1) {
			pending_park(p);  /* parked again on the next key */
			c->refs--;        /* pending_park took a second reference */
			return;
		}
	}
	if (rc == 0 && p->req.op != OP_SCAN && ms_miss_on(wk)) {
		uint64_t page = lockop_page(wk, &p->req, p->key);
		if (page && (ms_miss_busy(wk) || !store_page_resident(wk->srv->store, page)) &&
		    ms_miss_park(wk, page, p)) {
			pending_park(p);  /* granted: now it waits for its page */
			c->refs--;        /* pending_park took a second reference */
			return;
		}
	}
	pending_reply(wk, p, rc);
	return;
out:
	ms_pending_free(p);
	ms_conn_unref(c);
}

/* Owner thread: p's page was read in (res 0) or its read failed.
 * The requests one miss poll resumes are answered together: their replies
 * gather in one message per connection (c->resumed), sent by
 * ms_miss_resumed when the poll ends.  A client matches replies by tag, not
 * by message, so replies to several request messages may share one; the
 * reads that completed in one reap then cost one send, not one each. */
static void ms_miss_resume(struct ms_worker *wk, struct ms_pending *p, int res)
{
	struct ms_conn *c = p->conn;
	pending_unlink(p);
	if (c->closed || (c->broken && c->resumed_on)) {
		/* a gathered reply was lost (no memory): the connection closes
		 * when the poll ends, and the client learns its requests are lost */
		ms_pending_free(p);
		ms_conn_unref(c);
		return;
	}
	if (!c->resumed_on) {
		wire_buf_init(&c->resumed);
		if (wire_buf_begin(&c->resumed, WIRE_REP, wk->srv->id, p->seq) != 0) {
			wire_buf_free(&c->resumed);
			pending_reply(wk, p, res < 0 ? -EIO : 0);   /* alone, as before */
			return;
		}
		c->resumed_on = 1;
		c->refs++;                      /* the list's */
		c->resumed_next = wk->resumed;
		wk->resumed = c;
	}
	pending_answer(wk, p, res < 0 ? -EIO : 0, &c->resumed);
	ms_pending_free(p);
	ms_conn_unref(c);
}

static void ms_miss_resumed(struct ms_worker *wk)
{
	while (wk->resumed) {
		struct ms_conn *c = wk->resumed;
		wk->resumed = c->resumed_next;
		c->resumed_next = NULL;
		c->resumed_on = 0;
		if (c->resumed.count) {
			ms_send_reply_msg(wk, c, &c->resumed);
			wk->miss_reply_msgs++;
		}
		wire_buf_free(&c->resumed);
		ms_conn_settle(wk, c);
		ms_conn_unref(c);
	}
}

/* Append p's answer to b, the message being built for p's connection: rc,
 * or the op's work.  A full b is sent and begun anew (rep_put). */
static void pending_answer(struct ms_worker *wk, struct ms_pending *p, int rc,
			   struct wire_buf *b)
{
	wk->out_conn = p->conn;
	wk->out_seq = p->seq;
	if (rc != 0)
		rep_status(wk, b, &p->req, rc, 0);
	else if (p->req.op == OP_SCAN)
		scan_reply(wk, b, p);
	else
		lockop_complete(wk, b, p->txn, &p->req, p->key);
	wk->out_conn = NULL;
}

/* Answer p (unlinked, its connection open) in a message of its own. */
static void pending_reply(struct ms_worker *wk, struct ms_pending *p, int rc)
{
	struct ms_conn *c = p->conn;
	struct wire_buf b;
	wire_buf_init(&b);
	if (wire_buf_begin(&b, WIRE_REP, wk->srv->id, p->seq) == 0) {
		pending_answer(wk, p, rc, &b);
		if (b.count)
			ms_send_reply_msg(wk, c, &b);
	} else {
		struct wire_rep lost = { .op = p->req.op, .txn_id = p->req.txn_id };
		wk->out_conn = c;
		rep_lost(wk, &lost);
		wk->out_conn = NULL;
	}
	wire_buf_free(&b);
	ms_conn_settle(wk, c);
	ms_pending_free(p);
	ms_conn_unref(c);
}

void ms_handlers_register(struct ms_server *srv)
{
	srv->hooks.msg_begin = ms_msg_begin;
	srv->hooks.next_req = ms_next_req;
	srv->hooks.handle_req = ms_handle_req;
	srv->hooks.resume = ms_resume;
	srv->hooks.miss_resume = ms_miss_resume;
	srv->hooks.miss_resumed = ms_miss_resumed;
	srv->hooks.conn_drop_pending = ms_conn_drop_pending;
}
