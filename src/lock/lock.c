/*
 * lock.c - the memory server's lock table: S/X locks per (table, key), wait
 * queues ordered by priority, and the NO_WAIT / WAIT_DIE / WOUND_WAIT decisions
 * (the Lotus paper, §4; docs/design.md).  lock_txn.c holds the status table.
 *
 * Structure.  A hash table of `struct lk` with one latch per bucket (striped);
 * an entry is created by the first lock_acquire on its key and freed as soon as
 * it has neither owners nor waiters.  Each lk has an owner list (lock_own nodes,
 * which are also on their txn's held list) and a wait queue of the caller's
 * struct lock_waiter, sorted by (priority, txn id): the head is the oldest.
 *
 * Decisions for a request R (mode m, protocol cc) that conflicts:
 *   NO_WAIT     reject (LOTUS_EABORTED), unless every conflicting owner is
 *               COMMITTING: then wait (below).  A NO_WAIT waiter that later
 *               meets a conflicting owner that is not COMMITTING (the one
 *               granted ahead of it) is culled (LOTUS_EABORTED).
 *   WAIT_DIE    wait iff R is older than every conflicting owner that is not
 *               COMMITTING and every conflicting waiter; else reject.  To stay
 *               deadlock-free with a priority queue, a WAIT_DIE waiter that
 *               later finds such an older owner, or an older conflicting
 *               waiter ahead of it, dies too: it is taken off the queue and
 *               notified LOTUS_EABORTED ("culled").
 *   WOUND_WAIT  wound every younger conflicting owner that is not COMMITTING
 *               (status -> PREEMPTED, node unlinked from this lock); its parked
 *               requests elsewhere are cancelled with notify(LOTUS_EPREEMPTED).
 *               Then R waits if conflicts remain (older or COMMITTING owners).
 * The prepared-owner rule, under every protocol: a COMMITTING owner (its
 * vote given, durably on a durable server, its decision on its way) is only
 * waited for, never a reason to abort, die or wound.  It waits for nothing
 * and only releases, so waiting on it cannot deadlock, and a client that
 * acknowledges its commit on the yes votes (its COMMIT notice rides on its
 * next message) would otherwise turn every slow notice into aborts.  The
 * wait is bounded by the requester's own round deadline (its client aborts
 * it at timeout_ms) and by its connection's lease.
 * Any protocol: an owner already PREEMPTED is dropped from a lock on contact
 * (it can never commit), which lets the lock move on before its txn aborts.
 *
 * Grant rule.  A new request is granted at once iff it is compatible with all
 * owners and no waiter is older than it (an upgrade by the sole S owner is
 * granted at once regardless).  On release the queue is granted from the head
 * in order while each waiter is compatible with the owners (so consecutive
 * readers are granted together) and stops at the first that is not: readers
 * behind a waiting X of higher priority are NOT granted, so a stream of
 * younger readers cannot starve an older writer.
 *
 * Transaction status (atomic; the function behind each transition):
 *
 *        lock_txn_get
 *             |
 *             v        park (lock_acquire returned 1)
 *         RUNNING ------------------------------------> WAITING
 *          |   |   <-----------------------------------    |
 *          |   |     finish_waiter: its last parked         |
 *          |   |     request was granted or culled          |
 *          |   |                                            |
 *          |   +-------------------+    +-------------------+
 *          |                       v    v
 *          | lock_txn_begin_commit  PREEMPTED   <- wound_owners or
 *          v (CAS)                    |            lock_release_owner (CAS)
 *      COMMITTING                     |
 *          |                          |
 *          +---> lock_txn_release <---+   (from any status; the txn leaves
 *                                           the table, a later lock_txn_get
 *                                           of the same id makes a new one)
 *
 * Latch order (deadlock-free):
 *   1. at most ONE lock-table bucket latch at a time;
 *   2. under it, at most one txn latch at a time (txn latches are leaves);
 *   3. status-table bucket latches are leaves too (lock_txn.c), never held with 1/2.
 * Never take a bucket latch while holding a txn latch.  notify() is called with
 * no latch at all: each operation collects its notes in a `struct batch` and
 * delivers them after its bucket latch is dropped (batch_finish).
 *
 * A parked waiter w is on two lists: its lock's queue (bucket latch) and its
 * txn's .waiting list (txn latch).  Whoever takes w off the queue under the
 * bucket latch sets w->lock = NULL; it then owns the reply only if it also finds
 * w on the txn's list (and removes it there).  Otherwise a canceller or the
 * releaser took w off the txn list first and will see w->lock == NULL under
 * the bucket latch.  Exactly one party finishes w.  A party that took w off
 * the txn list bumps txn->inflight until its notify returned, and
 * lock_txn_release waits for inflight == 0, so after release returns the
 * caller may free its waiters.
 *
 * Fast reads.  A NO_WAIT S request whose key has no lock entry is granted
 * without one: it adds 1 to one of its bucket's fast words (the key's hash
 * picks which) and notes the key's hash in its txn (lock_txn.fast).  Its
 * release subtracts 1.  So a read and its release touch the bucket's line
 * and the txn, with no entry, owner node, latch or chain walk.  A word counts
 * the fast readers of every key that hashes to it, anonymously: a request
 * that needs the entry path (X, another protocol, a txn whose fast slots are
 * used up) creates the key's entry and sets the word's FW_SLOW under the
 * bucket latch, after which no fast read is granted on that word until its
 * last entry is freed (lk_maybe_free clears the bit).  The entry path then
 * counts the word's readers as owners in S mode that are not COMMITTING
 * (fast_others; a txn's own count is left out, so S -> X upgrades work):
 *   NO_WAIT X     rejected, as by a reader on the entry;
 *   WAIT_DIE X    dies: their ages are unknown, so they are taken as older;
 *   WOUND_WAIT X  waits: they cannot be wounded.
 * Only NO_WAIT transactions read fast (lock_acquire with a waiter, or
 * lock_read_fast, which the memory server calls for requests whose own
 * protocol is NO_WAIT), so a cluster whose clients share one
 * protocol sees the rules above unchanged; in a mixed one the two unknown
 * cases err toward aborting and waiting.  A word may count readers of other
 * keys than the requester's (they share it): that costs a needless conflict,
 * never a missed one.  A fast release that finds FW_SLOW settles the entries
 * of its word under the bucket latch, which grants an X that waited for the
 * readers (the requester set FW_SLOW before it counted them, so a release it
 * did not count sees the bit).  Fast readers are counted as not COMMITTING.
 * The memory server's S locks outlive lock_txn_begin_commit only inside
 * one COMMIT request (a PREPARE drops them, lock_txn_release_shared), so
 * the prepared-owner rule loses nothing there that matters: an X request
 * that meets such a reader in that window is rejected under NO_WAIT where
 * it would have waited a few microseconds.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "common/clock.h"
#include "common/hash.h"
#include "lock/lock_int.h"

struct lk {
	struct lk *next;             /* bucket chain */
	uint64_t word;               /* the lock word: LKW_* below */
	uint32_t hash;               /* low half of key_hash */
	uint16_t table, klen;
	struct lock_own *owners;
	struct lock_waiter *queue;   /* sorted, oldest first */
	unsigned char key[];
};

