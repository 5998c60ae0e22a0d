/*
 * lock_int.h - internals shared by lock.c (lock table, queues, protocols) and
 * lock_txn.c (transaction status table, release, counters).  Not a public header.
 *
 * Who protects what (latch order in lock.c's opening comment):
 *   struct lk, its owner list and wait queue, lock_own.lock_next/on_lock/mode
 *                                         -> the lock-table bucket latch
 *   lock_txn.held, .waiting, .closed      -> the txn's own latch
 *   lock_txn.status                       -> atomic (CAS), see lock.c's diagram
 *   lock_txn.inl_used                     -> atomic (a slot is taken once)
 *   struct lk.word                        -> the lock-table bucket latch
 *   lock_txn.hnext, .in_table             -> the status-table bucket latch
 */
#ifndef LOTUS_LOCK_INT_H
#define LOTUS_LOCK_INT_H
#include <pthread.h>
#include <stdatomic.h>
#include "common/common.h"
#include "lock/lock.h"

struct lk;

/* The lock manager's latches (bucket and txn latches, see lock.c for their
 * order) guard a few pointer updates each and are never held across a
 * callback, so they are spin latches: one atomic exchange to take, a release
 * store to drop.  A waiter spins briefly, then yields, then naps (the
 * holder may have been preempted on a busy machine; lock_cache.c). */
typedef struct {
	atomic_int v;
} latch_t;
void latch_lock_slow(latch_t *l);
static inline void latch_init(latch_t *l)
{
	atomic_init(&l->v, 0);
}
static inline void latch_lock(latch_t *l)
{
	if (likely(!atomic_exchange_explicit(&l->v, 1, memory_order_acquire)))
		return;
	latch_lock_slow(l);
}
static inline void latch_unlock(latch_t *l)
{
	atomic_store_explicit(&l->v, 0, memory_order_release);
}

/* One lock held by one txn: on the lock's owner list (bucket latch) and on the
 * txn's held list (txn latch).  A wound unlinks it from the lock only; the node
 * itself is freed by the txn's release, after it checked on_lock. */
struct lock_own {
	struct lock_own *lock_next;  /* bucket latch */
	struct lock_own *txn_next;   /* txn latch */
	struct lk *lock;             /* valid while on_lock */
	lock_txn_t *txn;
	uint32_t bucket;             /* immutable */
	uint8_t mode;                /* bucket latch */
	bool on_lock;                /* bucket latch */
};

#define LOCK_TXN_FAST 24

struct lock_txn {
	uint64_t id, priority;
	void *owner;
	_Atomic int status;            /* enum txn_status */
	atomic_uint refs;
	atomic_uint inflight;          /* waiters taken off .waiting, notify pending */
	latch_t latch;
	bool closed;                   /* latch: released, accepts no more grants */
	bool in_table;                 /* status-table bucket latch */
	struct lock_own *held;         /* latch */
	struct lock_waiter *waiting;   /* latch, linked through txn_next */
	struct lock_txn *hnext;        /* status-table bucket latch */
	struct lock_txn *victim_next;  /* owned by the wounder that set PREEMPTED */
	lock_table_t *lt;              /* for the user hook */
	void *_Atomic user;            /* lock_txn_set_user */
	_Atomic uint64_t dep;          /* lock_txn_dep_note: highest dependency */
	atomic_uint inl_used;          /* slots of .inl handed out (never reused) */
	unsigned nfast;                /* latch: entries of .fast in use */
	/* Fast reads (lock.c, "Fast reads"): the key hash of each S lock this
	 * txn holds as a count in a bucket's fast word, not as an owner node.
	 * Not cleared by lock_txn_get (only nfast is): it stays behind nfast. */
	uint64_t fast[LOCK_TXN_FAST];  /* latch */
	/* The txn's first LOCK_TXN_INLINE owner nodes live here, beside the
	 * txn, instead of coming from the allocator: a grant and its release
	 * then touch the lock entry and the txn's own memory.  A slot is taken
	 * once (atomic: a grant may run on another thread than the txn's own
	 * requests) and goes with the txn; later nodes come from lock_cache.c.
	 * Stays last: lock_txn_get clears only what comes before it. */
	struct lock_own inl[];
};
#define LOCK_TXN_INLINE 16
#define LOCK_TXN_SIZE (sizeof(struct lock_txn) + LOCK_TXN_INLINE * sizeof(struct lock_own))

enum {
	ST_ACQUIRES, ST_IMMEDIATE, ST_WAITS, ST_WAIT_NS, ST_AFTER_WAIT, ST_REJECTS,
	ST_PREEMPTIONS, ST_PREEMPTED_ABORTS, ST_UPGRADES, ST_TXNS, ST_FAST, ST_N
};
#define LOCK_STAT_SLOTS 32
struct lock_stat_slot {
	_Atomic uint64_t v[ST_N];
} __attribute__((aligned(CACHELINE)));

