/*
 * lock_txn.c - the transaction status table of the lock manager, transaction
 * release, and the lock counters.
 *
 * The status table maps txn_id -> struct lock_txn in a striped hash table (one
 * latch per bucket; these latches are leaves: nothing else is taken under
 * them).  The table holds one reference to each entry; lock_txn_get/find take
 * one more for the caller.  lock_txn_release closes the txn (under its latch:
 * no grant can reach it afterwards), removes it from the table, releases its
 * locks through lock.c, waits for notifies already in flight for its waiters,
 * and drops the table's and the caller's references.  A txn is freed when its
 * last reference goes.  See lock.c for the status diagram and latch order.
 *
 * Counters live in LOCK_STAT_SLOTS cache-line-sized slots; a thread picks a
 * slot once and adds to it (lock_int.h: plain relaxed stores in a slot of its
 * own, atomic adds in the shared last one), so threads do not share a hot
 * line and the common case has no locked instruction.  lock_table_stats sums
 * the slots.
 */
#include <errno.h>
#include <sched.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "lock/lock_int.h"

atomic_uint lock_next_stat_slot;
_Thread_local unsigned lock_my_stat_slot = UINT32_MAX;

void lock_table_stats(lock_table_t *lt, struct lock_stats *out)
{
	uint64_t sum[ST_N] = { 0 };
	for (unsigned s = 0; s < LOCK_STAT_SLOTS; s++)
		for (int i = 0; i < ST_N; i++)
			sum[i] += atomic_load_explicit(&lt->stats[s].v[i], memory_order_relaxed);
	*out = (struct lock_stats){
		/* a fast read counts only ST_FAST (one add on its path) */
		.acquires = sum[ST_ACQUIRES] + sum[ST_FAST],
		.grants_immediate = sum[ST_IMMEDIATE] + sum[ST_FAST],
		.waits = sum[ST_WAITS], .wait_ns = sum[ST_WAIT_NS],
		.grants_after_wait = sum[ST_AFTER_WAIT], .rejects = sum[ST_REJECTS],
		.preemptions = sum[ST_PREEMPTIONS], .preempted_aborts = sum[ST_PREEMPTED_ABORTS],
		.upgrades = sum[ST_UPGRADES], .txns_active = sum[ST_TXNS],  /* +1/-1 wrap */
		.fast_reads = sum[ST_FAST],
	};
}

static inline struct txn_bucket *txn_bucket_of(lock_table_t *lt, uint64_t id)
{
	uint64_t h = id * 0x9e3779b97f4a7c15ULL;
	return &lt->tbuckets[(h >> 32) & lt->tmask];
}

int txn_table_init(lock_table_t *lt, unsigned buckets_log2)
{
	unsigned log2 = buckets_log2 < 6 ? 6 : buckets_log2 > 14 ? 14 : buckets_log2;
	size_t n = (size_t)1 << log2;
	if (posix_memalign((void **)&lt->tbuckets, CACHELINE, n * sizeof(*lt->tbuckets)))
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		latch_init(&lt->tbuckets[i].latch);
		lt->tbuckets[i].head = NULL;
	}
	lt->tmask = (uint32_t)(n - 1);
	return 0;
}

static void txn_free(lock_txn_t *t)
{
	struct lock_own *o = t->held, *next;
	void *user = atomic_exchange(&t->user, NULL);
	if (user && t->lt->user_hook)
		t->lt->user_hook(t->lt->user_arg, user);
	for (; o; o = next) {
		next = o->txn_next;
		own_free(o);
	}
	lkc_free(LKC_TXN, t);
}

void txn_table_destroy(lock_table_t *lt)
{
	for (uint32_t i = 0; i <= lt->tmask; i++) {
		lock_txn_t *t = lt->tbuckets[i].head, *next;
		for (; t; t = next) {
			next = t->hnext;
			txn_free(t);
		}
	}
	free(lt->tbuckets);
}

static lock_txn_t *bucket_lookup(struct txn_bucket *b, uint64_t id)
{
	for (lock_txn_t *t = b->head; t; t = t->hnext)
		if (t->id == id)
			return t;
	return NULL;
}