/*
 * The lock word: the lock's state in 8 bytes, so that the common decisions
 * read one word instead of walking the owner list and the queue.
 *   bits 0-1   mode of the owners: 0 free, LOCK_S (one or more readers), LOCK_X
 *   bits 2-33  number of owners
 *   bit 63     waiters: the queue is not empty
 * It is kept under the bucket latch, at every change of the owner list
 * (lkw_own_add/lkw_own_del), of an owner's mode (lkw_upgrade) and of the queue
 * (lkw_queue); assert_lock_state checks it against the lists.  Decided from
 * the word alone: a request on a free lock; a read on a lock that only
 * readers hold and nobody waits for; a release that leaves no waiter to
 * grant.  Everything else (a conflict, a queue, a wound) goes through the
 * owner list and the queue as before.
 */
#define LKW_MODE 3ull
#define LKW_ONE (1ull << 2)
#define LKW_COUNT (0xffffffffull << 2)
#define LKW_WAITERS (1ull << 63)

static inline unsigned lkw_mode(uint64_t w)
{
	return (unsigned)(w & LKW_MODE);
}

static inline uint64_t lkw_owners(uint64_t w)
{
	return (w & LKW_COUNT) >> 2;
}

static inline void lkw_own_add(struct lk *L, unsigned mode)
{
	uint64_t m = lkw_mode(L->word) > mode ? lkw_mode(L->word) : mode;
	L->word = ((L->word & ~LKW_MODE) + LKW_ONE) | m;
}

static inline void lkw_own_del(struct lk *L)
{
	L->word -= LKW_ONE;
	if (!(L->word & LKW_COUNT))
		L->word &= ~LKW_MODE;
}

static inline void lkw_upgrade(struct lk *L, unsigned mode)
{
	if (mode > lkw_mode(L->word))
		L->word = (L->word & ~LKW_MODE) | mode;
}

/* The fast word of a key hash: in its bucket (low bits), picked by the top
 * bits of the hash's low half, which struct lk keeps. */
static inline unsigned fw_slot(uint32_t h)
{
	return (unsigned)(((uint64_t)h * LOCK_FAST_WORDS) >> 32);
}

static inline _Atomic uint64_t *fw_word(lock_table_t *lt, uint32_t h)
{
	return &lt->buckets[h & lt->mask].fw[fw_slot(h)];
}

/* Fast readers counted on L's word, other than t's own (t NULL: all). */
static uint64_t fast_others(lock_table_t *lt, const struct lk *L, const lock_txn_t *ct)
{
	_Atomic uint64_t *fw = fw_word(lt, L->hash);
	uint64_t n = atomic_load(fw) & FW_COUNT;
	lock_txn_t *t = (lock_txn_t *)ct;
	if (!n || !t)
		return n;
	latch_lock(&t->latch);
	for (unsigned i = 0; i < t->nfast && n; i++)
		if (fw_word(lt, (uint32_t)t->fast[i]) == fw)
			n--;
	latch_unlock(&t->latch);
	return n;
}

static inline void lkw_queue(struct lk *L)
{
	L->word = L->queue ? L->word | LKW_WAITERS : L->word & ~LKW_WAITERS;
}
_Static_assert(sizeof(struct lk) + LK_CACHE_KEY <= LK_ENTRY_SIZE, "LK_ENTRY_SIZE");

/* Lock entries with short keys come from the per-thread cache. */
static struct lk *lk_alloc(uint16_t klen)
{
	return klen <= LK_CACHE_KEY ? lkc_alloc(LKC_LK) : malloc(sizeof(struct lk) + klen);
}

static void lk_free(struct lk *L)
{
	if (L->klen <= LK_CACHE_KEY)
		lkc_free(LKC_LK, L);
	else
		free(L);
}

