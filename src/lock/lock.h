/*
 * lock.h - the memory server's lock manager (the Lotus paper, "Two-sided RDMA
 * Striking Back for Disaggregated Memory Databases", §4):
 * S/X locks per (table, key), wait queues ordered by priority, the transaction
 * status table, and the three protocols NO_WAIT, WAIT_DIE and WOUND_WAIT.
 *
 * A priority is a 64-bit number; SMALLER IS OLDER IS MORE IMPORTANT.  Ties break
 * on the transaction id.  A transaction keeps its priority across retries.
 *
 * Transaction status (updated atomically; see lock.c for the diagram):
 *   RUNNING -> WAITING (parked in a queue) -> RUNNING (granted)
 *   RUNNING/WAITING -> PREEMPTED (wounded by an older txn; never from COMMITTING)
 *   RUNNING -> COMMITTING (lock_txn_begin_commit) -> released
 * A COMMITTING owner is only ever waited for: no protocol aborts, kills or
 * wounds a request because of it (lock.c, "the prepared-owner rule").
 *
 * Lazy notification: a waiting request is answered only when granted (or when
 * its transaction is wounded while waiting).  A preempted transaction is not told;
 * its next lock_acquire/lock_txn_begin_commit returns LOTUS_EPREEMPTED.
 *
 * Threads: every function may be called from any thread.  The notify callback
 * runs in the thread that caused the grant, with no lock-table latch held; it
 * must not call back into the lock table (queue the work instead).
 */
#ifndef LOTUS_LOCK_H
#define LOTUS_LOCK_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum lock_mode { LOCK_S = 1, LOCK_X = 2 };
enum cc_proto { CC_NO_WAIT = 0, CC_WAIT_DIE = 1, CC_WOUND_WAIT = 2 };
enum txn_status { TXN_RUNNING, TXN_WAITING, TXN_PREEMPTED, TXN_COMMITTING };

typedef struct lock_table lock_table_t;
typedef struct lock_txn lock_txn_t;

/* A parked request.  The caller owns the memory (embed it in its pending
 * request); it must stay valid until notify() has been called for it or the
 * transaction has been released. */
struct lock_waiter {
	lock_txn_t *txn;
	enum lock_mode mode;
	void *owner;                /* caller's cookie: e.g. the pending request */
	struct lock_waiter *next;   /* lock-table internal */
	void *lock;                 /* lock-table internal */
	uint64_t wait_start_ns;     /* lock-table internal */
	struct lock_waiter *txn_next; /* lock-table internal: the txn's parked list */
	uint32_t bucket;            /* lock-table internal: stable while parked */
	uint8_t cc;                 /* lock-table internal: protocol of the request */
	int result;                 /* lock-table internal: pending notify result */
};

/* result: 0 granted, LOTUS_EPREEMPTED (wounded while waiting), or
 * LOTUS_EABORTED (WAIT_DIE: an older conflicting txn got ahead of this waiter or
 * became an owner, so it must die to keep WAIT_DIE deadlock-free), -ENOMEM.
 * It may run on another thread even before lock_acquire() has returned 1.
 * Once lock_txn_release() of the waiter's txn has returned, no notify for that
 * txn's waiters is running or will run (release waits for in-flight ones, so
 * don't call it holding a lock that notify takes). */
typedef void (*lock_notify_fn)(void *arg, struct lock_waiter *w, int result);

int lock_table_create(unsigned buckets_log2, lock_notify_fn notify, void *arg, lock_table_t **out);
void lock_table_destroy(lock_table_t *lt);

/* Find or create the status-table entry for txn_id.  owner is an opaque cookie
 * (the connection) used by lock_release_owner().  Takes a reference. */
lock_txn_t *lock_txn_get(lock_table_t *lt, uint64_t txn_id, uint64_t priority, void *owner);
/* Look up without creating (NULL if unknown).  Takes a reference. */
lock_txn_t *lock_txn_find(lock_table_t *lt, uint64_t txn_id);
void lock_txn_put(lock_table_t *lt, lock_txn_t *txn);
/* One more reference to a txn the caller holds one of. */
void lock_txn_hold(lock_txn_t *txn);
enum txn_status lock_txn_status(const lock_txn_t *txn);
uint64_t lock_txn_id(const lock_txn_t *txn);
uint64_t lock_txn_priority(const lock_txn_t *txn);

/*
 * Acquire (table, key) in mode for txn under protocol cc.
 *   0                 granted now (also if already held in a covering mode;
 *                     S->X upgrade is supported)
 *   1                 parked: w is queued; notify(w, 0) comes on grant
 *   LOTUS_EABORTED    rejected (NO_WAIT conflict, WAIT_DIE younger)
 *   LOTUS_EPREEMPTED  txn had been wounded; it must abort
 * A conflict only with COMMITTING owners (prepared: they only release) parks
 * under every protocol, NO_WAIT too.  w NULL: the request never parks (where
 * it would, LOTUS_EABORTED).
 */
int lock_acquire(lock_table_t *lt, lock_txn_t *txn, uint16_t table, const void *key,
		 uint16_t klen, enum lock_mode mode, enum cc_proto cc, struct lock_waiter *w);