lock_txn_t *lock_txn_get(lock_table_t *lt, uint64_t txn_id, uint64_t priority, void *owner)
{
	struct txn_bucket *b = txn_bucket_of(lt, txn_id);
	latch_lock(&b->latch);
	lock_txn_t *t = bucket_lookup(b, txn_id);
	if (t) {
		txn_ref(t);
		latch_unlock(&b->latch);
		return t;
	}
	t = lkc_alloc(LKC_TXN);
	if (t) {
		/* not .fast (read only below nfast) nor the owner slots behind it */
		memset(t, 0, offsetof(struct lock_txn, fast));
		t->id = txn_id;
		t->priority = priority;
		t->owner = owner;
		t->lt = lt;
		atomic_init(&t->status, TXN_RUNNING);
		atomic_init(&t->refs, 2);            /* the table's and the caller's */
		latch_init(&t->latch);
		t->in_table = true;
		t->hnext = b->head;
		b->head = t;
	}
	latch_unlock(&b->latch);
	if (t)
		lock_stat_add(lt, ST_TXNS, 1);
	return t;
}

lock_txn_t *lock_txn_find(lock_table_t *lt, uint64_t txn_id)
{
	struct txn_bucket *b = txn_bucket_of(lt, txn_id);
	latch_lock(&b->latch);
	lock_txn_t *t = bucket_lookup(b, txn_id);
	if (t)
		txn_ref(t);
	latch_unlock(&b->latch);
	return t;
}

void lock_txn_put(lock_table_t *lt, lock_txn_t *txn)
{
	(void)lt;
	if (txn && atomic_fetch_sub_explicit(&txn->refs, 1, memory_order_acq_rel) == 1)
		txn_free(txn);
}

void lock_txn_hold(lock_txn_t *txn)
{
	txn_ref(txn);
}

void lock_table_set_user_hook(lock_table_t *lt, void (*fn)(void *arg, void *user), void *arg)
{
	lt->user_hook = fn;
	lt->user_arg = arg;
}

void *lock_txn_user(const lock_txn_t *txn)
{
	return atomic_load(&((lock_txn_t *)txn)->user);
}

void lock_txn_set_user(lock_txn_t *txn, void *user)
{
	atomic_store(&txn->user, user);
}

void *lock_txn_take_user(lock_txn_t *txn)
{
	return atomic_exchange(&txn->user, NULL);
}

void lock_txn_dep_note(lock_txn_t *txn, uint64_t v)
{
	uint64_t cur = atomic_load_explicit(&txn->dep, memory_order_relaxed);
	while (cur < v && !atomic_compare_exchange_weak(&txn->dep, &cur, v))
		;
}

uint64_t lock_txn_dep(const lock_txn_t *txn)
{
	return atomic_load(&((lock_txn_t *)txn)->dep);
}

void lock_txn_release_shared(lock_table_t *lt, lock_txn_t *txn)
{
	struct lock_own *shared = NULL, **pp;
	uint64_t fast[LOCK_TXN_FAST];
	latch_lock(&txn->latch);
	unsigned nfast = txn_take_fast(txn, fast);
	/* mode changes only through this txn's own acquires, and a txn that
	 * releases its S locks acquires nothing more */
	for (pp = &txn->held; *pp;) {
		struct lock_own *o = *pp;
		if (o->mode == LOCK_S) {
			*pp = o->txn_next;
			o->txn_next = shared;
			shared = o;
		} else {
			pp = &o->txn_next;
		}
	}
	latch_unlock(&txn->latch);
	if (nfast)
		lock_release_fast(lt, fast, nfast);
	if (shared)
		lock_release_detached(lt, shared, NULL);
}

enum txn_status lock_txn_status(const lock_txn_t *txn)
{
	return (enum txn_status)atomic_load(&((lock_txn_t *)txn)->status);
}

uint64_t lock_txn_id(const lock_txn_t *txn)
{
	return txn->id;
}

uint64_t lock_txn_priority(const lock_txn_t *txn)
{
	return txn->priority;
}

int lock_txn_begin_commit(lock_table_t *lt, lock_txn_t *txn)
{
	int s = TXN_RUNNING;
	if (atomic_compare_exchange_strong(&txn->status, &s, TXN_COMMITTING) ||
	    s == TXN_COMMITTING)
		return 0;
	if (s == TXN_PREEMPTED) {
		lock_stat_add(lt, ST_PREEMPTED_ABORTS, 1);
		return LOTUS_EPREEMPTED;
	}
	return LOTUS_ESTATE;                 /* still WAITING for a lock */
}