/* Notifications and victims collected under a latch, delivered after it. */
struct batch {
	struct lock_waiter *head, *tail;  /* linked through w->next */
	lock_txn_t *victims;              /* linked through victim_next */
};

static void batch_deliver(lock_table_t *lt, struct batch *b);

/* Most operations collect nothing: then no call at all. */
static inline void batch_finish(lock_table_t *lt, struct batch *b)
{
	if (b->head || b->victims)
		batch_deliver(lt, b);
}

static inline bool txn_older(const lock_txn_t *a, const lock_txn_t *b)
{
	return a->priority < b->priority || (a->priority == b->priority && a->id < b->id);
}

static inline bool modes_compatible(unsigned a, unsigned b)
{
	return a == LOCK_S && b == LOCK_S;
}

/* Past its vote: it only releases from now on (the prepared-owner rule). */
static inline bool txn_committing(lock_txn_t *t)
{
	return atomic_load(&t->status) == TXN_COMMITTING;
}

/* The lock table's hash of (table, key): the key's hash (common/hash.h,
 * which the store's hash index uses too, so a caller that has it passes it
 * on: lock_acquire_hashed) with the table mixed in. */
static inline uint64_t lock_hash(uint16_t table, uint64_t khash)
{
	uint64_t h = (khash ^ ((uint64_t)table + 1) * 0x9e3779b97f4a7c15ULL) * 0xff51afd7ed558ccdULL;
	return h ^ (h >> 32);
}

/* ---- lock entries --------------------------------------------------------- */

static struct lk *lk_find(struct lock_bucket *b, uint64_t h64, uint16_t table,
			  const void *key, uint16_t klen, bool create)
{
	uint32_t h = (uint32_t)h64;
	for (struct lk *L = b->head; L; L = L->next)
		if (L->hash == h && L->table == table && L->klen == klen &&
		    memcmp(L->key, key, klen) == 0)
			return L;
	if (!create)
		return NULL;
	struct lk *L = lk_alloc(klen);
	if (!L)
		return NULL;
	*L = (struct lk){ .next = b->head, .hash = h, .table = table, .klen = klen };
	memcpy(L->key, key, klen);
	b->head = L;
	return L;
}

static void lk_maybe_free(struct lock_bucket *b, struct lk *L)
{
	if (L->word)   /* owners or waiters */
		return;
	unsigned slot = fw_slot(L->hash);
	for (struct lk **pp = &b->head; *pp; pp = &(*pp)->next)
		if (*pp == L) {
			*pp = L->next;
			lk_free(L);
			break;
		}
	/* the word's last entry: fast reads may use it again */
	for (struct lk *o = b->head; o; o = o->next)
		if (fw_slot(o->hash) == slot)
			return;
	if (atomic_load_explicit(&b->fw[slot], memory_order_relaxed) & FW_SLOW)
		atomic_fetch_and(&b->fw[slot], ~FW_SLOW);
}

static struct lock_own *owner_find(const struct lk *L, const lock_txn_t *t)
{
	for (struct lock_own *o = L->owners; o; o = o->lock_next)
		if (o->txn == t)
			return o;
	return NULL;
}

/* True if mode m for t is compatible with every owner other than t itself,
 * the fast readers of L's word included. */
static bool owners_compatible(lock_table_t *lt, const struct lk *L, const lock_txn_t *t,
			      unsigned m)
{
	for (struct lock_own *o = L->owners; o; o = o->lock_next)
		if (o->txn != t && !modes_compatible(o->mode, m))
			return false;
	return m == LOCK_S || !fast_others(lt, L, t);
}

static void owner_link(struct lk *L, struct lock_own *o)
{
	o->lock = L;
	o->on_lock = true;
	o->lock_next = L->owners;
	L->owners = o;
	lkw_own_add(L, o->mode);
}

static struct lock_own *own_alloc(uint32_t bucket, lock_txn_t *t, unsigned mode)
{
	struct lock_own *o = own_node(t);
	if (o)
		*o = (struct lock_own){ .txn = t, .bucket = bucket, .mode = (uint8_t)mode };
	return o;
}

static void queue_insert(struct lk *L, struct lock_waiter *w)
{
	struct lock_waiter **pp = &L->queue;
	while (*pp && !txn_older(w->txn, (*pp)->txn))
		pp = &(*pp)->next;
	w->next = *pp;
	*pp = w;
	lkw_queue(L);
}

static void queue_unlink(struct lk *L, struct lock_waiter *w)
{
	for (struct lock_waiter **pp = &L->queue; *pp; pp = &(*pp)->next)
		if (*pp == w) {
			*pp = w->next;
			break;
		}
	lkw_queue(L);
	w->next = NULL;
	w->lock = NULL;
}