/* A bucket is one cache line: its latch and chain, and LOCK_FAST_WORDS fast
 * words (lock.c, "Fast reads").  A fast word counts the S locks held on
 * the keys that hash to it without an entry in the chain (FW_COUNT), and
 * says whether any of those keys has an entry (FW_SLOW): then every request
 * on them takes the chain.  Atomic: a fast read or release touches the word
 * and not the latch. */
#define LOCK_FAST_WORDS 6
#define FW_SLOW (1ull << 63)
#define FW_COUNT 0xffffffffull
struct lock_bucket {
	latch_t latch;
	struct lk *head;
	_Atomic uint64_t fw[LOCK_FAST_WORDS];
} __attribute__((aligned(CACHELINE)));
_Static_assert(sizeof(struct lock_bucket) == CACHELINE, "a lock bucket is one line");

struct txn_bucket {
	latch_t latch;
	lock_txn_t *head;
} __attribute__((aligned(CACHELINE)));

struct lock_table {
	struct lock_bucket *buckets;
	uint32_t mask;
	struct txn_bucket *tbuckets;
	uint32_t tmask;
	lock_notify_fn notify;
	void *arg;
	void (*user_hook)(void *arg, void *user);
	void *user_arg;
	bool fast_reads;           /* NO_WAIT reads may take the fast words */
	struct lock_stat_slot stats[LOCK_STAT_SLOTS];
};

/* Counters: a thread takes a slot of its own (the first LOCK_STAT_SLOTS - 1
 * threads that count) and adds to it without a locked instruction; later
 * threads share the last slot with atomic adds.  Readers sum the slots. */
extern atomic_uint lock_next_stat_slot;
extern _Thread_local unsigned lock_my_stat_slot;
static inline void lock_stat_add(lock_table_t *lt, int which, uint64_t v)
{
	if (unlikely(lock_my_stat_slot == UINT32_MAX)) {
		unsigned n = atomic_fetch_add(&lock_next_stat_slot, 1);
		lock_my_stat_slot = n < LOCK_STAT_SLOTS - 1 ? n : LOCK_STAT_SLOTS - 1;
	}
	_Atomic uint64_t *c = &lt->stats[lock_my_stat_slot].v[which];
	if (lock_my_stat_slot < LOCK_STAT_SLOTS - 1)   /* ours alone */
		atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + v,
				      memory_order_relaxed);
	else
		atomic_fetch_add_explicit(c, v, memory_order_relaxed);
}

/* lock_cache.c: per-thread free lists of lock entries (keys up to
 * LK_CACHE_KEY bytes; longer ones use malloc), owner nodes and txn entries.
 * lkc_alloc returns uninitialised memory (NULL if out of memory). */
enum { LKC_LK, LKC_OWN, LKC_TXN, LKC_N };
#define LK_CACHE_KEY 56
#define LK_ENTRY_SIZE 96   /* >= sizeof(struct lk) + LK_CACHE_KEY (lock.c checks) */
void *lkc_alloc(int kind);
void lkc_free(int kind, void *p);

/* lock_txn.c */
int txn_table_init(lock_table_t *lt, unsigned buckets_log2);
void txn_table_destroy(lock_table_t *lt);

static inline void txn_ref(lock_txn_t *t)
{
	atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed);
}

/* An owner node for t: an inline slot while there is one, else the cache. */
static inline struct lock_own *own_node(lock_txn_t *t)
{
	if (atomic_load_explicit(&t->inl_used, memory_order_relaxed) < LOCK_TXN_INLINE) {
		unsigned i = atomic_fetch_add_explicit(&t->inl_used, 1, memory_order_relaxed);
		if (i < LOCK_TXN_INLINE)
			return &t->inl[i];
	}
	return lkc_alloc(LKC_OWN);
}

/* o (NULL or a node of o->txn) is done with: inline slots go with the txn. */
static inline void own_free(struct lock_own *o)
{
	if (o && (uintptr_t)o - (uintptr_t)o->txn->inl >= sizeof(*o) * LOCK_TXN_INLINE)
		lkc_free(LKC_OWN, o);
}

/* lock.c: release a detached held list and waiter list (no latch held). */
void lock_release_detached(lock_table_t *lt, struct lock_own *held, struct lock_waiter *waiting);
/* lock.c: drop n fast reads (key hashes; no latch held). */
void lock_release_fast(lock_table_t *lt, const uint64_t *hashes, unsigned n);

/* Txn latch held: take t's fast reads into out (LOCK_TXN_FAST entries). */
static inline unsigned txn_take_fast(lock_txn_t *t, uint64_t *out)
{
	unsigned n = t->nfast;
	for (unsigned i = 0; i < n; i++)
		out[i] = t->fast[i];
	t->nfast = 0;
	return n;
}

#endif