static bool txn_table_remove(lock_table_t *lt, lock_txn_t *t)
{
	struct txn_bucket *b = txn_bucket_of(lt, t->id);
	bool removed = false;
	latch_lock(&b->latch);
	if (t->in_table) {
		for (lock_txn_t **pp = &b->head; *pp; pp = &(*pp)->hnext)
			if (*pp == t) {
				*pp = t->hnext;
				break;
			}
		t->in_table = false;
		removed = true;
	}
	latch_unlock(&b->latch);
	if (removed)
		lock_stat_add(lt, ST_TXNS, (uint64_t)-1);
	return removed;
}

void lock_txn_release(lock_table_t *lt, lock_txn_t *txn)
{
	uint64_t fast[LOCK_TXN_FAST];
	latch_lock(&txn->latch);
	bool first = !txn->closed;
	txn->closed = true;
	unsigned nfast = txn_take_fast(txn, fast);
	struct lock_own *held = txn->held;
	struct lock_waiter *waiting = txn->waiting;
	txn->held = NULL;
	txn->waiting = NULL;
	latch_unlock(&txn->latch);
	if (first) {
		bool in_table = txn_table_remove(lt, txn);
		if (nfast)
			lock_release_fast(lt, fast, nfast);
		lock_release_detached(lt, held, waiting);
		/* a notify for one of our waiters may still be running elsewhere */
		while (atomic_load(&txn->inflight))
			sched_yield();
		if (in_table)
			lock_txn_put(lt, txn);       /* the table's reference */
	}
	lock_txn_put(lt, txn);
}

/* Collect (with a reference) up to max txns of owner that are not COMMITTING
 * (committing 0) or that are (committing 1). */
static unsigned owner_collect(lock_table_t *lt, void *owner, int committing, lock_txn_t **out,
			      unsigned max, uint32_t *bucket)
{
	unsigned n = 0;
	for (; *bucket <= lt->tmask && n < max; (*bucket)++) {
		struct txn_bucket *b = &lt->tbuckets[*bucket];
		latch_lock(&b->latch);
		for (lock_txn_t *t = b->head; t; t = t->hnext)
			if (t->owner == owner &&
			    (atomic_load(&t->status) == TXN_COMMITTING) == committing && n < max) {
				txn_ref(t);
				out[n++] = t;
			}
		latch_unlock(&b->latch);
		if (n == max)    /* rescan this bucket next round: it may hold more */
			break;
	}
	return n;
}

int lock_release_owner(lock_table_t *lt, void *owner)
{
	lock_txn_t *batch[64];
	uint32_t bucket = 0;
	int total = 0;
	unsigned n;
	while ((n = owner_collect(lt, owner, 0, batch, 64, &bucket)) > 0) {
		for (unsigned i = 0; i < n; i++) {
			/* Claim it by marking it PREEMPTED, so that a commit cannot start
			 * meanwhile; one that already started is left to its path. */
			int s = atomic_load(&batch[i]->status);
			while ((s == TXN_RUNNING || s == TXN_WAITING) &&
			       !atomic_compare_exchange_weak(&batch[i]->status, &s, TXN_PREEMPTED))
				;
			if (s == TXN_COMMITTING) {
				lock_txn_put(lt, batch[i]);
				continue;
			}
			lock_txn_release(lt, batch[i]);   /* consumes our reference */
			total++;
		}
	}
	return total;
}

int lock_release_owner_committing(lock_table_t *lt, void *owner,
				  int (*keep)(void *arg, uint64_t txn_id), void *arg)
{
	lock_txn_t *batch[64];
	uint32_t bucket = 0;
	int total = 0;
	unsigned n;
	while ((n = owner_collect(lt, owner, 1, batch, 64, &bucket)) > 0) {
		for (unsigned i = 0; i < n; i++) {
			if (keep && keep(arg, batch[i]->id)) {
				/* handed over: it has no owner now, so the rescan of
				 * this bucket does not collect it again */
				struct txn_bucket *b = txn_bucket_of(lt, batch[i]->id);
				latch_lock(&b->latch);
				batch[i]->owner = NULL;
				latch_unlock(&b->latch);
				lock_txn_put(lt, batch[i]);
				continue;
			}
			lock_txn_release(lt, batch[i]);   /* consumes our reference */
			total++;
		}
	}
	return total;
}