#ifndef NDEBUG
/* Invariants of a settled lock (bucket latch held). */
static void assert_lock_state(lock_table_t *lt, const struct lk *L)
{
	unsigned n = 0, nx = 0;
	for (const struct lock_own *o = L->owners; o; o = o->lock_next) {
		assert(o->on_lock && o->lock == L);
		n++;
		nx += o->mode == LOCK_X;
	}
	assert(nx == 0 || n == 1);          /* X is exclusive */
	assert(lkw_owners(L->word) == n);   /* the word agrees with the lists */
	assert(lkw_mode(L->word) == (n == 0 ? 0 : nx ? LOCK_X : LOCK_S));
	assert(!(L->word & LKW_WAITERS) == !L->queue);
	const struct lock_waiter *prev = NULL;
	for (const struct lock_waiter *w = L->queue; w; prev = w, w = w->next) {
		assert(w->lock == L);
		assert(!prev || !txn_older(w->txn, prev->txn));   /* priority order */
	}
	/* settled: the head would have been granted if it could be (fast
	 * readers aside: one may have left and not yet settled L) */
	(void)lt;
	bool named_ok = true;
	if (L->queue)
		for (const struct lock_own *o = L->owners; o; o = o->lock_next)
			if (o->txn != L->queue->txn && !modes_compatible(o->mode, L->queue->mode))
				named_ok = false;
	assert(!L->queue || !named_ok || L->queue->mode == LOCK_X);
}
#else
#define assert_lock_state(lt, L) ((void)0)
#endif

/* ---- waiters -------------------------------------------------------------- */

/* Txn latch held.  Removes w from t's parked list; false if it is not there. */
static bool txn_unlist_waiter(lock_txn_t *t, struct lock_waiter *w)
{
	for (struct lock_waiter **pp = &t->waiting; *pp; pp = &(*pp)->txn_next)
		if (*pp == w) {
			*pp = w->txn_next;
			w->txn_next = NULL;
			if (!t->waiting) {
				int s = TXN_WAITING;
				atomic_compare_exchange_strong(&t->status, &s, TXN_RUNNING);
			}
			return true;
		}
	return false;
}

static void batch_note(struct batch *b, struct lock_waiter *w, int result)
{
	w->result = result;
	w->next = NULL;
	if (b->tail)
		b->tail->next = w;
	else
		b->head = w;
	b->tail = w;
}

static void count_result(lock_table_t *lt, struct lock_waiter *w, int result)
{
	if (result == 0) {
		lock_stat_add(lt, ST_AFTER_WAIT, 1);
		lock_stat_add(lt, ST_WAIT_NS, clock_now_ns() - w->wait_start_ns);
	} else if (result == LOTUS_EPREEMPTED) {
		lock_stat_add(lt, ST_PREEMPTED_ABORTS, 1);
	} else if (result == LOTUS_EABORTED) {
		lock_stat_add(lt, ST_REJECTS, 1);
	}
}

/*
 * w has just been taken off L's queue (bucket latch held).  Grant it (result 0)
 * or fail it with result, if we own its reply (see the opening comment).
 */
static void finish_waiter(lock_table_t *lt, struct lk *L, struct lock_waiter *w,
			  int result, struct batch *b)
{
	lock_txn_t *t = w->txn;
	struct lock_own *mine = NULL, *o = NULL;
	if (result == 0 && !(mine = owner_find(L, t)) && !(o = own_alloc(w->bucket, t, w->mode)))
		result = -ENOMEM;
	latch_lock(&t->latch);
	if (!txn_unlist_waiter(t, w)) {
		latch_unlock(&t->latch);
		own_free(o);
		return;
	}
	if (result == 0 && atomic_load(&t->status) == TXN_PREEMPTED)
		result = LOTUS_EPREEMPTED;
	if (result == 0 && mine && w->mode > mine->mode) {
		mine->mode = w->mode;
		lkw_upgrade(L, w->mode);
		lock_stat_add(lt, ST_UPGRADES, 1);
	} else if (result == 0 && o) {
		o->txn_next = t->held;
		t->held = o;
		owner_link(L, o);
		o = NULL;
	}
	atomic_fetch_add(&t->inflight, 1);
	txn_ref(t);
	latch_unlock(&t->latch);
	own_free(o);
	count_result(lt, w, result);
	batch_note(b, w, result);
}

/* Drop owners whose txn is PREEMPTED: they can never commit. */
static bool reap_preempted(struct lk *L)
{
	bool any = false;
	struct lock_own **pp = &L->owners, *o;
	while ((o = *pp)) {
		if (atomic_load(&o->txn->status) == TXN_PREEMPTED) {
			*pp = o->lock_next;
			o->on_lock = false;
			o->lock_next = NULL;
			lkw_own_del(L);
			any = true;
			continue;
		}
		pp = &o->lock_next;
	}
	return any;
}

/* Grant from the head while compatible (readers together); stop at the first
 * waiter that cannot be granted, or that is not older than `before` (a request
 * being decided goes ahead of the younger waiters). */
static void grant_pass(lock_table_t *lt, struct lk *L, const lock_txn_t *before,
		       struct batch *b)
{
	struct lock_waiter *w;
	while ((w = L->queue) && (!before || txn_older(w->txn, before)) &&
	       owners_compatible(lt, L, w->txn, w->mode)) {
		L->queue = w->next;
		lkw_queue(L);
		w->next = NULL;
		w->lock = NULL;
		finish_waiter(lt, L, w, 0, b);
	}
}

/* Some owner other than t conflicts with mode m, and each such owner is
 * COMMITTING: the request waits for it whatever the protocol. */
static bool only_committing_blocks(lock_table_t *lt, const struct lk *L, const lock_txn_t *t,
				   unsigned m)
{
	bool any = false;
	if (m == LOCK_X && fast_others(lt, L, t))
		return false;   /* fast readers count as not COMMITTING */
	for (const struct lock_own *o = L->owners; o; o = o->lock_next) {
		if (o->txn == t || modes_compatible(o->mode, m))
			continue;
		if (!txn_committing(o->txn))
			return false;
		any = true;
	}
	return any;
}