/* The same, with khash = lotus_key_hash(key, klen) (common/hash.h) already
 * computed by the caller (the store's hash index uses the same hash). */
int lock_acquire_hashed(lock_table_t *lt, lock_txn_t *txn, uint16_t table, const void *key,
			uint16_t klen, uint64_t khash, enum lock_mode mode, enum cc_proto cc,
			struct lock_waiter *w);

/* A NO_WAIT S request, tried as a fast read only (see "Fast reads" in
 * lock.c): 0 granted, 1 not taken (the key has a lock entry on its word, the
 * txn is not RUNNING or WAITING, its fast slots are used up, or fast reads
 * are off): then lock_acquire decides.  Needs no waiter, so a caller can try
 * it before it sets one up.  Only for a txn whose protocol is NO_WAIT: a
 * fast reader cannot be wounded, and its age is unknown.  (lock_acquire
 * reads fast only for a NO_WAIT request given a waiter, since a caller may
 * make another protocol's request NO_WAIT with no waiter to keep it from
 * parking.)  khash as for lock_acquire_hashed. */
int lock_read_fast(lock_table_t *lt, lock_txn_t *txn, uint16_t table, uint64_t khash);

/* Prefetch, for writing, the bucket a lock request on (table, khash) will
 * take: the lookup phases' hint, so that its miss overlaps the others. */
void lock_prefetch(const lock_table_t *lt, uint16_t table, uint64_t khash);

/* True if txn holds (table,key) in at least mode. */
bool lock_held(lock_table_t *lt, lock_txn_t *txn, uint16_t table, const void *key,
	       uint16_t klen, enum lock_mode mode);

/* RUNNING -> COMMITTING.  LOTUS_EPREEMPTED if the txn was wounded first; after
 * success the txn can no longer be preempted. */
int lock_txn_begin_commit(lock_table_t *lt, lock_txn_t *txn);

/* One pointer per txn for the lock table's user (the memory server keeps
 * the txn's slot reservation there).  When the txn's entry is freed (after
 * its release) or the table destroyed, a non-NULL user pointer goes to the
 * table's release hook, on whichever thread frees it.  set/take: the thread
 * that serves the txn. */
void lock_table_set_user_hook(lock_table_t *lt, void (*fn)(void *arg, void *user), void *arg);
void *lock_txn_user(const lock_txn_t *txn);
void lock_txn_set_user(lock_txn_t *txn, void *user);
/* Detach: returns the user pointer and clears it (the hook won't see it). */
void *lock_txn_take_user(lock_txn_t *txn);

/* A number the lock table's user attaches to a txn: it only grows
 * (note keeps the maximum).  The memory server keeps there the highest log
 * LSN the txn's reads depend on (commit dependencies, memserver/durable.c).
 * Any thread. */
void lock_txn_dep_note(lock_txn_t *txn, uint64_t v);
uint64_t lock_txn_dep(const lock_txn_t *txn);

/* Release only the locks txn holds in S mode (granting waiters as below);
 * its X locks stay.  For a txn past its lock point that acquires nothing
 * more (a PREPARE: memserver/handlers.c). */
void lock_txn_release_shared(lock_table_t *lt, lock_txn_t *txn);

/* Release every lock txn holds, drop its queued waiters (without notify), grant
 * the next waiters in priority order (compatible readers together), and remove
 * txn from the status table.  The caller's reference is consumed. */
void lock_txn_release(lock_table_t *lt, lock_txn_t *txn);

/* Release every transaction whose owner cookie is owner (a lost client).
 * Returns the number of transactions released.  COMMITTING txns are left to the
 * caller's commit path (they are released by it). */
int lock_release_owner(lock_table_t *lt, void *owner);
/* The COMMITTING transactions of owner (a lost client): those for which
 * keep(arg, txn_id) returns non-zero lose their owner and keep their locks
 * (a prepared txn waits for its decision); every other one is released.
 * Returns the number released.  keep runs with no lock manager latch held. */
int lock_release_owner_committing(lock_table_t *lt, void *owner,
				  int (*keep)(void *arg, uint64_t txn_id), void *arg);

/* Fast reads (lock.c): a NO_WAIT S request on a key that has no lock entry
 * is granted by counting it in its bucket's fast word, with no entry and no
 * owner node.  On by default; off, every request takes the lock entries
 * (for comparisons, and for tests of the entry path).  Set it before use. */
void lock_table_set_fast_reads(lock_table_t *lt, bool on);

struct lock_stats {
	uint64_t acquires, grants_immediate, waits, wait_ns, grants_after_wait;
	uint64_t rejects, preemptions, preempted_aborts, upgrades;
	uint64_t txns_active;
	uint64_t fast_reads;        /* S grants that took a fast word (lock.c) */
};
void lock_table_stats(lock_table_t *lt, struct lock_stats *out);
/* Number of lock entries alive (locks with an owner or a waiter), plus the
 * fast words that count a reader (one per word, whatever the keys behind it).
 * Takes every bucket latch in turn: for tests and diagnostics, not the hot
 * path. */
size_t lock_table_nlocks(lock_table_t *lt);

#endif