/* WAIT_DIE: t (mode m) must die if an older txn that is not COMMITTING owns
 * L in a conflicting mode, or an older txn waits for it in one (the queue is
 * sorted, so older waiters are ahead of it). */
static bool wait_die_dies(lock_table_t *lt, const struct lk *L, const lock_txn_t *t, unsigned m)
{
	if (m == LOCK_X && fast_others(lt, L, t))
		return true;    /* fast readers' ages are unknown: taken as older */
	for (const struct lock_own *o = L->owners; o; o = o->lock_next)
		if (o->txn != t && !modes_compatible(o->mode, m) && txn_older(o->txn, t) &&
		    !txn_committing(o->txn))
			return true;
	for (const struct lock_waiter *q = L->queue; q && txn_older(q->txn, t); q = q->next)
		if (q->txn != t && !modes_compatible(q->mode, m))
			return true;
	return false;
}

/* The two oldest distinct transactions of a set, so that "is some txn other
 * than t in the set older than t" is answered in O(1). */
struct oldest2 {
	const lock_txn_t *a, *b;   /* a older than b; NULL: none */
};

static void oldest2_add(struct oldest2 *o, const lock_txn_t *t)
{
	if (t == o->a || t == o->b)
		return;
	if (!o->a || txn_older(t, o->a)) {
		o->b = o->a;
		o->a = t;
	} else if (!o->b || txn_older(t, o->b)) {
		o->b = t;
	}
}

static bool oldest2_older_than(const struct oldest2 *o, const lock_txn_t *t)
{
	const lock_txn_t *x = o->a == t ? o->b : o->a;
	return x && txn_older(x, t);
}

/* Is there a txn other than t in the set? */
static bool oldest2_other(const struct oldest2 *o, const lock_txn_t *t)
{
	return (o->a && o->a != t) || o->b;
}

/* Remove the waiters that may wait no longer; returns how many.
 *   WAIT_DIE: one that now waits for an older txn (the rule of
 *     wait_die_dies(), COMMITTING owners aside);
 *   NO_WAIT: one that now conflicts with an owner that is not COMMITTING
 *     (it waited only for COMMITTING ones, only_committing_blocks()).
 * One pass: the queue is ordered oldest first, so the older waiters of w
 * are the kept ones before it.  Linear in owners + waiters: a client that
 * parks many requests on one lock must not make every acquire of that lock
 * quadratic. */
static unsigned cull_waiters(lock_table_t *lt, struct lk *L, struct batch *b)
{
	unsigned n = 0;
	struct lock_waiter **pp = &L->queue, *w;
	struct oldest2 own_x = { 0 }, own_any = { 0 }, q_x = { 0 }, q_any = { 0 };
	for (const struct lock_own *o = L->owners; o; o = o->lock_next) {
		if (txn_committing(o->txn))
			continue;   /* waited for under any protocol */
		oldest2_add(&own_any, o->txn);
		if (o->mode != LOCK_S)
			oldest2_add(&own_x, o->txn);
	}
	while ((w = *pp)) {
		/* S conflicts with X only; X with everything */
		const struct oldest2 *own = w->mode == LOCK_S ? &own_x : &own_any;
		bool dies = w->cc == CC_WAIT_DIE
			    ? oldest2_older_than(own, w->txn) ||
			      oldest2_older_than(w->mode == LOCK_S ? &q_x : &q_any, w->txn)
			    : w->cc == CC_NO_WAIT && oldest2_other(own, w->txn);
		if (!dies && w->mode == LOCK_X && w->cc != CC_WOUND_WAIT &&
		    fast_others(lt, L, w->txn))
			dies = true;   /* as in wait_die_dies, only_committing_blocks */
		if (dies) {
			*pp = w->next;
			lkw_queue(L);
			w->next = NULL;
			w->lock = NULL;
			finish_waiter(lt, L, w, LOTUS_EABORTED, b);
			n++;
			continue;
		}
		oldest2_add(&q_any, w->txn);
		if (w->mode != LOCK_S)
			oldest2_add(&q_x, w->txn);
		pp = &w->next;
	}
	return n;
}

/* Bring L back to its invariants after owners or waiters changed.  With
 * `before`, grant only waiters older than that txn (it is being decided). */
static void lk_settle_before(lock_table_t *lt, struct lk *L, const lock_txn_t *before,
			     struct batch *b)
{
	reap_preempted(L);
	do
		grant_pass(lt, L, before, b);
	while (cull_waiters(lt, L, b) > 0);
}

static void lk_settle(lock_table_t *lt, struct lk *L, struct batch *b)
{
	lk_settle_before(lt, L, NULL, b);
	assert_lock_state(lt, L);
}

/* ---- acquire -------------------------------------------------------------- */

struct acq {
	lock_table_t *lt;
	struct lk *L;
	lock_txn_t *t;
	uint32_t bucket;
	unsigned mode;
	enum cc_proto cc;
	struct lock_waiter *w;
	struct batch *b;
};

/* CAS RUNNING/WAITING -> PREEMPTED; false if COMMITTING or already PREEMPTED. */
static bool txn_wound(lock_txn_t *v)
{
	int s = atomic_load(&v->status);
	while (s == TXN_RUNNING || s == TXN_WAITING)
		if (atomic_compare_exchange_weak(&v->status, &s, TXN_PREEMPTED))
			return true;
	return false;
}

/* WOUND_WAIT: preempt younger conflicting owners that are not COMMITTING. */
static void wound_owners(struct acq *a)
{
	struct lock_own **pp = &a->L->owners, *o;
	while ((o = *pp)) {
		if (o->txn != a->t && !modes_compatible(o->mode, a->mode) &&
		    txn_older(a->t, o->txn) && txn_wound(o->txn)) {
			*pp = o->lock_next;
			o->on_lock = false;
			o->lock_next = NULL;
			lkw_own_del(a->L);
			txn_ref(o->txn);                  /* alive until cancelled */
			o->txn->victim_next = a->b->victims;
			a->b->victims = o->txn;
			lock_stat_add(a->lt, ST_PREEMPTIONS, 1);
			continue;
		}
		pp = &o->lock_next;
	}
}

static int grant_now(struct acq *a, struct lock_own *mine)
{
	lock_txn_t *t = a->t;
	struct lock_own *o = NULL;
	if (!mine && !(o = own_alloc(a->bucket, t, a->mode)))
		return -ENOMEM;
	latch_lock(&t->latch);
	if (t->closed || atomic_load(&t->status) == TXN_PREEMPTED) {
		int rc = t->closed ? LOTUS_EABORTED : LOTUS_EPREEMPTED;
		latch_unlock(&t->latch);
		own_free(o);
		return rc;
	}
	if (mine) {
		mine->mode = (uint8_t)a->mode;
		lkw_upgrade(a->L, a->mode);
		lock_stat_add(a->lt, ST_UPGRADES, 1);
	} else {
		o->txn_next = t->held;
		t->held = o;
		owner_link(a->L, o);
	}
	latch_unlock(&t->latch);
	lock_stat_add(a->lt, ST_IMMEDIATE, 1);
	return 0;
}

static int park(struct acq *a)
{
	lock_txn_t *t = a->t;
	struct lock_waiter *w = a->w;
	if (!w || atomic_load(&t->status) == TXN_COMMITTING)
		return LOTUS_EABORTED;      /* a committing txn cannot wait */
	*w = (struct lock_waiter){ .txn = t, .mode = a->mode, .owner = w->owner, .lock = a->L,
				   .wait_start_ns = clock_now_ns(), .bucket = a->bucket,
				   .cc = (uint8_t)a->cc };
	latch_lock(&t->latch);
	int s = TXN_RUNNING;
	if (t->closed || (!atomic_compare_exchange_strong(&t->status, &s, TXN_WAITING) &&
			  s != TXN_WAITING)) {
		latch_unlock(&t->latch);
		w->lock = NULL;
		return s == TXN_PREEMPTED ? LOTUS_EPREEMPTED : LOTUS_EABORTED;
	}
	w->txn_next = t->waiting;
	t->waiting = w;
	latch_unlock(&t->latch);
	queue_insert(a->L, w);
	lock_stat_add(a->lt, ST_WAITS, 1);
	return 1;
}

static int acquire_locked(struct acq *a)
{
	struct lk *L = a->L;
	uint64_t word = L->word;
	/* free: nothing to wound, reap, grant or cull */
	if (!word && (a->mode == LOCK_S || !fast_others(a->lt, L, a->t)))
		return grant_now(a, NULL);
	struct lock_own *mine = owner_find(L, a->t);
	if (mine && mine->mode >= a->mode) {
		lock_stat_add(a->lt, ST_IMMEDIATE, 1);
		return 0;
	}
	/* Readers only, nobody waiting: a read is compatible with every owner
	 * and has no waiter to respect, nothing to wound and nobody to cull.
	 * (A PREEMPTED reader stays until a conflicting request reaps it.) */
	if (a->mode == LOCK_S && lkw_mode(word) == LOCK_S && !(word & LKW_WAITERS))
		return grant_now(a, NULL);
	if (a->cc == CC_WOUND_WAIT)
		wound_owners(a);
	lk_settle_before(a->lt, L, a->t, a->b);   /* reap, grant older waiters */
	mine = owner_find(L, a->t);
	int rc;
	if (owners_compatible(a->lt, L, a->t, a->mode) &&
	    (mine || !L->queue || txn_older(a->t, L->queue->txn)))
		rc = grant_now(a, mine);
	else if ((a->cc == CC_NO_WAIT && !only_committing_blocks(a->lt, L, a->t, a->mode)) ||
		 (a->cc == CC_WAIT_DIE && wait_die_dies(a->lt, L, a->t, a->mode)))
		rc = LOTUS_EABORTED;
	else
		rc = park(a);   /* with no waiter (w NULL): LOTUS_EABORTED */
	lk_settle(a->lt, L, a->b);          /* cull WAIT_DIE waiters behind us */
	return rc;
}

/* A NO_WAIT read of a key with no entry on its word: count it there.  0
 * granted, 1 take the entry path. */
static int fast_read(lock_table_t *lt, lock_txn_t *t, struct lock_bucket *bk, uint64_t h)
{
	_Atomic uint64_t *fw = &bk->fw[fw_slot((uint32_t)h)];
	uint64_t w = atomic_load_explicit(fw, memory_order_relaxed);
	if (w & FW_SLOW)
		return 1;
	latch_lock(&t->latch);   /* against a release taking the list */
	int s = atomic_load_explicit(&t->status, memory_order_relaxed);
	if (t->closed || t->nfast == LOCK_TXN_FAST || (s != TXN_RUNNING && s != TXN_WAITING)) {
		latch_unlock(&t->latch);
		return 1;
	}
	do {
		if ((w & FW_SLOW) || (w & FW_COUNT) == FW_COUNT) {
			latch_unlock(&t->latch);
			return 1;
		}
	} while (!atomic_compare_exchange_weak(fw, &w, w + 1));
	t->fast[t->nfast++] = h;
	latch_unlock(&t->latch);
	lock_stat_add(lt, ST_FAST, 1);   /* an acquire, granted at once: lock_table_stats */
	return 0;
}

void lock_release_fast(lock_table_t *lt, const uint64_t *hashes, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		uint32_t h = (uint32_t)hashes[i];
		struct lock_bucket *bk = &lt->buckets[h & lt->mask];
		unsigned slot = fw_slot(h);
		uint64_t old = atomic_fetch_sub(&bk->fw[slot], 1);
		if (likely(!(old & FW_SLOW)))
			continue;
		/* an entry on this word may wait for its readers to leave */
		struct batch b = { 0 };
		latch_lock(&bk->latch);
		for (struct lk *L = bk->head, *next; L; L = next) {
			next = L->next;
			if (fw_slot(L->hash) == slot && (L->word & LKW_WAITERS)) {
				lk_settle(lt, L, &b);
				lk_maybe_free(bk, L);
			}
		}
		latch_unlock(&bk->latch);
		batch_finish(lt, &b);
	}
}

void lock_table_set_fast_reads(lock_table_t *lt, bool on)
{
	lt->fast_reads = on;
}

void lock_prefetch(const lock_table_t *lt, uint16_t table, uint64_t khash)
{
	__builtin_prefetch(&lt->buckets[lock_hash(table, khash) & lt->mask], 1, 3);
}

int lock_read_fast(lock_table_t *lt, lock_txn_t *txn, uint16_t table, uint64_t khash)
{
	if (!lt->fast_reads)
		return 1;
	uint64_t h = lock_hash(table, khash);
	return fast_read(lt, txn, &lt->buckets[h & lt->mask], h);
}

int lock_acquire(lock_table_t *lt, lock_txn_t *txn, uint16_t table, const void *key,
		 uint16_t klen, enum lock_mode mode, enum cc_proto cc, struct lock_waiter *w)
{
	return lock_acquire_hashed(lt, txn, table, key, klen, lotus_key_hash(key, klen), mode,
				   cc, w);
}

int lock_acquire_hashed(lock_table_t *lt, lock_txn_t *txn, uint16_t table, const void *key,
			uint16_t klen, uint64_t khash, enum lock_mode mode, enum cc_proto cc,
			struct lock_waiter *w)
{
	/* only a NO_WAIT request that could wait (w given): one without a
	 * waiter may be another protocol's request made NO_WAIT by its caller
	 * (the memory server's parked limit), and a WOUND_WAIT or WAIT_DIE
	 * txn's read must stay on the entry, where it can be wounded or aged */
	uint64_t h = lock_hash(table, khash);
	struct lock_bucket *bk = &lt->buckets[h & lt->mask];
	if (mode == LOCK_S && cc == CC_NO_WAIT && w && lt->fast_reads &&
	    fast_read(lt, txn, bk, h) == 0)
		return 0;
	lock_stat_add(lt, ST_ACQUIRES, 1);
	if (atomic_load(&txn->status) == TXN_PREEMPTED) {
		lock_stat_add(lt, ST_PREEMPTED_ABORTS, 1);
		return LOTUS_EPREEMPTED;
	}
	if ((mode != LOCK_S && mode != LOCK_X) || (unsigned)cc > CC_WOUND_WAIT)
		return -EINVAL;
	struct batch b = { 0 };
	struct acq a = { .lt = lt, .t = txn, .bucket = (uint32_t)(h & lt->mask), .mode = mode,
			 .cc = cc, .w = w, .b = &b };
	int rc = -ENOMEM;
	latch_lock(&bk->latch);
	a.L = lk_find(bk, h, table, key, klen, true);
	if (a.L) {
		/* before acquire_locked counts the word's fast readers */
		_Atomic uint64_t *fw = &bk->fw[fw_slot((uint32_t)h)];
		if (!(atomic_load_explicit(fw, memory_order_relaxed) & FW_SLOW))
			atomic_fetch_or(fw, FW_SLOW);
		rc = acquire_locked(&a);
		lk_maybe_free(bk, a.L);
	}
	latch_unlock(&bk->latch);
	batch_finish(lt, &b);
	if (rc == LOTUS_EABORTED)
		lock_stat_add(lt, ST_REJECTS, 1);
	else if (rc == LOTUS_EPREEMPTED)
		lock_stat_add(lt, ST_PREEMPTED_ABORTS, 1);
	return rc;
}

bool lock_held(lock_table_t *lt, lock_txn_t *txn, uint16_t table, const void *key,
	       uint16_t klen, enum lock_mode mode)
{
	uint64_t h = lock_hash(table, lotus_key_hash(key, klen));
	struct lock_bucket *bk = &lt->buckets[h & lt->mask];
	bool held = false;
	latch_lock(&bk->latch);
	struct lk *L = lk_find(bk, h, table, key, klen, false);
	struct lock_own *o = L ? owner_find(L, txn) : NULL;
	held = o && o->mode >= mode;
	latch_unlock(&bk->latch);
	if (!held && mode == LOCK_S) {
		latch_lock(&txn->latch);
		for (unsigned i = 0; i < txn->nfast && !held; i++)
			held = txn->fast[i] == h;
		latch_unlock(&txn->latch);
	}
	return held;
}

/* ---- cancel and release --------------------------------------------------- */

/* Take w (already off its txn's list) off its queue, if still there.  No latch
 * held on entry; notes for others go to b. */
static void waiter_dequeue(lock_table_t *lt, struct lock_waiter *w, struct batch *b)
{
	struct lock_bucket *bk = &lt->buckets[w->bucket];
	latch_lock(&bk->latch);
	struct lk *L = w->lock;
	if (L) {
		queue_unlink(L, w);
		lk_settle(lt, L, b);
		lk_maybe_free(bk, L);
	}
	latch_unlock(&bk->latch);
}

/* A wounded txn's parked requests get notify(LOTUS_EPREEMPTED). */
static void cancel_waiters(lock_table_t *lt, lock_txn_t *v)
{
	for (;;) {
		struct batch b = { 0 };
		latch_lock(&v->latch);
		struct lock_waiter *w = v->waiting;
		if (w) {
			v->waiting = w->txn_next;
			w->txn_next = NULL;
			atomic_fetch_add(&v->inflight, 1);
			txn_ref(v);
		}
		latch_unlock(&v->latch);
		if (!w)
			return;
		waiter_dequeue(lt, w, &b);
		lock_stat_add(lt, ST_PREEMPTED_ABORTS, 1);
		batch_note(&b, w, LOTUS_EPREEMPTED);
		batch_finish(lt, &b);
	}
}

/* Deliver notes (no latch held), then cancel the victims' parked requests. */
static void batch_deliver(lock_table_t *lt, struct batch *b)
{
	struct lock_waiter *w = b->head;
	while (w) {
		struct lock_waiter *next = w->next;
		lock_txn_t *t = w->txn;
		int result = w->result;
		w->next = NULL;
		lt->notify(lt->arg, w, result);     /* w may be gone after this */
		atomic_fetch_sub(&t->inflight, 1);
		lock_txn_put(lt, t);
		w = next;
	}
	lock_txn_t *v = b->victims;
	while (v) {
		lock_txn_t *next = v->victim_next;
		cancel_waiters(lt, v);
		lock_txn_put(lt, v);
		v = next;
	}
	b->head = b->tail = NULL;
	b->victims = NULL;
}

/* Called by lock_txn_release with lists detached under the txn latch. */
void lock_release_detached(lock_table_t *lt, struct lock_own *held, struct lock_waiter *waiting)
{
	struct batch b = { 0 };
	while (waiting) {
		struct lock_waiter *next = waiting->txn_next;
		waiting->txn_next = NULL;
		waiter_dequeue(lt, waiting, &b);     /* dropped without notify */
		waiting = next;
	}
	while (held) {
		struct lock_own *next = held->txn_next;
		struct lock_bucket *bk = &lt->buckets[held->bucket];
		latch_lock(&bk->latch);
		if (held->on_lock) {
			struct lk *L = held->lock;
			for (struct lock_own **pp = &L->owners; *pp; pp = &(*pp)->lock_next)
				if (*pp == held) {
					*pp = held->lock_next;
					break;
				}
			held->on_lock = false;
			lkw_own_del(L);
			if (L->word & LKW_WAITERS)   /* else none to grant or cull */
				lk_settle(lt, L, &b);
			lk_maybe_free(bk, L);
		}
		latch_unlock(&bk->latch);
		own_free(held);
		held = next;
	}
	batch_finish(lt, &b);
}

/* ---- table ---------------------------------------------------------------- */

int lock_table_create(unsigned buckets_log2, lock_notify_fn notify, void *arg, lock_table_t **out)
{
	if (buckets_log2 > 24 || !notify)
		return -EINVAL;
	lock_table_t *lt;
	if (posix_memalign((void **)&lt, CACHELINE, sizeof(*lt)))
		return -ENOMEM;
	memset(lt, 0, sizeof(*lt));
	size_t n = (size_t)1 << buckets_log2;
	if (posix_memalign((void **)&lt->buckets, CACHELINE, n * sizeof(*lt->buckets))) {
		free(lt);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		latch_init(&lt->buckets[i].latch);
		lt->buckets[i].head = NULL;
		for (unsigned j = 0; j < LOCK_FAST_WORDS; j++)
			atomic_init(&lt->buckets[i].fw[j], 0);
	}
	lt->fast_reads = true;
	lt->mask = (uint32_t)(n - 1);
	lt->notify = notify;
	lt->arg = arg;
	int rc = txn_table_init(lt, buckets_log2);
	if (rc) {
		free(lt->buckets);
		free(lt);
		return rc;
	}
	*out = lt;
	return 0;
}

size_t lock_table_nlocks(lock_table_t *lt)
{
	size_t n = 0;
	for (uint32_t i = 0; i <= lt->mask; i++) {
		latch_lock(&lt->buckets[i].latch);
		for (struct lk *L = lt->buckets[i].head; L; L = L->next)
			n++;
		for (unsigned j = 0; j < LOCK_FAST_WORDS; j++)   /* read by fast readers */
			n += (atomic_load(&lt->buckets[i].fw[j]) & FW_COUNT) != 0;
		latch_unlock(&lt->buckets[i].latch);
	}
	return n;
}

/* No other thread may use lt any more.  Frees lock entries and every txn still
 * in the status table (with its held nodes). */
void lock_table_destroy(lock_table_t *lt)
{
	if (!lt)
		return;
	for (uint32_t i = 0; i <= lt->mask; i++) {
		struct lk *L = lt->buckets[i].head, *next;
		for (; L; L = next) {
			next = L->next;
			lk_free(L);
		}
	}
	txn_table_destroy(lt);
	free(lt->buckets);
	free(lt);
}
